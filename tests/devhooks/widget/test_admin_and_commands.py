"""Website widgets for operators: the command, the admin pages and the demo."""

from __future__ import annotations

import html
import json
import re
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client as Browser
from django.urls import reverse

from agents.models import Agent, CallbackSettings, Channel, Department
from devhooks.models import STUB, WidgetChannel
from devhooks.widget.demo import WIDGET_NAME, WIDGET_RULES
from devhooks.widget.services import WidgetError, create_widget_channel
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


def script_tag(widget_id: str) -> str:
    return f'<script src="{settings.PUBLIC_URL}/widget/{widget_id}.js" async></script>'


def run(*args: str) -> tuple[str, Any]:
    out = StringIO()
    call_command("create_widget_channel", *args, stdout=out, stderr=StringIO())
    return out.getvalue(), json.loads(out.getvalue())


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(email="alice@example.com", name="Alice Agent")


@pytest.fixture
def admin_browser() -> Browser:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    return browser


# --- the command ------------------------------------------------------------------


def test_the_command_prints_one_json_line_and_makes_the_channel(alice: Agent) -> None:
    bob = AgentFactory.create(email="bob@example.com")

    printed, answer = run(
        "--name=Shop website",
        "--agent= Alice@Example.com",
        "--agent=bob@example.com",
        "--callback",
        "--title=Questions? Ask us",
        "--waiting-text= Someone will be with you in a minute. ",
        "--prechat=name=required",
        "--prechat=phone=optional",
    )

    channel = Channel.objects.get()
    widget_id = channel.public_id
    assert printed.splitlines() == [json.dumps(answer)]
    assert answer == {
        "id": channel.pk,
        "widget_id": widget_id,
        "script_url": f"{settings.PUBLIC_URL}/widget/{widget_id}.js",
        "embed_code": script_tag(widget_id),
    }
    assert channel.name == "Shop website" and channel.kind == Channel.Kind.WIDGET
    assert set(channel.agents.all()) == {alice, bob}
    assert channel.widget.title == "Questions? Ask us"
    assert channel.widget.waiting_text == "Someone will be with you in a minute."
    assert channel.widget.prechat == {"name": "required", "phone": "optional"}
    assert CallbackSettings.objects.get(channel=channel).enabled


def test_without_options_the_widget_takes_no_callbacks_and_has_the_default_title() -> None:
    _printed, answer = run("--name=Blog")

    widget = WidgetChannel.objects.get(channel_id=answer["id"])
    assert widget.title == "Chat with us" and not widget.channel.agents.exists()
    assert not CallbackSettings.objects.get(channel=widget.channel).enabled


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--name=Shop", "--agent=nobody@example.com"],
            "no agent with e-mail 'nobody@example.com'",
        ),
        (
            ["--name=Shop", "--agent=alice@example.com", "--agent=nobody@example.com"],
            "no agent with e-mail 'nobody@example.com'",
        ),
        (["--name=  "], "a widget channel needs a name of 1 to 200 characters"),
        (["--name=" + "x" * 201], "a widget channel needs a name of 1 to 200 characters"),
        (["--name=Shop", "--title=" + "t" * 101], "the title is at most 100 characters"),
        (
            ["--name=Shop", "--waiting-text=" + "w" * 301],
            "the waiting text holds at most 300 characters",
        ),
        (
            ["--name=Shop", "--prechat=address=required"],
            "the pre-chat form asks for name, email, phone, not 'address'",
        ),
        (
            ["--name=Shop", "--prechat=email=yes"],
            "a pre-chat field is off, optional, required, not 'yes'",
        ),
    ],
)
def test_the_command_refuses_bad_input_and_makes_nothing(
    alice: Agent, args: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=re.escape(message)) as refused:
        run(*args)

    assert refused.value.returncode == 1
    assert not Channel.objects.exists()
    assert not WidgetChannel.objects.exists() and not CallbackSettings.objects.exists()


# --- the admin --------------------------------------------------------------------


ADD = "/admin/devhooks/widgetchannel/add/"


def form(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "Shop website",
        "agents": [],
        "active": "on",
        "title": "Chat with us",
        "language": "en",
        "color": "#1f6feb",
        "color2": "#ffffff",
        "departments": [],
        "offline_form": "on",
        "waiting_text": "",
        "prechat_name": "off",
        "prechat_email": "off",
        "prechat_phone": "off",
        "rules": '{"invitations": []}',
        **overrides,
    }


def copied(page: str, element_id: str) -> str:
    """What the Copy button next to ``element_id`` copies (static/admin/copy.js)."""
    assert f'data-copy="{element_id}"' in page
    found = re.search(rf'<input [^>]*id="{element_id}" value="([^"]*)"', page) or re.search(
        rf'<pre id="{element_id}"[^>]*>(.*?)</pre>', page, re.DOTALL
    )
    assert found is not None, page
    return html.unescape(found.group(1))


def test_the_admin_makes_the_channel_the_widget_and_its_callback_settings(
    admin_browser: Browser, alice: Agent
) -> None:
    billing = Department.objects.create(name="Billing")
    page = admin_browser.get(ADD).content.decode()
    for field in ("name", "agents", "active", "callback", "title", "color", "rules"):
        assert f'name="{field}"' in page
    rules = {
        "invitations": [
            {"text": "Billing question?", "after_seconds": 5, "url_contains": "/invoices"},
            {"text": "Hi! 👋", "after_seconds": 0, "url_contains": "", "department_id": billing.pk},
        ]
    }

    answer = admin_browser.post(
        ADD,
        form(
            agents=[alice.pk],
            callback="on",
            title="Talk to us",
            color="#0a7d3b",
            departments=[billing.pk],
            rules=json.dumps(rules),
        ),
    )

    widget = WidgetChannel.objects.get()
    channel = widget.channel
    assert (channel.name, channel.kind, channel.is_active) == ("Shop website", "widget", True)
    assert list(channel.agents.all()) == [alice]
    assert (widget.title, widget.color, widget.color2) == ("Talk to us", "#0a7d3b", "#ffffff")
    assert list(widget.departments.all()) == [billing] and widget.rules == rules
    callback = CallbackSettings.objects.get(channel=channel)
    assert callback.enabled and callback.working_days == [1, 2, 3, 4, 5, 6, 7]
    # On to the widget's page: the code for the site is there.
    change = reverse("admin:devhooks_widgetchannel_change", args=[widget.pk])
    assert answer.status_code == 302 and answer["Location"] == change
    assert "Hi! 👋" in admin_browser.get(change).content.decode()


def test_the_change_page_shows_the_embed_code_and_the_stub_to_copy(
    admin_browser: Browser,
) -> None:
    widget = WidgetChannel.objects.create(
        channel=Channel.objects.create(name="Blog", kind=Channel.Kind.WIDGET)
    )

    page = admin_browser.get(f"/admin/devhooks/widgetchannel/{widget.pk}/change/").content.decode()

    assert copied(page, "widget-embed-code") == script_tag(widget.widget_id)
    assert copied(page, "widget-stub-code") == STUB
    assert page.count(">Copy</button>") == 2
    assert "admin/copy.js" in page
    # The hours are set on the channel's page, where the callback settings are.
    assert f'href="/admin/agents/channel/{widget.channel_id}/change/"' in page


def callback_ticked(page: str) -> bool:
    [box] = re.findall(r'<input [^>]*name="callback"[^>]*>', page)
    return " checked" in box


def test_the_admin_changes_the_channel_and_makes_missing_callback_settings(
    admin_browser: Browser, alice: Agent
) -> None:
    admin_browser.post(ADD, form(agents=[alice.pk], callback="on"))
    widget = WidgetChannel.objects.get()
    change = f"/admin/devhooks/widgetchannel/{widget.pk}/change/"
    assert callback_ticked(admin_browser.get(change).content.decode())
    CallbackSettings.objects.filter(channel=widget.channel).delete()
    assert not callback_ticked(admin_browser.get(change).content.decode())

    answer = admin_browser.post(
        change, form(name="Shop", agents=[], active="", callback="on", title="Hello")
    )

    assert answer.status_code == 302
    widget.refresh_from_db()
    widget.channel.refresh_from_db()
    assert (widget.channel.name, widget.channel.is_active, widget.title) == ("Shop", False, "Hello")
    assert not widget.channel.agents.exists()
    assert CallbackSettings.objects.get(channel=widget.channel).enabled

    admin_browser.post(change, form(name="Shop"))  # callback left unticked
    assert not CallbackSettings.objects.get(channel=widget.channel).enabled
    assert WidgetChannel.objects.count() == Channel.objects.count() == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"name": "   "}, "This field is required."),
        ({"color": "blue"}, "Enter a valid value."),
        ({"rules": "[]"}, "Rules are an object"),
        ({"rules": '{"invitations": [{"text": ""}]}'}, "Invitation 1 needs a text."),
        (
            {"rules": '{"invitations": [{"text": "Hi", "after_seconds": "soon"}]}'},
            "after_seconds is a whole number of seconds",
        ),
        (
            {"rules": '{"invitations": [{"text": "Hi", "department_id": 99999}]}'},
            "department_id is null or a department this widget offers",
        ),
        ({"rules": '{"invitations": [{"text": "Hi", "colour": "red"}]}'}, "may hold only"),
        ({"rules": '{"invitations": [{"text": "Hi\\u0000"}]}'}, "holds a NUL or a lone"),
        (
            {"rules": '{"invitations": [{"text": "Hi", "url_contains": "\\ud83d"}]}'},
            "holds a NUL or a lone",
        ),
    ],
)
def test_the_admin_refuses_bad_input_and_makes_nothing(
    admin_browser: Browser, overrides: dict[str, Any], message: str
) -> None:
    page = admin_browser.post(ADD, form(**overrides))

    assert page.status_code == 200 and html.escape(message) in page.content.decode()
    assert not Channel.objects.exists() and not CallbackSettings.objects.exists()


def test_a_widget_is_switched_off_not_deleted(admin_browser: Browser) -> None:
    run("--name=Blog")
    widget = WidgetChannel.objects.get()

    refused = admin_browser.get(f"/admin/devhooks/widgetchannel/{widget.pk}/delete/")

    assert refused.status_code == 403 and WidgetChannel.objects.exists()


# --- the demo ---------------------------------------------------------------------


def seed() -> dict[str, Any]:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    [entry] = [c for c in json.loads(out.getvalue())["channels"] if c["kind"] == "widget"]
    return dict(entry)


def test_seed_demo_makes_the_demo_widget_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXAMPLE_WIDGET_HOST_URL", raising=False)

    first = seed()
    widget = WidgetChannel.objects.get()
    widget.title = "Changed in the admin"
    widget.save()
    second = seed()

    assert (
        first
        == second
        == {
            "kind": "widget",
            "name": WIDGET_NAME,
            "widget_id": widget.widget_id,
            "script_url": f"{settings.PUBLIC_URL}/widget/{widget.widget_id}.js",
            "embed_code": script_tag(widget.widget_id),
            "host_page": "http://127.0.0.1:8030/",
        }
    )
    widget.refresh_from_db()
    channel = widget.channel
    assert channel.name == WIDGET_NAME and channel.kind == "widget" and channel.is_active
    assert sorted(channel.agents.values_list("email", flat=True)) == [
        "alice@example.com",
        "bob@example.com",
        "sam@example.com",
    ]
    assert CallbackSettings.objects.get(channel=channel).enabled
    assert widget.offline_form and widget.rules == WIDGET_RULES
    assert widget.title == "Changed in the admin"  # an admin's change is kept


def test_seed_demo_names_the_example_site_of_make_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_WIDGET_HOST_URL", "http://127.0.0.1:9030/")

    assert seed()["host_page"] == "http://127.0.0.1:9030/"


def test_agents_are_found_whatever_the_case_of_their_e_mail() -> None:
    agent = Agent.objects.create_user("Carol.Mixed@Example.com", "pw", name="Carol")
    Agent.objects.filter(pk=agent.pk).update(
        email="Carol.Mixed@Example.com"
    )  # as an admin may save it

    widget = create_widget_channel(name="Case", agent_emails=["carol.mixed@example.com"])

    assert list(widget.channel.agents.all()) == [agent]


def test_a_title_over_100_characters_is_refused_and_nothing_is_made() -> None:
    with pytest.raises(WidgetError, match="at most 100"):
        create_widget_channel(name="Long", title="x" * 101)
    assert not WidgetChannel.objects.exists()
