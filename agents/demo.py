"""Demo data for ``seed_demo``: the core's part, plus what integration apps add.

Integration apps register a seeder in their ``AppConfig.ready()``; each is
called with the demo agents and returns a JSON-able description of what it
made (channels with their URLs), so ``agents`` imports none of them. An app
that makes a kind of channel may also register a maker for it
(``register_channel_kind``), so another app's demo can stand on such a
channel without importing the app that makes it: the bot demo's channel is
a Chat API channel, asked for as ``demo_channel("chat_api", …)``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from agents import accounts
from agents.canned import save_reply
from agents.models import Agent, CannedReply, Channel, Label
from agents.services import create_label, set_agent_status
from agents.tokens import agent_for_key, issue_token

Seeder = Callable[[list[Agent]], list[dict[str, Any]]]
_seeders: list[Seeder] = []
# Makes (or finds) a demo channel by name, for the given agents: the core's
# channel and the URLs an integrator would use with it.
ChannelMaker = Callable[[str, list[Agent]], tuple[Channel, dict[str, Any]]]
_channel_makers: dict[str, ChannelMaker] = {}

ADMIN = {
    "email": "admin@example.com",
    "name": "Demo Admin",
    "password": "switchboard-admin",
    "role": "admin",
}
AGENTS = [
    {"email": "alice@example.com", "name": "Alice Agent", "password": "switchboard-alice"},
    {"email": "bob@example.com", "name": "Bob Agent", "password": "switchboard-bob"},
    # A supervisor answers chats too, and sees the Team view (docs/routing.md).
    {
        "email": "sam@example.com",
        "name": "Sam Supervisor",
        "password": "switchboard-sam",
        "role": "supervisor",
    },
]


# A few shared canned replies to try "/" in a reply box with; their variables
# are filled when inserted (docs/agent-pages.md, "Canned replies").
CANNED_REPLIES = {
    "hello": "Hi {{client.name}}, I'm {{agent.name}}. How can I help?",
    "wait": "Thanks for waiting, {{client.name}}. Let me check that for you.",
    "bye": "Thanks for writing to {{channel.name}}, {{client.name}}. Have a good day!",
}


# The labels agents put on the demo's chats (docs/agent-pages.md, "Labels").
LABELS = {"billing": "#1f77b4", "bug": "#d62728", "feedback": "#2ca02c"}


def register(seeder: Seeder) -> None:
    if seeder not in _seeders:
        _seeders.append(seeder)


def register_channel_kind(kind: str, maker: ChannelMaker) -> None:
    _channel_makers[kind] = maker


def demo_channel(kind: str, name: str, agents: list[Agent]) -> tuple[Channel, dict[str, Any]]:
    """The demo channel ``name`` of ``kind``, made by the app that registered the kind."""
    return _channel_makers[kind](name, agents)


def _agent(spec: dict[str, str]) -> Agent:
    agent = Agent.objects.filter(email=spec["email"]).first()
    if agent is None:
        agent = Agent.objects.create_user(spec["email"], name=spec["name"])
    agent.role = spec.get("role", Agent.Role.AGENT)
    agent.save()
    # The printed password always works, and passes the validators like any
    # other (docs/decisions.md, "Demo passwords").
    return accounts.set_password(agent=agent, password=spec["password"])


def _tokens_file() -> Path:
    return Path(settings.VAR_DIR) / "demo-tokens.json"


def _demo_tokens(agents: list[Agent]) -> dict[str, str]:
    """The demo agents' API tokens. Only a token's hash is stored, so the keys
    issued by an earlier run are kept in a file of the demo's own under
    VAR_DIR (readable by its owner only): a second run prints the same
    working tokens instead of replacing them. A key that no longer works (a
    new token was made meanwhile) is replaced."""
    path = _tokens_file()
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {}
    tokens = {}
    for agent in agents:
        key = kept.get(agent.email) if isinstance(kept, dict) else None
        if not isinstance(key, str) or agent_for_key(key) != agent:
            key = issue_token(agent=agent)
        tokens[agent.email] = key
    write_private(path, json.dumps(tokens))
    return tokens


def write_private(path: Path, text: str) -> None:
    """``text`` in the file at ``path``, made owner-only (0600) before a byte
    is written: the demo's files hold logins, API keys and bot tokens."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a file kept from an earlier run keeps its old mode otherwise
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _canned_replies(admin: Agent) -> None:
    """The demo's shared replies; one an admin changed or took away meanwhile
    is theirs: only a missing shortcut is added again."""
    have = set(CannedReply.objects.filter(owner=None).values_list("shortcut", flat=True))
    for shortcut, text in CANNED_REPLIES.items():
        if shortcut not in have:
            save_reply(agent=admin, shortcut=shortcut, text=text, shared=True)


def _labels() -> None:
    """The demo's labels; one an admin renamed or took away meanwhile stays
    so: only a missing name is added again."""
    have = {name.lower() for name in Label.objects.values_list("name", flat=True)}
    for name, colour in LABELS.items():
        if name not in have:
            create_label(name=name, colour=colour)


@transaction.atomic
def seed() -> dict[str, Any]:
    """Create (or refresh) the demo admin, agents and channels; say what they are."""
    admin = _agent(ADMIN)
    agents = [_agent(spec) for spec in AGENTS]
    set_agent_status(agent=agents[0], online=True)
    _canned_replies(admin)
    _labels()
    channels: list[dict[str, Any]] = []
    for seeder in _seeders:
        channels.extend(seeder(agents))
    base = settings.PUBLIC_URL
    tokens = _demo_tokens(agents)
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
                "role": agent.role,
                "online": agent.is_online,
                "token": tokens[agent.email],
            }
            for agent, spec in zip(agents, AGENTS, strict=True)
        ],
        "channels": channels,
    }
