"""The asyncio host under load: many conversations on one loop, creates and a due burst.

Usage (from the repository root)::

    python -m bench.asyncio_host [--sessions 200] [--runtime gevent] [--rounds 2] [--quick]

One ``AsyncHost`` (real SQLite store, real actors on ``--runtime``) opens
``--sessions`` conversations on one asyncio loop. Every conversation sends one
message at once (``asyncio.gather``); the runner answers it with a
``schedule_create`` at one common instant ``--lead`` seconds ahead, awaited
with ``AgentTurn.call_tool``. Then all the reminders fall due together and run
as turns on the loop. Measured for both phases: rate, process CPU per
operation, and the loop's worst lag (a watchdog coroutine sleeping 10 ms:
the longest gap between its ticks beyond those 10 ms). Lateness of the burst is
the wall clock when the runner entered a reminder's turn minus the instant.

The anchor, in the same run and on an identical fresh store: the synchronous
embedded host (``EmbeddedHost`` with a ``Model`` calling ``Turn.call_tool``),
the same number of agents, each sent its message from the main thread at once.
Rounds alternate the two hosts (A B A B); medians are printed. Figures only:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench._common import (
    add_common_arguments,
    data_root,
    header,
    load_average,
    machine_info,
    percentile,
    print_machine,
    print_table,
    quiet_logs,
    write_results,
)
from host_bridge._plugin import install_schedule
from host_bridge.aio import AgentTurn, AsyncHost
from host_bridge.embedded.agents import Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import wall_clock_ms
from messages._instant import format_instant

NAME = "asyncio_host"
TICK_S = 0.010
"""The watchdog's sleep."""


def cpu_s() -> float:
    """User + system CPU seconds of this process so far."""
    times = os.times()
    return times.user + times.system


class Burst:
    """The runner's notes: when each reminder turn started (wall ms); set when all arrived."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.started_ms: list[int] = []
        self.lock = threading.Lock()
        self.done = threading.Event()

    def note(self) -> None:
        with self.lock:
            self.started_ms.append(wall_clock_ms())
            if len(self.started_ms) >= self.expected:
                self.done.set()


def create_arguments(due_ms: int, index: int) -> dict[str, Any]:
    return {"prompt": f"reminder {index}", "at": format_instant(due_ms)}


async def watchdog(stop: asyncio.Event, lags: list[float]) -> None:
    """Sleep ``TICK_S`` until ``stop``; note each tick's lag beyond it.

    A tick still running is noted too (replaced when it ends), so a phase
    shorter than one tick still has its lag so far.
    """
    while not stop.is_set():
        before, slot = time.perf_counter(), len(lags)
        lags.append(0.0)  # the running tick: its lag is 0 until it ends late
        await asyncio.sleep(TICK_S)
        lag = max(0.0, time.perf_counter() - before - TICK_S)
        if slot < len(lags):
            lags[slot] = lag
        else:  # a new phase cleared the list meanwhile: the tick belongs to it
            lags.append(lag)


def phase(count: int, seconds: float, cpu: float, lags: Sequence[float]) -> dict[str, Any]:
    return {
        "per_s": count / seconds if seconds > 0 else float("nan"),
        "cpu_us_per_op": cpu / count * 1e6 if count else float("nan"),
        "loop_max_lag_ms": max(lags) * 1000 if lags else None,
        "load_average_1m": (load_average() or (float("nan"),))[0],
    }


def lateness(burst: Burst, due_ms: int) -> dict[str, float]:
    late = [max(0, started - due_ms) for started in burst.started_ms]
    return {"p50_ms": percentile(late, 0.5), "p99_ms": percentile(late, 0.99)}


async def run_async(data: Path, sessions: int, lead_s: float, runtime: str) -> dict[str, Any]:
    """The asyncio host: gather every conversation's create, then wait for the burst."""
    burst = Burst(sessions)
    due_ms = wall_clock_ms() + int(lead_s * 1000)
    indices: dict[str, int] = {}

    async def run_turn(turn: AgentTurn) -> str | None:
        if turn.is_reminder:
            burst.note()
            return None
        result = await turn.call_tool(
            "schedule_create", create_arguments(due_ms, indices[turn.session_id])
        )
        return result.content

    stop = asyncio.Event()
    lags: list[float] = []
    async with AsyncHost(run_turn, data_dir=data, runtime=runtime, wake=False) as host:
        chats = [await host.open(f"s-{index}") for index in range(sessions)]
        for index, chat in enumerate(chats):
            indices[chat.session_id] = index
        ticking = asyncio.ensure_future(watchdog(stop, lags))
        cpu, started = cpu_s(), time.perf_counter()
        replies = await asyncio.gather(*(chat.send("remind") for chat in chats))
        create = phase(sessions, time.perf_counter() - started, cpu_s() - cpu, lags)
        created_before_due = wall_clock_ms() < due_ms
        assert all(reply and '"state":"scheduled"' in reply for reply in replies), replies[:1]
        lags.clear()
        cpu = cpu_s()
        await asyncio.to_thread(burst.done.wait, lead_s + 600)
        last = max(burst.started_ms) if burst.started_ms else due_ms
        spread_s = max(1e-3, (last - due_ms) / 1000)
        deliver = phase(len(burst.started_ms), spread_s, cpu_s() - cpu, lags)
        deliver.update(lateness(burst, due_ms))
        stop.set()
        await ticking
    return {"create": create, "deliver": deliver, "created_before_due": created_before_due}


def run_sync(data: Path, sessions: int, lead_s: float, runtime: str) -> dict[str, Any]:
    """The anchor: the synchronous embedded host, every agent prompted at once."""
    burst = Burst(sessions)
    due_ms = wall_clock_ms() + int(lead_s * 1000)

    def model_for(index: int) -> Callable[[Turn], str | None]:
        def model(turn: Turn) -> str | None:
            if turn.message.source.get("plugin") == "tool-schedule":
                burst.note()
                return None
            return turn.call_tool("schedule_create", create_arguments(due_ms, index)).content

        return model

    host = EmbeddedHost(data, runtime=runtime)
    try:
        plugin = install_schedule(host.context(), runtime=host.runtime)
        agents = [
            host.spawn_root(session_id=f"s-{index}", model=model_for(index))
            for index in range(sessions)
        ]
        cpu, started = cpu_s(), time.perf_counter()
        handles = [agent.prompt("remind") for agent in agents]
        for handle in handles:
            handle.result(timeout=600)
        create = phase(sessions, time.perf_counter() - started, cpu_s() - cpu, ())
        created_before_due = wall_clock_ms() < due_ms
        cpu = cpu_s()
        burst.done.wait(lead_s + 600)
        last = max(burst.started_ms) if burst.started_ms else due_ms
        deliver = phase(
            len(burst.started_ms), max(1e-3, (last - due_ms) / 1000), cpu_s() - cpu, ()
        )
        deliver.update(lateness(burst, due_ms))
        plugin.dispose().result(timeout=60)
    finally:
        host.close()
    return {"create": create, "deliver": deliver, "created_before_due": created_before_due}


def medians(runs: Sequence[dict[str, Any]], part: str, key: str) -> float:
    values = [run[part][key] for run in runs if run[part][key] is not None]
    return statistics.median(values) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the rounds, print the table, write the JSON; returns the result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=200, help="conversations (default 200)")
    parser.add_argument("--rounds", type=int, default=2, help="A B rounds (default 2)")
    parser.add_argument(
        "--lead", type=float, default=15.0, help="seconds until the common due instant"
    )
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.rounds, args.lead = 5, 1, 2.0
    quiet_logs()
    runs: dict[str, list[dict[str, Any]]] = {"asyncio": [], "sync": []}
    with data_root(args.data, "dsh-bench-asyncio-") as root:
        info = machine_info(root)
        for round_index in range(args.rounds):
            for kind in ("asyncio", "sync"):
                data = root / f"{kind}-{round_index}"
                if kind == "asyncio":
                    result = asyncio.run(run_async(data, args.sessions, args.lead, args.runtime))
                else:
                    result = run_sync(data, args.sessions, args.lead, args.runtime)
                runs[kind].append(result)
    summary = []
    for kind, kind_runs in runs.items():
        row: dict[str, Any] = {"host": kind}
        for part in ("create", "deliver"):
            for key in ("per_s", "cpu_us_per_op", "loop_max_lag_ms", "load_average_1m"):
                row[f"{part}_{key}"] = medians(kind_runs, part, key)
        for key in ("p50_ms", "p99_ms"):
            row[f"deliver_{key}"] = medians(kind_runs, "deliver", key)
        row["all_created_before_due"] = all(run["created_before_due"] for run in kind_runs)
        summary.append(row)
    anchor, ours = summary[1], summary[0]
    ratios = {
        "create_rate_vs_sync": ours["create_per_s"] / anchor["create_per_s"],
        "deliver_rate_vs_sync": ours["deliver_per_s"] / anchor["deliver_per_s"],
    }
    print_machine(info)
    print(
        f"{args.sessions} conversations on one loop, {args.runtime} runtime, median of "
        f"{args.rounds} alternating rounds; anchor: the synchronous embedded host"
    )
    print_table(
        [
            "host",
            "creates/s",
            "CPU µs/create",
            "loop max lag ms",
            "deliveries/s",
            "CPU µs/delivery",
            "p50 late ms",
            "p99 late ms",
            "loop max lag ms",
            "load 1m",
        ],
        [
            [
                row["host"],
                f"{row['create_per_s']:.0f}",
                f"{row['create_cpu_us_per_op']:.0f}",
                f"{row['create_loop_max_lag_ms']:.1f}",
                f"{row['deliver_per_s']:.0f}",
                f"{row['deliver_cpu_us_per_op']:.0f}",
                f"{row['deliver_p50_ms']:.0f}",
                f"{row['deliver_p99_ms']:.0f}",
                f"{row['deliver_loop_max_lag_ms']:.1f}",
                f"{row['create_load_average_1m']:.2f}",
            ]
            for row in summary
        ],
    )
    print(
        f"asyncio / sync: creates {ratios['create_rate_vs_sync']:.2f}x, "
        f"deliveries {ratios['deliver_rate_vs_sync']:.2f}x"
    )
    if not all(row["all_created_before_due"] for row in summary):
        print("note: some creates finished after the due instant; raise --lead")
    result = {
        **header(NAME, argv),
        "machine": info,
        "sessions": args.sessions,
        "runtime": args.runtime,
        "summary": summary,
        "ratios": ratios,
        "runs": runs,
        "targets": {},
    }
    path = write_results(args.results, NAME, result)
    print(f"results: {path}")
    return result


if __name__ == "__main__":
    main()
