"""Demo data for ``seed_demo``: the core's part, plus what integration apps add.

Integration apps register a seeder in their ``AppConfig.ready()``; each is
called with the demo agents and returns a JSON-able description of what it
made (channels with their URLs), so ``agents`` imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.models import Agent
from agents.services import set_agent_status
from agents.tokens import issue_token

Seeder = Callable[[list[Agent]], list[dict[str, Any]]]
_seeders: list[Seeder] = []

ADMIN = {"email": "admin@example.com", "name": "Demo Admin", "password": "switchboard-admin"}
AGENTS = [
    {"email": "alice@example.com", "name": "Alice Agent", "password": "switchboard-alice"},
    {"email": "bob@example.com", "name": "Bob Agent", "password": "switchboard-bob"},
]


def register(seeder: Seeder) -> None:
    if seeder not in _seeders:
        _seeders.append(seeder)


def _agent(spec: dict[str, str], **flags: bool) -> Agent:
    agent = Agent.objects.filter(email=spec["email"]).first()
    if agent is None:
        agent = Agent.objects.create_user(spec["email"], spec["password"], name=spec["name"])
    for flag, value in flags.items():
        setattr(agent, flag, value)
    agent.set_password(spec["password"])  # the printed password always works
    agent.save()
    return agent


@transaction.atomic
def seed() -> dict[str, Any]:
    """Create (or refresh) the demo admin, agents and channels; say what they are."""
    admin = _agent(ADMIN, is_staff=True, is_superuser=True)
    agents = [_agent(spec) for spec in AGENTS]
    set_agent_status(agent=agents[0], online=True)
    channels: list[dict[str, Any]] = []
    for seeder in _seeders:
        channels.extend(seeder(agents))
    base = settings.PUBLIC_URL
    return {
        "urls": {
            "admin": f"{base}/admin/",
            "agent_pages": f"{base}/agent/",
            "agent_api": f"{base}/api/agent/v1/",
            "api_docs": f"{base}/api/docs/",
        },
        "admin": {"email": admin.email, "password": ADMIN["password"]},
        "agents": [
            {
                "email": agent.email,
                "password": spec["password"],
                "online": agent.is_online,
                "token": issue_token(agent=agent),
            }
            for agent, spec in zip(agents, AGENTS, strict=True)
        ],
        "channels": channels,
    }
