"""The example CRM (docs/examples/crm_receiver.py) as a real process, and its
demo seeder."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from django.conf import settings

from agents import services
from delivery.models import Delivery
from devhooks.models import IntegrationSettings
from devhooks.webhooks.demo import seed_demo_crm
from devhooks.webhooks.services import set_developer_webhook
from tests.delivery.target import drive
from tests.devhooks.conftest import Scene
from tests.web.server import free_port
from tests.worker import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "crm_receiver.py"


def start_example(port: int, secret: str) -> subprocess.Popen[bytes]:
    log = Path(settings.VAR_DIR) / f"example-crm-{port}.log"
    command = [sys.executable, str(EXAMPLE), "--port", str(port), "--signing-secret", secret]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.1)
    process.terminate()
    raise RuntimeError(f"the example CRM did not start:\n{log.read_text()}")


@pytest.fixture
def example_crm(webhook: IntegrationSettings) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    _config, secret = set_developer_webhook(url=url, rotate_secret=True)
    assert secret is not None
    process = start_example(port, secret)
    yield url
    process.terminate()
    process.wait(10)


def test_the_example_crm_fills_the_panel_and_records_the_assignment(
    scene: Scene, example_crm: str
) -> None:
    chat = scene.active_chat()
    accepted = drive(Delivery.objects.get(event="chat_accepted"))

    assert accepted.status == Delivery.Status.DELIVERED
    chat.refresh_from_db()
    number = scene.client.visitor_number
    assert chat.custom_data[0]["content"] == f"#{number}, 1 chat(s)"
    assert chat.custom_data[1]["content"] == "Your cart"
    assert chat.crm_link == f"{example_crm}card/{number}" and chat.enable_assign

    services.request_crm_assign(chat=chat, agent=scene.agent)
    assigned = drive(Delivery.objects.get(event="chat_assigned"))
    assert assigned.status == Delivery.Status.DELIVERED

    card = requests.get(chat.crm_link, timeout=5).text
    assert "chat_assigned" in card and f"card/{number}" in card


def test_the_example_crm_refuses_an_unsigned_request(example_crm: str) -> None:
    answer = requests.post(example_crm, json={"event_name": "chat_finished"}, timeout=5)
    assert answer.status_code == 401
    assert answer.json() == {"result": "the signature does not verify"}


def test_seed_points_the_webhook_at_the_example_once(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXAMPLE_CRM_URL", "http://127.0.0.1:8020")
    [first] = seed_demo_crm([])
    assert first["webhook_url"] == "http://127.0.0.1:8020/"
    assert first["signing_secret"].startswith("whsec_")
    [again] = seed_demo_crm([])
    assert "whsec_" not in again["signing_secret"]
    assert IntegrationSettings.load().url == "http://127.0.0.1:8020/"


def test_seed_leaves_an_admins_webhook_alone(db: None) -> None:
    set_developer_webhook(url="https://crm.example.com/hook")
    [entry] = seed_demo_crm([])
    assert "already" in entry["skipped"]
    assert IntegrationSettings.load().url == "https://crm.example.com/hook"


def test_the_example_crm_lists_its_cards_at_its_root(scene: Scene, example_crm: str) -> None:
    empty = requests.get(example_crm, timeout=5)
    assert empty.status_code == 200 and "No cards yet" in empty.text

    scene.active_chat()
    drive(Delivery.objects.get(event="chat_accepted"))

    number = scene.client.visitor_number
    listed = requests.get(example_crm, timeout=5)
    assert listed.status_code == 200
    assert f'<a href="/card/{number}">Visitor #{number}</a>: 1 event(s)' in listed.text
    assert "chat_accepted" in listed.text
