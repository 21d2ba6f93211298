"""Running a coroutine from a test, whatever ran before it in the process.

Playwright's sync API (the browser tests' session-scoped ``chromium``) marks
an event loop as running in the main thread for the rest of the process, and
``asyncio.run`` refuses to start under a running loop. With the suite spread
over several processes (docs/testing.md) any test may follow a browser test
in its process, so a test that drives async code runs it here, on a thread
of its own, where no loop runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-asyncio") as pool:
        return pool.submit(asyncio.run, coroutine).result()
