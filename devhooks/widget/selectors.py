"""The website widget's reads: the widget of a script or request, the
visitor of a token, what the script shows before the visitor opens it, and
what a returning browser shows (docs/widget.md)."""

from __future__ import annotations

from typing import Any, TypeGuard

from django.conf import settings

from agents import selectors
from agents import services as chats
from agents.live import CLIENT_VISIBLE_AUTHORS, message_data
from agents.models import Chat, Client
from agents.streams import newest_event_id
from devhooks.models import DEFAULT_WIDGET_TITLE, WidgetChannel
from devhooks.widget import languages
from devhooks.widget.tokens import client_for_visitor_token, looks_like_visitor_token

HISTORY = 200  # messages a returning visitor sees
QUEUE_REFRESH_MAX = 60  # seconds: the longest a waiting widget goes without asking its place
# What the visitor reads after its first message, unless the channel says otherwise.
WAITING_TEXT = "An agent will answer shortly."


def widget_for(widget_id: str) -> WidgetChannel | None:
    """The active widget with this id, or None."""
    if not 1 <= len(widget_id) <= 32:
        return None
    return (
        WidgetChannel.objects.select_related("channel")
        .filter(channel__public_id=widget_id, channel__is_active=True)
        .first()
    )


def config_of(widget: WidgetChannel, client: Client | None = None) -> dict[str, Any]:
    """What the script needs before the visitor opens it."""
    channel = widget.channel
    reason = chats.callback_unavailable_reason(channel=channel, client=client)
    return {
        "widget_id": widget.widget_id,
        "title": widget.title,
        # The title the channel chose, "" for the default, which the widget says in its language.
        "own_title": "" if widget.title == DEFAULT_WIDGET_TITLE else widget.title,
        "color": widget.color,
        "color2": widget.color2,
        # A blacklisted visitor sees an offline chat (docs/transcripts.md).
        "mode": "online"
        if selectors.agents_online(channel=channel) and not (client and client.is_blacklisted)
        else "offline",
        "offline_form": widget.offline_form,
        "waiting_text": widget.waiting_text or WAITING_TEXT,
        # The channel's own text, "" for the default, which the widget says in its language.
        "own_waiting_text": widget.waiting_text,
        "prechat": widget.prechat,
        # Accepted before a chat's first message; null: none asked.
        "consent": {"text": widget.consent_text, "version": widget.consent_version}
        if widget.consent_text.strip()
        else None,
        "callback": {"enabled": not reason, "reason": reason},
        "departments": [{"id": d.pk, "name": d.name} for d in widget.departments.all()],
        "rules": widget.rules if isinstance(widget.rules, dict) else {},
        # The channel's language, and every catalogue's version for its URL
        # (docs/widget.md, "Languages").
        "language": widget.language,
        "languages": languages.versions(),
    }


def could_be_visitor_token(token: Any) -> TypeGuard[str]:
    """Whether ``token`` has a visitor token's shape (which ``visitor_for`` looks up)."""
    return isinstance(token, str) and looks_like_visitor_token(token)


def visitor_for(widget: WidgetChannel, token: Any, *, lock: bool = False) -> Client | None:
    """The visitor of this widget whose browser holds ``token``, or None;
    with ``lock`` read under its row's lock (in the caller's transaction)."""
    if not isinstance(token, str):
        return None
    client = client_for_visitor_token(token, lock=lock)
    if client is None or client.channel_id != widget.channel_id:
        return None
    return client


def current_chat(client: Client) -> Chat | None:
    """The visitor's open chat, else its last one (for the rating)."""
    return client.chats.select_related("channel").order_by("-created", "-id").first()


def visitor_state(client: Client) -> dict[str, Any]:
    """What a returning browser shows: contact, number, the chat and its history."""
    # The event id first: a message committed between the two reads is then
    # in the history or in the stream's replay, perhaps both (the widget
    # shows each message once), never in neither.
    last_event_id = newest_event_id()
    chat = current_chat(client)
    messages: list[dict[str, Any]] = []
    if chat is not None:
        shown = chat.messages.select_related("agent").filter(author__in=CLIENT_VISIBLE_AUTHORS)
        messages = [message_data(m) for m in shown.order_by("-created", "-id")[:HISTORY]][::-1]
    return {
        "visitor_number": client.visitor_number,
        "contact": contact_info(client),
        "chat": chat_data(chat),
        "messages": messages,
        "last_event_id": last_event_id,
    }


def chat_data(chat: Chat | None) -> dict[str, Any] | None:
    if chat is None:
        return None
    joined = Chat.agents.through.objects.filter(chat=chat).select_related("agent")
    last = joined.order_by("-id").first()
    agent = last.agent if last else None
    return {
        "id": chat.pk,
        "state": chat.state,
        "rating": chat.rating,
        "agent_name": agent.name if agent else "",
    }


def queue_line(client: Client) -> dict[str, Any] | None:
    """The visitor's place in the queue while its chat waits for an agent
    (docs/widget.md, "Your place in the queue"), None otherwise: the
    position, the estimate, the line the widget shows, and when to ask again
    (the further back, the less often: a long queue's last places change
    slowly, and each of its visitors asks)."""
    chat = current_chat(client)
    place = selectors.queue_place(chat=chat) if chat is not None else None
    if place is None:
        return None
    base = max(1, settings.WIDGET_QUEUE_REFRESH_SECONDS)
    return {
        "position": place.position,
        "wait_seconds": place.wait_seconds,
        "text": queue_text(place.position, place.wait_seconds),
        "refresh_seconds": min(base * place.position, max(base, QUEUE_REFRESH_MAX)),
    }


def queue_text(position: int, wait_seconds: int | None) -> str:
    """The line the widget shows, "You are 2nd in line, about 3 minutes":
    the estimate in whole minutes, rounded half up; under a minute "less
    than a minute", over an hour "more than an hour"; without an estimate
    only the place. The first place is "next"."""
    place = "You are next in line" if position == 1 else f"You are {ordinal(position)} in line"
    if wait_seconds is None:
        return place
    minutes = (wait_seconds + 30) // 60
    if wait_seconds < 60:
        wait = "less than a minute"
    elif minutes > 60:
        wait = "more than an hour"
    else:
        wait = f"about {minutes} minute{'' if minutes == 1 else 's'}"
    return f"{place}, {wait}"


def ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th, …, 11th, 12th, 13th, …, 21st, 22nd, …"""
    if 11 <= number % 100 <= 13:
        return f"{number}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def contact_info(client: Client | None) -> dict[str, str | None]:
    """``getContactInfo()``: what is known, ``None`` for what is not."""

    def known(value: str) -> str | None:
        return value or None

    if client is None:
        return {"client_name": None, "email": None, "phone": None, "description": None}
    return {
        "client_name": known(client.name),
        "email": known(client.email),
        "phone": known(client.phone),
        "description": known(client.description),
    }


def callback_reason(widget: WidgetChannel, client: Client | None) -> str:
    return chats.callback_unavailable_reason(channel=widget.channel, client=client)
