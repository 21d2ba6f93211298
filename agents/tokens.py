"""Agent API tokens (160 random bits), stored only as hashes: a lookup by the
hash of what the caller sent leaks nothing usable through timing. (A widget
visitor's token is the widget's: devhooks/widget/tokens.py.)"""

from __future__ import annotations

import secrets

from django.db import transaction

from agents.models import Agent, ApiToken


@transaction.atomic
def issue_token(*, agent: Agent) -> str:
    """A new key for ``agent``, replacing any earlier one; the key is returned once."""
    key = secrets.token_hex(20)
    ApiToken.objects.update_or_create(agent=agent, defaults={"key_hash": ApiToken.hash_key(key)})
    return key


@transaction.atomic
def revoke_token(*, agent: Agent) -> None:
    """The agent's key stops working, its open streams included (docs/live.md)."""
    ApiToken.objects.filter(agent=agent).delete()


def agent_for_key(key: str) -> Agent | None:
    token = ApiToken.objects.select_related("agent").filter(key_hash=ApiToken.hash_key(key)).first()
    if token is None or not token.agent.is_active:
        return None
    return token.agent
