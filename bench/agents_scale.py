"""Thousands of live root agents, each with one pending reminder, on one actor runtime.

Usage::

    python bench/agents_scale.py --agents 10000 --runtime gevent [--json out.json]

Runs the embedded host (real SQLite store, WAL, synchronous=FULL) with
Schedule installed, on ``--runtime`` for the host's actors *and* the owners, and
measures:

1. **start-up**: spawn ``--agents`` root agents (each gets its session, turn
   actor, ScheduleOwner and three tools) until every owner finished its first
   drive (a durable preflight of its new session);
2. **create**: one ``schedule_create`` per agent through the real tool path
   (tool registry -> owner mailbox -> preflight -> append -> barrier), at most
   ``--window`` calls in flight. The host clock is frozen meanwhile, so every
   record gets the same ``scheduledAt``;
3. **memory**: resident memory (``VmRSS``) after start-up and after the creates,
   minus the baseline taken before the first agent, divided by the agents;
4. **burst**: the host clock is moved forward so that the common due instant is
   ``--lead`` seconds ahead, and every owner is asked to drive (as a host does
   when an agent goes idle), so each re-arms its one timer for that instant.
   Then all reminders come due in the same millisecond. Latency of each is
   ``host clock at Agent.followup()`` minus ``scheduledAt``; reported as p50,
   p99 and max, with the time until every dispatch is durable.

``--gc tuned`` applies what a host with thousands of long-lived agents should
do with CPython's cyclic garbage collector: ``gc.freeze()`` once the agents
and their reminders exist (so full collections no longer walk them) and a
gen-0 threshold of 50,000. ``--gc default`` leaves the collector as it is.

The threading runtime needs three OS threads per agent (session, turn and
owner actor); runs that would exceed ``--max-threads`` are refused up front
instead of exhausting the machine's thread/pid limits.

Figures only; nothing is asserted. Exit status 0 even when a phase fails:
the failure is reported (how far the run got).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from actors._runtime import RuntimeName, get_runtime
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.embedded.agents import EmbeddedAgent
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import ToolResult, UserMessage, wall_clock_ms
from messages._instant import format_instant
from messages._mailbox import RequestDrive

AFTER_SECONDS = 3600
"""``after_seconds`` of every reminder (the clock is shifted before the burst)."""


class BenchClock:
    """The host clock: the wall clock plus an offset, which can be frozen."""

    def __init__(self) -> None:
        self._offset_ms = 0
        self._frozen: int | None = None

    def __call__(self) -> int:
        frozen = self._frozen
        return frozen if frozen is not None else wall_clock_ms() + self._offset_ms

    def precise_ms(self) -> float:
        """The same clock with sub-millisecond resolution (for latencies)."""
        return time.time_ns() / 1e6 + self._offset_ms

    def freeze(self, at_ms: int) -> None:
        self._frozen = at_ms

    def run_from(self, offset_ms: int) -> None:
        self._offset_ms = offset_ms
        self._frozen = None


def rss_kib() -> int:
    """Resident memory of this process (``VmRSS``) in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def thread_count() -> int:
    """OS threads of this process."""
    return len(os.listdir("/proc/self/task"))


def settled_rss_kib() -> int:
    gc.collect()
    return rss_kib()


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))
    return ordered[index]


class Deliveries:
    """Records the host-clock time of every ``Agent.followup`` call."""

    def __init__(self, clock: BenchClock, expected: int) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._all = threading.Event()
        self.expected = expected
        self.times: dict[str, float] = {}

    def instrument(self, agent: EmbeddedAgent) -> None:
        followup = agent.followup

        def timed(message: UserMessage) -> None:
            at = self._clock.precise_ms()
            followup(message)
            with self._lock:
                self.times.setdefault(agent.id, at)
                if len(self.times) >= self.expected:
                    self._all.set()

        agent.followup = timed  # type: ignore[method-assign]

    def wait(self, timeout: float) -> bool:
        return self._all.wait(timeout)


def wait_all_quiet(plugin: SchedulePlugin, agents: list[EmbeddedAgent], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for agent in agents:
        plugin.wait_quiet(agent, timeout=max(0.1, deadline - time.monotonic()))


def create_all(
    host: EmbeddedHost, agents: list[EmbeddedAgent], window: int, timeout: float
) -> list[ToolResult]:
    """One schedule_create per agent, at most ``window`` in flight."""
    results: list[ToolResult] = []
    pending: list[Future[ToolResult]] = []
    for agent in agents:
        pending.append(
            host.tools.submit(
                "schedule_create",
                {"prompt": f"reminder of {agent.id}", "after_seconds": AFTER_SECONDS},
                agent=agent,
            )
        )
        if len(pending) >= window:
            results.extend(f.result(timeout) for f in pending)
            pending = []
    results.extend(f.result(timeout) for f in pending)
    return results


def run(args: argparse.Namespace) -> dict[str, Any]:
    runtime_name: RuntimeName = args.runtime
    agents_wanted: int = args.agents
    report: dict[str, Any] = {
        "runtime": runtime_name,
        "agents": agents_wanted,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "gc": args.gc,
        "completed": False,
    }
    if runtime_name == "threading":
        needed = 3 * agents_wanted + thread_count() + 16
        if needed > args.max_threads:
            report["error"] = (
                f"not attempted: the threading runtime needs about {needed} OS threads "
                f"(3 per agent) and --max-threads is {args.max_threads}"
            )
            return report

    data = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="dsh-agents-scale-"))
    runtime = get_runtime(runtime_name)
    if runtime_name == "gevent":
        _ = runtime.hub  # type: ignore[attr-defined]  # start the hub thread before the baseline
    clock = BenchClock()
    host = EmbeddedHost(data, clock=clock, runtime=runtime)
    # The burst shifts the host clock forward on purpose: Schedule must take that step
    # at once instead of waiting for it to hold (clock_step_confirm_ms).
    context = dataclasses.replace(host.context(), clock_step_confirm_ms=None)
    plugin = install_schedule(context, runtime=runtime)
    deliveries = Deliveries(clock, agents_wanted)
    agents: list[EmbeddedAgent] = []
    phase = "start-up"
    try:
        report["rss_baseline_kib"] = base = settled_rss_kib()
        report["threads_baseline"] = thread_count()

        # 1. start-up
        started = time.perf_counter()
        for index in range(agents_wanted):
            agent = host.spawn_root(agent_id=f"agent-{index}", session_id=f"session-{index}")
            deliveries.instrument(agent)
            agents.append(agent)
        spawned = time.perf_counter()
        wait_all_quiet(plugin, agents, args.timeout)
        report["startup_s"] = time.perf_counter() - started
        report["spawn_s"] = spawned - started
        report["rss_after_startup_kib"] = rss = settled_rss_kib()
        report["rss_per_agent_startup_kib"] = (rss - base) / len(agents)
        report["threads_after_startup"] = thread_count()

        # 2. create, with the clock frozen: one common scheduledAt
        phase = "create"
        frozen_at = wall_clock_ms()
        clock.freeze(frozen_at)
        due_ms = frozen_at + AFTER_SECONDS * 1000
        started = time.perf_counter()
        results = create_all(host, agents, args.window, args.timeout)
        report["create_s"] = time.perf_counter() - started
        failed = [r.value for r in results if "scheduledAt" not in r.value]
        if failed:
            raise RuntimeError(f"{len(failed)} creates failed, e.g. {failed[0]}")
        if any(r.value["scheduledAt"] != format_instant(due_ms) for r in results):
            raise RuntimeError("the creates did not share one scheduledAt")
        wait_all_quiet(plugin, agents, args.timeout)

        # 3. memory with every agent holding one pending reminder
        report["rss_with_reminders_kib"] = rss = settled_rss_kib()
        report["rss_per_agent_kib"] = (rss - base) / len(agents)
        report["rss_peak_kib"] = _peak_kib()

        # 4. burst: the due instant is --lead seconds ahead on the host clock
        report["gc"] = args.gc
        if args.gc == "tuned":
            gc.freeze()
            gc.set_threshold(50_000, *gc.get_threshold()[1:])
        collections = _gc_counter()
        phase = "re-arm"
        lead_ms = int(args.lead * 1000)
        clock.run_from(due_ms - (wall_clock_ms() + lead_ms))
        started = time.perf_counter()
        for agent in agents:
            owner = plugin.owner_of(agent)
            assert owner is not None
            owner.tell(RequestDrive("bench"))
        wait_all_quiet(plugin, agents, args.timeout)
        report["rearm_s"] = time.perf_counter() - started
        margin = due_ms - clock()
        report["rearm_margin_ms"] = margin
        if margin <= 0:
            raise RuntimeError(f"re-arming took longer than --lead ({args.lead} s); raise it")
        phase = "burst"
        if not deliveries.wait(args.lead + args.timeout):
            raise RuntimeError(
                f"only {len(deliveries.times)} of {agents_wanted} reminders were delivered"
            )
        wait_all_quiet(plugin, agents, args.timeout)
        durable_at = clock.precise_ms()
        latencies = [at - due_ms for at in deliveries.times.values()]
        report["latency_ms"] = {
            "p50": percentile(latencies, 0.50),
            "p99": percentile(latencies, 0.99),
            "max": max(latencies),
            "min": min(latencies),
            "mean": statistics.fmean(latencies),
        }
        report["all_durable_after_due_ms"] = durable_at - due_ms
        report["gc_during_burst"] = collections()
        report["early_deliveries"] = sum(1 for value in latencies if value < 0)
        report["completed"] = True
    except BaseException as error:
        report["error"] = f"{phase}: {type(error).__name__}: {error}"
        report["agents_reached"] = len(agents)
        report["threads_reached"] = thread_count()
        if isinstance(error, KeyboardInterrupt):
            raise
    finally:
        started = time.perf_counter()
        try:
            plugin.dispose().result(args.timeout)
            host.close()
        except Exception as error:  # report, do not hide the measurement
            report["teardown_error"] = f"{type(error).__name__}: {error}"
        report["teardown_s"] = time.perf_counter() - started
        if not args.data:
            shutil.rmtree(data, ignore_errors=True)
    return report


def _gc_counter() -> Callable[[], dict[str, Any]]:
    """Count the collector's runs per generation (and their time) from now on."""
    counts = [0, 0, 0]
    seconds = [0.0, 0.0, 0.0]
    started = [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        generation = info["generation"]
        counts[generation] += 1
        seconds[generation] += time.perf_counter() - started[0]

    gc.callbacks.append(callback)

    def result() -> dict[str, Any]:
        gc.callbacks.remove(callback)
        return {"collections": counts, "seconds": [round(value, 3) for value in seconds]}

    return result


def _peak_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def show(report: dict[str, Any], out: Callable[[str], None] = print) -> None:
    head = f"{report['runtime']:>9} runtime, {report['agents']:>6} agents, gc {report['gc']}"
    if not report["completed"]:
        out(f"{head}: FAILED ({report.get('error')})")
        for key in ("agents_reached", "threads_reached", "startup_s", "rss_per_agent_startup_kib"):
            if key in report:
                out(f"    {key}: {report[key]}")
        return
    latency = report["latency_ms"]
    out(
        f"{head}: start-up {report['startup_s']:.2f} s, creates {report['create_s']:.2f} s, "
        f"RSS {report['rss_per_agent_kib']:.1f} KiB/agent "
        f"({report['rss_per_agent_startup_kib']:.1f} before reminders), "
        f"due->followup p50 {latency['p50']:.0f} ms p99 {latency['p99']:.0f} ms "
        f"max {latency['max']:.0f} ms, all durable {report['all_durable_after_due_ms']:.0f} ms"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000, help="live root agents (1000)")
    parser.add_argument("--runtime", choices=("threading", "gevent"), default="gevent")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--data", help="data directory (default: a fresh temp dir, removed)")
    parser.add_argument("--window", type=int, default=500, help="creates in flight (500)")
    parser.add_argument("--lead", type=float, default=10.0, help="seconds to re-arm (10)")
    parser.add_argument("--timeout", type=float, default=300.0, help="per-phase timeout (300 s)")
    parser.add_argument(
        "--gc",
        choices=("default", "tuned"),
        default="default",
        help="collector settings for the burst (default; tuned = freeze + gen-0 threshold)",
    )
    parser.add_argument(
        "--max-threads",
        type=int,
        default=16_000,
        help="refuse threading runs that need more OS threads than this (16000)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.agents < 1:
        parser.error("--agents must be at least 1")
    report = run(args)
    show(report)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
