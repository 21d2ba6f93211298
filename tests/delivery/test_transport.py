"""One try against a real local server: framing, headers, what counts as delivered."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from delivery import services, transport
from delivery.models import Delivery, DeliveryAttempt, Endpoint
from tests.delivery.target import (
    Outcomes,
    Reply,
    Target,
    drive,
    hold_slots,
    lose_worker,
    send,
    slots_in_flight,
)

pytestmark = pytest.mark.django_db


def test_body_is_sent_with_content_length_by_default(target: Target, endpoint: Endpoint) -> None:
    delivery = send(endpoint, {"text": "Grüße", "n": 1})

    drive(delivery)

    [request] = target.received
    assert request.headers["Content-Length"] == str(len(request.body))
    assert "Transfer-Encoding" not in request.headers
    assert json.loads(request.body) == {"text": "Grüße", "n": 1}


def test_body_is_sent_chunked_when_the_endpoint_asks(target: Target) -> None:
    endpoint, _ = services.create_endpoint(url=target.url(), chunked=True)
    delivery = send(endpoint, {"text": "chunked please"})

    drive(delivery)

    [request] = target.received
    assert request.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in request.headers
    assert json.loads(request.body) == {"text": "chunked please"}
    assert delivery.attempt_log.get().request_headers["Transfer-Encoding"] == "chunked"


def test_headers_and_the_same_webhook_id_on_every_try(target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(503), Reply(200))
    delivery = send(endpoint)

    drive(delivery)

    first, second = target.received
    for request in (first, second):
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["User-Agent"].startswith("Switchboard-Webhooks/")
        assert request.headers["webhook-id"] == delivery.webhook_id
        assert abs(int(request.headers["webhook-timestamp"]) - timezone.now().timestamp()) < 10
        assert request.headers["webhook-signature"].startswith("v1,")
    logged = [a.request_headers for a in delivery.attempt_log.all()]
    assert [h["webhook-id"] for h in logged] == [delivery.webhook_id] * 2
    assert logged[1]["webhook-signature"] == second.headers["webhook-signature"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (Reply(200, '{"result": "ok", "custom_data": [{"title": "CRM"}]}'), {
            "result": "ok", "custom_data": [{"title": "CRM"}]
        }),
        (Reply(200, '"ok"'), "ok"),
        (Reply(204, ""), None),
        (Reply(202, "accepted, thanks"), "accepted, thanks"),
    ],
)  # fmt: skip
def test_a_2xx_that_is_not_an_error_object_is_delivered(
    target: Target, endpoint: Endpoint, outcomes: Outcomes, reply: Reply, expected: object
) -> None:
    target.script(reply)
    delivery = send(endpoint)

    delivery = drive(delivery)

    assert delivery.status == Delivery.Status.DELIVERED
    assert delivery.reply_body == expected
    assert outcomes.successes == [(delivery.pk, expected)] and outcomes.failures == []


def test_an_error_object_is_a_final_failure_with_the_targets_message(
    target: Target, endpoint: Endpoint, outcomes: Outcomes
) -> None:
    target.script(Reply(200, '{"error": {"code": "invalid_user", "message": "User is blocked"}}'))
    delivery = send(endpoint, policy="chat_api_message")

    delivery = drive(delivery)

    assert delivery.status == Delivery.Status.FAILED
    assert len(target.received) == 1
    assert delivery.last_error == "invalid_user: User is blocked"
    assert outcomes.failures == [(delivery.pk, "invalid_user: User is blocked")]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 410, 422])
def test_a_4xx_is_final(target: Target, endpoint: Endpoint, status: int) -> None:
    target.script(Reply(status))

    delivery = drive(send(endpoint, policy="chat_api_message"))

    assert delivery.status == Delivery.Status.FAILED and delivery.last_error == f"HTTP {status}"
    assert len(target.received) == 1


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_408_429_and_5xx_are_retried(target: Target, endpoint: Endpoint, status: int) -> None:
    target.script(Reply(status), Reply(status))

    delivery = drive(send(endpoint, policy="chat_api_message"))

    assert delivery.status == Delivery.Status.DELIVERED
    assert [a.status_code for a in delivery.attempt_log.all()] == [status, status, 200]


def test_retry_after_is_honoured(target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(429, headers={"Retry-After": "30"}))
    delivery = send(endpoint, policy="chat_api_message")

    services.attempt_delivery(delivery_id=delivery.pk)

    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.PENDING and delivery.last_error == "HTTP 429"
    wait = (delivery.next_attempt_at - timezone.now()).total_seconds()  # type: ignore[operator]
    assert 28 < wait <= 30


def test_the_last_error_of_a_retried_failure_reaches_the_owner(
    target: Target, endpoint: Endpoint, outcomes: Outcomes
) -> None:
    target.script(Reply(500), Reply(502), Reply(500, '{"error": {"message": "database down"}}'))

    delivery = drive(send(endpoint, policy="chat_api_message"))

    assert delivery.status == Delivery.Status.FAILED and delivery.attempts == 3
    assert outcomes.failures == [(delivery.pk, "database down")]


def test_a_redirect_is_not_followed(target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(302, headers={"Location": target.url("/elsewhere")}))

    delivery = drive(send(endpoint))

    assert [r.path for r in target.received] == ["/hook"]
    assert delivery.status == Delivery.Status.FAILED
    assert delivery.last_error.startswith("HTTP 302: redirect to http://127.0.0.1:")


def test_connection_refused_is_retried_and_told(db: None, outcomes: Outcomes) -> None:
    with socket.socket() as probe:  # a port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint, _ = services.create_endpoint(url=f"http://127.0.0.1:{port}/hook")

    delivery = drive(send(endpoint, policy="bot_event"))

    assert delivery.status == Delivery.Status.FAILED and delivery.attempts == 3
    assert delivery.last_error == "connection refused"
    assert outcomes.failures == [(delivery.pk, "connection refused")]


def test_a_try_times_out_after_the_policy_timeout(target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(200, delay=5))
    delivery = send(endpoint, policy="chat_api_message")

    services.attempt_delivery(delivery_id=delivery.pk)

    first, second = DeliveryAttempt.objects.filter(delivery=delivery)
    assert first.error == "timed out after 3 s" and first.status_code is None
    assert 2900 <= first.duration_ms <= 3600  # type: ignore[operator]
    # The next try was due when the first timed out: the same call made it.
    assert second.status_code == 200
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.DELIVERED


def test_the_response_excerpt_is_at_most_20_kb(target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(500, "x" * 100_000))
    delivery = send(endpoint)

    services.attempt_delivery(delivery_id=delivery.pk)

    excerpt = DeliveryAttempt.objects.get(delivery=delivery).response_excerpt
    assert len(excerpt.encode()) == 20 * 1024 and set(excerpt) == {"x"}


def test_a_delivered_delivery_is_not_sent_again(target: Target, endpoint: Endpoint) -> None:
    delivery = drive(send(endpoint))
    assert delivery.status == Delivery.Status.DELIVERED

    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    services.attempt_delivery(delivery_id=delivery.pk)  # a duplicate message

    assert len(target.received) == 1


def test_a_try_in_flight_is_not_started_twice(target: Target, endpoint: Endpoint) -> None:
    delivery = send(endpoint)
    Delivery.objects.filter(pk=delivery.pk).update(
        locked_until=timezone.now() + timedelta(seconds=30)
    )

    services.attempt_delivery(delivery_id=delivery.pk)

    assert target.received == []


def test_https_connects_to_the_checked_address_and_verifies_the_host_name(
    target_tls: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport.session(), "verify", str(target_tls.certificate))
    url = target_tls.url().replace("127.0.0.1", "localhost")  # the certificate's name
    endpoint, _ = services.create_endpoint(url=url)

    delivery = drive(send(endpoint))

    assert delivery.status == Delivery.Status.DELIVERED
    assert target_tls.received[0].headers["Host"] == f"localhost:{target_tls.server.port}"


def test_a_tls_failure_is_told_without_the_url(target_tls: Target) -> None:
    url = target_tls.url("/bot/SECRET-TOKEN").replace("127.0.0.1", "localhost")
    endpoint, _ = services.create_endpoint(url=url)

    delivery = drive(send(endpoint, policy="chat_api_typing"))

    assert delivery.status == Delivery.Status.FAILED and target_tls.received == []
    assert delivery.last_error.startswith("TLS error: certificate verify failed: self")
    assert "SECRET-TOKEN" not in delivery.last_error


def test_a_reply_with_nul_characters_is_stored(target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(200, '{"note": "a\\u0000b"}'))

    delivery = drive(send(endpoint))

    assert delivery.status == Delivery.Status.DELIVERED
    assert delivery.reply_body == {"note": "ab"}  # config.text.storable: a NUL goes


def test_a_lost_last_try_ends_the_delivery(
    target: Target, endpoint: Endpoint, outcomes: Outcomes
) -> None:
    delivery = send(endpoint, policy="chat_api_message")
    Delivery.objects.filter(pk=delivery.pk).update(attempts=3)  # try 3 began, its worker died
    hold_slots(delivery)
    lose_worker(delivery)
    DeliveryAttempt.objects.create(
        delivery=delivery, number=3, started_at=timezone.now(), url=endpoint.url
    )

    delivery = drive(delivery)

    assert target.received == [] and delivery.status == Delivery.Status.FAILED
    assert delivery.last_error == "no result from the last try (the worker was lost)"
    assert outcomes.failures == [(delivery.pk, delivery.last_error)]
    assert delivery.attempt_log.get().error == "no result: the worker was lost during this try"
    assert slots_in_flight(endpoint) == 0


def test_a_reply_dripping_past_the_timeout_is_cut_at_it() -> None:
    """A target that sends a byte now and then cannot hold a try past its timeout."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def drip() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        while not stop.wait(0.5):
            try:
                conn.sendall(b"x")
            except OSError:
                break
        conn.close()

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}/hook"
        started = time.monotonic()
        exchange = transport.post(url=url, body=b"{}", headers={}, chunked=False, timeout=2)
        took = time.monotonic() - started
    finally:
        stop.set()
        server.close()

    assert exchange.error == "timed out after 2 s" and exchange.status_code is None
    assert took < 3, took


@pytest.mark.parametrize(
    "reply",
    ['{"answer": "ok", "n": NaN}', '{"answer": "ok \\ud83d"}', '{"answer": "ok\\u0000"}'],
)
def test_odd_but_successful_replies_are_stored(
    target: Target, endpoint: Endpoint, reply: str
) -> None:
    target.script(Reply(200, reply))
    delivery = drive(send(endpoint))
    assert delivery.status == Delivery.Status.DELIVERED and len(target.received) == 1


@pytest.mark.parametrize("number", ["1e999", "-1e999"])
def test_a_number_beyond_a_float_is_kept_as_the_reply_text(
    target: Target, endpoint: Endpoint, number: str
) -> None:
    # Python reads 1e999 as Infinity, which neither jsonb nor a reader of the
    # log can take as a number: the reply is kept as the text it was.
    reply = f'{{"answer": "ok", "n": {number}}}'
    target.script(Reply(200, reply))
    delivery = drive(send(endpoint))
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.DELIVERED and delivery.reply_body == reply


def test_an_error_message_with_a_half_emoji_is_stored(target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(200, '{"error": {"code": "bad", "message": "no \\ud83d"}}'))
    delivery = drive(send(endpoint))
    assert delivery.status == Delivery.Status.FAILED and delivery.last_error == "bad: no \ufffd"
