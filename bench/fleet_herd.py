"""A herd on PostgreSQL: every reminder due in the same second, one ``serve`` host against three.

For each host count of ``--hosts`` (default ``1 3``) the bench makes a fresh
database on the server named by ``--store`` (an admin URL; each database is
dropped afterwards unless ``--keep``), stores ``--sessions`` closed sessions
(default 3,000), then appends one ``at`` reminder to each, all due in the same
second, ``--lead`` seconds later. It starts that many
``dsh-schedule -v serve --store URL`` processes, waits until every reminder was
presented and the due index is empty, stops them (SIGTERM) and reads the store.
Every host count runs on an identical store, built anew.

Per run it reports:

* **reminders per second**: reminders presented / (last presentation − the due
  second), on the hosts' clocks as printed;
* the lateness of presentation (due → printed), p50 and p99;
* **CPU per delivery** of the hosts: the processes' CPU time while the herd ran
  (``/proc``, from the due second to the last presentation), and the children's
  whole CPU time (``getrusage(RUSAGE_CHILDREN)``: start-up and shutdown
  included); the server's CPU time while the herd ran, when the server is local
  (its postmaster and every child, from ``/proc``; approximate: a child that
  ends meanwhile counts whole);
* the split of presented reminders across the hosts, and the sessions woken;
* from the store: **doubles** (a reminder dispatched twice) and **losses** (not
  dispatched, or its turn never completed), and index rows left;
* the 1-minute load average when the run started and when its herd was through;

then the ratio of the last host count to the first (3 hosts / 1 host).

Usage::

    python -m bench.fleet_herd --store postgresql://postgres@127.0.0.1:5432/postgres

Writes ``bench/results/fleet_herd.json``.
"""

from __future__ import annotations

import argparse
import math
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    at_reminder,
    distribution,
    fmt,
    header,
    load_average,
    print_table,
    quiet_logs,
    verdict,
    write_results,
)
from bench.wake_fleet import database, store_counts
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.stores import PostgresEventStore
from host_bridge.protocols import SessionHeader, wall_clock_ms
from messages._instant import parse_instant

REPO = Path(__file__).resolve().parent.parent

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass
class Host:
    """One ``serve`` process and what it said."""

    index: int
    popen: subprocess.Popen[str]
    ready: threading.Event = field(default_factory=threading.Event)
    presented: list[tuple[str, int, int]] = field(default_factory=list)  # session, due, at
    woken: int = 0


def build_sessions(url: str, count: int) -> tuple[PostgresEventStore, list[str]]:
    """``count`` new sessions with no events, durable; the store still holds them."""
    store = PostgresEventStore(url)
    ids = [f"herd-{i:05d}" for i in range(count)]
    try:
        for index, session_id in enumerate(ids):
            store.acquire_session(session_id)
            store.create_session(SessionHeader(session_id))
            if index % 500 == 499:
                store.flush_all().result(timeout=120)
        store.flush_all().result(timeout=120)
    except BaseException:
        store.close()
        raise
    return store, ids


def add_reminders(store: PostgresEventStore, ids: Sequence[str], due_ms: int) -> None:
    """One ``at`` reminder due at ``due_ms`` in each session; then every session goes cold."""
    logged = wall_clock_ms()
    try:
        for index, session_id in enumerate(ids):
            event = at_reminder(0, "schedule-1", f"herd {index}", due_ms, logged)
            store.record_append(session_id, event, encode_payload(event.data))
        store.flush_all().result(timeout=120)
    finally:
        store.close()


def start(index: int, url: str, concurrency: int, events: queue.Queue[str]) -> Host:
    """Start one ``dsh-schedule -v serve --store URL`` process and read its output."""
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
        env=dict(os.environ, PYTHONIOENCODING="utf-8"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    host = Host(index, popen)
    assert popen.stdout is not None and popen.stderr is not None
    threading.Thread(target=_out, args=(host, popen.stdout, events), daemon=True).start()
    threading.Thread(target=_err, args=(host, popen.stderr), daemon=True).start()
    return host


def _out(host: Host, stream: IO[str], events: queue.Queue[str]) -> None:
    for line in stream:
        if line.startswith("serving "):
            host.ready.set()
        if " reminder " not in line:
            continue
        at_text, _, rest = line.partition("  reminder ")
        session_id = rest.split(" of session ")[1].split(" ")[0]
        due_text = rest.split("(due ")[1].split(")")[0]
        host.presented.append((session_id, parse_instant(due_text), parse_instant(at_text)))
        events.put(session_id)


def _err(host: Host, stream: IO[str]) -> None:
    for line in stream:
        if "woke session '" in line:
            host.woken += 1


# --- CPU time from /proc ---------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def process_cpu_s(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds of a live process (``reaped``: with its waited-for children's); 0 if gone."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if reaped:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks * _TICK_S


def server_cpu_s(postmaster: int | None) -> float | None:
    """The CPU seconds of a local server: its postmaster (with its reaped children) and
    every live child; None when the server is not on this machine."""
    if postmaster is None or _stat(postmaster) is None:
        return None
    total = process_cpu_s(postmaster, reaped=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and int(fields[1]) == postmaster:
                total += process_cpu_s(int(entry.name))
    return total


def find_postmaster(url: str) -> int | None:
    """The pid of the server's postmaster, when that process is on this machine."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    fields = None if row is None else _stat(int(row[0]))
    return None if fields is None else int(fields[1])


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --- one run ---------------------------------------------------------------------------------


def run(admin: str, sessions: int, hosts: int, args: argparse.Namespace) -> dict[str, Any]:
    """One herd on a fresh database with ``hosts`` serve processes; its figures."""
    name = f"dsh_fleet_herd_{uuid.uuid4().hex[:8]}"
    load_at_start = load_average()
    url = database(admin, name)
    serves: list[Host] = []
    try:
        built = time.monotonic()
        store, ids = build_sessions(url, sessions)
        build_s = time.monotonic() - built
        due_ms = (wall_clock_ms() // 1000 + math.ceil(args.lead)) * 1000  # a whole second
        add_reminders(store, ids, due_ms)
        postmaster = find_postmaster(url)
        events: queue.Queue[str] = queue.Queue()
        children_before = _children_cpu_s()
        serves = [start(i, url, args.concurrency, events) for i in range(hosts)]
        ready_by = time.monotonic() + max(0.0, (due_ms - wall_clock_ms()) / 1000)
        for serve in serves:
            serve.ready.wait(max(0.0, ready_by - time.monotonic()))
        ready_late = wall_clock_ms() > due_ms or not all(s.ready.is_set() for s in serves)
        if ready_late:
            print("warning: the hosts were not all serving by the due second; raise --lead")
        while wall_clock_ms() < due_ms:
            time.sleep(min(0.05, max(0.0, (due_ms - wall_clock_ms()) / 1000)))
        hosts_at_due = sum(process_cpu_s(s.popen.pid) for s in serves)
        server_at_due = server_cpu_s(postmaster)
        seen: Counter[str] = Counter()
        deadline = time.monotonic() + args.timeout
        while len(seen) < len(ids) and time.monotonic() < deadline:
            try:
                seen[events.get(timeout=1)] += 1
            except queue.Empty:
                if any(serve.popen.poll() is not None for serve in serves):
                    break  # a host died: what it did not present is a loss
        hosts_at_end = sum(process_cpu_s(s.popen.pid) for s in serves)
        server_at_end = server_cpu_s(postmaster)
        load = load_average()
        _wait_for_turns(url, deadline)
        for serve in serves:
            if serve.popen.poll() is None:
                serve.popen.send_signal(signal.SIGTERM)
        codes = [serve.popen.wait(timeout=120) for serve in serves]
        children_s = _children_cpu_s() - children_before
        counts = store_counts(url, ids)
    finally:
        for serve in serves:
            if serve.popen.poll() is None:
                serve.popen.kill()
                serve.popen.wait()
        if not args.keep:
            database(admin, name, drop=True)
    index_rows = counts.pop("__index_rows__")[0]
    presented = [p for serve in serves for p in serve.presented]
    last_ms = max((p[2] for p in presented), default=due_ms)
    span_s = max(0.001, (last_ms - due_ms) / 1000)
    delivered = len(presented)
    doubles = sum(1 for d, _, _ in counts.values() if d > 1)
    losses = sum(1 for d, i, c in counts.values() if d < 1 or i < d or c < i)
    per = max(1, delivered)
    server_s = (
        None if server_at_due is None or server_at_end is None else server_at_end - server_at_due
    )
    return {
        "hosts": hosts,
        "sessions": len(ids),
        "build_s": round(build_s, 1),
        "due_ms": due_ms,
        "ready_late": ready_late,
        "exit_codes": codes,
        "presented": delivered,
        "presented_sessions": len(seen),
        "span_s": round(span_s, 3),
        "reminders_per_s": delivered / span_s,
        "lateness": distribution([float(p[2] - p[1]) for p in presented]),
        "host_cpu_s": hosts_at_end - hosts_at_due,
        "host_cpu_ms_per_delivery": (hosts_at_end - hosts_at_due) * 1000 / per,
        "children_cpu_s": children_s,
        "children_cpu_ms_per_delivery": children_s * 1000 / per,
        "server_cpu_s": server_s,
        "server_cpu_ms_per_delivery": None if server_s is None else server_s * 1000 / per,
        "split": [len(serve.presented) for serve in serves],
        "woken": [serve.woken for serve in serves],
        "double_deliveries": doubles,
        "losses": losses,
        "index_rows_left": index_rows,
        "load_average_1m_at_start": None if load_at_start is None else load_at_start[0],
        "load_average_1m": None if load is None else load[0],
    }


def _wait_for_turns(url: str, deadline: float) -> None:
    """Poll until nothing is due any more: the last turns complete after they presented."""
    store = PostgresEventStore(url)
    try:
        while store.due_entries() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        store.close()


def _ratio(last: float | None, first: float | None) -> float | None:
    if last is None or first is None or first == 0:
        return None
    return last / first


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns (and writes) the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--store", required=True, help="postgresql:// URL of an admin database")
    parser.add_argument("--sessions", type=int, default=3_000, help="closed sessions (3,000)")
    parser.add_argument(
        "--hosts", type=int, nargs="+", default=[1, 3], help="host counts to run (1 3)"
    )
    parser.add_argument(
        "--lead",
        type=float,
        default=15.0,
        help="seconds from the stored sessions to their due second (default 15: the "
        "reminders are appended and the hosts started meanwhile)",
    )
    parser.add_argument("--concurrency", type=int, default=8, help="activations per host (8)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.lead = 24, 8.0
    quiet_logs()
    result = header("fleet_herd", argv)
    result["machine"] = {"nproc": os.cpu_count(), "load_average_at_start": load_average()}
    runs = [run(args.store, args.sessions, hosts, args) for hosts in args.hosts]
    first, last = runs[0], runs[-1]
    result["runs"] = runs
    result["ratio"] = {
        "hosts": f"{last['hosts']}/{first['hosts']}",
        "reminders_per_s": _ratio(last["reminders_per_s"], first["reminders_per_s"]),
        "p99_lateness": _ratio(last["lateness"]["p99_ms"], first["lateness"]["p99_ms"]),
        "host_cpu_per_delivery": _ratio(
            last["host_cpu_ms_per_delivery"], first["host_cpu_ms_per_delivery"]
        ),
        "server_cpu_per_delivery": _ratio(
            last["server_cpu_ms_per_delivery"], first["server_cpu_ms_per_delivery"]
        ),
    }
    met = all(
        r["double_deliveries"] == 0 and r["losses"] == 0 and r["index_rows_left"] == 0 for r in runs
    )
    result["targets"] = {"each_reminder_once": {"met": met}}
    result["load_average_at_end"] = load_average()
    print_table(
        [
            "hosts",
            "reminders/s",
            "p50 late ms",
            "p99 late ms",
            "host CPU ms/del",
            "children CPU ms/del",
            "server CPU ms/del",
            "split",
            "doubles",
            "losses",
            "load 1m start→end",
        ],
        [
            [
                str(r["hosts"]),
                fmt(r["reminders_per_s"], 1),
                fmt(r["lateness"]["p50_ms"], 0),
                fmt(r["lateness"]["p99_ms"], 0),
                fmt(r["host_cpu_ms_per_delivery"], 2),
                fmt(r["children_cpu_ms_per_delivery"], 2),
                fmt(r["server_cpu_ms_per_delivery"], 2),
                "/".join(str(n) for n in r["split"]),
                fmt(r["double_deliveries"]),
                fmt(r["losses"]),
                f"{fmt(r['load_average_1m_at_start'], 2)}→{fmt(r['load_average_1m'], 2)}",
            ]
            for r in runs
        ],
    )
    ratio = result["ratio"]
    print(
        f"{args.sessions} reminders due in one second, {os.cpu_count()} cores; "
        f"{ratio['hosts']} hosts: reminders/s x{fmt(ratio['reminders_per_s'], 2)}, "
        f"p99 lateness x{fmt(ratio['p99_lateness'], 2)}, "
        f"host CPU per delivery x{fmt(ratio['host_cpu_per_delivery'], 2)}, "
        f"server CPU per delivery x{fmt(ratio['server_cpu_per_delivery'], 2)}; "
        f"each once: {verdict(met)}"
    )
    write_results(args.results, "fleet_herd", result)
    return result


if __name__ == "__main__":
    main()
