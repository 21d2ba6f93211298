"""Agent API tokens (160 random bits), stored only as hashes: a lookup by the
hash of what the caller sent leaks nothing usable through timing. (A widget
visitor's token is the widget's: devhooks/widget/tokens.py.)"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from agents import audit
from agents.models import Agent, ApiToken

# A token's last_used is written at most this often: its list on the
# settings page needs the minute, not a write per API request.
LAST_USED_EVERY = timedelta(minutes=1)


@transaction.atomic
def issue_token(*, agent: Agent, by: Agent | str | None = None) -> str:
    """A new key for ``agent``, replacing any earlier one; the key is returned
    once. ``by``: who asked (the audit log), by default the agent."""
    key = secrets.token_hex(20)
    _, created = ApiToken.objects.update_or_create(
        agent=agent,
        defaults={"key_hash": ApiToken.hash_key(key), "created": timezone.now(), "last_used": None},
    )
    action = audit.Action.TOKEN_ISSUED if created else audit.Action.TOKEN_ROTATED
    audit.record(action, actor=by or agent, target=audit.of_agent(agent))
    return key


@transaction.atomic
def revoke_token(*, agent: Agent, by: Agent | str | None = None) -> None:
    """The agent's key stops working, its open streams included (docs/live.md)."""
    if ApiToken.objects.filter(agent=agent).delete()[0]:
        audit.record(audit.Action.TOKEN_REVOKED, actor=by, target=audit.of_agent(agent))


def agent_for_key(key: str) -> Agent | None:
    """The active agent whose token ``key`` is, noting the token used."""
    token = ApiToken.objects.select_related("agent").filter(key_hash=ApiToken.hash_key(key)).first()
    if token is None or not token.agent.is_active:
        return None
    now = timezone.now()
    if token.last_used is None or token.last_used <= now - LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
    return token.agent
