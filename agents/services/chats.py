"""Every change of chat state, one verb each (docs/decisions.md, "Conversation core").

Each service runs in a transaction and publishes one event from
``agents.events``. Views, the admin, commands, tasks and tests call these;
none of them writes chat state by itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agents import addresses, events, routing, telephony
from agents.content import Content
from agents.models import (
    Agent,
    Call,
    CallbackSettings,
    Channel,
    Chat,
    ChatSeen,
    Client,
    ClientAddress,
    Counter,
    Department,
    Message,
    OfflineMessage,
)

CONTACT_FIELDS = ("name", "phone", "email", "photo_url", "url", "invite_text", "description")
VISITOR_COUNTER = "visitor_number"
# Where an address comes from, by who changed the contact data ("client" is
# the visitor unless the caller says it is a signed-in integrator).
ADDRESS_SOURCES = {
    "bot": ClientAddress.Source.BOT,
    "crm": ClientAddress.Source.CRM,
    "agent": ClientAddress.Source.AGENT,
}


class ServiceError(Exception):
    """A request the chat's current state does not allow (answered as 400)."""

    code = "invalid_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidState(ServiceError):
    code = "invalid_state"


# --- agents -----------------------------------------------------------------


@transaction.atomic
def set_agent_status(*, agent: Agent, online: bool) -> Agent:
    Agent.objects.filter(pk=agent.pk).update(is_online=online)
    agent.is_online = online
    events.publish(events.AgentStatusChanged(agent_id=agent.pk, online=online))
    return agent


# --- clients ----------------------------------------------------------------


def _next_visitor_number() -> int:
    """The next installation-wide visitor number: 1, 2, 3… with no gaps.

    The UPDATE holds the counter row's lock until the caller's transaction
    ends, so concurrent new clients take consecutive numbers, and a rolled
    back client gives its number back.
    """
    if not Counter.objects.filter(name=VISITOR_COUNTER).update(value=F("value") + 1):
        # Made by a migration; re-made here after a database flush.
        Counter.objects.get_or_create(name=VISITOR_COUNTER)
        Counter.objects.filter(name=VISITOR_COUNTER).update(value=F("value") + 1)
    return Counter.objects.get(name=VISITOR_COUNTER).value


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


@transaction.atomic
def get_or_create_client(
    *,
    channel: Channel,
    external_id: str | int,
    contact: Mapping[str, str] | None = None,
    address_source: str = "",
) -> Client:
    """The client ``external_id`` of ``channel``, created on first sight.

    New non-empty contact values update the client the agent sees
    (``address_source`` as in ``update_client_contact``).
    """
    client = Client.objects.filter(channel=channel, external_id=str(external_id)).first()
    created = False
    if client is None:
        client, created = Client.objects.get_or_create(
            channel=channel,
            external_id=str(external_id),
            # A callable default runs inside get_or_create's savepoint, so a lost
            # race for the same client gives its visitor number back.
            defaults={
                "external_id_raw": external_id,
                "visitor_number": _next_visitor_number,  # type: ignore[misc]
            },
        )
    if not created and client.external_id_raw != external_id:
        Client.objects.filter(pk=client.pk).update(external_id_raw=external_id)
        client.external_id_raw = external_id
    if contact:
        update_client_contact(client=client, contact=contact, address_source=address_source)
    return client


@transaction.atomic
def update_client_contact(
    *,
    client: Client,
    contact: Mapping[str, str],
    source: str = "client",
    address_source: str = "",
    agent: Agent | None = None,
) -> list[str]:
    """Set the given non-empty contact fields; publish ClientUpdated when any changed.

    ``source`` says who changed them: "client", "bot", "crm" or "agent"
    (``agent``). An e-mail address is recorded with where it came from
    (``address_source``, a ``ClientAddress.Source``; by default what
    ``source`` implies, the visitor for "client"), which decides whether
    transcripts may go to it (agents.addresses).
    """
    if addresses.is_mailable(contact.get("email", "")):
        addresses.record_address(
            client=client,
            address=contact["email"],
            source=address_source or ADDRESS_SOURCES.get(source, ClientAddress.Source.VISITOR),
            agent=agent,
        )
    changed = [
        field
        for field, value in contact.items()
        if field in CONTACT_FIELDS and value and getattr(client, field) != value
    ]
    if not changed:
        return []
    for field in changed:
        setattr(client, field, contact[field])
    client.save(update_fields=changed)
    chat = _open_chat_of(client)
    events.publish(
        events.ClientUpdated(
            client_id=client.pk,
            chat_id=chat.pk if chat else None,
            fields=tuple(changed),
            source=source,
        )
    )
    return changed


@transaction.atomic
def confirm_client_email(*, chat: Chat, agent: Agent, email: str = "") -> Client:
    """An agent enters the client's e-mail address (``email``) or confirms the
    one the client gave: transcripts may go to it (agents.addresses)."""
    client = chat.client
    email = email.strip() or client.email
    if not email:
        raise ServiceError("the client gave no e-mail address: type one")
    if not addresses.is_mailable(email):
        raise ServiceError(f"{email[:60]} is not an e-mail address")
    update_client_contact(client=client, contact={"email": email}, source="agent", agent=agent)
    return client


# --- chat lifecycle ---------------------------------------------------------


def _lock(chat: Chat) -> Chat:
    """Re-read ``chat`` under a row lock, so concurrent changes queue up."""
    return Chat.objects.select_for_update().get(pk=chat.pk)


@transaction.atomic
def open_chat(
    *, client: Client, state: str = Chat.State.QUEUED, department: Department | None = None
) -> Chat:
    """Open a chat for ``client``, with the bot (BOT) or straight in the queue."""
    if state not in (Chat.State.BOT, Chat.State.QUEUED):
        raise InvalidState(f"a chat opens in state bot or queued, not {state}")
    if _open_chat_of(client) is not None:
        raise InvalidState("the client already has an open chat")
    now = timezone.now()
    chat = Chat.objects.create(
        channel=client.channel,
        client=client,
        state=state,
        department=department,
        created=now,
        queued_at=now if state == Chat.State.QUEUED else None,
    )
    events.publish(events.ChatOpened(chat_id=chat.pk, state=state))
    return chat


def _open_or_join(client: Client, state: str, department: Department | None = None) -> Chat:
    """Open the client's chat; when a concurrent first message opened it just
    now (the partial unique constraint says so), join that one."""
    try:
        with transaction.atomic():
            return open_chat(client=client, state=state, department=department)
    except IntegrityError:
        chat = _open_chat_of(client)
        if chat is None:
            raise
        return chat


@transaction.atomic
def post_client_message(
    *,
    client: Client,
    content: Content,
    external_id: str = "",
    open_state: str | None = None,
    department: Department | None = None,
) -> Message:
    """Store a client's message, opening a chat when the client has none open.

    A new chat opens with the bot when the channel has one (``agents.routing``),
    else in the queue; ``open_state`` overrides that. ``department`` is the
    one the client chose, for a chat it opens.
    """
    # Read under the client's lock: a blacklisting that commits meanwhile is
    # seen here, not after this message opened a chat.
    blacklisted_at = _lock_client(client.pk)
    if blacklisted_at is not None:
        client.blacklisted_at = blacklisted_at
        return _keep_blacklisted_message(client, content, external_id)
    chat = _open_chat_of(client, lock=True)
    if chat is None:
        if open_state is None:
            opens_with_bot = routing.opens_with_bot(client.channel)
            open_state = Chat.State.BOT if opens_with_bot else Chat.State.QUEUED
        chat = _open_or_join(client, open_state, department)
    message = Message.objects.create(
        chat=chat,
        author=Message.Author.CLIENT,
        type=content.type,
        text=content.text,
        payload=content.payload,
        external_id=external_id,
    )
    Chat.objects.filter(pk=chat.pk).update(
        client_typing_until=None, last_message_at=message.created
    )
    events.publish(
        events.MessagePosted(chat_id=chat.pk, message_id=message.pk, author=message.author)
    )
    return message


def _keep_blacklisted_message(client: Client, content: Content, external_id: str) -> Message:
    """A blacklisted client's message: kept in the chat where the client was
    blacklisted (flagged ``blacklisted``), seen by no agent, bot or webhook.
    A client blacklisted with no chat (an admin's doing) gets a finished one
    to keep it in, announced to nobody."""
    chat = client.chats.order_by("-created", "-id").first()
    if chat is None or chat.is_open:  # an open one is the agents': never theirs to see
        now = timezone.now()
        chat = Chat.objects.create(
            channel=client.channel,
            client=client,
            state=Chat.State.FINISHED,
            blacklisted=True,
            created=now,
            finished_at=now,
        )
    return Message.objects.create(
        chat=chat,
        author=Message.Author.CLIENT,
        type=content.type,
        text=content.text,
        payload={**content.payload, Message.BLACKLISTED: True},
        external_id=external_id,
    )


@transaction.atomic
def queue_chat(*, chat: Chat, reason: str) -> Chat:
    """Hand a bot chat to the agents (INVITE_AGENT, bot unreachable)."""
    chat = _lock(chat)
    if chat.state != Chat.State.BOT:
        raise InvalidState(f"only a chat with the bot can be queued, this one is {chat.state}")
    chat.state = Chat.State.QUEUED
    chat.queued_at = timezone.now()
    chat.save(update_fields=["state", "queued_at"])
    events.publish(events.ChatQueued(chat_id=chat.pk, reason=reason))
    return chat


@transaction.atomic
def return_chat_to_bot(*, chat: Chat, reason: str) -> Chat:
    """A queued chat goes back to the bot (no agent of the channel is online)."""
    chat = _lock(chat)
    if chat.state != Chat.State.QUEUED:
        raise InvalidState(f"only a queued chat can go back to the bot, this one is {chat.state}")
    chat.state = Chat.State.BOT
    chat.queued_at = None
    chat.save(update_fields=["state", "queued_at"])
    events.publish(events.ChatReturnedToBot(chat_id=chat.pk, reason=reason))
    return chat


@transaction.atomic
def accept_chat(*, chat: Chat, agent: Agent) -> Chat:
    """The agent's Reply: a queued (or bot) chat becomes ACTIVE with this agent."""
    chat = _lock(chat)
    if chat.state == Chat.State.ACTIVE and chat.agents.filter(pk=agent.pk).exists():
        return chat  # pressing Reply twice changes nothing
    if chat.state not in (Chat.State.QUEUED, Chat.State.BOT):
        raise InvalidState(f"the chat is {chat.state} and cannot be accepted")
    chat.state = Chat.State.ACTIVE
    chat.accepted_at = timezone.now()
    chat.save(update_fields=["state", "accepted_at"])
    chat.agents.add(agent)
    events.publish(events.ChatAccepted(chat_id=chat.pk, agent_id=agent.pk))
    return chat


def _post(
    chat: Chat, author: str, content: Content, agent: Agent | None = None, sender_name: str = ""
) -> Message:
    message = Message.objects.create(
        chat=chat,
        author=author,
        agent=agent,
        sender_name=sender_name,
        type=content.type,
        text=content.text,
        payload=content.payload,
    )
    Chat.objects.filter(pk=chat.pk).update(last_message_at=message.created)
    events.publish(events.MessagePosted(chat_id=chat.pk, message_id=message.pk, author=author))
    return message


@transaction.atomic
def mark_chat_seen(*, agent: Agent, chat: Chat, message_id: int) -> None:
    """``agent`` has read ``chat`` up to ``message_id``: the lists count only
    what comes after it. Never moves back (an older page's poll)."""
    seen, _ = ChatSeen.objects.get_or_create(agent=agent, chat=chat)
    ChatSeen.objects.filter(pk=seen.pk, last_seen_message_id__lt=message_id).update(
        last_seen_message_id=message_id
    )


@transaction.atomic
def post_agent_message(*, chat: Chat, agent: Agent, content: Content) -> Message:
    chat = _lock(chat)
    if chat.state != Chat.State.ACTIVE:
        raise InvalidState(f"the chat is {chat.state}: press Reply before writing")
    if not chat.agents.filter(pk=agent.pk).exists():
        raise InvalidState("the chat was accepted by another agent")
    if chat.agent_typing_until is not None:
        Chat.objects.filter(pk=chat.pk).update(agent_typing_until=None)
    return _post(chat, Message.Author.AGENT, content, agent)


NOTE_LIMIT = 4000


@transaction.atomic
def post_note(*, chat: Chat, agent: Agent, text: str) -> Message:
    """An internal note: for the agents of the chat's channel only, in any
    state of the chat; never sent to the client, a bot or a webhook (each of
    them sends only the authors it knows, and ``note`` is none of them)."""
    text = text.strip()
    if not text or len(text) > NOTE_LIMIT:
        raise ServiceError(f"write a note of up to {NOTE_LIMIT} characters first")
    chat = _lock(chat)
    return _post(chat, Message.Author.NOTE, Content("text", text, {}), agent)


def transfer_target(
    *, chat: Chat, agent_id: int | None = None, department_id: int | None = None
) -> tuple[Agent | None, Department | None]:
    """The agent or department a transfer names by id. Only the chat's
    channel's agents are looked up: an id of nobody and one of another
    channel's agent get the same answer."""
    to_agent = department = None
    if agent_id is not None:
        to_agent = chat.channel.agents.filter(pk=agent_id).first()
        if to_agent is None:
            raise ServiceError("that agent does not answer this channel")
    if department_id is not None:
        department = Department.objects.filter(pk=department_id).first()
        if department is None:
            raise ServiceError("no such department")
    return to_agent, department


@transaction.atomic
def transfer_chat(
    *,
    chat: Chat,
    agent: Agent,
    to_agent: Agent | None = None,
    department: Department | None = None,
    note: str = "",
) -> Chat:
    """Hand my active chat to another online agent of its channel (it stays
    active, now theirs) or to a department (it goes back to the queue with
    that department). The note is an internal note for whoever takes it; a
    system note says who handed it to whom. The client is not interrupted:
    nothing is sent to it, its integrator, a bot or a webhook."""
    chat = _lock(chat)
    if chat.state != Chat.State.ACTIVE or not chat.agents.filter(pk=agent.pk).exists():
        raise InvalidState("only the agent answering an active chat can transfer it")
    if (to_agent is None) == (department is None):
        raise ServiceError("choose one agent or one department to transfer the chat to")
    note = note.strip()[:NOTE_LIMIT]
    now = timezone.now()
    if to_agent is not None:
        if to_agent.pk == agent.pk:
            raise ServiceError("the chat is already yours")
        colleague = chat.channel.agents.filter(pk=to_agent.pk, is_active=True).first()
        if colleague is None:  # not named: the agent may not know who that is
            raise ServiceError("that agent does not answer this channel")
        if not colleague.is_online:
            raise ServiceError(f"{colleague.name} is offline: choose an online agent")
        chat.agents.set([to_agent])
        told = f"{agent.name} transferred the chat to {to_agent.name}."
    else:
        assert department is not None
        chat.agents.clear()
        chat.state = Chat.State.QUEUED
        chat.queued_at = now
        chat.department = department
        told = f"{agent.name} transferred the chat to the {department.name} department."
    chat.transferred_at, chat.transferred_by, chat.transfer_note = now, agent, note
    chat.agent_typing_until = None
    chat.save(
        update_fields=[
            "state", "queued_at", "department", "transferred_at", "transferred_by",
            "transfer_note", "agent_typing_until",
        ]
    )  # fmt: skip
    # The system note names its agent: chat_finished's ``agents`` still lists
    # whoever handed the chat on (docs/webhooks.md).
    _post(chat, Message.Author.SYSTEM, Content("text", told, {}), agent)
    if note:
        _post(chat, Message.Author.NOTE, Content("text", note, {}), agent)
    events.publish(
        events.ChatTransferred(
            chat_id=chat.pk,
            from_agent_id=agent.pk,
            to_agent_id=to_agent.pk if to_agent else None,
            department_id=department.pk if department else None,
        )
    )
    return chat


@transaction.atomic
def post_bot_message(*, chat: Chat, content: Content, sender_name: str = "") -> Message:
    """A bot's answer; ``sender_name`` is the name the client and agents see."""
    chat = _lock(chat)
    if chat.state != Chat.State.BOT:
        raise InvalidState(f"the chat is {chat.state}: only a chat with the bot takes its messages")
    return _post(chat, Message.Author.BOT, content, sender_name=sender_name)


@transaction.atomic
def post_system_message(*, chat: Chat, text: str) -> Message:
    return _post(chat, Message.Author.SYSTEM, Content("text", text, {}))


@transaction.atomic
def set_client_typing(*, chat: Chat, typing: bool) -> Chat:
    """typein / typeout from the client; typing expires after TYPING_TTL_SECONDS."""
    until = timezone.now() + timedelta(seconds=settings.TYPING_TTL_SECONDS) if typing else None
    Chat.objects.filter(pk=chat.pk).update(client_typing_until=until)
    chat.client_typing_until = until
    events.publish(events.TypingChanged(chat_id=chat.pk, who="client", typing=typing))
    return chat


@transaction.atomic
def set_agent_typing(*, chat: Chat, agent: Agent, typing: bool) -> Chat:
    chat = _lock(chat)
    if chat.state != Chat.State.ACTIVE or not chat.agents.filter(pk=agent.pk).exists():
        raise InvalidState("typing is sent only in an active chat of yours")
    until = timezone.now() + timedelta(seconds=settings.TYPING_TTL_SECONDS) if typing else None
    chat.agent_typing_until = until
    chat.save(update_fields=["agent_typing_until"])
    events.publish(
        events.TypingChanged(chat_id=chat.pk, who="agent", typing=typing, agent_id=agent.pk)
    )
    return chat


@transaction.atomic
def finish_chat(*, chat: Chat, agent: Agent | None = None, idle: bool = False) -> Chat:
    """Finish ``chat``: by ``agent``, by the system, or by the idle timer (``idle``)."""
    chat = _lock(chat)
    if not chat.is_open:
        raise InvalidState("the chat is already finished")
    other_agents_chat = (
        agent is not None
        and chat.state == Chat.State.ACTIVE
        and not chat.agents.filter(pk=agent.pk).exists()
    )
    if other_agents_chat:
        raise InvalidState("the chat was accepted by another agent")
    chat.state = Chat.State.FINISHED
    chat.finished_at = timezone.now()
    chat.client_typing_until = None
    chat.agent_typing_until = None
    chat.save(update_fields=["state", "finished_at", "client_typing_until", "agent_typing_until"])
    events.publish(
        events.ChatFinished(chat_id=chat.pk, agent_id=agent.pk if agent else None, idle=idle)
    )
    return chat


@transaction.atomic
def finish_idle_chat(*, chat: Chat, idle_since: datetime) -> bool:
    """Finish ``chat`` if it is open and nothing was written in it since ``idle_since``.

    Checked under the chat's lock, so a message that just arrived keeps it open.
    """
    chat = _lock(chat)
    last = chat.messages.order_by("-created").values_list("created", flat=True).first()
    if not chat.is_open or (last or chat.created) >= idle_since:
        return False
    finish_chat(chat=chat, idle=True)
    return True


@transaction.atomic
def rate_chat(*, chat: Chat, rating: str) -> Chat:
    """The client's verdict: positive, negative, or "" for none."""
    if rating not in ("", *Chat.Rating.values):
        raise ServiceError("rating must be positive, negative or empty")
    Chat.objects.filter(pk=chat.pk).update(rating=rating)
    chat.rating = rating
    events.publish(events.ChatRated(chat_id=chat.pk, rating=rating))
    return chat


@transaction.atomic
def blacklist_client(*, chat: Chat, agent: Agent | None = None, reason: str = "") -> Chat:
    """Blacklist the client of ``chat`` (an abusive or spamming client): the
    chat is finished (its ``chat_finished`` says ``blacklisted``), and from
    now on the client's messages are kept but open no chat and reach no
    agent, bot or webhook, until an agent or an admin lifts it."""
    _lock_client(chat.client_id)  # first, as post_client_message takes them
    chat = _lock(chat)
    Client.objects.filter(pk=chat.client_id).update(
        blacklisted_at=timezone.now(), blacklist_reason=reason[:500], blacklisted_by=agent
    )
    chat.blacklisted = True
    chat.save(update_fields=["blacklisted"])
    events.publish(events.ClientBlacklisted(chat_id=chat.pk, client_id=chat.client_id))
    if chat.is_open:
        return finish_chat(chat=chat)
    # Blacklisted from an earlier chat: the one the client has open now ends too.
    current = _open_chat_of(chat.client, lock=True)
    if current is not None:
        Chat.objects.filter(pk=current.pk).update(blacklisted=True)
        finish_chat(chat=current)
    return chat


@transaction.atomic
def lift_blacklist(*, client: Client) -> Client:
    """The client may write again: its next message opens a chat as usual."""
    Client.objects.filter(pk=client.pk).update(
        blacklisted_at=None, blacklist_reason="", blacklisted_by=None
    )
    client.refresh_from_db()
    events.publish(events.BlacklistLifted(client_id=client.pk))
    return client


@transaction.atomic
def retry_message(*, message: Message, agent: Agent) -> Message:
    """Send a message that was not delivered once more (the agent's "retry")."""
    message = Message.objects.select_for_update().get(pk=message.pk)
    if message.author != Message.Author.AGENT or message.agent_id != agent.pk:
        raise InvalidState("only your own messages can be sent again")
    if message.delivery_status != Message.Delivery.FAILED:
        raise InvalidState("only a message that was not delivered can be sent again")
    message.delivery_status = Message.Delivery.PENDING
    message.delivery_error = ""
    message.save(update_fields=["delivery_status", "delivery_error"])
    events.publish(events.MessageRetryRequested(chat_id=message.chat_id, message_id=message.pk))
    return message


@transaction.atomic
def mark_message_delivery(*, message: Message, status: str, error: str = "") -> Message:
    """Record an outbound message's delivery state (set by the integration apps)."""
    if status not in Message.Delivery.values:
        raise ServiceError(f"unknown delivery status {status!r}")
    Message.objects.filter(pk=message.pk).update(delivery_status=status, delivery_error=error)
    message.delivery_status = status
    message.delivery_error = error
    events.publish(
        events.MessageDeliveryChanged(chat_id=message.chat_id, message_id=message.pk, status=status)
    )
    return message


# --- the CRM side panel -----------------------------------------------------


@transaction.atomic
def set_crm_panel(
    *,
    chat: Chat,
    custom_data: list[dict[str, str]],
    contact_info: Mapping[str, str],
    crm_link: str,
    enable_assign: bool,
    page: Mapping[str, str],
) -> Chat:
    """Show the CRM's answer to the agent (the chat_accepted reply, already
    checked and cleaned by the developer-webhooks app).

    The contact details are saved with the client as if the client had typed
    them, and with the chat for its archive.
    """
    chat = _lock(chat)
    chat.custom_data = list(custom_data)
    chat.contact_info = dict(contact_info)
    chat.crm_link = crm_link
    chat.enable_assign = enable_assign
    chat.crm_page = dict(page)
    chat.save(
        update_fields=["custom_data", "contact_info", "crm_link", "enable_assign", "crm_page"]
    )
    if contact_info:
        update_client_contact(client=chat.client, contact=contact_info, source="crm")
    events.publish(events.CrmPanelChanged(chat_id=chat.pk))
    return chat


def show_visitor_data(*, chat: Chat) -> None:
    """What the site said of the visitor (``setCustomData``, the page) changed:
    the agents' side panel shows it anew."""
    events.publish(events.CrmPanelChanged(chat_id=chat.pk))


@transaction.atomic
def request_crm_assign(*, chat: Chat, agent: Agent) -> Chat:
    """The agent's "Assign to CRM card": the CRM is asked to bind the client
    to the card of the chat's ``crm_link``."""
    chat = _lock(chat)
    if not chat.enable_assign or not chat.crm_link:
        raise InvalidState("the CRM did not offer to assign this chat")
    if chat.state != Chat.State.ACTIVE or not chat.agents.filter(pk=agent.pk).exists():
        raise InvalidState("only the agent answering the chat can assign it")
    if chat.crm_assigned_at is not None:
        return chat  # pressing it twice asks the CRM once
    chat.crm_assigned_at = timezone.now()
    chat.save(update_fields=["crm_assigned_at"])
    events.publish(
        events.CrmAssignRequested(chat_id=chat.pk, agent_id=agent.pk, crm_link=chat.crm_link)
    )
    return chat


@transaction.atomic
def crm_assign_failed(*, chat: Chat, error: str) -> Chat:
    """The CRM refused the assignment, or never answered: the button may be
    pressed again, and the agents see why."""
    chat = _lock(chat)
    if chat.crm_assigned_at is None:
        return chat
    chat.crm_assigned_at = None
    chat.save(update_fields=["crm_assigned_at"])
    post_system_message(chat=chat, text=f"The CRM did not take the assignment: {error}")
    events.publish(events.CrmPanelChanged(chat_id=chat.pk))
    return chat


# --- calls ------------------------------------------------------------------

CALLBACK_DISABLED = "Callback disabled"
# Spelled as the original platform's widget returns it; pages compare the string.
CALLBACK_UNAVAILABLE = "Callback unavaiable"
PHONE = re.compile(r"\+?[0-9][0-9 ()./-]{5,30}")


class CallbackUnavailable(ServiceError):
    code = "callback_unavailable"


def normalise_phone(phone: str) -> str:
    """``phone`` as ``+`` and digits, or ServiceError when it is no phone number."""
    phone = phone.strip()
    digits = re.sub(r"\D", "", phone)
    if not PHONE.fullmatch(phone) or not 7 <= len(digits) <= 15:
        raise ServiceError("enter a phone number: 7 to 15 digits, optionally starting with +")
    return ("+" if phone.startswith("+") else "") + digits


def callback_unavailable_reason(
    *, channel: Channel, client: Client | None = None, at: datetime | None = None
) -> str:
    """Why a callback cannot be requested now ("" when it can): switched off,
    outside the channel's working days and hours, or a call of the client's
    still open."""
    rules = CallbackSettings.objects.filter(channel=channel).first()
    if rules is None or not rules.enabled:
        return CALLBACK_DISABLED
    try:
        zone = ZoneInfo(rules.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    local = (at or timezone.now()).astimezone(zone)
    in_hours = rules.opens_at <= local.time() < rules.closes_at
    if local.isoweekday() not in (rules.working_days or []) or not in_hours:
        return CALLBACK_UNAVAILABLE
    if client is not None and client.is_blacklisted:
        return CALLBACK_UNAVAILABLE  # as offline as the chat it sees
    if client is not None and client.calls.filter(status__in=Call.OPEN_STATUSES).exists():
        return CALLBACK_UNAVAILABLE
    return ""


@transaction.atomic
def request_callback(*, channel: Channel, phone: str, client: Client | None = None) -> Call:
    """A client asks to be called back: the call waits for one of the
    channel's agents, and the telephony backend hears of it after commit."""
    number = normalise_phone(phone)
    if client is not None:
        # One open call per client: a second request waits for the first to commit.
        client = Client.objects.select_for_update().get(pk=client.pk)
    reason = callback_unavailable_reason(channel=channel, client=client)
    if reason:
        raise CallbackUnavailable(reason)
    chat = client.chats.order_by("-created", "-id").first() if client else None
    call = Call.objects.create(
        channel=channel, client=client, chat=chat, type=Call.Type.CALLBACK, phone=number
    )
    events.publish(events.CallChanged(call_id=call.pk, status=call.status))
    transaction.on_commit(lambda: telephony.backend().call_requested(call))
    return call


# Which status may follow which; "error" and "end" may follow any open one.
_CALL_STEPS: dict[str, tuple[str, ...]] = {
    Call.Status.AGENT_CONNECTED: (Call.Status.START,),
    Call.Status.CLIENT_CONNECTED: (Call.Status.START, Call.Status.AGENT_CONNECTED),
    Call.Status.END: Call.OPEN_STATUSES,
    Call.Status.ERROR: Call.OPEN_STATUSES,
}


@transaction.atomic
def record_call_progress(
    *, call: Call, agent: Agent, status: str, reason: str = "", record_url: str = ""
) -> Call:
    """An agent (or the telephony backend for one) records how a call goes."""
    call = Call.objects.select_for_update().get(pk=call.pk)
    if status not in _CALL_STEPS:
        raise ServiceError("status must be agent_connected, client_connected, end or error")
    if call.status not in _CALL_STEPS[status]:
        raise InvalidState(f"the call is {call.status} and cannot become {status}")
    reason, record_url = reason.strip(), record_url.strip()
    if status == Call.Status.ERROR and not reason:
        raise ServiceError("say why the call failed")
    if record_url and (status != Call.Status.END or not _is_http_url(record_url)):
        raise ServiceError("a recording URL is an http(s) URL, given when the call ended")
    now = timezone.now()
    call.status = status
    call.reason = reason[:500] if status == Call.Status.ERROR else ""
    call.record_url = record_url
    call.agent = call.agent or agent
    call.updated = now
    if not call.is_open:
        call.ended_at = now
    call.save()
    events.publish(events.CallChanged(call_id=call.pk, status=status))
    return call


def _is_http_url(value: str) -> bool:
    try:
        URLValidator(schemes=["http", "https"])(value)
    except ValidationError:
        return False
    return len(value) <= 1000


# --- offline messages -------------------------------------------------------

OFFLINE_MESSAGE_MAX = 4000


@transaction.atomic
def leave_offline_message(
    *,
    channel: Channel,
    message: str,
    name: str = "",
    email: str = "",
    phone: str = "",
    description: str = "",
    page_url: str = "",
    page_title: str = "",
    client: Client | None = None,
) -> OfflineMessage | None:
    """Store what a visitor left while no agent was online (None: kept for a
    blacklisted client, told to nobody).

    The message and a way to answer (an e-mail address or a phone number)
    are required; a malformed one is an error that names it.
    """
    message, name, email = message.strip(), name.strip(), email.strip()
    if any("\x00" in value for value in (message, name, email, phone, description, page_title)):
        raise ServiceError("the message holds a NUL character")
    if not message:
        raise ServiceError("write a message")
    if len(message) > OFFLINE_MESSAGE_MAX:
        raise ServiceError(f"the message is longer than {OFFLINE_MESSAGE_MAX} characters")
    if not email and not phone.strip():
        raise ServiceError("give an e-mail address or a phone number so that we can answer")
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise ServiceError(f"{email!r} is not a valid e-mail address") from None
        if len(email) > 255:
            raise ServiceError("the e-mail address is longer than 255 characters")
    if phone.strip():
        phone = normalise_phone(phone)
    if len(name) > 255 or len(description) > 4000:
        raise ServiceError("the name or the description is too long")
    if client is not None and client.is_blacklisted:
        # Taken as usual, kept with the client's other messages, told to nobody.
        reach = ", ".join(filter(None, [name, email, phone]))
        kept = Content(Message.Type.TEXT, f"{message}\n\n(offline form: {reach})"[:4000], {})
        _keep_blacklisted_message(client, kept, "")
        return None
    offline = OfflineMessage.objects.create(
        channel=channel,
        client=client,
        name=name,
        email=email,
        phone=phone,
        description=description.strip(),
        message=message,
        page_url=page_url[:1000],  # a link on the pages only when it is http(s)
        page_title=page_title[:500],
    )
    events.publish(events.OfflineMessageReceived(offline_message_id=offline.pk))
    return offline


@transaction.atomic
def mark_offline_message_handled(
    *, offline_message: OfflineMessage, agent: Agent
) -> OfflineMessage:
    offline = OfflineMessage.objects.select_for_update().get(pk=offline_message.pk)
    if offline.handled_at is None:
        offline.handled_at = timezone.now()
        offline.handled_by = agent
        offline.save(update_fields=["handled_at", "handled_by"])
        events.publish(
            events.OfflineMessageHandled(offline_message_id=offline.pk, agent_id=agent.pk)
        )
    return offline


# --- agents' own settings -----------------------------------------------------


@transaction.atomic
def update_agent_profile(
    *, agent: Agent, name: str, photo_url: str, notify_sound: bool, notify_desktop: bool
) -> Agent:
    """The settings page: the name clients see (``sender.name`` in A3), the
    photo (``sender.photo``), and the notification switches."""
    name = name.strip()
    if not name or len(name) > 200:
        raise ServiceError("a name of 1 to 200 characters")
    photo_url = photo_url.strip()
    if photo_url:
        try:
            URLValidator(schemes=["http", "https"])(photo_url)
        except ValidationError as error:
            raise ServiceError("the photo must be an http:// or https:// URL") from error
        if len(photo_url) > 500:
            raise ServiceError("the photo URL is longer than 500 characters")
    Agent.objects.filter(pk=agent.pk).update(
        name=name, photo_url=photo_url, notify_sound=notify_sound, notify_desktop=notify_desktop
    )
    agent.refresh_from_db()
    return agent
