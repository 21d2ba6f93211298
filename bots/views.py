"""B2: the endpoint a bot provider POSTs its events to (docs/bot-api.md).

The URL carries the credential (``/webhooks/{provider_id}/<token>``); there is
no session and no CSRF token, so the view is CSRF-exempt. Every answer that
is not ``{"result": "ok"}`` is the error body with the spec's status codes.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from agents import inbound
from bots import selectors, services
from bots.serializers import BotEventIn
from config.api_errors import allow_methods, error_response

OK = {"result": "ok"}
ERRORS: dict[type[services.BotError], tuple[int, str]] = {
    services.UnknownBot: (401, "invalid_client"),
    services.BotSwitchedOff: (403, "unauthorized_client"),
    services.ChatNotFound: (404, "not_found"),
    services.ChatNotWithBot: (403, "access_denied"),
    services.InvalidBotRequest: (400, "invalid_request"),
}


@csrf_exempt
@allow_methods("POST")
@inbound.edge
def bot_event(request: HttpRequest, provider_id: str, token: str) -> HttpResponse:
    """B2: BOT_MESSAGE, INVITE_AGENT or CLIENT_INFO from the provider."""
    attachments = selectors.attachments_for_path(provider_id=provider_id, token=token)
    if not attachments:
        inbound.refuse(401, "unknown provider id and token", "invalid_client")
    provider_pk = attachments[0].provider_id
    body = inbound.body_of(request, limit=settings.BOT_API_MAX_BODY_BYTES)
    inbound.throttle(
        key=f"bot-api:{provider_pk}",
        limit=settings.BOT_API_RATE_LIMIT_PER_SECOND,
        window=1.0,
        message="too many requests from this provider; retry shortly",
    )
    key = inbound.idempotency_key(request)
    if key and selectors.idempotency_key_seen(provider_pk=provider_pk, key=key):
        return JsonResponse(OK)  # a retry of a request acted on: answered as the first
    parsed = inbound.validated(BotEventIn, inbound.json_of(body))
    data = parsed.validated_data
    event = services.BotRequest(
        event=data["event"],
        chat_id=data["chat_id"],
        client_id=data.get("client_id"),
        content=data["message"]["content"] if "message" in data else None,
        contact=parsed.contact(),
    )
    try:
        services.receive_event(attachments=attachments, request=event, idempotency_key=key)
    except services.BotError as error:
        status, code = ERRORS.get(type(error), (400, "invalid_request"))
        return error_response(status, error.message, code)
    return JsonResponse(OK)
