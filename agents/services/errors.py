"""The errors the verbs raise; views map them to the spec's status codes."""

from __future__ import annotations


class ServiceError(Exception):
    """A request the chat's current state does not allow (answered as 400)."""

    code = "invalid_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidState(ServiceError):
    code = "invalid_state"


class NotAllowed(ServiceError):
    """The agent's role does not allow it (answered as 403)."""

    code = "access_denied"
