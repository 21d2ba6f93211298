"""Chat transcripts by e-mail (docs/transcripts.md).

When a chat finishes, its log is mailed to the client, when the client gave
an e-mail address (Chat API sender fields, the widget's contact form, a
bot's CLIENT_INFO, or the CRM's ``contact_info``) and the channel sends
transcripts; a copy goes to ``TRANSCRIPT_ARCHIVE_EMAIL`` when it is set. An
agent can also send one on demand, to the client or to an address they
type. Internal notes and system notes never appear in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from agents import addresses, audit, events, languages, mail, ratelimit, selectors
from agents.content import MEDIA_TYPES, is_http_url
from agents.live import CLIENT_VISIBLE_AUTHORS
from agents.models import Agent, Chat, Mail, Message
from agents.services import ServiceError


class TranscriptError(ServiceError):
    """A transcript that cannot be sent (no address, a malformed one)."""


class TooManyTranscripts(TranscriptError):
    """An agent mailed as many transcripts to typed addresses as an hour allows."""

    code = "too_many_requests"


@dataclass(frozen=True)
class Line:
    """One message of the log as the mail shows it."""

    time: Any
    author: str
    text: str
    link: str = ""
    link_text: str = ""


def client_email(chat: Chat) -> str:
    """The client's address: what the CRM supplied for this chat when it is
    one, else the client's own."""
    contact = chat.contact_info if isinstance(chat.contact_info, dict) else {}
    crm = str(contact.get("email") or "").strip()
    own = str(chat.client.email or "").strip()
    return crm if addresses.is_mailable(crm) or not addresses.is_mailable(own) else own


def client_email_trusted(chat: Chat) -> bool:
    """May a transcript go to ``client_email(chat)``? What the agent page
    and the agent API show as confirmed is what the transcripts rely on."""
    return addresses.is_trusted(client=chat.client, address=client_email(chat))


def contact_details(chat: Chat) -> list[tuple[str, str]]:
    contact = chat.contact_info if isinstance(chat.contact_info, dict) else {}
    client = chat.client
    details = [
        (_("Name"), str(contact.get("name") or client.name or "")),
        (_("E-mail"), client_email(chat)),
        (_("Phone"), str(contact.get("phone") or client.phone or "")),
        (_("Visitor"), f"#{client.visitor_number}"),
    ]
    return [(label, value) for label, value in details if value]


def _line(message: Message, client_name: str) -> Line:
    if message.author == Message.Author.CLIENT:
        author = client_name
    elif message.author == Message.Author.AGENT:
        author = message.agent.name if message.agent else _("Agent")
    else:
        author = message.sender_name or _("Bot")
    payload = message.payload if isinstance(message.payload, dict) else {}
    text = message.text
    link = link_text = ""
    if message.type in MEDIA_TYPES and is_http_url(payload.get("file")):
        link = str(payload["file"])
        link_text = str(payload.get("file_name") or message.get_type_display())
    elif message.type == Message.Type.LOCATION:
        lat, lon = payload.get("latitude"), payload.get("longitude")
        link = f"https://www.openstreetmap.org/?mlat={lat}&mlon={lon}"
        link_text = _("Location %(latitude)s, %(longitude)s") % {"latitude": lat, "longitude": lon}
    elif message.type == Message.Type.MARKDOWN and not text:
        text = str(payload.get("content", ""))
    elif message.type == Message.Type.BUTTONS:
        buttons = [
            str(b.get("text", "")) for b in payload.get("buttons") or [] if isinstance(b, dict)
        ]
        text = "\n".join(filter(None, [str(payload.get("title", "")), *buttons])) or text
    return Line(message.created, author, text, link, link_text)


def render(chat: Chat) -> tuple[str, str, str]:
    """The transcript's subject, plain text and HTML (every value escaped),
    in the chat's language (agents.languages), its dates and times too."""
    with translation.override(languages.of_chat(chat)):
        return _render(chat)


def _render(chat: Chat) -> tuple[str, str, str]:
    # What the client saw: no internal notes, no system notes.
    shown = selectors.messages_of(chat=chat).filter(author__in=CLIENT_VISIBLE_AUTHORS)
    client_name = chat.client.display_name
    context = {
        "chat": chat,
        "channel": chat.channel.name,
        "client_name": client_name,
        "details": contact_details(chat),
        "lines": [_line(m, client_name) for m in shown],
        "agents": ", ".join(a.name for a in selectors.agents_of(chat)),
    }
    # One line, whatever the name.
    subject = " ".join((_("Your chat with %(channel)s") % {"channel": chat.channel.name}).split())
    text = render_to_string("agents/mail/transcript.txt", context)
    html = render_to_string("agents/mail/transcript.html", context)
    return subject, text, html


def _checked_address(address: str) -> str:
    address = address.strip()
    if not addresses.is_mailable(address):
        if not address:
            raise TranscriptError(gettext_lazy("an empty address is not an e-mail address"))
        shown = address[:60] + ("…" if len(address) > 60 else "")
        raise TranscriptError(gettext_lazy("%(address)s is not an e-mail address"), address=shown)
    return address


@transaction.atomic
def send_transcript(*, chat: Chat, to: str = "", agent: Agent | None = None) -> Mail:
    """Mail ``chat``'s transcript to ``to``, or to the client when empty: an
    address the agent types is theirs to vouch for; the client's own must be
    trusted (agents.addresses). Every send an agent asks for counts towards
    their hourly limit, to the client's address too."""
    own = client_email(chat)
    if not to.strip() and not own:
        raise TranscriptError(gettext_lazy("the client gave no e-mail address: type one"))
    if not to.strip() and not client_email_trusted(chat):
        raise TranscriptError(
            gettext_lazy(
                "the client's address %(address)s is not confirmed yet: type it if you vouch for it"
            ),
            address=own,
        )
    address = _checked_address(to or own)
    if agent is not None:
        limit = settings.TRANSCRIPTS_TO_TYPED_ADDRESSES_PER_HOUR
        if not ratelimit.admit(key=f"transcript-on-demand:{agent.pk}", limit=limit, window=3600):
            raise TooManyTranscripts(
                f"you mailed {limit} transcripts in the last hour: try again later"
            )
    subject, text, html = render(chat)
    queued = mail.queue_mail(to=address, subject=subject, text=text, html=html, chat=chat)
    if to.strip():
        # A typed address is the agent's to vouch for: the log says whose.
        audit.record(
            audit.Action.TRANSCRIPT_MAILED, actor=agent, target=f"chat {chat.pk}", to=address
        )
    return queued


def _to_client(chat: Chat, event: events.ChatFinished) -> str:
    """The address a finished chat's transcript goes to, or "" for none."""
    address = client_email(chat)
    # A client blacklisted in this chat is sent nothing (the archive still is).
    if not chat.channel.send_transcripts or chat.blacklisted or not addresses.is_mailable(address):
        return ""
    # Only to an address the service has reason to trust: a typed one could
    # be anyone's, and the chat the typist's text.
    if not client_email_trusted(chat):
        return ""
    # Finished by the idle timer with no agent's word in it: nobody answered,
    # so the client is sent no copy of what they alone wrote.
    if event.idle and not chat.messages.filter(author=Message.Author.AGENT).exists():
        return ""
    return address


def on_chat_finished(event: events.ChatFinished) -> None:
    """A finished chat's transcript to the client (and the archive)."""
    chat = Chat.objects.select_related("channel", "client").get(pk=event.chat_id)
    to_client = _to_client(chat, event)
    archive = settings.TRANSCRIPT_ARCHIVE_EMAIL
    if not to_client and not archive:
        return
    subject, text, html = render(chat)
    if to_client:
        mail.queue_mail(to=to_client, subject=subject, text=text, html=html, chat=chat)
    if archive:
        mail.queue_mail(to=archive, subject=f"[archive] {subject}", text=text, html=html, chat=chat)


def connect() -> None:
    events.subscribe(events.ChatFinished, on_chat_finished)
