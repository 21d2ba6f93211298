"""A chat's life: opened by a client's message, queued, accepted, written
in, transferred, finished; a blacklisted client's messages kept aside."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone, translation
from django.utils.translation import gettext, gettext_lazy, ngettext_lazy

from agents import audit, events, idempotency, languages, live, routing, selectors
from agents.content import Content
from agents.hours import STANDARD_AWAY_MESSAGE
from agents.models import (
    Agent,
    Channel,
    Chat,
    ChatOffer,
    ChatSeen,
    Client,
    Department,
    Message,
)
from agents.services.errors import InvalidState, NotAllowed, ServiceError
from agents.services.locks import _lock, _lock_client, _open_chat_of
from agents.services.offers import end_offer, offer_chat, offer_to_chosen, offer_waiting
from config.text import CLIENT_TEXT_LIMIT, TEXT_LIMIT, storable


@transaction.atomic
def open_chat(
    *, client: Client, state: str = Chat.State.QUEUED, department: Department | None = None
) -> Chat:
    """Open a chat for ``client``, with the bot (BOT) or straight in the queue."""
    if _open_chat_of(client) is not None:
        raise InvalidState("the client already has an open chat")
    return _announce(_insert_chat(client, state, department))


def _insert_chat(
    client: Client, state: str, department: Department | None, *, at: datetime | None = None,
    **row: Any,
) -> Chat:  # fmt: skip
    """The new chat's row (the one-open-chat constraint refuses a second),
    made ``at`` (now by default); ``row``: more of its fields, known before
    the INSERT."""
    if state not in (Chat.State.BOT, Chat.State.QUEUED):
        raise InvalidState(f"a chat opens in state bot or queued, not {state}")
    now = at or timezone.now()
    return Chat.objects.create(
        channel=client.channel,
        client=client,
        state=state,
        department=department,
        created=now,
        queued_at=now if state == Chat.State.QUEUED else None,
        queue_entered_at=now if state == Chat.State.QUEUED else None,
        **row,
    )


def _announce(chat: Chat) -> Chat:
    """Tell of a chat just opened, and offer it."""
    events.publish(events.ChatOpened(chat_id=chat.pk, state=chat.state, chat=chat))
    offer_chat(chat)
    return chat


def _open_or_join(
    client: Client, state: str, department: Department | None, *, raced: bool, **row: Any
) -> tuple[Chat, bool]:
    """Open the client's chat (and whether it was opened here). With
    ``raced``, a concurrent first message may have opened it just now (the
    partial unique constraint says so): then join that one. Only the INSERT
    is in the savepoint, so nothing it would roll back was told (the live
    events of a ``batched`` block are written at its end)."""
    if not raced:
        return _announce(_insert_chat(client, state, department, **row)), True
    try:
        with transaction.atomic():
            chat = _insert_chat(client, state, department, **row)
    except IntegrityError:
        joined = _open_chat_of(client, lock=True)
        if joined is None:
            raise
        return joined, False
    return _announce(chat), True


@transaction.atomic(savepoint=False)  # the inbound path's verb: no savepoint of its own
def post_client_message(
    *,
    client: Client,
    content: Content,
    external_id: str = "",
    open_state: str | None = None,
    department: Department | None = None,
    client_locked: bool = False,
    language: str = "",
    new_client: bool = False,
) -> Message:
    """Store a client's message, opening a chat when the client has none open.

    A new chat opens with the bot when the channel has one (``agents.routing``),
    else in the queue; ``open_state`` overrides that. ``department`` is the
    one the client chose, for a chat it opens. ``client_locked``: ``client``
    was read under its lock in this transaction (``get_or_create_client(lock=True)``).
    ``new_client``: ``client`` was made in this transaction (locked, no chat
    yet: nothing to read). ``language``: the one the client's widget speaks
    (``record_language``), kept before the away message is said in it.
    """
    blacklisted_at = None if new_client else _client_lock(client, client_locked)
    return _post_client_message(
        client, blacklisted_at, content, external_id, open_state, department, language,
        new_client=new_client,
    )  # fmt: skip


@transaction.atomic(savepoint=False)
def post_client_message_once(
    *, client: Client, content: Content, external_id: str, client_locked: bool = False
) -> Message | None:
    """``post_client_message``, unless the client sent a message with this
    ``external_id`` before: then nothing is stored (None). The check runs
    under the client's lock, so two concurrent retries of one message store
    it once."""
    blacklisted_at = _client_lock(client, client_locked)
    if (
        external_id
        and Message.objects.filter(
            chat__client=client, author=Message.Author.CLIENT, external_id=external_id
        ).exists()
    ):
        return None
    return _post_client_message(client, blacklisted_at, content, external_id, None, None)


def _client_lock(client: Client, locked: bool) -> datetime | None:
    """When the client was blacklisted, read under the client's lock (taken
    here unless ``locked``): a blacklisting that commits meanwhile is seen
    here, not after this message opened a chat."""
    return client.blacklisted_at if locked else _lock_client(client.pk)


def _post_client_message(
    client: Client,
    blacklisted_at: datetime | None,
    content: Content,
    external_id: str,
    open_state: str | None,
    department: Department | None,
    language: str = "",
    *,
    new_client: bool = False,
) -> Message:
    """The client's message, its client locked (``blacklisted_at`` read under
    the lock). Each row is written once with all that is known: a chat it
    opens is inserted with the message's facts and language, a chat it
    joins is updated once, and the live events go in one INSERT."""
    if blacklisted_at is not None:
        client.blacklisted_at = blacklisted_at
        return _keep_blacklisted_message(client, content, external_id)
    now = timezone.now()  # under the client's lock: the client's messages keep their order
    with live.batched():
        chat = None if new_client else _open_chat_of(client, lock=True)
        opened = False
        if chat is None:
            if open_state is None:
                opens_with_bot = routing.opens_with_bot(client.channel)
                open_state = Chat.State.BOT if opens_with_bot else Chat.State.QUEUED
            # Opened by this message: made at its time, with its facts.
            facts = {"at": now, "last_message_at": now, "shown_messages": 1, "language": language}
            chat, opened = _open_or_join(
                client, open_state, department, raced=not new_client, **facts
            )
        message = Message.objects.create(
            chat=chat,
            author=Message.Author.CLIENT,
            type=content.type,
            text=content.text,
            payload=content.payload,
            external_id=external_id,
            created=now,
        )
        if not opened:
            _joined_by(chat, message, language)
        events.publish(
            events.MessagePosted(
                chat_id=chat.pk, message_id=message.pk, author=message.author, message=message
            )
        )
        _away_message(chat, client.channel)
    return message


def _joined_by(chat: Chat, message: Message, language: str) -> None:
    """A client's message in an open chat: its facts (and the widget's
    language, when the chat has none yet) in one UPDATE."""
    facts: dict[str, Any] = {
        "client_typing_until": None,
        "last_message_at": message.created,
        "shown_messages": F("shown_messages") + 1,
    }
    if language and not chat.language:
        facts["language"] = chat.language = language
    Chat.objects.filter(pk=chat.pk).update(**facts)
    chat.client_typing_until, chat.last_message_at = None, message.created
    chat.shown_messages += 1


def _away_message(chat: Chat, channel: Channel) -> None:
    """The channel's away message, once per chat, when the client writes in
    the queue while nobody can answer (docs/routing.md, "Business hours").
    It goes out as the channel's automatic answer (a bot message under the
    channel's name), as any answer reaches the client."""
    if not channel.away_message or chat.state != Chat.State.QUEUED:
        return
    if selectors.agents_online(channel=channel):
        return
    if chat.messages.filter(payload__has_key=Message.AWAY).exists():
        return
    text = channel.away_message
    # The standard text is no channel's own words: it speaks the chat's language.
    if text.strip() == STANDARD_AWAY_MESSAGE:
        with translation.override(languages.of_chat(chat)):
            text = gettext(STANDARD_AWAY_MESSAGE)
    post_channel_message(chat=chat, channel=channel, text=text, mark=Message.AWAY)


def post_channel_message(*, chat: Chat, channel: Channel, text: str, mark: str) -> Message:
    """The channel's own automatic answer (the away message, the idle
    warning): a bot message under the channel's name, so it reaches the
    client on every kind of channel as any answer does; ``mark`` names it
    in the payload. ``chat`` is read under its lock by the caller."""
    content = Content("text", text, {mark: True})
    return _post(chat, Message.Author.BOT, content, sender_name=channel.name)


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
    if chat.first_accepted_at is None:  # the wait the reports measure starts
        chat.queue_entered_at = chat.queued_at
    chat.save(update_fields=["state", "queued_at", "queue_entered_at"])
    events.publish(events.ChatQueued(chat_id=chat.pk, reason=reason))
    offer_chat(chat)
    return chat


@transaction.atomic
def return_chat_to_bot(*, chat: Chat, reason: str) -> Chat:
    """A queued chat goes back to the bot (no agent of the channel is online)."""
    chat = _lock(chat)
    if chat.state != Chat.State.QUEUED:
        raise InvalidState(f"only a queued chat can go back to the bot, this one is {chat.state}")
    end_offer(chat, ChatOffer.Outcome.WITHDRAWN)
    chat.state = Chat.State.BOT
    chat.queued_at = None
    if chat.first_accepted_at is None:  # no wait: the bot has the chat again
        chat.queue_entered_at = None
    chat.save(update_fields=["state", "queued_at", "queue_entered_at"])
    events.publish(events.ChatReturnedToBot(chat_id=chat.pk, reason=reason))
    return chat


@transaction.atomic
def accept_chat(*, chat: Chat, agent: Agent) -> Chat:
    """The agent's Reply: a queued (or bot) chat becomes ACTIVE with this agent."""
    chat = _lock(chat)
    if chat.state == Chat.State.ACTIVE and chat.agents.filter(pk=agent.pk).exists():
        return chat  # pressing Reply twice changes nothing
    if chat.state not in (Chat.State.QUEUED, Chat.State.BOT):
        raise InvalidState(
            gettext_lazy("the chat is %(state)s and cannot be accepted"), state=chat.state
        )
    # Reply takes the chat whoever it was offered to (docs/routing.md).
    taken = ChatOffer.Outcome.ACCEPTED if chat.offered_to_id == agent.pk else None
    end_offer(chat, taken or ChatOffer.Outcome.WITHDRAWN)
    chat.state = Chat.State.ACTIVE
    chat.accepted_at = timezone.now()
    chat.first_accepted_at = chat.first_accepted_at or chat.accepted_at
    chat.save(update_fields=["state", "accepted_at", "first_accepted_at"])
    chat.agents.add(agent)
    chat.handlers.add(agent)
    events.publish(events.ChatAccepted(chat_id=chat.pk, agent_id=agent.pk))
    return chat


# Rules by which an integration that sends a posted message out (the Chat
# API's A3) names the delivery state the message starts in, when it can tell
# without a query (its channel's row read with the chat): the message is
# inserted in that state, not updated to it right after. "" for no opinion.
DeliveryStateRule = Callable[[Chat, Message], str]
_delivery_state_rules: list[DeliveryStateRule] = []


def register_delivery_state_rule(rule: DeliveryStateRule) -> None:
    if rule not in _delivery_state_rules:
        _delivery_state_rules.append(rule)


def _post(
    chat: Chat, author: str, content: Content, agent: Agent | None = None, sender_name: str = ""
) -> Message:
    message = Message(
        chat=chat,
        author=author,
        agent=agent,
        sender_name=sender_name,
        type=content.type,
        text=content.text,
        payload=content.payload,
    )
    states = (rule(chat, message) for rule in _delivery_state_rules)
    message.delivery_status = next((state for state in states if state), Message.Delivery.NONE)
    message.save(force_insert=True)
    Chat.objects.filter(pk=chat.pk).update(**_facts_of(chat, message))
    chat.last_message_at = message.created
    # One INSERT for the live events of the message and of what its
    # subscribers do (an A3 delivery's "sending").
    with live.batched():
        events.publish(
            events.MessagePosted(
                chat_id=chat.pk, message_id=message.pk, author=author, message=message
            )
        )
    return message


def _facts_of(chat: Chat, message: Message) -> dict[str, Any]:
    """What ``message`` changes of its chat's row, written in the one UPDATE
    of each post: the last message's time, and the reports' facts (the
    messages the client saw, the first agent message; docs/reports.md).
    ``chat`` was read under its lock, so its first answer is as committed."""
    facts: dict[str, Any] = {"last_message_at": message.created}
    if message.author in SHOWN_AUTHORS:
        facts["shown_messages"] = F("shown_messages") + 1
        chat.shown_messages += 1
    if message.author == Message.Author.AGENT and chat.first_response_at is None:
        chat.first_response_at, chat.first_response_agent_id = message.created, message.agent_id
        facts.update(first_response_at=message.created, first_response_agent_id=message.agent_id)
    return facts


# The messages the client saw: the reports count these (notes and system lines are the agents').
SHOWN_AUTHORS = (Message.Author.CLIENT, Message.Author.AGENT, Message.Author.BOT)


@transaction.atomic
def mark_chat_seen(*, agent: Agent, chat: Chat, message_id: int) -> None:
    """``agent`` has read ``chat`` up to ``message_id``: the lists count only
    what comes after it. Never moves back (an older page's poll)."""
    seen, _ = ChatSeen.objects.get_or_create(agent=agent, chat=chat)
    ChatSeen.objects.filter(pk=seen.pk, last_seen_message_id__lt=message_id).update(
        last_seen_message_id=message_id
    )


@transaction.atomic
def post_agent_message(
    *, chat: Chat, agent: Agent, content: Content, idempotency_key: str = ""
) -> Message:
    """The agent's reply. With an ``Idempotency-Key`` the same agent used in
    this chat before, the reply that request stored, and nothing new: the
    key is claimed first, so a retry racing the first waits for it."""
    scope = selectors.reply_scope(agent=agent, chat=chat)
    if idempotency_key and not idempotency.claim(scope=scope, key=idempotency_key):
        first = selectors.replied_before(chat=chat, agent=agent, idempotency_key=idempotency_key)
        if first is not None:
            return first
    message = _post_agent_message(chat, agent, content)
    if idempotency_key:
        idempotency.remember(scope=scope, key=idempotency_key, made=message.pk)
    return message


def _post_agent_message(chat: Chat, agent: Agent, content: Content) -> Message:
    chat = _lock(chat)
    if chat.state != Chat.State.ACTIVE:
        raise InvalidState(
            gettext_lazy("the chat is %(state)s: press Reply before writing"), state=chat.state
        )
    if not chat.agents.filter(pk=agent.pk).exists():
        raise InvalidState(gettext_lazy("the chat was accepted by another agent"))
    if chat.agent_typing_until is not None:
        Chat.objects.filter(pk=chat.pk).update(agent_typing_until=None)
    return _post(chat, Message.Author.AGENT, content, agent)


NOTE_LIMIT = TEXT_LIMIT


@transaction.atomic
def post_note(*, chat: Chat, agent: Agent, text: str) -> Message:
    """An internal note: for the agents of the chat's channel only, in any
    state of the chat; never sent to the client, a bot or a webhook (each of
    them sends only the authors it knows, and ``note`` is none of them)."""
    text = text.strip()
    if not text or len(text) > NOTE_LIMIT:
        raise ServiceError(
            ngettext_lazy(
                "write a note of up to %(limit)d character first",
                "write a note of up to %(limit)d characters first",
                "limit",
            ),
            limit=NOTE_LIMIT,
        )
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
            raise ServiceError(gettext_lazy("that agent does not answer this channel"))
    if department_id is not None:
        department = Department.objects.filter(pk=department_id).first()
        if department is None:
            raise ServiceError(gettext_lazy("no such department"))
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
        raise InvalidState(gettext_lazy("only the agent answering an active chat can transfer it"))
    if (to_agent is None) == (department is None):
        raise ServiceError(
            gettext_lazy("choose one agent or one department to transfer the chat to")
        )
    note = note.strip()[:NOTE_LIMIT]
    now = timezone.now()
    if to_agent is not None:
        if to_agent.pk == agent.pk:
            raise ServiceError(gettext_lazy("the chat is already yours"))
        _online_colleague(chat, to_agent)
        chat.agents.set([to_agent])
        chat.handlers.add(to_agent)
        told = f"{agent.name} transferred the chat to {to_agent.name}."
    else:
        assert department is not None
        chat.agents.clear()
        chat.state = Chat.State.QUEUED
        chat.queued_at = now
        chat.department = department
        told = f"{agent.name} transferred the chat to the {department.name} department."
    chat.transferred_at, chat.transferred_by, chat.transfer_note = now, agent, note
    chat.transfer_count += 1
    chat.agent_typing_until = None
    chat.save(
        update_fields=[
            "state", "queued_at", "department", "transferred_at", "transferred_by",
            "transfer_note", "transfer_count", "agent_typing_until",
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
    offer_chat(chat)  # back in the queue: offered afresh
    offer_waiting([agent.pk])  # the agent who handed it on has room again
    return chat


def _online_colleague(chat: Chat, agent: Agent) -> Agent:
    """``agent`` as an active agent of the chat's channel who is online, the
    one a transfer or a reassignment may hand the chat to."""
    colleague = chat.channel.agents.filter(pk=agent.pk, is_active=True).first()
    if colleague is None:  # not named: the agent may not know who that is
        raise ServiceError(gettext_lazy("that agent does not answer this channel"))
    if not colleague.is_online:
        raise ServiceError(
            gettext_lazy("%(name)s is offline: choose an online agent"), name=colleague.name
        )
    return colleague


@transaction.atomic
def reassign_chat(*, chat: Chat, by: Agent, to_agent: Agent) -> Chat:
    """A supervisor moves a chat to an agent of its channel (docs/routing.md,
    "Team"). An active chat becomes theirs at once, as a transfer would make
    it (a system note says who moved it from whom); a queued chat is offered
    to them, whatever their load, and their Reply takes it. They are told on
    their page; the client is not interrupted."""
    if not by.supervises or not selectors.visible_channels(by).filter(pk=chat.channel_id).exists():
        raise NotAllowed(
            gettext_lazy("only supervisors of the chat's channel and admins reassign it")
        )
    chat = _lock(chat)
    colleague = _online_colleague(chat, to_agent)
    if chat.state == Chat.State.QUEUED:
        if chat.offered_to_id == colleague.pk:
            raise ServiceError(
                gettext_lazy("the chat is offered to %(name)s already"), name=colleague.name
            )
        offer_to_chosen(chat, colleague)
        return chat
    if chat.state != Chat.State.ACTIVE:
        raise InvalidState(
            gettext_lazy("the chat is %(state)s: only queued and active chats are reassigned"),
            state=chat.state,
        )
    previous = list(chat.agents.all())
    if [agent.pk for agent in previous] == [colleague.pk]:
        raise ServiceError(gettext_lazy("the chat is %(name)s's already"), name=colleague.name)
    chat.agents.set([colleague])
    chat.handlers.add(colleague)
    chat.transferred_at, chat.transferred_by, chat.transfer_note = timezone.now(), by, ""
    chat.transfer_count += 1
    chat.agent_typing_until = None
    chat.save(
        update_fields=[
            "transferred_at", "transferred_by", "transfer_note", "transfer_count",
            "agent_typing_until",
        ]
    )  # fmt: skip
    names = ", ".join(agent.name for agent in previous) or "nobody"
    told = f"{by.name} reassigned the chat from {names} to {colleague.name}."
    # Signed by the agent it leaves, as a transfer's note is: chat_finished's
    # ``agents`` still lists whoever answered before (docs/webhooks.md).
    _post(chat, Message.Author.SYSTEM, Content("text", told, {}), previous[0] if previous else by)
    events.publish(
        events.ChatTransferred(
            chat_id=chat.pk,
            from_agent_id=previous[0].pk if previous else by.pk,
            to_agent_id=colleague.pk,
            department_id=None,
        )
    )
    offer_waiting([agent.pk for agent in previous])  # they have room again
    return chat


@transaction.atomic(savepoint=False)  # B2's verb: in its transaction, no savepoint of its own
def post_bot_message(
    *, chat: Chat, content: Content, sender_name: str = "", chat_locked: bool = False
) -> Message:
    """A bot's answer; ``sender_name`` is the name the client and agents see.
    ``chat_locked``: ``chat`` was read under its lock in this transaction."""
    chat = chat if chat_locked else _lock(chat)
    if chat.state != Chat.State.BOT:
        raise InvalidState(f"the chat is {chat.state}: only a chat with the bot takes its messages")
    return _post(chat, Message.Author.BOT, content, sender_name=sender_name)


@transaction.atomic
def post_system_message(*, chat: Chat, text: str) -> Message:
    # Read again under its lock: the message's event carries the chat as it is.
    return _post(_lock(chat), Message.Author.SYSTEM, Content("text", text, {}))


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
        raise InvalidState(gettext_lazy("typing is sent only in an active chat of yours"))
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
        raise InvalidState(gettext_lazy("the chat is already finished"))
    other_agents_chat = (
        agent is not None
        and chat.state == Chat.State.ACTIVE
        and not chat.agents.filter(pk=agent.pk).exists()
    )
    if other_agents_chat:
        raise InvalidState(gettext_lazy("the chat was accepted by another agent"))
    end_offer(chat, ChatOffer.Outcome.WITHDRAWN)
    active = chat.state == Chat.State.ACTIVE
    freed = list(chat.agents.values_list("pk", flat=True)) if active else []
    chat.state = Chat.State.FINISHED
    chat.finished_at = timezone.now()
    chat.client_typing_until = None
    chat.agent_typing_until = None
    chat.save(update_fields=["state", "finished_at", "client_typing_until", "agent_typing_until"])
    events.publish(
        events.ChatFinished(chat_id=chat.pk, agent_id=agent.pk if agent else None, idle=idle)
    )
    offer_waiting(freed)
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
def rate_chat(*, chat: Chat, rating: str, comment: str = "") -> Chat:
    """The client's verdict: positive, negative, or "" for none, with what
    they wrote beside it (up to CLIENT_TEXT_LIMIT characters; none without a
    rating). Rating again replaces both."""
    if rating not in ("", *Chat.Rating.values):
        raise ServiceError("rating must be positive, negative or empty")
    comment = storable(comment).strip()
    if comment and not rating:
        raise ServiceError("a comment goes with a rating: positive or negative")
    if len(comment) > CLIENT_TEXT_LIMIT:
        raise ServiceError(f"the comment is longer than {CLIENT_TEXT_LIMIT} characters")
    Chat.objects.filter(pk=chat.pk).update(rating=rating, rating_comment=comment)
    chat.rating, chat.rating_comment = rating, comment
    events.publish(events.ChatRated(chat_id=chat.pk, rating=rating))
    return chat


@transaction.atomic
def record_consent(*, chat: Chat, version: int) -> Chat:
    """The client accepted version ``version`` of its channel's consent text
    before the chat's first message (the widget's, docs/widget.md): kept with
    the chat, with the time, for agents and the client's export."""
    now = timezone.now()
    Chat.objects.filter(pk=chat.pk).update(consent_version=version, consent_at=now)
    chat.consent_version, chat.consent_at = version, now
    return chat


def record_language(*, chat: Chat, language: str) -> Chat:
    """The language the client's widget spoke when ``chat`` started, kept
    with the chat for its transcript and away message (docs/widget.md,
    "Languages"); a chat keeps the first one it was given."""
    if chat.language:
        return chat
    Chat.objects.filter(pk=chat.pk, language="").update(language=language)
    chat.language = language
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
    # The reason is the agent's text about the client: not written to the log.
    audit.record(
        audit.Action.CLIENT_BLACKLISTED,
        actor=agent,
        target=audit.of_client(chat.client),
        chat=chat.pk,
    )
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
def lift_blacklist(*, client: Client, by: Agent | None = None) -> Client:
    """The client may write again: its next message opens a chat as usual.
    ``by``: the agent or admin who lifted it (the audit log)."""
    Client.objects.filter(pk=client.pk).update(
        blacklisted_at=None, blacklist_reason="", blacklisted_by=None
    )
    audit.record(audit.Action.CLIENT_BLACKLIST_LIFTED, actor=by, target=audit.of_client(client))
    client.refresh_from_db()
    events.publish(events.BlacklistLifted(client_id=client.pk))
    return client


@transaction.atomic
def retry_message(*, message: Message, agent: Agent) -> Message:
    """Send a message that was not delivered once more (the agent's "retry")."""
    message = Message.objects.select_for_update().get(pk=message.pk)
    if message.author != Message.Author.AGENT or message.agent_id != agent.pk:
        raise InvalidState(gettext_lazy("only your own messages can be sent again"))
    if message.delivery_status != Message.Delivery.FAILED:
        raise InvalidState(gettext_lazy("only a message that was not delivered can be sent again"))
    message.delivery_status = Message.Delivery.PENDING
    message.delivery_error = ""
    message.save(update_fields=["delivery_status", "delivery_error"])
    events.publish(events.MessageRetryRequested(chat_id=message.chat_id, message_id=message.pk))
    return message


@transaction.atomic(savepoint=False)  # on the path of each agent and bot message
def mark_message_delivery(
    *, message: Message, status: str, error: str = "", stored: bool = False
) -> Message:
    """Record an outbound message's delivery state (set by the integration apps).
    ``stored``: the message's row holds this state already (it was inserted
    in it, ``register_delivery_state_rule``): the change is only published."""
    if status not in Message.Delivery.values:
        raise ServiceError(f"unknown delivery status {status!r}")
    if not stored:
        Message.objects.filter(pk=message.pk).update(delivery_status=status, delivery_error=error)
    message.delivery_status = status
    message.delivery_error = error
    carried = message if Message.chat.is_cached(message) else None
    events.publish(
        events.MessageDeliveryChanged(
            chat_id=message.chat_id, message_id=message.pk, status=status, message=carried
        )
    )
    return message
