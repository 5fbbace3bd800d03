"""Group commit: aggregate confirmed creates per second with 1, 10 and 100 agents at once.

Usage (from the repository root)::

    python -m bench.group_commit [--agents 1,10,100] [--seconds 3] [--rounds 2] [--quick]
    python -m bench.group_commit --store postgresql://user@127.0.0.1:5432/db  # PostgreSQL

Each measurement starts a fresh embedded host, spawns N root agents and starts N
threads at once, each calling ``schedule_create`` for its own agent through the
real tool path (a call returns once its create is durable) until the agents
have made ``--creates`` creates between them (1000 by default: one agent may
hold at most 1000 active reminders). The rate is those creates over the time
from the start to the last confirmation. Levels run in alternating order (1, 10,
100, then 100, 10, 1, ...) and the median per level is reported, with SQLite
commits per create (group commit folds concurrent barriers into one commit) and
the ratio to the single-agent rate. Beside them, in the same run: one thread
inserting and committing one row at a time to an SQLite file in the same
directory (WAL, ``synchronous=FULL``; before and after), the ceiling of a single
writer that needs one commit per operation, and each level's rate as a multiple
of it. Per create: voluntary context switches, flush requests and commits.

``--emulate-commit-ms X`` adds X ms to every SQLite commit of the store (through
its ``fault_hook`` test seam, inside the write transaction, before ``COMMIT``),
emulating a disk whose fsync is that much slower; it is off by default and its
results are labelled as emulated.

``--store URL`` runs the hosts on that store instead of a fresh SQLite file
(a ``postgresql://`` URL: every measurement uses new session ids in the same
database); the results file is then ``group_commit_postgresql.json``.

Prints a table and writes ``bench/results/group_commit.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._common import (
    PER_OP_LABELS,
    BenchError,
    add_common_arguments,
    data_root,
    distribution,
    fmt,
    header,
    machine_info,
    median,
    open_host,
    print_machine,
    print_table,
    verdict,
    write_results,
)
from bench._counts import Counters
from bench.store_commit_rate import sqlite_commit_rate

NAME = "group_commit"

TARGET_SCALE = 5.0
"""Aggregate creates/s with the most agents must be at least this multiple of one agent's."""

TARGET_SQLITE_MULTIPLE = 2.0
"""Aggregate creates/s with the most agents must be this multiple of one SQLite writer's rate."""

AFTER_SECONDS = 3600


def measure(
    root: Path,
    agents: int,
    total: int,
    commit_delay_ms: float,
    runtime: str,
    *,
    store_url: str | None = None,
) -> dict[str, Any]:
    """N agents creating ``total`` reminders between them, all at once; the aggregate rate."""
    data = Path(tempfile.mkdtemp(prefix=f"agents-{agents}-", dir=root))
    host = open_host(data, runtime, store_url)
    try:
        store = host.host.persistence
        if store is None:
            raise BenchError("the embedded host has no durable store")
        if commit_delay_ms > 0:
            delay = commit_delay_ms / 1000
            store.fault_hook = lambda: time.sleep(delay)  # emulate a slower fsync
        spawned = [host.spawn() for _ in range(agents)]
        quota = [total // agents + (1 if i < total % agents else 0) for i in range(agents)]
        start_line = threading.Barrier(agents + 1)
        latencies: list[list[float]] = [[] for _ in range(agents)]
        finished_at = [0.0] * agents
        errors: list[BaseException] = []

        def worker(index: int) -> None:
            agent = spawned[index]
            mine = latencies[index]
            start_line.wait()
            try:
                for number in range(quota[index]):
                    began = time.perf_counter()
                    host.create(agent, f"reminder {number}", AFTER_SECONDS)
                    mine.append(time.perf_counter() - began)
            except BaseException as error:
                errors.append(error)
            finished_at[index] = time.perf_counter()

        threads = [
            threading.Thread(target=worker, args=(i,), name=f"bench-caller-{i}", daemon=True)
            for i in range(agents)
        ]
        for thread in threads:
            thread.start()
        commits0, cpu0 = store.commit_count, _cpu_seconds()
        counters = Counters(store)
        start_line.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join(timeout=600)
        commits, cpu = store.commit_count - commits0, _cpu_seconds() - cpu0
        counts = counters.stop()
        if errors:
            raise BenchError(f"a create failed: {errors[0]}")
    finally:
        host.close()
        shutil.rmtree(data, ignore_errors=True)
    elapsed = max(finished_at) - started
    every = [latency * 1000 for per_agent in latencies for latency in per_agent]
    return {
        "agents": agents,
        "creates": len(every),
        "seconds": elapsed,
        "creates_per_s": len(every) / elapsed,
        "commits_per_create": commits / len(every) if every else None,
        "cpu_us_per_create": cpu / len(every) * 1e6 if every else None,
        "per_create": counts.per(len(every)) if every else None,
        "latency": distribution(every),
    }


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write the JSON; returns what it wrote."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--agents", default="1,10,100", help="comma-separated agent counts (default 1,10,100)"
    )
    parser.add_argument(
        "--creates",
        type=int,
        default=1000,
        help="creates per measurement, shared by the agents (default 1000; at most "
        "1000 per agent, the per-session cap of active reminders)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument(
        "--emulate-commit-ms",
        type=float,
        default=0.0,
        help="add this many ms to every SQLite commit (emulates a slower disk; default 0)",
    )
    parser.add_argument(
        "--store",
        default=None,
        metavar="URL",
        help="run on this store (a postgresql:// URL) instead of a fresh SQLite file",
    )
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    levels = [int(part) for part in args.agents.split(",") if part.strip()]
    if args.quick:
        levels = list(dict.fromkeys(min(level, 3) for level in levels))
        args.creates, args.rounds = 30, 1

    probe_s = 0.2 if args.quick else 2.0
    with data_root(args.data, "dsh-bench-group-") as root:
        info = machine_info(root)
        sqlite_before = sqlite_commit_rate(root, probe_s)
        runs: dict[int, list[dict[str, Any]]] = {level: [] for level in levels}
        for round_index in range(args.rounds):
            order = levels if round_index % 2 == 0 else list(reversed(levels))
            for level in order:
                runs[level].append(
                    measure(
                        root,
                        level,
                        args.creates,
                        args.emulate_commit_ms,
                        args.runtime,
                        store_url=args.store,
                    )
                )
        sqlite_after = sqlite_commit_rate(root, probe_s)
    sqlite_rate = (sqlite_before + sqlite_after) / 2

    summary: list[dict[str, Any]] = []
    for level in levels:
        level_runs = runs[level]
        summary.append(
            {
                "agents": level,
                "creates_per_s": median([r["creates_per_s"] for r in level_runs]),
                "creates_per_s_each_run": [r["creates_per_s"] for r in level_runs],
                "commits_per_create": median(
                    [r["commits_per_create"] for r in level_runs if r["commits_per_create"]]
                ),
                "cpu_us_per_create": median(
                    [r["cpu_us_per_create"] for r in level_runs if r["cpu_us_per_create"]]
                ),
                "p50_ms": median([r["latency"]["p50_ms"] for r in level_runs]),
                "p99_ms": median([r["latency"]["p99_ms"] for r in level_runs]),
                "per_create": {
                    key: median([r["per_create"][key] for r in level_runs if r["per_create"]])
                    for key in ("voluntary_switches", "flush_requests", "commits")
                },
            }
        )
    base = summary[0]["creates_per_s"] if summary else float("nan")
    for row in summary:
        row["scale_vs_first"] = row["creates_per_s"] / base
        row["x_sqlite_writer"] = row["creates_per_s"] / sqlite_rate
    top = summary[-1] if summary else None
    scale = None if top is None or len(summary) < 2 else top["scale_vs_first"]
    target: dict[str, Any] = {
        "value": scale,
        "target": f">= {TARGET_SCALE}x ({levels[-1]} agents vs {levels[0]})" if levels else "",
        "met": None if scale is None else scale >= TARGET_SCALE,
    }
    multiple = None if top is None else top["x_sqlite_writer"]
    sqlite_target: dict[str, Any] = {
        "value": multiple,
        "target": f">= {TARGET_SQLITE_MULTIPLE}x one SQLite writer ({levels[-1]} agents)"
        if levels
        else "",
        "met": None if multiple is None or args.store else multiple >= TARGET_SQLITE_MULTIPLE,
    }

    print_machine(info)
    emulated = args.emulate_commit_ms > 0
    print(
        f"{args.creates} durable creates shared by N concurrent agents, median of "
        f"{args.rounds} alternating rounds, {args.runtime} runtime, "
        f"store: {'PostgreSQL' if args.store else 'SQLite'}"
        + (f"; EMULATED +{args.emulate_commit_ms:g} ms per commit" if emulated else "")
    )
    switches_label = PER_OP_LABELS["voluntary_switches"].split(" (")[0]
    print_table(
        [
            "agents",
            "creates/s",
            "x 1 agent",
            "x SQLite writer",
            "commits/create",
            "CPU µs/create",
            f"{switches_label}/create",
            "flushes/create",
            "p50 ms",
            "p99 ms",
        ],
        [
            [
                fmt(row["agents"]),
                fmt(row["creates_per_s"]),
                fmt(row["scale_vs_first"], 2),
                fmt(row["x_sqlite_writer"], 2),
                fmt(row["commits_per_create"], 3),
                fmt(row["cpu_us_per_create"]),
                fmt(row["per_create"]["voluntary_switches"], 1),
                fmt(row["per_create"]["flush_requests"], 2),
                fmt(row["p50_ms"], 2),
                fmt(row["p99_ms"], 2),
            ]
            for row in summary
        ],
    )
    print(
        f"SQLite insert+commit, one thread, same directory: {fmt(sqlite_before)}/s before, "
        f"{fmt(sqlite_after)}/s after"
    )
    print(f"target: {target['target']}: {fmt(scale, 2)} -> {verdict(target['met'])}")
    print(
        f"target: {sqlite_target['target']}: {fmt(multiple, 2)} -> {verdict(sqlite_target['met'])}"
    )

    name = NAME if args.runtime == "threading" else f"{NAME}_{args.runtime}"
    if args.store:
        name = f"{name}_postgresql"
    if emulated:
        name = f"{name}_emulated_{args.emulate_commit_ms:g}ms"
    payload = header(NAME, argv) | {
        "machine": info,
        "parameters": {
            "agents": levels,
            "creates": args.creates,
            "rounds": args.rounds,
            "emulate_commit_ms": args.emulate_commit_ms,
            "runtime": args.runtime,
            "store": "postgresql" if args.store else "sqlite",
        },
        "sqlite_commit": {
            "before_per_s": sqlite_before,
            "after_per_s": sqlite_after,
            "rate_per_s": sqlite_rate,
        },
        "summary": summary,
        "targets": {"scale_most_vs_one_agent": target, "x_sqlite_writer": sqlite_target},
        "runs": {str(level): level_runs for level, level_runs in runs.items()},
    }
    path = write_results(args.results, name, payload)
    print(f"\nresults: {path}")
    return payload


if __name__ == "__main__":
    main()
