"""An agent's own state: online or not, and the settings page's profile."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy, ngettext_lazy

from agents import audit, events, selectors
from agents.models import MAX_CHATS_LIMIT, Agent, OnlineSpan
from agents.services.errors import NotAllowed, ServiceError
from agents.services.offers import offer_waiting, withdraw_offers_of


def set_agent_status(*, agent: Agent, online: bool) -> Agent:
    """Online or offline. Online, the agent is offered the chats that wait
    for them; offline, the chats offered to them move on (docs/routing.md).
    The routing runs after the status is written, in a transaction of its
    own, so the agent's row is not held while chats are locked."""
    with transaction.atomic():
        # Going online is a sign of life (docs/routing.md, "Presence").
        now = timezone.now()
        seen = {"last_seen_at": now} if online else {}
        Agent.objects.filter(pk=agent.pk).update(is_online=online, **seen)
        # The reports' time online (docs/reports.md): the UPDATE above holds
        # the agent's row, so two switches of one agent write their spans in turn.
        open_span = OnlineSpan.objects.filter(agent=agent, ended__isnull=True)
        if online and not open_span.exists():
            OnlineSpan.objects.create(agent=agent, started=now)
        elif not online:
            open_span.update(ended=now)
        agent.is_online = online
        agent.last_seen_at = seen.get("last_seen_at", agent.last_seen_at)
        events.publish(events.AgentStatusChanged(agent_id=agent.pk, online=online))
    with transaction.atomic():
        if online:
            offer_waiting([agent.pk])
        else:
            withdraw_offers_of(agent.pk)
    return agent


@transaction.atomic
def set_max_chats(*, agent: Agent, by: Agent, max_chats: int | None) -> Agent:
    """A supervisor sets how many chats ``agent`` answers at once (None: the
    installation's AGENT_MAX_CHATS). More room is offered what waits at
    once; less takes nothing away: chats and offers held stay."""
    if not by.supervises or not selectors.visible_channels(by).filter(agents=agent).exists():
        raise NotAllowed(
            gettext_lazy("only supervisors of the agent's channels and admins set their chats")
        )
    if max_chats is not None and not 1 <= max_chats <= MAX_CHATS_LIMIT:
        raise ServiceError(
            ngettext_lazy(
                "a number of chats from 1 to %(limit)d",
                "a number of chats from 1 to %(limit)d",
                "limit",
            ),
            limit=MAX_CHATS_LIMIT,
        )
    Agent.objects.filter(pk=agent.pk).update(max_chats=max_chats)
    if agent.max_chats != max_chats:
        audit.record(
            audit.Action.AGENT_CAPACITY_CHANGED,
            actor=by,
            target=audit.of_agent(agent),
            before=agent.max_chats,
            after=max_chats,
        )
    agent.max_chats = max_chats
    offer_waiting([agent.pk])
    return agent


@transaction.atomic
def update_agent_profile(
    *,
    agent: Agent,
    name: str,
    photo_url: str,
    notify_sound: bool,
    notify_desktop: bool,
    language: str,
) -> Agent:
    """The settings page: the name clients see (``sender.name`` in A3), the
    photo (``sender.photo``), the notification switches, and the pages'
    language (blank: the browser's)."""
    name = name.strip()
    if not name or len(name) > 200:
        raise ServiceError(gettext_lazy("a name of 1 to 200 characters"))
    photo_url = photo_url.strip()
    if photo_url:
        try:
            URLValidator(schemes=["http", "https"])(photo_url)
        except ValidationError as error:
            raise ServiceError(
                gettext_lazy("the photo must be an http:// or https:// URL")
            ) from error
        if len(photo_url) > 500:
            raise ServiceError(gettext_lazy("the photo URL is longer than 500 characters"))
    if language and language not in dict(settings.LANGUAGES):
        raise ServiceError(gettext_lazy("a language of the list"))
    Agent.objects.filter(pk=agent.pk).update(
        name=name,
        photo_url=photo_url,
        notify_sound=notify_sound,
        notify_desktop=notify_desktop,
        language=language,
    )
    agent.refresh_from_db()
    return agent
