"""The error body of every API in the project: ``{"error": {"code", "message"}}``.

Imports nothing of the project, so every app and the ASGI wrapper that runs
before Django is set up (``config/request_limits.py``) can use it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Concatenate, ParamSpec

from django.http import HttpRequest, HttpResponse, JsonResponse

P = ParamSpec("P")


def not_json(why: object) -> str:
    """The one wording, in every API, for a body that is not the JSON asked for."""
    return f"the body is not valid JSON: {why}"


CODES = {
    400: "invalid_request",
    401: "unauthorized_client",
    403: "access_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "too_many_requests",
    500: "server_error",
    503: "service_unavailable",
}


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": code, "message": message}}


def error_response(status_code: int, message: str, code: str | None = None) -> JsonResponse:
    return JsonResponse(
        error_body(code or CODES.get(status_code, "error"), message), status=status_code
    )


def method_not_allowed(*allowed: str) -> JsonResponse:
    """405 with the error body, and the methods that are allowed in ``Allow``."""
    response = error_response(405, "method not allowed")
    response["Allow"] = ", ".join(allowed)
    return response


View = Callable[Concatenate[HttpRequest, P], HttpResponse]


def allow_methods(*allowed: str) -> Callable[[View[P]], View[P]]:
    """A plain view answers any other method with ``method_not_allowed``."""

    def decorate(view: View[P]) -> View[P]:
        @wraps(view)
        def checked(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
            if request.method not in allowed:
                return method_not_allowed(*allowed)
            return view(request, *args, **kwargs)

        return checked

    return decorate


def validation_message(detail: Any) -> str:
    """One readable sentence for a serializer's errors (``sender.id is required``)."""
    return _first_message(detail)


def _first_message(detail: Any, path: str = "") -> str:
    """The first validation message, named by its field path (``sender.id is required``)."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = path if key == "non_field_errors" else f"{path}.{key}" if path else str(key)
            return _first_message(value, name)
    if isinstance(detail, list) and detail:
        return _first_message(detail[0], path)
    text = str(detail)
    if path and text.startswith("This field"):
        return f"{path}{text[len('This field') :]}".replace(" is required.", " is required")
    return f"{path}: {text}" if path else text
