"""The visitor's live stream, ``GET /visitor/<token>/stream`` (docs/live.md):
what the widget hears of its own chat, served by the agents' hub
(agents/streams.py) under the limits of open streams per visitor and per
address."""

from __future__ import annotations

import math
import uuid

from django.conf import settings
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from agents.models import Client
from agents.streams import (
    Listener,
    in_thread,
    lease_seconds,
    set_client_check,
    stream_response,
    take_slots,
)
from config.api_errors import error_response, method_not_allowed
from config.signin import sender
from devhooks.widget.tokens import client_for_visitor_token


@csrf_exempt  # the token in the path is the credential; GET only
async def visitor_stream(request: HttpRequest, token: str) -> HttpResponse | StreamingHttpResponse:
    """``GET /visitor/<token>/stream``: the visitor's own chat — agent and bot
    messages, the agent's typing, accepted, finished. The token is in the
    path because a browser's EventSource sends no headers; logs redact it."""
    if request.method != "GET":
        return method_not_allowed("GET")
    client = await in_thread(lambda: client_for_visitor_token(token))
    if client is None:
        return error_response(404, "no visitor with this token")
    limits = visitor_limits(client, request)
    holder = uuid.uuid4().hex
    response: HttpResponse | StreamingHttpResponse
    if client.blacklisted_at is not None:
        response = error_response(403, "this visitor may not hold a stream")
    elif not await take_slots(holder, limits):
        response = error_response(429, "too many open streams for this visitor or address")
        response["Retry-After"] = str(math.ceil(lease_seconds()))
    else:
        listener = Listener(
            client_id=client.pk,
            client_credential=client.visitor_key_hash or "",
            holder=holder,
            lease_keys=tuple(limits),
        )
        response = stream_response(listener, request)
    response["Access-Control-Allow-Origin"] = "*"  # the widget runs on the site's origin
    return response


def visitor_limits(client: Client, request: HttpRequest) -> dict[str, int]:
    """The limits a visitor's stream counts under: its token, and its
    address (an IPv6 /64), whatever visitor it claims to be."""
    return {
        f"stream-visitor:{client.pk}": settings.LIVE_STREAMS_PER_VISITOR,
        f"stream-address:{sender(request)}": settings.LIVE_STREAMS_PER_ADDRESS,
    }


def visitors_holding(pairs: set[tuple[int, str]]) -> set[tuple[int, str]]:
    """Of (client id, token hash) pairs, the visitors' streams that hold: the
    client row still has that token and is not blacklisted, so an erasure
    that deletes the row or its token ends the stream too."""
    found = Client.objects.filter(
        pk__any_of={client_id for client_id, _ in pairs}, blacklisted_at__isnull=True
    ).values_list("pk", "visitor_key_hash")
    return {(pk, key_hash) for pk, key_hash in found if key_hash and (pk, key_hash) in pairs}


def connect() -> None:
    set_client_check(visitors_holding)
