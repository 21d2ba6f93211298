"""Which language the service speaks to someone away from the pages
(docs/translating.md, "The mails"): a chat's transcript, its away message
and the client's address confirmation speak the chat's language; an agent's
password reset speaks the agent's.

A chat's language is the one its widget spoke at its first message
(``Chat.language``, a BCP 47 tag such as ``pt-BR``), else its widget
channel's default, else the installation's ``LANGUAGE_CODE`` (a Chat API
or bot channel's chat knows none). The result is a code of Django's
``LANGUAGES`` (``pt-br``), for ``translation.override``.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import translation

from agents.models import Agent, Channel, Chat, Client


def django_code(tag: str) -> str:
    """A BCP 47 tag (``pt-BR``) as the code of ``LANGUAGES`` (``pt-br``);
    ``""`` for a language the catalogues do not hold."""
    if not tag:
        return ""
    try:
        return translation.get_supported_language_variant(tag.lower())
    except LookupError:
        return ""


def of_channel(channel: Channel) -> str:
    # A widget channel has a language (devhooks' WidgetChannel, reached by
    # its reverse one-to-one: agents imports no integration app); another
    # channel speaks the installation's.
    widget = getattr(channel, "widget", None)
    return django_code(getattr(widget, "language", "")) or settings.LANGUAGE_CODE


def of_chat(chat: Chat) -> str:
    return django_code(chat.language) or of_channel(chat.channel)


def of_client(client: Client) -> str:
    """The language of the client's last chat that knows one, else their
    channel's: a visitor may type their address before their first message."""
    chat = client.chats.exclude(language="").order_by("-created", "-id").first()
    return of_chat(chat) if chat is not None else of_channel(client.channel)


def of_agent(agent: Agent) -> str:
    """The agent's choice on the settings page, else the installation's."""
    return django_code(agent.language) or settings.LANGUAGE_CODE
