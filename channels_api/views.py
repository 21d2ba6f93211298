"""A1 and A2: the per-channel endpoint the integrator calls.

The endpoint URL is the credential (spec, Authentication 1); there is no
session and no CSRF token, so the views are CSRF-exempt, and every answer
that is not A1's integer or A2's result is the error body. Status codes live
here and nowhere else in the app: a verb's refusal is a ``ChatApiError``,
answered as ``REFUSALS`` says.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from agents import inbound
from channels_api.selectors import channel_for_path, channel_status, idempotency_key_seen
from channels_api.serializers import UserMessageIn
from channels_api.services import (
    ChannelSwitchedOff,
    ChatApiError,
    receive_user_message,
)
from config.api_errors import allow_methods, error_response

logger = logging.getLogger(__name__)

NO_CHANNEL = "no channel with that identifier"
OK = {"result": "ok"}
# Status of each refusal (docs/chat-api.md, "Answers"); the code is the
# status's own (config.api_errors.CODES), the message the error's.
REFUSALS: dict[type[ChatApiError], int] = {
    ChannelSwitchedOff: 403,
}


@csrf_exempt  # so a POST is answered 405 with the error body, not a CSRF page
@allow_methods("GET", "HEAD")
def status(request: HttpRequest, path_secret: str, public_id: str) -> HttpResponse:
    """A1: the bare integer 1 (chat available) or 0."""
    chat_api = channel_for_path(path_secret=path_secret, public_id=public_id)
    if chat_api is None:
        return error_response(404, NO_CHANNEL)
    return HttpResponse(str(channel_status(chat_api=chat_api)), content_type="application/json")


@csrf_exempt
@allow_methods("POST")
@inbound.edge
def user_message(request: HttpRequest, path_secret: str, public_id: str) -> HttpResponse:
    """A2: a user message, or a typein / typeout, from the integrator."""
    chat_api = channel_for_path(path_secret=path_secret, public_id=public_id)
    if chat_api is None:
        inbound.refuse(404, NO_CHANNEL)
    body = inbound.body_of(request, limit=settings.CHAT_API_MAX_BODY_BYTES)
    inbound.throttle(
        key=f"chat-api:{chat_api.channel_id}",
        limit=settings.CHAT_API_RATE_LIMIT_PER_SECOND,
        window=1.0,
        message="too many requests for this channel; retry shortly",
    )
    key = inbound.idempotency_key(request)
    if key and idempotency_key_seen(chat_api=chat_api, key=key):
        return JsonResponse(OK)  # a retry of a request acted on: answered as the first
    parsed = inbound.validated(UserMessageIn, inbound.json_of(body))
    try:
        receive_user_message(chat_api=chat_api, message=parsed.user_message(), idempotency_key=key)
    except ChatApiError as error:
        return error_response(REFUSALS[type(error)], error.message)
    return JsonResponse(OK)


@csrf_exempt
@allow_methods("POST")
def demo_integrator(request: HttpRequest, public_id: str) -> HttpResponse:
    """A stand-in integrator for the demo channel (DEBUG only): accepts A3 and logs it."""
    logger.info("demo_integrator.received channel=%s body=%s", public_id, request.body[:500])
    return JsonResponse(OK)
