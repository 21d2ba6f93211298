"""A real Chromium (Debian's package) driven by Playwright against a live server."""

from __future__ import annotations

import gc
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Agent
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel
from tests.delivery.target import Target
from tests.factories import AgentFactory
from tests.web.server import WebServer

# Playwright's sync API runs an event loop in the test thread; the ORM calls
# made by the tests themselves are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Playwright's assertions wait 5 s by default. The suite runs in three
# processes on two cores, each with a browser, a web process and a worker
# (docs/testing.md): a page's change can take longer than on a quiet machine,
# so assertions wait twice that. A change that never comes still fails.
expect.set_options(timeout=10_000)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
# What the pages are tested on (the ``size`` and ``device`` fixtures): a laptop's
# window, and a real phone's emulation from Playwright's device descriptors
# (mobile viewport, touch, scale factor, user agent), not a narrow desktop window.
LAPTOP = {"viewport": {"width": 1366, "height": 800}}
PHONE = "Pixel 5"
SIZES = ("laptop", "phone")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(params=SIZES)
def size(request: pytest.FixtureRequest) -> str:
    """A test that asks for it runs on a laptop and on a phone."""
    return str(request.param)


@pytest.fixture
def device(size: str, devices: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``new_context`` options for ``size``: ``chromium.new_context(**device)``."""
    return dict(devices[size])


@pytest.fixture
def page(chromium: Any, web_process: WebServer, device: dict[str, Any]) -> Iterator[Any]:
    """A page of the service on a laptop and on a phone (``device``), in a
    browser context of its own; a module that needs more (a time zone, a
    recorder) has a ``page`` of its own."""
    context = chromium.new_context(**device, base_url=web_process.url)
    yield context.new_page()
    context.close()


@pytest.fixture(scope="session")
def devices(playwright: Any) -> dict[str, dict[str, Any]]:
    return {"laptop": LAPTOP, "phone": _descriptors[PHONE]}


_descriptors: dict[str, dict[str, Any]] = {}


def chromium_path(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def playwright() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        _descriptors.update(
            (name, {k: v for k, v in descriptor.items() if k != "default_browser_type"})
            for name, descriptor in driver.devices.items()
        )
        yield driver


def _launch(playwright: Any, *names: str) -> Any:
    path = chromium_path(*names)
    if path is None:
        pytest.fail(
            "no chromium: install Debian's packages (apt-get install chromium "
            "chromium-headless-shell)"
        )
    return playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)


@pytest.fixture(scope="session")
def chromium(playwright: Any) -> Iterator[object]:
    """The browser of the browser tests: Debian's chromium-headless-shell,
    what Playwright itself runs headless tests on (the same Blink and V8 as
    chromium, without the desktop browser's windowing): a third of the
    desktop build's processor time for the same tests (docs/testing.md).
    Where only chromium is installed, chromium."""
    browser = _launch(playwright, "chromium-headless-shell", "chromium", "chromium-browser")
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def full_chromium(playwright: Any) -> Iterator[object]:
    """The desktop chromium, for what the headless shell lacks: desktop
    notifications (``Notification``). Started only in a process that runs
    such a test."""
    browser = _launch(playwright, "chromium", "chromium-browser")
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def _web_process(django_db_setup: None) -> Iterator[WebServer]:
    # Every browser test's visitors come from 127.0.0.1: the per-address limits
    # of new widget visitors and of open visitor streams (each tested on its
    # own) would end a long run early. A stream's slot outlives a closed
    # browser until the server sees the hang-up, and with Redis the slots
    # outlive the test: a widget test late in a run found the address's 100
    # slots taken, and its stream waited out the test's wait.
    server = WebServer(
        workers=2,  # as the Procfile runs it
        WIDGET_NEW_VISITORS_PER_ADDRESS="100000",
        WIDGET_ADDRESS_RATE_LIMIT="1000000",
        LIVE_STREAMS_PER_ADDRESS="100000",
        # A waiting visitor's place is asked every 3 s per place (10 s by
        # default): the queue's test sees it move within its wait.
        WIDGET_QUEUE_REFRESH_SECONDS="3",
    ).start()
    yield server
    server.stop()


@pytest.fixture
def web_process(transactional_db: None, _web_process: WebServer) -> WebServer:
    """The real web process (gunicorn with uvicorn workers, as the Procfile
    runs it), not Django's threaded test server: the pages' live stream
    needs an ASGI server. It serves the test database."""
    return _web_process


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where the browser tests save their screenshots: the README's folder
    under ``make screenshots`` (UPDATE_SCREENSHOTS=1), else a scratch folder,
    so that ``make test`` leaves the working tree as it found it."""
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        return SCREENSHOTS
    return tmp_path


@pytest.fixture(scope="session", autouse=True)
def _close_finished_threads_connections(django_db_setup: None) -> Iterator[None]:
    """A thread of this process that touched the database (a host page's
    server, a test's helper) leaves its connection open, with CONN_MAX_AGE,
    until the garbage collector frees it, and an open one stops the test
    database from being dropped at the end: it is collected before that.
    (Once per process, not after every test: the pages are served by the
    web process, and a collection of this heap costs a tenth of a second.)"""
    yield
    gc.collect()


# The agent pages' cast: Alice, a Chat API channel of hers, and its integrator.


@pytest.fixture
def target() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(email="alice@example.com", name="Alice Agent", is_online=False)


@pytest.fixture
def chat_api(alice: Agent, target: Target) -> ChatApiChannel:
    return create_chat_api_channel(
        name="Mobile app", webhook_url=target.url("/a3"), agents=[alice]
    )[0]


# --- what a failed browser test shows ------------------------------------------
# A page that waited in vain says only that it timed out. The report of a
# failed browser test also carries the ends of the logs of the web process and
# worker it used (the web process's errors and warnings, the worker's tasks).
LOG_LINES = 40


def record_network(context: Any, node: pytest.Item) -> None:
    """Keep what ``context``'s pages asked and were answered (and the live
    stream's events as they arrive), for the report should the test fail."""
    log: list[str] = getattr(node, "network_log", [])
    node.network_log = log  # type: ignore[attr-defined]
    started = time.monotonic()

    def line(text: str) -> None:
        log.append(f"{time.monotonic() - started:7.2f}s {text}")

    context.on("request", lambda r: line(f"-> {r.method} {r.url[:120]}"))
    context.on("response", lambda r: line(f"<- {r.status} {r.url[:120]}"))
    context.on("requestfailed", lambda r: line(f"!! {r.failure} {r.url[:120]}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and call.when == "call":
        network = getattr(item, "network_log", None)
        if network:
            report.sections.append(("the browser's requests", "\n".join(network[-200:])))
        funcargs = getattr(item, "funcargs", {})
        for name, path in (
            ("web process", getattr(funcargs.get("web_process"), "stderr_path", None)),
            ("worker", getattr(funcargs.get("celery_worker"), "log_path", None)),
        ):
            if path is not None and Path(path).exists():
                tail = Path(path).read_text(errors="replace").splitlines()[-LOG_LINES:]
                report.sections.append((f"end of the {name}'s log ({path})", "\n".join(tail)))
    return report
