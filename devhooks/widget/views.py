"""The website widget's HTTP side (docs/widget.md): its script, and the JSON
endpoints behind ``window.svc_api`` that a visitor's browser calls from any
site's origin.

Requests are CORS "simple requests" (a JSON body sent as ``text/plain``, no
custom header, no cookie), so a browser sends no preflight; a preflight that
comes anyway is answered. The visitor is the token in the body; a visitor
reads and changes only its own chat.
"""

from __future__ import annotations

import gzip
import logging
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from agents import addresses, inbound
from agents.models import Client
from agents.streams import newest_event_id
from config.api_errors import error_response, method_not_allowed, not_json
from config.signin import client_address, sender
from devhooks.models import WidgetChannel
from devhooks.widget import languages, selectors, serializers
from devhooks.widget import services as widgets
from devhooks.widget.services import WidgetError
from devhooks.widget.tokens import visitor_rate_key

logger = logging.getLogger(__name__)

SCRIPT = Path(settings.BASE_DIR) / "static" / "widget" / "widget.js"
MAX_BODY = 64 * 1024
TOO_BIG = "send a JSON object of at most 64 KB"
TOO_MANY = "too many requests from this visitor; wait a minute"
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type",
    "Access-Control-Max-Age": "86400",
}


@cache
def _script_bytes(modified: float) -> tuple[bytes, bytes]:
    """The script as it is and gzipped, read again when the file changes."""
    text = SCRIPT.read_bytes()
    return text, gzip.compress(text, compresslevel=9, mtime=0)


def script(request: HttpRequest, widget_id: str) -> HttpResponse:
    """``/widget/<widget_id>.js``: the same script for every widget (it reads
    its widget id from its own URL), gzipped for browsers that take it (all
    of them), cached by browsers for five minutes."""
    if request.method not in ("GET", "HEAD"):
        return _cors(error_response(405, "method not allowed"))
    if selectors.widget_for(widget_id) is None:
        response = HttpResponse("/* no such widget */", status=404, content_type="text/javascript")
        return _cors(response)
    plain, packed = _script_bytes(SCRIPT.stat().st_mtime)
    response = _gzipped(request, plain, packed, "text/javascript")
    response["Cache-Control"] = "public, max-age=300"
    return _cors(response)


def catalogue(request: HttpRequest, language: str) -> HttpResponse:
    """``/widget/lang/<language>.json``: one language's strings (docs/translating.md),
    gzipped. Asked for with the version the session's config gives
    (``?v=``), it is cached for a year: a new version is a new URL. Without
    it, for five minutes; either way the version is its ETag."""
    if request.method not in ("GET", "HEAD"):
        return _cors(error_response(405, "method not allowed"))
    found = languages.catalogue(language)
    if found is None:
        return _cors(error_response(404, "the widget speaks no such language"))
    etag = f'"{found.version}"'
    if etag in request.headers.get("If-None-Match", ""):
        response = HttpResponse(status=304)
    else:
        response = _gzipped(request, found.plain, found.gzipped, "application/json")
    response["ETag"] = etag
    fixed = request.GET.get("v") == found.version
    response["Cache-Control"] = (
        "public, max-age=31536000, immutable" if fixed else "public, max-age=300"
    )
    return _cors(response)


def _gzipped(request: HttpRequest, plain: bytes, packed: bytes, kind: str) -> HttpResponse:
    """``plain``, or ``packed`` (its gzip) for a browser that takes it."""
    gzipped = "gzip" in request.headers.get("Accept-Encoding", "").lower()
    response = HttpResponse(packed if gzipped else plain, content_type=f"{kind}; charset=utf-8")
    if gzipped:
        response["Content-Encoding"] = "gzip"
    response["Vary"] = "Accept-Encoding"
    return response


def _cors(response: HttpResponse) -> HttpResponse:
    for header, value in CORS.items():
        response[header] = value
    return response


class Visit:
    """One request of a visitor's browser: the widget, what its action read of
    the body, and the visitor its token names (made on demand by ``client()``)."""

    def __init__(
        self,
        request: HttpRequest,
        widget: WidgetChannel,
        visitor: Client | None,
        read: serializers.VisitIn,
    ):
        self.request, self.widget, self.visitor = request, widget, visitor
        self.data: dict[str, Any] = read.validated_data
        self.own = read.own()
        self.new_token = ""
        self.events_before = 0

    def session(self) -> dict[str, Any]:
        meta = {
            "ip_addr": client_address(self.request),
            "user_agent": self.request.headers.get("User-Agent", ""),
        }
        return widgets.session_data(meta, self.data["landing_url"], self.data["page"])

    def client(self) -> Client:
        """The visitor, created on first need (with a new token for the browser)."""
        if self.visitor is None:
            inbound.throttle(
                key=f"widget-new:{sender(self.request)}",
                limit=settings.WIDGET_NEW_VISITORS_PER_ADDRESS,
                window=settings.WIDGET_RATE_WINDOW,
                message=TOO_MANY,
            )
            # What the new visitor's stream replays from: everything of its own.
            self.events_before = newest_event_id()
            self.visitor, self.new_token = widgets.new_visitor(self.widget, self.session())
        return self.visitor

    def existing(self) -> Client:
        if self.visitor is None:
            raise WidgetError("no visitor with this token: send a message first")
        return self.visitor


Answer = Callable[[Visit], dict[str, Any]]


def _session(visit: Visit) -> dict[str, Any]:
    """On each page load: the widget's settings, and for a returning visitor
    its chat and history (and what this page is)."""
    answer: dict[str, Any] = {"config": selectors.config_of(visit.widget, visit.visitor)}
    if visit.visitor is not None:
        widgets.update_session(visit.visitor, visit.session())
        answer["visitor"] = selectors.visitor_state(visit.visitor)
    else:
        answer["visitor"] = None
    return answer


def _visitor(visit: Visit) -> dict[str, Any]:
    return selectors.visitor_state(visit.client())


def _message(visit: Visit) -> dict[str, Any]:
    data = visit.data
    known = visit.visitor is not None  # read under its lock (LOCKING_ACTIONS)
    message = widgets.send_message(
        visit.widget,
        visit.client(),
        data["text"],
        department_id=data["department_id"],
        invitation=data["invitation"],
        consent_version=data["consent_version"],
        language=data["language"],
        client_locked=known,
        new_client=not known,
    )
    return {
        "message_id": message.pk,
        "chat_id": message.chat_id,
        "state": message.chat.state,
        "created": message.created.isoformat(),  # the time the widget shows on it
    }


def _typing(visit: Visit) -> dict[str, Any]:
    if visit.visitor is not None:
        widgets.set_typing(visit.visitor, visit.data["typing"])
    return {}


def _contact(visit: Visit) -> dict[str, Any]:
    asked = timezone.now()
    widgets.set_contact(visit.client(), visit.own)
    email = visit.data["email"]
    sent = addresses.link_sent_since(client=visit.client(), address=email, since=asked)
    # Beyond the spec's table: whether a link to confirm the address was mailed.
    return {"contact": selectors.contact_info(visit.client()), "email_link_sent": sent}


def _custom_data(visit: Visit) -> dict[str, Any]:
    return {"fields": widgets.set_custom_data(visit.client(), visit.data["fields"])}


def _user_token(visit: Visit) -> dict[str, Any]:
    return {"user_token": widgets.set_user_token(visit.client(), visit.data["user_token"])}


def _page(visit: Visit) -> dict[str, Any]:
    page = visit.data["viewed"]
    if visit.visitor is None:  # a page view alone makes no visitor
        return {"page": page}
    return {"page": widgets.set_page(visit.visitor, page)}


def _rate(visit: Visit) -> dict[str, Any]:
    chat = widgets.rate(visit.existing(), visit.data["rating"], visit.data.get("comment", ""))
    return {"rating": chat.rating, "comment": chat.rating_comment}


def _call(visit: Visit) -> dict[str, Any]:
    widgets.start_call(visit.widget, visit.client(), visit.data["phone"])
    return {}


def _queue(visit: Visit) -> dict[str, Any]:
    """The visitor's own chat's place in the queue; a token is the only way
    to name a chat here."""
    return {"queue": selectors.queue_line(visit.existing())}


def _callback(visit: Visit) -> dict[str, Any]:
    return {"reason": selectors.callback_reason(visit.widget, visit.visitor)}


def _offline(visit: Visit) -> dict[str, Any]:
    widgets.send_offline_message(visit.widget, visit.client(), visit.own)
    return {}


# The actions whose verb locks the visitor's row next (a message, as every
# client message does): it is read under its lock, once.
LOCKING_ACTIONS = frozenset({"message"})

# Each action: the serializer that reads its body, and what it does and answers.
ACTIONS: dict[str, tuple[type[serializers.VisitIn], Answer]] = {
    "session": (serializers.VisitIn, _session),
    "visitor": (serializers.VisitIn, _visitor),
    "message": (serializers.MessageIn, _message),
    "typing": (serializers.TypingIn, _typing),
    "contact": (serializers.ContactIn, _contact),
    "custom_data": (serializers.CustomDataIn, _custom_data),
    "user_token": (serializers.UserTokenIn, _user_token),
    "page": (serializers.PageIn, _page),
    "rate": (serializers.RateIn, _rate),
    "call": (serializers.CallIn, _call),
    "callback": (serializers.VisitIn, _callback),
    "queue": (serializers.VisitIn, _queue),
    "offline": (serializers.OfflineIn, _offline),
}


@csrf_exempt  # no cookie is read: the visitor's token in the body is the credential
def visitor_api(request: HttpRequest, widget_id: str, action: str) -> HttpResponse:
    """``POST /widget/<widget_id>/v1/<action>``: one verb of the visitor's browser,
    every answer readable from any site's origin."""
    return _cors(_visitor_action(request, widget_id, action))


@inbound.edge
def _visitor_action(request: HttpRequest, widget_id: str, action: str) -> HttpResponse:
    if request.method == "OPTIONS":
        return HttpResponse(status=204)
    if request.method != "POST":
        return method_not_allowed("POST", "OPTIONS")
    action_of = ACTIONS.get(action)
    widget = selectors.widget_for(widget_id)
    if action_of is None or widget is None:
        inbound.refuse(404, "no such widget or action")
    raw = inbound.body_of(request, limit=MAX_BODY, too_large=(400, TOO_BIG))
    # The widget's text is shown to agents as typed: a NUL or half a
    # surrogate pair is refused, not scrubbed.
    body = inbound.json_of(raw, refuse_unstorable=True, empty={})
    if not isinstance(body, dict):
        inbound.refuse(400, not_json("send a JSON object"))
    inbound.throttle(
        key=f"widget-address:{sender(request)}",
        limit=settings.WIDGET_ADDRESS_RATE_LIMIT,
        window=settings.WIDGET_RATE_WINDOW,
        message=TOO_MANY,
    )
    token = body.get("token")
    if selectors.could_be_visitor_token(token):
        # Counted by the token, before the visitor is read: a visitor is
        # read once, in the action's transaction (under its lock for a message).
        inbound.throttle(
            key=f"widget:{visitor_rate_key(token)}",
            limit=settings.WIDGET_RATE_LIMIT,
            window=settings.WIDGET_RATE_WINDOW,
            message=TOO_MANY,
        )
    reader, answer_for = action_of
    read = reader(data=body)
    if not read.is_valid():
        inbound.refuse(400, read.refusal())
    try:
        with transaction.atomic():
            visitor = selectors.visitor_for(widget, token, lock=action in LOCKING_ACTIONS)
            visit = Visit(request, widget, visitor, read)
            answer = answer_for(visit)
    except WidgetError as error:  # rolled back: a visitor made for it too
        inbound.refuse(400, error.message, error.code)
    answer = {"result": "ok", **answer}
    if visit.new_token:
        answer["token"] = visit.new_token
        answer["last_event_id"] = visit.events_before
    return JsonResponse(answer)
