"""Endpoints, redelivery, the owner's handlers and auto-disable."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from delivery import handlers, services
from delivery.models import Delivery, Endpoint
from tests.delivery.target import PURPOSE, Outcomes, Reply, Target, drive, send

pytestmark = pytest.mark.django_db


def test_create_endpoint_keeps_the_secret_it_returns(target: Target) -> None:
    endpoint, secret = services.create_endpoint(url=target.url(), chunked=True)

    endpoint.refresh_from_db()
    assert endpoint.secret == secret and endpoint.chunked and endpoint.active
    assert endpoint.consecutive_failures == 0


def test_update_endpoint_changes_only_what_is_given(endpoint: Endpoint) -> None:
    services.update_endpoint(endpoint=endpoint, url="https://example.com/new")
    services.update_endpoint(endpoint=endpoint, chunked=True)

    endpoint.refresh_from_db()
    assert endpoint.url == "https://example.com/new" and endpoint.chunked and endpoint.active


def test_update_endpoint_refuses_a_bad_url(endpoint: Endpoint) -> None:
    with pytest.raises(ValidationError):
        services.update_endpoint(endpoint=endpoint, url="mailto:someone@example.com")


def test_switching_an_endpoint_on_clears_its_failures(endpoint: Endpoint) -> None:
    Endpoint.objects.filter(pk=endpoint.pk).update(
        active=False, consecutive_failures=7, disabled_reason="switched off after 7"
    )

    services.update_endpoint(endpoint=endpoint, active=True)

    assert endpoint.active and endpoint.consecutive_failures == 0
    assert endpoint.disabled_reason == ""


def test_enqueue_stores_the_exact_json_sent(target: Target, endpoint: Endpoint) -> None:
    delivery = send(
        endpoint,
        {"b": 1, "a": [1, 2], "when": datetime(2025, 1, 2, tzinfo=UTC)},
        subject="message:123",
        ordering_key="chat:9",
        event="chat_accepted",
    )

    drive(delivery)

    assert target.received[0].body.decode() == delivery.body
    assert delivery.payload == {"b": 1, "a": [1, 2], "when": "2025-01-02T00:00:00Z"}
    assert Delivery.objects.filter(subject="message:123", event="chat_accepted").get() == delivery


def test_enqueue_refuses_an_unknown_policy(endpoint: Endpoint) -> None:
    with pytest.raises(ValueError, match="unknown delivery policy 'fast'"):
        send(endpoint, policy="fast")
    assert not Delivery.objects.exists()


# --- redelivery ---------------------------------------------------------------


def test_a_failed_delivery_is_redelivered_with_the_same_webhook_id(
    target: Target, endpoint: Endpoint, outcomes: Outcomes
) -> None:
    target.script(Reply(410))
    failed = drive(send(endpoint, policy="chat_api_message"))
    assert failed.status == Delivery.Status.FAILED

    with pytest.raises(services.DeliveryError):
        services.redeliver(delivery=drive(send(endpoint)))  # delivered: refused
    again = services.redeliver(delivery=failed)

    assert again.status == Delivery.Status.PENDING and again.attempts == 0
    assert again.last_error == ""
    again = drive(again)
    assert again.status == Delivery.Status.DELIVERED and again.attempts == 1
    first, _, second = target.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == failed.webhook_id
    assert [a.status_code for a in again.attempt_log.all()] == [410, 200]
    assert [pk for pk, _ in outcomes.successes].count(failed.pk) == 1
    assert outcomes.failures == [(failed.pk, "HTTP 410")]


def test_redeliver_sends_after_commit(
    endpoint: Endpoint, django_capture_on_commit_callbacks: Any
) -> None:
    delivery = send(endpoint)
    Delivery.objects.filter(pk=delivery.pk).update(status=Delivery.Status.DROPPED)

    with django_capture_on_commit_callbacks() as callbacks:
        services.redeliver(delivery=delivery)

    assert len(callbacks) == 1


# --- the owner's handlers -------------------------------------------------------


def test_a_handler_that_raises_does_not_lose_the_outcome(
    target: Target, endpoint: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(delivery: Delivery, reply: Any) -> None:
        Endpoint.objects.filter(pk=delivery.endpoint_id).update(url="https://changed.example/")
        raise RuntimeError("owner bug")

    handlers.register(PURPOSE, on_success=broken)
    try:
        with caplog.at_level(logging.ERROR, logger="delivery.handlers"):
            delivery = drive(send(endpoint))
    finally:
        handlers.unregister(PURPOSE)

    assert delivery.status == Delivery.Status.DELIVERED
    endpoint.refresh_from_db()
    assert endpoint.url == target.url()  # the handler's own writes were rolled back
    assert "delivery.handler_failed" in caplog.text


def test_a_stale_typing_notification_is_dropped_silently(
    target: Target, endpoint: Endpoint, outcomes: Outcomes
) -> None:
    delivery = send(endpoint, {"typing": True}, policy="chat_api_typing")
    Delivery.objects.filter(pk=delivery.pk).update(expires_at=timezone.now())

    delivery = drive(delivery)

    assert delivery.status == Delivery.Status.DROPPED
    assert delivery.last_error == "not sent within 5 s" and delivery.attempts == 0
    assert target.received == [] and outcomes.failures == []


def test_a_failed_typing_notification_is_not_told_to_the_owner(
    target: Target, endpoint: Endpoint, outcomes: Outcomes
) -> None:
    target.script(Reply(500))

    delivery = drive(send(endpoint, {"typing": True}, policy="chat_api_typing"))

    assert delivery.status == Delivery.Status.FAILED and delivery.attempts == 1
    assert outcomes.failures == []


# --- auto-disable -------------------------------------------------------------


def test_endpoints_are_not_switched_off_by_default(target: Target, endpoint: Endpoint) -> None:
    target.respond(lambda request, index: Reply(404))

    for _ in range(5):
        drive(send(endpoint, policy="chat_api_message"))

    endpoint.refresh_from_db()
    assert endpoint.active and endpoint.consecutive_failures == 5


def test_an_endpoint_is_switched_off_after_n_failures_when_set(
    settings: Any, target: Target, endpoint: Endpoint, outcomes: Outcomes
) -> None:
    settings.DELIVERY_AUTO_DISABLE_AFTER = 2
    target.respond(lambda request, index: Reply(404))

    drive(send(endpoint, policy="chat_api_message"))
    drive(send(endpoint, policy="chat_api_message"))
    third = drive(send(endpoint, policy="chat_api_message"))

    endpoint.refresh_from_db()
    assert not endpoint.active and endpoint.consecutive_failures == 2
    assert endpoint.disabled_reason == (
        "switched off after 2 consecutive failed deliveries; last error: HTTP 404"
    )
    assert len(target.received) == 2
    assert third.status == Delivery.Status.FAILED and third.attempts == 0
    assert outcomes.failures[-1] == (third.pk, "endpoint is disabled")


def test_a_success_resets_the_failure_count(target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(404), Reply(404))
    drive(send(endpoint, policy="chat_api_message"))
    drive(send(endpoint, policy="chat_api_message"))

    drive(send(endpoint))

    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 0


def test_retry_waits_beyond_a_minute_wait_in_the_database(
    target: Target, endpoint: Endpoint, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    settings.DELIVERY_RETRY_SCALE = 1  # production's spacing (the suite's is shorter)
    target.script(Reply(500), Reply(500))
    delivery = send(endpoint, policy="devhook")
    Delivery.objects.filter(pk=delivery.pk).update(attempts=2)  # as if tries 1, 2 had failed

    with django_capture_on_commit_callbacks() as callbacks:
        services.attempt_delivery(delivery_id=delivery.pk)  # try 3 fails; try 4 in ~10 min

    delivery.refresh_from_db()
    assert delivery.next_attempt_at - timezone.now() > timedelta(minutes=7)  # type: ignore[operator]
    assert delivery.dispatched_at is None and callbacks == []  # no Celery countdown
