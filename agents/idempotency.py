"""``Idempotency-Key``s of the inbound APIs: act on a request once.

An inbound view passes the key to its verb; the verb claims it first, in its
own transaction, and changes nothing when the claim fails::

    @transaction.atomic
    def receive_user_message(*, chat_api, message, idempotency_key=""):
        scope = f"chat-api:{chat_api.channel_id}"
        if idempotency_key and not idempotency.claim(scope=scope, key=idempotency_key):
            return None  # a retry of a request already acted on
        ...

A ``scope`` keeps one caller's keys apart from another's: ``chat-api:<channel
pk>`` for A2, ``bot-api:<provider pk>`` for B2, ``agent-reply:<agent
pk>:<chat pk>`` for the agent API's reply. A verb whose answer shows the
row it made (the agent API answers with the reply) notes that row's id on
the key (``remember``), so a retry is answered with the same row
(``made``). A claim lives and dies with
the caller's transaction, so a request that is refused (its transaction rolls
back) does not keep its key, and its retry is acted on. Keys are forgotten
after ``IDEMPOTENCY_KEY_HOURS`` by ``agents.tasks.forget_idempotency_keys``.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from agents.models import IdempotencyKey


def claim(*, scope: str, key: str) -> bool:
    """Claim ``key`` in ``scope`` inside the caller's transaction.

    True when the key is new and is now claimed; False when it was claimed
    before. A concurrent claim of the same key waits on the unique index until
    the first transaction ends: it gets False when that one commits, True when
    it rolls back. The insert runs in a savepoint, so a False leaves the
    caller's transaction usable.
    """
    if not transaction.get_connection().in_atomic_block:
        raise TransactionManagementError(
            "claim() belongs in the transaction of the change it guards"
        )
    try:
        with transaction.atomic():
            IdempotencyKey.objects.create(scope=scope, key=key)
    except IntegrityError:
        return False
    return True


def seen(*, scope: str, key: str) -> bool:
    """Whether ``key`` was claimed in ``scope`` by a committed transaction.

    A cheap answer before a request is parsed; only ``claim`` decides.
    """
    return IdempotencyKey.objects.filter(scope=scope, key=key).exists()


def remember(*, scope: str, key: str, made: int) -> None:
    """Note on a key claimed in this transaction the id of the row it made."""
    IdempotencyKey.objects.filter(scope=scope, key=key).update(made=made)


def made(*, scope: str, key: str) -> int | None:
    """The id ``remember`` noted on a committed claim of ``key``; None when
    the key is unclaimed (or its claim noted none)."""
    return (
        IdempotencyKey.objects.filter(scope=scope, key=key).values_list("made", flat=True).first()
    )


def forget_old_keys() -> int:
    """Delete keys older than ``IDEMPOTENCY_KEY_HOURS``; returns how many."""
    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS)
    deleted, _ = IdempotencyKey.objects.filter(created__lt=cutoff).delete()
    return deleted
