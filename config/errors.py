"""Errors outside the views: every API path answers with the error body.

Pages (the agent pages, the admin) keep Django's error pages. An API path
(``/api/``, ``/chat-api/``, ``/webhooks/``) never gets HTML: not for an
unknown path or a trailing slash (the catch-all ``api_not_found`` ends the
URLconf, so neither Django's debug 404 page nor APPEND_SLASH gets a say),
not for a failed CSRF check, not from the error handlers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from django.views import csrf, defaults
from django.views.decorators.csrf import csrf_exempt

from config.api_errors import error_response

API_PREFIXES = ("api", "chat-api", "webhooks", "widget")
# The catch-all's pattern: every path under the API prefixes that no view took.
API_PATHS = r"^(?:{})(?:/.*)?$".format("|".join(API_PREFIXES))


def is_api_path(path: str) -> bool:
    first = path.lstrip("/").split("/", 1)[0]
    return first in API_PREFIXES


# Headers of an error answer that still hold for the error body that replaces it.
_KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate")


class ApiErrorBodies:
    """The outermost middleware: an error answer on an API path that is not
    already JSON becomes the error body with the same status.

    The views and handlers above answer in the error body themselves; this
    catches what answers before or around them: Django's debug pages while
    DEBUG is on (a 500, a bad Host, a malformed body), a path the catch-all's
    pattern does not see (``//api/x``).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and is_api_path(request.path_info)
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            replaced = error_response(response.status_code, response.reason_phrase.lower())
            for header in _KEPT_HEADERS:
                if header in response:
                    replaced[header] = response[header]
            response = replaced
        if request.path_info.startswith("/widget/"):
            # The widget reads every answer from a site's origin, errors too.
            response["Access-Control-Allow-Origin"] = "*"
        return response


@csrf_exempt
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """404 for any method on a path under an API prefix that no view took."""
    path = request.path
    other = path[:-1] if path.endswith("/") else f"{path}/"
    try:
        near = resolve(other).func is not api_not_found
    except Resolver404:
        near = False
    hint = f"; did you mean {other}?" if near else ""
    return error_response(404, f"no API endpoint at {path}{hint}")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: the error body on API paths, Django's page elsewhere."""
    if is_api_path(request.path):
        return error_response(403, f"CSRF verification failed: {reason}")
    return csrf.csrf_failure(request, reason)


def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_path(request.path):
        return error_response(400, "bad request")
    return defaults.bad_request(request, exception)


def handler403(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_path(request.path):
        return error_response(403, "access denied")
    return defaults.permission_denied(request, exception)


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_path(request.path):
        return error_response(404, "not found")
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    # Django calls this inside its ``except``: the error is the one being handled.
    from config import database_down

    error = sys.exc_info()[1]
    if database_down.is_connection_failure(error):
        assert error is not None
        return database_down.unavailable(request, error)
    if is_api_path(request.path):
        return error_response(500, "the request could not be processed")
    return defaults.server_error(request)
