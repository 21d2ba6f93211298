"""Visitor tokens (192 random bits), stored only as hashes: a lookup by the
hash of what the browser sent leaks nothing usable through timing."""

from __future__ import annotations

import secrets

from django.db import transaction

from agents.models import ApiToken, Client


def new_visitor_token() -> tuple[str, str]:
    """A new token for a visitor's browser and the hash stored for it."""
    key = secrets.token_urlsafe(24)
    return key, ApiToken.hash_key(key)


@transaction.atomic
def issue_visitor_token(*, client: Client) -> str:
    """A new token for the client's own browser, replacing any earlier one;
    returned once. It reads only this client's chat (its live stream)."""
    key, stored = new_visitor_token()
    Client.objects.filter(pk=client.pk).update(visitor_key_hash=stored)
    return key


def looks_like_visitor_token(key: str) -> bool:
    return 16 <= len(key) <= 128


def visitor_rate_key(key: str) -> str:
    """What a visitor's requests are counted under: its token's hash (not
    the token), so they are counted before the visitor is read."""
    return ApiToken.hash_key(key)[:32]


def client_for_visitor_token(key: str, *, lock: bool = False) -> Client | None:
    if not looks_like_visitor_token(key):
        return None
    found = Client.objects.select_related("channel")  # the verbs read its channel
    if lock:  # the client's row only, not its channel's
        found = found.select_for_update(of=("self",))
    return found.filter(visitor_key_hash=ApiToken.hash_key(key)).first()
