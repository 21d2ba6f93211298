"""Every model's admin pages open, and chats are read-only there."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client as Browser

from agents import services
from tests.factories import AgentFactory, ChatFactory, text

pytestmark = pytest.mark.django_db


def test_every_admin_page_opens() -> None:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    chat = ChatFactory.create()
    services.post_client_message(client=chat.client, content=text("hello from a client"))

    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        base = f"/admin/{meta.app_label}/{meta.model_name}/"
        listing = browser.get(base, follow=True)
        # A one-row settings page leads from its list straight to its row.
        assert listing.status_code == 200, base
        assert all(hop.startswith(base) for hop, _status in listing.redirect_chain), base
        add = browser.get(f"{base}add/")
        assert add.status_code == (
            200 if model_admin.has_add_permission(add.wsgi_request) else 403
        ), base
        first = model._default_manager.first()
        if first is not None:
            assert browser.get(f"{base}{first.pk}/change/").status_code == 200, base

    page = browser.get(f"/admin/agents/chat/{chat.pk}/change/").content.decode()
    assert "hello from a client" in page and 'name="_save"' not in page


def test_channels_are_made_where_their_kind_is_and_named_as_the_readme_says() -> None:
    from django.contrib.auth.models import Group

    from agents.models import Channel

    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    assert browser.get("/admin/agents/channel/add/").status_code == 403
    assert browser.post("/admin/agents/channel/add/", {"name": "x"}).status_code == 403
    assert not Channel.objects.exists()

    index = browser.get("/admin/").content.decode()
    for name in ("Delivery log", "API tokens", "Chat API channels", "Website widgets"):
        assert name in index, name
    assert "Groups" not in index and Group not in admin.site._registry
    assert (
        "<title>Channels, agents, chats and the delivery log | Switchboard admin</title>" in index
    )
    assert 'rel="icon" href="/static/brand/favicon.svg"' in index
    assert browser.get("/static/brand/favicon.svg").status_code == 200


def test_help_texts_show_their_angle_brackets_and_the_picker_offers_agents() -> None:
    from channels_api.services import create_chat_api_channel

    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin", name="Root"))
    alice = AgentFactory.create(name="Alice Agent")
    AgentFactory.create(name="Gone Agent", is_active=False)
    chat_api, _ = create_chat_api_channel(name="App", webhook_url="http://127.0.0.1:9/x")

    add = browser.get("/admin/channels_api/chatapichannel/add/").content.decode()
    assert "Webhook URL" in add and "agent messages go to &lt;url&gt;/&lt;id&gt;" in add
    assert "<url>" not in add
    provider = browser.get("/admin/bots/botprovider/add/").content.decode()
    assert "events go to &lt;url&gt;/&lt;token&gt;" in provider
    change = browser.get(f"/admin/agents/channel/{chat_api.channel.pk}/change/").content.decode()
    picker = _agent_picker(change)
    assert "Alice Agent" in picker and "Gone Agent" not in picker and "Root" not in picker
    assert alice.name in picker


def _agent_picker(page: str) -> str:
    """The options of a channel form's agent picker."""
    picker = page[page.index('name="agents"') :]
    return picker[: picker.index("</select>")]


def test_every_form_that_makes_a_channel_offers_agents_only() -> None:
    from channels_api.models import ChatApiChannel
    from channels_api.services import create_chat_api_channel
    from devhooks.widget.services import create_widget_channel

    browser = Browser()
    root = AgentFactory.create(role="admin", name="Root")
    browser.force_login(root)
    AgentFactory.create(name="Alice Agent")
    AgentFactory.create(name="Gone Agent", is_active=False)
    chat_api, _ = create_chat_api_channel(name="App", webhook_url="http://127.0.0.1:9/x")
    widget = create_widget_channel(name="Site")

    for url in (
        "/admin/channels_api/chatapichannel/add/",
        f"/admin/channels_api/chatapichannel/{chat_api.pk}/change/",
        "/admin/devhooks/widgetchannel/add/",
        f"/admin/devhooks/widgetchannel/{widget.pk}/change/",
        f"/admin/agents/channel/{chat_api.channel.pk}/change/",
    ):
        page = browser.get(url).content.decode()
        picker = _agent_picker(page)
        assert "Alice Agent" in picker, url
        assert "Root" not in picker and "Gone Agent" not in picker, url
        # The label names the list the picker's script makes of the select.
        assert '<label for="id_agents_from">Agents:</label>' in page, url

    # A superuser posted as an agent all the same is refused.
    answer = browser.post(
        "/admin/channels_api/chatapichannel/add/",
        {"name": "Other", "webhook_url": "http://127.0.0.1:9/y", "agents": [root.pk]},
    )
    assert answer.status_code == 200 and "Select a valid choice" in answer.content.decode()
    assert ChatApiChannel.objects.count() == 1


def test_an_agents_rights_are_their_role_without_groups() -> None:
    browser = Browser()
    browser.force_login(AgentFactory.create(role="admin"))
    agent = AgentFactory.create(name="Alice Agent")
    url = f"/admin/agents/agent/{agent.pk}/change/"

    page = browser.get(url).content.decode()
    assert 'name="role"' in page and 'name="is_staff"' not in page
    assert 'name="groups"' not in page and 'name="user_permissions"' not in page

    posted = {
        "email": agent.email,
        "name": "Alice Renamed",
        "is_active": "on",
        "role": "supervisor",
        "date_joined_0": "2026-01-05",
        "date_joined_1": "09:30:00",
    }
    answer = browser.post(url, posted)
    assert answer.status_code == 302, answer.content.decode()
    agent.refresh_from_db()
    assert agent.name == "Alice Renamed" and agent.role == "supervisor"
    assert not agent.is_staff and not agent.is_superuser  # the admin is for admins

    browser.post(url, {**posted, "role": "admin"})
    agent.refresh_from_db()
    assert agent.role == "admin" and agent.is_staff and agent.is_superuser
