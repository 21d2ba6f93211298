"""The delivery log's retention rule (docs/operations.md, "Reading the
delivery log"): a delivery that ended (delivered, failed or dropped) is
deleted with its tries DELIVERY_LOG_RETENTION_DAYS after it was made, so the
log does not grow for ever. A pending one is never deleted: the retry
schedule ends every delivery within about a day, and one still pending
after that is a fault a person should see.

What a delivery told the chat stays on the chat's rows (a message's
delivery status, a bot event's answer); the links to the deleted delivery
(``channels_api.MessageDelivery``, ``devhooks.WebhookDelivery``) go with it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from delivery.models import Delivery

logger = logging.getLogger(__name__)

# Deleted a batch at a time, so no statement holds locks on many rows for long.
BATCH = 1000


def forget_old_deliveries(*, batches: int = 100) -> int:
    """Delete up to ``batches`` times BATCH ended deliveries older than the
    retention (none while DELIVERY_LOG_RETENTION_DAYS is 0); returns how many."""
    days = settings.DELIVERY_LOG_RETENTION_DAYS
    if days <= 0:
        return 0
    old = Delivery.objects.filter(
        created__lt=timezone.now() - timedelta(days=days), status__in=Delivery.FINAL_STATUSES
    )
    deleted = 0
    for _ in range(batches):
        ids = list(old.order_by("created").values_list("pk", flat=True)[:BATCH])
        if not ids:
            break
        Delivery.objects.filter(pk__in=ids).delete()
        deleted += len(ids)
    if deleted:
        logger.info("delivery.log_forgotten deliveries=%d older_than_days=%d", deleted, days)
    return deleted
