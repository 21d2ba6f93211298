"""Reads: what an agent may see. An agent sees only chats, calls and offline
messages of its channels; an admin, those of every channel (docs/routing.md,
"Roles")."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connections
from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from agents import hours, idempotency
from agents.models import (
    Agent,
    Call,
    Channel,
    Chat,
    ChatSeen,
    Department,
    Label,
    Message,
    OfflineMessage,
)


def agents_online(*, channel: Channel) -> bool:
    """Whether one of the channel's agents is online to take a chat: never
    outside the channel's business hours (docs/routing.md). A1's status, the
    widget's mode and a bot's INVITE_AGENT all ask this."""
    if not hours.is_open(channel):
        return False
    return channel.agents.filter(is_online=True, is_active=True).exists()


def visible_channels(agent: Agent) -> QuerySet[Channel]:
    """The channels whose chats ``agent`` sees: their own; an admin's, every one."""
    if agent.role == Agent.Role.ADMIN:
        return Channel.objects.all()
    return Channel.objects.filter(agents=agent)


def chats_for_agent(*, agent: Agent, state: str | None = None) -> QuerySet[Chat]:
    """Chats of my channels, newest first; the queue the longest-waiting first."""
    chats = Chat.objects.filter(channel__in=visible_channels(agent)).select_related(
        "channel", "client", "department", "transferred_by"
    )
    if state:
        chats = chats.filter(state=state)
    if state == Chat.State.QUEUED:
        return _longest_waiting_first(chats)
    return chats.order_by("-created", "-id")


def offers_for_agent(*, agent: Agent) -> QuerySet[Chat]:
    """The queued chats offered to the agent now, the soonest to move on first."""
    chats = chats_for_agent(agent=agent, state=Chat.State.QUEUED).filter(offered_to=agent)
    return chats.order_by("offer_expires_at", "id")


def _longest_waiting_first(chats: QuerySet[Chat]) -> QuerySet[Chat]:
    """The queue's order: whoever has waited longest is answered first."""
    return chats.order_by(F("queued_at").asc(nulls_last=True), "created", "id")


def chat_for_agent(*, agent: Agent, chat_id: int) -> Chat:
    """The chat, or ``Chat.DoesNotExist`` when it is not on one of the agent's channels."""
    return chats_for_agent(agent=agent).get(pk=chat_id)


HIDDEN = Q(payload__has_key=Message.BLACKLISTED)


def shown(messages: QuerySet[Message]) -> QuerySet[Message]:
    """``messages`` without the hidden ones: the pages, the API, transcripts."""
    return messages.exclude(HIDDEN)


def messages_of(*, chat: Chat) -> QuerySet[Message]:
    """What agents see of a chat."""
    return shown(chat.messages.select_related("agent")).order_by("created", "id")


def agents_of(chat: Chat) -> list[Agent]:
    """Everyone who answered the chat: its agent now, and those who wrote in
    it or handed it on before a transfer (the transfer's system note names
    them; an agent who only left an internal note is not one of them)."""
    took_part = Q(chats=chat) | Q(
        messages__chat=chat, messages__author__in=(Message.Author.AGENT, Message.Author.SYSTEM)
    )
    return list(Agent.objects.filter(took_part).distinct().order_by("pk"))


def _with_first_message(chats: QuerySet[Chat]) -> QuerySet[Chat]:
    first = shown(Message.objects.filter(chat=OuterRef("pk"), author=Message.Author.CLIENT))
    first = first.order_by("created", "id")
    return chats.annotate(first_message=Subquery(first.values("text")[:1]))


def _by_activity(chats: QuerySet[Chat]) -> QuerySet[Chat]:
    """The most recently active chat first (its last message, else its opening)."""
    return chats.order_by(F("last_message_at").desc(nulls_last=True), "-created", "-id")


def _with_unread(chats: QuerySet[Chat], agent: Agent) -> QuerySet[Chat]:
    """``unread``: the client's messages after the last one ``agent`` read in
    the chat or the last one ``agent`` wrote there, whichever is later. An
    answer is proof of reading on every path (the pages, the agent API, a
    file, a note), so a chat answered through the API shows nothing unread."""
    seen = ChatSeen.objects.filter(chat=OuterRef("chat"), agent=agent).values(
        "last_seen_message_id"
    )[:1]
    mine = (
        Message.objects.filter(chat=OuterRef("chat"), agent=agent)
        .filter(author__in=(Message.Author.AGENT, Message.Author.NOTE))
        .order_by("-pk")
        .values("pk")[:1]
    )
    read_up_to = Greatest(Coalesce(Subquery(seen), Value(0)), Coalesce(Subquery(mine), Value(0)))
    unread = (
        shown(Message.objects.filter(chat=OuterRef("pk"), author=Message.Author.CLIENT))
        .filter(pk__gt=read_up_to)
        .order_by()
        .values("chat")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return chats.annotate(unread=Coalesce(Subquery(unread, output_field=IntegerField()), 0))


def _listed(chats: QuerySet[Chat], agent: Agent) -> QuerySet[Chat]:
    last = Message.objects.filter(chat=OuterRef("pk")).exclude(author=Message.Author.SYSTEM)
    chats = chats.annotate(
        last_message_pk=Subquery(last.order_by("-created", "-id").values("pk")[:1])
    )
    return _with_unread(_by_activity(chats), agent)


def with_last_messages(chats: Iterable[Chat]) -> list[Chat]:
    """The chats of a list, each with ``last_message`` (or None) read in one query."""
    listed = list(chats)
    ids = [getattr(chat, "last_message_pk", None) for chat in listed]
    found = Message.objects.select_related("agent").in_bulk([pk for pk in ids if pk])
    for chat, pk in zip(listed, ids, strict=True):
        chat.last_message = found.get(pk) if pk else None  # type: ignore[attr-defined]
    return listed


def queue_for_agent(*, agent: Agent) -> QuerySet[Chat]:
    """Queued chats of my channels, the longest-waiting first (each shows its wait)."""
    queued = chats_for_agent(agent=agent, state=Chat.State.QUEUED).select_related("offered_to")
    return _longest_waiting_first(_listed(queued, agent))


def active_for_agent(*, agent: Agent) -> QuerySet[Chat]:
    """Chats I accepted and that are still open, the most recently active first."""
    return _listed(
        chats_for_agent(agent=agent, state=Chat.State.ACTIVE).filter(agents=agent), agent
    )


def with_bot_for_agent(*, agent: Agent) -> QuerySet[Chat]:
    """Chats of my channels that a bot answers now (read-only: Reply takes over)."""
    return _listed(chats_for_agent(agent=agent, state=Chat.State.BOT), agent)


def finished_for_agent(
    *, agent: Agent, search: str = "", label: str = "", reach: int | None = None
) -> QuerySet[Chat]:
    """The history of my channels, newest first, each with its labels; search
    by client name, email or text; ``label``: only the chats with it.
    ``reach``: a search needs only the newest ``reach`` matching chats; on
    PostgreSQL their ids are read now (``_newest_matching``), elsewhere the
    search stays one OR-ed query for the caller to cut."""
    chats = chats_for_agent(agent=agent, state=Chat.State.FINISHED).order_by("-finished_at", "-id")
    if label:
        tagged = Chat.labels.through.objects.filter(chat_id=OuterRef("pk"), label__name=label)
        chats = chats.filter(Exists(tagged))
    if search:
        said = Exists(shown(Message.objects.filter(chat=OuterRef("pk"), text__icontains=search)))
        named = Q(client__name__icontains=search) | Q(client__email__icontains=search)
        if (
            reach is not None
            and connections[chats.db].features.supports_slicing_ordering_in_compound
        ):
            chats = _newest_matching(chats, said, named, reach)
        else:
            chats = chats.filter(named | said)
    return _with_first_message(chats.prefetch_related("labels"))


def _newest_matching(chats: QuerySet[Chat], said: Exists, named: Q, reach: int) -> QuerySet[Chat]:
    """The newest ``reach`` of ``chats.filter(named | said)``, read at once as
    ids: from the newest ``reach`` whose messages say the words and the newest
    ``reach`` whose client is named so. Two branches, each a join PostgreSQL
    estimates (a rare word: from the trigram indexes; a common one: walking
    the history newest first), where the two conditions OR-ed are a subplan
    per chat guessed to match half of them; the page and its count then read
    only these ids (docs/performance.md, "The history page")."""
    rows = chats.select_related(None).values("id", "finished_at")
    branches = rows.filter(said)[:reach].union(rows.filter(named)[:reach])
    newest = branches.order_by("-finished_at", "-id")[:reach]
    return chats.filter(pk__in=[row["id"] for row in newest])


def _first_when(condition: Q) -> Case:
    """An ordering term that puts the rows matching ``condition`` first."""
    return Case(When(condition, then=Value(0)), default=Value(1), output_field=IntegerField())


def calls_for_agent(*, agent: Agent) -> QuerySet[Call]:
    """Calls of my channels: the open ones (a client waits for a call) first,
    then newest first."""
    return (
        Call.objects.filter(channel__in=visible_channels(agent))
        .select_related("channel", "client", "agent")
        .order_by(_first_when(Q(status__in=Call.OPEN_STATUSES)), "-created", "-id")
    )


def call_for_agent(*, agent: Agent, call_id: int) -> Call:
    """The call, or ``Call.DoesNotExist`` when it is not on one of the agent's channels."""
    return calls_for_agent(agent=agent).get(pk=call_id)


def offline_messages_for_agent(*, agent: Agent) -> QuerySet[OfflineMessage]:
    """Offline messages of my channels: those nobody handled yet first, then newest first."""
    return (
        OfflineMessage.objects.filter(channel__in=visible_channels(agent))
        .select_related("channel", "handled_by")
        .order_by(_first_when(Q(handled_at__isnull=True)), "-created", "-id")
    )


def offline_message_for_agent(*, agent: Agent, offline_message_id: int) -> OfflineMessage:
    """The offline message, or ``OfflineMessage.DoesNotExist`` when it is not
    on one of the agent's channels."""
    return offline_messages_for_agent(agent=agent).get(pk=offline_message_id)


def earlier_chats(*, chat: Chat, agent: Agent, limit: int = 10) -> list[Chat]:
    """The same client's other chats on ``agent``'s channels (a client is one
    channel's, so these are all of them, but the rule is the lists' rule),
    newest first, each with its first message and its number of messages."""
    others = (
        chats_for_agent(agent=agent)
        .filter(client_id=chat.client_id)
        .exclude(pk=chat.pk)
        .annotate(
            message_count=Count(
                "messages",
                filter=~Q(messages__author=Message.Author.SYSTEM)
                & ~Q(messages__payload__has_key=Message.BLACKLISTED),
            )
        )
        .order_by("-created", "-id")
    )
    return list(_with_first_message(others)[:limit])


def transfer_agents(*, chat: Chat, agent: Agent) -> QuerySet[Agent]:
    """Whom ``agent`` may hand ``chat`` to: the channel's other online agents."""
    return (
        chat.channel.agents.filter(is_online=True, is_active=True)
        .exclude(pk=agent.pk)
        .order_by("name")
    )


def labels() -> QuerySet[Label]:
    """The list admins keep, by name."""
    return Label.objects.order_by("name")


def departments() -> QuerySet[Department]:
    return Department.objects.order_by("name")


# --- the Team view (docs/routing.md, "Team") ---------------------------------


def team(*, agent: Agent) -> list[Agent]:
    """The agents of the channels ``agent`` sees (a supervisor's, or every
    channel for an admin), each with ``open_chats`` (active chats they
    answer) and ``pending_offers``; by name."""
    members = Channel.agents.through.objects.filter(channel__in=visible_channels(agent))
    open_chats = Chat.objects.filter(agents=OuterRef("pk"), state=Chat.State.ACTIVE)
    offers = Chat.objects.filter(offered_to=OuterRef("pk"), state=Chat.State.QUEUED)
    return list(
        Agent.objects.filter(is_active=True, pk__in=members.values("agent_id"))
        .annotate(open_chats=_count(open_chats), pending_offers=_count(offers))
        .order_by("name", "pk")
    )


def _count(rows: QuerySet[Any]) -> Coalesce:
    counted = rows.order_by().values(one=Value(1)).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def team_queue(*, agent: Agent) -> QuerySet[Chat]:
    """The queued chats of the channels ``agent`` sees, the longest-waiting
    first, with who each is offered to."""
    queued = chats_for_agent(agent=agent, state=Chat.State.QUEUED)
    return _longest_waiting_first(queued.select_related("offered_to"))


def waiting_for_reply(*, agent: Agent) -> QuerySet[Chat]:
    """Active chats of the channels ``agent`` sees whose last word is the
    client's: an agent owes them an answer (``waiting_since``: that
    message's time), the longest-waiting first. The idle rule never closes
    these."""
    spoken = shown(
        Message.objects.filter(
            chat=OuterRef("pk"), author__in=(Message.Author.CLIENT, Message.Author.AGENT)
        )
    ).order_by("-created", "-id")
    chats = chats_for_agent(agent=agent, state=Chat.State.ACTIVE).annotate(
        last_author=Subquery(spoken.values("author")[:1]),
        waiting_since=Subquery(spoken.values("created")[:1]),
    )
    return (
        chats.filter(last_author=Message.Author.CLIENT)
        .prefetch_related("agents")
        .order_by("waiting_since", "pk")
    )


# A queued chat's place (docs/routing.md, "Queue position"): its estimate
# comes from the waits of the channel's last RECENT_WAITS chats accepted from
# the queue within RECENT_WAITS_WINDOW; none in it, no estimate.
RECENT_WAITS = 20
RECENT_WAITS_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class QueuePlace:
    position: int  # 1: the next chat to be answered
    wait_seconds: int | None  # the estimate; None without recent waits


def queue_place(*, chat: Chat) -> QueuePlace | None:
    """Where a queued chat stands, None for a chat not queued. Two queries
    (three if ``chat.channel`` is not loaded), however long the queue.

    Ahead are the channel's queued chats queued before it (the queue's
    order: oldest ``queued_at`` first, then the lower id). On an offer
    channel a chat for a department waits only for the chats its agents may
    be offered: those of the same department and those of none; in manual
    mode every agent's Reply takes any chat, so the whole queue counts.

    The estimate is the median of the recent waits (``accepted_at -
    queued_at``) times the position: each place ahead is taken to clear in a
    typical wait. The median, not the mean: one chat left an hour does not
    move it."""
    if chat.state != Chat.State.QUEUED or chat.queued_at is None:
        return None
    earlier = Q(queued_at__lt=chat.queued_at) | Q(queued_at=chat.queued_at, pk__lt=chat.pk)
    ahead = Chat.objects.filter(earlier, channel_id=chat.channel_id, state=Chat.State.QUEUED)
    if chat.department_id is not None and chat.channel.routing_mode == Channel.RoutingMode.OFFER:
        ahead = ahead.filter(Q(department_id=chat.department_id) | Q(department__isnull=True))
    position = ahead.count() + 1
    waits = recent_waits(channel_id=chat.channel_id)
    if not waits:
        return QueuePlace(position=position, wait_seconds=None)
    return QueuePlace(position=position, wait_seconds=round(statistics.median(waits) * position))


def recent_waits(*, channel_id: int) -> list[float]:
    """In seconds, the waits in the queue of the channel's last chats
    accepted from it (a chat a transfer queued again counts its wait
    after the transfer; a bot's chat an agent took over never waited)."""
    accepted = Chat.objects.filter(
        Q(accepted_at__gte=F("queued_at")),
        channel_id=channel_id,
        accepted_at__gte=timezone.now() - RECENT_WAITS_WINDOW,
    )
    pairs = accepted.order_by("-accepted_at").values_list("queued_at", "accepted_at")
    recent = pairs[:RECENT_WAITS]
    return [(taken - queued).total_seconds() for queued, taken in recent if queued and taken]


def consent_of(chat: Chat) -> dict[str, Any] | None:
    """The consent text the client accepted before the chat's first message
    (the widget's, docs/widget.md "Consent"), as the agent API and a client's
    export give it; ``None`` when none was asked."""
    if chat.consent_at is None:
        return None
    return {"version": chat.consent_version, "accepted_at": chat.consent_at.isoformat()}


def reply_scope(*, agent: Agent, chat: Chat) -> str:
    """The scope of an agent's ``Idempotency-Key``s for replies in one chat."""
    return f"agent-reply:{agent.pk}:{chat.pk}"


def replied_before(*, chat: Chat, agent: Agent, idempotency_key: str) -> Message | None:
    """The reply a committed request with this ``Idempotency-Key`` stored, if any."""
    made = idempotency.made(scope=reply_scope(agent=agent, chat=chat), key=idempotency_key)
    return None if made is None else Message.objects.filter(pk=made, chat=chat).first()
