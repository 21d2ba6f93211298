"""Routing by offers (docs/routing.md): on a channel in ``offer`` mode a
queued chat is offered to one agent at a time, the one with room who
suits it best; Reply takes it, Decline or silence past the channel's offer
time moves it to the next agent, and a chat nobody can take waits in the
queue until an agent frees up.

Capacity holds across processes: the agents who may be offered a chat are
locked (``SELECT … FOR UPDATE``, in id order, so two routings never wait on
each other crosswise) before their open chats and pending offers are
counted, and a chat's offer is changed only under the chat's lock. The verbs
that free an agent (a finish, a transfer, a decline, going online) offer
them the oldest waiting chats, skipping any chat another transaction holds:
that one is being routed already.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from django.utils.translation import gettext_lazy

from agents import events
from agents.models import IDLE_CLOSE_MAX, IDLE_CLOSE_MIN, Agent, Channel, Chat, ChatOffer
from agents.presence import is_away, present
from agents.services.availability import channel_text
from agents.services.errors import InvalidState, ServiceError
from agents.services.locks import _lock

# How many waiting chats one agent's freeing up looks at: an agent's room is
# a handful of chats, and each chat passed over is offered to someone else.
WAITING_LOOKED_AT = 20
EPOCH = datetime.min.replace(tzinfo=UTC)
OFFER_SECONDS_MIN, OFFER_SECONDS_MAX = 5, 600  # as the channel's field validates


def routes_by_offer(chat: Chat) -> bool:
    return bool(chat.channel.routing_mode == Channel.RoutingMode.OFFER)


def offer_chat(chat: Chat) -> ChatOffer | None:
    """Offer ``chat`` (read under its lock by the caller) to the agent who
    suits it best, or leave it waiting in the queue: None. Nothing happens
    unless the chat is queued on an offer channel and offered to nobody."""
    if chat.state != Chat.State.QUEUED or chat.offered_to_id is not None:
        return None
    if not routes_by_offer(chat):
        return None
    agent = _best_agent(chat)
    if agent is None:
        return None
    return _offer_to(chat, agent)


def _offer_to(chat: Chat, agent: Agent) -> ChatOffer:
    """Offer ``chat`` (under its lock, offered to nobody now) to ``agent``."""
    now = timezone.now()
    expires = now + timedelta(seconds=chat.channel.offer_seconds)
    offer = ChatOffer.objects.create(chat=chat, agent=agent, offered_at=now, expires_at=expires)
    Chat.objects.filter(pk=chat.pk).update(offered_to=agent, offer_expires_at=expires)
    chat.offered_to, chat.offer_expires_at = agent, expires
    Agent.objects.filter(pk=agent.pk).update(last_offered_at=now)
    offered = events.ChatOffered(
        chat_id=chat.pk, agent_id=agent.pk, offer_id=offer.pk, expires_at=expires
    )
    events.publish(offered)
    return offer


def _best_agent(chat: Chat) -> Agent | None:
    """Among the channel's (and the chat's department's) online agents with
    room, who have not declined this chat or let its offer lapse: the
    client's last agent, else the fewest open chats, then the longest
    since their last offer."""
    candidates = Agent.objects.filter(
        present(), channels=chat.channel_id, is_active=True, is_online=True
    )
    if chat.department_id is not None:
        candidates = candidates.filter(departments=chat.department_id)
    refused = ChatOffer.objects.filter(
        chat=chat, outcome__in=[ChatOffer.Outcome.DECLINED, ChatOffer.Outcome.LAPSED]
    ).values("agent_id")
    ids = list(candidates.exclude(pk__in=refused).values_list("pk", flat=True))
    if not ids:
        return None
    # Read again under the locks: what counts is each agent as committed now.
    locked = Agent.objects.select_for_update().filter(pk__in=ids).order_by("pk")
    agents = [agent for agent in locked if agent.is_active and not_away(agent)]
    load = open_chats(ids)
    with_room = [agent for agent in agents if load.get(agent.pk, 0) < agent.capacity]
    if not with_room:
        return None
    returning = _last_agent_id(chat)

    def rank(agent: Agent) -> tuple[bool, int, datetime, int]:
        return (
            agent.pk != returning,
            load.get(agent.pk, 0),
            agent.last_offered_at or EPOCH,
            agent.pk,
        )

    return min(with_room, key=rank)


def not_away(agent: Agent) -> bool:
    return agent.is_online and not is_away(agent)


def open_chats(agent_ids: list[int]) -> dict[int, int]:
    """Each agent's load: the active chats they answer and the chats offered
    to them now."""
    load: dict[int, int] = {}
    active = (
        Chat.objects.filter(state=Chat.State.ACTIVE, agents__in=agent_ids)
        .values_list("agents")
        .annotate(n=Count("pk", distinct=True))
    )
    offered = (
        Chat.objects.filter(state=Chat.State.QUEUED, offered_to__in=agent_ids)
        .values_list("offered_to")
        .annotate(n=Count("pk"))
    )
    for agent_id, n in [*active, *offered]:
        load[agent_id] = load.get(agent_id, 0) + n
    return load


def _last_agent_id(chat: Chat) -> int | None:
    """The agent who answered the client's last finished chat."""
    earlier = Chat.objects.filter(
        client=chat.client_id, state=Chat.State.FINISHED, agents__isnull=False
    )
    return earlier.order_by("-finished_at").values_list("agents", flat=True).first()


def end_offer(chat: Chat, outcome: str) -> None:
    """End ``chat``'s pending offer (the chat read under its lock), if any."""
    agent_id = chat.offered_to_id
    if agent_id is None:
        return
    now = timezone.now()
    ChatOffer.objects.filter(chat=chat, outcome=ChatOffer.Outcome.PENDING).update(
        outcome=outcome, ended_at=now
    )
    Chat.objects.filter(pk=chat.pk).update(offered_to=None, offer_expires_at=None)
    chat.offered_to, chat.offer_expires_at = None, None
    events.publish(events.OfferEnded(chat_id=chat.pk, agent_id=agent_id, outcome=outcome))


def offer_waiting(agent_ids: list[int]) -> None:
    """Agents freed up: offer the waiting chats of their offer channels,
    oldest first. A chat another transaction holds is skipped: that one
    routes it."""
    if not agent_ids:
        return
    waiting = (
        Chat.objects.filter(
            state=Chat.State.QUEUED,
            offered_to__isnull=True,
            channel__routing_mode=Channel.RoutingMode.OFFER,
            channel__agents__in=agent_ids,
        )
        .order_by("queued_at", "pk")
        .values_list("pk", flat=True)
        .distinct()
    )
    for chat_id in list(waiting[:WAITING_LOOKED_AT]):
        chat = _lock_unless_held(chat_id)
        if chat is not None:
            offer_chat(chat)


def _lock_unless_held(chat_id: int, **still: object) -> Chat | None:
    """The chat (with its channel) under its lock, if it still matches
    ``still``; None when another transaction holds it: that one routes it."""
    locked = Chat.objects.select_for_update(skip_locked=True, of=("self",))
    return locked.select_related("channel").filter(pk=chat_id, **still).first()


def offer_to_chosen(chat: Chat, agent: Agent) -> ChatOffer:
    """A supervisor's reassignment of a queued chat (under its lock): it is
    offered to ``agent`` whatever their load or the channel's mode, in place
    of its pending offer; Reply still takes it (docs/routing.md, "Team").
    The agent whose offer it was has room again: they are offered what waits."""
    before = chat.offered_to_id
    # As routing does: the chat first, then the agent, so a routing that
    # counts this agent's load meanwhile waits for this offer.
    Agent.objects.select_for_update().filter(pk=agent.pk).exists()
    end_offer(chat, ChatOffer.Outcome.WITHDRAWN)
    offer = _offer_to(chat, agent)
    if before is not None:
        offer_waiting([before])
    return offer


@transaction.atomic
def decline_offer(*, chat: Chat, agent: Agent) -> Chat:
    """The agent's Decline: the chat goes to the next agent who can take it,
    and the decliner is offered what else waits."""
    chat = _lock(chat)
    if chat.offered_to_id != agent.pk:
        raise InvalidState(gettext_lazy("the chat is not offered to you"))
    end_offer(chat, ChatOffer.Outcome.DECLINED)
    offer_chat(chat)
    offer_waiting([agent.pk])
    return chat


@transaction.atomic
def lapse_offer(*, offer_id: int) -> bool:
    """The offer's time ran out with no answer: it goes to the next agent.
    False when it had been answered, withdrawn or renewed meanwhile."""
    offer = ChatOffer.objects.filter(pk=offer_id).first()
    if offer is None:
        return False
    chat = _lock(offer.chat)
    current = ChatOffer.objects.filter(pk=offer_id, outcome=ChatOffer.Outcome.PENDING).first()
    if current is None or chat.offered_to_id != current.agent_id:
        return False
    if current.expires_at > timezone.now():
        return False
    end_offer(chat, ChatOffer.Outcome.LAPSED)
    offer_chat(chat)
    return True


def lapse_due_offers() -> int:
    """Every offer past its time (the beat's sweep, behind each offer's own
    timer); returns how many lapsed."""
    due = ChatOffer.objects.filter(
        outcome=ChatOffer.Outcome.PENDING, expires_at__lte=timezone.now()
    ).values_list("pk", flat=True)
    return sum(lapse_offer(offer_id=offer_id) for offer_id in list(due[:1000]))


@transaction.atomic
def offer_waiting_to_free_agents() -> int:
    """The beat's safety net (docs/routing.md, "Under concurrency"): the
    agents of offer channels where chats wait unoffered who are online,
    present and have room are offered those chats. A routing that counted
    an agent's load just before that agent's finish committed saw them full,
    and the finish's own offer_waiting could not yet see the new chat: such
    a chat is offered here. Returns how many agents had room."""
    waiting = Chat.objects.filter(
        state=Chat.State.QUEUED,
        offered_to__isnull=True,
        channel__routing_mode=Channel.RoutingMode.OFFER,
    )
    channels = waiting.values("channel_id")
    agents = list(
        Agent.objects.filter(present(), is_active=True, is_online=True, channels__in=channels)
        .distinct()
        .only("pk", "max_chats")
    )
    load = open_chats([agent.pk for agent in agents])
    free = [agent.pk for agent in agents if load.get(agent.pk, 0) < agent.capacity]
    offer_waiting(free)
    return len(free)


def withdraw_offers_of(agent_id: int) -> None:
    """The agent went offline: their pending offers move on (in this
    transaction; a chat another one holds lapses in its time instead)."""
    offered = Chat.objects.filter(state=Chat.State.QUEUED, offered_to=agent_id)
    for chat_id in list(offered.values_list("pk", flat=True)):
        chat = _lock_unless_held(chat_id, offered_to=agent_id)
        if chat is not None:
            end_offer(chat, ChatOffer.Outcome.WITHDRAWN)
            offer_chat(chat)


@transaction.atomic
def set_routing(
    *,
    channel: Channel,
    mode: str | None = None,
    offer_seconds: int | None = None,
    idle_close_minutes: int | None = None,
    idle_warning: str | None = None,
) -> Channel:
    """A channel's routing, each part replaced when given: the mode
    (``manual``: every agent sees the queue and takes a chat with Reply;
    ``offer``), the offer time, idle close (minutes, 0: off) and its
    warning (blank: none). Bad input changes nothing. Turned to offer, its
    waiting chats are offered at once; turned to manual, its pending
    offers are withdrawn."""
    if mode is not None and mode not in Channel.RoutingMode.values:
        raise ServiceError(f"routing mode must be one of {', '.join(Channel.RoutingMode.values)}")
    if offer_seconds is not None and not OFFER_SECONDS_MIN <= offer_seconds <= OFFER_SECONDS_MAX:
        raise ServiceError(f"the offer time is {OFFER_SECONDS_MIN} to {OFFER_SECONDS_MAX} seconds")
    if idle_close_minutes is not None and not (
        idle_close_minutes == 0 or IDLE_CLOSE_MIN <= idle_close_minutes <= IDLE_CLOSE_MAX
    ):
        raise ServiceError(
            f"idle close is {IDLE_CLOSE_MIN} to {IDLE_CLOSE_MAX} minutes, or 0 (off)"
        )
    warning = channel_text(idle_warning, "the idle warning") if idle_warning is not None else None
    Channel.objects.select_for_update().filter(pk=channel.pk).exists()  # one change at a time
    if mode is not None:
        channel.routing_mode = mode
    if offer_seconds is not None:
        channel.offer_seconds = offer_seconds
    if idle_close_minutes is not None:
        channel.idle_close_minutes = idle_close_minutes or None
    if warning is not None:
        channel.idle_warning = warning
    channel.save(
        update_fields=["routing_mode", "offer_seconds", "idle_close_minutes", "idle_warning"]
    )
    if mode is None:
        return channel
    queued = Chat.objects.filter(channel=channel, state=Chat.State.QUEUED)
    for chat_id in list(queued.order_by("queued_at", "pk").values_list("pk", flat=True)):
        chat = Chat.objects.select_for_update().select_related("channel").get(pk=chat_id)
        if mode == Channel.RoutingMode.MANUAL:
            end_offer(chat, ChatOffer.Outcome.WITHDRAWN)
        else:
            offer_chat(chat)
    return channel
