"""A3: the agent message the service POSTs to the integrator (spec A)."""

from __future__ import annotations

from typing import Any

from agents.content import MEDIA_TYPES
from agents.models import Agent, Client, Message

MEDIA_FIELDS = (
    "file", "thumb", "emoji", "file_size", "file_name", "duration", "width", "height",
    "performer", "title",
)  # fmt: skip
BOT_NAME = "Bot"


def _sender(agent: Agent | None, bot_name: str = "") -> dict[str, str]:
    if agent is None:
        return {"name": bot_name or BOT_NAME}
    sender = {"name": agent.name}
    if agent.photo_url:
        sender["photo"] = agent.photo_url
    return sender


def _recipient(client: Client) -> dict[str, Any]:
    # The sender.id received earlier, unchanged: same value, same JSON type.
    raw = client.external_id_raw
    return {"id": raw if isinstance(raw, str | int) else client.external_id}


def sendable(message: Message) -> bool:
    """Whether a Chat API channel can show the message: Markdown and buttons
    only with their plain ``text`` fallback."""
    return message.type not in ("markdown", "buttons") or bool(message.text)


def agent_message(message: Message) -> dict[str, Any] | None:
    """The A3 body for an agent or bot message; None when the channel cannot show it.

    Markdown and buttons go out as their plain ``text`` fallback; without one
    the message is not sent to this channel (spec B, Message kinds). A bot
    message's ``sender.name`` is the bot's display name, "Bot" when it has none.
    """
    if not sendable(message):
        return None
    body: dict[str, Any] = {"id": str(message.pk)}
    if message.type in ("markdown", "buttons"):
        body.update(type="text", text=message.text)
    elif message.type in MEDIA_TYPES or message.type == "location":
        body["type"] = message.type
        body.update(
            {
                k: v
                for k, v in message.payload.items()
                if k in (*MEDIA_FIELDS, "latitude", "longitude")
            }
        )
        if message.text:
            body["text"] = message.text
    else:
        body.update(type="text", text=message.text)
    return {
        "sender": _sender(message.agent, bot_name=message.sender_name),
        "recipient": _recipient(message.chat.client),
        "message": body,
    }


def typing(*, agent: Agent, client: Client, typing: bool) -> dict[str, Any]:
    return {
        "sender": _sender(agent),
        "recipient": _recipient(client),
        "message": {"type": "typein" if typing else "typeout"},
    }
