"""Static files load from the real web process (whitenoise under ASGI)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from tests.web.server import WebServer


@pytest.fixture(scope="module")
def server(django_db_setup: None) -> Iterator[WebServer]:
    web = WebServer().start()
    yield web
    web.stop()


@pytest.mark.parametrize("path", ["/static/agent/app.css", "/static/admin/css/base.css"])
def test_the_agent_pages_and_the_admin_get_their_css(server: WebServer, path: str) -> None:
    answer = requests.get(server.base_url + path, timeout=10)

    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/css")
    assert len(answer.content) == int(answer.headers["Content-Length"]) > 1000
