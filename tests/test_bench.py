"""The benchmark runner's own code (bench/run.py, bench/service.py) on made-up
rows: what the table and the JSON say. No timing here: the goals are the
benchmark's (docs/performance.md), not the suite's."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from bench import run
from bench.service import Node, command_line, database_url, per_core, procfile

ROWS = [
    run.row("1 inbound", "A2 / A1", 0.52, "x", ">= 0.6"),
    run.row("1 inbound", "A2 p99", 120.456, "ms", "<= 150", reference=31.0),
    run.row("8 agent pages", "web CPU per agent", 2.25, "% core"),
    run.row("9 reports", "history search p95", math.nan, "ms", "<= 300"),
]


def test_a_row_says_whether_its_goal_is_met() -> None:
    assert [r["ok"] for r in ROWS] == [False, True, None, False]
    assert run.row("x", "y", 8, "", "<= 8")["ok"] is True
    assert run.row("x", "y", 9, "", "<= 8")["ok"] is False
    assert run.row("x", "y", 0, "", "== 0")["ok"] is True
    assert set(ROWS[1]) == set(run.COLUMNS)
    assert ROWS[1]["value"] == 120.456 and ROWS[1]["reference"] == 31.0


def test_the_table_shows_each_figure_beside_its_reference_and_goal() -> None:
    lines = run.table(ROWS).splitlines()

    assert [c.strip() for c in lines[0].strip("|").split("|")] == [
        "scenario", "figure", "value", "reference", "goal", "met",
    ]  # fmt: skip
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert cells == [
        ["1 inbound", "A2 / A1", "0.52 x", "", ">= 0.6 x", "NO"],
        ["1 inbound", "A2 p99", "120 ms", "31 ms", "<= 150 ms", "yes"],
        ["8 agent pages", "web CPU per agent", "2.25 % core", "", "", ""],
        ["9 reports", "history search p95", "n/a ms", "", "<= 300 ms", "NO"],
    ]
    assert len({len(line) for line in lines}) == 1  # the columns line up


def test_the_json_holds_the_rows_the_shape_and_the_machine(tmp_path: Path) -> None:
    shape = {"started": "2026-11-26T05:00:00+00:00", "seconds": 3, "quick": True, "scenarios": []}

    path = run.write(ROWS, shape, tmp_path)

    document = json.loads(path.read_text())
    assert path.name == "2026-11-26T050000+0000.json"
    assert (tmp_path / "latest.json").read_text() == path.read_text()
    assert document["quick"] is True and document["seconds"] == 3
    assert document["machine"]["cores"] >= 1
    assert document["rows"][1] == ROWS[1]
    assert math.isnan(document["rows"][3]["value"])


def test_the_runner_offers_the_scenario_modules_this_checkout_has() -> None:
    names = run.available()

    assert {"inbound", "reply_latency", "live_streams", "agent_pages", "reports"} <= set(names)
    assert names == [n for n in run.SCENARIOS if n in names]  # the order
    assert all((Path(run.__file__).parent / f"{name}.py").exists() for name in names)


def test_the_service_is_started_from_the_procfiles_lines() -> None:
    commands = procfile()

    assert commands["web"].startswith("gunicorn -c config/gunicorn.py config.asgi:application")
    assert "-Q delivery" in commands["delivery"] and "-Q default" in commands["worker"]


def test_a_node_pins_its_processes_and_names_its_celery_workers() -> None:
    commands = procfile()

    assert command_line("web", commands["web"]) == f"exec {commands['web']}"
    assert command_line("web", commands["web"], Node("node2", "1")) == (
        f"exec taskset -c 1 {commands['web']}"
    )
    assert command_line("delivery", commands["delivery"], Node("node2", "1")) == (
        f"exec taskset -c 1 {commands['delivery']} -n delivery.node2@%h"
    )
    assert command_line("worker", commands["worker"], Node("node1")).endswith(" -n worker.node1@%h")


def test_a_worker_run_once_per_core_has_a_celery_name_per_instance() -> None:
    commands = procfile()
    instances = per_core("delivery")

    assert len(instances) == (os.cpu_count() or 1) and instances[0] == "delivery.1"
    assert command_line("delivery.2", commands["delivery"]) == (
        f"exec {commands['delivery']} -n delivery.2@%h"
    )


def test_each_scenario_has_a_database_named_after_it() -> None:
    url = "postgres://u:p@db:5432/sw_bench?sslmode=disable"

    assert database_url(url, "inbound") == "postgres://u:p@db:5432/sw_bench_inbound?sslmode=disable"


def test_the_soak_judges_growth_after_the_warm_up_and_failures_by_kind() -> None:
    from bench.soak import judge

    def sample(rss: int, live: int, p99: float, failed: dict[str, int]) -> dict[str, object]:
        return {
            "rss": {"web": rss},
            "rows": {"agents_liveevent": live, "agents_message": live * 10},
            "p99": {"A2": p99},
            "failed": failed,
        }

    samples = [
        sample(50, 10, 900.0, {"A2 503": 1}),  # the warm-up: left out
        sample(100, 100, 40.0, {}),
        sample(105, 200, 50.0, {"A2 429": 2, "B2 500": 1}),
        sample(115, 210, 70.0, {}),
    ]
    rows = {r["figure"].split(" (")[0]: r for r in judge(samples, warm_up=1)}

    assert rows["web memory growth after warm-up"]["value"] == 15.0
    assert rows["web memory growth after warm-up"]["ok"] is False
    assert rows["agents_liveevent rows over the second half"]["value"] == 5.0  # 200 → 210
    assert rows["agents_message rows added over the second half"]["value"] == 100
    assert rows["A2 p99, last interval / first after warm-up"]["value"] == 70 / 40
    assert rows["A2 answers not 2xx"]["value"] == 3  # the warm-up's too
    assert rows["B2 answers not 2xx"]["value"] == 1
    assert rows["reply answers not 2xx"]["ok"] is True
