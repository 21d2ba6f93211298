"""An agent's own state: online or not, and the settings page's profile."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction

from agents import events
from agents.models import Agent
from agents.services.errors import ServiceError


@transaction.atomic
def set_agent_status(*, agent: Agent, online: bool) -> Agent:
    Agent.objects.filter(pk=agent.pk).update(is_online=online)
    agent.is_online = online
    events.publish(events.AgentStatusChanged(agent_id=agent.pk, online=online))
    return agent


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
