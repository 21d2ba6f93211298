"""The seam for telephony: who actually places a requested call.

Switchboard itself dials nobody. A callback request is stored as a ``Call``
and shown to the channel's agents; the backend named by
``TELEPHONY_BACKEND`` hears of it after the commit. The manual backend (the
default) leaves the dialling to the agent, who records the call's progress on
the agent pages or through the agent API. A provider's backend would place
the call and report progress through ``agents.services.record_call_progress``
(docs/calls.md).
"""

from __future__ import annotations

import logging
from functools import cache
from typing import TYPE_CHECKING, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from agents.models import Call

logger = logging.getLogger(__name__)


class TelephonyBackend(Protocol):
    def call_requested(self, call: Call) -> None:
        """A client asked to be called back (after the request was committed)."""


class ManualBackend:
    """Agents dial by hand and record each step themselves."""

    def call_requested(self, call: Call) -> None:
        logger.info("telephony.callback_requested call=%s channel=%s", call.pk, call.channel_id)


@cache
def _load(path: str) -> TelephonyBackend:
    backend: TelephonyBackend = import_string(path)()
    return backend


def backend() -> TelephonyBackend:
    return _load(getattr(settings, "TELEPHONY_BACKEND", "agents.telephony.ManualBackend"))
