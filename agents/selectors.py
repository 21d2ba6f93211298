"""Reads: what an agent may see. An agent sees only chats of its channels."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from agents.models import Agent, Channel, Chat, Message


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
