"""What the widget's visitor requests tell the CRM: the developer webhooks
(chat_updated, chat_accepted, chat_finished, call_event, offline_message)
with the visitor's contact, user token, page, UTM, address, browser and
geoip as the widget learnt them. Deliveries are written in the request's
transaction, so each payload is read from its ``Delivery`` row."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mmdb_writer import MMDBWriter
from netaddr import IPSet

from agents import services
from agents.models import Agent, Chat, OfflineMessage
from devhooks.models import IntegrationSettings, WidgetChannel
from devhooks.visitor_data import GEOIP_FIELDS
from devhooks.widget import geoip
from tests.devhooks.conftest import bodies
from tests.devhooks.webhooks.schemas import SCHEMAS
from tests.devhooks.widget import test_api as api
from tests.devhooks.widget.test_api import BROWSER, Visitor
from tests.factories import text

pytestmark = pytest.mark.django_db

# The widget API tests' fixtures serve here too.
alice, billing, widget, callback_widget = api.alice, api.billing, api.widget, api.callback_widget
generous_limits = api.generous_limits

LANDING = (
    "https://shop.example.com/sale?ref=x&utm_source=newsletter&utm_medium=email"
    "&utm_campaign=spring&utm_term=shoes&utm_unknown=1"
)
NO_PLACE = dict.fromkeys(GEOIP_FIELDS, "")


def assert_valid(body: dict[str, Any]) -> None:
    validator = Draft202012Validator(SCHEMAS[body["event_name"]])
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
    assert not errors, errors


def accepted(visitor: Visitor, agent: Agent) -> dict[str, Any]:
    """The chat_accepted payload once ``agent`` presses Reply on the visitor's chat."""
    chat = Chat.objects.get(client=visitor.client, state=Chat.State.QUEUED)
    services.accept_chat(chat=chat, agent=agent)
    [body] = [b for b in bodies("chat_accepted") if b["chat_id"] == chat.pk]
    assert_valid(body)
    return body


# --- contact: chat_updated ---------------------------------------------------------


def test_contact_info_sends_chat_updated_while_a_chat_is_open(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent
) -> None:
    vera = Visitor(widget)
    vera.ok("contact", name="Vera")  # no chat yet: news for chat_accepted, not chat_updated
    assert bodies("chat_updated") == []

    chat_id = vera.ok("message", text="Hi")["chat_id"]
    vera.ok("contact", email="vera@example.com")

    [queued] = bodies("chat_updated")
    assert_valid(queued)
    assert queued["chat_id"] == chat_id and queued["widget_id"] == widget.widget_id
    assert queued["visitor"]["name"] == "Vera"
    assert queued["visitor"]["email"] == "vera@example.com"
    assert queued["visitor"]["number"] == str(vera.client.visitor_number)
    assert queued["agent"] == {"id": 0, "name": "", "email": "", "phone": ""}

    services.accept_chat(chat=Chat.objects.get(pk=chat_id), agent=alice)
    vera.ok("contact", phone="+49 30 123456", description="Wants a refund")
    vera.ok("contact", phone="+49 30 123456")  # nothing new: no event

    [_, taken] = bodies("chat_updated")
    assert_valid(taken)
    assert taken["agent"]["id"] == alice.pk and taken["agent"]["name"] == "Alice"
    assert taken["visitor"]["phone"] == "+4930123456"
    assert taken["visitor"]["description"] == "Wants a refund"


def test_refused_contact_info_tells_the_crm_nothing(
    webhook: IntegrationSettings, widget: WidgetChannel
) -> None:
    vera = Visitor(widget)
    vera.ok("message", text="Hi")

    vera.refused("contact", name="Vera", email="not-an-address")

    assert bodies("chat_updated") == []
    assert vera.client.name == ""


# --- user token: chat_accepted -------------------------------------------------------


def test_the_user_token_is_sent_with_chat_accepted(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent
) -> None:
    vera, otto = Visitor(widget), Visitor(widget)
    vera.ok("user_token", user_token="crm-user-42")
    vera.ok("message", text="Hi, it's Vera")
    otto.ok("message", text="Hi, it's Otto")

    assert accepted(vera, alice)["user_token"] == "crm-user-42"
    assert "user_token" not in accepted(otto, alice)


def test_a_user_token_set_during_the_chat_goes_with_later_events(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent
) -> None:
    vera = Visitor(widget)
    vera.ok("message", text="Hi")
    vera.ok("user_token", user_token="crm-user-7")  # the site signed her in meanwhile
    body = accepted(vera, alice)
    assert body["user_token"] == "crm-user-7"

    services.finish_chat(chat=Chat.objects.get(pk=body["chat_id"]), agent=alice)
    [finished] = bodies("chat_finished")
    assert_valid(finished)
    assert finished["user_token"] == "crm-user-7"


# --- the session and the page ------------------------------------------------------------


def test_the_session_and_the_page_reach_chat_accepted(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent, billing: Any
) -> None:
    vera = Visitor(widget, address="203.0.113.77")
    vera.ok("session", landing_url=LANDING)  # a page view: nothing kept yet
    vera.ok(
        "message",
        text="Do you ship to Austria?",
        department_id=billing.pk,
        landing_url=LANDING,
        page={"url": "https://shop.example.com/sale/shoes", "title": "Shoes on sale"},
    )

    body = accepted(vera, alice)

    assert body["session"] == {
        "geoip": NO_PLACE,  # no GEOIP_DATABASE set
        "utm": "utm_source=newsletter&utm_medium=email&utm_campaign=spring&utm_term=shoes",
        "utm_json": {
            "source": "newsletter",
            "campaign": "spring",
            "content": "",
            "medium": "email",
            "term": "shoes",
        },
        "ip_addr": "203.0.113.77",
        "user_agent": BROWSER,
    }
    assert body["page"] == {"url": "https://shop.example.com/sale/shoes", "title": "Shoes on sale"}
    assert body["department"] == {"id": billing.pk, "name": "Billing"}
    assert body["widget_id"] == widget.widget_id
    assert body["agent"]["id"] == alice.pk
    assert body["visitor"]["number"] == str(vera.client.visitor_number)
    assert body["visitor"]["chats_count"] == 1


def test_a_visitor_with_no_landing_url_has_empty_utm(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent
) -> None:
    vera = Visitor(widget)
    vera.ok("message", text="Hi", landing_url="https://shop.example.com/?q=1")

    session = accepted(vera, alice)["session"]
    assert session["utm"] == "" and set(session["utm_json"].values()) == {""}
    assert session["ip_addr"] == "198.51.100.7"


def test_later_pages_and_landings_update_what_the_crm_hears(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent
) -> None:
    vera = Visitor(widget, user_agent="FirstBrowser/1.0")
    vera.ok("message", text="Hi", landing_url=LANDING, page={"url": "https://shop.example.com/"})
    vera.ok("page", url="https://shop.example.com/cart", title="Your cart")
    # The next page load, from a new browser version, with no UTM of its own:
    # the earlier campaign stays.
    Visitor(widget, token=vera.token, user_agent="FirstBrowser/2.0").ok(
        "session", landing_url="https://shop.example.com/cart"
    )

    body = accepted(vera, alice)
    assert body["page"] == {"url": "https://shop.example.com/cart", "title": "Your cart"}
    assert body["session"]["utm_json"]["campaign"] == "spring"
    assert body["session"]["user_agent"] == "FirstBrowser/2.0"

    # A landing with a campaign of its own replaces the earlier one.
    Visitor(widget, token=vera.token).ok(
        "session",
        landing_url="https://shop.example.com/?utm_source=ads&utm_campaign=autumn",
        page={"url": "https://shop.example.com/autumn", "title": "Autumn"},
    )
    services.finish_chat(chat=Chat.objects.get(pk=body["chat_id"]), agent=alice)
    [finished] = bodies("chat_finished")
    assert_valid(finished)
    assert finished["session"]["utm"] == "utm_source=ads&utm_campaign=autumn"
    assert finished["session"]["utm_json"]["campaign"] == "autumn"
    assert finished["session"]["utm_json"]["medium"] == ""
    assert finished["page"] == {"url": "https://shop.example.com/autumn", "title": "Autumn"}
    messages = finished["chat"]["messages"]
    assert [(m["type"], m["message"]) for m in messages] == [("visitor", "Hi")]


def test_custom_data_is_not_sent_to_the_crm(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent
) -> None:
    vera = Visitor(widget)
    vera.ok("message", text="Hi")
    vera.ok("custom_data", fields=[{"title": "Plan", "content": "Gold"}])

    body = accepted(vera, alice)  # the schema allows no field beyond the spec's
    assert "Gold" not in str(body)


# --- geoip ---------------------------------------------------------------------------------


@pytest.fixture
def geoip_database(tmp_path: Path, settings: Any) -> Iterator[Path]:
    """A tiny GeoIP2-City-like database: one network in Berlin."""
    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type="GeoIP2-City")
    writer.insert_network(
        IPSet(["198.51.100.0/24"]),
        {
            "city": {"names": {"en": "Berlin", "de": "Berlin"}},
            "country": {"iso_code": "DE", "names": {"en": "Germany", "de": "Deutschland"}},
            "subdivisions": [{"iso_code": "BE", "names": {"en": "Land Berlin"}}],
            "location": {"latitude": 52.52, "longitude": 13.405, "time_zone": "Europe/Berlin"},
            "traits": {"organization": "Example Carrier GmbH"},
        },
    )
    writer.insert_network(
        IPSet(["2001:db8:1::/48"]),
        {"country": {"iso_code": "FR", "names": {"en": "France"}}, "traits": {"isp": "Ex ISP"}},
    )
    path = tmp_path / "city.mmdb"
    writer.to_db_file(str(path))
    settings.GEOIP_DATABASE = str(path)
    geoip._reader.cache_clear()
    yield path
    geoip._reader.cache_clear()


def test_geoip_of_the_visitors_address_reaches_the_session(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent, geoip_database: Path
) -> None:
    vera = Visitor(widget, address="198.51.100.23")
    vera.ok("message", text="Hallo")

    session = accepted(vera, alice)["session"]

    assert session["geoip"] == {
        "region_code": "BE",
        "country": "Germany",
        "country_code": "DE",
        "region": "Land Berlin",
        "city": "Berlin",
        "latitude": "52.52",
        "longitude": "13.405",
        "organization": "Example Carrier GmbH",
    }
    assert session["ip_addr"] == "198.51.100.23"


def test_geoip_fills_what_the_database_knows_and_leaves_the_rest_empty(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent, geoip_database: Path
) -> None:
    jean = Visitor(widget, address="2001:db8:1::5")
    jean.ok("message", text="Bonjour")
    nowhere = Visitor(widget, address="203.0.113.9")  # in no network of the file
    nowhere.ok("message", text="Hi")

    assert accepted(jean, alice)["session"]["geoip"] == {
        **NO_PLACE,
        "country": "France",
        "country_code": "FR",
        "organization": "Ex ISP",
    }
    assert accepted(nowhere, alice)["session"]["geoip"] == NO_PLACE


def test_without_a_usable_geoip_database_every_field_is_empty(
    webhook: IntegrationSettings,
    widget: WidgetChannel,
    alice: Agent,
    settings: Any,
    tmp_path: Path,
) -> None:
    broken = tmp_path / "broken.mmdb"
    broken.write_bytes(b"not a database")
    settings.GEOIP_DATABASE = str(broken)
    geoip._reader.cache_clear()
    try:
        vera = Visitor(widget, address="198.51.100.23")
        vera.ok("message", text="Hi")  # the chat goes on without a place
        assert accepted(vera, alice)["session"]["geoip"] == NO_PLACE
    finally:
        geoip._reader.cache_clear()

    settings.GEOIP_DATABASE = ""
    otto = Visitor(widget, address="198.51.100.24")
    otto.ok("message", text="Hi")
    assert accepted(otto, alice)["session"]["geoip"] == NO_PLACE


# --- calls and offline messages -------------------------------------------------------------


def test_a_call_sends_call_event(
    webhook: IntegrationSettings, callback_widget: WidgetChannel, alice: Agent
) -> None:
    vera = Visitor(callback_widget)
    chat_id = vera.ok("message", text="Call me please")["chat_id"]
    vera.ok("user_token", user_token="crm-user-9")

    vera.ok("call", phone="+49 30 555 0101")

    [body] = bodies("call_event")
    assert_valid(body)
    assert body["call"] == {"type": "callback", "phone": "+49305550101", "status": "start"}
    assert body["chat_id"] == chat_id and body["widget_id"] == callback_widget.widget_id
    assert body["user_token"] == "crm-user-9"
    assert body["visitor"]["number"] == str(vera.client.visitor_number)
    assert body["agent"] == {"id": 0, "name": "", "email": "", "phone": ""}


def test_a_refused_call_sends_nothing(
    webhook: IntegrationSettings, widget: WidgetChannel, callback_widget: WidgetChannel
) -> None:
    Visitor(widget).refused("call", phone="+49 30 555 0101")  # callback disabled
    Visitor(callback_widget).refused("call", phone="not a phone")
    assert bodies("call_event") == []


def test_an_offline_message_sends_offline_message(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent
) -> None:
    services.set_agent_status(agent=alice, online=False)
    otto = Visitor(widget, address="203.0.113.50")

    otto.ok(
        "offline",
        name="Otto",
        email="otto@example.com",
        phone="+49 151 000 000",
        description="Has an account",
        message="Do you have size 46?",
        landing_url="https://shop.example.com/?utm_source=ads",
        page={"url": "https://shop.example.com/shoes/46", "title": "Shoes, 46"},
    )

    [body] = bodies("offline_message")
    assert_valid(body)
    offline = OfflineMessage.objects.get()
    assert body["offline_message_id"] == str(offline.pk)
    assert body["message"] == "Do you have size 46?"
    assert "chat_id" not in body and "agent" not in body
    assert body["visitor"]["name"] == "Otto" and body["visitor"]["email"] == "otto@example.com"
    assert body["visitor"]["phone"] == "+49151000000"
    assert body["visitor"]["description"] == "Has an account"
    assert body["visitor"]["number"] == str(otto.client.visitor_number)
    assert body["page"] == {"url": "https://shop.example.com/shoes/46", "title": "Shoes, 46"}
    assert body["session"]["ip_addr"] == "203.0.113.50"
    assert body["session"]["utm_json"]["source"] == "ads"


def test_a_refused_offline_message_sends_nothing(
    webhook: IntegrationSettings, widget: WidgetChannel
) -> None:
    Visitor(widget).refused("offline", email="otto@", message="Hi")
    WidgetChannel.objects.filter(pk=widget.pk).update(offline_form=False)
    Visitor(widget).refused("offline", email="otto@example.com", message="Hi")
    assert bodies("offline_message") == [] and OfflineMessage.objects.count() == 0


def test_an_agents_reply_is_no_webhook_but_the_finished_log_holds_it(
    webhook: IntegrationSettings, widget: WidgetChannel, alice: Agent
) -> None:
    vera = Visitor(widget)
    vera.ok("message", text="Hi")
    chat = Chat.objects.get(pk=accepted(vera, alice)["chat_id"])
    services.post_agent_message(chat=chat, agent=alice, content=text("Hello Vera"))
    vera.ok("message", text="Thanks")
    services.finish_chat(chat=chat, agent=alice)
    vera.ok("rate", rating="positive")  # after the log went out: the log says null

    assert [b["event_name"] for b in bodies()] == ["chat_accepted", "chat_finished"]
    [finished] = bodies("chat_finished")
    assert_valid(finished)
    log = [(m["type"], m.get("agent_id"), m["message"]) for m in finished["chat"]["messages"]]
    assert log == [
        ("visitor", None, "Hi"),
        ("agent", alice.pk, "Hello Vera"),
        ("visitor", None, "Thanks"),
    ]
    assert finished["chat"]["rate"] is None
    assert finished["agents"][0]["id"] == alice.pk
