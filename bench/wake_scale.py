"""Waking cold sessions at scale: one host, many stored sessions, reminders spread over minutes.

The store is built through the store API (no host, no agents): ``--sessions``
sessions, each with one conversation event, ``--due`` of them also with one
``at`` reminder; the due times are spread evenly over ``--spread`` seconds,
starting ``--lead`` seconds after the build. Nobody has any session open.

Then one embedded host opens the store with activation enabled (the wake-up
actor, a recording model standing in for ``serve``'s notifier) and runs on the
real clock until every reminder was presented. It measures:

* **wake lateness**: when the wake-up actor asked to activate a session, minus
  its due time; **delivery lateness**: when the reminder's turn ran, minus its
  due time (the second includes the resume, the owner's transaction and the
  durable-inbox commit before the turn starts);
* **memory**: the process's resident set before the first due time and at its
  peak, beside the peak number of live sessions (woken and not yet let go; the
  quiet period is ``--quiet`` seconds);
* **index query cost**: the time of ``next_due()`` and ``due_sessions(now, 8)``
  on stores of growing size (``--sizes``), each with a tenth of its sessions due;
* **correctness**, from the store: every reminder has exactly one inbox entry,
  one ``dispatch`` and one completed turn; the due index is empty at the end.

Usage: ``python -m bench.wake_scale`` (100,000 sessions, 10,000 reminders over
ten minutes, about 14 minutes) or ``--quick``. Writes ``bench/results/wake_scale.json``.

``--herd`` measures ``serve`` itself instead (:mod:`bench._herd`): the same
reminders all due at once, then spread over ``--spread`` seconds (default 60),
beside a plain-SQLite delivery floor on an identical copy of each store.
Writes ``bench/results/wake_scale_herd.json``.
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _herd as herd
from bench._common import (
    at_reminder,
    data_root,
    distribution,
    fmt,
    header,
    load_average,
    machine_info,
    percentile,
    print_machine,
    print_table,
    quiet_logs,
    verdict,
    write_results,
)
from host_bridge._plugin import WakePolicy, install_schedule
from host_bridge.cli._serve import reminders_of
from host_bridge.embedded.activation import EmbeddedActivation
from host_bridge.embedded.agents import Turn
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import Agent, SessionEvent, SessionHeader, wall_clock_ms
from messages._instant import parse_instant

P99_TARGET_MS = 1_000.0


def build_store(
    path: Path, sessions: int, due: int, first_due_ms: int, spread_ms: int
) -> dict[str, int]:
    """Store ``sessions`` closed sessions, ``due`` of them with a reminder; their due times."""
    store = SqliteEventStore(path)
    dues: dict[str, int] = {}
    every = max(1, sessions // max(1, due))
    try:
        for index in range(sessions):
            session_id = f"s{index:06d}"
            rows = [SessionEvent("message", 0, first_due_ms, {"role": "user", "content": "hi"})]
            slot = index // every
            if index % every == 0 and slot < due:
                due_ms = first_due_ms + (spread_ms * slot) // max(1, due)
                rows.append(at_reminder(1, "schedule-1", f"reminder {slot}", due_ms, first_due_ms))
                dues[session_id] = due_ms
            store.create_session(
                SessionHeader(session_id), [(e, encode_payload(e.data)) for e in rows]
            )
            if index % 2_000 == 1_999:
                store.flush_all().result(timeout=120)
                for done in range(index - 1_999, index + 1):
                    store.release_session(f"s{done:06d}")
        store.flush_all().result(timeout=120)
    finally:
        store.close()
    return dues


def index_cost(path: Path, repeat: int) -> dict[str, float]:
    """Median and p99 (µs) of ``next_due()`` and ``due_sessions(now, 8)`` on a store."""
    store = SqliteEventStore(path, create=False)
    try:
        first = store.next_due()
        assert first is not None
        now = first + 1
        timings: dict[str, list[float]] = {"next_due": [], "due_sessions": []}
        for _ in range(repeat):
            started = time.perf_counter_ns()
            store.next_due()
            timings["next_due"].append((time.perf_counter_ns() - started) / 1000)
            started = time.perf_counter_ns()
            store.due_sessions(now, 8)
            timings["due_sessions"].append((time.perf_counter_ns() - started) / 1000)
    finally:
        store.close()
    return {
        f"{name}_{stat}_us": round(percentile(values, q), 1)
        for name, values in timings.items()
        for stat, q in (("p50", 0.5), ("p99", 0.99))
    }


class Recorder:
    """The model of woken sessions: records when each reminder's turn ran."""

    def __init__(self, expected: int) -> None:
        self.lateness_ms: list[float] = []
        self.sessions: list[str] = []
        self._expected = expected
        self._lock = threading.Lock()
        self.done = threading.Event()

    def __call__(self, turn: Turn) -> str | None:
        now = wall_clock_ms()
        receipts = reminders_of(turn)
        with self._lock:
            for receipt in receipts:
                self.lateness_ms.append(now - parse_instant(receipt["occurrenceAt"]))
                self.sessions.append(turn.agent.session.id)
            if len(self.sessions) >= self._expected:
                self.done.set()
        return "presented" if receipts else None


class TimedActivation(EmbeddedActivation):
    """Records when the wake-up actor asked for each activation."""

    def __init__(self, host: EmbeddedHost, dues: dict[str, int], **options: Any) -> None:
        super().__init__(host, **options)
        self.dues = dues
        self.lateness_ms: list[float] = []

    def activate(self, session_id: str) -> Future[Agent | None]:
        """Note the lateness of the first activation of a session, then activate it."""
        due = self.dues.pop(session_id, None)
        if due is not None:
            self.lateness_ms.append(wall_clock_ms() - due)
        return super().activate(session_id)


def rss_kib() -> int:
    """The resident set of this process (KiB)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def store_counts(path: Path) -> dict[str, int]:
    """Counts read straight from the store after the run."""
    conn = sqlite3.connect(path)
    try:

        def one(sql: str) -> int:
            return int(conn.execute(sql).fetchone()[0])

        return {
            "inbox_entries": one("SELECT COUNT(*) FROM events WHERE type = 'inbox/queued'"),
            "completed_turns": one("SELECT COUNT(*) FROM events WHERE type = 'turn/completed'"),
            "sessions_with_two_inbox_entries": one(
                "SELECT COUNT(*) FROM (SELECT session_id FROM events WHERE type = 'inbox/queued'"
                " GROUP BY session_id HAVING COUNT(*) > 1)"
            ),
            "index_rows_left": one("SELECT COUNT(*) FROM due_index"),
        }
    finally:
        conn.close()


def run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Build the store, run the host until every reminder was presented; the figures."""
    sessions, due, spread_s, lead_s, quiet_s = (
        args.sessions,
        args.due,
        args.spread,
        args.lead,
        args.quiet,
    )
    data = root / "scale"
    data.mkdir()
    path = data / "sessions.sqlite3"
    build_started = time.monotonic()
    first_due = wall_clock_ms() + int(lead_s * 1000)
    dues = build_store(path, sessions, due, first_due, int(spread_s * 1000))
    build_s = time.monotonic() - build_started
    if wall_clock_ms() > first_due:
        print(f"warning: building took {build_s:.0f} s, past the first due time")
    gc.collect()
    host = EmbeddedHost(data)
    recorder = Recorder(len(dues))
    activation = TimedActivation(host, dict(dues), model=recorder)
    host.activation = activation
    policy = WakePolicy(quiet_period_ms=int(quiet_s * 1000))
    plugin = install_schedule(host.context(), wake_policy=policy)
    samples: list[tuple[float, int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.25):
            samples.append((time.monotonic(), rss_kib(), len(host.sessions.list())))

    sampler = threading.Thread(target=sample, daemon=True)
    before_due_rss = rss_kib()
    sampler.start()
    started = time.monotonic()
    finished = recorder.done.wait(timeout=lead_s + spread_s + 300)
    elapsed = time.monotonic() - started
    stop.set()
    sampler.join()
    plugin.dispose().result(timeout=60)
    host.close()
    counts = store_counts(path)
    peak_rss = max((s[1] for s in samples), default=before_due_rss)
    peak_live = max((s[2] for s in samples), default=0)
    return {
        "sessions": sessions,
        "reminders": len(dues),
        "spread_s": spread_s,
        "quiet_period_s": quiet_s,
        "build_s": round(build_s, 1),
        "run_s": round(elapsed, 1),
        "all_presented": finished,
        "presented": len(recorder.sessions),
        "presented_twice": len(recorder.sessions) - len(set(recorder.sessions)),
        "wake_lateness": distribution(activation.lateness_ms),
        "delivery_lateness": distribution(recorder.lateness_ms),
        "rss_before_first_due_mib": round(before_due_rss / 1024, 1),
        "rss_peak_mib": round(peak_rss / 1024, 1),
        "live_sessions_peak": peak_live,
        "store": counts,
        "load_average_at_end": load_average(),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns (and writes) the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, help="stored sessions (default 100,000)")
    parser.add_argument("--due", type=int, help="of them with a reminder (default 10,000)")
    parser.add_argument(
        "--spread", type=float, help="seconds the due times span (default 600, --herd 60)"
    )
    parser.add_argument(
        "--lead",
        type=float,
        help="seconds from the build to the first due time (default 20; --herd: from "
        "adding the reminders, default 5)",
    )
    parser.add_argument("--quiet", type=float, help="quiet period, seconds (default 5)")
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="store sizes for the index query cost"
    )
    parser.add_argument(
        "--herd",
        action="store_true",
        help="serve against a plain-SQLite delivery floor, reminders all due at once and "
        "spread (writes wake_scale_herd.json)",
    )
    parser.add_argument("--data", type=Path)
    parser.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        defaults = (3000, 300, 3.0, 2.0, 0.5) if args.herd else (300, 30, 3.0, 1.0, 0.5)
        args.sizes = "100,1000"
    else:
        defaults = (100_000, 10_000, 60.0 if args.herd else 600.0, 5.0 if args.herd else 20.0, 5.0)
    for name, default in zip(("sessions", "due", "spread", "lead", "quiet"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.herd:
        return herd.main(args, argv)
    quiet_logs()
    result = header("wake_scale", argv)
    with data_root(args.data, "dsh-wake-scale-") as root:
        result["machine"] = machine_info(root)
        print_machine(result["machine"])
        costs = []
        for size in (int(s) for s in args.sizes.split(",")):
            folder = root / f"index-{size}"
            folder.mkdir()
            build_store(folder / "sessions.sqlite3", size, size // 10, wall_clock_ms(), 600_000)
            costs.append({"sessions": size, **index_cost(folder / "sessions.sqlite3", 300)})
        result["index_cost"] = costs
        print_table(
            ["sessions", "next_due p50 µs", "p99", "due_sessions p50 µs", "p99"],
            [
                [
                    fmt(c["sessions"]),
                    fmt(c["next_due_p50_us"], 1),
                    fmt(c["next_due_p99_us"], 1),
                    fmt(c["due_sessions_p50_us"], 1),
                    fmt(c["due_sessions_p99_us"], 1),
                ]
                for c in costs
            ],
        )
        run_result = run(root, args)
    result["run"] = run_result
    wake, delivery = run_result["wake_lateness"], run_result["delivery_lateness"]
    store = run_result["store"]
    exact = (
        run_result["all_presented"]
        and run_result["presented_twice"] == 0
        and store["inbox_entries"] == run_result["reminders"]
        and store["completed_turns"] == run_result["reminders"]
        and store["sessions_with_two_inbox_entries"] == 0
        and store["index_rows_left"] == 0
    )
    result["targets"] = {
        "wake_lateness_p99_ms": {"target": P99_TARGET_MS, "met": wake["p99_ms"] <= P99_TARGET_MS},
        "each_reminder_once": {"met": exact},
    }
    print_table(
        ["", "count", "p50 ms", "p90 ms", "p99 ms", "max ms"],
        [
            [
                name,
                fmt(d["count"]),
                fmt(d["p50_ms"], 1),
                fmt(d["p90_ms"], 1),
                fmt(d["p99_ms"], 1),
                fmt(d["max_ms"], 1),
            ]
            for name, d in (("wake lateness", wake), ("delivery lateness", delivery))
        ],
    )
    print(
        f"{run_result['sessions']} sessions, {run_result['reminders']} reminders over "
        f"{run_result['spread_s']:.0f} s; built in {run_result['build_s']} s; RSS "
        f"{run_result['rss_before_first_due_mib']} MiB before the first due time, peak "
        f"{run_result['rss_peak_mib']} MiB; peak live sessions {run_result['live_sessions_peak']}"
    )
    print(
        f"store: {store}; p99 wake lateness ≤ {P99_TARGET_MS:.0f} ms: "
        f"{verdict(result['targets']['wake_lateness_p99_ms']['met'])}; each once: {verdict(exact)}"
    )
    write_results(args.results, "wake_scale", result)
    return result


if __name__ == "__main__":
    main()
