"""Soak: many agents, thousands of reminders, concurrent tool calls; exactly-once, flat memory.

One embedded host (real SQLite store, real actors) runs in *compressed time*:
its clock and timers are the test kit's ``FakeClock``/``FakeTimers`` and the
main thread moves them one simulated second at a time, so reminders with
delays of up to a minute fall due over a few wall-clock seconds.

The soak runs in rounds. A round starts ``--agents`` root agents on fresh
sessions; worker threads then create the round's share of ``--reminders``
(random delays 1..``--max-delay`` seconds) through the real tools while,
concurrently, lists and deletes of earlier reminders run and due reminders are
delivered as follow-up turns. Creation is spread over the first simulated
minute; time then runs on until every reminder of the round that was not
deleted has been delivered. The round checks that each one was delivered
exactly once (counted per session and id in the model's turns), that no
deleted one was delivered, that none came early and that every list is empty,
then disposes the agents and detaches their sessions. The process's resident
memory is sampled after every round (after a garbage collection): with a
steady number of live agents it must stay flat from the first round to the
last. At the end every stored session is reopened and checked: exactly one
``dispatch`` per create that was not deleted.

``python bench/soak.py`` runs 100 agents and 10,000 reminders in 10 rounds;
the test suite runs a tiny version (``tests/reliability/test_soak.py``).
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import logging
import os
import queue
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pykka

from bench._common import data_root
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.embedded.agents import EmbeddedAgent, Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.testing import FakeClock, FakeTimers
from messages import (
    SCHEDULE_CHANGE_TYPE,
    parse_instant,
    parse_reminder_framing,
    validate_schedule_stream,
)

__all__ = ["RoundReport", "SoakReport", "main", "run_soak"]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TOOL_TIMEOUT_S = 60.0
_PYKKA_THREAD = re.compile(r"[A-Za-z_]\w*-\d+")
"""How pykka names the thread of a threading actor: ``<class name>-<counter>``."""
SECOND_MS = 1000


def rss_bytes() -> int | None:
    """The resident set size of this process (Linux ``/proc/self/statm``), else None."""
    try:
        fields = Path("/proc/self/statm").read_text().split()
    except OSError:
        return None
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class RoundReport:
    """What one round did and found."""

    round: int
    agents: int
    created: int = 0
    deleted: int = 0
    delete_not_found: int = 0
    lists: int = 0
    delivered: int = 0
    duplicates: int = 0
    missing: int = 0
    deleted_but_delivered: int = 0
    early: int = 0
    errors: list[str] = field(default_factory=list)
    simulated_seconds: int = 0
    wall_seconds: float = 0.0
    rss_bytes: int | None = None
    threads: int = 0
    objects: int = 0
    python_blocks: int = 0
    tracked_sessions: int | None = None


@dataclass
class SoakReport:
    """Every round, the final store check and the memory figures."""

    rounds: list[RoundReport]
    store_problems: list[str]
    wall_seconds: float

    @property
    def violations(self) -> list[str]:
        found = list(self.store_problems)
        for r in self.rounds:
            found += [f"round {r.round}: {e}" for e in r.errors]
            for name in ("duplicates", "missing", "deleted_but_delivered", "early"):
                if getattr(r, name):
                    found.append(f"round {r.round}: {getattr(r, name)} {name.replace('_', ' ')}")
        return found

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> dict[str, Any]:
        rss = [r.rss_bytes for r in self.rounds if r.rss_bytes is not None]
        mib = 1024 * 1024
        return {
            "rounds": len(self.rounds),
            "agents_per_round": self.rounds[0].agents if self.rounds else 0,
            "agents_total": sum(r.agents for r in self.rounds),
            "reminders_created": sum(r.created for r in self.rounds),
            "deleted": sum(r.deleted for r in self.rounds),
            "delivered": sum(r.delivered for r in self.rounds),
            "lists": sum(r.lists for r in self.rounds),
            "duplicates": sum(r.duplicates for r in self.rounds),
            "missing": sum(r.missing for r in self.rounds),
            "deleted_but_delivered": sum(r.deleted_but_delivered for r in self.rounds),
            "early": sum(r.early for r in self.rounds),
            "simulated_minutes": round(sum(r.simulated_seconds for r in self.rounds) / 60, 1),
            "wall_seconds": round(self.wall_seconds, 1),
            "rss_first_round_mib": round(rss[0] / mib, 1) if rss else None,
            "rss_last_round_mib": round(rss[-1] / mib, 1) if rss else None,
            "rss_max_mib": round(max(rss) / mib, 1) if rss else None,
            "rss_second_round_mib": round(rss[1] / mib, 1) if len(rss) > 1 else None,
            "rss_by_round_mib": [round(v / mib, 1) for v in rss],
            "threads_by_round": [r.threads for r in self.rounds],
            "gc_objects_by_round": [r.objects for r in self.rounds],
            "python_blocks_by_round": [r.python_blocks for r in self.rounds],
            "store_tracked_sessions_by_round": [r.tracked_sessions for r in self.rounds],
            "violations": self.violations,
        }


class _Deliveries:
    """Counts the reminders the models are shown, per (session, id), and lets callers wait."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self.seen: collections.Counter[tuple[str, str]] = collections.Counter()
        self.early = 0
        self.total = 0

    def model(self, session_id: str) -> Callable[[Turn], str | None]:
        def model(turn: Turn) -> str | None:
            found = parse_reminder_framing(turn.message.text)
            if len(found) != 1:
                return None
            schedule_id, occurrence = found[0].schedule_id, found[0].occurrence_at
            with self._cond:
                self.seen[(session_id, schedule_id)] += 1
                self.total += 1
                if self._clock.now() < parse_instant(occurrence):
                    self.early += 1
                self._cond.notify_all()
            return "Reminder presented."

        return model

    def forget(self, session_ids: set[str]) -> None:
        """Drop the counts of finished sessions (the soak's own memory must stay flat too)."""
        with self._cond:
            for key in [key for key in self.seen if key[0] in session_ids]:
                del self.seen[key]

    def wait_total(self, total: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.total >= total, timeout)


@dataclass
class _AgentState:
    agent: EmbeddedAgent
    created: list[str] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    due: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _settle(plugin: SchedulePlugin, agent: EmbeddedAgent) -> None:
    for _ in range(50):
        plugin.wait_quiet(agent, timeout=TOOL_TIMEOUT_S)
        agent.when_idle().result(timeout=TOOL_TIMEOUT_S)
        status = plugin.wait_quiet(agent, timeout=TOOL_TIMEOUT_S)
        if agent.status == "idle" and not status.busy:
            return
    raise RuntimeError(f"agent {agent.id} never settled")


class _Workers:
    """Threads running tool calls from a queue (a host serving many agents at once)."""

    def __init__(self, count: int) -> None:
        self._tasks: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, name=f"soak-worker-{n}", daemon=True)
            for n in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, task: Callable[[], None]) -> None:
        self._tasks.put(task)

    def join(self) -> None:
        self._tasks.join()

    def close(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)
        for thread in self._threads:
            thread.join(timeout=TOOL_TIMEOUT_S)

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            try:
                if task is None:
                    return
                task()
            except Exception as error:  # a bug in the soak itself: report, keep going
                with self._lock:
                    self.errors.append(f"{type(error).__name__}: {error}")
            finally:
                self._tasks.task_done()


@dataclass
class _Soak:
    """The host and the helpers every round shares."""

    host: EmbeddedHost
    plugin: SchedulePlugin
    clock: FakeClock
    timers: FakeTimers
    deliveries: _Deliveries
    workers: _Workers
    rng: random.Random


def _run_round(
    soak: _Soak, number: int, *, agents: int, reminders: int, max_delay_s: int
) -> RoundReport:
    host, plugin, clock, timers = soak.host, soak.plugin, soak.clock, soak.timers
    deliveries, workers, rng = soak.deliveries, soak.workers, soak.rng
    started = time.monotonic()
    threads_before = set(threading.enumerate())
    report = RoundReport(number, agents)
    states = [
        _AgentState(
            host.spawn_root(
                session_id=f"soak-{number}-{n}", model=deliveries.model(f"soak-{number}-{n}")
            )
        )
        for n in range(agents)
    ]
    counts = collections.Counter[str]()
    counts_lock = threading.Lock()
    start_ms = clock.monotonic()
    early_before = deliveries.early

    def call(state: _AgentState, name: str, arguments: Any) -> Any:
        result = host.tools.execute(name, arguments, agent=state.agent, timeout=TOOL_TIMEOUT_S)
        value = result.value
        if result.is_error or (isinstance(value, dict) and "message" in value):
            with counts_lock:
                report.errors.append(f"{name} on {state.agent.session.id}: {value}")
        return value

    def create(state: _AgentState, delay: int, prompt: str) -> None:
        value = call(state, "schedule_create", {"prompt": prompt, "after_seconds": delay})
        if isinstance(value, dict) and "scheduledAt" in value:
            with state.lock:
                state.created.append(value["id"])
                state.due[value["id"]] = parse_instant(value["scheduledAt"])
            with counts_lock:
                counts["created"] += 1

    def delete(state: _AgentState) -> None:
        with state.lock:
            candidates = [sid for sid in state.created if sid not in state.deleted]
        if not candidates:
            return
        target = rng_choice(candidates)
        value = call(state, "schedule_delete", {"id": target})
        if isinstance(value, dict) and value.get("deleted") is True:
            with state.lock:
                state.deleted.add(target)
            with counts_lock:
                counts["deleted"] += 1
        elif isinstance(value, dict) and value.get("code") == "schedule_not_found":
            with counts_lock:
                counts["not_found"] += 1

    def list_(state: _AgentState) -> None:
        value = call(state, "schedule_list", {})
        if isinstance(value, dict) and "schedules" in value:
            with counts_lock:
                counts["lists"] += 1

    rng_lock = threading.Lock()

    def rng_choice(items: Sequence[str]) -> str:
        with rng_lock:
            return rng.choice(items)

    # Creation over the first simulated minute, with lists and deletes mixed in.
    creation_ticks = 60
    per_tick = [reminders // creation_ticks] * creation_ticks
    for n in range(reminders % creation_ticks):
        per_tick[n] += 1
    serial = 0
    for tick in range(creation_ticks):
        for _ in range(per_tick[tick]):
            serial += 1
            delay = rng.randint(1, max_delay_s)
            workers.submit(partial(create, rng.choice(states), delay, f"soak {number}-{serial}"))
            roll = rng.random()
            if roll < 0.3:
                workers.submit(partial(list_, rng.choice(states)))
            elif roll < 0.4:
                workers.submit(partial(delete, rng.choice(states)))
        workers.join()
        timers.advance(SECOND_MS)
    # Run time on until everything due has been delivered (no tool calls run any more).
    for _ in range(max_delay_s + 120):
        undelivered = any(
            sid not in st.deleted and deliveries.seen.get((st.agent.session.id, sid), 0) == 0
            for st in states
            for sid in st.created
        )
        if not undelivered:
            break
        timers.advance(SECOND_MS)
        _wait_for_due(states, deliveries, clock)
    for state in states:
        _settle(plugin, state.agent)
    report.simulated_seconds = (clock.monotonic() - start_ms) // SECOND_MS
    report.created = counts["created"]
    report.deleted = counts["deleted"]
    report.delete_not_found = counts["not_found"]
    report.lists = counts["lists"]
    for state in states:
        session_id = state.agent.session.id
        for sid in state.created:
            seen = deliveries.seen.get((session_id, sid), 0)
            if sid in state.deleted:
                report.deleted_but_delivered += seen
                continue
            report.delivered += min(seen, 1)
            report.duplicates += max(0, seen - 1)
            report.missing += 1 if seen == 0 else 0
        listed = call(state, "schedule_list", {})
        if not (isinstance(listed, dict) and listed.get("schedules") == []):
            report.errors.append(f"{session_id} still lists {listed}")
    report.early = deliveries.early - early_before
    actors: list[pykka.ActorRef[Any]] = [state.agent.actor_ref for state in states]
    actors += [ref for ref in map(plugin.owner_of, (s.agent for s in states)) if ref is not None]
    actors += [state.agent.session.actor_ref for state in states]
    for state in states:
        host.agents.dispose(state.agent)
        host.sessions.detach(state.agent.session)
    _wait_actor_threads(actors, threads_before)
    deliveries.forget({state.agent.session.id for state in states})
    states.clear()
    gc.collect()
    report.rss_bytes = rss_bytes()
    report.threads = threading.active_count()
    report.objects = len(gc.get_objects())
    report.python_blocks = sys.getallocatedblocks()
    if host.persistence is not None:
        report.tracked_sessions = host.persistence.tracked_sessions
    report.wall_seconds = time.monotonic() - started
    return report


def _wait_actor_threads(
    actors: Sequence[pykka.ActorRef[Any]], threads_before: set[threading.Thread]
) -> None:
    """Wait until the round's actors stopped and the threads they ran on ended.

    Disposal stops actors without blocking; counting threads before those end
    would count a thread that is on its way out as one that outlived its round.
    """
    for ref in actors:
        ref.actor_stopped.wait(TOOL_TIMEOUT_S)
    for thread in set(threading.enumerate()) - threads_before:
        if _PYKKA_THREAD.fullmatch(thread.name):  # only actor threads: the stopped ones
            thread.join(TOOL_TIMEOUT_S)


def _wait_for_due(states: Sequence[_AgentState], deliveries: _Deliveries, clock: FakeClock) -> None:
    """Wait (on the delivery counter, not a sleep) until every reminder now due was shown."""
    now = clock.now()
    due = 0
    for state in states:
        with state.lock:
            due += sum(1 for sid, at in state.due.items() if at <= now and sid not in state.deleted)
    keys = [
        (state.agent.session.id, sid)
        for state in states
        for sid in state.created
        if sid not in state.deleted
    ]

    def shown() -> int:
        return sum(1 for key in keys if deliveries.seen.get(key, 0) > 0)

    deadline = time.monotonic() + 30  # a missing delivery is reported by the round's check
    while shown() < due and time.monotonic() < deadline:
        deliveries.wait_total(deliveries.total + 1, timeout=1.0)


def _check_store(path: Path) -> list[str]:
    problems: list[str] = []
    store = SqliteEventStore(path, create=False)
    try:
        for session_id in store.session_ids():
            stored = store.load(session_id)
            if stored is None:
                continue
            folded = validate_schedule_stream(stored.events, stored.header.seed_length)
            if folded.active:
                problems.append(f"{session_id}: {len(folded.active)} reminders still active")
            dispatches = collections.Counter(
                e.data["id"]
                for e in stored.events
                if e.type == SCHEDULE_CHANGE_TYPE and e.data["operation"] == "dispatch"
            )
            if any(n > 1 for n in dispatches.values()):
                problems.append(f"{session_id}: a reminder was dispatched twice")
    finally:
        store.close()
    return problems


def run_soak(
    *,
    agents: int = 100,
    reminders: int = 10_000,
    rounds: int = 10,
    workers: int = 4,
    max_delay_s: int = 60,
    seed: int = 1,
    data: Path | None = None,
    progress: Callable[[RoundReport], None] | None = None,
) -> SoakReport:
    """Run the soak; ``reminders`` are spread evenly over ``rounds``."""
    started = time.monotonic()
    rng = random.Random(seed)
    with data_root(data, "dsh-soak-", keep_requested=True) as data_dir:
        clock = FakeClock()
        timers = FakeTimers(clock)
        host = EmbeddedHost(data_dir, clock=clock, timers=timers)
        plugin = install_schedule(host.context())
        deliveries = _Deliveries(clock)
        pool = _Workers(workers)
        soak = _Soak(host, plugin, clock, timers, deliveries, pool, rng)
        reports: list[RoundReport] = []
        try:
            per_round = [reminders // rounds] * rounds
            for n in range(reminders % rounds):
                per_round[n] += 1
            for number in range(1, rounds + 1):
                report = _run_round(
                    soak,
                    number,
                    agents=agents,
                    reminders=per_round[number - 1],
                    max_delay_s=max_delay_s,
                )
                report.errors += pool.errors
                pool.errors.clear()
                reports.append(report)
                if progress is not None:
                    progress(report)
        finally:
            pool.close()
            plugin.dispose().result(timeout=TOOL_TIMEOUT_S)
            host.close()
        problems = _check_store(store_path(data_dir))
    return SoakReport(reports, problems, time.monotonic() - started)


def _print_round(report: RoundReport) -> None:
    rss = "?" if report.rss_bytes is None else f"{report.rss_bytes / 1024 / 1024:.1f} MiB"
    print(
        f"round {report.round:3d}: created {report.created}, deleted {report.deleted}, "
        f"delivered {report.delivered}, duplicates {report.duplicates}, missing "
        f"{report.missing}, lists {report.lists}; {report.simulated_seconds} simulated s in "
        f"{report.wall_seconds:.1f} s; RSS {rss}, {report.threads} threads, "
        f"{report.objects} objects",
        flush=True,
    )
    for error in report.errors[:5]:
        print(f"    {error}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of the soak."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--agents", type=int, default=100, help="live agents per round (100)")
    parser.add_argument("--reminders", type=int, default=10_000, help="reminders in all (10,000)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds (10)")
    parser.add_argument("--workers", type=int, default=4, help="tool-calling threads (4)")
    parser.add_argument("--max-delay", type=int, default=60, help="longest delay in seconds (60)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, help="keep the store under this directory")
    parser.add_argument(
        "--results", type=Path, default=RESULTS_DIR, help=f"JSON results dir ({RESULTS_DIR})"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    report = run_soak(
        agents=args.agents,
        reminders=args.reminders,
        rounds=args.rounds,
        workers=args.workers,
        max_delay_s=args.max_delay,
        seed=args.seed,
        data=args.data,
        progress=_print_round,
    )
    summary = report.summary()
    print(json.dumps({k: v for k, v in summary.items() if k != "violations"}, indent=2))
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
    if not report.ok:
        for violation in report.violations[:20]:
            print(violation, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
