"""Fixtures of the fault tests: a redis-server of their own, a local HTTP target."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.delivery.target import Target
from tests.reliability.redis_server import RedisServer


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server this test may stop and start (whatever REDIS_URL says)."""
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture
def target() -> Iterator[Target]:
    """A real HTTP server on 127.0.0.1 (an integrator's endpoint)."""
    server = Target("127.0.0.1").start()
    yield server
    server.stop()
