"""The admin: endpoints with a secret shown once, the delivery log, redeliver."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from delivery import services
from delivery.models import Delivery, Endpoint
from tests.delivery.target import Reply, Target, drive, send
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db: None) -> Client:
    client = Client()
    client.force_login(AgentFactory.create(role="admin"))
    return client


def _secret_on(page: str) -> str:
    found = re.findall(r'<code class="signing-secret">(whsec_[^<]+)</code>', page)
    assert len(found) == 1, page
    return found[0]


def test_a_new_endpoint_shows_its_secret_once(admin_client: Client) -> None:
    response = admin_client.post(
        reverse("admin:delivery_endpoint_add"),
        {"url": "https://crm.example.com/hook", "chunked": "on", "active": "on"},
        follow=True,
    )

    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    endpoint = Endpoint.objects.get()
    assert _secret_on(response.content.decode()) == endpoint.secret
    assert endpoint.chunked and endpoint.url == "https://crm.example.com/hook"
    change = admin_client.get(reverse("admin:delivery_endpoint_change", args=[endpoint.pk]))
    assert endpoint.secret not in change.content.decode()
    listing = admin_client.get(reverse("admin:delivery_endpoint_changelist"))
    assert endpoint.secret not in listing.content.decode()


def test_the_admin_refuses_a_bad_endpoint_url(admin_client: Client) -> None:
    response = admin_client.post(
        reverse("admin:delivery_endpoint_add"), {"url": "ftp://example.com/", "active": "on"}
    )

    assert "must start with http:// or https://" in response.content.decode()
    assert not Endpoint.objects.exists()


def test_rotating_shows_the_new_secret_and_keeps_the_old_one_signing(
    admin_client: Client,
) -> None:
    endpoint, old = services.create_endpoint(url="https://crm.example.com/hook")

    response = admin_client.post(
        reverse("admin:delivery_endpoint_changelist"),
        {"action": "rotate_secret", "_selected_action": [endpoint.pk]},
        follow=True,
    )

    endpoint.refresh_from_db()
    new = _secret_on(response.content.decode())
    assert new == endpoint.secret != old
    assert endpoint.previous_secret == old and endpoint.previous_secret_expires is not None


def test_the_delivery_log_shows_each_try(
    admin_client: Client, target: Target, endpoint: Endpoint
) -> None:
    target.script(Reply(503, "<h1>Service Unavailable</h1>"), Reply(400, "bad body"))
    delivery = drive(send(endpoint, {"text": "hi"}, event="chat_finished", policy="devhook"))
    other = drive(send(endpoint, event="chat_accepted"))

    listing = admin_client.get(
        reverse("admin:delivery_delivery_changelist"),
        {
            "status__exact": "failed",
            "purpose__exact": delivery.purpose,
            "event__exact": "chat_finished",
            "endpoint__id__exact": str(endpoint.pk),
        },
    ).content.decode()
    page = admin_client.get(
        reverse("admin:delivery_delivery_change", args=[delivery.pk])
    ).content.decode()

    assert reverse("admin:delivery_delivery_change", args=[delivery.pk]) in listing
    assert reverse("admin:delivery_delivery_change", args=[other.pk]) not in listing
    for shown in (
        "503",
        "400",
        "HTTP 503",
        "HTTP 400",
        "&lt;h1&gt;Service Unavailable",
        "bad body",
    ):
        assert shown in page
    assert delivery.webhook_id in page and "webhook-signature" in page  # headers sent
    assert "&quot;text&quot;: &quot;hi&quot;" in page  # body sent


def test_redeliver_from_the_admin(admin_client: Client, target: Target, endpoint: Endpoint) -> None:
    target.script(Reply(404))
    failed = drive(send(endpoint, policy="chat_api_message"))
    delivered = drive(send(endpoint))

    admin_client.post(
        reverse("admin:delivery_delivery_changelist"),
        {"action": "redeliver", "_selected_action": [failed.pk, delivered.pk]},
    )

    failed.refresh_from_db()
    delivered.refresh_from_db()
    assert failed.status == Delivery.Status.PENDING
    assert delivered.status == Delivery.Status.DELIVERED
    assert drive(failed).status == Delivery.Status.DELIVERED


def test_endpoints_list_their_failures(admin_client: Client, target: Target) -> None:
    endpoint, _ = services.create_endpoint(url=target.url())
    target.script(Reply(404), Reply(404), Reply(404))
    for _ in range(3):
        drive(send(endpoint, policy="chat_api_message"))

    page = admin_client.get(reverse("admin:delivery_endpoint_changelist")).content.decode()

    assert re.search(r'<td class="field-consecutive_failures">3</td>', page)


def test_a_delivery_is_read_only_and_its_tries_stay_numbered_after_a_redeliver(
    admin_client: Client, target: Target, endpoint: Endpoint
) -> None:
    target.script(Reply(500), Reply(500), Reply(500), Reply(200))
    failed = drive(send(endpoint, policy="chat_api_message"))
    assert failed.status == Delivery.Status.FAILED
    services.redeliver(delivery=failed)
    delivered = drive(failed)

    assert delivered.status == Delivery.Status.DELIVERED
    assert list(delivered.attempt_log.values_list("number", flat=True)) == [1, 2, 3, 4]
    change = reverse("admin:delivery_delivery_change", args=[delivered.pk])
    page = admin_client.get(change).content.decode()
    assert 'name="_save"' not in page and "deletelink" not in page
    assert admin_client.post(change, {"status": "failed"}).status_code == 403
    delete = reverse("admin:delivery_delivery_delete", args=[delivered.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    listing = admin_client.get(reverse("admin:delivery_delivery_changelist")).content.decode()
    row = listing[listing.index('<td class="field-tries">') :]
    assert row.startswith('<td class="field-tries">4</td>')
    # Status, tries and the last error come first.
    heads = re.findall(r'<th scope="col" class="(?:sortable )?column-(\w+)', listing)
    assert heads[:3] == ["status", "tries", "last_error_short"]
    assert "Delivery log" in listing
