"""The website widget's verbs: widget channels, and what a visitor's browser
changes through ``window.svc_api`` (docs/widget.md); its reads are in
devhooks/widget/selectors.py.

A visitor is a ``Client`` of the widget's channel, created the first time the
browser needs one (a message, a contact form, ``getVisitorNumber``…), and
known afterwards by an unguessable token the browser keeps. Verbs raise
``WidgetError`` with the message the page is shown; they know no HTTP.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable, Mapping
from datetime import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q

from agents import services as chats
from agents.api.parsers import id_from
from agents.content import Content
from agents.models import Agent, CallbackSettings, Channel, Chat, Client, Department, Message
from config.text import CLIENT_TEXT_LIMIT, TEXT_LIMIT
from devhooks.models import IntegrationSettings, WidgetChannel
from devhooks.visitor_data import UTM_FIELDS, clean_custom_data
from devhooks.widget import geoip
from devhooks.widget.selectors import current_chat
from devhooks.widget.tokens import issue_visitor_token

logger = logging.getLogger(__name__)

MAX_MESSAGE = CLIENT_TEXT_LIMIT  # as a Chat API message: the rest is cut (spec, Limits)
MAX_CUSTOM_FIELDS = 10
MAX_USER_TOKEN = 255
CONTACT_LIMITS = {"name": 255, "email": 255, "phone": 100, "description": TEXT_LIMIT}


class WidgetError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- widget channels (operators) ---------------------------------------------


# The pre-chat form's fields, as the visitor's refusal names them.
PRECHAT_FIELDS = {"name": "name", "email": "e-mail address", "phone": "phone number"}


@transaction.atomic
def create_widget_channel(
    *,
    name: str,
    agent_emails: Iterable[str] = (),
    callback: bool = False,
    title: str = "",
    departments: Iterable[Department] = (),
    waiting_text: str = "",
    prechat: Mapping[str, str] | None = None,
) -> WidgetChannel:
    """A widget channel with its agents; ``callback`` takes callback requests
    every day, all day (the admin narrows the hours)."""
    name, title = name.strip(), title.strip()
    if not name or len(name) > 200:
        raise WidgetError("a widget channel needs a name of 1 to 200 characters")
    if len(title) > 100:
        raise WidgetError("the title holds at most 100 characters")
    waiting_text = waiting_text.strip()
    if len(waiting_text) > 300:
        raise WidgetError("the waiting text holds at most 300 characters")
    asks = {f"prechat_{field}": ask for field, ask in _prechat_asks(prechat or {}).items()}
    emails = [email.strip().lower() for email in agent_emails]
    any_of = Q(pk__in=[])
    for email in emails:
        any_of |= Q(email__iexact=email)
    found = {agent.email.lower(): agent for agent in Agent.objects.filter(any_of)}
    missing = [email for email in emails if email not in found]
    if missing:
        raise WidgetError(f"no agent with e-mail {missing[0]!r}")
    channel = Channel.objects.create(name=name, kind=Channel.Kind.WIDGET)
    channel.agents.set(found.values())
    widget = WidgetChannel.objects.create(
        channel=channel, title=title or "Chat with us", waiting_text=waiting_text, **asks
    )
    widget.departments.set(departments)
    CallbackSettings.objects.create(
        channel=channel,
        enabled=callback,
        working_days=[1, 2, 3, 4, 5, 6, 7],
        opens_at=time(0, 0),
        closes_at=time(23, 59, 59, 999999),
    )
    return widget


def _prechat_asks(prechat: Mapping[str, str]) -> dict[str, str]:
    for field, ask in prechat.items():
        if field not in PRECHAT_FIELDS:
            raise WidgetError(
                f"the pre-chat form asks for {', '.join(PRECHAT_FIELDS)}, not {field!r}"
            )
        if ask not in WidgetChannel.Ask.values:
            raise WidgetError(
                f"a pre-chat field is {', '.join(WidgetChannel.Ask.values)}, not {ask!r}"
            )
    return dict(prechat)


# --- visitors -----------------------------------------------------------------


def session_data(request_meta: Mapping[str, Any], landing_url: Any, page: Any) -> dict[str, Any]:
    """The visitor's session as webhooks send it: the page, UTM of the landing
    URL, the address, the browser, and geoip when a database is configured."""
    ip_addr = str(request_meta.get("ip_addr", ""))
    data: dict[str, Any] = {
        "ip_addr": ip_addr,
        "user_agent": str(request_meta.get("user_agent", ""))[:500],
        "geoip": geoip.lookup(ip_addr),
    }
    data.update(utm_of(landing_url))
    cleaned_page = clean_page(page)
    if cleaned_page:
        data["page"] = cleaned_page
    return data


def utm_of(url: Any) -> dict[str, Any]:
    """``utm`` (the utm_ parameters as they were in the URL) and ``utm_json``."""
    if not isinstance(url, str) or len(url) > 2000:
        return {}
    try:
        query = urlsplit(url).query
    except ValueError:
        return {}
    pairs = [(key, value) for key, value in parse_qsl(query) if key.startswith("utm_")]
    # %00 decodes to a NUL, which no column keeps.
    found = {
        key[4:]: value.replace("\x00", "")[:200] for key, value in pairs if key[4:] in UTM_FIELDS
    }
    if not found:
        return {}
    utm = "&".join(f"utm_{key}={value}" for key, value in found.items())
    return {"utm": utm, "utm_json": {field: found.get(field, "") for field in UTM_FIELDS}}


def clean_page(page: Any) -> dict[str, str]:
    if not isinstance(page, Mapping):
        return {}
    url, title = page.get("url"), page.get("title")
    cleaned = {
        "url": url[:1000] if isinstance(url, str) else "",
        "title": title[:500] if isinstance(title, str) else "",
    }
    return cleaned if any(cleaned.values()) else {}


@transaction.atomic
def new_visitor(widget: WidgetChannel, session: Mapping[str, Any]) -> tuple[Client, str]:
    """A new visitor (with the next visitor number) and its browser's token."""
    client = chats.get_or_create_client(
        channel=widget.channel, external_id=f"w-{secrets.token_urlsafe(12)}"
    )
    client.visitor_data = dict(session)
    client.save(update_fields=["visitor_data"])
    return client, issue_visitor_token(client=client)


@transaction.atomic
def update_session(client: Client, session: Mapping[str, Any]) -> None:
    """A returning visitor on a new page: keep what was learnt, take what is new
    (UTM of an earlier landing stays unless this one has its own)."""
    client = Client.objects.select_for_update().get(pk=client.pk)
    data = dict(client.visitor_data or {})
    data.update({key: value for key, value in session.items() if value})
    if data != client.visitor_data:
        client.visitor_data = data
        client.save(update_fields=["visitor_data"])


def _string(fields: Mapping[str, Any], name: str) -> str:
    value = fields.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WidgetError(f"{name} must be a string")
    if "\x00" in value:
        raise WidgetError(f"{name} holds a NUL character")
    return value.strip()


@transaction.atomic
def set_contact(client: Client, fields: Mapping[str, Any]) -> list[str]:
    """``setContactInfo`` and the contact form: as if the visitor had typed it
    (a ``chat_updated`` webhook when a chat is open)."""
    contact = {name: _string(fields, name) for name in CONTACT_LIMITS}
    for name, limit in CONTACT_LIMITS.items():
        if len(contact[name]) > limit:
            raise WidgetError(f"{name} is longer than {limit} characters")
    if contact["email"]:
        try:
            validate_email(contact["email"])
        except ValidationError:
            raise WidgetError(f"{contact['email']!r} is not a valid e-mail address") from None
    if contact["phone"]:
        try:
            contact["phone"] = chats.normalise_phone(contact["phone"])
        except chats.ServiceError as error:
            raise WidgetError(error.message) from None
    return chats.update_client_contact(client=client, contact=contact)


@transaction.atomic
def set_custom_data(client: Client, fields: Any) -> list[dict[str, str]]:
    """``setCustomData``: fields for the agent's side panel, live; content is
    shown as text, links only where Safe URL allows them."""
    if not isinstance(fields, list):
        raise WidgetError("Custom data must be array.")
    if len(fields) > MAX_CUSTOM_FIELDS:
        raise WidgetError(f"Custom data holds at most {MAX_CUSTOM_FIELDS} fields.")
    cleaned = clean_custom_data(fields, IntegrationSettings.load())
    _set_visitor_data(client, custom_data=cleaned)
    return cleaned


@transaction.atomic
def set_user_token(client: Client, token: Any) -> str:
    """``setUserToken``: an id sent as ``user_token`` in webhooks, never shown."""
    if not isinstance(token, (str, int)) or isinstance(token, bool):
        raise WidgetError("the token must be a string")
    token = str(token).strip()
    if not token or len(token) > MAX_USER_TOKEN or not token.isprintable():
        raise WidgetError(f"the token must be 1 to {MAX_USER_TOKEN} printable characters")
    Client.objects.filter(pk=client.pk).update(user_token=token)
    client.user_token = token
    return token


@transaction.atomic
def set_page(client: Client, page: Any) -> dict[str, str]:
    """``sendPageTitle`` and each page the visitor opens: the page agents see."""
    cleaned = clean_page(page)
    if not cleaned:
        raise WidgetError("give the page's url or title")
    _set_visitor_data(client, page=cleaned)
    return cleaned


def _set_visitor_data(client: Client, **values: Any) -> None:
    locked = Client.objects.select_for_update().get(pk=client.pk)
    data = dict(locked.visitor_data or {})
    if all(data.get(key) == value for key, value in values.items()):
        return
    data.update(values)
    locked.visitor_data = client.visitor_data = data
    locked.save(update_fields=["visitor_data"])
    chat = client.chats.filter(state__in=Chat.OPEN_STATES).first()
    if chat is not None:
        chats.show_visitor_data(chat=chat)


def _department(widget: WidgetChannel, department_id: Any) -> Department | None:
    if department_id in (None, "", 0):
        return None
    is_number = isinstance(department_id, int) and not isinstance(department_id, bool)
    digits = isinstance(department_id, str) and department_id.isascii() and department_id.isdigit()
    if not (is_number or digits):
        raise WidgetError("department_id must be a number")
    # One the widget does not offer (any more), or no row could have: the chat
    # opens without one rather than the visitor being kept from writing.
    pk = id_from(str(department_id))
    return None if pk is None else widget.departments.filter(pk=pk).first()


def _prechat_missing(widget: WidgetChannel, client: Client) -> str:
    """The first field the pre-chat form requires that the visitor has not
    given, when its next message would open a chat; else ""."""
    known = {"name": client.name, "email": client.email, "phone": client.phone}
    required = [f for f, ask in widget.prechat.items() if ask == WidgetChannel.Ask.REQUIRED]
    missing = [field for field in required if not known[field].strip()]
    if not missing:  # most channels: no question, no query
        return ""
    chat = current_chat(client)
    return "" if chat is not None and chat.state != Chat.State.FINISHED else missing[0]


@transaction.atomic
def send_message(
    widget: WidgetChannel,
    client: Client,
    text: Any,
    *,
    department_id: Any = None,
    invitation: Any = "",
) -> Message:
    """The visitor's message; the first one opens a chat (with the bot when the
    channel has one). An invitation the visitor answers is kept for agents."""
    if not isinstance(text, str) or not text.strip():
        raise WidgetError("write a message")
    if "\x00" in text:
        raise WidgetError("the message holds a NUL character")
    department = _department(widget, department_id)
    missing = _prechat_missing(widget, client)
    if missing:
        raise WidgetError(f"give your {PRECHAT_FIELDS[missing]} before the first message")
    if isinstance(invitation, str) and invitation.strip():
        chats.update_client_contact(
            client=client, contact={"invite_text": invitation.strip()[:1000]}
        )
    return chats.post_client_message(
        client=client, content=Content("text", text[:MAX_MESSAGE], {}), department=department
    )


def set_typing(client: Client, typing: Any) -> None:
    chat = client.chats.filter(state__in=Chat.OPEN_STATES).first()
    if chat is not None:
        chats.set_client_typing(chat=chat, typing=typing is True)


def rate(client: Client, rating: Any) -> Chat:
    """The visitor's verdict on its last chat, once it has finished."""
    chat = current_chat(client)
    if chat is None:
        raise WidgetError("there is no chat to rate")
    if chat.is_open:
        raise WidgetError("a chat is rated when it has finished")
    if rating not in ("positive", "negative"):
        raise WidgetError("rating must be positive or negative")
    return chats.rate_chat(chat=chat, rating=rating)


def start_call(widget: WidgetChannel, client: Client, phone: Any) -> None:
    """``startCall`` and the callback form."""
    if not isinstance(phone, str):
        raise WidgetError("enter a phone number")
    try:
        chats.request_callback(channel=widget.channel, phone=phone, client=client)
    except chats.ServiceError as error:
        raise WidgetError(error.message) from None


def send_offline_message(
    widget: WidgetChannel, client: Client | None, fields: Mapping[str, Any]
) -> None:
    """``sendOfflineMessage`` and the offline form."""
    if not widget.offline_form:
        raise WidgetError("this widget takes no offline messages")
    values = {name: _string(fields, name) for name in ("name", "email", "phone", "description")}
    message = _string(fields, "message")
    page = (client.visitor_data or {}).get("page", {}) if client else {}
    try:
        chats.leave_offline_message(
            channel=widget.channel,
            client=client,
            message=message,
            page_url=str(page.get("url", "")),
            page_title=str(page.get("title", "")),
            **values,
        )
    except chats.ServiceError as error:
        raise WidgetError(error.message) from None
