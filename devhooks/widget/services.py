"""The website widget's verbs: widget channels, and what a visitor's browser
changes through ``window.svc_api`` (docs/widget.md); its reads are in
devhooks/widget/selectors.py.

A visitor is a ``Client`` of the widget's channel, created the first time the
browser needs one (a message, a contact form, ``getVisitorNumber``…), and
known afterwards by an unguessable token the browser keeps. The visitor
verbs take the values devhooks/widget/serializers.py read from the body and
check what needs the database or the widget's settings; they raise
``WidgetError`` with the message the page is shown, and know no HTTP.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable, Mapping
from datetime import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from django.db import transaction
from django.db.models import Q

from agents import audit
from agents import services as chats
from agents.content import Content
from agents.models import Agent, CallbackSettings, Channel, Chat, Client, Department, Message
from devhooks.models import DEFAULT_WIDGET_TITLE, IntegrationSettings, WidgetChannel
from devhooks.visitor_data import UTM_FIELDS, clean_custom_data
from devhooks.widget import geoip
from devhooks.widget.languages import DEFAULT_LANGUAGE, WIDGET_LANGUAGES
from devhooks.widget.selectors import current_chat
from devhooks.widget.tokens import new_visitor_token

logger = logging.getLogger(__name__)


class WidgetError(Exception):
    """``code``: the error body's, when it is not the status's own."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.code = message, code


# A chat's first message without acceptance of the widget's current consent
# text (docs/widget.md, "Consent").
CONSENT_REQUIRED = "consent_required"


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
    language: str = DEFAULT_LANGUAGE,
    by: Agent | str | None = None,
) -> WidgetChannel:
    """A widget channel with its agents; ``callback`` takes callback requests
    every day, all day (the admin narrows the hours). ``by``: who made it
    (the audit log)."""
    name, title = name.strip(), title.strip()
    if not name or len(name) > 200:
        raise WidgetError("a widget channel needs a name of 1 to 200 characters")
    if len(title) > 100:
        raise WidgetError("the title holds at most 100 characters")
    waiting_text = waiting_text.strip()
    if len(waiting_text) > 300:
        raise WidgetError("the waiting text holds at most 300 characters")
    if language not in WIDGET_LANGUAGES:
        raise WidgetError(f"the widget speaks {', '.join(WIDGET_LANGUAGES)}, not {language!r}")
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
        channel=channel,
        title=title or DEFAULT_WIDGET_TITLE,
        waiting_text=waiting_text,
        language=language,
        **asks,
    )
    widget.departments.set(departments)
    CallbackSettings.objects.create(
        channel=channel,
        enabled=callback,
        working_days=[1, 2, 3, 4, 5, 6, 7],
        opens_at=time(0, 0),
        closes_at=time(23, 59, 59, 999999),
    )
    audit.record(
        audit.Action.CHANNEL_CREATED, actor=by, target=audit.of_channel(channel), kind=channel.kind
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


def session_data(
    request_meta: Mapping[str, Any], landing_url: str, page: Mapping[str, str]
) -> dict[str, Any]:
    """The visitor's session as webhooks send it: the page, UTM of the landing
    URL, the address, the browser, and geoip when a database is configured."""
    ip_addr = str(request_meta.get("ip_addr", ""))
    data: dict[str, Any] = {
        "ip_addr": ip_addr,
        "user_agent": str(request_meta.get("user_agent", ""))[:500],
        "geoip": geoip.lookup(ip_addr),
    }
    data.update(utm_of(landing_url))
    if page:
        data["page"] = dict(page)
    return data


def utm_of(url: str) -> dict[str, Any]:
    """``utm`` (the utm_ parameters as they were in the URL) and ``utm_json``."""
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


@transaction.atomic(savepoint=False)  # in the action's transaction
def new_visitor(widget: WidgetChannel, session: Mapping[str, Any]) -> tuple[Client, str]:
    """A new visitor (with the next visitor number) and its browser's token,
    in one INSERT (a random id is no one's yet: nothing to look for)."""
    token, stored = new_visitor_token()
    client = chats.create_client(
        channel=widget.channel,
        external_id=f"w-{secrets.token_urlsafe(12)}",
        visitor_data=dict(session),
        visitor_key_hash=stored,
    )
    return client, token


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


@transaction.atomic
def set_contact(client: Client, contact: Mapping[str, str]) -> list[str]:
    """``setContactInfo`` and the contact form: as if the visitor had typed it
    (a ``chat_updated`` webhook when a chat is open); an empty field leaves
    what is known."""
    return chats.update_client_contact(client=client, contact=contact)


@transaction.atomic
def set_custom_data(client: Client, fields: list[Any]) -> list[dict[str, str]]:
    """``setCustomData``: fields for the agent's side panel, live; content is
    shown as text, links only where Safe URL allows them."""
    cleaned = clean_custom_data(fields, IntegrationSettings.load())
    _set_visitor_data(client, custom_data=cleaned)
    return cleaned


@transaction.atomic
def set_user_token(client: Client, token: str) -> str:
    """``setUserToken``: an id sent as ``user_token`` in webhooks, never shown."""
    Client.objects.filter(pk=client.pk).update(user_token=token)
    client.user_token = token
    return token


@transaction.atomic
def set_page(client: Client, page: Mapping[str, str]) -> dict[str, str]:
    """``sendPageTitle`` and each page the visitor opens: the page agents see."""
    if not page:
        raise WidgetError("give the page's url or title")
    _set_visitor_data(client, page=dict(page))
    return dict(page)


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


def _prechat_missing(widget: WidgetChannel, client: Client) -> str:
    """The first field the pre-chat form requires that the visitor has not
    given, when its next message would open a chat; else ""."""
    known = {"name": client.name, "email": client.email, "phone": client.phone}
    required = [f for f, ask in widget.prechat.items() if ask == WidgetChannel.Ask.REQUIRED]
    missing = [field for field in required if not known[field].strip()]
    if not missing:  # most channels: no question, no query
        return ""
    return missing[0] if _opens_a_chat(client) else ""


def _opens_a_chat(client: Client) -> bool:
    """Whether the visitor's next message opens a chat (it has none open)."""
    chat = current_chat(client)
    return chat is None or chat.state == Chat.State.FINISHED


def _consent_asked(widget: WidgetChannel, client: Client, accepted: int | None) -> bool:
    """Whether this message must carry the consent's acceptance (the chat's
    first, on a widget with a consent text); refused when it does not carry
    the current version's."""
    if not widget.consent_text.strip() or not _opens_a_chat(client):
        return False
    if accepted != widget.consent_version:
        raise WidgetError(
            f"accept the consent text (version {widget.consent_version}) before the first message",
            code=CONSENT_REQUIRED,
        )
    return True


@transaction.atomic(savepoint=False)  # in the action's transaction: no savepoint of its own
def send_message(
    widget: WidgetChannel,
    client: Client,
    text: str,
    *,
    department_id: int | None = None,
    invitation: str = "",
    consent_version: int | None = None,
    language: str = "",
    client_locked: bool = False,
    new_client: bool = False,
) -> Message:
    """The visitor's message; the first one opens a chat (with the bot when the
    channel has one). An invitation the visitor answers is kept for agents;
    the consent the first one accepts (``consent_version``) and the language
    the widget spoke (``language``, blank: unknown) with the chat.

    A department the widget does not offer (any more) opens the chat without
    one rather than keeping the visitor from writing. ``client_locked`` and
    ``new_client`` as ``post_client_message`` takes them.
    """
    department = None
    if department_id is not None:
        department = widget.departments.filter(pk=department_id).first()
    missing = _prechat_missing(widget, client)
    if missing:
        raise WidgetError(f"give your {PRECHAT_FIELDS[missing]} before the first message")
    consented = _consent_asked(widget, client, consent_version)
    if invitation:
        chats.update_client_contact(client=client, contact={"invite_text": invitation})
    message = chats.post_client_message(
        client=client,
        content=Content("text", text, {}),
        department=department,
        language=language,
        client_locked=client_locked,
        new_client=new_client,
    )
    if consented:
        chats.record_consent(chat=message.chat, version=widget.consent_version)
    return message


def set_typing(client: Client, typing: bool) -> None:
    chat = client.chats.filter(state__in=Chat.OPEN_STATES).first()
    if chat is not None:
        chats.set_client_typing(chat=chat, typing=typing)


def rate(client: Client, rating: str, comment: str = "") -> Chat:
    """The visitor's verdict on its last chat, once it has finished, and
    what they wrote beside it."""
    chat = current_chat(client)
    if chat is None:
        raise WidgetError("there is no chat to rate")
    if chat.is_open:
        raise WidgetError("a chat is rated when it has finished")
    try:
        return chats.rate_chat(chat=chat, rating=rating, comment=comment)
    except chats.ServiceError as error:
        raise WidgetError(error.message) from None


def start_call(widget: WidgetChannel, client: Client, phone: str) -> None:
    """``startCall`` and the callback form."""
    try:
        chats.request_callback(channel=widget.channel, phone=phone, client=client)
    except chats.ServiceError as error:
        raise WidgetError(error.message) from None


def send_offline_message(
    widget: WidgetChannel, client: Client | None, fields: Mapping[str, str]
) -> None:
    """``sendOfflineMessage`` and the offline form: its fields as strings; what
    they must hold the core checks."""
    if not widget.offline_form:
        raise WidgetError("this widget takes no offline messages")
    page = (client.visitor_data or {}).get("page", {}) if client else {}
    try:
        chats.leave_offline_message(
            channel=widget.channel,
            client=client,
            page_url=str(page.get("url", "")),
            page_title=str(page.get("title", "")),
            **fields,
        )
    except chats.ServiceError as error:
        raise WidgetError(error.message) from None
