"""enqueue writes in the caller's transaction and sends only after commit."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import responses
from django.db import transaction

from config.celery import app
from delivery import services, tasks
from delivery.models import Delivery
from tests.delivery.target import Target, send
from tests.worker import Worker, wait_for


class Rollback(Exception):
    pass


@pytest.mark.django_db
def test_the_id_goes_to_celery_on_commit(
    endpoint: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    published: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        tasks.deliver, "apply_async", lambda args, **options: published.append(args)
    )

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        delivery = send(endpoint)
        assert published == []  # nothing leaves before commit

    for callback in callbacks:
        callback()
    assert published == [(delivery.pk,)]


@pytest.mark.django_db
def test_a_broker_failure_on_commit_is_logged_not_raised(
    endpoint: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(tasks.deliver, "apply_async", broker_down)

    with django_capture_on_commit_callbacks(execute=True):
        delivery = send(endpoint)

    assert Delivery.objects.get(pk=delivery.pk).status == Delivery.Status.PENDING
    assert "delivery.dispatch_failed" in caplog.text


@pytest.mark.django_db
def test_a_rolled_back_caller_leaves_no_delivery(
    endpoint: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with (
        django_capture_on_commit_callbacks() as callbacks,
        pytest.raises(Rollback),
        transaction.atomic(),
    ):
        send(endpoint)
        raise Rollback

    assert not Delivery.objects.exists() and callbacks == []


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_sends_nothing(celery_worker: Worker, target: Target) -> None:
    endpoint, _ = services.create_endpoint(url=target.url())

    with pytest.raises(Rollback), transaction.atomic():
        send(endpoint, {"n": "rolled back"})
        raise Rollback
    with transaction.atomic():
        control = send(endpoint, {"n": "committed"})

    wait_for(lambda: Delivery.objects.get(pk=control.pk).status == "delivered")
    time.sleep(0.5)  # room for anything else to arrive
    assert [json.loads(r.body)["n"] for r in target.received] == ["committed"]
    assert list(Delivery.objects.values_list("pk", flat=True)) == [control.pk]


def test_beat_runs_the_sweep_every_few_seconds_on_the_delivery_queue() -> None:
    entry = app.conf.beat_schedule["delivery-sweep"]

    assert entry["task"] == tasks.sweep.name
    assert entry["schedule"] <= 10 and entry["options"]["queue"] == "delivery"
    assert tasks.deliver.queue == tasks.sweep.queue == "delivery"
    assert tasks.deliver.acks_late


@pytest.mark.django_db
def test_payload_tests_can_stand_in_for_the_target_with_responses(endpoint: Any) -> None:
    # Other apps' payload tests use the `responses` library (transport: real servers).
    with responses.RequestsMock() as mock:
        mock.post(endpoint.url, json={"result": "ok"})
        delivery = send(endpoint, {"event_name": "chat_accepted"})
        services.attempt_delivery(delivery_id=delivery.pk)

        assert json.loads(mock.calls[0].request.body or "") == {"event_name": "chat_accepted"}
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.reply_body == {"result": "ok"}
