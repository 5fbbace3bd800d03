"""Delivery precision: 1,000 reminders across 100 agents, all due in the same second.

Usage (from the repository root)::

    python -m bench.delivery_precision [--agents 100] [--reminders 1000] [--quick]

**Ours**: an embedded host (wall clock, real timers, SQLite) with 100 root agents
whose model answers every turn. Each agent's ``followup`` is wrapped to record
the wall-clock time it is called. 100 threads, one per agent, create the
reminders through the real tool path with ``after_seconds = ceil((T - now) /
1000)`` for a whole second T. ``scheduledAt`` is the owner's clock at the create
plus whole seconds, so a target's millisecond within the second ``[T, T + 1 s)``
is the millisecond at which it was created: the creates are issued at planned
instants whose millisecond is spread evenly over ``[0, --spread-ms)`` (default
950: targets spread over the whole second; ``--spread-ms 100`` packs all of
them into its first 100 ms, issuing the creates in the first 100 ms of ten
successive seconds). The delay of a reminder is the time ``followup()`` was
called minus its ``scheduledAt`` (read back from the framing).

**APScheduler**: a ``BackgroundScheduler`` (thread pool of 10) with
``SQLAlchemyJobStore`` on SQLite in the same data directory, the same 1,000
target instants shifted to a later second, one ``date`` job each; the delay is
when the job function started minus its run date. ``misfire_grace_time`` is
``None`` so no late job is skipped. Run with the job store's SQLite as
SQLAlchemy opens it (``default``) and tuned like ours (``wal``).

Prints a table and writes ``bench/results/delivery_precision.json``.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import _aps
from bench._common import (
    TOOL_TIMEOUT_S,
    BenchError,
    add_common_arguments,
    data_root,
    distribution,
    fmt,
    header,
    machine_info,
    open_host,
    print_machine,
    print_per_op,
    print_table,
    quiet_logs,
    verdict,
    write_results,
)
from bench._counts import Counters
from host_bridge.embedded.agents import EmbeddedAgent, Turn
from host_bridge.protocols import UserMessage
from messages import parse_instant, parse_reminder_framing

NAME = "delivery_precision"

TARGET_P99_MS = 50.0
"""Our p99 delay from due time to ``followup()`` must be at most this."""

SPREAD_MS = 950
"""By default the targets spread evenly over the first 950 ms of the common second."""

WAIT_AFTER_DUE_S = 120.0
"""How long after the common second a run may take to deliver everything."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _answer(turn: Turn) -> str:
    """The agents' model: acknowledge every turn (the reply is appended to the log)."""
    return "Noted."


class _Followups:
    """Records when each agent's ``followup`` was called with a reminder."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, int]] = []  # (agent id, framing, wall ns)
        self.all_seen = threading.Event()

    def watch(self, agent: EmbeddedAgent) -> None:
        original = agent.followup

        def followup(message: UserMessage) -> None:
            called = time.time_ns()
            if message.text.startswith("[SCHEDULE REMINDER]"):
                with self.lock:
                    self.seen.append((agent.id, message.text, called))
                    if len(self.seen) >= self.expected:
                        self.all_seen.set()
            original(message)

        setattr(agent, "followup", followup)  # noqa: B010 - wrap this instance only


def _target_ms(text: str) -> int:
    """The occurrence (ms) of the one reminder a framing presents."""
    found = parse_reminder_framing(text)
    if len(found) != 1:
        raise BenchError("a follow-up that is not one reminder's framing")
    return parse_instant(found[0].occurrence_at)


def _common_second(lead_s: float) -> int:
    """Epoch ms of a whole second at least ``lead_s`` from now."""
    return (math.ceil((_now_ms() + lead_s * 1000) / 1000)) * 1000


def _sleep_until(epoch_ms: float) -> None:
    delay = (epoch_ms - time.time_ns() / 1e6) / 1000
    if delay > 0:
        time.sleep(delay)  # waiting for a planned wall-clock instant, not synchronising


def run_ours(
    root: Path, agents: int, reminders: int, spread_ms: int, gap_s: int, *, runtime: str
) -> dict[str, Any]:
    """Create the reminders, wait for every ``followup()``, return the delays."""
    data = Path(tempfile.mkdtemp(prefix="ours-", dir=root))
    host = open_host(data, runtime)
    followups = _Followups(reminders)
    try:
        spawned = [host.spawn(model=_answer) for _ in range(agents)]
        for agent in spawned:
            followups.watch(agent)
        # Create i (round-robin over the agents) is issued in window w = i // per_window at
        # S + w * 1 s + (i % per_window) * step: its clock phase, hence its target's phase
        # in the common second, is in [0, spread). At most one create per ms is issued,
        # half what the host absorbs, so queueing barely shifts the phases.
        windows = math.ceil(reminders / spread_ms)
        per_window = math.ceil(reminders / windows)
        step = spread_ms / per_window
        common = _common_second(0.2 + windows + gap_s)
        issue_from = common - (windows + gap_s) * 1000
        plans: list[list[float]] = [[] for _ in range(agents)]
        for index in range(reminders):
            window, slot = divmod(index, per_window)
            plans[index % agents].append(issue_from + window * 1000 + slot * step)
        errors: list[BaseException] = []
        late = 0

        def creator(index: int) -> None:
            nonlocal late
            agent = spawned[index]
            try:
                for number, issue_at in enumerate(plans[index]):
                    _sleep_until(issue_at)
                    after = math.ceil((common - _now_ms()) / 1000)
                    if after < 1:
                        late += 1
                        after = 1
                    host.create(agent, f"reminder {index}-{number}", after)
            except BaseException as error:
                errors.append(error)

        threads = [
            threading.Thread(target=creator, args=(i,), name=f"bench-creator-{i}", daemon=True)
            for i in range(agents)
        ]
        for thread in threads:
            thread.start()
        created_from = time.perf_counter()
        for thread in threads:
            thread.join(timeout=TOOL_TIMEOUT_S * 10)
        create_s = time.perf_counter() - created_from
        if errors:
            raise BenchError(f"a create failed: {errors[0]}")
        margin_ms = common - _now_ms()
        store = host.host.persistence
        if store is None:
            raise BenchError("the embedded host has no durable store")
        commits0, flushes0, cpu0 = store.commit_count, store.flush_requests, _cpu_seconds()
        counters = Counters(store)
        deadline = max(0.0, (common - _now_ms()) / 1000) + WAIT_AFTER_DUE_S
        if not followups.all_seen.wait(deadline):
            raise BenchError(
                f"only {len(followups.seen)} of {reminders} reminders were delivered in time"
            )
        for agent in spawned:
            host.plugin.wait_quiet(agent, timeout=TOOL_TIMEOUT_S)
        work = {
            "commits_per_delivery": (store.commit_count - commits0) / reminders,
            "flushes_per_delivery": (store.flush_requests - flushes0) / reminders,
            "cpu_us_per_delivery": (_cpu_seconds() - cpu0) / reminders * 1e6,
            "per_delivery": counters.stop().per(reminders),
            "turns": sum(len(agent.turns) for agent in spawned),
        }
    finally:
        host.close()
        shutil.rmtree(data, ignore_errors=True)
    delays: list[float] = []
    targets: list[int] = []
    for _, text, called_ns in followups.seen:
        target = _target_ms(text)
        targets.append(target)
        delays.append(called_ns / 1e6 - target)
    return {
        "system": "ours",
        "config": f"embedded, {runtime} (WAL, synchronous=FULL)",
        "agents": agents,
        "reminders": reminders,
        "delivered": len(delays),
        "common_second_ms": common,
        "target_offsets_ms": sorted(t - common for t in targets),
        "target_spread_ms": max(targets) - min(targets),
        "targets_outside_second": sum(1 for t in targets if not common <= t < common + 1000),
        "late_creates": late,
        "create_seconds": create_s,
        "margin_before_due_ms": margin_ms,
        "early": sum(1 for d in delays if d < 0),
        "delay": distribution(delays),
        "work": work,
    }


def run_apscheduler(
    root: Path, offsets_ms: Sequence[int], config: str, lead_s: float
) -> dict[str, Any]:
    """The same target instants (shifted) as APScheduler date jobs; returns the delays."""
    data = Path(tempfile.mkdtemp(prefix=f"aps-{config}-", dir=root))
    aps = _aps.open_scheduler(data / "jobs.sqlite", config)
    _aps.reset_delivery_runs()
    try:
        common = _common_second(lead_s)
        began = time.perf_counter()
        for index, offset in enumerate(offsets_ms):
            target = common + offset
            aps.scheduler.add_job(
                _aps.delivery_job,
                trigger="date",
                run_date=_aps.run_date(target),
                args=[index, target],
                id=f"d{index}",
            )
        add_s = time.perf_counter() - began
        margin_ms = common - _now_ms()
        deadline = time.monotonic() + max(0.0, margin_ms / 1000) + WAIT_AFTER_DUE_S
        while len(_aps.delivery_runs()) < len(offsets_ms) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling a result count, not synchronising our code
        runs = _aps.delivery_runs()
    finally:
        aps.close()
        shutil.rmtree(data, ignore_errors=True)
    delays = [started / 1e6 - target for _, target, started in runs]
    return {
        "system": "apscheduler",
        "config": f"{config} ({_aps.describe(aps.pragmas)})",
        "pragmas": aps.pragmas,
        "reminders": len(offsets_ms),
        "delivered": len(runs),
        "common_second_ms": common,
        "add_seconds": add_s,
        "margin_before_due_ms": margin_ms,
        "early": sum(1 for d in delays if d < 0),
        "delay": distribution(delays),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write the JSON; returns what it wrote."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--agents", type=int, default=100, help="root agents (default 100)")
    parser.add_argument("--reminders", type=int, default=1000, help="reminders (default 1000)")
    parser.add_argument(
        "--spread-ms",
        type=int,
        default=SPREAD_MS,
        help="issue the creates evenly over this many ms, so the targets spread over the "
        "first SPREAD ms of the common second (1..1000, default 950)",
    )
    parser.add_argument(
        "--gap", type=int, default=1, help="whole seconds between the last create and T"
    )
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.agents, args.reminders, args.gap = min(args.agents, 3), min(args.reminders, 6), 0
        args.spread_ms = min(args.spread_ms, 100)
    if not 1 <= args.spread_ms <= 1000:
        parser.error("--spread-ms must be in 1..1000")
    if args.gap < 0:
        parser.error("--gap must not be negative")
    quiet_logs()
    skipped = "--no-apscheduler was given" if args.no_apscheduler else _aps.unavailable()
    if skipped:
        print(f"APScheduler runs skipped: {skipped}")

    with data_root(args.data, "dsh-bench-delivery-") as root:
        info = machine_info(root)
        ours = run_ours(
            root, args.agents, args.reminders, args.spread_ms, args.gap, runtime=args.runtime
        )
        theirs: list[dict[str, Any]] = []
        if not skipped:
            add_lead = 1.0 + args.reminders / 400  # its adds are slower than ours
            for config in _aps.CONFIGS:
                theirs.append(run_apscheduler(root, ours["target_offsets_ms"], config, add_lead))

    p99 = ours["delay"]["p99_ms"]
    target: dict[str, Any] = {
        "value": p99,
        "target": f"p99 <= {TARGET_P99_MS:g} ms",
        "met": p99 <= TARGET_P99_MS,
    }
    print_machine(info)
    print(
        f"{args.reminders} reminders across {args.agents} agents due in one second "
        f"(targets spread over {ours['target_spread_ms']} ms); delay = followup()/job start "
        "minus due time"
    )
    rows = [ours, *theirs]
    print_table(
        ["system", "delivered", "p50 ms", "p99 ms", "max ms", "min ms", "early"],
        [
            [
                f"{row['system']} {row['config']}",
                fmt(row["delivered"]),
                fmt(row["delay"]["p50_ms"], 1),
                fmt(row["delay"]["p99_ms"], 1),
                fmt(row["delay"]["max_ms"], 1),
                fmt(row["delay"]["min_ms"], 1),
                fmt(row["early"]),
            ]
            for row in rows
        ],
    )
    work = ours["work"]
    print(f"CPU per delivery (ours): {fmt(work['cpu_us_per_delivery'])} µs")
    print_per_op("per delivery (ours)", work["per_delivery"])
    print(f"target: ours {target['target']}: {fmt(p99, 1)} ms -> {verdict(target['met'])}")

    payload = header(NAME, argv) | {
        "machine": info,
        "parameters": {
            "agents": args.agents,
            "reminders": args.reminders,
            "spread_ms": args.spread_ms,
            "gap_seconds": args.gap,
            "runtime": args.runtime,
        },
        "apscheduler_skipped": skipped,
        "ours": ours,
        "apscheduler": theirs,
        "targets": {"ours_p99": target},
    }
    default_shape = args.quick or args.spread_ms == SPREAD_MS
    name = NAME if default_shape else f"{NAME}_spread_{args.spread_ms}ms"
    if args.runtime != "threading":
        name = f"{name}_{args.runtime}"
    path = write_results(args.results, name, payload)
    print(f"\nresults: {path}")
    return payload


if __name__ == "__main__":
    main()
