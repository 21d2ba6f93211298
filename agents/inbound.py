"""The inbound edge: what every request from outside passes before its view's own work.

A2 (``channels_api``), B2 (``bots``) and the widget's visitor actions
(``devhooks``) read a body under a size limit, parse it as strict JSON,
rate-limit with a 429 and ``Retry-After``, and take an ``Idempotency-Key``.
They do it here, the same way, and each view states only what is its own:
which limit, which key to count under, which words to refuse with::

    @csrf_exempt
    @allow_methods("POST")
    @inbound.edge
    def user_message(request, path_secret, public_id):
        chat_api = channel_for_path(...) or inbound.refuse(404, NO_CHANNEL)
        body = inbound.body_of(request, limit=settings.CHAT_API_MAX_BODY_BYTES)
        inbound.throttle(key=f"chat-api:{chat_api.channel_id}", limit=..., message=...)
        key = inbound.idempotency_key(request)
        parsed = inbound.validated(UserMessageIn, inbound.json_of(body))
        ...

A step that refuses raises ``Refused``; ``edge`` answers it with the error
body (``config.api_errors``) and, for a 429, ``Retry-After``. Nothing is
changed before a refusal: the steps only read, and the rate limit counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps
from typing import Any, Concatenate, NoReturn, ParamSpec, TypeVar

from django.http import HttpRequest, HttpResponse
from rest_framework.serializers import BaseSerializer

from agents import ratelimit
from agents.api.parsers import Unstorable, loads
from config.api_errors import error_response, not_json, validation_message

P = ParamSpec("P")
S = TypeVar("S", bound=BaseSerializer[Any])
View = Callable[Concatenate[HttpRequest, P], HttpResponse]

# The spec's limit on an Idempotency-Key (docs/chat-api.md, "Retries").
MAX_IDEMPOTENCY_KEY = 255


class Refused(Exception):
    """A request answered with the error body before its view's own work."""

    def __init__(
        self, status: int, message: str, code: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.retry_after = status, message, code, retry_after

    def response(self) -> HttpResponse:
        response = error_response(self.status, self.message, self.code)
        if self.retry_after is not None:
            response["Retry-After"] = str(max(1, math.ceil(self.retry_after)))
        return response


def refuse(status: int, message: str, code: str | None = None) -> NoReturn:
    raise Refused(status, message, code)


def edge(view: View[P]) -> View[P]:
    """Answer a ``Refused`` raised anywhere in ``view`` with its error body."""

    @wraps(view)
    def answered(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except Refused as refusal:
            return refusal.response()

    return answered


def body_of(request: HttpRequest, *, limit: int, too_large: tuple[int, str] | None = None) -> bytes:
    """The body, refused when its declared or actual size is over ``limit``.

    The declared ``Content-Length`` is checked first, so a view refuses a
    body it was told is too large without reading it (under ASGI the web
    server's own limits, ``config/request_limits.py``, have cut it off
    already). ``too_large`` is the status and words of the refusal; 413 and
    the limit by default.
    """
    status, message = too_large or (413, f"the body is larger than {limit} bytes")
    declared = str(request.META.get("CONTENT_LENGTH") or "0")
    if not declared.isascii() or not declared.isdigit():
        raise Refused(400, "Content-Length is not a number")
    if int(declared) > limit:
        raise Refused(status, message)
    body = request.body
    if len(body) > limit:
        raise Refused(status, message)
    return body


def throttle(*, key: str, limit: int, window: float, message: str) -> None:
    """Count one request under ``key``; a 429 with ``Retry-After`` when it is
    over ``limit`` requests in ``window`` seconds (no limit when ``limit`` ≤ 0)."""
    if limit > 0 and not ratelimit.admit(key=key, limit=limit, window=window):
        raise Refused(429, message, retry_after=window)


def idempotency_key(request: HttpRequest) -> str:
    """The request's ``Idempotency-Key``, ``""`` when it has none."""
    key = request.headers.get("Idempotency-Key", "").strip()
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise Refused(400, f"Idempotency-Key is longer than {MAX_IDEMPOTENCY_KEY} characters")
    return key


def json_of(body: bytes, *, refuse_unstorable: bool = False, empty: Any = None) -> Any:
    """The body as strict JSON (``agents.api.parsers.loads``), else a 400.

    Text no column can keep (a NUL, half a surrogate pair) is scrubbed, or
    with ``refuse_unstorable`` refused. An empty body is ``empty`` when one
    is given.
    """
    if not body and empty is not None:
        return empty
    try:
        return loads(body, refuse_unstorable=refuse_unstorable)
    except Unstorable as error:
        raise Refused(400, str(error)) from error
    except ValueError as error:
        raise Refused(400, not_json(error)) from error


def validated(serializer_class: type[S], data: Any) -> S:
    """``serializer_class`` bound to ``data`` and valid, else a 400 naming the fault."""
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise Refused(400, validation_message(serializer.errors))
    return serializer
