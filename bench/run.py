"""`make bench`: every scenario of the performance issue in one run, one table.

Each scenario is a module of ``bench/`` with ``scenario(quick: bool = False)
-> list[dict]``; each row says what was measured and beside what:

    {"scenario": "1 inbound", "figure": "A2 / A1", "value": 0.52, "unit": "x",
     "reference": None, "goal": ">= 0.6", "ok": False}

``reference`` is the figure it is judged against, measured in the same run
(A1 beside A2, a direct POST beside a delivery), or None. Each scenario runs
in a process of its own (its own Django settings and database) and starts the
service as production does (bench/service.py). The table is printed at the
end and written, with the machine and the run's shape, to
``bench/results/<UTC time>.json`` and ``bench/results/latest.json``.

    .venv/bin/python -m bench [--quick] [--only inbound] [--only reports ...]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
# In the order; a module missing from this checkout is left out.
SCENARIOS = (
    "inbound",
    "reply_latency",
    "outbound",
    "delivery_isolation",
    "live_streams",
    "scale_out",
    "agent_pages",
    "reports",
)
COLUMNS = ("scenario", "figure", "value", "unit", "reference", "goal", "ok")


def row(
    scenario: str,
    figure: str,
    value: float,
    unit: str,
    goal: str = "",
    reference: float | None = None,
) -> dict[str, Any]:
    """One row; ``goal`` as ``"<= 150"`` or ``">= 0.6"`` (in ``unit``), or empty
    for a figure shown without one (``ok`` is then None)."""
    return {
        "scenario": scenario,
        "figure": figure,
        "value": float(value),
        "unit": unit,
        "reference": None if reference is None else float(reference),
        "goal": goal,
        "ok": meets(value, goal),
    }


_BEGAN = time.monotonic()


def say(text: str) -> None:
    """A line of progress, with the seconds since the scenario's process began."""
    print(f"   {time.monotonic() - _BEGAN:6.1f} s  {text}", file=sys.stderr, flush=True)


def meets(value: float, goal: str) -> bool | None:
    if not goal:
        return None
    if math.isnan(value):
        return False
    sign, _, bound = goal.partition(" ")
    compare: dict[str, Callable[[float, float], bool]] = {
        "<=": lambda a, b: a <= b,
        ">=": lambda a, b: a >= b,
        "==": lambda a, b: a == b,
    }
    return compare[sign](value, float(bound))


def available() -> list[str]:
    return [name for name in SCENARIOS if importlib.util.find_spec(f"bench.{name}") is not None]


def number(value: float | None) -> str:
    if value is None:
        return ""
    if math.isnan(value):
        return "n/a"
    if value == int(value) and abs(value) < 1e9:
        return f"{value:.0f}"
    return (
        f"{value:.3g}"
        if abs(value) < 10
        else f"{value:.1f}"
        if abs(value) < 100
        else f"{value:.0f}"
    )


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (readable in a terminal and in docs/)."""
    head = ("scenario", "figure", "value", "reference", "goal", "met")
    cells = [
        (
            r["scenario"],
            r["figure"],
            f"{number(r['value'])} {r['unit']}".strip(),
            f"{number(r['reference'])} {r['unit']}".strip() if r["reference"] is not None else "",
            f"{r['goal']} {r['unit']}".strip() if r["goal"] else "",
            {True: "yes", False: "NO", None: ""}[r["ok"]],
        )
        for r in rows
    ]
    widths = [max(len(str(c)) for c in column) for column in zip(head, *cells, strict=True)]
    lines = [head, tuple("-" * w for w in widths), *cells]
    return "\n".join(
        "| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) + " |"
        for line in lines
    )


def machine() -> dict[str, Any]:
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "database": "PostgreSQL" if os.environ.get("DATABASE_URL") else "SQLite",
        "redis": bool(os.environ.get("REDIS_URL")),
    }


def write(rows: list[dict[str, Any]], shape: dict[str, Any], folder: Path = RESULTS) -> Path:
    """The run as JSON: ``<UTC time>.json`` and a copy as ``latest.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    document = json.dumps({**shape, "machine": machine(), "rows": rows}, indent=2)
    path = folder / f"{shape['started'].replace(':', '')}.json"
    path.write_text(document)
    (folder / "latest.json").write_text(document)
    return path


def run_one(name: str, quick: bool) -> list[dict[str, Any]]:
    """``bench.<name>.scenario(quick)`` in a process of its own; a failure
    becomes one row that says so."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, "-m", "bench.run", "--child", name, "--out", out.name]
        done = subprocess.run(command + (["--quick"] if quick else []), cwd=ROOT)
        text = Path(out.name).read_text()
    if done.returncode or not text:
        return [row(name, f"failed (exit {done.returncode}): see above", math.nan, "", "== 0")]
    rows: list[dict[str, Any]] = json.loads(text)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (small sizes)")
    parser.add_argument("--only", action="append", choices=available(), help="this scenario")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        # Stopped from outside: stop the service it started too (Service.stop).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        rows = importlib.import_module(f"bench.{args.child}").scenario(quick=args.quick)
        Path(args.out).write_text(json.dumps(rows))
        return
    started, clock = datetime.now(UTC), time.monotonic()
    names = args.only or available()
    rows = []
    for name in names:
        print(f"== {name}", flush=True)
        began = time.monotonic()
        rows += run_one(name, args.quick)
        print(f"   {time.monotonic() - began:.0f} s", flush=True)
    shape = {
        "started": started.isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - clock),
        "quick": args.quick,
        "scenarios": names,
    }
    path = write(rows, shape)
    print(table(rows))
    print(f"{len(rows)} figures in {shape['seconds']} s; written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
