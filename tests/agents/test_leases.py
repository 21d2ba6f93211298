"""Slots of open streams as expiring leases (agents/leases.py; docs/live.md,
"Limits"), in Redis when the run has one, else in the database: one renewal
reaches every slot it names, shared keys included, keeps them past their
lease, and takes none back that has lapsed."""

from __future__ import annotations

import time
import uuid

import pytest

from agents import leases

pytestmark = pytest.mark.django_db(transaction=True)

STREAMS = 300


def held(streams: list[str], run: str) -> list[tuple[str, str]]:
    """Each stream's two slots: its visitor's, and one address for all."""
    return [
        (key, holder)
        for n, holder in enumerate(streams)
        for key in (f"{run}-visitor:{n}", f"{run}-address")
    ]


@pytest.fixture
def run() -> str:
    """Keys of this test alone (Redis keeps what other tests took)."""
    return uuid.uuid4().hex


def test_one_renewal_reaches_every_slot_of_many_streams(run: str) -> None:
    streams = [f"stream-{n}" for n in range(STREAMS)]
    for n, holder in enumerate(streams):
        limits = {f"{run}-visitor:{n}": 1, f"{run}-address": STREAMS}
        assert leases.acquire(holder=holder, limits=limits, seconds=120)
    assert not leases.acquire(holder="another", limits={f"{run}-visitor:7": 1}, seconds=30)

    leases.renew(held=held(streams, run), seconds=1.0)  # shortened: each renewed slot lapses soon
    time.sleep(1.5)

    for n in range(STREAMS):
        assert leases.acquire(holder="another", limits={f"{run}-visitor:{n}": 1}, seconds=30)
    assert leases.acquire(holder="another", limits={f"{run}-address": STREAMS}, seconds=30)


def test_a_renewal_keeps_a_slot_past_its_lease(run: str) -> None:
    streams = ["kept-0", "kept-1"]
    for n, holder in enumerate(streams):
        limits = {f"{run}-visitor:{n}": 1, f"{run}-address": 2}
        assert leases.acquire(holder=holder, limits=limits, seconds=2.0)

    leases.renew(held=held(streams, run), seconds=30)
    time.sleep(2.5)

    assert not leases.acquire(holder="another", limits={f"{run}-visitor:1": 1}, seconds=30)
    assert not leases.acquire(holder="another", limits={f"{run}-address": 2}, seconds=30)


def test_a_lapsed_slot_is_not_taken_back_by_a_renewal(run: str) -> None:
    assert leases.acquire(holder="gone", limits={f"{run}-lapsed": 1}, seconds=0.5)
    time.sleep(1.0)

    leases.renew(held=[(f"{run}-lapsed", "gone")], seconds=30)

    assert leases.acquire(holder="next", limits={f"{run}-lapsed": 1}, seconds=30)
