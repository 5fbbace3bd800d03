"""Durable create throughput: ``schedule_create`` vs APScheduler 3 ``add_job`` on SQLite.

Usage (from the repository root)::

    python -m bench.create_throughput [--creates 1000] [--rounds 5] [--quick]

In one process, alternating runs (ours, APScheduler, APScheduler, ours, ...):

* **ours**: sequential ``schedule_create`` calls through the real tool path of the
  embedded host (``host.tools.execute``: input checks, owner mailbox, preflight
  flush, append, barrier flush); a call returns only once its create is durable.
  Then ``schedule_list`` with every record active, then ``schedule_delete`` of each.
* **APScheduler**: a started ``BackgroundScheduler`` with ``SQLAlchemyJobStore``
  on SQLite in the same data directory; ``add_job(trigger="date")`` (durable on
  return while the scheduler runs), ``get_jobs()``, ``remove_job()``. Twice: with
  the job store's SQLite as SQLAlchemy opens it (``default``) and tuned like ours
  (``wal``: WAL, synchronous=FULL).
* the raw ``fsync`` rate of the data directory's disk and the rate of one thread
  inserting and committing one row at a time to an SQLite file there (WAL,
  ``synchronous=FULL``), before and after: a durable create needs one commit, so
  the second is the realistic ceiling, and our creates/s are given as a fraction
  of it (and of the limit that two fsyncs per create imply);
* per create (see :mod:`bench._counts`): voluntary context switches, flush
  requests and commits from the timed runs, and, from one extra untimed run
  under a profile hook, mailbox messages handled, futures made and condition
  notifications.

Prints two tables and writes ``bench/results/create_throughput.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import _aps
from bench._common import (
    add_common_arguments,
    data_root,
    distribution,
    fmt,
    header,
    machine_info,
    median,
    open_host,
    print_machine,
    print_per_op,
    print_table,
    quiet_logs,
    verdict,
    write_results,
)
from bench._counts import CallCounter, Counters
from bench.store_commit_rate import raw_fsync_rate, sqlite_commit_rate
from messages._tool_values import MAX_ACTIVE_SCHEDULES

NAME = "create_throughput"

TARGET_RATIO = 2.0
"""Our creates/s must be at least this multiple of APScheduler's durable adds/s."""

TARGET_FSYNC_FRACTION = 0.5
"""Our creates/s must be at least this fraction of (raw fsync rate / 2)."""

TARGET_SQLITE_FRACTION = 0.7
"""Our creates/s must be at least this fraction of one thread's SQLite insert+commit rate."""

TARGET_SWITCHES = 8.0
"""At most this many voluntary context switches per create (threading runtime)."""

COUNTED_CREATES = 200
"""Creates in the untimed run under the call-counting profile hook."""

AFTER_SECONDS = 3600
"""Reminders are an hour ahead: nothing comes due while measuring."""


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


class _Timer:
    """Wall and process-CPU time of a phase, and per-call latencies."""

    def __init__(self) -> None:
        self.latencies_ms: list[float] = []
        self.wall_s = 0.0
        self.cpu_s = 0.0

    def run(self, count: int, call: Callable[[int], object]) -> None:
        cpu0 = _cpu_seconds()
        start = time.perf_counter()
        for index in range(count):
            began = time.perf_counter()
            call(index)
            self.latencies_ms.append((time.perf_counter() - began) * 1000)
        self.wall_s = time.perf_counter() - start
        self.cpu_s = _cpu_seconds() - cpu0


def _summary(
    creates: _Timer,
    lists: _Timer,
    deletes: _Timer,
    count: int,
    per_create: dict[str, float | None] | None,
) -> dict[str, Any]:
    return {
        "creates": count,
        "creates_per_s": count / creates.wall_s,
        "create_latency": distribution(creates.latencies_ms),
        "create_cpu_us": creates.cpu_s / count * 1e6,
        "commits_per_create": None if per_create is None else per_create["commits"],
        "per_create": per_create,
        "list_ms_median": median(lists.latencies_ms),
        "listed": count,
        "deletes_per_s": count / deletes.wall_s,
        "delete_cpu_us": deletes.cpu_s / count * 1e6,
    }


def run_ours(root: Path, count: int, list_reps: int, runtime: str) -> dict[str, Any]:
    """One run of ours: ``count`` creates, ``list_reps`` lists, ``count`` deletes."""
    data = Path(tempfile.mkdtemp(prefix="ours-", dir=root))
    host = open_host(data, runtime)
    try:
        agent = host.spawn()
        ids: list[str] = []
        creates, lists, deletes = _Timer(), _Timer(), _Timer()
        counters = Counters(host.host.persistence)

        def create(index: int) -> None:
            ids.append(host.create(agent, f"reminder {index}", AFTER_SECONDS)["id"])

        creates.run(count, create)
        per_create = counters.stop().per(count)
        listed: list[int] = []
        lists.run(list_reps, lambda _: listed.append(len(host.list(agent)["schedules"])))
        if any(n != count for n in listed):
            raise RuntimeError(f"schedule_list returned {listed} records, expected {count}")
        deletes.run(count, lambda index: host.delete(agent, ids[index]))
    finally:
        host.close()
        shutil.rmtree(data, ignore_errors=True)
    config = f"embedded, {runtime} (WAL, synchronous=FULL)"
    return {"system": "ours", "config": config} | _summary(
        creates, lists, deletes, count, per_create
    )


def count_ours(root: Path, count: int, runtime: str) -> dict[str, float]:
    """Messages, futures and notifications per create, in an untimed run under a profile hook."""
    data = Path(tempfile.mkdtemp(prefix="counted-", dir=root))
    gevent_runtime = None
    if runtime == "gevent":
        from actors._runtime import get_runtime

        gevent_runtime = get_runtime("gevent")
    with CallCounter(gevent_runtime) as counter:
        host = open_host(data, runtime)
        try:
            agent = host.spawn()
            for index in range(10):  # warm-up: first drive, first fold, lazy imports
                host.create(agent, f"warm-up {index}", AFTER_SECONDS)
            counter.mark()
            for index in range(count):
                host.create(agent, f"reminder {index}", AFTER_SECONDS)
            counted = counter.since_mark()
        finally:
            host.close()
            shutil.rmtree(data, ignore_errors=True)
    return {key: value / count for key, value in counted.items()}


def run_apscheduler(root: Path, count: int, list_reps: int, config: str) -> dict[str, Any]:
    """One APScheduler run: ``count`` durable date jobs added, listed, removed."""
    data = Path(tempfile.mkdtemp(prefix=f"aps-{config}-", dir=root))
    aps = _aps.open_scheduler(data / "jobs.sqlite", config)
    try:
        scheduler = aps.scheduler
        when = _aps.run_date(int(time.time() * 1000) + AFTER_SECONDS * 1000)
        creates, lists, deletes = _Timer(), _Timer(), _Timer()

        def add(index: int) -> None:
            scheduler.add_job(
                _aps.reminder_job, trigger="date", run_date=when, args=[index], id=f"r{index}"
            )

        creates.run(count, add)
        listed: list[int] = []
        lists.run(list_reps, lambda _: listed.append(len(scheduler.get_jobs())))
        if any(n != count for n in listed):
            raise RuntimeError(f"get_jobs returned {listed} jobs, expected {count}")
        deletes.run(count, lambda index: scheduler.remove_job(f"r{index}"))
    finally:
        aps.close()
        shutil.rmtree(data, ignore_errors=True)
    return {
        "system": "apscheduler",
        "config": f"{config} ({_aps.describe(aps.pragmas)})",
        "pragmas": aps.pragmas,
    } | _summary(creates, lists, deletes, count, None)


def _median_per_create(runs: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """The median of each per-create count over the runs that have them."""
    counted = [run["per_create"] for run in runs if run.get("per_create")]
    if not counted:
        return None
    return {
        key: median([float(c[key]) for c in counted if c[key] is not None]) for key in counted[0]
    }


def _median_of(runs: Sequence[dict[str, Any]], key: str) -> float:
    return median([float(run[key]) for run in runs])


def _aggregate(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    first = runs[0]
    return {
        "system": first["system"],
        "config": first["config"],
        "runs": len(runs),
        "creates_per_s": _median_of(runs, "creates_per_s"),
        "creates_per_s_each_run": [run["creates_per_s"] for run in runs],
        "create_p50_ms": median([run["create_latency"]["p50_ms"] for run in runs]),
        "create_p99_ms": median([run["create_latency"]["p99_ms"] for run in runs]),
        "create_cpu_us": _median_of(runs, "create_cpu_us"),
        "commits_per_create": first["commits_per_create"],
        "per_create": _median_per_create(runs),
        "list_ms_median": _median_of(runs, "list_ms_median"),
        "deletes_per_s": _median_of(runs, "deletes_per_s"),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables, write the JSON; returns what it wrote."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--creates", type=int, default=1000, help="creates per run (default 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--list-reps", type=int, default=20, help="lists timed per run")
    parser.add_argument(
        "--fsync-seconds", type=float, default=2.0, help="fsync and SQLite probe duration"
    )
    parser.add_argument(
        "--counted",
        type=int,
        default=COUNTED_CREATES,
        help=f"creates in the untimed call-counting run (default {COUNTED_CREATES}; 0: skip)",
    )
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.creates, args.rounds, args.list_reps, args.fsync_seconds = 20, 1, 3, 0.2
        args.counted = 20
    if not 1 <= args.creates <= MAX_ACTIVE_SCHEDULES:
        parser.error(
            f"--creates must be in 1..{MAX_ACTIVE_SCHEDULES} (one session's active reminders)"
        )
    quiet_logs()
    skipped = "--no-apscheduler was given" if args.no_apscheduler else _aps.unavailable()
    if skipped:
        print(f"APScheduler runs skipped: {skipped}")
    configs = () if skipped else _aps.CONFIGS

    with data_root(args.data, "dsh-bench-create-") as root:
        info = machine_info(root)
        fsync_before = raw_fsync_rate(root, args.fsync_seconds)
        sqlite_before = sqlite_commit_rate(root, args.fsync_seconds)
        ours: list[dict[str, Any]] = []
        theirs: dict[str, list[dict[str, Any]]] = {config: [] for config in configs}
        for round_index in range(args.rounds):
            # Alternate who goes first so warm-up and drift do not favour one side.
            order = ["ours", *configs] if round_index % 2 == 0 else [*configs, "ours"]
            for who in order:
                if who == "ours":
                    ours.append(run_ours(root, args.creates, args.list_reps, args.runtime))
                else:
                    theirs[who].append(run_apscheduler(root, args.creates, args.list_reps, who))
        fsync_after = raw_fsync_rate(root, args.fsync_seconds)
        sqlite_after = sqlite_commit_rate(root, args.fsync_seconds)
        calls = count_ours(root, args.counted, args.runtime) if args.counted > 0 else None

    fsync_rate = (fsync_before + fsync_after) / 2
    two_fsync_limit = fsync_rate / 2
    summary = [_aggregate(ours)] + [_aggregate(runs) for runs in theirs.values()]
    our_rate = summary[0]["creates_per_s"]
    ratios = {
        config: our_rate / _aggregate(runs)["creates_per_s"] for config, runs in theirs.items()
    }
    fraction = our_rate / two_fsync_limit
    sqlite_rate = (sqlite_before + sqlite_after) / 2
    sqlite_fraction = our_rate / sqlite_rate
    per_create = dict(summary[0]["per_create"] or {}) | (calls or {})
    summary[0]["per_create"] = per_create
    switches = per_create.get("voluntary_switches")
    targets = {
        "fraction_of_sqlite_commit_rate": {
            "value": sqlite_fraction,
            "target": f">= {TARGET_SQLITE_FRACTION}",
            "met": sqlite_fraction >= TARGET_SQLITE_FRACTION,
        },
        "context_switches_per_create": {
            "value": switches,
            "target": f"<= {TARGET_SWITCHES} (threading runtime)",
            "met": None if switches is None else switches <= TARGET_SWITCHES,
        },
        "ratio_vs_apscheduler_default": {
            "value": ratios.get("default"),
            "target": f">= {TARGET_RATIO}",
            "met": None if "default" not in ratios else ratios["default"] >= TARGET_RATIO,
        },
        "ratio_vs_apscheduler_wal": {
            "value": ratios.get("wal"),
            "target": f">= {TARGET_RATIO} (same durability settings as ours; informative)",
            "met": None if "wal" not in ratios else ratios["wal"] >= TARGET_RATIO,
        },
        "fraction_of_two_fsync_limit": {
            "value": fraction,
            "target": f">= {TARGET_FSYNC_FRACTION}",
            "met": fraction >= TARGET_FSYNC_FRACTION,
        },
    }

    print_machine(info)
    print(
        f"{args.creates} sequential durable creates per run, median of {args.rounds} "
        f"alternating runs; list = one call with all {args.creates} active"
    )
    print_table(
        [
            "system",
            "creates/s",
            "p50 ms",
            "p99 ms",
            "CPU µs/create",
            "commits/create",
            "list ms",
            "deletes/s",
        ],
        [
            [
                f"{row['system']} {row['config']}",
                fmt(row["creates_per_s"]),
                fmt(row["create_p50_ms"], 2),
                fmt(row["create_p99_ms"], 2),
                fmt(row["create_cpu_us"]),
                fmt(row["commits_per_create"], 2),
                fmt(row["list_ms_median"], 2),
                fmt(row["deletes_per_s"]),
            ]
            for row in summary
        ],
    )
    print()
    print(
        f"raw fsync: {fmt(fsync_before)}/s before, {fmt(fsync_after)}/s after; "
        f"two-fsync limit {fmt(two_fsync_limit)} creates/s"
    )
    print(
        f"SQLite insert+commit, one thread: {fmt(sqlite_before)}/s before, "
        f"{fmt(sqlite_after)}/s after; ours = {sqlite_fraction:.0%} of it"
    )
    print_per_op("per create (ours)", per_create)
    print_table(
        ["target", "value", "goal", "verdict"],
        [
            [name, fmt(t["value"], 2), t["target"].split(" (")[0], verdict(t["met"])]
            for name, t in targets.items()
        ],
    )

    payload = header(NAME, argv) | {
        "machine": info,
        "parameters": {
            "creates": args.creates,
            "rounds": args.rounds,
            "list_reps": args.list_reps,
            "fsync_seconds": args.fsync_seconds,
            "after_seconds": AFTER_SECONDS,
            "runtime": args.runtime,
        },
        "apscheduler_skipped": skipped,
        "sqlite_commit": {
            "before_per_s": sqlite_before,
            "after_per_s": sqlite_after,
            "rate_per_s": sqlite_rate,
        },
        "fsync": {
            "before_per_s": fsync_before,
            "after_per_s": fsync_after,
            "rate_per_s": fsync_rate,
            "two_fsync_limit_creates_per_s": two_fsync_limit,
        },
        "summary": summary,
        "ratios": ratios,
        "targets": targets,
        "runs": {"ours": ours} | {f"apscheduler_{c}": runs for c, runs in theirs.items()},
    }
    name = NAME if args.runtime == "threading" else f"{NAME}_{args.runtime}"
    path = write_results(args.results, name, payload)
    print(f"\nresults: {path}")
    return payload


if __name__ == "__main__":
    main()
