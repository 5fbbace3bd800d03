"""Storage outage: reminders fall due while the disk is full, the host shuts down cleanly meanwhile.

Each *round* runs an embedded host (real SQLite, real actors, fake time) with
several root agents. Every agent creates reminders due over the next ten
minutes. Then the store starts failing every commit with ``database or disk
is full`` (the store's fault hook, exactly as SQLite reports ENOSPC) at a random
moment, time runs on (reminders fall due; the agents' back-off retries fire),
the host is shut down cleanly in the middle of the outage (``close()`` reports
the rows it could not write) and restarted — sometimes while the disk is still
full. Space returns at a random later moment, time runs to the end, and the
host is restarted once more to see that nothing runs again.

Deliveries are counted **from the store** (one ``dispatch``, one inbox entry and
one completed turn per reminder) and from the models (how often a reminder's
turn ran): every reminder must be delivered exactly once, never before it is
due. ``python bench/outage.py`` (``--help`` for the sizes).
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import random
import sqlite3
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    add_common_arguments,
    data_root,
    header,
    machine_info,
    print_machine,
    write_results,
)
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.embedded.agents import EmbeddedAgent, Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.inbox import (
    INBOX_EVENT,
    TURN_COMPLETED_EVENT,
    completed_entry,
    message_of,
)
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore, StoreWriteError
from host_bridge.testing import FakeClock, FakeTimers, settle
from messages import SCHEDULE_CHANGE_TYPE, parse_instant, parse_reminder_framing

__all__ = ["main", "run_round"]

STEP_MS = 5_000
"""Simulated time per step."""

HORIZON_MS = 900_000
"""Reminders are due within the first ten minutes; rounds run fifteen."""


class _Disk:
    """The store's fault hook: every commit fails while the disk is "full"."""

    def __init__(self) -> None:
        self.full = False
        self.refused = 0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        if self.full:
            with self._lock:
                self.refused += 1
            raise sqlite3.OperationalError("database or disk is full")


class _Model:
    """Records every reminder turn: (session, schedule id, inbox entry, clock, due)."""

    def __init__(self, session_id: str, runs: list[tuple[str, str, int, int, int]]) -> None:
        self._session_id = session_id
        self._runs = runs
        self.clock: FakeClock | None = None

    def __call__(self, turn: Turn) -> str | None:
        found = parse_reminder_framing(turn.message.text)
        if len(found) == 1 and self.clock is not None:
            self._runs.append(
                (
                    self._session_id,
                    found[0].schedule_id,
                    int(turn.inbox_seq if turn.inbox_seq is not None else -1),
                    self.clock(),
                    parse_instant(found[0].occurrence_at),
                )
            )
        return None


class _Incarnation:
    """One host process's worth of work on the round's data directory."""

    def __init__(
        self, data_dir: Path, now_ms: int, sessions: Sequence[str], disk: _Disk, runs: list[Any]
    ) -> None:
        self.clock = FakeClock(now_ms)
        self.timers = FakeTimers(self.clock)
        self.host = EmbeddedHost(data_dir, clock=self.clock, timers=self.timers)
        assert self.host.persistence is not None
        self.host.persistence.fault_hook = disk  # the store's test seam
        self.plugin: SchedulePlugin = install_schedule(self.host.context())
        self.agents: list[EmbeddedAgent] = []
        for session_id in sessions:
            model = _Model(session_id, runs)
            model.clock = self.clock
            self.agents.append(self.host.spawn_root(session_id=session_id, model=model))

    def quiet(self) -> None:
        """Owners and turn actors handled everything; agents may still wait for durability."""
        for _ in range(2):
            for agent in self.agents:
                owner = self.plugin.owner_of(agent)
                if owner is not None:
                    settle(owner)
                self.plugin.wait_quiet(agent, timeout=60)
                settle(agent.session.actor_ref)
                settle(agent.actor_ref)

    def settle_all(self) -> None:
        """Everything finished (only once the disk works)."""
        for agent in self.agents:
            for _ in range(100):
                self.plugin.wait_quiet(agent, timeout=60)
                agent.when_idle().result(timeout=60)
                status = self.plugin.wait_quiet(agent, timeout=60)
                if not status.busy and not status.waiting_for_idle:
                    break

    def close(self) -> str | None:
        """A clean shutdown; the category of the rows it could not write, if any."""
        self.plugin.dispose().result(timeout=60)
        try:
            self.host.close()
        except StoreWriteError as error:
            return error.category
        return None


def run_round(data_dir: Path, rng: random.Random, *, agents: int, reminders: int) -> dict[str, Any]:
    """One outage round; returns its counts (see the module docstring)."""
    sessions = [f"a{n}" for n in range(1, agents + 1)]
    disk = _Disk()
    runs: list[tuple[str, str, int, int, int]] = []
    start = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z
    fail_at = rng.randrange(0, 300_000, STEP_MS)
    stop_at = rng.randrange(fail_at + STEP_MS, 600_000, STEP_MS)  # shutdown during the outage
    restart_at = stop_at + rng.randrange(0, 300_000, STEP_MS)  # the host is down meanwhile
    clear_at = rng.randrange(stop_at + STEP_MS, 800_000, STEP_MS)  # maybe while it is down

    first = _Incarnation(data_dir, start, sessions, disk, runs)
    for agent in first.agents:
        for _ in range(reminders):
            delay = rng.randint(1, 600)
            result = first.host.tools.execute(
                "schedule_create",
                {"prompt": f"r{delay}", "after_seconds": delay},
                agent=agent,
                timeout=60,
            )
            if not isinstance(result.value, dict) or "id" not in result.value:
                raise RuntimeError(f"create failed: {result.content}")
    first.settle_all()
    created_at = first.clock()
    elapsed = 0
    while elapsed < stop_at:
        disk.full = fail_at <= elapsed < clear_at
        first.timers.advance(STEP_MS)
        elapsed += STEP_MS
        first.quiet()
    close_error = first.close()

    elapsed = restart_at
    disk.full = fail_at <= elapsed < clear_at
    second = _Incarnation(data_dir, created_at + elapsed, sessions, disk, runs)
    restarted_full = disk.full
    while elapsed < HORIZON_MS:
        disk.full = fail_at <= elapsed < clear_at
        second.timers.advance(STEP_MS)
        elapsed += STEP_MS
        second.quiet()
    disk.full = False
    second.timers.advance(60_000)  # the longest back-off (30 s) has passed
    second.settle_all()
    second.close()

    runs_before_last = len(runs)
    third = _Incarnation(data_dir, created_at + elapsed + 3_600_000, sessions, disk, runs)
    third.timers.advance(60_000)
    third.settle_all()
    third.close()
    return _count(data_dir, runs, runs_before_last, sessions) | {
        "fail_at_s": fail_at // 1000,
        "shutdown_at_s": stop_at // 1000,
        "restart_at_s": restart_at // 1000,
        "clear_at_s": clear_at // 1000,
        "restarted_while_full": restarted_full,
        "shutdown_could_not_write": close_error,
        "commits_refused": disk.refused,
    }


def _count(
    data_dir: Path, runs: list[tuple[str, str, int, int, int]], last: int, sessions: Sequence[str]
) -> dict[str, Any]:
    store = SqliteEventStore(store_path(data_dir), create=False)
    try:
        loaded = {session_id: store.load(session_id) for session_id in sessions}
    finally:
        store.close()
    creates = dispatched = queued = completed = 0
    lost = duplicates = 0
    for session_id, stored in loaded.items():
        assert stored is not None
        ids: list[str] = []
        per_id: collections.Counter[str] = collections.Counter()
        entry_of: dict[int, str] = {}
        finished: collections.Counter[str] = collections.Counter()
        dispatches: collections.Counter[str] = collections.Counter()
        for event in stored.events:
            if event.type == SCHEDULE_CHANGE_TYPE:
                op = event.data["operation"]
                if op == "create":
                    ids.append(event.data["schedule"]["id"])
                elif op == "dispatch":
                    dispatches[event.data["id"]] += 1
            elif event.type == INBOX_EVENT:
                message = message_of(event.data)
                if message is not None and message.text.startswith("[SCHEDULE REMINDER]"):
                    line = message.text.split("\n")[2]
                    entry_of[event.seq] = str(json.loads(line.split(": ", 1)[1]))
                    per_id[entry_of[event.seq]] += 1
            elif event.type == TURN_COMPLETED_EVENT:
                seq = completed_entry(event.data)
                if seq in entry_of:
                    finished[entry_of[seq]] += 1
        ran = collections.Counter(r[1] for r in runs if r[0] == session_id)
        for schedule_id in ids:
            creates += 1
            dispatched += dispatches[schedule_id]
            queued += per_id[schedule_id]
            completed += finished[schedule_id]
            counts = (dispatches[schedule_id], per_id[schedule_id], finished[schedule_id])
            if min(counts) == 0 or ran[schedule_id] == 0:
                lost += 1
            extra = max(*counts, ran[schedule_id]) - 1
            duplicates += max(0, extra)
    early = sum(1 for run in runs if run[3] < run[4])
    return {
        "reminders": creates,
        "dispatched": dispatched,
        "inbox_entries": queued,
        "completed_turns": completed,
        "model_runs": len(runs),
        "lost": lost,
        "duplicates": duplicates,
        "early": early,
        "ran_after_the_last_restart": len(runs) - last,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Command line: run the rounds, print a table, write ``outage.json``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=20, help="outage rounds (default 20)")
    parser.add_argument("--agents", type=int, default=10, help="root agents per round (10)")
    parser.add_argument("--reminders", type=int, default=10, help="reminders per agent (10)")
    parser.add_argument("--seed", type=int, default=1)
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.agents, args.reminders = 2, 2, 3
    logging.disable(logging.ERROR)  # the refused commits are expected; keep the table clean
    try:
        started = time.monotonic()
        rng = random.Random(args.seed)
        rounds: list[dict[str, Any]] = []
        with data_root(args.data, "dsh-outage-") as root:
            info = machine_info(root)
            print_machine(info)
            for index in range(1, args.rounds + 1):
                data_dir = root / f"round-{index:03d}"
                outcome = run_round(data_dir, rng, agents=args.agents, reminders=args.reminders)
                rounds.append(outcome)
                print(
                    f"round {index:3d}: full {outcome['fail_at_s']}-{outcome['clear_at_s']} s, "
                    f"shutdown at {outcome['shutdown_at_s']} s"
                    f", restart at {outcome['restart_at_s']} s"
                    f"{' (still full)' if outcome['restarted_while_full'] else ''}; "
                    f"{outcome['reminders']} reminders, {outcome['model_runs']} turns, "
                    f"lost {outcome['lost']}, duplicates {outcome['duplicates']}, "
                    f"early {outcome['early']}",
                    flush=True,
                )
    finally:
        logging.disable(logging.NOTSET)
    totals = {
        key: sum(int(r[key]) for r in rounds)
        for key in (
            "reminders",
            "dispatched",
            "inbox_entries",
            "completed_turns",
            "model_runs",
            "lost",
            "duplicates",
            "early",
            "ran_after_the_last_restart",
            "commits_refused",
        )
    }
    totals["restarted_while_full"] = sum(1 for r in rounds if r["restarted_while_full"])
    totals["shutdowns_that_could_not_write"] = sum(
        1 for r in rounds if r["shutdown_could_not_write"]
    )
    ok = totals["lost"] == totals["duplicates"] == totals["early"] == 0
    ok = ok and totals["ran_after_the_last_restart"] == 0
    result = header("outage", argv) | {
        "machine": info,
        "rounds": rounds,
        "totals": totals,
        "targets": {"exactly_once": {"target": "0 lost, 0 duplicates, 0 early", "met": ok}},
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(totals, indent=2))
    write_results(args.results, "outage", result)
    return result


if __name__ == "__main__":
    outcome = main()
    sys.exit(0 if outcome["targets"]["exactly_once"]["met"] else 1)
