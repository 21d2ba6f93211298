"""The website widget's visitor endpoints (``POST /widget/<id>/v1/<action>``)
through Django's test client, as a visitor's browser calls them: JSON sent
as ``text/plain`` (a CORS simple request), the visitor's token in the body.

The developer webhooks these requests cause are in test_webhooks.py.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import AsyncClient
from django.test import Client as Browser
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from agents import selectors, services
from agents.content import clean_content
from agents.models import (
    Agent,
    Call,
    CallbackSettings,
    Channel,
    Chat,
    Client,
    Counter,
    Department,
    LiveEvent,
    Mail,
    Message,
    OfflineMessage,
)
from agents.streams import in_thread
from bots import services as bots
from bots.models import BotEvent
from config.api_errors import CODES
from devhooks.models import WidgetChannel
from devhooks.webhooks.services import set_developer_webhook
from devhooks.widget import languages, views
from devhooks.widget.services import create_widget_channel
from devhooks.widget.tokens import client_for_visitor_token
from tests.aio import run_async
from tests.factories import AgentFactory, page_of, text
from tests.limits import rate_limit_statements

NUL_REFUSED = "a text holds a NUL character or half of a surrogate pair"
pytestmark = pytest.mark.django_db

BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
ADDRESS = "198.51.100.7"
PHONE_MESSAGE = "enter a phone number: 7 to 15 digits, optionally starting with +"
Answer = Any  # the test client's response: an HttpResponse with .json()


class Visitor:
    """One visitor's browser on a page with the widget: it keeps the token
    the service gives it and sends it with every later request."""

    def __init__(
        self,
        widget: WidgetChannel,
        *,
        token: str = "",
        address: str = ADDRESS,
        user_agent: str = BROWSER,
        raise_errors: bool = True,
    ) -> None:
        self.widget_id = widget.widget_id
        self.token = token
        self.http = Browser(
            REMOTE_ADDR=address, HTTP_USER_AGENT=user_agent, raise_request_exception=raise_errors
        )

    def url(self, action: str) -> str:
        return f"/widget/{self.widget_id}/v1/{action}"

    def post(self, action: str, **body: Any) -> Answer:
        if self.token and "token" not in body:
            body["token"] = self.token
        answer = self.http.post(self.url(action), json.dumps(body), content_type="text/plain")
        if answer.status_code == 200 and isinstance(answer.json().get("token"), str):
            self.token = answer.json()["token"]
        return answer

    def ok(self, action: str, **body: Any) -> dict[str, Any]:
        answer = self.post(action, **body)
        assert answer.status_code == 200, answer.content
        assert answer["Access-Control-Allow-Origin"] == "*"
        data: dict[str, Any] = answer.json()
        assert data["result"] == "ok"
        return data

    def refused(self, action: str, status: int = 400, **body: Any) -> str:
        """The error's message, after checking the status and the error shape."""
        return error_of(self.post(action, **body), status)

    @property
    def client(self) -> Client:
        found = client_for_visitor_token(self.token)
        assert found is not None, "this browser has no visitor yet"
        return found


def error_of(answer: Answer, status: int) -> str:
    assert answer.status_code == status, answer.content
    assert answer["Access-Control-Allow-Origin"] == "*"
    body = answer.json()
    assert list(body) == ["error"] and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == CODES[status]
    message = body["error"]["message"]
    assert isinstance(message, str) and message
    return message


def unique_address() -> str:
    """An address no other test (nor an earlier run) counted requests of: the
    limits count an IPv6 address's /64, so the /64 is what differs."""
    return f"2001:db8:{secrets.token_hex(2)}:{secrets.token_hex(2)}::1"


def visitor_count() -> int:
    return Client.objects.count()


@pytest.fixture(autouse=True)
def generous_limits(settings: Any) -> None:
    """Tests make many visitors from one address; the rate-limit tests lower the limits."""
    settings.WIDGET_RATE_LIMIT = 100_000
    settings.WIDGET_NEW_VISITORS_PER_ADDRESS = 100_000
    settings.WIDGET_ADDRESS_RATE_LIMIT = 100_000
    # Agents sign in with force_login here: their passwords need no slow hash.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(name="Alice", email="alice@example.com", is_online=True)


@pytest.fixture
def billing(db: None) -> Department:
    return Department.objects.create(name="Billing")


@pytest.fixture
def widget(alice: Agent, billing: Department) -> WidgetChannel:
    return create_widget_channel(
        name="Shop", agent_emails=[alice.email], title="Talk to us", departments=[billing]
    )


@pytest.fixture
def callback_widget(alice: Agent) -> WidgetChannel:
    return create_widget_channel(name="Shop with calls", agent_emails=[alice.email], callback=True)


@pytest.fixture
def vera(widget: WidgetChannel) -> Visitor:
    return Visitor(widget)


# --- session: the config, and a returning visitor ---------------------------


def test_a_page_load_gets_the_widgets_config(widget: WidgetChannel, billing: Department) -> None:
    data = Visitor(widget).ok("session")

    assert data == {
        "result": "ok",
        "config": {
            "widget_id": widget.channel.public_id,
            "title": "Talk to us",
            "own_title": "Talk to us",
            "color": "#1f6feb",
            "color2": "#ffffff",
            "mode": "online",
            "offline_form": True,
            "waiting_text": "An agent will answer shortly.",
            "own_waiting_text": "",
            "prechat": {},
            "consent": None,
            "callback": {"enabled": False, "reason": "Callback disabled"},
            "departments": [{"id": billing.pk, "name": "Billing"}],
            "rules": {"invitations": []},
            "language": "en",
            "languages": languages.versions(),
        },
        "visitor": None,
    }


def test_the_mode_follows_whether_an_agent_of_the_channel_is_online(
    widget: WidgetChannel, alice: Agent
) -> None:
    page = Visitor(widget)
    assert page.ok("session")["config"]["mode"] == "online"

    services.set_agent_status(agent=alice, online=False)
    assert page.ok("session")["config"]["mode"] == "offline"

    # An online agent of another channel does not make this one online.
    AgentFactory.create(is_online=True)
    assert page.ok("session")["config"]["mode"] == "offline"

    services.set_agent_status(agent=alice, online=True)
    assert page.ok("session")["config"]["mode"] == "online"

    Agent.objects.filter(pk=alice.pk).update(is_active=False)  # a disabled account
    assert page.ok("session")["config"]["mode"] == "offline"


def test_outside_the_business_hours_the_widget_is_offline(
    widget: WidgetChannel, alice: Agent
) -> None:
    page = Visitor(widget)
    today = timezone.now().date().isoformat()
    services.set_business_hours(channel=widget.channel, closed=[today])
    assert page.ok("session")["config"]["mode"] == "offline"  # Alice is online
    services.set_business_hours(channel=widget.channel, always=True)
    assert page.ok("session")["config"]["mode"] == "online"


def test_the_config_tells_the_callback_state_and_the_widgets_settings(
    callback_widget: WidgetChannel,
) -> None:
    page = Visitor(callback_widget)
    config = page.ok("session")["config"]
    assert config["callback"] == {"enabled": True, "reason": ""}
    assert config["departments"] == [] and config["title"] == "Chat with us"

    CallbackSettings.objects.filter(channel=callback_widget.channel).update(working_days=[])
    WidgetChannel.objects.filter(pk=callback_widget.pk).update(
        color="#000000", color2="#fafafa", offline_form=False, rules={"invitations": [{"d": 5}]}
    )
    config = page.ok("session")["config"]
    assert config["callback"] == {"enabled": False, "reason": "Callback unavaiable"}
    assert (config["color"], config["color2"], config["offline_form"]) == (
        "#000000",
        "#fafafa",
        False,
    )
    assert config["rules"] == {"invitations": [{"d": 5}]}

    # After the first message: the channel's own words, else the default.
    WidgetChannel.objects.filter(pk=callback_widget.pk).update(waiting_text="Back in 5 min.")
    assert page.ok("session")["config"]["waiting_text"] == "Back in 5 min."

    WidgetChannel.objects.filter(pk=callback_widget.pk).update(rules=["not", "an", "object"])
    assert page.ok("session")["config"]["rules"] == {}


def test_page_views_typing_and_callback_questions_make_no_visitor(
    widget: WidgetChannel,
) -> None:
    page = Visitor(widget)
    answers = [
        page.ok("session", page={"url": "https://shop.example.com/", "title": "Shop"}),
        page.ok("page", url="https://shop.example.com/a", title="A"),
        page.ok("typing", typing=True),
        page.ok("callback"),
    ]

    assert visitor_count() == 0 and Chat.objects.count() == 0
    assert all("token" not in answer for answer in answers)
    assert answers[1]["page"] == {"url": "https://shop.example.com/a", "title": "A"}
    assert answers[3] == {"result": "ok", "reason": "Callback disabled"}
    # A page view with nothing to tell is still no error, and no visitor.
    assert page.ok("page")["page"] == {}


def test_a_returning_visitor_gets_its_number_contact_chat_and_history(
    widget: WidgetChannel, vera: Visitor, alice: Agent
) -> None:
    vera.ok("message", text="Hello, is my order on its way?")
    chat = Chat.objects.get(client=vera.client)
    services.accept_chat(chat=chat, agent=alice)
    services.post_system_message(chat=chat, text="an agents' note: VIP")
    services.post_note(chat=chat, agent=alice, text="an internal note: refund approved")
    services.post_agent_message(chat=chat, agent=alice, content=text("Yes, it left today."))

    data = Visitor(widget, token=vera.token).ok("session")  # the next page of the site

    assert "token" not in data  # the browser keeps the one it has
    visitor = data["visitor"]
    assert visitor["visitor_number"] == vera.client.visitor_number
    assert visitor["contact"] == {
        "client_name": None,
        "email": None,
        "phone": None,
        "description": None,
    }
    assert visitor["chat"] == {
        "id": chat.pk,
        "state": "active",
        "rating": "",
        "agent_name": "Alice",
    }
    shown = [(m["author"], m["text"], m["sender_name"]) for m in visitor["messages"]]
    assert shown == [
        ("client", "Hello, is my order on its way?", ""),
        ("agent", "Yes, it left today.", "Alice"),
    ]  # the note is for agents only
    assert visitor["last_event_id"] == LiveEvent.objects.order_by("-id")[0].pk


def test_a_finished_chat_is_still_the_visitors_chat_with_its_rating(
    vera: Visitor, alice: Agent
) -> None:
    vera.ok("message", text="Hi")
    chat = Chat.objects.get(client=vera.client)
    services.accept_chat(chat=chat, agent=alice)
    services.finish_chat(chat=chat, agent=alice)
    vera.ok("rate", rating="negative")

    visitor = vera.ok("session")["visitor"]
    assert visitor["chat"] == {
        "id": chat.pk,
        "state": "finished",
        "rating": "negative",
        "agent_name": "Alice",
    }

    vera.ok("message", text="Me again")  # a new chat; history is of that one
    visitor = vera.ok("session")["visitor"]
    assert visitor["chat"]["state"] == "queued" and visitor["chat"]["agent_name"] == ""
    assert [m["text"] for m in visitor["messages"]] == ["Me again"]


def test_idle_close_ends_the_visitors_chat_with_the_warning_and_the_rating(
    vera: Visitor, alice: Agent, widget: WidgetChannel
) -> None:
    """docs/routing.md, "Idle chats close": as an agent's Finish, after the warning."""
    services.set_routing(channel=widget.channel, idle_close_minutes=5, idle_warning="Bye!")
    vera.ok("message", text="Hi")
    chat = Chat.objects.get(client=vera.client)
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(chat=chat, agent=alice, content=text("Anything else?"))
    chat.messages.update(created=timezone.now() - timedelta(minutes=6))

    assert services.close_idle_chats() == 1

    visitor = vera.ok("session")["visitor"]
    assert visitor["chat"]["state"] == "finished"
    assert [m["text"] for m in visitor["messages"]] == ["Hi", "Anything else?", "Bye!"]
    assert vera.ok("rate", rating="positive") == {
        "result": "ok",
        "rating": "positive",
        "comment": "",
    }


# --- the pre-chat form --------------------------------------------------------------


def test_a_required_pre_chat_answer_is_asked_by_the_service_too(
    widget: WidgetChannel, vera: Visitor
) -> None:
    """A visitor that skips the widget's form (a script of its own) is refused
    its first message until it has given what the channel requires."""
    WidgetChannel.objects.filter(pk=widget.pk).update(
        prechat_phone=WidgetChannel.Ask.REQUIRED, prechat_name=WidgetChannel.Ask.OPTIONAL
    )
    assert vera.ok("session")["config"]["prechat"] == {"name": "optional", "phone": "required"}

    message = vera.refused("message", text="Hi")
    assert message == "give your phone number before the first message"
    assert not Chat.objects.exists() and visitor_count() == 0

    vera.ok("contact", phone="+1 212 555 0100")
    vera.ok("message", text="Hi")
    chat = Chat.objects.get()
    assert chat.client.phone == "+12125550100"
    # Asked before a chat, not inside one: the open chat takes more messages.
    vera.ok("message", text="Still there?")


# --- visitors, made on first need -------------------------------------------


def test_the_first_message_makes_the_visitor_and_returns_its_token(
    widget: WidgetChannel, vera: Visitor
) -> None:
    data = vera.ok("message", text="Hi there")

    token = data["token"]
    assert isinstance(token, str) and len(token) >= 32
    client = client_for_visitor_token(token)
    assert client is not None and client.channel_id == widget.channel_id
    sent = Message.objects.get(chat__client=client)
    assert data == {
        "result": "ok",
        "message_id": sent.pk,
        "chat_id": Chat.objects.get(client=client).pk,
        "state": "queued",
        "created": sent.created.isoformat(),  # the time the widget shows on it
        "token": token,
        # Its stream replays from here: every event of the new visitor is later.
        "last_event_id": data["last_event_id"],
    }
    assert not LiveEvent.objects.filter(client_id=client.pk, id__lte=data["last_event_id"]).exists()
    assert LiveEvent.objects.filter(client_id=client.pk, id__gt=data["last_event_id"]).exists()
    # Known by the token from now on: no new visitor, no new token.
    again = vera.ok("message", text="Anyone?")
    assert "token" not in again and "last_event_id" not in again and visitor_count() == 1
    assert again["chat_id"] == data["chat_id"]


def test_visitor_numbers_run_across_the_installation(widget: WidgetChannel, alice: Agent) -> None:
    other = create_widget_channel(name="Blog", agent_emails=[alice.email])
    before = Counter.objects.filter(name="visitor_number").values_list("value", flat=True).first()

    first, second, third = Visitor(widget), Visitor(other), Visitor(widget)
    asked = first.ok("visitor")["visitor_number"]  # getVisitorNumber
    second.ok("message", text="hi")
    third.ok("contact", name="Otto")

    numbers = [visitor.client.visitor_number for visitor in (first, second, third)]
    start = (before or 0) + 1
    assert numbers == [start, start + 1, start + 2] and asked == start
    if not before:  # a fresh installation counts from 1
        assert numbers == [1, 2, 3]


def test_get_visitor_number_makes_a_visitor_and_asking_again_keeps_it(
    widget: WidgetChannel, vera: Visitor
) -> None:
    first = vera.ok("visitor")
    assert isinstance(first["token"], str)
    assert first["visitor_number"] == vera.client.visitor_number
    assert first["chat"] is None and first["messages"] == []

    second = vera.ok("visitor")
    assert "token" not in second and second["visitor_number"] == first["visitor_number"]
    assert visitor_count() == 1


def test_a_token_of_one_widget_is_no_visitor_on_another(
    widget: WidgetChannel, alice: Agent, vera: Visitor
) -> None:
    other = create_widget_channel(name="Blog", agent_emails=[alice.email])
    vera.ok("message", text="Hi from the shop")
    shop_visitor = vera.client

    on_blog = Visitor(other, token=vera.token)
    assert on_blog.ok("session")["visitor"] is None
    data = on_blog.ok("message", text="Hi from the blog")

    assert data["token"] != vera.token
    blog_visitor = client_for_visitor_token(data["token"])
    assert blog_visitor is not None and blog_visitor.pk != shop_visitor.pk
    assert blog_visitor.channel_id == other.channel_id
    assert blog_visitor.visitor_number != shop_visitor.visitor_number
    shop_texts = Message.objects.filter(chat__client=shop_visitor).values_list("text", flat=True)
    assert list(shop_texts) == ["Hi from the shop"]
    assert client_for_visitor_token(vera.token) == shop_visitor  # still the shop's visitor
    # Nor can the blog's page act on the shop visitor's chat.
    assert on_blog.refused("rate", token=vera.token, rating="positive").startswith("no visitor")


@pytest.mark.parametrize("token", ["x" * 32, "short", "", 12345, None, ["a"], {"t": "x" * 32}])
def test_a_bogus_token_is_a_new_visitor(widget: WidgetChannel, token: Any) -> None:
    page = Visitor(widget)
    known = Visitor(widget)
    known.ok("message", text="I exist")

    data = page.ok("message", token=token, text="Hello")

    assert isinstance(data["token"], str) and data["token"] != token
    assert page.client.pk != known.client.pk and visitor_count() == 2


def test_a_session_with_a_bogus_token_is_a_page_view(widget: WidgetChannel) -> None:
    data = Visitor(widget).ok("session", token="y" * 40)
    assert data["visitor"] is None and "token" not in data and visitor_count() == 0


# --- messages -----------------------------------------------------------------


def test_a_message_opens_a_queued_chat_the_channels_agents_see(
    widget: WidgetChannel, vera: Visitor, alice: Agent
) -> None:
    stranger = AgentFactory.create(is_online=True)  # of no channel of this widget
    data = vera.ok("message", text="Where is my parcel?")

    chat = Chat.objects.get(pk=data["chat_id"])
    assert chat.state == Chat.State.QUEUED and chat.channel_id == widget.channel_id
    assert chat.client == vera.client and chat.department is None
    queue = selectors.with_last_messages(selectors.queue_for_agent(agent=alice))
    assert [c.pk for c in queue] == [chat.pk]
    assert queue[0].last_message.text == "Where is my parcel?"  # type: ignore[attr-defined]
    assert list(selectors.queue_for_agent(agent=stranger)) == []
    [message] = chat.messages.all()
    assert (message.author, message.type, message.text) == ("client", "text", "Where is my parcel?")


def test_a_long_message_is_cut_at_1000_characters(vera: Visitor) -> None:
    vera.ok("message", text="a" * 999 + "bcdef")

    [message] = Message.objects.filter(chat__client=vera.client)
    assert message.text == "a" * 999 + "b"


@pytest.mark.parametrize(
    "value", ["", "   \n\t", 42, 1.5, True, None, ["hi"], {"text": "hi"}, "a\x00b", "\x00"]
)
def test_a_message_that_is_no_text_is_400_and_makes_nothing(vera: Visitor, value: Any) -> None:
    message = vera.refused("message", text=value)

    assert message
    assert visitor_count() == 0 and Chat.objects.count() == 0 and Message.objects.count() == 0


def test_a_message_without_text_is_400_for_a_known_visitor_too(vera: Visitor) -> None:
    vera.ok("visitor")
    assert vera.refused("message") == "write a message"
    assert vera.refused("message", text="a\x00b") == NUL_REFUSED
    assert Chat.objects.count() == 0 and visitor_count() == 1


def test_a_department_the_widget_offers_is_the_chats(
    widget: WidgetChannel, billing: Department
) -> None:
    by_number = Visitor(widget)
    by_number.ok("message", text="About my invoice", department_id=billing.pk)
    assert Chat.objects.get(client=by_number.client).department == billing

    by_text = Visitor(widget)
    by_text.ok("message", text="Invoice again", department_id=str(billing.pk))
    assert Chat.objects.get(client=by_text.client).department == billing


@pytest.mark.parametrize("how", ["word", "float", "bool", "list"])
def test_a_department_id_that_is_no_number_is_400(
    widget: WidgetChannel, billing: Department, how: str
) -> None:
    value = {
        "word": "billing",
        "float": float(billing.pk) + 0.5,
        "bool": True,
        "list": [billing.pk],
    }[how]

    message = Visitor(widget).refused("message", text="Hi", department_id=value)

    assert message == "department_id must be a number"
    assert visitor_count() == 0 and Chat.objects.count() == 0


@pytest.mark.parametrize("how", ["other", "unknown"])
def test_a_department_the_widget_does_not_offer_leaves_the_chat_without_one(
    widget: WidgetChannel, how: str
) -> None:
    """An invitation or rule naming a department the widget no longer offers
    must not keep the visitor from writing: the chat opens without one."""
    sales = Department.objects.create(name="Sales")  # exists, but not on this widget
    value = {"other": sales.pk, "unknown": sales.pk + 1000}[how]

    visitor = Visitor(widget)
    visitor.ok("message", text="Hi", department_id=value)

    assert Chat.objects.get(client=visitor.client).department is None


def test_a_message_answering_an_invitation_keeps_its_text_for_agents(vera: Visitor) -> None:
    vera.ok("message", text="Yes please", invitation="  Need help choosing a size?  ")
    assert vera.client.invite_text == "Need help choosing a size?"

    vera.ok("message", text="And colours?", invitation=["not", "text"])  # ignored
    assert vera.client.invite_text == "Need help choosing a size?"


def test_a_bot_attached_to_the_widget_channel_gets_the_chat(
    widget: WidgetChannel, vera: Visitor, alice: Agent
) -> None:
    provider = bots.create_bot_provider(
        name="Acme bots", endpoint_url="http://127.0.0.1:9/bot", display_name="Acme Assistant"
    )
    bots.attach_bot(channel=widget.channel, provider=provider, token="widget-bot-token-1")

    data = vera.ok("message", text="Hello bot")

    chat = Chat.objects.get(pk=data["chat_id"])
    assert chat.state == Chat.State.BOT
    assert list(selectors.queue_for_agent(agent=alice)) == []
    assert [c.pk for c in selectors.with_bot_for_agent(agent=alice)] == [chat.pk]
    [event] = BotEvent.objects.filter(kind="CLIENT_MESSAGE")
    assert event.chat_id == chat.pk


# --- typing -------------------------------------------------------------------


def test_typing_sets_the_visitors_typing_on_its_open_chat(vera: Visitor) -> None:
    vera.ok("message", text="Hi")
    chat_id = Chat.objects.get(client=vera.client).pk

    vera.ok("typing", typing=True)
    assert Chat.objects.get(pk=chat_id).client_typing_until is not None
    live = LiveEvent.objects.filter(kind="typing").latest("id")
    assert live.data["who"] == "client" and live.data["typing"] is True
    assert live.for_client is False  # the visitor's own typing is not echoed to it

    vera.ok("typing", typing=False)
    assert Chat.objects.get(pk=chat_id).client_typing_until is None

    vera.ok("typing", typing="yes")  # only true is true
    assert Chat.objects.get(pk=chat_id).client_typing_until is None


def test_typing_without_a_chat_changes_nothing(vera: Visitor) -> None:
    vera.ok("visitor")
    assert vera.ok("typing", typing=True) == {"result": "ok"}
    assert Chat.objects.count() == 0 and not LiveEvent.objects.filter(kind="typing").exists()


# --- contact ----------------------------------------------------------------------


def test_set_contact_info_is_kept_and_answered_as_get_contact_info(vera: Visitor) -> None:
    data = vera.ok(
        "contact",
        name="  Vera Visitor ",
        email="vera@example.com",
        phone="+49 (30) 123-456",
        description="Ordered twice",
    )

    assert data["contact"] == {
        "client_name": "Vera Visitor",
        "email": "vera@example.com",
        "phone": "+4930123456",
        "description": "Ordered twice",
    }
    client = vera.client
    assert (client.name, client.email, client.phone, client.description) == (
        "Vera Visitor",
        "vera@example.com",
        "+4930123456",
        "Ordered twice",
    )
    assert vera.ok("visitor")["contact"] == data["contact"]


def test_the_answer_says_when_a_link_to_confirm_the_address_was_mailed(
    vera: Visitor, settings: Any
) -> None:
    # Addresses no other test (nor an earlier run) had a link mailed to today.
    address, other = (f"vera-{secrets.token_hex(4)}@example.com" for _ in range(2))
    first = vera.ok("contact", email=address)
    again = vera.ok("contact", email=address, name="Vera")
    no_email = vera.ok("contact", phone="+49 30 123456")

    assert first["email_link_sent"] is True  # the widget tells the visitor to open it
    assert again["email_link_sent"] is False  # one link per address: mailed already
    assert no_email["email_link_sent"] is False
    assert list(Mail.objects.values_list("to", flat=True)) == [address]

    # The link not mailed (the address's daily limit): nothing to look for.
    settings.ADDRESS_CONFIRMATIONS_PER_ADDRESS_PER_DAY = 0
    assert vera.ok("contact", email=other)["email_link_sent"] is False
    assert Mail.objects.count() == 1


def test_what_is_not_known_is_null(widget: WidgetChannel) -> None:
    otto = Visitor(widget)
    assert otto.ok("visitor")["contact"] == dict.fromkeys(
        ("client_name", "email", "phone", "description")
    )

    data = otto.ok("contact", name="Otto", email=None)

    assert data["contact"] == {
        "client_name": "Otto",
        "email": None,
        "phone": None,
        "description": None,
    }
    # An empty field leaves what is known.
    assert otto.ok("contact", name="", email="otto@example.com")["contact"]["client_name"] == "Otto"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"email": "vera-at-example"}, "'vera-at-example' is not a valid e-mail address"),
        ({"name": "Vera", "email": "vera@"}, "'vera@' is not a valid e-mail address"),
        ({"phone": "ring me"}, PHONE_MESSAGE),
        ({"name": 42}, "name must be a string"),
        ({"email": ["vera@example.com"]}, "email must be a string"),
        ({"description": "a\x00b"}, NUL_REFUSED),
        ({"name": "x" * 256}, "name is longer than 255 characters"),
    ],
)
def test_contact_info_that_is_not_right_is_400_and_saves_nothing(
    vera: Visitor, fields: dict[str, Any], expected: str
) -> None:
    vera.ok("contact", name="Vera")

    assert vera.refused("contact", **fields) == expected
    client = vera.client
    assert (client.name, client.email, client.phone, client.description) == ("Vera", "", "", "")


def test_bad_contact_info_of_a_new_visitor_makes_no_visitor(vera: Visitor) -> None:
    vera.refused("contact", name="Vera", email="nope")
    assert visitor_count() == 0


# --- custom data ----------------------------------------------------------------


@pytest.mark.parametrize("fields", [{"title": "Plan"}, "Plan: gold", 7, None])
def test_custom_data_that_is_no_array_is_refused_with_the_specs_reason(
    vera: Visitor, fields: Any
) -> None:
    assert vera.refused("custom_data", fields=fields) == "Custom data must be array."
    assert visitor_count() == 0


def test_custom_data_of_more_than_ten_fields_is_refused(vera: Visitor) -> None:
    ten = [{"title": f"T{i}", "content": f"C{i}"} for i in range(10)]
    assert len(vera.ok("custom_data", fields=ten)["fields"]) == 10

    message = vera.refused("custom_data", fields=[*ten, {"title": "one more"}])
    assert "10" in message
    assert len(vera.client.visitor_data["custom_data"]) == 10  # the earlier ones stay


def test_custom_data_is_kept_with_the_visitor_as_strings(vera: Visitor) -> None:
    fields = [
        {"title": "Plan", "content": "Gold", "key": "Since", "link": "https://crm.example.com/7"},
        {"title": "Cart", "content": 3},  # not a string: shown as nothing
        {"content": "javascript link", "link": "javascript:alert(1)"},
        "not an object",
        {},
    ]
    data = vera.ok("custom_data", fields=fields)

    expected = [
        {"title": "Plan", "content": "Gold", "key": "Since", "link": "https://crm.example.com/7"},
        {"title": "Cart", "content": "", "key": "", "link": ""},
        {"title": "", "content": "javascript link", "key": "", "link": ""},
    ]
    assert data["fields"] == expected
    assert vera.client.visitor_data["custom_data"] == expected

    vera.ok("custom_data", fields=[])  # setCustomData may be called again: it replaces
    assert vera.client.visitor_data["custom_data"] == []


def test_custom_data_is_shown_escaped_on_the_agents_page(vera: Visitor, alice: Agent) -> None:
    vera.ok("message", text="Hi")
    chat = Chat.objects.get(client=vera.client)
    vera.ok(
        "custom_data",
        fields=[
            {
                "title": "<b>Order</b>",
                "content": "<script>alert('xss')</script>",
                "key": "<img src=x onerror=alert(1)>",
            }
        ],
    )
    browser = Browser()
    browser.force_login(alice)

    page = browser.get(f"/agent/chats/{chat.pk}/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "&lt;script&gt;alert(&#x27;xss&#x27;)&lt;/script&gt;" in html
    assert "<script>alert" not in html
    assert "&lt;b&gt;Order&lt;/b&gt;" in html and "<b>Order</b>" not in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_custom_data_on_an_open_chat_refreshes_the_agents_panel(vera: Visitor) -> None:
    vera.ok("message", text="Hi")
    chat = Chat.objects.get(client=vera.client)
    before = LiveEvent.objects.filter(kind="crm.panel").count()

    vera.ok("custom_data", fields=[{"title": "Plan", "content": "Gold"}])
    vera.ok("custom_data", fields=[{"title": "Plan", "content": "Gold"}])  # no change

    panels = LiveEvent.objects.filter(kind="crm.panel")
    assert panels.count() == before + 1
    assert panels.latest("id").data["chat_id"] == chat.pk
    assert panels.latest("id").for_client is False


def test_with_safe_url_on_foreign_links_are_dropped(vera: Visitor) -> None:
    set_developer_webhook(url="http://127.0.0.1:9/crm", safe_url_domains=["shop.example.com"])

    data = vera.ok(
        "custom_data",
        fields=[
            {"title": "Card", "content": "CRM card", "link": "https://shop.example.com/crm/7"},
            {"title": "Phish", "content": "Log in", "link": "https://evil.example.net/login"},
            {"content": "see https://evil.example.net/x and https://help.shop.example.com/y"},
        ],
    )

    assert [field["link"] for field in data["fields"]] == ["https://shop.example.com/crm/7", "", ""]
    assert "evil.example.net" not in json.dumps(data["fields"])
    assert "https://help.shop.example.com/y" in data["fields"][2]["content"]
    assert vera.client.visitor_data["custom_data"] == data["fields"]


# --- user token -------------------------------------------------------------------


def test_the_user_token_is_kept_and_answered(vera: Visitor) -> None:
    data = vera.ok("user_token", user_token="  crm-user-42  ")
    assert data["user_token"] == "crm-user-42" and isinstance(data["token"], str)
    assert vera.client.user_token == "crm-user-42"

    assert vera.ok("user_token", user_token=4242)["user_token"] == "4242"
    assert vera.client.user_token == "4242"


@pytest.mark.parametrize(
    "value", ["", "   ", "x" * 256, {"id": 1}, ["a"], None, True, "bad\ntoken", "a\x00b"]
)
def test_an_invalid_user_token_is_400(vera: Visitor, value: Any) -> None:
    vera.ok("user_token", user_token="kept")

    assert vera.refused("user_token", user_token=value)
    assert vera.client.user_token == "kept"


# --- page -----------------------------------------------------------------------


def test_a_known_visitors_page_is_kept(vera: Visitor) -> None:
    vera.ok("visitor")
    data = vera.ok("page", url="https://shop.example.com/cart", title="Cart")

    assert data["page"] == {"url": "https://shop.example.com/cart", "title": "Cart"}
    assert vera.client.visitor_data["page"] == data["page"]
    assert vera.refused("page") == "give the page's url or title"
    assert vera.client.visitor_data["page"] == data["page"]


# --- rating -------------------------------------------------------------------


def test_a_chat_is_rated_once_it_has_finished(vera: Visitor, alice: Agent) -> None:
    assert vera.refused("rate", rating="positive").startswith("no visitor")
    assert visitor_count() == 0

    vera.ok("visitor")
    assert vera.refused("rate", rating="positive") == "there is no chat to rate"

    vera.ok("message", text="Hi")
    chat = Chat.objects.get(client=vera.client)
    assert vera.refused("rate", rating="positive") == "a chat is rated when it has finished"
    services.accept_chat(chat=chat, agent=alice)
    assert vera.refused("rate", rating="positive") == "a chat is rated when it has finished"

    services.finish_chat(chat=chat, agent=alice)
    for bad in ("great", "", None, 5, ["positive"]):
        assert vera.refused("rate", rating=bad) == "rating must be positive or negative"
    assert Chat.objects.get(pk=chat.pk).rating == ""

    assert vera.ok("rate", rating="positive") == {
        "result": "ok",
        "rating": "positive",
        "comment": "",
    }
    assert Chat.objects.get(pk=chat.pk).rating == "positive"
    assert vera.ok("rate", rating="negative")["rating"] == "negative"
    assert Chat.objects.get(pk=chat.pk).rating == "negative"


def test_a_rating_takes_a_comment_that_agents_read(vera: Visitor, alice: Agent) -> None:
    vera.ok("message", text="Hi")
    chat = Chat.objects.get(client=vera.client)
    services.accept_chat(chat=chat, agent=alice)
    services.finish_chat(chat=chat, agent=alice)
    vera.ok("rate", rating="positive")

    said = vera.ok("rate", rating="positive", comment="  Quick <b>and</b> kind\n")
    assert said == {"result": "ok", "rating": "positive", "comment": "Quick <b>and</b> kind"}
    chat.refresh_from_db()
    assert (chat.rating, chat.rating_comment) == ("positive", "Quick <b>and</b> kind")

    # Refused, and nothing changes: too long, not a string, a NUL.
    for bad, says in (
        ("x" * 1001, "the comment is longer than 1000 characters"),
        (5, "comment must be a string"),
        ("a\x00b", NUL_REFUSED),
    ):
        assert vera.refused("rate", rating="negative", comment=bad) == says
    chat.refresh_from_db()
    assert (chat.rating, chat.rating_comment) == ("positive", "Quick <b>and</b> kind")
    with pytest.raises(services.ServiceError, match="goes with a rating"):
        services.rate_chat(chat=chat, rating="", comment="no rating")

    # The agents read it, escaped: the chat, the history, the API.
    page = page_of(alice)
    html = page.get(f"/agent/chats/{chat.pk}/").content.decode()
    assert "Quick &lt;b&gt;and&lt;/b&gt; kind" in html and "<b>and</b>" not in html
    assert "Quick &lt;b&gt;and&lt;/b&gt; kind" in page.get("/agent/history/").content.decode()
    api = APIClient()
    api.force_authenticate(alice)
    detail = api.get(f"/api/agent/v1/chats/{chat.pk}").json()
    assert (detail["rating"], detail["rating_comment"]) == ("positive", "Quick <b>and</b> kind")


# --- calls --------------------------------------------------------------------


def test_a_call_with_callback_disabled_is_refused(widget: WidgetChannel, vera: Visitor) -> None:
    assert vera.refused("call", phone="+49 30 555 0101") == "Callback disabled"
    assert Call.objects.count() == 0 and visitor_count() == 0
    assert vera.ok("callback") == {"result": "ok", "reason": "Callback disabled"}


def test_a_call_reaches_the_channels_agents_and_a_second_one_waits(
    callback_widget: WidgetChannel, alice: Agent
) -> None:
    vera = Visitor(callback_widget)
    assert vera.ok("callback")["reason"] == ""

    data = vera.ok("call", phone="+49 30 555-0101")

    assert set(data) == {"result", "token", "last_event_id"}
    [call] = selectors.calls_for_agent(agent=alice)
    assert call.phone == "+49305550101" and call.status == Call.Status.START
    assert call.client == vera.client and call.type == Call.Type.CALLBACK
    assert call.channel_id == callback_widget.channel_id
    assert list(selectors.calls_for_agent(agent=AgentFactory.create())) == []
    # The visitor hears how its call goes on its own stream.
    live = LiveEvent.objects.filter(kind="call").latest("id")
    assert live.for_client is True and live.client_id == vera.client.pk
    assert live.data == {"call_id": call.pk, "status": "start", "reason": ""}

    assert vera.refused("call", phone="+49 30 555 0102") == "Callback unavaiable"
    assert vera.ok("callback")["reason"] == "Callback unavaiable"
    assert vera.ok("session")["config"]["callback"] == {
        "enabled": False,
        "reason": "Callback unavaiable",
    }
    assert Visitor(callback_widget).ok("callback")["reason"] == ""  # someone else may call
    assert Call.objects.count() == 1

    services.record_call_progress(call=call, agent=alice, status="end")
    assert vera.ok("callback")["reason"] == ""
    vera.ok("call", phone="030 555 0102")
    assert Call.objects.count() == 2


@pytest.mark.parametrize("phone", ["call me", "12", "+49 30 555 0101 0101 0101 01", "", 4930555])
def test_a_call_to_no_phone_number_is_refused(callback_widget: WidgetChannel, phone: Any) -> None:
    message = Visitor(callback_widget).refused("call", phone=phone)

    assert message == (PHONE_MESSAGE if isinstance(phone, str) else "enter a phone number")
    assert Call.objects.count() == 0 and visitor_count() == 0


def test_a_call_belongs_to_the_visitors_chat(callback_widget: WidgetChannel) -> None:
    vera = Visitor(callback_widget)
    chat_id = vera.ok("message", text="Please call me")["chat_id"]
    vera.ok("call", phone="+49 30 555 0101")
    assert Call.objects.get().chat_id == chat_id


# --- offline messages -----------------------------------------------------------


def test_an_offline_message_is_kept_with_the_page(
    widget: WidgetChannel, alice: Agent, vera: Visitor
) -> None:
    services.set_agent_status(agent=alice, online=False)
    assert vera.ok("session")["config"]["mode"] == "offline"

    data = vera.ok(
        "offline",
        name="Otto",
        email="otto@example.com",
        phone="",
        description="Customer since 2020",
        message="Please call me back tomorrow",
        page={"url": "https://shop.example.com/contact", "title": "Contact us"},
    )

    offline = OfflineMessage.objects.get()
    assert (offline.channel_id, offline.client) == (widget.channel_id, vera.client)
    assert (offline.name, offline.email, offline.message) == (
        "Otto",
        "otto@example.com",
        "Please call me back tomorrow",
    )
    assert offline.description == "Customer since 2020"
    assert (offline.page_url, offline.page_title) == (
        "https://shop.example.com/contact",
        "Contact us",
    )
    assert set(data) == {"result", "token", "last_event_id"}
    assert [o.pk for o in selectors.offline_messages_for_agent(agent=alice)] == [offline.pk]


def test_an_offline_message_of_a_known_visitor_takes_its_last_page(vera: Visitor) -> None:
    vera.ok("visitor")
    vera.ok("page", url="https://shop.example.com/faq", title="FAQ")

    vera.ok("offline", email="vera@example.com", message="No answer in the FAQ")

    offline = OfflineMessage.objects.get()
    assert (offline.page_url, offline.page_title) == ("https://shop.example.com/faq", "FAQ")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"email": "otto-at-example", "message": "Hi"}, "'otto-at-example'"),
        ({"email": "otto@example.com", "message": ""}, "write a message"),
        ({"message": "Hi, no way to answer"}, "e-mail address or a phone number"),
        ({"phone": "call me", "message": "Hi"}, PHONE_MESSAGE),
        ({"email": "otto@example.com", "message": ["Hi"]}, "message must be a string"),
        ({"email": "otto@example.com", "message": "a\x00b"}, "NUL"),
    ],
)
def test_an_offline_message_that_is_not_right_is_400(
    vera: Visitor, fields: dict[str, Any], expected: str
) -> None:
    assert expected in vera.refused("offline", **fields)
    assert OfflineMessage.objects.count() == 0 and visitor_count() == 0


def test_a_widget_without_the_offline_form_takes_no_offline_message(
    widget: WidgetChannel, vera: Visitor
) -> None:
    WidgetChannel.objects.filter(pk=widget.pk).update(offline_form=False)

    message = vera.refused("offline", email="otto@example.com", message="Hello?")

    assert message == "this widget takes no offline messages"
    assert OfflineMessage.objects.count() == 0 and visitor_count() == 0


# --- what the visitor's stream hears --------------------------------------------


def test_the_agents_message_is_a_live_event_for_the_visitor(vera: Visitor, alice: Agent) -> None:
    vera.ok("message", text="Hi")
    chat = Chat.objects.get(client=vera.client)
    services.accept_chat(chat=chat, agent=alice)
    services.post_system_message(chat=chat, text="note for agents")
    sent = services.post_agent_message(chat=chat, agent=alice, content=text("Hello **Vera**"))

    mine = LiveEvent.objects.filter(for_client=True, client_id=vera.client.pk)
    assert list(mine.values_list("kind", flat=True).order_by("id")) == [
        "message",
        "chat.accepted",
        "message",
    ]
    event = mine.filter(kind="message").latest("id")
    assert event.data["message"]["id"] == sent.pk
    assert event.data["message"]["author"] == "agent"
    assert event.data["message"]["text"] == "Hello **Vera**"
    assert event.data["message"]["sender_name"] == "Alice"
    assert event.data["chat_id"] == chat.pk and event.data["state"] == "active"
    note = LiveEvent.objects.get(kind="message", data__message__text="note for agents")
    assert note.for_client is False


def test_a_bots_markdown_and_buttons_reach_the_visitor_as_html_and_texts(
    widget: WidgetChannel, vera: Visitor
) -> None:
    provider = bots.create_bot_provider(name="Acme", endpoint_url="http://127.0.0.1:9/bot")
    bots.attach_bot(channel=widget.channel, provider=provider, token="widget-bot-token-2")
    vera.ok("message", text="Hi bot")
    chat = Chat.objects.get(client=vera.client)

    markdown = clean_content(
        "markdown",
        {"content": "**Hi** [docs](https://example.com/d) <script>alert(1)</script>"},
    )
    services.post_bot_message(chat=chat, content=markdown, sender_name="Acme Assistant")
    buttons = clean_content(
        "buttons", {"title": "Pick one", "buttons": [{"text": "Order"}, {"text": "Refund"}]}
    )
    services.post_bot_message(chat=chat, content=buttons, sender_name="Acme Assistant")

    heard = LiveEvent.objects.filter(
        for_client=True, client_id=vera.client.pk, kind="message"
    ).order_by("id")
    by_bot = [event.data["message"] for event in heard if event.data["message"]["author"] == "bot"]
    assert len(by_bot) == 2
    html = by_bot[0]["html"]
    assert "<strong>Hi</strong>" in html and 'href="https://example.com/d"' in html
    assert "<script>" not in html
    assert by_bot[0]["sender_name"] == "Acme Assistant"
    assert by_bot[1]["buttons"] == ["Order", "Refund"] and by_bot[1]["title"] == "Pick one"

    # A page load shows the same rendering in the history.
    history = vera.ok("session")["visitor"]["messages"]
    assert history[1]["html"] == html and history[2]["buttons"] == ["Order", "Refund"]


def read_sse(raw: str) -> list[dict[str, Any]]:
    events = []
    for block in raw.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":")
        )
        if "data" in fields:
            events.append(
                {"id": int(fields["id"]), "kind": fields["event"], **json.loads(fields["data"])}
            )
    return events


async def listen(token: str, after: int, *, then: Any, until: str) -> list[dict[str, Any]]:
    """Open the visitor's stream as a reconnecting EventSource does (it saw
    event ``after``), run ``then`` once it is connected, and read until
    ``until`` comes."""
    response = await AsyncClient().get(
        f"/visitor/{token}/stream", headers={"Last-Event-ID": str(after)}
    )
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "*"
    assert response["Content-Type"].startswith("text/event-stream")
    stream: Any = response.streaming_content  # type: ignore[attr-defined]  # async: is streaming
    raw = ""
    try:
        async with asyncio.timeout(15):
            async for chunk in stream:
                raw += chunk.decode()
                if ": connected" in raw and then is not None:
                    await in_thread(then)
                    then = None
                if until in raw and raw.endswith("\n\n"):
                    break
    finally:
        await stream.aclose()
    return read_sse(raw)


@pytest.mark.django_db(transaction=True)
def test_the_visitors_stream_hears_the_agent(widget: WidgetChannel, alice: Agent) -> None:
    vera, otto = Visitor(widget), Visitor(widget)
    vera.ok("message", text="Hi, anyone there?")
    otto.ok("message", text="Otto's chat")
    chat = Chat.objects.get(client=vera.client)
    after = vera.ok("session")["visitor"]["last_event_id"]
    # While the page is away (between two pages of the site):
    services.accept_chat(chat=chat, agent=alice)
    services.post_system_message(chat=chat, text="a note for agents")
    services.post_agent_message(chat=chat, agent=alice, content=text("Hello Vera"))
    ottos = services.accept_chat(chat=Chat.objects.get(client=otto.client), agent=alice)
    services.post_agent_message(chat=ottos, agent=alice, content=text("Hello Otto"))

    def agent_writes_again() -> None:  # while the stream is open
        services.post_agent_message(chat=chat, agent=alice, content=text("Still there?"))

    heard = run_async(
        listen(vera.token, after, then=agent_writes_again, until='"text":"Still there?"')
    )

    said = [(event["kind"], event.get("message", {}).get("text")) for event in heard]
    assert said == [
        ("chat.accepted", None),
        ("message", "Hello Vera"),
        ("message", "Still there?"),
    ]
    assert all(event["chat_id"] == chat.pk for event in heard)
    assert heard[1]["message"]["sender_name"] == "Alice"
    assert heard[1]["message"]["author"] == "agent"
    assert heard[0]["id"] > after and heard[1]["id"] < heard[2]["id"]


# --- HTTP: CORS, errors, the script ------------------------------------------------


def test_every_answer_allows_any_origin(widget: WidgetChannel, settings: Any) -> None:
    page = Visitor(widget)
    assert page.post("session")["Access-Control-Allow-Origin"] == "*"  # 200
    error_of(page.post("message", text=""), 400)
    error_of(page.http.get(page.url("session")), 405)
    error_of(Visitor(widget).post("nosuchaction"), 404)

    settings.WIDGET_NEW_VISITORS_PER_ADDRESS = 1
    address = unique_address()
    assert Visitor(widget, address=address).post("message", text="Hi").status_code == 200
    error_of(Visitor(widget, address=address).post("message", text="Hi"), 429)


def test_a_limit_of_0_is_no_limit(widget: WidgetChannel, settings: Any) -> None:
    """As on the Chat API and the Bot API (agents.inbound.throttle)."""
    settings.WIDGET_NEW_VISITORS_PER_ADDRESS = 0
    settings.WIDGET_RATE_LIMIT = 0
    settings.WIDGET_ADDRESS_RATE_LIMIT = 0
    vera = Visitor(widget, address=unique_address())

    assert vera.ok("message", text="Hi")["state"] == "queued"
    assert vera.ok("message", text="Still there?")["state"] == "queued"


@pytest.mark.parametrize("case", ["trailing-slash", "no-action", "over-2.5MB", "crash"])
def test_answers_made_outside_the_widget_view_allow_any_origin_too(
    widget: WidgetChannel, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = f"/widget/{widget.widget_id}/v1/"
    path, body = {
        "trailing-slash": (api + "message/", b'{"text": "Hi"}'),
        "no-action": (api, b"{}"),
        "over-2.5MB": (api + "session", b"{" + b" " * 3_000_000 + b"}"),
        "crash": (api + "session", b"{}"),
    }[case]
    if case == "crash":

        def crash(visit: Any) -> dict[str, Any]:
            raise RuntimeError("a bug of the moment")

        monkeypatch.setitem(views.ACTIONS, "session", crash)

    answer = Browser(raise_request_exception=False).post(path, body, content_type="text/plain")

    assert answer.status_code >= 400 and "error" in answer.json()
    assert answer.get("Access-Control-Allow-Origin") == "*"


def test_a_preflight_is_answered_with_what_is_allowed(widget: WidgetChannel) -> None:
    answer = Browser().options(
        f"/widget/{widget.widget_id}/v1/message",
        headers={"Origin": "https://shop.example.com", "Access-Control-Request-Method": "POST"},
    )

    assert answer.status_code == 204 and answer.content == b""
    assert answer["Access-Control-Allow-Origin"] == "*"
    assert "POST" in answer["Access-Control-Allow-Methods"]
    assert answer["Access-Control-Allow-Headers"] == "Content-Type"
    assert int(answer["Access-Control-Max-Age"]) > 0


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_other_methods_on_an_action_are_405(widget: WidgetChannel, method: str) -> None:
    answer = getattr(Browser(), method)(f"/widget/{widget.widget_id}/v1/message")

    error_of(answer, 405)
    assert answer["Allow"] == "POST, OPTIONS"
    assert visitor_count() == 0


def test_an_unknown_widget_or_action_is_404(widget: WidgetChannel) -> None:
    body = json.dumps({"text": "Hi"})
    for path in (
        "/widget/nosuchwidget/v1/message",
        f"/widget/{widget.widget_id}/v1/nosuchaction",
        f"/widget/{'x' * 40}/v1/session",
        f"/widget/{widget.widget_id}/v1/__init__",
    ):
        answer = Browser().post(path, body, content_type="text/plain")
        assert error_of(answer, 404) == "no such widget or action", path
    assert visitor_count() == 0


def test_a_disabled_channels_widget_is_gone(widget: WidgetChannel) -> None:
    page = Visitor(widget)
    page.ok("message", text="Hi")
    Channel.objects.filter(pk=widget.channel_id).update(is_active=False)

    error_of(page.post("message", text="Still there?"), 404)
    error_of(Visitor(widget).post("session"), 404)
    assert Browser().get(f"/widget/{widget.widget_id}.js").status_code == 404
    assert Message.objects.count() == 1


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"[]",
        b'"text"',
        b"42",
        b"null",
        b"\xff\xfe{}",
        json.dumps({"text": "x" * (64 * 1024)}).encode(),
    ],
    ids=["broken", "array", "string", "number", "null", "not-utf8", "over-64kb"],
)
def test_a_body_that_is_no_json_object_of_64kb_is_400(widget: WidgetChannel, raw: bytes) -> None:
    answer = Browser().post(
        f"/widget/{widget.widget_id}/v1/message", raw, content_type="text/plain"
    )

    message = error_of(answer, 400)
    big = len(raw) > 64 * 1024
    assert (
        message == "send a JSON object of at most 64 KB"
        if big
        else message.startswith("the body is not valid JSON: ")
    )
    assert visitor_count() == 0


def test_a_body_of_just_under_64kb_is_read(vera: Visitor) -> None:
    padding = "x" * (64 * 1024 - 200)
    data = vera.ok("message", text="Hi", padding=padding)
    assert Message.objects.get(pk=data["message_id"]).text == "Hi"


def test_an_empty_body_is_an_empty_object(widget: WidgetChannel) -> None:
    answer = Browser().post(f"/widget/{widget.widget_id}/v1/session", b"", content_type="")
    assert answer.status_code == 200 and answer.json()["visitor"] is None


def test_json_sent_as_json_is_taken_too(widget: WidgetChannel) -> None:
    answer = Browser().post(
        f"/widget/{widget.widget_id}/v1/message", {"text": "Hi"}, content_type="application/json"
    )
    assert answer.status_code == 200 and "token" in answer.json()


def test_the_script_is_served_for_a_known_widget_only(widget: WidgetChannel) -> None:
    answer = Browser().get(f"/widget/{widget.widget_id}.js")
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/javascript")
    assert answer["Access-Control-Allow-Origin"] == "*"
    assert "max-age=300" in answer["Cache-Control"]
    assert len(answer.content) > 0

    unknown = Browser().get("/widget/nosuchwidget.js")
    assert unknown.status_code == 404 and answer.content not in unknown.content

    error_of(Browser().post(f"/widget/{widget.widget_id}.js"), 405)


# --- rate limits ------------------------------------------------------------------


def test_a_visitor_beyond_the_rate_limit_is_429(widget: WidgetChannel, settings: Any) -> None:
    settings.WIDGET_RATE_LIMIT = 3
    vera = Visitor(widget, address=unique_address())
    vera.ok("message", text="Hi")  # made the visitor: no token was counted yet

    for _ in range(3):
        vera.ok("typing", typing=True)
    answer = vera.post("message", text="one too many")

    error_of(answer, 429)
    assert answer["Retry-After"] == str(int(settings.WIDGET_RATE_WINDOW))
    assert Message.objects.filter(chat__client=vera.client).count() == 1
    # Another visitor (even from the same address) is not held back.
    Visitor(widget, address=unique_address()).ok("message", text="Me too")


def test_new_visitors_from_one_address_beyond_the_limit_are_429(
    widget: WidgetChannel, settings: Any
) -> None:
    settings.WIDGET_NEW_VISITORS_PER_ADDRESS = 2
    address = unique_address()
    first = Visitor(widget, address=address)
    first.ok("message", text="1")
    Visitor(widget, address=address).ok("visitor")

    answer = Visitor(widget, address=address).post("message", text="3")

    error_of(answer, 429)
    assert answer["Retry-After"] == str(int(settings.WIDGET_RATE_WINDOW))
    assert visitor_count() == 2
    # Known visitors and page views from there go on; so do other addresses.
    first.ok("message", text="still me")
    Visitor(widget, address=address).ok("session")
    Visitor(widget, address=unique_address()).ok("message", text="elsewhere")
    assert visitor_count() == 3


def test_one_address_beyond_its_limit_is_429_whatever_visitors_it_has(
    widget: WidgetChannel, settings: Any
) -> None:
    """Each new visitor has its own allowance: without a limit per address,
    one address could make visitors and spend theirs too."""
    settings.WIDGET_ADDRESS_RATE_LIMIT = 3
    address = unique_address()
    for number in range(3):
        Visitor(widget, address=address).ok("message", text=f"spam {number}")

    answer = Visitor(widget, address=address).post("offline", email="a@example.com", message="x")

    error_of(answer, 429)
    assert visitor_count() == 3 and not OfflineMessage.objects.exists()
    Visitor(widget, address=unique_address()).ok("message", text="elsewhere")


def test_the_addresses_of_one_ipv6_network_count_as_one(
    widget: WidgetChannel, settings: Any
) -> None:
    settings.WIDGET_NEW_VISITORS_PER_ADDRESS = 2
    network = unique_address().removesuffix("::1")
    Visitor(widget, address=f"{network}::1").ok("message", text="1")
    Visitor(widget, address=f"{network}:0:0:0:2").ok("message", text="2")

    answer = Visitor(widget, address=f"{network}:ffff:ffff:ffff:ffff").post("message", text="3")

    error_of(answer, 429)
    assert visitor_count() == 2


# --- no input makes a 500 ------------------------------------------------------------

SURROGATE = "\ud83d"  # half an emoji: a JSON escape may hold it, UTF-8 cannot
POSTGRES = django_settings.DATABASES["default"]["ENGINE"].endswith("postgresql")

# What each action reads of the body, besides the token (and, when it makes a
# visitor, the page and the landing URL).
READS = {
    "session": [],
    "visitor": [],
    "message": ["text", "department_id", "invitation"],
    "typing": ["typing"],
    "contact": ["name", "email", "phone", "description"],
    "custom_data": ["fields"],
    "user_token": ["user_token"],
    "page": ["url", "title"],
    "rate": ["rating", "comment"],
    "call": ["phone"],
    "callback": [],
    "offline": ["name", "email", "phone", "description", "message"],
}
# Values that broke, or nearly broke, something somewhere: for any field...
COMMON = [
    "", " ", "\x00", "a\x00b", SURROGATE, "x\udc00y", "x" * 3000, "<script>alert(1)</script>",
    None, True, 0, -1, 1.5, 10**30, [], {}, ["x"], {"a": 1},
]  # fmt: skip
# ... and for the field whose checks they aim at.
AIMED: dict[str, list[Any]] = {
    "token": ["x" * 16, "x" * 128, "x" * 129, "\u00e9" * 40],
    "text": ["x" * 1001, "\n", "\u200b"],
    "department_id": ["\u00b2", "\u0661", "99999999999999999999", "-1", "0", "1", "1.0", 2**63],
    "invitation": ["x" * 5000],
    "typing": ["true", 1],
    "name": ["x" * 256],
    "email": ["otto@", "a@b", "x" * 300 + "@example.com", "otto@example.com\n"],
    "phone": ["12", "+49 30 555 0101 0101 0101", "()()()()()", "+" + "1" * 15, "\u0661" * 9],
    "description": ["x" * 4001],
    "fields": [[{"link": "javascript:alert(1)"}], [{"title": {"a": 1}}] * 11, [None, 1, "x"]],
    "user_token": ["x" * 255, "x" * 256, "\t", "a b", 2**70],
    "url": ["javascript:alert(1)", "http://[x/", "x" * 2000],
    "title": ["x" * 2000],
    "rating": ["Positive", "none", "null"],
    "comment": ["x" * 1001, "\n"],
    "message": ["x" * 4001],
    "page": [{"url": "http://[x/"}, {"title": ["x"]}, {"url": None, "title": None}, "x"],
    "landing_url": [
        "https://shop.example.com/?utm_source=news&utm_medium=%00",
        "https://shop.example.com/?utm_source=" + "s" * 3000,
        "http://[x/?utm_source=a",
        "?utm_source=a&utm_source=b&utm_term=%FF",
        "x" * 2001,
    ],
}
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()  # NaN and Infinity too: json.loads takes them
    | st.text(max_size=30)
    | st.sampled_from(COMMON)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def hostile(name: str) -> st.SearchStrategy[Any]:
    aimed = AIMED.get(name, [])
    return st.sampled_from(aimed) | st.sampled_from(COMMON) | values if aimed else values


# A plausible value of each field: a body is mostly these, with a hostile
# value or two in their place, so that the checks after the first one run too.
PLAUSIBLE: dict[str, Any] = {
    "text": "Where is my order?",
    "invitation": "Need help choosing?",
    "typing": True,
    "name": "Vera",
    "email": "vera@example.com",
    "phone": "+49 30 555 0101",
    "description": "Ordered twice",
    "fields": [{"title": "Plan", "content": "Gold", "link": "https://x.example/", "key": "k"}],
    "user_token": "crm-user-42",
    "url": "https://shop.example.com/cart",
    "title": "Cart",
    "rating": "positive",
    "message": "Please call me",
    "page": {"url": "https://shop.example.com/", "title": "Shop"},
    "landing_url": "https://shop.example.com/?utm_source=news&utm_campaign=spring",
}


def bodies_for(action: str) -> st.SearchStrategy[dict[str, Any]]:
    names = [*READS[action], "token", "page", "landing_url"]
    plausible = {name: PLAUSIBLE[name] for name in READS[action] if name in PLAUSIBLE}
    hostile_fields = st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)
    return hostile_fields.flatmap(
        lambda chosen: st.fixed_dictionaries({name: hostile(name) for name in chosen})
    ).map(lambda bad: {**plausible, **bad})


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in [*strings_in(key), *strings_in(item)]]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []


@pytest.fixture
def fuzz_widget(alice: Agent, billing: Department) -> WidgetChannel:
    return create_widget_channel(
        name="Fuzz", agent_emails=[alice.email], callback=True, departments=[billing]
    )


@pytest.fixture
def regulars(fuzz_widget: WidgetChannel, alice: Agent) -> dict[str, str]:
    """Tokens of a visitor with an open chat and of one whose chat finished."""
    open_chat, finished = Visitor(fuzz_widget), Visitor(fuzz_widget)
    open_chat.ok("message", text="I am waiting")
    finished.ok("message", text="I was helped")
    chat = services.accept_chat(chat=Chat.objects.get(client=finished.client), agent=alice)
    services.finish_chat(chat=chat, agent=alice)
    return {"open": open_chat.token, "finished": finished.token}


@pytest.mark.parametrize("action", list(READS))
@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), who=st.sampled_from(["new", "open", "finished"]))
def test_no_body_makes_a_500(
    fuzz_widget: WidgetChannel,
    regulars: dict[str, str],
    action: str,
    data: st.DataObject,
    who: str,
) -> None:
    body = data.draw(bodies_for(action), label="body")
    page = Visitor(fuzz_widget, raise_errors=False)
    if who != "new":
        body.setdefault("token", regulars[who])

    answer = page.post(action, **body)

    assert answer.status_code in (200, 400, 429), (answer.status_code, answer.content[:300])
    assert answer["Access-Control-Allow-Origin"] == "*"
    if answer.status_code != 200:
        error_of(answer, answer.status_code)


def answered(answer: Answer) -> None:
    assert answer.status_code in (200, 400), (answer.status_code, answer.content[:300])
    if answer.status_code == 400:
        error_of(answer, 400)


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("message", {"text": f"Hi {SURROGATE}"}),
        ("message", {"text": "Hi", "invitation": SURROGATE}),
        ("contact", {"name": SURROGATE}),
        ("contact", {"description": f"x{SURROGATE}"}),
        ("offline", {"email": "otto@example.com", "message": f"Hi {SURROGATE}"}),
        ("offline", {"email": "otto@example.com", "message": "Hi", "name": SURROGATE}),
        ("session", {"token": SURROGATE * 20}),
    ],
    ids=["text", "invitation", "name", "description", "offline", "offline-name", "token"],
)
def test_a_lone_surrogate_is_no_500(
    widget: WidgetChannel, action: str, body: dict[str, Any]
) -> None:
    answered(Visitor(widget, raise_errors=False).post(action, **body))


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("custom_data", {"fields": [{"title": "Plan", "content": "a\x00b"}]}),
        ("custom_data", {"fields": [{"title": "Plan", "content": f"a{SURROGATE}"}]}),
        ("message", {"text": "Hi", "page": {"url": "https://x.example/", "title": "a\x00b"}}),
        ("message", {"text": "Hi", "page": {"url": "https://x.example/", "title": SURROGATE}}),
        ("message", {"text": "Hi", "landing_url": "https://x.example/?utm_source=a%00b"}),
        ("message", {"text": "Hi", "invitation": "Can we help?\x00"}),
        ("page", {"url": "https://x.example/\x00"}),
    ],
    ids=["custom-nul", "custom-surrogate", "page-nul", "page-surrogate", "utm", "invite", "page"],
)
def test_a_nul_kept_as_json_is_no_500(
    widget: WidgetChannel, action: str, body: dict[str, Any]
) -> None:
    page = Visitor(widget, raise_errors=False)
    if action == "page":
        page.ok("visitor")
    answered(page.post(action, **body))


@pytest.mark.parametrize(
    "raw",
    [b"[" * 60_000 + b"]" * 10, b'{"a":' * 10_000 + b"1" + b"}" * 10_000],
    ids=["arrays", "objects"],
)
def test_json_nested_too_deeply_is_400(widget: WidgetChannel, raw: bytes) -> None:
    """Fixed here: json.loads raised RecursionError, which the view did not catch (500)."""
    assert len(raw) <= 64 * 1024
    answer = Browser(raise_request_exception=False).post(
        f"/widget/{widget.widget_id}/v1/session", raw, content_type="text/plain"
    )
    assert error_of(answer, 400) == "the body is not valid JSON: it is nested too deeply"


@pytest.mark.parametrize("value", ["\u00b2", "\u0661", "\uff11", "12\u00b3"])
def test_a_department_id_of_digits_that_are_not_ascii_is_400(
    widget: WidgetChannel, value: str
) -> None:
    """Fixed here: "²".isdigit() is true and int("²") raised ValueError (500)."""
    answer = Visitor(widget, raise_errors=False).post("message", text="Hi", department_id=value)
    assert error_of(answer, 400) == "department_id must be a number"
    assert Chat.objects.count() == 0


@pytest.mark.parametrize("value", ["9" * 5000, 10**40])
def test_a_department_id_no_row_could_have_opens_the_chat_without_one(
    widget: WidgetChannel, value: Any
) -> None:
    """Fixed here: int() of 5,000 digits raised ValueError (Python's digit limit), a 500."""
    visitor = Visitor(widget)
    visitor.ok("message", text="Hi", department_id=value)
    assert Chat.objects.get(client=visitor.client).department is None


# --- the query budget (issues 23 and 28): statements the widget's send may
# run, savepoints included, on PostgreSQL with Redis: at most 12 for a new
# visitor and 8 for a known one (docs/performance.md, "SQL statements per
# request"; tests/limits.py adds the embedded default's rate-limit rows: the
# address's, the new visitor's and then the visitor's own count).


def test_the_widgets_send_stays_within_its_query_budget(
    vera: Visitor, django_assert_max_num_queries: Any
) -> None:
    # The widget; the action's savepoint; where the visitor's stream starts;
    # the visitor's number and its one INSERT (its page, its token's hash);
    # the channel's bot; the chat, the message and the live events.
    with django_assert_max_num_queries(12 + rate_limit_statements(admits=2)):
        vera.ok("message", text="Hi there")
    # The widget; the visitor by its token under its lock, in the action's
    # savepoint; its open chat under its lock; the message, the chat's facts,
    # the live event.
    with django_assert_max_num_queries(8 + rate_limit_statements(admits=2)):
        vera.ok("message", text="Still there?")

    assert Message.objects.filter(chat__client=vera.client).count() == 2
