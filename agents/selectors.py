"""Reads: what an agent may see. An agent sees only chats, calls and offline
messages of its channels."""

from __future__ import annotations

from django.db.models import (
    Case,
    Exists,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)

from agents.models import Agent, Call, Channel, Chat, Message, OfflineMessage


def agents_online(*, channel: Channel) -> bool:
    """Whether one of the channel's agents is online to take a chat."""
    return channel.agents.filter(is_online=True, is_active=True).exists()


def chats_for_agent(*, agent: Agent, state: str | None = None) -> QuerySet[Chat]:
    chats = (
        Chat.objects.filter(channel__agents=agent)
        .select_related("channel", "client", "department")
        .distinct()
    )
    if state:
        chats = chats.filter(state=state)
    return chats.order_by("-created", "-id")


def chat_for_agent(*, agent: Agent, chat_id: int) -> Chat:
    """The chat, or ``Chat.DoesNotExist`` when it is not on one of the agent's channels."""
    return chats_for_agent(agent=agent).get(pk=chat_id)


def messages_of(*, chat: Chat) -> QuerySet[Message]:
    return chat.messages.select_related("agent").order_by("created", "id")


def _with_first_message(chats: QuerySet[Chat]) -> QuerySet[Chat]:
    first = Message.objects.filter(chat=OuterRef("pk"), author=Message.Author.CLIENT).order_by(
        "created", "id"
    )
    return chats.annotate(first_message=Subquery(first.values("text")[:1]))


def queue_for_agent(*, agent: Agent) -> QuerySet[Chat]:
    """Queued chats of my channels, longest waiting first."""
    chats = chats_for_agent(agent=agent, state=Chat.State.QUEUED).order_by("queued_at", "id")
    return _with_first_message(chats)


def active_for_agent(*, agent: Agent) -> QuerySet[Chat]:
    """Chats I accepted and that are still open."""
    chats = chats_for_agent(agent=agent, state=Chat.State.ACTIVE).filter(agents=agent)
    return _with_first_message(chats.order_by("-accepted_at", "-id"))


def with_bot_for_agent(*, agent: Agent) -> QuerySet[Chat]:
    """Chats of my channels that a bot answers now, newest first (read-only: Reply takes over)."""
    return _with_first_message(chats_for_agent(agent=agent, state=Chat.State.BOT))


def finished_for_agent(*, agent: Agent, search: str = "") -> QuerySet[Chat]:
    """The history of my channels, newest first; search by client name, email or text."""
    chats = chats_for_agent(agent=agent, state=Chat.State.FINISHED).order_by("-finished_at", "-id")
    if search:
        matching = Message.objects.filter(chat=OuterRef("pk"), text__icontains=search)
        chats = chats.filter(
            Q(client__name__icontains=search)
            | Q(client__email__icontains=search)
            | Exists(matching)
        )
    return _with_first_message(chats)


def _my_channels(agent: Agent) -> QuerySet[Channel]:
    return Channel.objects.filter(agents=agent)


def _first_when(condition: Q) -> Case:
    """An ordering term that puts the rows matching ``condition`` first."""
    return Case(When(condition, then=Value(0)), default=Value(1), output_field=IntegerField())


def calls_for_agent(*, agent: Agent) -> QuerySet[Call]:
    """Calls of my channels: the open ones (a client waits for a call) first,
    then newest first."""
    return (
        Call.objects.filter(channel__in=_my_channels(agent))
        .select_related("channel", "client", "agent")
        .order_by(_first_when(Q(status__in=Call.OPEN_STATUSES)), "-created", "-id")
    )


def call_for_agent(*, agent: Agent, call_id: int) -> Call:
    """The call, or ``Call.DoesNotExist`` when it is not on one of the agent's channels."""
    return calls_for_agent(agent=agent).get(pk=call_id)


def offline_messages_for_agent(*, agent: Agent) -> QuerySet[OfflineMessage]:
    """Offline messages of my channels: those nobody handled yet first, then newest first."""
    return (
        OfflineMessage.objects.filter(channel__in=_my_channels(agent))
        .select_related("channel", "handled_by")
        .order_by(_first_when(Q(handled_at__isnull=True)), "-created", "-id")
    )


def offline_message_for_agent(*, agent: Agent, offline_message_id: int) -> OfflineMessage:
    """The offline message, or ``OfflineMessage.DoesNotExist`` when it is not
    on one of the agent's channels."""
    return offline_messages_for_agent(agent=agent).get(pk=offline_message_id)
