"""One wording for a body that is not JSON, whichever API is asked."""

from __future__ import annotations

import pytest
from django.test import Client as Browser

from agents.models import Agent
from agents.tokens import issue_token
from bots.services import attach_bot, create_bot_provider
from channels_api.services import create_chat_api_channel
from devhooks.widget.services import create_widget_channel

pytestmark = pytest.mark.django_db


DEEP = b"[" * 600 + b"]" * 600  # parses, but deeper than the pages' scrubbing goes


@pytest.mark.parametrize("body", [b"{nope", DEEP], ids=["broken", "deep"])
def test_every_api_says_the_body_is_not_valid_json(agent: Agent, body: bytes) -> None:
    chat_api, _ = create_chat_api_channel(
        name="App", webhook_url="http://127.0.0.1:9/x", agents=[agent]
    )
    widget = create_widget_channel(name="Site")
    provider = create_bot_provider(
        name="Bots", endpoint_url="http://127.0.0.1:9/bot", display_name="Bot"
    )
    attach_bot(channel=chat_api.channel, provider=provider, token="json-wording-token-01")
    b2 = f"/webhooks/{provider.provider_id}/json-wording-token-01"
    a2 = "/" + chat_api.endpoint_url.split("/", 3)[3]
    token = issue_token(agent=agent)
    asked = {
        "A2": Browser().post(a2, body, content_type="application/json"),
        "B2": Browser().post(b2, body, content_type="application/json"),
        "widget": Browser().post(
            f"/widget/{widget.widget_id}/v1/session", body, content_type="text/plain"
        ),
        "agent API": Browser().post(
            "/api/agent/v1/status",
            body,
            content_type="application/json",
            headers={"Authorization": f"Token {token}"},
        ),
    }
    for api, answer in asked.items():
        assert answer.status_code == 400, api
        assert answer.json()["error"]["message"].startswith("the body is not valid JSON: "), api
