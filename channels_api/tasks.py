from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from channels_api.models import InboundRequest


@shared_task
def forget_idempotency_keys() -> int:
    """Forget A2 Idempotency-Keys older than IDEMPOTENCY_KEY_HOURS; returns how many."""
    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS)
    deleted, _ = InboundRequest.objects.filter(created__lt=cutoff).delete()
    return deleted
