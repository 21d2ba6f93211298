"""The reports at volume (docs/reports.md, "Speed"): how long each report
request takes over a realistic history, beside a plain ``COUNT(*)`` of the
chats in its range.

Runs on PostgreSQL when DATABASE_URL names one (the goal is judged
there), in a database of its own beside it: DATABASE_URL's name with
``_reports`` added (kept when it ends so already), created when missing,
so the other benchmarks' chats never mix in. When that database holds no
chats it is migrated and seeded with ``seed_report_data``'s history (CHATS
chats over DAYS days, about two minutes at 100,000); when it holds the
seed's, they are reused as they are, so a second run starts at once. A
database with other chats is refused. Without DATABASE_URL a fresh SQLite
file is seeded at a smaller default scale.

Each request goes through the real API views (URL routing, token
authentication, DRF, JSON or CSV rendering) with Django's test client, in
this process: the report summary, agents (JSON and CSV) and hours, for the
last 7, 30 and 90 days, for all the viewer's channels and for one, as a
supervisor and as the admin, RUNS times each after a warm-up. Beside each,
the same range's ``COUNT(*)`` of chats is timed as the reference. Prints
p50/p95 per endpoint and range, the reference's, and their ratio; exits 1
when a p95 is over the goal.

    DATABASE_URL=postgres://…/sw_bench .venv/bin/python bench/reports.py \\
        [--chats 100000] [--days 90] [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.chat_api_inbound import manage  # noqa: E402

GOAL_P95 = 0.5  # seconds, every report request (issue 25)
RANGES = (7, 30, 90)
ENDPOINTS = (
    ("summary", "summary", ""),
    ("agents", "agents", ""),
    ("agents.csv", "agents", "csv"),
    ("hours", "hours", ""),
)


def p50_p95(values: list[float]) -> tuple[float, float]:
    """The median and the 95th percentile by the nearest rank (a time some run took)."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[max(1, -(-95 * len(ordered) // 100)) - 1]


def own_database(url: str) -> str:
    """DATABASE_URL's server, the database ``<name>_reports`` (created when
    missing); a name with ``_reports`` in it already is kept."""
    import psycopg
    from psycopg import sql

    base, _, name = url.rpartition("/")
    name, _, options = name.partition("?")
    own = name if "_reports" in name else f"{name}_reports"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as server:
        if not server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [own]).fetchone():
            server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(own)))
    return f"{base}/{own}" + (f"?{options}" if options else "")


def world(chats: int, days: int, env: dict[str, str]) -> dict[str, Any]:
    """The seeded history (made now if the database has no chat); the viewers' keys."""
    manage(env, "migrate", "--noinput")
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from agents import reportdata, selectors
    from agents.models import Agent, Chat
    from agents.tokens import issue_token

    held = Chat.objects.count()
    if held and not Agent.objects.filter(email="report-admin@example.com").exists():
        sys.exit("the database holds chats seed_report_data did not make: give it one of its own")
    if held:
        print(f"  reusing the {held} chats the database holds (an empty database is seeded)")
    else:
        started = time.monotonic()
        made = reportdata.seed(chats=chats, days=days)
        print(f"  seeded {made['chats']} chats, {made['messages']} messages over {days} days "
              f"in {time.monotonic() - started:.0f} s")  # fmt: skip
    viewers = {}
    for role, email in (("supervisor", "report-supervisor-1@example.com"),
                        ("admin", "report-admin@example.com")):  # fmt: skip
        agent = Agent.objects.get(email=email)
        channel = selectors.visible_channels(agent).order_by("pk").first()
        assert channel is not None
        viewers[role] = (issue_token(agent=agent), channel.public_id, agent)
    last = Chat.objects.order_by("-created").values_list("created", flat=True).first()
    assert last is not None
    return {"viewers": viewers, "last_day": last.date(), "chats": Chat.objects.count()}


def measure(seeded: dict[str, Any], runs: int) -> dict[tuple[str, int], dict[str, list[float]]]:
    """Each endpoint's and the reference's times by (endpoint, days), over
    the viewers and the channel filter: {"all": […], "one": […], "count": […]}."""
    from django.test import Client

    from agents import reports
    from agents.models import Chat

    times: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    browser = Client()
    for days in RANGES:
        first = seeded["last_day"] - timedelta(days=days - 1)
        for _, (key, channel, agent) in seeded["viewers"].items():
            for scope in ("all", "one"):
                params = {"from": first.isoformat(), "to": seeded["last_day"].isoformat()}
                if scope == "one":
                    params["channel"] = channel
                query = reports.query_from(viewer=agent, params=params)
                for name, path, form in ENDPOINTS:
                    url = f"/api/agent/v1/reports/{path}"
                    asked = {**params, **({"format": form} if form else {})}
                    for run in range(runs + 1):  # the first is the warm-up
                        began = time.perf_counter()
                        answer = browser.get(url, asked, HTTP_AUTHORIZATION=f"Token {key}")
                        took = time.perf_counter() - began
                        assert answer.status_code == 200, answer.content[:300]
                        began = time.perf_counter()
                        Chat.objects.filter(
                            channel_id__in=query.channel_ids,
                            created__gte=query.start,
                            created__lt=query.end,
                        ).count()
                        counted = time.perf_counter() - began
                        if run:
                            times[(name, days)][scope].append(took)
                            times[(name, days)]["count"].append(counted)
    return times


def report(times: dict[tuple[str, int], dict[str, list[float]]]) -> bool:
    """Print the table; whether every p95 met the goal."""
    print(f"  {'endpoint':12} {'days':>4}   {'all channels p50/p95':>21}   "
          f"{'one channel p50/p95':>20}   {'COUNT(*) p50/p95':>17}   p95 ratio")  # fmt: skip
    worst = 0.0
    for (name, days), figures in times.items():
        every, one, count = (p50_p95(figures[k]) for k in ("all", "one", "count"))
        p95 = max(every[1], one[1])
        worst = max(worst, p95)
        print(f"  {name:12} {days:>4}   {every[0] * 1000:>10.0f} / {every[1] * 1000:>6.0f} ms"
              f"   {one[0] * 1000:>9.0f} / {one[1] * 1000:>6.0f} ms"
              f"   {count[0] * 1000:>6.1f} / {count[1] * 1000:>5.1f} ms"
              f"   {p95 / count[1]:>8.0f}x")  # fmt: skip
    met = worst <= GOAL_P95
    print(f"  slowest p95 {worst * 1000:.0f} ms: the goal (<= {GOAL_P95 * 1000:.0f} ms) is "
          f"{'met' if met else 'NOT met'}")  # fmt: skip
    return met


SEARCHES = ("anyone there", "Client 4217", "agent", "no-such-words")
GOAL_SEARCH_P95 = 0.3  # seconds, the history search (issue 28)


def searches(seeded: dict[str, Any], runs: int) -> dict[str, list[float]]:
    """The agent's history page (agents/urls.py ``history``) searched for
    SEARCHES, as the admin, ``runs`` times after a warm-up; beside it the
    page without a search: {"search": […], "plain": […]} seconds."""
    from django.test import Client

    times: dict[str, list[float]] = defaultdict(list)
    for _, (_, _, agent) in list(seeded["viewers"].items())[-1:]:  # the admin: every channel
        browser = Client()
        browser.force_login(agent)
        for kind, params in [("plain", {})] + [("search", {"q": q}) for q in SEARCHES]:
            for run in range(runs + 1):
                began = time.perf_counter()
                answer = browser.get("/agent/history/", params)
                took = time.perf_counter() - began
                assert answer.status_code == 200, answer.content[:300]
                if run:
                    times[kind].append(took)
    return times


def scenario(quick: bool = False) -> list[dict[str, Any]]:
    """Scenario 9 of `make bench` (bench/run.py): the reports and the history
    search over 100,000 chats (quick: 10,000). On PostgreSQL the history is
    seeded once into ``<DATABASE_URL's name>_reports_<chats>`` and kept
    (seeding 100,000 chats, about a million messages, takes minutes); on
    SQLite 10,000 chats are seeded into a fresh file each run."""
    from bench.run import row, say
    from bench.service import database_url

    postgres = bool(os.environ.get("DATABASE_URL"))
    chats = 10_000 if quick or not postgres else 100_000
    runs = 1 if quick else 2
    name = "9 reports"
    with tempfile.TemporaryDirectory() as var:
        env = {**os.environ, "VAR_DIR": var, "LOG_LEVEL": "WARNING"}
        if postgres:
            env["DATABASE_URL"] = own_database(
                database_url(env["DATABASE_URL"], f"reports_{chats}")
            )
        say(f"the history of {chats} chats (seeded when the database has none)")
        seeded = world(chats, 90, env)
        say("report requests")
        times = measure(seeded, runs)
        say("history searches")
        found = searches(seeded, runs)
    from agents.models import Message

    shape = f"{seeded['chats']} chats, {Message.objects.count()} messages"
    rows = []
    for endpoint, _, _ in ENDPOINTS:
        cells = [figures for (e, _), figures in times.items() if e == endpoint]
        p95 = max(p50_p95(c[scope])[1] for c in cells for scope in ("all", "one"))
        count = max(p50_p95(c["count"])[1] for c in cells)
        figure = f"report {endpoint} p95 (slowest range; ref. COUNT(*))"
        goal = f"<= {GOAL_P95 * 1000:.0f}"
        rows.append(row(name, figure, p95 * 1000, "ms", goal, reference=count * 1000))
    rows.append(row(name, f"history search p95 ({shape})", p50_p95(found["search"])[1] * 1000,
                    "ms", f"<= {GOAL_SEARCH_P95 * 1000:.0f}",
                    reference=p50_p95(found["plain"])[1] * 1000))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chats", type=int, help="to seed: 100,000 (SQLite: 10,000)")
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--runs", type=int, default=10, help="per endpoint, range, scope, viewer")
    args = parser.parse_args()
    postgres = "DATABASE_URL" in os.environ
    chats = args.chats or (100_000 if postgres else 10_000)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as var:
        env = {**os.environ, "VAR_DIR": var, "LOG_LEVEL": "WARNING"}
        if postgres:
            env["DATABASE_URL"] = own_database(env["DATABASE_URL"])
        where = f"PostgreSQL {env['DATABASE_URL'].rpartition('/')[2]}" if postgres else "SQLite"
        print(f"Reports at volume: {where}, "
              f"{os.cpu_count()} cores, {args.runs} runs x 2 viewers per cell")  # fmt: skip
        seeded = world(chats, args.days, env)
        print(f"  {seeded['chats']} chats, ranges ending {seeded['last_day']} (UTC)")
        met = report(measure(seeded, args.runs))
        print(json.dumps({"took_seconds": round(time.monotonic() - started)}))
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
