"""Where results go: each owning app registers its handlers by purpose.

``delivery`` imports no app. An app registers in its ``AppConfig.ready()``::

    from delivery.handlers import register

    register("chat_api_message", on_success=message_delivered, on_failure=message_failed)

Handlers run in the worker, inside the transaction that stores the outcome,
each in its own savepoint: a handler that raises is logged and rolled back
alone, and the delivery's outcome stays stored.

- ``on_success(delivery, reply)``: the reply body parsed as JSON (a JSON string
  or ``None`` for an empty body; the raw text when it is not JSON).
- ``on_failure(delivery, error)``: the final failure as text for a person, e.g.
  ``HTTP 500``, ``timed out after 3 s``, ``connection refused``, or the target's
  own ``code: message``. Not called for a dropped delivery, nor for a policy
  that keeps failures from the owner (``chat_api_typing``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction

if TYPE_CHECKING:
    from delivery.models import Delivery

logger = logging.getLogger(__name__)

OnSuccess = Callable[["Delivery", Any], None]
OnFailure = Callable[["Delivery", str], None]


@dataclass(frozen=True)
class Handlers:
    on_success: OnSuccess | None = None
    on_failure: OnFailure | None = None


_registry: dict[str, Handlers] = {}


def register(
    purpose: str, *, on_success: OnSuccess | None = None, on_failure: OnFailure | None = None
) -> None:
    """Set the handlers of ``purpose``; a second call replaces the first."""
    _registry[purpose] = Handlers(on_success=on_success, on_failure=on_failure)


def unregister(purpose: str) -> None:
    _registry.pop(purpose, None)


def handlers_for(purpose: str) -> Handlers:
    return _registry.get(purpose, Handlers())


def _call(name: str, delivery: Delivery, handler: Callable[[], None]) -> None:
    try:
        with transaction.atomic():
            handler()
    except Exception:
        logger.exception(
            "delivery.handler_failed id=%s purpose=%s handler=%s",
            delivery.pk,
            delivery.purpose,
            name,
            extra={"event": "delivery.handler_failed", "delivery_id": delivery.pk},
        )


def tell_success(delivery: Delivery, reply: Any) -> None:
    on_success = handlers_for(delivery.purpose).on_success
    if on_success is not None:
        _call("on_success", delivery, lambda: on_success(delivery, reply))


def tell_failure(delivery: Delivery, error: str) -> None:
    on_failure = handlers_for(delivery.purpose).on_failure
    if on_failure is not None:
        _call("on_failure", delivery, lambda: on_failure(delivery, error))
