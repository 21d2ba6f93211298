"""Signatures checked with the exact recipe of docs/signatures.md and with the
Standard Webhooks reference library, before, during and after a rotation."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from delivery import services
from delivery.models import Delivery, Endpoint
from tests.delivery.target import Received, Reply, Target, drive, send

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[2] / "docs" / "signatures.md"

Verify = Callable[..., bool]


@pytest.fixture(scope="module")
def verify() -> Verify:
    """``verify`` as defined by the first Python block of docs/signatures.md."""
    found = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert found, "docs/signatures.md has no python block"
    namespace: dict[str, Any] = {}
    exec(compile(found.group(1), str(DOC), "exec"), namespace)  # noqa: S102 (our own doc)
    return namespace["verify"]


def test_a_secret_is_whsec_base64_of_at_least_128_bits(db: None) -> None:
    _, first = services.create_endpoint(url="https://example.com/hook")
    _, second = services.create_endpoint(url="https://example.com/hook")

    assert first.startswith("whsec_") and first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"))) * 8 >= 128


def test_a_request_verifies_with_the_documented_recipe(target: Target, verify: Verify) -> None:
    endpoint, secret = services.create_endpoint(url=target.url())

    drive(send(endpoint, {"text": "hello", "emoji": "👋"}))

    [request] = target.received
    assert len(request.headers["webhook-signature"].split()) == 1
    assert verify(secret, request.headers, request.body)
    assert not verify(secret, request.headers, request.body.replace(b"hello", b"HELLO"))
    _, other_secret = services.create_endpoint(url=target.url())
    assert not verify(other_secret, request.headers, request.body)


def test_during_a_rotation_old_and_new_secret_both_verify(target: Target, verify: Verify) -> None:
    endpoint, old = services.create_endpoint(url=target.url())

    new = services.rotate_secret(endpoint=endpoint)
    drive(send(endpoint))

    [request] = target.received
    assert new != old
    assert len(request.headers["webhook-signature"].split()) == 2
    assert verify(new, request.headers, request.body)
    assert verify(old, request.headers, request.body)


def test_after_the_grace_period_only_the_new_secret_verifies(
    target: Target, verify: Verify
) -> None:
    endpoint, old = services.create_endpoint(url=target.url())
    new = services.rotate_secret(endpoint=endpoint)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        previous_secret_expires=timezone.now() - timedelta(seconds=1)
    )

    drive(send(endpoint))

    [request] = target.received
    assert verify(new, request.headers, request.body)
    assert not verify(old, request.headers, request.body)


def test_the_grace_period_is_a_setting(db: None, settings: Any) -> None:
    settings.DELIVERY_SECRET_GRACE_SECONDS = 600
    endpoint, _ = services.create_endpoint(url="https://example.com/hook")

    services.rotate_secret(endpoint=endpoint)

    left = endpoint.previous_secret_expires - timezone.now()  # type: ignore[operator]
    assert timedelta(seconds=590) < left <= timedelta(seconds=600)


def test_a_stale_timestamp_fails_the_recipe(target: Target, verify: Verify) -> None:
    endpoint, secret = services.create_endpoint(url=target.url())
    drive(send(endpoint))
    [request] = target.received

    assert not verify(secret, request.headers, request.body, tolerance=-1)


# --- the Standard Webhooks reference library, as a receiver uses it ------------


class LibraryReceiver:
    """A receiver that checks each request with ``standardwebhooks``, configured
    with one secret: 204 when it verifies, else 401 with the library's reason."""

    def __init__(self, secret: str) -> None:
        self.webhook = Webhook(secret)
        self.verified: list[Any] = []

    def __call__(self, request: Received, index: int) -> Reply:
        try:
            payload = self.webhook.verify(request.body, request.headers)  # type: ignore[arg-type]
        except WebhookVerificationError as error:
            refusal = {"error": {"code": "bad_signature", "message": str(error)}}
            return Reply(401, json.dumps(refusal))
        self.verified.append(payload)
        return Reply(204)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_the_reference_library_verifies_our_requests(target: Target, chunked: bool) -> None:
    endpoint, secret = services.create_endpoint(url=target.url(), chunked=chunked)
    receiver = LibraryReceiver(secret)
    target.respond(receiver)

    delivery = drive(send(endpoint, {"text": "Grüße", "emoji": "👋", "n": 1}))

    assert delivery.status == Delivery.Status.DELIVERED
    assert receiver.verified == [{"text": "Grüße", "emoji": "👋", "n": 1}]


def test_the_reference_library_refuses_a_request_for_another_secret(target: Target) -> None:
    endpoint, _ = services.create_endpoint(url=target.url())
    _, other_secret = services.create_endpoint(url=target.url())
    target.respond(LibraryReceiver(other_secret))

    delivery = drive(send(endpoint))

    assert delivery.status == Delivery.Status.FAILED
    assert delivery.last_error == "bad_signature: No matching signature found"


def test_during_a_rotation_receivers_with_the_old_or_the_new_secret_both_verify(
    target: Target,
) -> None:
    endpoint, old = services.create_endpoint(url=target.url())
    new = services.rotate_secret(endpoint=endpoint)
    holds_old, holds_new = LibraryReceiver(old), LibraryReceiver(new)

    target.respond(holds_old)  # not switched yet
    before = drive(send(endpoint, {"n": 1}))
    target.respond(holds_new)  # switched within the grace period
    after = drive(send(endpoint, {"n": 2}))

    assert before.status == after.status == Delivery.Status.DELIVERED
    assert holds_old.verified == [{"n": 1}] and holds_new.verified == [{"n": 2}]


def test_after_the_grace_period_a_receiver_with_the_old_secret_refuses(target: Target) -> None:
    endpoint, old = services.create_endpoint(url=target.url())
    new = services.rotate_secret(endpoint=endpoint)
    Endpoint.objects.filter(pk=endpoint.pk).update(
        previous_secret_expires=timezone.now() - timedelta(seconds=1)
    )

    target.respond(LibraryReceiver(old))
    late = drive(send(endpoint, {"n": 1}))
    target.respond(LibraryReceiver(new))
    switched = drive(send(endpoint, {"n": 2}))

    assert late.status == Delivery.Status.FAILED
    assert late.last_error == "bad_signature: No matching signature found"
    assert switched.status == Delivery.Status.DELIVERED
