"""The delivery log's retention rule (delivery/retention.py)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from config.settings import CELERY_BEAT_SCHEDULE
from delivery import retention, services, tasks
from delivery.models import Delivery, DeliveryAttempt

pytestmark = pytest.mark.django_db


def delivery_made(days_ago: float, status: str) -> Delivery:
    endpoint, _ = services.create_endpoint(url="https://crm.example.com/hook")
    made = Delivery.objects.create(
        endpoint=endpoint,
        webhook_id=f"msg_{uuid.uuid4().hex}",
        purpose="test",
        event="message",
        body="{}",
        policy="chat_api_message",
        status=status,
        created=timezone.now() - timedelta(days=days_ago),
        # not due: the suite's worker leaves it alone
        next_attempt_at=None if status != "pending" else timezone.now() + timedelta(days=1),
    )
    DeliveryAttempt.objects.create(
        delivery=made, number=1, started_at=made.created, url="https://crm.example.com/hook"
    )
    return made


def test_ended_deliveries_older_than_the_retention_go_with_their_tries(settings) -> None:
    settings.DELIVERY_LOG_RETENTION_DAYS = 30
    old = [delivery_made(31, status) for status in ("delivered", "failed", "dropped")]
    kept = [delivery_made(29, "delivered"), delivery_made(45, "pending")]

    assert tasks.forget_old_deliveries() == 3

    assert set(Delivery.objects.values_list("pk", flat=True)) == {each.pk for each in kept}
    assert not DeliveryAttempt.objects.filter(delivery__in=[each.pk for each in old]).exists()
    assert DeliveryAttempt.objects.count() == 2
    assert CELERY_BEAT_SCHEDULE["forget-old-deliveries"]["schedule"] == 3600.0


def test_batches_delete_all_that_is_due_and_a_retention_of_0_keeps_everything(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "BATCH", 2)
    for _ in range(5):
        delivery_made(40, "delivered")
    settings.DELIVERY_LOG_RETENTION_DAYS = 0
    assert retention.forget_old_deliveries() == 0

    settings.DELIVERY_LOG_RETENTION_DAYS = 30

    assert retention.forget_old_deliveries(batches=2) == 4  # one run's bound
    assert retention.forget_old_deliveries() == 1
    assert not Delivery.objects.exists()
