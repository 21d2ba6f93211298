"""Many requests at one rate limit at once, from a process of their own.

    python -m tests.agents.ratelimit_load STORE KEY LIMIT WINDOW THREADS START_AT

Sets Django up, waits for the wall-clock time START_AT (so that several such
processes fire together), calls the limiter from THREADS threads at once and
prints how many were admitted.
"""

from __future__ import annotations

import os
import sys
import threading
import time


def main() -> None:
    store, key, limit, window, threads, start_at = sys.argv[1:7]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.db import connection

    from agents import ratelimit

    admit = {"redis": ratelimit.admit_in_redis, "database": ratelimit.admit_in_database}[store]
    admitted: list[bool] = []
    ready = threading.Barrier(int(threads))

    def one() -> None:
        ready.wait()
        try:
            admitted.append(admit(key=key, limit=int(limit), window=float(window)))
        finally:
            connection.close()

    workers = [threading.Thread(target=one) for _ in range(int(threads))]
    time.sleep(max(0.0, float(start_at) - time.time()))
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(sum(admitted), len(admitted))


if __name__ == "__main__":
    main()
