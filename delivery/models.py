"""The outbox (docs/delivery.md): targets, deliveries and the log of every try.

A ``Delivery`` is written in the same transaction as the change that caused
it; ``delivery.services`` moves it through its states. Nothing here makes an
HTTP request.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone

from delivery.ssrf import validate_endpoint_url


class Endpoint(models.Model):
    """A URL outside the service that receives signed POST requests."""

    url = models.CharField(max_length=2000, validators=[validate_endpoint_url])
    chunked = models.BooleanField(
        default=False,
        help_text="Send bodies with chunked transfer encoding instead of Content-Length.",
    )
    # Kept in clear: an HMAC needs the key itself. Shown once, when created or rotated.
    secret = models.CharField(max_length=128, editable=False)
    previous_secret = models.CharField(max_length=128, blank=True, editable=False)
    previous_secret_expires = models.DateTimeField(null=True, blank=True, editable=False)
    active = models.BooleanField(default=True)
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    disabled_reason = models.CharField(max_length=1000, blank=True, editable=False)
    # Tries it may have in flight at once, across every worker process: one
    # more after each quick success, half after a time-out, a connection error,
    # a 408, 429 or 5xx (``delivery.policies.limit_after``); never above
    # DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT. A new endpoint starts at 2.
    in_flight_limit = models.PositiveIntegerField(db_default=2, editable=False)
    # Tries holding one of its slots now: the deliveries with ``holds_slot``,
    # counted as each takes or gives back a slot (``delivery.services``).
    in_flight = models.IntegerField(db_default=0, editable=False)
    created = models.DateTimeField(default=timezone.now, editable=False)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.url

    def signing_secrets(self, *, at: datetime) -> list[str]:
        """The secrets that sign a request sent at ``at``: the current one, then
        the previous one while its grace period lasts."""
        keys = [self.secret]
        if (
            self.previous_secret
            and self.previous_secret_expires is not None
            and at < self.previous_secret_expires
        ):
            keys.append(self.previous_secret)
        return keys


class Delivery(models.Model):
    """One JSON body for one endpoint, tried until delivered, failed or dropped."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"
        DROPPED = "dropped"

    FINAL_STATUSES = (Status.DELIVERED, Status.FAILED, Status.DROPPED)

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    # The Standard Webhooks ``webhook-id``: the same on every try and on a redelivery.
    webhook_id = models.CharField(max_length=64, unique=True, editable=False)
    purpose = models.CharField(max_length=64, db_index=True)
    event = models.CharField(max_length=100, db_index=True)
    subject = models.CharField(max_length=200, blank=True, db_index=True)
    # The exact JSON text sent (and signed): stored as text, because a JSON
    # column may reorder keys and the signature covers the bytes.
    body = models.TextField()
    policy = models.CharField(max_length=32)
    ordering_key = models.CharField(max_length=200, blank=True)
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    # Tries since the delivery was enqueued or last redelivered.
    attempts = models.PositiveIntegerField(default=0)
    # When the next try is due; empty once final.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Set while a worker has a try in flight; a dead worker's lease runs out.
    # The lease covers the try's hard deadline: while it lasts, the try may
    # still be on the wire, and it holds one of its endpoint's slots.
    locked_until = models.DateTimeField(null=True, blank=True)
    # Due, but all of its endpoint's slots (its in_flight_limit)
    # were taken, or an earlier delivery was in line for one: it waits asleep
    # and gets a slot in turn.
    waiting_for_slot = models.BooleanField(default=False)
    # Holds one of its endpoint's slots (counted in ``Endpoint.in_flight``):
    # from the start of a try until its outcome is stored — or, when its
    # worker was lost, until its lease has run out and the slot is taken back.
    holds_slot = models.BooleanField(db_default=False, default=False)
    # When the latest Celery message for this row is due to run; the sweep
    # re-sends only when that is long past (a lost message), not every time.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    # Dropped, unsent, after this (typing notifications go stale).
    expires_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    reply_body = models.JSONField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "delivery log"
        indexes = [
            # The sweep: pending rows by due time.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending"),
                name="delivery_due_idx",
            ),
            # Order per key: "is an earlier one still pending?"
            models.Index(
                fields=["endpoint", "ordering_key", "id"],
                condition=Q(status="pending"),
                name="delivery_order_idx",
            ),
            # Slots: "which slots of this endpoint are held past their lease?"
            models.Index(
                fields=["endpoint", "locked_until"],
                condition=Q(holds_slot=True),
                name="delivery_slot_held_idx",
            ),
            # "Is a delivery of this endpoint enqueued before this one asleep,
            # waiting for a slot?"
            models.Index(
                fields=["endpoint", "id"],
                condition=Q(status="pending", waiting_for_slot=True),
                name="delivery_slot_wait_idx",
            ),
            # "Which delivery of this endpoint is first in line for a slot?"
            models.Index(
                fields=["endpoint", "id"],
                condition=Q(status="pending"),
                name="delivery_line_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} → {self.endpoint_id} ({self.status})"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL_STATUSES

    @property
    def payload(self) -> Any:
        """The body as JSON data."""
        return json.loads(self.body)


class DeliveryAttempt(models.Model):
    """One HTTP request of a delivery, as sent and as answered."""

    EXCERPT_BYTES = 20 * 1024

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    # Empty while in flight; a try whose worker died is closed by the next one.
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    url = models.CharField(max_length=2000)
    request_headers = models.JSONField(default=dict)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    response_excerpt = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}"
