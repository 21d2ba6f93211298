"""Celery entry points of the delivery queue: take ids, call one service.

Both run on the queue "delivery" (a worker pool of its own, threads, so one
slow target does not hold up the others) with ``acks_late``; both are safe
to run twice.
"""

from __future__ import annotations

from celery import shared_task
from celery.worker import state

from delivery import retention, services


@shared_task(name="delivery.tasks.deliver", queue="delivery", acks_late=True, ignore_result=True)
def deliver(delivery_id: int) -> None:
    """Make the try that is due for one delivery (nothing if none is due), and
    those its endpoint's slot passes to next (``services.attempt_delivery``)."""
    services.attempt_delivery(delivery_id=delivery_id, wanted=thread_wanted)


def thread_wanted() -> bool:
    """Whether this worker wants the calling thread for other work: it is
    shutting down (a warm shutdown waits for its tasks), or a message whose
    countdown has run out — a delivery's retry — waits for a free thread.

    Other messages do not wait here for long: the worker takes one from the
    broker only as one of its tasks ends (prefetch multiplier 1), and that
    task's thread is then free for it.
    """
    # Set to the exit code on shutdown, which may be 0 (celery.worker.state).
    if any(
        flag is not None and flag is not False
        for flag in (state.should_stop, state.should_terminate)
    ):
        return True
    try:
        waiting = [r for r in state.reserved_requests if r not in state.active_requests]
    except RuntimeError:  # another thread changed the set while it was read
        return False
    return any(request.eta for request in waiting)


@shared_task(name="delivery.tasks.sweep", queue="delivery", acks_late=True, ignore_result=True)
def sweep() -> int:
    """Re-send overdue deliveries (beat, every DELIVERY_SWEEP_SECONDS)."""
    return services.sweep_overdue()


@shared_task(name="delivery.tasks.forget_old_deliveries", ignore_result=True)
def forget_old_deliveries() -> int:
    """The delivery log's retention rule (beat, hourly; delivery/retention.py)."""
    return retention.forget_old_deliveries()
