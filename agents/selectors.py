"""Reads: what an agent may see. An agent sees only chats of its channels."""

from __future__ import annotations

from django.db.models import QuerySet

from agents.models import Agent, Chat, Message


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
