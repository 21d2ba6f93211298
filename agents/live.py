"""What live streams tell, written once (docs/live.md).

Each change of the core that a person watches becomes one ``LiveEvent`` row,
written in the transaction of the change: a rolled-back change tells nobody,
and a reconnecting stream replays the rows it missed. After the commit the
row is published on Redis (``REDIS_URL``) for every web process's hub; in
the embedded default each hub reads new rows itself (``agents.streams``).

Events carry what a page needs to show the change without asking again for
small things (a message's text, a typing state); the agent pages ask for
rendered HTML only for what they show in full.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models import signals
from django.utils import timezone

from agents import events, markdown
from agents.content import MEDIA_TYPES
from agents.models import (
    Agent,
    ApiToken,
    Call,
    Channel,
    Chat,
    LiveEvent,
    Message,
    OfflineMessage,
)

logger = logging.getLogger(__name__)


def channel_name() -> str:
    """The Redis pub/sub channel of this installation's live events.

    Pub/sub ignores Redis's database number: two installations (or test
    runs) on one Redis server would hear each other's events. The name
    carries the installation's database and Redis URL, so each hears only
    its own (``LIVE_REDIS_CHANNEL`` names it outright).
    """
    if settings.LIVE_REDIS_CHANNEL:
        return str(settings.LIVE_REDIS_CHANNEL)
    database = settings.DATABASES["default"]
    where = f"{database.get('HOST', '')}:{database.get('PORT', '')}/{database['NAME']}"
    mark = f"{where}|{settings.REDIS_URL}"
    return "switchboard:live:" + hashlib.sha256(mark.encode()).hexdigest()[:16]


# What a visitor's own stream may hear of its chat; notes are for agents only.
CLIENT_VISIBLE_AUTHORS = (Message.Author.CLIENT, Message.Author.AGENT, Message.Author.BOT)


def as_dict(row: LiveEvent) -> dict[str, Any]:
    return {
        "id": row.pk,
        "kind": row.kind,
        "channel_id": row.channel_id,
        "client_id": row.client_id,
        "for_client": row.for_client,
        "data": row.data,
    }


def _redis_publish(*payloads: str) -> None:
    from agents.streams import redis_client  # the one client per process

    try:
        for payload in payloads:
            redis_client().publish(channel_name(), payload)
    except Exception:  # a hub that missed it catches up from the table
        logger.warning("live.publish_failed", exc_info=True)


# The events a ``batched()`` block recorded, per thread (as Django's connections are).
_batch = threading.local()


def record(
    kind: str, data: dict[str, Any], *, channel_id: int, client_id: int | None = None,
    for_client: bool = False,
) -> None:  # fmt: skip
    """Write one event in the caller's transaction; publish it after commit.

    Inside ``batched()`` the row is written with the block's others at its end.
    """
    row = LiveEvent(
        kind=kind, data=data, channel_id=channel_id, client_id=client_id, for_client=for_client
    )
    pending: list[LiveEvent] | None = getattr(_batch, "rows", None)
    if pending is not None:
        pending.append(row)
        return
    row.save(force_insert=True)
    _publish_on_commit([row])


@contextmanager
def batched() -> Iterator[None]:
    """Write the events recorded inside the block in one INSERT at its end,
    still in the caller's transaction (a verb that tells of several changes,
    a chat opened and its first message, costs one statement, not one per
    change). Nothing is written when the block raises. A savepoint rolled
    back inside the block would not take its events with it: the verbs
    that batch keep their savepoints (a lost race's INSERT) free of events.
    An inner block adds its events to the outer one's."""
    if getattr(_batch, "rows", None) is not None:
        yield
        return
    _batch.rows = []
    try:
        yield
        rows: list[LiveEvent] = _batch.rows
    finally:
        _batch.rows = None
    if rows:
        LiveEvent.objects.bulk_create(rows)  # ids set: PostgreSQL and SQLite return them
        _publish_on_commit(rows)


def _publish_on_commit(rows: list[LiveEvent]) -> None:
    if settings.REDIS_URL:
        payloads = [json.dumps(as_dict(row), default=str) for row in rows]
        transaction.on_commit(lambda: _redis_publish(*payloads))


# An access change (docs/live.md, "Access"): no stream hears it; each hub ends
# the streams it names, which reconnect and are authorised afresh.
ACCESS = "access"
NO_CHANNEL = 0  # channel ids start at 1: no agent's stream hears the row


def access_changed(*, agent_id: int | None = None, client_id: int | None = None) -> None:
    """Tell every web process that an agent's (or a visitor's) access changed
    — a token deleted or replaced, the agent deactivated or its password
    changed, a session signed out, the visitor blacklisted — so their open
    streams end now rather than at the next periodic re-check. Written in
    the caller's transaction like any event: a rolled-back change ends none."""
    data = {"agent_id": agent_id, "client_id": client_id}
    record(ACCESS, data, channel_id=NO_CHANNEL)


def forget_old_events() -> int:
    """Delete events older than ``LIVE_REPLAY_MINUTES``; returns how many."""
    cutoff = timezone.now() - timedelta(minutes=settings.LIVE_REPLAY_MINUTES)
    deleted, _ = LiveEvent.objects.filter(created__lt=cutoff).delete()
    return deleted


# --- the core's events as live events ---------------------------------------


def _chat(chat_id: int) -> Chat:
    return Chat.objects.only("id", "channel_id", "client_id", "state").get(pk=chat_id)


def _chat_event(kind: str, chat: Chat, data: dict[str, Any], *, for_client: bool) -> None:
    record(
        kind,
        {"chat_id": chat.pk, "state": chat.state, **data},
        channel_id=chat.channel_id,
        client_id=chat.client_id,
        for_client=for_client,
    )


def message_data(message: Message) -> dict[str, Any]:
    """A message as streams (and the widget's history) carry it: a bot's
    Markdown as its sanitized HTML, its buttons as their texts."""
    data: dict[str, Any] = {
        "id": message.pk,
        "author": message.author,
        "type": message.type,
        "text": message.text,
        "sender_name": message.sender_name or (message.agent.name if message.agent else ""),
        "created": message.created.isoformat(),
    }
    payload = message.payload if isinstance(message.payload, dict) else {}
    if message.type == Message.Type.MARKDOWN:
        data["html"] = str(markdown.sanitized(str(payload.get("html", ""))))
    elif message.type == Message.Type.BUTTONS:
        buttons = payload.get("buttons") or []
        data["buttons"] = [str(b.get("text", "")) for b in buttons if isinstance(b, dict)]
        data["title"] = str(payload.get("title", ""))
    elif message.type in MEDIA_TYPES:
        data["file"] = str(payload.get("file", ""))
        data["file_name"] = str(payload.get("file_name", ""))
    return data


def on_message_posted(event: events.MessagePosted) -> None:
    message = event.message
    _chat_event(
        "message",
        message.chat,
        {"message": message_data(message)},
        for_client=message.author in CLIENT_VISIBLE_AUTHORS,
    )


def on_chat_state(event: events.Event) -> None:
    # A chat just opened comes with the event; every other chat event has its id.
    opened = isinstance(event, events.ChatOpened)
    chat = event.chat if opened else _chat(event.chat_id)  # type: ignore[attr-defined]
    kind = {
        events.ChatOpened: "chat.opened",
        events.ChatQueued: "chat.queued",
        events.ChatReturnedToBot: "chat.returned_to_bot",
        events.ChatAccepted: "chat.accepted",
        events.ChatFinished: "chat.finished",
    }[type(event)]
    # The client hears that its chat waits for an agent (a bot handed it on:
    # the widget shows its place in the queue), that an agent took it (and
    # who) and that it ended.
    for_client = kind in ("chat.queued", "chat.accepted", "chat.finished")
    data: dict[str, Any] = {}
    if isinstance(event, events.ChatAccepted):
        agent = Agent.objects.filter(pk=event.agent_id).values_list("name", flat=True).first()
        data["agent_name"] = agent or ""
    _chat_event(kind, chat, data, for_client=for_client)


def on_transfer(event: events.ChatTransferred) -> None:
    """Agents only: the client is not interrupted by a transfer."""
    chat = _chat(event.chat_id)
    data = {"to_agent_id": event.to_agent_id, "department_id": event.department_id}
    _chat_event("chat.transferred", chat, data, for_client=False)


def on_labelled(event: events.ChatLabelled) -> None:
    """Agents only: the pages open on the chat show its new labels."""
    data = {"labels": list(event.labels)}
    _chat_event("chat.labelled", _chat(event.chat_id), data, for_client=False)


def on_offer(event: events.ChatOffered | events.OfferEnded) -> None:
    """Agents only: who a queued chat is offered to now (docs/routing.md)."""
    chat = _chat(event.chat_id)
    if isinstance(event, events.ChatOffered):
        data = {"offered_to": event.agent_id, "expires": event.expires_at.isoformat()}
        _chat_event("chat.offered", chat, data, for_client=False)
    else:
        data = {"agent_id": event.agent_id, "outcome": event.outcome}
        _chat_event("chat.offer_ended", chat, data, for_client=False)


def on_agent_status(event: events.AgentStatusChanged) -> None:
    """Agents only, on each channel of the agent: the Team view shows it."""
    data = {"agent_id": event.agent_id, "status": "online" if event.online else "offline"}
    channels = Channel.agents.through.objects.filter(agent_id=event.agent_id)
    for channel_id in channels.values_list("channel_id", flat=True):
        record("agent.status", data, channel_id=channel_id)


def on_typing(event: events.TypingChanged) -> None:
    chat = _chat(event.chat_id)
    _chat_event(
        "typing",
        chat,
        {"who": event.who, "typing": event.typing},
        for_client=event.who == "agent",
    )


def on_delivery(event: events.MessageDeliveryChanged) -> None:
    # A message just posted comes with its chat (read under its lock).
    chat = event.message.chat if event.message is not None else _chat(event.chat_id)
    data = {"message_id": event.message_id, "status": event.status}
    _chat_event("message.delivery", chat, data, for_client=False)


def on_crm_panel(event: events.CrmPanelChanged) -> None:
    _chat_event("crm.panel", _chat(event.chat_id), {}, for_client=False)


def on_client_updated(event: events.ClientUpdated) -> None:
    if event.chat_id is not None:
        _chat_event("client.updated", _chat(event.chat_id), {}, for_client=False)


def on_call(event: events.CallChanged) -> None:
    call = Call.objects.only("id", "channel_id", "client_id", "reason").get(pk=event.call_id)
    data = {"call_id": call.pk, "status": event.status, "reason": call.reason}
    # The client hears how its own callback goes (the widget's svc_onCallEnd).
    record(
        "call",
        data,
        channel_id=call.channel_id,
        client_id=call.client_id,
        for_client=call.client_id is not None,
    )


def on_offline_message(event: events.OfflineMessageReceived | events.OfflineMessageHandled) -> None:
    offline = OfflineMessage.objects.only("id", "channel_id").get(pk=event.offline_message_id)
    handled = isinstance(event, events.OfflineMessageHandled)
    data = {"offline_message_id": offline.pk, "handled": handled}
    record("offline_message", data, channel_id=offline.channel_id)


def on_blacklisted(event: events.ClientBlacklisted) -> None:
    access_changed(client_id=event.client_id)


def on_token_changed(sender: type[ApiToken], instance: ApiToken, **kwargs: Any) -> None:
    if not kwargs.get("created"):  # an agent's first token replaced none
        access_changed(agent_id=instance.agent_id)


def on_agent_saved(
    sender: type[Agent], instance: Agent, update_fields: frozenset[str] | None = None, **kwargs: Any
) -> None:
    # The admin's form saves every field; a save of other fields (the sign-in's
    # last_login) changes no access. A password change ends the page sessions.
    if kwargs.get("created"):
        return
    if update_fields is None or {"is_active", "password"} & update_fields:
        access_changed(agent_id=instance.pk)


def on_signed_out(sender: Any, user: Any, **kwargs: Any) -> None:
    if isinstance(user, Agent):
        access_changed(agent_id=user.pk)


def connect() -> None:
    # Changes of access, wherever they are made (a service, the admin, a
    # cascade): Django's signals, so none is missed; an update() that sends
    # none is caught by the periodic re-check (LIVE_ACCESS_SECONDS).
    signals.post_save.connect(on_token_changed, sender=ApiToken)
    signals.post_delete.connect(on_token_changed, sender=ApiToken)
    signals.post_save.connect(on_agent_saved, sender=Agent)
    user_logged_out.connect(on_signed_out)
    events.subscribe(events.ClientBlacklisted, on_blacklisted)
    events.subscribe(events.MessagePosted, on_message_posted)
    for kind in (
        events.ChatOpened,
        events.ChatQueued,
        events.ChatReturnedToBot,
        events.ChatAccepted,
        events.ChatFinished,
    ):
        events.subscribe(kind, on_chat_state)
    events.subscribe(events.ChatTransferred, on_transfer)
    events.subscribe(events.ChatLabelled, on_labelled)
    events.subscribe(events.ChatOffered, on_offer)
    events.subscribe(events.OfferEnded, on_offer)
    events.subscribe(events.TypingChanged, on_typing)
    events.subscribe(events.AgentStatusChanged, on_agent_status)
    events.subscribe(events.MessageDeliveryChanged, on_delivery)
    events.subscribe(events.CrmPanelChanged, on_crm_panel)
    events.subscribe(events.ClientUpdated, on_client_updated)
    events.subscribe(events.CallChanged, on_call)
    events.subscribe(events.OfflineMessageReceived, on_offline_message)
    events.subscribe(events.OfflineMessageHandled, on_offline_message)
