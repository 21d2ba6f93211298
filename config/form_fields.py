"""A NUL character in a query or form field is refused before any view.

No person types one and no column keeps one (PostgreSQL's text refuses it:
a 500 where the field reached the database). Forms made with Django's form
classes refuse it themselves; the agent pages read most fields directly, so
this middleware does it once for all of them: a 400 in the error body on an
API path or for the pages' background requests, a short text otherwise.

Form fields come urlencoded or as multipart (the pages' scripts send
FormData); a multipart body is parsed here as its view would parse it (the
body's size was already limited: config/request_limits.py), and a malformed
one is Django's 400 as in a view. JSON bodies are their parsers'
(``agents.api.parsers.loads`` scrubs them).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict

from config.api_errors import error_response
from config.errors import is_api_path

MESSAGE = "a field holds a NUL character"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _holds_nul(fields: QueryDict) -> bool:
    return any(
        "\x00" in key or any("\x00" in value for value in values) for key, values in fields.lists()
    )


class RefuseNulCharacters:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        form = request.method == "POST" and request.content_type in FORM_TYPES
        if _holds_nul(request.GET) or (form and _holds_nul(request.POST)):
            if is_api_path(request.path_info) or request.headers.get("X-Requested-With"):
                return error_response(400, MESSAGE)
            return HttpResponseBadRequest(MESSAGE, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
