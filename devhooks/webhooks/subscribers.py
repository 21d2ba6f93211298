"""The developer webhooks' reactions to the core's events and to the CRM's
answers (docs/webhooks.md).

Each event of the core that a CRM hears of becomes one ``devhook`` delivery,
written in the transaction of the change (so a rolled-back change tells the
CRM nothing). A chat's events go in order (ordering key ``chat:<id>``), and
so do a call's. The chat_accepted answer fills the agent's CRM panel.
"""

from __future__ import annotations

from typing import Any

from agents import events
from agents import services as chats
from agents.models import Agent, Call, Chat, OfflineMessage
from delivery import handlers
from delivery import services as delivery
from delivery.models import Delivery
from devhooks.models import WebhookDelivery
from devhooks.webhooks import payloads, services

CHAT_FIELDS = ("channel", "client", "department")
ERASED = "the client's data was erased"


def _chat(chat_id: int) -> Chat:
    return Chat.objects.select_related(*CHAT_FIELDS).get(pk=chat_id)


def _send_chat_event(event_name: str, chat: Chat, body: dict[str, Any]) -> None:
    services.send(
        event_name, body, ordering_key=f"chat:{chat.pk}", subject=f"chat:{chat.pk}", chat=chat
    )


def on_chat_accepted(event: events.ChatAccepted) -> None:
    chat = _chat(event.chat_id)
    agent = Agent.objects.get(pk=event.agent_id)
    _send_chat_event("chat_accepted", chat, payloads.chat_accepted(chat, agent))


def on_crm_assign(event: events.CrmAssignRequested) -> None:
    chat = _chat(event.chat_id)
    agent = Agent.objects.get(pk=event.agent_id)
    _send_chat_event("chat_assigned", chat, payloads.chat_assigned(chat, agent, event.crm_link))


def on_chat_finished(event: events.ChatFinished) -> None:
    chat = _chat(event.chat_id)
    _send_chat_event("chat_finished", chat, payloads.chat_finished(chat))


def on_client_updated(event: events.ClientUpdated) -> None:
    """The CRM is not told of what it set itself; a client seen for the first
    time (no chat yet) is news for chat_accepted, not chat_updated."""
    if event.source == "crm" or event.chat_id is None:
        return
    chat = _chat(event.chat_id)
    joined = Chat.agents.through.objects.filter(chat=chat).order_by("-id").first()
    agent = joined.agent if joined else None  # the agent who joined last
    _send_chat_event("chat_updated", chat, payloads.chat_updated(chat, agent))


def on_call_changed(event: events.CallChanged) -> None:
    call = Call.objects.select_related("channel", "client", "chat__department", "agent").get(
        pk=event.call_id
    )
    services.send(
        "call_event",
        payloads.call_event(call),
        ordering_key=f"call:{call.pk}",
        subject=f"call:{call.pk}",
    )


def on_offline_message(event: events.OfflineMessageReceived) -> None:
    offline = OfflineMessage.objects.select_related("channel", "client").get(
        pk=event.offline_message_id
    )
    services.send(
        "offline_message", payloads.offline_message(offline), subject=f"offline:{offline.pk}"
    )


def on_delivered(item: Delivery, reply: Any) -> None:
    chat = services.chat_of(item) if item.event == "chat_accepted" else None
    if chat is not None:
        services.read_accept_reply(chat, reply)


def on_failed(item: Delivery, error: str) -> None:
    """A chat_assigned the CRM refused (or never took): the agent may assign again."""
    chat = services.chat_of(item) if item.event == "chat_assigned" else None
    if chat is not None:
        chats.crm_assign_failed(chat=chat, error=error)


def connect() -> None:
    events.subscribe(events.ChatAccepted, on_chat_accepted)
    events.subscribe(events.CrmAssignRequested, on_crm_assign)
    events.subscribe(events.ChatFinished, on_chat_finished)
    events.subscribe(events.ClientUpdated, on_client_updated)
    events.subscribe(events.CallChanged, on_call_changed)
    events.subscribe(events.OfflineMessageReceived, on_offline_message)
    handlers.register(services.PURPOSE, on_success=on_delivered, on_failure=on_failed)
    events.subscribe(events.ChatsErased, on_chats_erased)
    events.subscribe(events.ClientErased, on_client_erased)


def on_chats_erased(event: events.ChatsErased) -> None:
    """The webhook bodies about the erased chats (visitor, messages) are
    forgotten, and one not yet sent is dropped (docs/privacy.md)."""
    links = WebhookDelivery.objects.filter(chat_id__in=event.chat_ids)
    ids = list(links.values_list("delivery_id", flat=True))
    delivery.forget(delivery_ids=ids, reason=ERASED)


def on_client_erased(event: events.ClientErased) -> None:
    """So are those about the client's calls and offline messages, which are
    named by their subject (they have no link row)."""
    subjects = [f"call:{pk}" for pk in event.call_ids]
    subjects += [f"offline:{pk}" for pk in event.offline_message_ids]
    if not subjects:
        return
    found = Delivery.objects.filter(purpose=services.PURPOSE, subject__in=subjects)
    delivery.forget(delivery_ids=list(found.values_list("pk", flat=True)), reason=ERASED)
