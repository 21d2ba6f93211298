"""Celery entry points of the delivery queue: take ids, call one service.

Both run on the queue "delivery" (a worker pool of its own, threads, so one
slow target does not hold up the others) with ``acks_late``; both are safe
to run twice.
"""

from __future__ import annotations

from celery import shared_task

from delivery import retention, services


@shared_task(name="delivery.tasks.deliver", queue="delivery", acks_late=True, ignore_result=True)
def deliver(delivery_id: int) -> None:
    """Make the try that is due for one delivery (nothing if none is due), and
    those its endpoint's slot passes to next (``services.attempt_delivery``)."""
    services.attempt_delivery(delivery_id=delivery_id)


@shared_task(name="delivery.tasks.sweep", queue="delivery", acks_late=True, ignore_result=True)
def sweep() -> int:
    """Re-send overdue deliveries (beat, every DELIVERY_SWEEP_SECONDS)."""
    return services.sweep_overdue()


@shared_task(name="delivery.tasks.forget_old_deliveries", ignore_result=True)
def forget_old_deliveries() -> int:
    """The delivery log's retention rule (beat, hourly; delivery/retention.py)."""
    return retention.forget_old_deliveries()
