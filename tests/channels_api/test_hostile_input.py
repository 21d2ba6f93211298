"""A2 against hostile or broken input: a clear 4xx or a stored message, never a 500."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Chat, Client, IdempotencyKey, Message
from agents.tasks import forget_idempotency_keys
from tests.channels_api.conftest import Integrator

pytestmark = pytest.mark.django_db

DOC = {
    "type": "document",
    "file": "https://cdn.example/a.pdf",
    "file_name": "a.pdf",
    "file_size": 1,
}


def raw(integrator: Integrator, body: bytes, **headers: str) -> Any:
    return integrator.http.post(
        integrator.endpoint, body, content_type="application/json", headers=headers
    )


def test_nul_and_half_emoji_are_cleaned_not_a_500(integrator: Integrator) -> None:
    body = (
        b'{"sender": {"id": "u\\u0000-1", "name": "Ann\\u0000"},'
        b' "message": {"type": "document", "text": "cut \\ud83d emoji", "file": "https://x.example/a",'
        b' "file_name": "a\\u0000\\udc00.pdf", "file_size": 5, "id": "m\\u0000"}}'
    )
    answer = raw(integrator, body)

    assert answer.status_code == 200, answer.content
    client = Client.objects.get()
    assert (client.external_id, client.name) == ("u-1", "Ann")
    message = Message.objects.get()
    assert message.text == "cut \ufffd emoji" and message.external_id == "m"
    assert message.payload["file_name"] == "a\ufffd.pdf"


NAN_ID = b'{"sender": {"id": NaN}, "message": {"type": "text", "text": "x"}}'
INFINITE_LATITUDE = (
    b'{"sender": {"id": 1}, "message": {"type": "location", "latitude": Infinity, "longitude": 0}}'
)


@pytest.mark.parametrize("body", [b"[" * 60000, NAN_ID, INFINITE_LATITUDE])
def test_deep_nesting_and_nan_are_400(integrator: Integrator, body: bytes) -> None:
    answer = raw(integrator, body)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request"
    assert not Message.objects.exists()


@pytest.mark.parametrize("field", ["file_size", "duration", "width", "height"])
def test_numbers_beyond_2_53_are_400(integrator: Integrator, field: str) -> None:
    answer = integrator.post({"sender": {"id": 1}, "message": {**DOC, field: 2**60}})
    assert answer.status_code == 400 and field in answer.json()["error"]["message"]


def test_a_malformed_content_length_is_400(integrator: Integrator) -> None:
    answer = integrator.http.generic(
        "POST", integrator.endpoint, b"{}", content_type="application/json", CONTENT_LENGTH="x"
    )
    assert answer.status_code == 400


@pytest.mark.parametrize("public_id", ["%00", "a%00b", "x" * 200, "é"])
def test_odd_channel_ids_are_the_same_404(integrator: Integrator, public_id: str) -> None:
    prefix, secret = integrator.endpoint.split("/")[1:3]
    for path in (f"/{prefix}/{secret}/{public_id}", f"/{prefix}/{secret}/{public_id}/status"):
        answer = (
            integrator.http.get(path) if path.endswith("status") else raw_post(integrator, path)
        )
        assert answer.status_code == 404, path
        assert answer.json()["error"]["code"] == "not_found"


def raw_post(integrator: Integrator, path: str) -> Any:
    return integrator.http.post(path, b"{}", content_type="application/json")


def test_long_optional_contact_fields_are_cut_not_rejected(integrator: Integrator) -> None:
    answer = integrator.say("hi", name="N" * 400, phone="1" * 300, invite="i" * 6000)

    assert answer.status_code == 200
    client = Client.objects.get()
    assert (len(client.name), len(client.phone)) == (255, 100)
    assert len(client.invite_text) == 5000


@pytest.mark.parametrize(
    "email",
    [
        "not-an-email\r\nBcc: everyone@example.com",
        "ann@example.com\nBcc: everyone@example.com",
        "ann@",
        "e" * 300,
        "a" * 250 + "@example.com",  # cut at 255 it would be another address
    ],
)
def test_an_invalid_sender_email_is_absent_but_the_message_is_kept(
    integrator: Integrator, email: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a client whose address is known
    integrator.say("one", email="ann@example.com")

    # When the integrator sends a message with an address that is none
    answer = integrator.say("two", email=email)

    # Then the message is taken, the address is as if absent, and the log says so
    assert answer.status_code == 200
    assert Client.objects.get().email == "ann@example.com"
    assert list(Message.objects.values_list("text", flat=True)) == ["one", "two"]
    assert "chat_api.sender_email_ignored sender='u-1' reason=invalid" in caplog.text


def test_typing_of_an_unknown_sender_creates_nobody(integrator: Integrator) -> None:
    answer = integrator.post(
        {"sender": {"id": "ghost", "name": "G" * 999}, "message": {"type": "typein"}}
    )
    assert answer.status_code == 200 and not Client.objects.exists()


def test_typing_ignores_contact_fields(integrator: Integrator) -> None:
    integrator.say("hi", name="Ann")
    integrator.post({"sender": {"id": "u-1", "name": "Changed"}, "message": {"type": "typein"}})
    assert Client.objects.get().name == "Ann" and Chat.objects.get().client_typing


def test_old_idempotency_keys_are_forgotten(integrator: Integrator, settings: Any) -> None:
    body = {"sender": {"id": "u"}, "message": {"type": "text", "text": "once"}}
    integrator.post(body, **{"Idempotency-Key": "old"})
    integrator.post(body, **{"Idempotency-Key": "new"})
    IdempotencyKey.objects.filter(key="old").update(
        created=timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS + 1)
    )

    assert forget_idempotency_keys() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]
    integrator.post(body, **{"Idempotency-Key": "old"})
    integrator.post(body, **{"Idempotency-Key": "new"})
    assert Message.objects.count() == 3  # a forgotten key is acted on again
