"""B2: the endpoint a bot provider POSTs its events to (docs/bot-api.md).

The URL carries the credential (``/webhooks/{provider_id}/<token>``); there is
no session and no CSRF token, so the view is CSRF-exempt. Every answer that
is not ``{"result": "ok"}`` is the error body with the spec's status codes.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from agents.api.parsers import loads
from agents.ratelimit import admit
from bots import selectors, services
from bots.serializers import BotEventIn
from config.api_errors import allow_methods, error_response, not_json, validation_message

ERRORS: dict[type[services.BotError], tuple[int, str]] = {
    services.UnknownBot: (401, "invalid_client"),
    services.BotSwitchedOff: (403, "unauthorized_client"),
    services.ChatNotFound: (404, "not_found"),
    services.ChatNotWithBot: (403, "access_denied"),
    services.InvalidBotRequest: (400, "invalid_request"),
}


def _too_many(provider_pk: int) -> bool:
    limit = settings.BOT_API_RATE_LIMIT_PER_SECOND
    return limit > 0 and not admit(key=f"bot-api:{provider_pk}", limit=limit, window=1.0)


@csrf_exempt
@allow_methods("POST")
def bot_event(request: HttpRequest, provider_id: str, token: str) -> HttpResponse:
    """B2: BOT_MESSAGE, INVITE_AGENT or CLIENT_INFO from the provider."""
    attachments = selectors.attachments_for_path(provider_id=provider_id, token=token)
    if not attachments:
        return error_response(401, "unknown provider id and token", "invalid_client")
    limit = settings.BOT_API_MAX_BODY_BYTES
    if len(request.body) > limit:
        return error_response(413, f"the body is larger than {limit} bytes")
    if _too_many(attachments[0].provider_id):
        response = error_response(429, "too many requests from this provider; retry shortly")
        response["Retry-After"] = "1"
        return response
    key = request.headers.get("Idempotency-Key", "").strip()
    if len(key) > 255:
        return error_response(400, "Idempotency-Key is longer than 255 characters")
    try:
        parsed = BotEventIn(data=loads(request.body))
    except ValueError as error:
        return error_response(400, not_json(error))
    if not parsed.is_valid():
        return error_response(400, validation_message(parsed.errors))
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
    return JsonResponse({"result": "ok"})
