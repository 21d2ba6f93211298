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
    browser.force_login(AgentFactory.create(is_staff=True, is_superuser=True))
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
