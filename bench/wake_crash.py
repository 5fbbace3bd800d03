"""Crash and restart of ``serve`` during activation: nothing lost, nothing delivered twice.

A *trial* stores ``--sessions`` closed sessions (SQLite), each with one reminder
already due, starts a ``serve`` host on them and SIGKILLs it at one of these
points, then starts ``dsh-schedule serve`` again and lets it run until the due
index is empty:

* ``commit``: the writer paused before the ``COMMIT`` that carries the first
  reminder's ``dispatch`` and inbox entry (``bench/_serve_child.py``);
* ``turn``: inside the first reminder's turn, after that commit, before the
  reminder was presented;
* ``random``: the real ``serve`` killed 0–``--max-delay-ms`` after it said it serves.

Then it counts from the store, per session: ``dispatch`` records, reminder inbox
entries and completed turns (each must be exactly one), and from the output of
both processes how often each reminder was presented. A reminder presented by
the killed host and again after the restart is a turn the kill cut after it
presented (its completion was not durable): the documented repeat, counted apart.

Usage: ``python -m bench.wake_crash [--trials 60]``; writes ``bench/results/wake_crash.json``.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    at_reminder,
    data_root,
    delivery_counts,
    fmt,
    header,
    load_average,
    machine_info,
    print_table,
    verdict,
    write_results,
)
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import SessionHeader, wall_clock_ms

REPO = Path(__file__).resolve().parent.parent
MODES = ("commit", "turn", "random")


class Child:
    """A subprocess whose stdout lines are collected; ``wait_for`` blocks on them."""

    def __init__(self, args: list[str]) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=REPO,
            env=dict(os.environ, PYTHONIOENCODING="utf-8"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        assert self.popen.stdout is not None
        threading.Thread(target=self._read, args=(self.popen.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        with self._changed:
            seen = self._changed.wait_for(lambda: any(text in x for x in self.lines), timeout)
            if not seen:
                raise TimeoutError(f"no {text!r} from the child")

    def presented(self) -> list[str]:
        with self._changed:
            return [
                line.split(" of session ")[1].split(" ")[0]
                for line in self.lines
                if "  reminder " in line
            ]


def store_sessions(path: Path, count: int) -> list[str]:
    store = SqliteEventStore(path)
    due = wall_clock_ms() - 1_000
    ids = [f"s{i}" for i in range(count)]
    try:
        for session_id in ids:
            event = at_reminder(0, "schedule-1", f"stretch {session_id}", due, due)
            store.create_session(SessionHeader(session_id), [(event, encode_payload(event.data))])
        store.flush_all().result(timeout=60)
    finally:
        store.close()
    return ids


def counts(path: Path, ids: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    store = SqliteEventStore(path, create=False)
    try:
        out = {}
        for session_id in ids:
            stored = store.load(session_id)
            assert stored is not None
            out[session_id] = delivery_counts(stored.events)
        return out
    finally:
        store.close()


def index_rows(path: Path) -> int:
    conn = sqlite3.connect(path, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM due_index").fetchone()[0])
    finally:
        conn.close()


def trial(
    folder: Path, mode: str, sessions: int, max_delay_ms: int, rng: random.Random
) -> dict[str, Any]:
    path = folder / "sessions.sqlite3"
    ids = store_sessions(path, sessions)
    if mode == "random":
        first = Child(["host_bridge.cli", "serve", "--data", str(folder)])
        first.wait_for("serving ")
        time.sleep(rng.uniform(0, max_delay_ms) / 1000)  # a random moment (a benchmark may sleep)
    else:
        first = Child(["bench._serve_child", str(folder), mode])
        first.wait_for(f"PAUSED {mode}")
    first.popen.send_signal(signal.SIGKILL)
    first.popen.wait(timeout=60)
    before = first.presented()
    second = Child(["host_bridge.cli", "serve", "--data", str(folder)])
    second.wait_for("serving ")
    deadline = time.monotonic() + 120
    while index_rows(path) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the store from outside (a benchmark may sleep)
    second.popen.send_signal(signal.SIGTERM)
    code = second.popen.wait(timeout=60)
    after = second.presented()
    stored = counts(path, ids)
    shown = Counter(before + after)
    return {
        "mode": mode,
        "exit_code": code,
        "lost": sum(1 for d, i, c in stored.values() if d < 1 or i < 1 or c < i),
        "dispatched_twice": sum(1 for d, _, _ in stored.values() if d > 1),
        "queued_twice": sum(1 for _, i, _ in stored.values() if i > 1),
        "presented_after_restart": len(after),
        "reran_cut_turns": sum(1 for s in set(before) & set(after)),
        "presented_twice_otherwise": sum(
            1 for s, n in shown.items() if n > 1 and s not in set(before) & set(after)
        ),
        "index_rows_left": index_rows(path),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the campaign; returns (and writes) the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--max-delay-ms", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data", type=Path)
    parser.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--quick", action="store_true", help="three trials, one per kill point")
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.sessions = 3, 2
    rng = random.Random(args.seed)
    result = header("wake_crash", argv)
    result["load_average_at_start"] = load_average()
    trials = []
    started = time.monotonic()
    with data_root(args.data, "dsh-wake-crash-") as root:
        result["machine"] = machine_info(root)
        for number in range(args.trials):
            folder = root / f"trial-{number}"
            folder.mkdir()
            trials.append(
                trial(folder, MODES[number % len(MODES)], args.sessions, args.max_delay_ms, rng)
            )
    result["seconds"] = round(time.monotonic() - started, 1)
    result["trials"] = trials
    totals = {
        key: sum(t[key] for t in trials)
        for key in (
            "lost",
            "dispatched_twice",
            "queued_twice",
            "reran_cut_turns",
            "presented_twice_otherwise",
            "index_rows_left",
        )
    }
    totals["bad_exit_codes"] = sum(1 for t in trials if t["exit_code"] != 0)
    result["totals"] = totals
    result["load_average_at_end"] = load_average()
    met = all(
        totals[k] == 0
        for k in (
            "lost",
            "dispatched_twice",
            "queued_twice",
            "presented_twice_otherwise",
            "index_rows_left",
            "bad_exit_codes",
        )
    )
    result["targets"] = {"nothing_lost_nothing_twice": {"met": met}}
    by_mode = Counter(t["mode"] for t in trials)
    print_table(
        ["", "value"],
        [
            [
                "trials (commit/turn/random)",
                f"{len(trials)} ({by_mode['commit']}/{by_mode['turn']}/{by_mode['random']})",
            ],
            ["reminders", fmt(len(trials) * args.sessions)],
            *[[key, fmt(value)] for key, value in totals.items()],
        ],
    )
    print(f"nothing lost, nothing twice: {verdict(met)} ({result['seconds']} s)")
    write_results(args.results, "wake_crash", result)
    return result


if __name__ == "__main__":
    main()
