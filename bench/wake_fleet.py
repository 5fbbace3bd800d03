"""A fleet of ``serve`` processes on one PostgreSQL store: each reminder once, work shared, a kill.

The bench makes a fresh database on the server named by ``--store`` (an admin
URL; the database is dropped afterwards unless ``--keep``), stores
``--sessions`` closed sessions with one ``at`` reminder each, due evenly over
``--spread`` seconds from ``--lead`` seconds after the build, and starts
``--hosts`` processes of ``dsh-schedule -v serve --store URL``; every tenth
session has a second reminder 1.5 s after its first. Once
``--kill-at`` of the reminders were presented, the first host is SIGKILLed
(``--kill-at 0``: none is).

From the processes' output it takes, per host, the reminders presented (their
due and presentation times) and the sessions woken; from the store, per
session, the ``dispatch`` records, the reminder inbox entries and the completed
turns. It reports:

* the split of presented reminders across the hosts;
* **double activations**: a session woken by a host while another host still
  had it live (it had not logged letting it go, and was not the killed host
  after the kill);
* **double deliveries** (a reminder dispatched twice) and **losses** (not
  dispatched, or its turn never completed);
* the take-over: the sessions the killed host held, and how long after the kill
  the others presented them (the lease goes with the dead host's connection, so
  this is about one rescan of the index);
* the lateness of presentation (due → printed), p50/p99.

Usage::

    python -m bench.wake_fleet --store postgresql://postgres@127.0.0.1:5432/postgres

Writes ``bench/results/wake_fleet.json``.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    at_reminder,
    delivery_counts,
    distribution,
    fmt,
    header,
    load_average,
    print_table,
    quiet_logs,
    verdict,
    write_results,
)
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.stores import PostgresEventStore
from host_bridge.protocols import SessionHeader, wall_clock_ms
from messages._instant import parse_instant

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Serve:
    """One ``serve`` process and what it said."""

    index: int
    popen: subprocess.Popen[str]
    presented: list[tuple[str, int, int, float]] = field(default_factory=list)  # sid, due, at, t
    woken: list[tuple[str, float]] = field(default_factory=list)
    let_go: list[tuple[str, float]] = field(default_factory=list)
    killed_at: float | None = None


SECOND_EVERY = 10
"""Every tenth session has a second reminder, ``SECOND_AFTER_MS`` after its first."""

SECOND_AFTER_MS = 1_500


def build(url: str, count: int, first_due_ms: int, spread_ms: int) -> dict[str, int]:
    """``count`` closed sessions with one reminder each (some with two); reminders per session.

    A session with a second reminder stays live in the host that woke it between
    the two (it is not quiet), so a host killed mid-run holds some such sessions.
    """
    store = PostgresEventStore(url)
    ids = [f"fleet-{i:05d}" for i in range(count)]
    reminders: dict[str, int] = {}
    try:
        for index, session_id in enumerate(ids):
            due = first_due_ms + (spread_ms * index) // max(1, count)
            dues = [due, due + SECOND_AFTER_MS] if index % SECOND_EVERY == 0 else [due]
            events = [
                at_reminder(
                    number - 1,
                    f"schedule-{number}",
                    f"reminder {index}.{number}",
                    when,
                    first_due_ms,
                )
                for number, when in enumerate(dues, start=1)
            ]
            rows = [(event, encode_payload(event.data)) for event in events]
            reminders[session_id] = len(dues)
            store.acquire_session(session_id)
            store.create_session(SessionHeader(session_id), rows)
            if index % 500 == 499:
                store.flush_all().result(timeout=120)
        store.flush_all().result(timeout=120)
    finally:
        store.close()
    return reminders


def start(index: int, url: str, concurrency: int, events: queue.Queue[Any]) -> Serve:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    popen = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "host_bridge.cli",
            "-v",
            "serve",
            "--store",
            url,
            "--concurrency",
            str(concurrency),
            "--quiet-period",
            "2",
        ],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    serve = Serve(index, popen)
    assert popen.stdout is not None and popen.stderr is not None
    threading.Thread(target=_out, args=(serve, popen.stdout, events), daemon=True).start()
    threading.Thread(target=_err, args=(serve, popen.stderr), daemon=True).start()
    return serve


def _out(serve: Serve, stream: IO[str], events: queue.Queue[Any]) -> None:
    for line in stream:
        if " reminder " not in line:
            continue
        at_text, _, rest = line.partition("  reminder ")
        session_id = rest.split(" of session ")[1].split(" ")[0]
        due_text = rest.split("(due ")[1].split(")")[0]
        item = (session_id, parse_instant(due_text), parse_instant(at_text), time.monotonic())
        serve.presented.append(item)
        events.put((serve.index, session_id))


def _err(serve: Serve, stream: IO[str]) -> None:
    for line in stream:
        if "woke session '" in line:
            serve.woken.append((line.split("woke session '")[1].split("'")[0], time.monotonic()))
        elif "letting session '" in line:
            session_id = line.split("letting session '")[1].split("'")[0]
            serve.let_go.append((session_id, time.monotonic()))


def store_counts(url: str, ids: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """Per session: dispatches, reminder inbox entries, completed reminder turns."""
    store = PostgresEventStore(url)
    try:
        out: dict[str, tuple[int, int, int]] = {}
        for session_id in ids:
            stored = store.load(session_id)
            assert stored is not None
            out[session_id] = delivery_counts(stored.events)
        out["__index_rows__"] = (len(store.due_entries()), 0, 0)
        return out
    finally:
        store.close()


def _wait_for_an_empty_index(url: str, deadline: float) -> None:
    """Poll until nothing is due any more (a benchmark may sleep)."""
    store = PostgresEventStore(url)
    try:
        while store.due_entries() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        store.close()


def _overlapping_wakes(
    serves: Sequence[Serve], killed_at: float | None, victim: int | None
) -> dict[str, list[int]]:
    """Sessions woken by a host while another host still had them live (not let go, not dead).

    Times are when the parent read each line, so only an order that cannot come
    from one host letting go before another woke the session counts.
    """
    events: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for serve in serves:
        for session_id, at in serve.woken:
            events[session_id].append((at, serve.index, "woke"))
        for session_id, at in serve.let_go:
            events[session_id].append((at, serve.index, "let go"))
    overlapping: dict[str, list[int]] = {}
    for session_id, items in events.items():
        holder: int | None = None
        for at, host, what in sorted(items, key=lambda item: (item[0], item[2] != "let go")):
            if holder is not None and holder == victim and killed_at is not None and at > killed_at:
                holder = None  # the killed host's lease went with its connection
            if what == "let go":
                if holder == host:
                    holder = None
            elif holder is not None and holder != host:
                overlapping[session_id] = [h for _, h, w in sorted(items) if w == "woke"]
            else:
                holder = host
    return overlapping


def database(admin: str, name: str, *, drop: bool = False) -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin, autocommit=True) as conn:
        if drop:
            drop_it = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop_it.format(sql.Identifier(name)))
        else:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(admin)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns (and writes) the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--store", required=True, help="postgresql:// URL of an admin database")
    parser.add_argument(
        "--sessions", type=int, default=10_000, help="closed sessions (11,000 reminders)"
    )
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--spread", type=float, default=120.0, help="seconds (default 120)")
    parser.add_argument(
        "--lead",
        type=float,
        default=90.0,
        help="seconds from the start of the build to the first due time (default 90; the "
        "build of 10,000 sessions takes about 50 s)",
    )
    parser.add_argument("--kill-at", type=float, default=0.5, help="fraction presented; 0: none")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.spread, args.lead = 60, 3.0, 2.0
    quiet_logs()
    result = header("wake_fleet", argv)
    result["load_average_at_start"] = load_average()
    name = f"dsh_wake_fleet_{uuid.uuid4().hex[:8]}"
    url = database(args.store, name)
    serves: list[Serve] = []
    try:
        built = time.monotonic()
        first_due = wall_clock_ms() + int(args.lead * 1000) + 5_000
        expected = build(url, args.sessions, first_due, int(args.spread * 1000))
        ids = sorted(expected)
        total = sum(expected.values())
        result["build_s"] = round(time.monotonic() - built, 1)
        events: queue.Queue[Any] = queue.Queue()
        if wall_clock_ms() > first_due:
            print("warning: the build ran past the first due time; raise --lead")
        serves = [start(i, url, args.concurrency, events) for i in range(args.hosts)]
        started_ms = wall_clock_ms()
        started = time.monotonic()
        seen: Counter[str] = Counter()
        kill_after = int(args.kill_at * total) if args.kill_at > 0 else None
        victim: Serve | None = None
        held_at_kill: set[str] = set()
        deadline = time.monotonic() + args.lead + args.spread + 600
        while sum(min(seen[s], n) for s, n in expected.items()) < total and (
            time.monotonic() < deadline
        ):
            try:
                _, session_id = events.get(timeout=5)
            except queue.Empty:
                continue
            seen[session_id] += 1
            if kill_after is not None and victim is None and seen.total() >= kill_after:
                victim = serves[0]
                victim.popen.send_signal(signal.SIGKILL)
                victim.killed_at = time.monotonic()
                shown = Counter(p[0] for p in victim.presented)
                held_at_kill = {s for s, _ in victim.woken if shown[s] < expected[s]}
        _wait_for_an_empty_index(url, deadline)  # e.g. a turn the kill cut runs again first
        for serve in serves:
            if serve.popen.poll() is None:
                serve.popen.send_signal(signal.SIGTERM)
        codes = [serve.popen.wait(timeout=120) for serve in serves]
        counts = store_counts(url, ids)
    finally:
        for serve in serves:
            if serve.popen.poll() is None:
                serve.popen.kill()
        if not args.keep:
            database(args.store, name, drop=True)
    index_rows = counts.pop("__index_rows__")[0]
    woken_by: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for serve in serves:
        for session_id, at in serve.woken:
            woken_by[session_id].append((at, serve.index))
    victim_index = 0 if args.kill_at > 0 else None
    killed_at = serves[0].killed_at
    taken_over = {
        session_id
        for session_id, wakes in woken_by.items()
        if killed_at is not None
        and any(host == victim_index for _, host in wakes)
        and all(at > killed_at for at, host in wakes if host != victim_index)
    }
    doubly_woken = _overlapping_wakes(serves, killed_at, victim_index)
    double_activations = len(doubly_woken)
    rewoken = {  # (a session the victim woke twice, two cold passes, was not taken over)
        s for s in taken_over if any(host != victim_index for _, host in woken_by[s])
    }
    takeover_s = [
        min(at for at, host in woken_by[s] if host != victim_index) - killed_at
        for s in rewoken
        if killed_at is not None
    ]
    lateness = [float(p[2] - p[1]) for serve in serves for p in serve.presented]
    overdue_at_start = sum(1 for serve in serves for p in serve.presented if p[1] < started_ms)
    split = [len(serve.presented) for serve in serves]
    doubles = sum(1 for s, (d, _, _) in counts.items() if d > expected[s])
    losses = sum(1 for s, (d, i, c) in counts.items() if d < expected[s] or i < d or c < i)
    reruns = sum(Counter(p[0] for s in serves for p in s.presented).values()) - total
    result.update(
        {
            "reminders": total,
            "sessions": len(ids),
            "hosts": args.hosts,
            "exit_codes": codes,
            "presented_sessions": len(seen),
            "presented": seen.total(),
            "split": split,
            "double_activations": double_activations,
            "doubly_woken": doubly_woken,
            "killed_after_s": None if killed_at is None else round(killed_at - started, 3),
            "double_deliveries": doubles,
            "losses": losses,
            "index_rows_left": index_rows,
            "killed_host": victim_index,
            "held_by_killed_host": len(held_at_kill),
            "taken_over_after_the_kill": len(rewoken),
            "takeover_s": distribution([t * 1000 for t in takeover_s]),
            "presentations_repeated": reruns,
            "lateness": distribution(lateness),
            "overdue_when_the_hosts_started": overdue_at_start,
            "load_average_at_end": load_average(),
        }
    )
    met = doubles == 0 and losses == 0 and double_activations == 0 and index_rows == 0
    result["targets"] = {"each_reminder_once": {"met": met}}
    print_table(
        ["host", "presented", "woken", "killed"],
        [
            [str(s.index), fmt(split[s.index]), fmt(len(s.woken)), "yes" if s.killed_at else ""]
            for s in serves
        ],
    )
    late = result["lateness"]
    print(
        f"{total} reminders in {len(ids)} sessions, {args.hosts} hosts: "
        f"double activations {double_activations}, "
        f"double deliveries {doubles}, losses {losses}, index rows left {index_rows}; "
        f"held by the killed host {len(held_at_kill)}, woken again by the others: "
        f"{len(rewoken)}, within "
        f"{fmt(result['takeover_s']['max_ms'], 0)} ms; presentations repeated {reruns}; "
        f"lateness p50 {fmt(late['p50_ms'], 0)} ms p99 {fmt(late['p99_ms'], 0)} ms; "
        f"each once: {verdict(met)}"
    )
    write_results(args.results, "wake_fleet", result)
    return result


if __name__ == "__main__":
    main()
