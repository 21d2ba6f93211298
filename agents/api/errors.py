"""The agent REST API's exception handler: DRF's errors in the one error body
(``config/api_errors.py``)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from agents.services import NotAllowed, ServiceError
from config.api_errors import CODES, error_body, validation_message


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ServiceError):
        refused = status.HTTP_403_FORBIDDEN if isinstance(exc, NotAllowed) else 400
        return Response(error_body(exc.code, exc.message), status=refused)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None
    headers: dict[str, str] = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))  # type: ignore[attr-defined]
    if isinstance(exc, exceptions.ValidationError):
        message = validation_message(exc.detail)
        code = "invalid_request"
    else:
        message = str(exc.detail)
        code = CODES.get(exc.status_code, str(exc.default_code))
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            code = "invalid_client"
    return Response(error_body(code, message), status=exc.status_code, headers=headers)
