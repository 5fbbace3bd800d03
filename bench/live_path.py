"""The live path against its floor: durable creates and a burst of deliveries, in one run.

Usage (from the repository root)::

    python -m bench.live_path [--creates 900] [--burst 1000] [--rounds 2] [--quick]

Measured in one process, the anchors before the rounds and again after them:

* **floor**: one thread doing the bare durable write a create needs: msgpack
  encode of a create record, ``INSERT`` of one event row and ``COMMIT`` on a
  fresh SQLite file in the same directory with the store's settings (WAL,
  ``synchronous=FULL``): CPU per write and writes per second (the one-thread
  commit loop).
* **create, 1 agent**: sequential ``schedule_create`` calls of one root agent
  through the embedded host's real tool path (a call returns once its create is
  durable), on the threading and the gevent runtime: CPU per create (user +
  system, whole process), creates per second, voluntary context switches per
  create. Ratios: CPU ÷ floor CPU, creates/s ÷ the commit loop.
* **create, 100 agents**: the same number of creates from 100 threads, one
  agent each; creates/s ÷ one agent's.
* **delivery burst**: ``--burst`` ``at`` reminders over ``--agents`` agents, all
  due in the same millisecond; CPU from just before it until every reminder
  reached its agent and every owner is quiet, per delivery, and of it the store's
  writer thread (its commits, the due index and the flush callbacks it runs), and
  the lateness of each delivery (its ``followup`` call minus the due instant;
  never negative).

Rounds alternate the runtimes (threading, gevent, gevent, threading, ...); the
load average is printed beside each row. Prints a table and writes
``bench/results/live_path.json``. Figures are for the record, never assertions.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgpack

from bench._common import (
    TOOL_TIMEOUT_S,
    BenchError,
    Host,
    add_common_arguments,
    data_root,
    distribution,
    fmt,
    header,
    load_average,
    machine_info,
    median,
    open_host,
    print_machine,
    print_table,
    verdict,
    write_results,
)
from bench.delivery_precision import _Followups, _target_ms
from messages import format_instant

NAME = "live_path"

RECORD: dict[str, Any] = {
    "version": 1,
    "operation": "create",
    "schedule": {
        "id": "schedule-1",
        "kind": "after",
        "prompt": "stretch your legs",
        "scheduledAt": "2026-11-29T20:31:00.000Z",
    },
}
"""A create record of the size a create stores."""

MAX_CREATES_PER_AGENT = 950
"""A session holds at most 1,000 active reminders; the warm-up takes 20 of them."""

WRITER_THREAD = "dsh-store-writer"
"""The SQLite store's writer thread: it commits, keeps the due index and settles flushes."""

BURST_LEAD_MS = 3000
"""How far after the last burst create the common due instant lies, at least."""


def _cpu() -> float:
    return time.process_time()  # user + system of every thread, at nanosecond resolution


def _switches() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


def _thread_cpu(name: str) -> float | None:
    """CPU seconds of the live thread called ``name`` so far (None: no such thread here)."""
    for thread in threading.enumerate():
        if thread.name == name and thread.ident is not None:
            try:
                return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except (AttributeError, OSError):  # not on this platform
                return None
    return None


def _load1() -> float:
    load = load_average()
    return float("nan") if load is None else load[0]


def floor(directory: Path, writes: int) -> dict[str, float]:
    """The bare durable write (encode + INSERT + COMMIT), one thread: CPU, rate, switches."""
    path = Path(tempfile.mkdtemp(prefix="floor-", dir=directory)) / "floor.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(
            "CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, time INTEGER, "
            "data BLOB, PRIMARY KEY(session_id, seq)) WITHOUT ROWID"
        )
        switches0, cpu0, wall0 = _switches(), _cpu(), time.perf_counter()
        for seq in range(writes):
            data = msgpack.packb(RECORD)
            conn.execute("BEGIN")
            conn.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                ("floor", seq, "schedule/change", time.time_ns() // 1_000_000, data),
            )
            conn.execute("COMMIT")
        wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
        switches = _switches() - switches0
    finally:
        conn.close()
        shutil.rmtree(path.parent, ignore_errors=True)
    return {
        "cpu_us": cpu / writes * 1e6,
        "per_s": writes / wall,
        "switches": switches / writes,
        "load": _load1(),
    }


def _creates(host: Host, agents: int, creates: int) -> dict[str, float]:
    spawned = [host.spawn() for _ in range(agents)]
    each = max(1, creates // agents)
    errors: list[BaseException] = []

    def run(agent: Any, count: int) -> None:
        try:
            for index in range(count):
                host.create(agent, f"stretch {index}", 3600 + index)
        except BaseException as error:  # reported below; a bench never hides a failure
            errors.append(error)

    run(spawned[0], 20)  # warm-up: the first creates pay for imports and caches
    threads = [threading.Thread(target=run, args=(agent, each)) for agent in spawned]
    switches0, cpu0, wall0 = _switches(), _cpu(), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall, cpu, switches = time.perf_counter() - wall0, _cpu() - cpu0, _switches() - switches0
    if errors:
        raise BenchError(f"a create failed: {errors[0]}")
    done = each * agents
    return {
        "cpu_us": cpu / done * 1e6,
        "per_s": done / wall,
        "switches": switches / done,
        "load": _load1(),
    }


def create_run(root: Path, runtime: str, agents: int, creates: int) -> dict[str, float]:
    """``creates`` durable creates from ``agents`` agents on a fresh host."""
    data = Path(tempfile.mkdtemp(prefix=f"create-{runtime}-", dir=root))
    host = open_host(data, runtime)
    try:
        return _creates(host, agents, creates)
    finally:
        host.close()
        shutil.rmtree(data, ignore_errors=True)


def _answer(turn: Any) -> str:
    return "Noted."


def burst_run(root: Path, runtime: str, agents: int, reminders: int) -> dict[str, Any]:
    """``reminders`` ``at`` reminders over ``agents`` agents, due in one millisecond."""
    data = Path(tempfile.mkdtemp(prefix=f"burst-{runtime}-", dir=root))
    host = open_host(data, runtime)
    followups = _Followups(reminders)
    try:
        spawned = [host.spawn(model=_answer) for _ in range(agents)]
        for agent in spawned:
            followups.watch(agent)
        # Creating takes 1-3 ms each; the due instant lies well after the last.
        due_ms = time.time_ns() // 1_000_000 + BURST_LEAD_MS + reminders * 6
        at = format_instant(due_ms)
        for index in range(reminders):
            agent = spawned[index % agents]
            result = host.call(agent, "schedule_create", {"prompt": f"burst {index}", "at": at})
            if result.is_error:
                raise BenchError(f"a burst create failed: {result.content}")
        if time.time_ns() // 1_000_000 >= due_ms - 500:
            raise BenchError("the burst creates took too long: raise BURST_LEAD_MS")
        time.sleep((due_ms - 200 - time.time_ns() / 1e6) / 1000)  # wait for a planned instant
        store = host.host.persistence
        commits0 = 0 if store is None else store.commit_count
        switches0, cpu0, writer0 = _switches(), _cpu(), _thread_cpu(WRITER_THREAD)
        if not followups.all_seen.wait(TOOL_TIMEOUT_S * 10):
            raise BenchError(f"only {len(followups.seen)} of {reminders} were delivered")
        for agent in spawned:
            host.plugin.wait_quiet(agent, timeout=TOOL_TIMEOUT_S)
        cpu, switches, writer = _cpu() - cpu0, _switches() - switches0, _thread_cpu(WRITER_THREAD)
        commits = (0 if store is None else store.commit_count) - commits0
    finally:
        host.close()
        shutil.rmtree(data, ignore_errors=True)
    lateness = [called / 1e6 - _target_ms(text) for _, text, called in followups.seen]
    return {
        "cpu_us": cpu / reminders * 1e6,
        "writer_cpu_us": (
            None if writer is None or writer0 is None else (writer - writer0) / reminders * 1e6
        ),
        "switches": switches / reminders,
        "commits": commits / reminders,
        "early": sum(1 for late in lateness if late < 0),
        "lateness": distribution(lateness),
        "load": _load1(),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write the JSON; returns what it wrote."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--creates", type=int, default=900, help="creates per run (at most 950 per agent)"
    )
    parser.add_argument("--burst", type=int, default=1000, help="reminders due together")
    parser.add_argument("--agents", type=int, default=100, help="agents of the multi runs")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per runtime")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.creates, args.burst, args.agents, args.rounds = 40, 20, 4, 1
    if args.creates > MAX_CREATES_PER_AGENT:
        parser.error(f"--creates: one agent holds at most {MAX_CREATES_PER_AGENT} reminders here")
    result = header(NAME, argv)
    runs: dict[str, list[dict[str, Any]]] = {}
    with data_root(args.data, "dsh-live-") as root:
        result["machine"] = machine_info(root)
        anchors = [floor(root, args.creates)]
        order = ["threading", "gevent"]
        for round_ in range(args.rounds):
            for runtime in order if round_ % 2 == 0 else order[::-1]:
                runs.setdefault(f"one/{runtime}", []).append(
                    create_run(root, runtime, 1, args.creates)
                )
                runs.setdefault(f"many/{runtime}", []).append(
                    create_run(root, runtime, args.agents, args.creates)
                )
                runs.setdefault(f"burst/{runtime}", []).append(
                    burst_run(root, runtime, args.agents, args.burst)
                )
        anchors.append(floor(root, args.creates))
    floor_cpu = median([a["cpu_us"] for a in anchors])
    floor_rate = median([a["per_s"] for a in anchors])
    result.update(floor=anchors, runs=runs)
    print_machine(result["machine"])
    rows = [
        [
            "floor: encode+INSERT+COMMIT",
            fmt(floor_cpu),
            "1.0",
            fmt(floor_rate),
            "100 %",
            fmt(median([a["switches"] for a in anchors]), 1),
            "",
            " / ".join(fmt(a["load"], 2) for a in anchors),
        ]
    ]
    summary: dict[str, Any] = {"floor_cpu_us": floor_cpu, "floor_per_s": floor_rate}
    for runtime in ("threading", "gevent"):
        one, many = runs[f"one/{runtime}"], runs[f"many/{runtime}"]
        cpu = median([r["cpu_us"] for r in one])
        rate = median([r["per_s"] for r in one])
        many_rate = median([r["per_s"] for r in many])
        summary[runtime] = {
            "cpu_ratio": cpu / floor_cpu,
            "rate_share": rate / floor_rate,
            "switches": median([r["switches"] for r in one]),
            "many_gain": many_rate / rate,
        }
        rows.append(
            [
                f"create, 1 agent, {runtime}",
                fmt(cpu),
                fmt(cpu / floor_cpu, 1),
                fmt(rate),
                f"{rate / floor_rate:.0%}",
                fmt(summary[runtime]["switches"], 1),
                "",
                " / ".join(fmt(r["load"], 2) for r in one),
            ]
        )
        rows.append(
            [
                f"create, {args.agents} agents, {runtime}",
                fmt(median([r["cpu_us"] for r in many])),
                "",
                fmt(many_rate),
                f"{many_rate / rate:.1f}× one agent",
                fmt(median([r["switches"] for r in many]), 1),
                "",
                " / ".join(fmt(r["load"], 2) for r in many),
            ]
        )
    print_table(
        ["run", "CPU µs/op", "× floor", "ops/s", "share", "switches/op", "", "load (1 min)"], rows
    )
    burst_rows = []
    for runtime in ("threading", "gevent"):
        for run in runs[f"burst/{runtime}"]:
            late = run["lateness"]
            burst_rows.append(
                [
                    f"{args.burst} due at once, {runtime}",
                    fmt(run["cpu_us"]),
                    "—" if run["writer_cpu_us"] is None else fmt(run["writer_cpu_us"]),
                    fmt(run["commits"], 2),
                    fmt(run["switches"], 1),
                    fmt(late["p50_ms"]),
                    fmt(late["p99_ms"]),
                    fmt(late["max_ms"]),
                    str(run["early"]),
                    fmt(run["load"], 2),
                ]
            )
    print_table(
        [
            "burst",
            "CPU µs/delivery",
            "of it writer",
            "commits/delivery",
            "switches",
            "p50 ms",
            "p99 ms",
            "max ms",
            "early",
            "load",
        ],
        burst_rows,
    )
    targets = _targets(summary, runs)
    print()
    for name, target in targets.items():
        value, bound, met = fmt(target["value"], 2), target["target"], verdict(target["met"])
        print(f"{name}: {value} (target {bound}) {met}")
    result["summary"] = summary
    result["targets"] = targets
    path = write_results(args.results, NAME, result)
    print(f"\nresults: {path}")
    return result


def _targets(summary: dict[str, Any], runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The issue's targets, each with its value from this run and whether it is met."""
    targets: dict[str, Any] = {}

    def target(name: str, value: float, bound: float, *, at_most: bool) -> None:
        met = value <= bound if at_most else value >= bound
        targets[name] = {"value": value, "target": f"{'≤' if at_most else '≥'} {bound}", "met": met}

    for runtime in ("threading", "gevent"):
        ours = summary[runtime]
        target(f"create CPU ÷ floor, {runtime}", ours["cpu_ratio"], 5, at_most=True)
        target(f"create switches, {runtime}", ours["switches"], 8, at_most=True)
        target(f"many agents ÷ one, {runtime}", ours["many_gain"], 2, at_most=False)
        burst = runs[f"burst/{runtime}"]
        cpu = median([run["cpu_us"] for run in burst])
        target(f"CPU µs per delivery, {runtime}", cpu, 300, at_most=True)
    target(
        "creates ÷ commit loop, threading", summary["threading"]["rate_share"], 0.4, at_most=False
    )
    p99 = median([run["lateness"]["p99_ms"] for run in runs["burst/gevent"]])
    target("burst p99 lateness ms, gevent", p99, 250, at_most=True)
    return targets


if __name__ == "__main__":
    main()
