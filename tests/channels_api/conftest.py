from __future__ import annotations

from typing import Any

import pytest
from django.test import Client as HttpClient

from agents.models import Agent
from channels_api.models import ChatApiChannel
from channels_api.services import create_chat_api_channel


@pytest.fixture
def chat_api(agent: Agent) -> ChatApiChannel:
    made, _secret = create_chat_api_channel(
        name="App", webhook_url="http://127.0.0.1:9/integrator", agents=[agent]
    )
    return made


def path_of(url: str) -> str:
    return url.split("://", 1)[1].split("/", 1)[1].join(["/", ""])


class Integrator:
    """Posts to a channel's A1/A2 endpoints as an integrator's server would."""

    def __init__(self, chat_api: ChatApiChannel) -> None:
        self.http = HttpClient()
        self.endpoint = path_of(chat_api.endpoint_url)
        self.status_path = path_of(chat_api.status_url)

    def status(self) -> Any:
        return self.http.get(self.status_path)

    def post(self, body: Any, **headers: str) -> Any:
        return self.http.post(self.endpoint, body, content_type="application/json", headers=headers)

    def say(self, text: str, sender_id: str | int = "u-1", **sender: Any) -> Any:
        return self.post(
            {"sender": {"id": sender_id, **sender}, "message": {"type": "text", "text": text}}
        )


@pytest.fixture
def integrator(chat_api: ChatApiChannel) -> Integrator:
    return Integrator(chat_api)
