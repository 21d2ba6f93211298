"""The errors the verbs raise; views map them to the spec's status codes.

A refusal's text is marked for translation where it is raised (``gettext_lazy``
or ``ngettext_lazy`` with named placeholders, their values as keyword
arguments) and put into words when it is read, in the language active then:
the page's on the agent pages (agents/pages/language.py), English on the APIs
and the widget's endpoints, whose messages are part of their wire format."""

from __future__ import annotations

from django.utils.functional import Promise


class ServiceError(Exception):
    """A request the chat's current state does not allow (answered as 400)."""

    code = "invalid_request"

    def __init__(self, message: str | Promise, **params: object) -> None:
        super().__init__(message)
        self.text, self.params = message, params

    @property
    def message(self) -> str:
        """The refusal in the active language, its placeholders filled in."""
        if not self.params:
            return str(self.text)
        # A lazy ngettext picks its plural form by the number among params.
        return str(self.text % self.params)

    def __str__(self) -> str:
        return self.message


class InvalidState(ServiceError):
    code = "invalid_state"


class NotAllowed(ServiceError):
    """The agent's role does not allow it (answered as 403)."""

    code = "access_denied"
