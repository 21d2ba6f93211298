"""Installations sharing one Redis server do not hear each other's live
events: pub/sub ignores the database number, so the channel's name carries
the installation's database and Redis URL (docs/live.md)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from agents.live import channel_name


def _with_database(name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setitem(settings.DATABASES["default"], "NAME", name)
        return channel_name()


def test_two_installations_on_one_redis_server_use_two_channels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one, two = (_with_database(name, monkeypatch) for name in ("shop_one", "shop_two"))
    assert one != two
    assert one == _with_database("shop_one", monkeypatch)
    assert one.startswith("switchboard:live:")


def test_the_same_database_with_another_redis_database_is_another_channel() -> None:
    with override_settings(REDIS_URL="redis://127.0.0.1:6379/1"):
        first = channel_name()
    with override_settings(REDIS_URL="redis://127.0.0.1:6379/2"):
        assert channel_name() != first


def test_an_operator_may_name_the_channel() -> None:
    with override_settings(LIVE_REDIS_CHANNEL="acme:live"):
        assert channel_name() == "acme:live"
