"""The fault run (issue 29): 2,000 A2 messages (a tenth sent twice with
their ``Idempotency-Key``), 2,000 agent replies in 20 chats and 200 B2 bot
messages while the delivery worker is SIGKILLed and started again twice,
Redis is restarted once and PostgreSQL once (``fault_run.py`` says how).

Every A2 and B2 message is stored exactly once, every reply is stored once
and delivered at least once and in order per chat, no delivery is pending
once beat's sweep has run, and no answer is a 5xx but a 503 with the error
body while a dependency was down. The counts are printed (``-s``, or the
captured output of a failure).

The run has its own PostgreSQL cluster and redis-server on both runs of the
suite, the embedded default included: a PostgreSQL restart is what it is
about, and the suite's SQLite has no server to restart. ``make soak
SOAK_ARGS=--faults`` runs rounds of it for longer (bench/soak.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.fault_run import run

pytestmark = [pytest.mark.worker]


def test_the_fault_run_stores_each_message_once_and_delivers_each_reply_in_order(
    tmp_path: Path,
) -> None:
    counts = run(tmp_path)

    print("\nfault run:\n  " + "\n  ".join(counts.lines()))
    assert counts.stored == {"A2": 2000, "reply": 2000, "B2": 200}
    assert counts.resent == 200
    assert counts.delivered == 2000
    assert counts.pending_after_sweep == 0
    assert counts.faults == ["worker", "redis", "worker", "postgres"]
