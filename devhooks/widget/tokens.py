"""Visitor tokens (192 random bits), stored only as hashes: a lookup by the
hash of what the browser sent leaks nothing usable through timing."""

from __future__ import annotations

import secrets

from django.db import transaction

from agents.models import ApiToken, Client


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
    found = Client.objects.select_related("channel")  # the verbs read its channel
    return found.filter(visitor_key_hash=ApiToken.hash_key(key)).first()
