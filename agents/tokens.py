"""Agent API tokens (160 random bits) and visitor tokens (192 random bits),
stored only as hashes: a lookup by the hash of what the caller sent leaks
nothing usable through timing."""

from __future__ import annotations

import secrets

from django.db import transaction

from agents.models import Agent, ApiToken, Client


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


@transaction.atomic
def issue_visitor_token(*, client: Client) -> str:
    """A new token for the client's own browser, replacing any earlier one;
    returned once. It reads only this client's chat (its live stream)."""
    key = secrets.token_urlsafe(24)
    Client.objects.filter(pk=client.pk).update(visitor_key_hash=ApiToken.hash_key(key))
    return key


def client_for_visitor_token(key: str) -> Client | None:
    if not 16 <= len(key) <= 128:
        return None
    return Client.objects.filter(visitor_key_hash=ApiToken.hash_key(key)).first()
