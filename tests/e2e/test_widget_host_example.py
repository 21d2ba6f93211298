"""The example site (docs/examples/widget_host.py) as a real process: its page
embeds the widget under a strict Content-Security-Policy, and in a real
browser every button and callback of it works with the real widget."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings

from devhooks.widget import services as widgets
from tests.e2e.test_widget import CALLBACKS
from tests.factories import AgentFactory
from tests.web.server import free_port
from tests.worker import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "widget_host.py"
HOST_JS = EXAMPLE.with_name("widget_host.js")
WIDGET_ID = "Hk2mV9xQ0aB7cD1e"

# Every svc_api function the page has a button for, and every callback it declares.
FUNCTIONS = [
    "open",
    "close",
    "chatMode",
    "getContactInfo",
    "getVisitorNumber",
    "setContactInfo",
    "setCustomData",
    "setRules",
    "setUserToken",
    "showProactiveInvitation",
    "startCall",
    "isCallbackEnabled",
    "sendOfflineMessage",
    "sendPageTitle",
    "getUnreadMessagesCount",
    "getUtm",
    "clearHistory",
    "setWidgetColor",
    "setLocale",
]
PAGE_FUNCTIONS = ["svc_destroy", "svc_init"]


def csp_for(origin: str) -> str:
    return (
        f"default-src 'self'; script-src 'self' {origin}; connect-src {origin}; "
        "style-src 'self'; img-src 'self' data:"
    )


@contextmanager
def example_site(service_url: str, widget_id: str = WIDGET_ID) -> Iterator[str]:
    """The example running on a free port; its base URL."""
    port = free_port()
    log = Path(settings.VAR_DIR) / f"example-site-{port}.log"
    command = [
        sys.executable, str(EXAMPLE), "--port", str(port),
        "--service-url", service_url, f"--widget-id={widget_id}",  # ids may begin with "-"
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the example site did not start:\n{log.read_text()}"
                    ) from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def site() -> Iterator[str]:
    with example_site("http://127.0.0.1:8000") as running:
        yield running


def host_calls() -> dict[str, tuple[str, str]]:
    """host.js's table: data-call of a button → (on what, function)."""
    found = re.findall(r'^ {4}(\w+): \[\s*"(svc_api|window)",\s*"(\w+)"', HOST_JS.read_text(), re.M)
    return {name: (where, function) for name, where, function in found}


def test_the_page_embeds_the_widget_with_no_inline_script(site: str) -> None:
    answer = requests.get(f"{site}/", timeout=5)

    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "text/html; charset=utf-8"
    assert answer.headers["Content-Security-Policy"] == csp_for("http://127.0.0.1:8000")
    page = answer.text
    embed = f'<script src="http://127.0.0.1:8000/widget/{WIDGET_ID}.js" async></script>'
    assert embed in page
    tags = re.findall(r"<script\b[^>]*>", page)
    assert tags == ['<script src="/host.js">', embed.removesuffix("</script>")]
    assert "<style" not in page and not re.search(r"<[^>]*\s(on\w+|style)\s*=", page)


def test_the_buttons_call_every_function_and_every_callback_is_declared(site: str) -> None:
    page = requests.get(f"{site}/", timeout=5).text
    script = requests.get(f"{site}/host.js", timeout=5)

    assert script.status_code == 200 and script.content == HOST_JS.read_bytes()
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert script.headers["Content-Security-Policy"] == csp_for("http://127.0.0.1:8000")
    calls = host_calls()
    buttons = re.findall(r'<button type="button" data-call="(\w+)">', page)
    assert buttons == list(calls)
    assert {function for where, function in calls.values() if where == "svc_api"} == set(FUNCTIONS)
    assert [function for where, function in calls.values() if where == "window"] == PAGE_FUNCTIONS
    assert calls["openCall"] == ("svc_api", "open") and '{ start: "call" }' in script.text
    for callback in CALLBACKS:
        assert f'"{callback}",' in script.text


def test_styles_are_a_file_there_is_no_icon_and_other_paths_are_not_found(site: str) -> None:
    styles = requests.get(f"{site}/host.css", timeout=5)
    icon = requests.get(f"{site}/favicon.ico", timeout=5)
    missing = requests.get(f"{site}/admin/", timeout=5)

    assert styles.status_code == 200 and styles.headers["Content-Type"].startswith("text/css")
    assert icon.status_code == 204 and missing.status_code == 404


def test_the_csp_names_the_service_origin_of_a_service_url_with_a_path() -> None:
    with example_site("https://chat.example.com/switchboard/") as site:
        answer = requests.get(f"{site}/", timeout=5)
        assert answer.headers["Content-Security-Policy"] == csp_for("https://chat.example.com")
        assert (
            f'<script src="https://chat.example.com/switchboard/widget/{WIDGET_ID}.js" async>'
            in answer.text
        )


@pytest.mark.parametrize(
    ("service_url", "widget_id", "message"),
    [
        ("http://127.0.0.1:8000", '"><script>alert(1)</script>', "--widget-id is 1 to 32"),
        ("javascript:alert(1)", WIDGET_ID, "--service-url must be an http(s) URL"),
        ('http://127.0.0.1:8000/"onload="x', WIDGET_ID, "--service-url must be an http(s) URL"),
    ],
)
def test_what_would_break_out_of_the_page_is_refused(
    service_url: str, widget_id: str, message: str
) -> None:
    command = [
        sys.executable, str(EXAMPLE), "--port", str(free_port()),
        "--service-url", service_url, f"--widget-id={widget_id}",  # ids may begin with "-"
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=20)

    assert done.returncode == 2 and message in done.stderr


# --- in a real browser, with the real widget ----------------------------------------

# Recorded before any page script runs (a test's init script is not subject to the CSP).
VIOLATIONS = """
window.violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.violations.push(`${e.effectiveDirective} ${e.blockedURI}`));
"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_every_button_and_callback_works_with_the_real_widget_under_the_csp(
    chromium: Any,
    web_process: Any,
) -> None:
    AgentFactory.create(email="alice@example.com", is_online=True)
    widget = widgets.create_widget_channel(
        name="Shop", agent_emails=["alice@example.com"], callback=True
    )
    from playwright.sync_api import expect

    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(VIOLATIONS)
    try:
        with example_site(web_process.url, widget.widget_id) as site:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{site}/")
            log = page.locator("#log")
            expect(log).to_contain_text("svc_onLoadCallback(", timeout=15000)

            buttons = page.locator("button[data-call]")
            labels = buttons.all_text_contents()
            assert len(labels) == len(host_calls())
            for number, label in enumerate(labels):
                buttons.nth(number).click()
                expect(log).to_contain_text(f"{label} returned")
                assert f"{label} threw" not in (log.text_content() or "")
            for function in ("getVisitorNumber", "isCallbackEnabled", "sendOfflineMessage"):
                expect(log).to_contain_text(f"{function} answered")
            lines = log.locator("li").all_text_contents()

            assert 'open() returned {"result":"ok"}' in "\n".join(lines)
            assert 'chatMode() returned "online"' in "\n".join(lines)
            for callback in ("svc_onOpen", "svc_onClose", "svc_onChangeState"):
                assert any(f"{callback}(" in line for line in lines), callback
            assert any("svc_onWidgetDestroy(" in line for line in lines)
            # svc_init put the widget back: it loads a second time.
            loaded = log.locator("li", has_text="svc_onLoadCallback(")
            expect(loaded).to_have_count(2)
            assert not any("is not there" in line for line in lines)
            assert page.evaluate("window.violations") == [] and errors == []
    finally:
        context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_page_fits_the_screen_and_the_launcher_is_in_sight(
    chromium: Any, device: dict[str, Any], web_process: Any
) -> None:
    widget = widgets.create_widget_channel(name="Shop")
    from playwright.sync_api import expect

    context = chromium.new_context(**device)
    try:
        with example_site(web_process.url, widget.widget_id) as site:
            page = context.new_page()
            page.goto(f"{site}/")
            label = page.get_by_test_id("svc-label")
            expect(label).to_be_visible(timeout=15000)
            # Nothing wider than the screen: no sideways scrolling on a phone.
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            sight = label.evaluate(
                "(el) => { const r = el.getBoundingClientRect(), v = visualViewport;"
                " return r.left >= v.offsetLeft && r.top >= v.offsetTop"
                " && r.right <= v.offsetLeft + v.width && r.bottom <= v.offsetTop + v.height; }"
            )
            assert sight
    finally:
        context.close()
