"""``forget``: what deliveries about an erased client carried is gone
(docs/privacy.md); one not yet sent is dropped, never sent."""

from __future__ import annotations

import pytest

from delivery import services
from delivery.models import Delivery, DeliveryAttempt, Endpoint
from tests.delivery.target import Reply, Target, drive, send

pytestmark = pytest.mark.django_db


def test_a_pending_delivery_is_dropped_and_every_body_blanked(
    target: Target, endpoint: Endpoint
) -> None:
    target.script(Reply(200, '{"echo": "Zebulon"}'))
    sent = drive(send(endpoint, {"name": "Zebulon"}, event="chat_finished", policy="devhook"))
    pending = send(endpoint, {"name": "Zebulon"}, event="chat_updated", policy="devhook")
    other = send(endpoint, {"name": "Ann"}, event="chat_updated", policy="devhook")

    dropped = services.forget(delivery_ids=[sent.pk, pending.pk], reason="erased")

    assert dropped == 1
    pending.refresh_from_db()
    assert (pending.status, pending.last_error) == (Delivery.Status.DROPPED, "erased")
    sent.refresh_from_db()
    assert sent.status == Delivery.Status.DELIVERED and sent.payload == {"erased": True}
    assert sent.reply_body is None
    assert "Zebulon" not in DeliveryAttempt.objects.get(delivery=sent).response_excerpt
    other.refresh_from_db()
    assert other.status == Delivery.Status.PENDING and other.payload == {"name": "Ann"}
    assert services.forget(delivery_ids=[], reason="erased") == 0
