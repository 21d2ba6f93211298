"""The row locks the verbs share: a client's row before a chat of its, in
one order, so concurrent verbs queue up instead of deadlocking."""

from __future__ import annotations

from datetime import datetime

from agents.models import Chat, Client


def _lock_client(client_id: int) -> datetime | None:
    """Lock the client's row (always before a chat of its: one order, no
    deadlock) and return when it was blacklisted, as committed now."""
    locked = Client.objects.select_for_update().filter(pk=client_id)
    return locked.values_list("blacklisted_at", flat=True).get()


def _open_chat_of(client: Client, *, lock: bool = False) -> Chat | None:
    chats = Chat.objects.filter(client=client, state__in=Chat.OPEN_STATES)
    # Locked, a chat finished meanwhile is seen finished (and a new one opens)
    # instead of taking a message no agent will look at.
    return (chats.select_for_update() if lock else chats).first()


def _lock(chat: Chat) -> Chat:
    """Re-read ``chat`` under a row lock, so concurrent changes queue up."""
    return Chat.objects.select_for_update().get(pk=chat.pk)
