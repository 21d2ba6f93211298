"""The widget's size budget (docs/widget.md): script and styles, and the
catalogue of the visitor's language, as a browser downloads them before the
visitor opens the widget, at most 30 KB gzipped."""

from __future__ import annotations

import gzip

import pytest
from django.test import Client

from devhooks.widget import languages
from devhooks.widget import services as widgets
from tests.worker import ROOT

pytestmark = pytest.mark.django_db

BUDGET = 30 * 1024
SCRIPT = ROOT / "static" / "widget" / "widget.js"


def test_the_script_with_its_styles_is_within_the_budget_as_served(client: Client) -> None:
    widget = widgets.create_widget_channel(name="Site")
    response = client.get(f"/widget/{widget.widget_id}.js", HTTP_ACCEPT_ENCODING="gzip, br")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert response["Vary"] == "Accept-Encoding"
    served = response.content
    assert gzip.decompress(served) == SCRIPT.read_bytes()
    # The styles are in the script (a constructed stylesheet): nothing else loads.
    assert b"adoptedStyleSheets" in SCRIPT.read_bytes()
    print(f"widget.js: {len(SCRIPT.read_bytes())} bytes, {len(served)} gzipped")
    assert len(served) <= BUDGET


def test_a_client_that_takes_no_gzip_gets_the_plain_script(client: Client) -> None:
    widget = widgets.create_widget_channel(name="Site")
    response = client.get(f"/widget/{widget.widget_id}.js")
    assert "Content-Encoding" not in response
    assert response.content == SCRIPT.read_bytes()
    assert response["Content-Type"] == "text/javascript; charset=utf-8"
    assert response["Access-Control-Allow-Origin"] == "*"


def test_an_unknown_widget_gets_no_script(client: Client) -> None:
    response = client.get("/widget/nothing-here.js", HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 404
    assert b"svc_api" not in response.content


def test_the_script_with_the_largest_catalogue_is_within_the_budget(client: Client) -> None:
    # A browser loads the script and one catalogue (its visitor's language),
    # each as served.
    widget = widgets.create_widget_channel(name="Site")
    script = client.get(f"/widget/{widget.widget_id}.js", HTTP_ACCEPT_ENCODING="gzip")
    versions = languages.versions()
    sizes = {}
    for code, version in versions.items():
        answer = client.get(f"/widget/lang/{code}.json?v={version}", HTTP_ACCEPT_ENCODING="gzip")
        assert answer.status_code == 200 and answer["Content-Encoding"] == "gzip"
        sizes[code] = len(script.content) + len(answer.content)
    print(f"widget.js and a catalogue, gzipped: {sizes}")
    assert set(sizes) == set(languages.WIDGET_LANGUAGES)
    assert max(sizes.values()) <= BUDGET
