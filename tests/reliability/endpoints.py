"""The endpoints a fault test knocks on: one request of each API that needs
the database (A1, A2, B2, the widget's actions, the agent API, the live
streams, an agent page), made against a web process seeded by
``tests.reliability.seed``."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import requests


@dataclass
class Answer:
    name: str
    status: int | None  # None: no answer before the client gave up
    seconds: float
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def requests_of(seed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each endpoint's request, as ``requests.request`` keyword arguments."""
    agent = {"Authorization": f"Token {seed['agent_token']}"}
    return {
        "A1": {"method": "GET", "url": f"/{seed['a1']}"},
        "A2": {
            "method": "POST",
            "url": f"/{seed['a2']}",
            "json": {"sender": {"id": "u-1"}, "message": {"type": "text", "text": "hi"}},
        },
        "B2": {
            "method": "POST",
            "url": f"/{seed['b2']}",
            "json": {"event": "INVITE_AGENT", "id": "e-1", "client_id": "1", "chat_id": "1"},
        },
        "widget": {
            "method": "POST",
            "url": f"/widget/{seed['widget']}/v1/typing",
            "json": {"token": seed["visitor_token"], "typing": True},
        },
        "agent API": {
            "method": "GET",
            "url": f"/api/agent/v1/chats/{seed['chat']}",
            "headers": agent,
        },
        "agent API reply": {
            "method": "POST",
            "url": f"/api/agent/v1/chats/{seed['chat']}/messages",
            "json": {"type": "text", "text": "hello"},
            "headers": {**agent, "Idempotency-Key": uuid.uuid4().hex},
        },
        "agent stream": {"method": "GET", "url": "/api/agent/v1/stream", "headers": agent},
        "visitor stream": {"method": "GET", "url": f"/visitor/{seed['visitor_token']}/stream"},
        "agent page": {
            "method": "GET",
            "url": "/agent/",
            "cookies": {"sessionid": "x" * 32},
            "allow_redirects": False,
        },
    }


def knock(base_url: str, name: str, request: dict[str, Any], timeout: float = 10) -> Answer:
    """One request; a stream is read only up to its head."""
    started = time.monotonic()
    try:
        with requests.request(
            **{**request, "url": base_url + request["url"]}, timeout=timeout, stream=True
        ) as response:
            body = (
                b""
                if "event-stream" in response.headers.get("Content-Type", "")
                else response.content
            )
            return Answer(
                name, response.status_code, time.monotonic() - started, dict(response.headers), body
            )
    except requests.RequestException:
        return Answer(name, None, time.monotonic() - started, {}, b"")
