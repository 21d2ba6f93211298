"""Calls: when a callback can be requested, how an agent records a call on the
pages and through the API, the admin's callback settings, and the CRM panel's
assign button (the other agent action of issue 11)."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

import pytest
from django.test import Client as Browser
from rest_framework.test import APIClient

from agents import events, services
from agents.models import Agent, Call, CallbackSettings, Channel, Chat, Client
from agents.tokens import issue_token
from tests.factories import AgentFactory, ChannelFactory, ChatFactory, ClientFactory, text

pytestmark = pytest.mark.django_db

EVIL = '<script>alert("x")</script>'
EVERY_DAY = [1, 2, 3, 4, 5, 6, 7]
# Wednesday 3 June 2026, noon UTC: 08:00 in New York.
WEDNESDAY_NOON_UTC = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)


def callback_settings(channel: Channel, **fields: Any) -> CallbackSettings:
    """Callbacks taken all day every day, unless ``fields`` say otherwise."""
    rules = {"enabled": True, "working_days": EVERY_DAY, "opens_at": time(0), "closes_at": time.max}
    return CallbackSettings.objects.create(channel=channel, **(rules | fields))


@pytest.fixture
def channel(agent: Agent) -> Channel:
    channel = ChannelFactory.create(agents=[agent], name="Shop hotline")
    callback_settings(channel)
    return channel


@pytest.fixture
def customer(channel: Channel) -> Client:
    return ClientFactory.create(channel=channel, name=f"Ann {EVIL}")


@pytest.fixture
def call(channel: Channel, customer: Client) -> Call:
    services.post_client_message(client=customer, content=text("Please call me"))
    return services.request_callback(channel=channel, phone="+49 30 1234567", client=customer)


@pytest.fixture
def browser(agent: Agent) -> Browser:
    page = Browser()
    page.force_login(agent)
    return page


def progress(browser: Browser, call: Call, **fields: str) -> str:
    """Press a step's button without JavaScript; the page the agent lands on."""
    answer = browser.post(
        f"/agent/calls/{call.pk}/progress", {"next": "/agent/", **fields}, follow=True
    )
    assert answer.status_code == 200
    return answer.content.decode()


def calls_html(browser: Browser) -> str:
    return str(browser.get("/agent/live").json()["lists_html"])


# --- when a callback can be requested ------------------------------------------


def test_callbacks_are_disabled_until_switched_on(agent: Agent) -> None:
    channel = ChannelFactory.create(agents=[agent])
    assert services.callback_unavailable_reason(channel=channel) == "Callback disabled"
    callback_settings(channel, enabled=False)
    assert services.callback_unavailable_reason(channel=channel) == "Callback disabled"

    with pytest.raises(services.CallbackUnavailable) as refused:
        services.request_callback(channel=channel, phone="+4930123456")
    assert refused.value.message == "Callback disabled"
    assert not Call.objects.exists()


def test_working_hours_are_the_channels_local_time(agent: Agent) -> None:
    channel = ChannelFactory.create(agents=[agent])
    callback_settings(
        channel,
        working_days=[1, 2, 3, 4, 5],
        opens_at=time(9),
        closes_at=time(18),
        time_zone="America/New_York",
    )

    def reason(utc_hour: int, day: int = 3) -> str:
        at = datetime(2026, 6, day, utc_hour, 0, tzinfo=UTC)
        return services.callback_unavailable_reason(channel=channel, at=at)

    assert reason(12) == "Callback unavaiable"  # 08:00 in New York, noon in UTC
    assert reason(14) == ""  # 10:00 in New York
    assert reason(21, day=3) == ""  # 17:00 in New York
    assert reason(22, day=3) == "Callback unavaiable"  # 18:00: closed
    assert reason(14, day=6) == "Callback unavaiable"  # Saturday


def test_the_working_day_is_the_channels_local_day(agent: Agent) -> None:
    channel = ChannelFactory.create(agents=[agent])
    callback_settings(channel, working_days=[1, 2, 3, 4, 5], time_zone="America/New_York")
    saturday_in_utc = datetime(2026, 6, 6, 2, 0, tzinfo=UTC)  # Friday 22:00 in New York
    assert services.callback_unavailable_reason(channel=channel, at=saturday_in_utc) == ""


def test_a_second_call_waits_until_the_first_is_over(call: Call, customer: Client) -> None:
    with pytest.raises(services.CallbackUnavailable) as refused:
        services.request_callback(channel=call.channel, phone="+49301234567", client=customer)
    assert refused.value.message == "Callback unavaiable"  # the spec's spelling

    services.record_call_progress(call=call, agent=AgentFactory.create(), status="end")
    again = services.request_callback(channel=call.channel, phone="+49301234567", client=customer)
    assert again.status == Call.Status.START


def test_a_callback_request_waits_for_an_agent(
    channel: Channel, customer: Client, published: list[events.Event]
) -> None:
    chat = services.post_client_message(client=customer, content=text("hi")).chat

    call = services.request_callback(channel=channel, phone=" +49 (30) 123-4567 ", client=customer)

    assert (call.type, call.status, call.phone) == ("callback", "start", "+49301234567")
    assert call.chat == chat and call.agent is None
    assert events.CallChanged(call_id=call.pk, status="start") in published


@pytest.mark.parametrize(
    ("typed", "stored"),
    [("+1 212 555 0100", "+12125550100"), ("030/1234567", "0301234567"), ("1234567", "1234567")],
)
def test_phone_numbers_are_stored_as_digits(channel: Channel, typed: str, stored: str) -> None:
    assert services.request_callback(channel=channel, phone=typed).phone == stored


@pytest.mark.parametrize(
    "typed", ["", "123456", "call me", "+49 30 12345x67", "1234567890123456", "++4930123456"]
)
def test_what_is_no_phone_number_is_refused(channel: Channel, typed: str) -> None:
    with pytest.raises(services.ServiceError, match="enter a phone number"):
        services.request_callback(channel=channel, phone=typed)
    assert not Call.objects.exists()


# --- the Calls list on the agent pages ------------------------------------------


def test_an_open_call_shows_who_to_call_and_the_steps(browser: Browser, call: Call) -> None:
    html = browser.get("/agent/").content.decode()

    assert html.count('data-testid="call"') == 1
    assert "+49301234567" in html and 'href="tel:+49301234567"' in html
    assert "Ann &lt;script&gt;" in html and EVIL not in html
    assert "Shop hotline" in html and "Waiting for an agent" in html
    for step in ("agent-connected", "client-connected", "end", "error"):
        assert f'data-testid="call-{step}"' in html


def test_an_agent_records_a_call_step_by_step(browser: Browser, call: Call, agent: Agent) -> None:
    html = progress(browser, call, status="agent_connected")
    assert "Agent connected" in html and 'data-testid="call-agent-connected"' not in html

    html = progress(browser, call, status="client_connected")
    assert 'data-testid="call-client-connected"' not in html and 'data-testid="call-end"' in html

    html = progress(browser, call, status="end", record_url="https://rec.example/42.mp3")
    assert "Ended" in html and 'href="https://rec.example/42.mp3"' in html
    assert 'data-testid="call-end"' not in html  # an ended call has no steps left
    call.refresh_from_db()
    assert (call.status, call.agent, call.ended_at is not None) == ("end", agent, True)


def test_a_refused_step_is_a_message_not_an_error_page(browser: Browser, call: Call) -> None:
    progress(browser, call, status="client_connected")

    html = progress(browser, call, status="agent_connected")

    assert "the call is client_connected and cannot become agent_connected" in html
    call.refresh_from_db()
    assert call.status == "client_connected"


def test_an_ended_call_takes_no_more_steps(browser: Browser, call: Call) -> None:
    progress(browser, call, status="end")
    for status in ("agent_connected", "client_connected", "end", "error"):
        html = progress(browser, call, status=status, reason="busy")
        assert f"the call is end and cannot become {status}" in html
    call.refresh_from_db()
    assert (call.status, call.reason) == ("end", "")


def test_a_failed_call_needs_a_reason(browser: Browser, call: Call) -> None:
    assert "say why the call failed" in progress(browser, call, status="error", reason="  ")
    call.refresh_from_db()
    assert call.status == "start"

    html = progress(browser, call, status="error", reason=f"No answer {EVIL}")

    assert "Failed" in html and "No answer &lt;script&gt;" in html and EVIL not in html
    call.refresh_from_db()
    assert (call.status, call.reason) == ("error", f"No answer {EVIL}")


@pytest.mark.parametrize(
    ("status", "record_url"),
    [
        ("agent_connected", "https://rec.example/1.mp3"),
        ("error", "https://rec.example/1.mp3"),
        ("end", "javascript:alert(1)"),
        ("end", "ftp://rec.example/1.mp3"),
    ],
)
def test_a_recording_url_is_an_http_url_given_at_the_end(
    browser: Browser, call: Call, status: str, record_url: str
) -> None:
    html = progress(browser, call, status=status, reason="busy", record_url=record_url)

    assert "a recording URL is an http(s) URL, given when the call ended" in html
    call.refresh_from_db()
    assert (call.status, call.record_url) == ("start", "")


def test_an_unknown_step_is_refused(browser: Browser, call: Call) -> None:
    html = progress(browser, call, status="start")
    assert "status must be agent_connected, client_connected, end or error" in html


def test_with_javascript_a_refusal_is_json(browser: Browser, call: Call) -> None:
    def press(status: str) -> Any:
        return browser.post(
            f"/agent/calls/{call.pk}/progress",
            {"status": status},
            headers={"X-Requested-With": "fetch"},
        )

    assert press("agent_connected").json() == {"ok": True}
    again = press("agent_connected")
    assert again.status_code == 400
    assert again.json()["error"] == {
        "code": "invalid_state",
        "message": "the call is agent_connected and cannot become agent_connected",
    }


def test_the_agent_returns_to_the_page_the_form_was_on(browser: Browser, call: Call) -> None:
    back = browser.post(
        f"/agent/calls/{call.pk}/progress",
        {"status": "agent_connected", "next": f"/agent/chats/{call.chat_id}/"},
    )
    assert back["Location"] == f"/agent/chats/{call.chat_id}/"
    away = browser.post(
        f"/agent/calls/{call.pk}/progress", {"status": "end", "next": "https://evil.example/"}
    )
    assert away["Location"] == "/agent/"


def test_open_calls_come_first_and_show_live(browser: Browser, channel: Channel) -> None:
    ended = services.request_callback(channel=channel, phone="+4930111111")
    services.record_call_progress(call=ended, agent=AgentFactory.create(), status="end")
    assert calls_html(browser).count('data-testid="call"') == 1

    services.request_callback(channel=channel, phone="+4930222222")

    html = calls_html(browser)
    assert html.count('data-testid="call"') == 2
    assert html.index("+4930222222") < html.index("+4930111111")
    assert 'id="calls-count" title="waiting or in progress">1<' in html


def test_an_agent_of_another_channel_sees_no_call(call: Call) -> None:
    stranger = AgentFactory.create()
    ChannelFactory.create(agents=[stranger])
    page = Browser()
    page.force_login(stranger)

    assert 'data-testid="call"' not in page.get("/agent/").content.decode()
    assert 'data-testid="call"' not in page.get("/agent/live").json()["lists_html"]
    assert page.post(f"/agent/calls/{call.pk}/progress", {"status": "end"}).status_code == 404
    call.refresh_from_db()
    assert call.status == "start"


def test_call_steps_need_a_csrf_token(agent: Agent, call: Call) -> None:
    strict = Browser(enforce_csrf_checks=True)
    strict.force_login(agent)
    assert strict.post(f"/agent/calls/{call.pk}/progress", {"status": "end"}).status_code == 403
    call.refresh_from_db()
    assert call.status == "start"


# --- calls in the agent API -------------------------------------------------------


def test_the_api_lists_my_calls_open_first(api: APIClient, call: Call, channel: Channel) -> None:
    ended = services.request_callback(channel=channel, phone="+4930111111")
    services.record_call_progress(call=ended, agent=AgentFactory.create(), status="end")
    stranger_channel = ChannelFactory.create()
    callback_settings(stranger_channel)
    services.request_callback(channel=stranger_channel, phone="+4930333333")

    body = api.get("/api/agent/v1/calls").json()

    assert body["count"] == 2
    first, second = body["results"]
    assert (first["id"], first["status"], second["id"], second["status"]) == (
        call.pk, "start", ended.pk, "end"
    )  # fmt: skip
    assert first["phone"] == "+49301234567" and first["type"] == "callback"
    assert first["channel"] == {"id": channel.pk, "name": "Shop hotline", "kind": "chat_api"}
    assert first["client"]["name"] == f"Ann {EVIL}" and first["chat_id"] == call.chat_id
    assert first["agent"] is None and first["ended"] is None
    assert second["client"] is None and second["ended"]


def test_the_api_records_each_step(api: APIClient, call: Call, agent: Agent) -> None:
    url = f"/api/agent/v1/calls/{call.pk}/progress"

    connected = api.post(url, {"status": "agent_connected"}, format="json")
    assert connected.status_code == 200
    assert connected.json()["status"] == "agent_connected"
    assert connected.json()["agent"] == {"id": agent.pk, "name": agent.name}
    assert api.post(url, {"status": "client_connected"}, format="json").status_code == 200
    ended = api.post(
        url, {"status": "end", "record_url": "https://rec.example/7.mp3"}, format="json"
    )
    assert ended.status_code == 200
    assert (ended.json()["status"], ended.json()["record_url"]) == (
        "end", "https://rec.example/7.mp3"
    )  # fmt: skip
    assert ended.json()["ended"]


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({}, "invalid_request", "status"),
        ({"status": "start"}, "invalid_request", "status"),
        ({"status": "error"}, "invalid_request", "say why the call failed"),
        (
            {"status": "agent_connected", "record_url": "https://r.example/1"},
            "invalid_request",
            "recording URL",
        ),
        ({"status": "error", "reason": "x" * 501}, "invalid_request", "reason"),
    ],
)
def test_the_api_refuses_a_bad_step(
    api: APIClient, call: Call, body: dict[str, str], code: str, message: str
) -> None:
    answer = api.post(f"/api/agent/v1/calls/{call.pk}/progress", body, format="json")

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == code and message in answer.json()["error"]["message"]
    call.refresh_from_db()
    assert call.status == "start"


def test_the_api_refuses_a_step_out_of_order(api: APIClient, call: Call) -> None:
    url = f"/api/agent/v1/calls/{call.pk}/progress"
    api.post(url, {"status": "error", "reason": "no answer"}, format="json")

    answer = api.post(url, {"status": "end"}, format="json")

    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "code": "invalid_state",
        "message": "the call is error and cannot become end",
    }


def test_the_api_does_not_show_another_channels_call(call: Call) -> None:
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(agent=AgentFactory.create())}")

    assert stranger.get("/api/agent/v1/calls").json()["count"] == 0
    answer = stranger.post(
        f"/api/agent/v1/calls/{call.pk}/progress", {"status": "end"}, format="json"
    )
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"


# --- callback settings in the admin ----------------------------------------------


@pytest.fixture
def admin_browser() -> Browser:
    page = Browser()
    page.force_login(AgentFactory.create(role="admin"))
    return page


def save_channel(admin_browser: Browser, channel: Channel, **callback: Any) -> Any:
    """Send the channel's admin form with its callback inline."""
    form = {
        "name": channel.name,
        "kind": channel.kind,
        "is_active": "on",
        "routing_mode": channel.routing_mode,
        "offer_seconds": str(channel.offer_seconds),
        "business_time_zone": channel.business_time_zone,
        "callback-TOTAL_FORMS": "1",
        "callback-INITIAL_FORMS": "0",
        "callback-MIN_NUM_FORMS": "0",
        "callback-MAX_NUM_FORMS": "1",
        "callback-0-channel": str(channel.pk),
        **{f"callback-0-{field}": value for field, value in callback.items()},
    }
    return admin_browser.post(f"/admin/agents/channel/{channel.pk}/change/", form)


def test_an_operator_sets_callback_hours_on_the_channel(admin_browser: Browser) -> None:
    channel = ChannelFactory.create()
    page = admin_browser.get(f"/admin/agents/channel/{channel.pk}/change/").content.decode()
    assert "Callback" in page and "Sunday" in page

    answer = save_channel(
        admin_browser, channel, enabled="on", working_days=["5", "1", "3"],
        opens_at="08:30", closes_at="17:00", time_zone="Europe/Berlin",
    )  # fmt: skip

    assert answer.status_code == 302
    rules = CallbackSettings.objects.get(channel=channel)
    assert rules.enabled and rules.working_days == [1, 3, 5]
    assert (rules.opens_at, rules.closes_at, rules.time_zone) == (
        time(8, 30), time(17), "Europe/Berlin"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"time_zone": "Mars/Olympus_Mons"}, "is not a time zone"),
        ({"time_zone": "../../etc/passwd"}, "is not a time zone"),
        ({"working_days": ["8"]}, "Select a valid choice. 8 is not one of the available choices."),
        ({"working_days": ["0"]}, "Select a valid choice."),
        ({"opens_at": "18:00", "closes_at": "09:00"}, "Closes after it opens"),
    ],
)
def test_the_admin_refuses_settings_that_cannot_work(
    admin_browser: Browser, fields: dict[str, Any], error: str
) -> None:
    channel = ChannelFactory.create()
    good = {"enabled": "on", "working_days": ["1"], "opens_at": "09:00", "closes_at": "18:00"}

    answer = save_channel(admin_browser, channel, **(good | {"time_zone": "UTC"} | fields))

    assert answer.status_code == 200 and error in answer.content.decode()
    assert not CallbackSettings.objects.filter(channel=channel).exists()


def test_the_admin_lists_calls(admin_browser: Browser, call: Call) -> None:
    page = admin_browser.get("/admin/agents/call/").content.decode()
    assert "+49301234567" in page and "Shop hotline" in page
    detail = admin_browser.get(f"/admin/agents/call/{call.pk}/change/").content.decode()
    assert "+49301234567" in detail and 'name="_save"' not in detail


# --- the CRM panel's assign button ------------------------------------------------


@pytest.fixture
def crm_chat(agent: Agent, channel: Channel, customer: Client) -> Chat:
    chat = services.post_client_message(client=customer, content=text("hi")).chat
    services.set_crm_panel(
        chat=chat,
        custom_data=[{"title": "Plan", "content": f"Gold {EVIL}"}],
        contact_info={},
        crm_link="https://crm.example/card/9",
        enable_assign=True,
        page={"url": "https://crm.example/deal/9", "title": f"Deal {EVIL}"},
    )
    chat.refresh_from_db()
    return chat


def test_the_assign_button_comes_before_the_fields_and_the_link_after(
    browser: Browser, crm_chat: Chat, agent: Agent
) -> None:
    services.accept_chat(chat=crm_chat, agent=agent)

    html = browser.get(f"/agent/chats/{crm_chat.pk}/").content.decode()

    panel = html[html.index('id="crm"') :]
    button, field = panel.index('data-testid="crm-assign"'), panel.index("Gold &lt;script&gt;")
    assert button < field < panel.index('href="https://crm.example/card/9"')
    assert f'action="/agent/chats/{crm_chat.pk}/assign"' in panel
    assert 'href="https://crm.example/deal/9"' in panel and "Deal &lt;script&gt;" in panel
    assert EVIL not in html


def test_assigning_the_chat_shows_assigned(
    browser: Browser, crm_chat: Chat, agent: Agent, published: list[events.Event]
) -> None:
    services.accept_chat(chat=crm_chat, agent=agent)

    answer = browser.post(f"/agent/chats/{crm_chat.pk}/assign", follow=True)

    panel = answer.content.decode().split('id="crm"')[1]
    assert "</svg> Assigned</button>" in panel and f"/agent/chats/{crm_chat.pk}/assign" not in panel
    crm_chat.refresh_from_db()
    assert crm_chat.crm_assigned_at is not None
    assert (
        events.CrmAssignRequested(
            chat_id=crm_chat.pk, agent_id=agent.pk, crm_link="https://crm.example/card/9"
        )
        in published
    )


def test_only_the_agent_answering_the_chat_can_assign_it(browser: Browser, crm_chat: Chat) -> None:
    html = browser.get(f"/agent/chats/{crm_chat.pk}/").content.decode()
    assert "Only the agent answering the chat can assign it" in html  # a disabled button
    assert f'action="/agent/chats/{crm_chat.pk}/assign"' not in html

    answer = browser.post(f"/agent/chats/{crm_chat.pk}/assign", follow=True)

    assert "only the agent answering the chat can assign it" in answer.content.decode()
    crm_chat.refresh_from_db()
    assert crm_chat.crm_assigned_at is None


def test_no_assign_button_unless_the_crm_offers_it(
    browser: Browser, crm_chat: Chat, agent: Agent
) -> None:
    Chat.objects.filter(pk=crm_chat.pk).update(enable_assign=False)
    services.accept_chat(chat=crm_chat, agent=agent)

    html = browser.get(f"/agent/chats/{crm_chat.pk}/").content.decode()
    assert 'data-testid="crm-assign"' not in html
    answer = browser.post(f"/agent/chats/{crm_chat.pk}/assign", follow=True)
    assert "the CRM did not offer to assign this chat" in answer.content.decode()


def test_a_crm_page_that_is_no_http_url_is_text(browser: Browser, crm_chat: Chat) -> None:
    Chat.objects.filter(pk=crm_chat.pk).update(
        crm_page={"url": "javascript:alert(1)", "title": "Deal"}
    )
    panel = browser.get(f"/agent/live?chat={crm_chat.pk}").json()["chat"]["panel_html"]
    assert "Deal" in panel and "javascript:" not in panel


def test_the_api_assigns_my_active_chat_only(api: APIClient, crm_chat: Chat, agent: Agent) -> None:
    url = f"/api/agent/v1/chats/{crm_chat.pk}/assign"
    queued = api.post(url)
    assert queued.status_code == 400 and queued.json()["error"] == {
        "code": "invalid_state",
        "message": "only the agent answering the chat can assign it",
    }
    services.accept_chat(chat=crm_chat, agent=agent)

    answer = api.post(url)

    assert answer.status_code == 200 and answer.json()["crm_assigned"]
    assert answer.json()["crm_page"] == {
        "url": "https://crm.example/deal/9",
        "title": f"Deal {EVIL}",
    }
    other = ChatFactory.create(enable_assign=True)
    assert api.post(f"/api/agent/v1/chats/{other.pk}/assign").status_code == 404


def test_the_api_refuses_to_assign_what_the_crm_did_not_offer(
    api: APIClient, crm_chat: Chat, agent: Agent
) -> None:
    Chat.objects.filter(pk=crm_chat.pk).update(enable_assign=False)
    services.accept_chat(chat=crm_chat, agent=agent)

    answer = api.post(f"/api/agent/v1/chats/{crm_chat.pk}/assign")

    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "the CRM did not offer to assign this chat"
