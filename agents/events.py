"""Every event the conversation core publishes, in one place.

A service publishes exactly one event per state change. Integration apps
subscribe in their ``AppConfig.ready()``; ``agents`` imports none of them.

Subscribers run inside the publishing service's transaction. That is a
deliberate choice (docs/decisions.md): a subscriber that writes an outbox row
(``delivery.enqueue``) commits or rolls back together with the change that
caused it, so a rolled-back change sends nothing and a committed one is never
forgotten. Anything that leaves the database — a Celery message, a network
call — a subscriber defers to ``transaction.on_commit`` itself, so the outside
world hears of an event only after its commit.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from agents.models import Chat, Message

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """Base of all events; ``chat_id`` is set wherever a chat is concerned."""


@dataclass(frozen=True)
class ChatOpened(Event):
    """A client's first message opened a chat (state BOT or QUEUED); ``chat``
    is the row as made."""

    chat_id: int
    state: str
    chat: Chat = field(compare=False, repr=False)


@dataclass(frozen=True)
class ChatQueued(Event):
    """A chat left the bot and waits for an agent."""

    chat_id: int
    reason: str


@dataclass(frozen=True)
class ChatReturnedToBot(Event):
    """A queued chat went back to the bot: no agent of its channel was online."""

    chat_id: int
    reason: str


@dataclass(frozen=True)
class ChatAccepted(Event):
    """An agent pressed Reply: the chat is ACTIVE with that agent."""

    chat_id: int
    agent_id: int


@dataclass(frozen=True)
class ChatFinished(Event):
    """The chat was closed, by an agent (``agent_id``) or by the system
    (``idle``: by the idle timer, INACTIVE_CHAT_HOURS, or the channel's
    idle close, docs/routing.md)."""

    chat_id: int
    agent_id: int | None
    idle: bool = False


@dataclass(frozen=True)
class ChatRated(Event):
    chat_id: int
    rating: str


@dataclass(frozen=True)
class ChatLabelled(Event):
    """An agent replaced a chat's labels; ``labels``: the names it has now."""

    chat_id: int
    agent_id: int
    labels: tuple[str, ...]


@dataclass(frozen=True)
class ChatTransferred(Event):
    """An agent handed an active chat to another agent (it stays active) or to
    a department (it goes back to the queue). The client is not told."""

    chat_id: int
    from_agent_id: int
    to_agent_id: int | None
    department_id: int | None


@dataclass(frozen=True)
class ChatOffered(Event):
    """Routing offered a queued chat to one agent until ``expires_at``
    (docs/routing.md); their Reply takes it."""

    chat_id: int
    agent_id: int
    offer_id: int
    expires_at: datetime


@dataclass(frozen=True)
class OfferEnded(Event):
    """A chat's offer to an agent ended: ``accepted``, ``declined``, ``lapsed``
    (nobody answered in time) or ``withdrawn`` (another agent took the chat,
    it left the queue, the agent went offline)."""

    chat_id: int
    agent_id: int
    outcome: str


@dataclass(frozen=True)
class ClientBlacklisted(Event):
    """An agent blacklisted the client of a chat (the chat is then finished)."""

    chat_id: int
    client_id: int


@dataclass(frozen=True)
class BlacklistLifted(Event):
    """A client may write again."""

    client_id: int


@dataclass(frozen=True)
class ChatsErased(Event):
    """The texts, files and payloads of these chats were erased
    (``agents.privacy``: a client's erasure or DATA_RETENTION_DAYS). An app
    that keeps what it sent about them (outbox bodies) forgets it, and drops
    what is still pending."""

    chat_ids: tuple[int, ...]


@dataclass(frozen=True)
class ClientErased(Event):
    """A client's details were erased on request (``agents.privacy``); its
    chats were erased with ``ChatsErased`` in the same transaction. Its calls'
    and offline messages' ids say what else was about the client."""

    client_id: int
    call_ids: tuple[int, ...]
    offline_message_ids: tuple[int, ...]


@dataclass(frozen=True)
class MessagePosted(Event):
    """A client, agent, bot or system message was stored in a chat.

    ``message`` is the row as stored, with its chat (read under the chat's
    lock, so its state is the chat's now): subscribers read neither again.
    """

    chat_id: int
    message_id: int
    author: str
    message: Message = field(compare=False, repr=False)


@dataclass(frozen=True)
class MessageDeliveryChanged(Event):
    """An outbound message's delivery state changed (sending, delivered, failed).

    ``message``: the row, with its chat, when the change follows its posting
    in the same transaction (subscribers read neither again); else None.
    """

    chat_id: int
    message_id: int
    status: str
    message: Message | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class MessageRetryRequested(Event):
    """An agent asked to send a message that was not delivered once more."""

    chat_id: int
    message_id: int


@dataclass(frozen=True)
class TypingChanged(Event):
    """The client or an agent started or stopped typing."""

    chat_id: int
    who: str  # "client" or "agent"
    typing: bool
    agent_id: int | None = None


@dataclass(frozen=True)
class ClientUpdated(Event):
    """A client's contact data changed (name, phone, email, photo, …)."""

    client_id: int
    chat_id: int | None
    fields: tuple[str, ...]
    # Who changed them: "client" (the client or the integrator for them), "bot",
    # "agent", or "crm" (the chat_accepted reply; the CRM is not told of its own change).
    source: str = "client"


@dataclass(frozen=True)
class CrmPanelChanged(Event):
    """The CRM side panel of a chat got new data (the chat_accepted reply)."""

    chat_id: int


@dataclass(frozen=True)
class CrmAssignRequested(Event):
    """An agent pressed the CRM's assign button: bind the client to the CRM card."""

    chat_id: int
    agent_id: int
    crm_link: str


@dataclass(frozen=True)
class CallChanged(Event):
    """A call was requested or its status changed (start, agent_connected, …)."""

    call_id: int
    status: str


@dataclass(frozen=True)
class OfflineMessageReceived(Event):
    """A visitor left a message while no agent was online."""

    offline_message_id: int


@dataclass(frozen=True)
class OfflineMessageHandled(Event):
    offline_message_id: int
    agent_id: int


@dataclass(frozen=True)
class AgentStatusChanged(Event):
    agent_id: int
    online: bool


E = TypeVar("E", bound=Event)

_subscribers: defaultdict[type[Event], list[Callable[[Event], None]]] = defaultdict(list)


def subscribe(event_type: type[E], handler: Callable[[E], None]) -> None:
    """Call ``handler`` for every published ``event_type`` (idempotent)."""
    handlers = _subscribers[event_type]
    if handler not in handlers:
        handlers.append(handler)  # type: ignore[arg-type]


def unsubscribe(event_type: type[E], handler: Callable[[E], None]) -> None:
    handlers = _subscribers[event_type]
    if handler in handlers:
        handlers.remove(handler)


def publish(event: Event) -> None:
    """Hand ``event`` to its subscribers, inside the caller's transaction."""
    logger.debug("event %s %s", type(event).__name__, event)
    for handler in list(_subscribers[type(event)]):
        handler(event)
