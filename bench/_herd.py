"""The herd mode of :mod:`bench.wake_scale`: ``serve`` against a plain-SQLite delivery floor.

One run builds the closed sessions once (``--sessions``, each with one
conversation event), then for each case adds ``--due`` ``at`` reminders to a
copy of them: **herd**, all due at the same instant; **spread**, due evenly over
``--spread`` seconds. Each case's store is copied byte for byte, and on the two
identical copies run:

* **serve**: :class:`~host_bridge.cli._serve.Server` as ``dsh-schedule serve``
  runs it (its default concurrency and quiet period), on the real clock, until
  every reminder was presented, then stopped;
* **anchor**: one thread that, for each due session in due order, reads the
  session's whole log with plain ``sqlite3`` and decodes every payload, then
  commits the reminder's ``inbox/queued`` entry and ``dispatch``, and then its
  turn (``message`` user, ``message`` assistant, ``turn/completed``), each its
  own transaction on a WAL, ``synchronous=FULL`` connection, the second also
  dropping the session's due index row; the rows are built with the project's
  own functions, as the embedded host writes them (the run checks that they are
  the same as serve's). Its clock is shifted so that it starts at the first due
  time (it needs no lead).

Per contender and case: wake-ups/s (reminders presented per second from the
first due time to the last presentation), CPU and context switches of the
process per wake-up (from the first due time through the stop), lateness of
each presentation and the 1-minute load average; then serve's figures against
the anchor's. Correctness comes from each store afterwards: every reminder has
exactly one dispatch, one inbox entry and one completed turn, and none was
presented (nor dispatched) before it was due.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._common import (
    BenchError,
    at_reminder,
    data_root,
    distribution,
    fmt,
    header,
    load_average,
    machine_info,
    print_machine,
    print_table,
    quiet_logs,
    verdict,
    write_results,
)
from host_bridge._plugin import WakePolicy
from host_bridge.cli._serve import Presented, Server
from host_bridge.embedded.agents import MESSAGE_EVENT
from host_bridge.embedded.codec import decode_payload, encode_payload
from host_bridge.embedded.inbox import (
    INBOX_EVENT,
    TURN_COMPLETED_EVENT,
    completed_data,
    queued_data,
)
from host_bridge.embedded.paths import STORE_FILE_NAME, store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.embedded.stores._sqlite import BUSY_TIMEOUT_MS
from host_bridge.protocols import (
    SessionEvent,
    SessionHeader,
    TextBlock,
    UserMessage,
    wall_clock_ms,
)
from messages import (
    REMINDER_SOURCE,
    SCHEDULE_CHANGE_TYPE,
    AfterRecord,
    AtRecord,
    CreateChange,
    DispatchChange,
    decode_schedule_change,
    render_reminder_framing,
)
from messages._instant import parse_instant

NAME = "wake_scale_herd"

SERVE_CONCURRENCY = 8
"""Sessions ``dsh-schedule serve`` wakes at the same time by default (``--concurrency``)."""

_STORE_ENV = "DSH_SCHEDULE_STORE"
_BATCH = 2_000  # sessions per flush while building


# --- the stores ------------------------------------------------------------------------------


def due_indexes(sessions: int, due: int) -> list[int]:
    """Which of ``sessions`` session numbers get a reminder: ``due`` of them, evenly apart."""
    every = max(1, sessions // max(1, due))
    return [index for index in range(0, sessions, every)][:due]


def session_name(index: int) -> str:
    """The id of session number ``index``."""
    return f"s{index:06d}"


def store_sessions(path: Path, sessions: Iterable[tuple[str, list[SessionEvent]]]) -> int:
    """Create each ``(id, events)`` session in the store at ``path`` (the store API, no host)."""
    store = SqliteEventStore(path)
    written: list[str] = []
    try:
        for session_id, events in sessions:
            store.create_session(
                SessionHeader(session_id), [(e, encode_payload(e.data)) for e in events]
            )
            written.append(session_id)
            if len(written) % _BATCH == 0:
                store.flush_all().result(timeout=120)
                for done in written[-_BATCH:]:
                    store.release_session(done)
        store.flush_all().result(timeout=120)
    finally:
        store.close()
    return len(written)


def _hello(at_ms: int) -> SessionEvent:
    return SessionEvent("message", 0, at_ms, {"role": "user", "content": "hi"})


def build_closed(path: Path, sessions: int, skip: set[int], at_ms: int) -> int:
    """The closed sessions without a reminder: every number below ``sessions`` not in ``skip``."""
    return store_sessions(
        path,
        ((session_name(i), [_hello(at_ms)]) for i in range(sessions) if i not in skip),
    )


def add_reminders(path: Path, indexes: Sequence[int], dues_ms: Sequence[int]) -> dict[str, int]:
    """Create the sessions ``indexes``, each with one ``at`` reminder due at ``dues_ms[i]``."""
    at_ms = wall_clock_ms()
    dues = {session_name(i): due for i, due in zip(indexes, dues_ms, strict=True)}

    def sessions() -> Iterable[tuple[str, list[SessionEvent]]]:
        for slot, (session_id, due_ms) in enumerate(dues.items()):
            create = at_reminder(1, "schedule-1", f"reminder {slot}", due_ms, at_ms)
            yield session_id, [_hello(at_ms), create]

    store_sessions(path, sessions())
    return dues


def copy_store(source: Path, target: Path) -> None:
    """Copy a closed data directory (the SQLite file and its companions) to ``target``."""
    if (source / f"{STORE_FILE_NAME}-wal").exists():
        raise BenchError(f"{source} is still open (it has a write-ahead log)")
    shutil.copytree(source, target)


# --- measuring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """The process's CPU time and context switches at one moment (all threads)."""

    cpu_s: float
    voluntary: int
    involuntary: int

    @classmethod
    def now(cls) -> Usage:
        """``getrusage(RUSAGE_SELF)`` now."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return cls(usage.ru_utime + usage.ru_stime, usage.ru_nvcsw, usage.ru_nivcsw)

    def since(self, earlier: Usage) -> dict[str, float | int]:
        """CPU seconds and switches between ``earlier`` and this."""
        return {
            "cpu_s": self.cpu_s - earlier.cpu_s,
            "voluntary_switches": self.voluntary - earlier.voluntary,
            "involuntary_switches": self.involuntary - earlier.involuntary,
        }


def _wait_until(wall_ms: int, clock: Callable[[], int] = wall_clock_ms) -> None:
    """Block until ``clock()`` reaches ``wall_ms`` (a bench's own wait for a due time)."""
    while (left := wall_ms - clock()) > 0:
        time.sleep(left / 1000)


def _figures(
    delivered: int,
    first_due_ms: int,
    last_presented_ms: int,
    lateness_ms: Sequence[float],
    usage: dict[str, float | int],
) -> dict[str, Any]:
    span_s = max(0.001, (last_presented_ms - first_due_ms) / 1000)
    per = max(1, delivered)
    return {
        "delivered": delivered,
        "span_s": round(span_s, 3),
        "wakeups_per_s": delivered / span_s,
        "cpu_ms_per_wakeup": usage["cpu_s"] * 1000 / per,
        "switches_per_wakeup": (usage["voluntary_switches"] + usage["involuntary_switches"]) / per,
        "voluntary_per_wakeup": usage["voluntary_switches"] / per,
        "involuntary_per_wakeup": usage["involuntary_switches"] / per,
        "usage": usage,
        "lateness": distribution(lateness_ms),
        "early": sum(1 for value in lateness_ms if value < 0),
    }


class _Presentations:
    """``on_presented`` of the served store: when each reminder was presented."""

    def __init__(self, expected: int) -> None:
        self._expected = expected
        self._lock = threading.Lock()
        self.lateness_ms: list[float] = []
        self.sessions: list[str] = []
        self.last_ms = 0
        self.done = threading.Event()

    def __call__(self, item: Presented) -> None:
        now = wall_clock_ms()
        with self._lock:
            self.lateness_ms.append(now - parse_instant(item.occurrence_at))
            self.sessions.append(item.session_id)
            self.last_ms = max(self.last_ms, now)
            if len(self.sessions) >= self._expected:
                self.done.set()


def run_serve(
    data_dir: Path, dues: dict[str, int], *, quiet_s: float, timeout_s: float
) -> dict[str, Any]:
    """``Server`` on ``data_dir`` until every reminder in ``dues`` was presented, then stopped."""
    first_due = min(dues.values())
    presented = _Presentations(len(dues))
    policy = WakePolicy(max_concurrent=SERVE_CONCURRENCY, quiet_period_ms=int(quiet_s * 1000))
    server = Server(data_dir, policy=policy, on_presented=presented, echo=lambda line: None)
    before_start = Usage.now()
    started_ms = wall_clock_ms()
    server.start()
    try:
        after_start = Usage.now()
        lead_ms = first_due - wall_clock_ms()
        _wait_until(first_due)
        at_due = Usage.now()
        finished = presented.done.wait(timeout=timeout_s)
        at_presented = Usage.now()
    finally:
        stop_began = time.monotonic()
        cut = server.stop(timeout=60.0)
        stop_s = time.monotonic() - stop_began
    after_stop = Usage.now()
    figures = _figures(
        len(presented.sessions),
        first_due,
        presented.last_ms,
        presented.lateness_ms,
        after_stop.since(at_due),
    )
    return {
        "contender": "serve",
        **figures,
        "all_presented": finished,
        "presented_twice": len(presented.sessions) - len(set(presented.sessions)),
        "presented_count": server.presented_count,
        "cut_turns": len(cut),
        "lead_at_start_ms": lead_ms,
        "started_before_due": started_ms < first_due,
        "start": after_start.since(before_start),
        "idle_before_due": at_due.since(after_start),
        "to_last_presented": at_presented.since(at_due),
        "stop_s": round(stop_s, 3),
        "load_average_at_end": load_average(),
    }


def _anchor_connection(path: Path) -> sqlite3.Connection:
    """A connection with the store's write settings: WAL, ``synchronous=FULL``, busy timeout."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
    if str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower() != "wal":
        raise BenchError(f"{path} refused WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


_INSERT = "INSERT INTO events(session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)"


def _commit(
    conn: sqlite3.Connection,
    rows: Sequence[tuple[str, int, str, int, bytes]],
    *,
    index: str | None = None,
) -> None:
    """One transaction: ``rows``, then the due index row of session ``index`` dropped."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(_INSERT, rows)
        if index is not None:
            conn.execute("DELETE FROM due_index WHERE session_id = ?", (index,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def anchor_deliver(
    conn: sqlite3.Connection, session_id: str, clock: Callable[[], int]
) -> list[tuple[str, int]]:
    """Deliver the due one-shot reminders of one session as plainly as SQLite allows.

    Reads and decodes the whole log, finds the active one-shots due by ``clock()``,
    then per reminder commits its inbox entry and dispatch, and then its turn with,
    once nothing else is active, the session's due index row dropped (a real path
    must keep the index too: the minimum of that is one statement).
    Returns ``(schedule_id, presented_ms)`` per reminder, ``presented_ms`` taken
    after the first commit (where ``serve`` presents).
    """
    rows = conn.execute(
        "SELECT seq, type, time, data FROM events WHERE session_id = ? ORDER BY seq",
        (session_id,),
    ).fetchall()
    active: dict[str, AfterRecord | AtRecord] = {}
    for _seq, type_, _time, data in rows:
        value = decode_payload(data)
        if type_ != SCHEDULE_CHANGE_TYPE:
            continue
        change = decode_schedule_change(value)
        if isinstance(change, CreateChange):
            if isinstance(change.schedule, AfterRecord | AtRecord):
                active[change.id] = change.schedule
        else:
            active.pop(change.id, None)
    seq = len(rows)
    now = clock()
    presented: list[tuple[str, int]] = []
    due = sorted(
        (r for r in active.values() if r.target_ms <= now), key=lambda r: (r.target_ms, r.id)
    )
    for number, record in enumerate(due, 1):
        last = number == len(active)  # nothing left active: the index row goes
        message = UserMessage((TextBlock(render_reminder_framing(record)),), dict(REMINDER_SOURCE))
        inbox, now = seq, clock()
        _commit(
            conn,
            [
                (session_id, inbox, INBOX_EVENT, now, encode_payload(queued_data(message))),
                (
                    session_id,
                    inbox + 1,
                    SCHEDULE_CHANGE_TYPE,
                    now,
                    encode_payload(DispatchChange(record.id).to_json()),
                ),
            ],
        )
        presented.append((record.id, clock()))
        user = {
            "role": "user",
            "content": message.text,
            "source": dict(message.source),
            "inbox": inbox,
        }
        reply = {"role": "assistant", "content": f"Reminder presented: {record.prompt}"}
        now = clock()
        _commit(
            conn,
            [
                (session_id, inbox + 2, MESSAGE_EVENT, now, encode_payload(user)),
                (session_id, inbox + 3, MESSAGE_EVENT, now, encode_payload(reply)),
                (
                    session_id,
                    inbox + 4,
                    TURN_COMPLETED_EVENT,
                    now,
                    encode_payload(completed_data(inbox, failed=False)),
                ),
            ],
            index=session_id if last else None,
        )
        seq = inbox + 5
    return presented


def run_anchor(data_dir: Path, dues: dict[str, int]) -> dict[str, Any]:
    """The anchor on ``data_dir``: one thread delivering every due session in due order.

    Its clock is the wall clock shifted so that it starts at the first due time;
    it waits (on that clock) for each later due time.
    """
    first_due = min(dues.values())
    shift = wall_clock_ms() - first_due

    def clock() -> int:
        return wall_clock_ms() - shift

    lateness: list[float] = []
    sessions: list[str] = []
    last = [first_due]
    failure: list[BaseException] = []

    def deliver_all() -> None:
        try:
            conn = _anchor_connection(store_path(data_dir))
            try:
                order = conn.execute(
                    "SELECT session_id, due_ms FROM due_index ORDER BY due_ms, session_id"
                ).fetchall()
                for session_id, due_ms in order:
                    _wait_until(due_ms, clock)
                    for _schedule_id, presented_ms in anchor_deliver(conn, session_id, clock):
                        lateness.append(presented_ms - dues[session_id])
                        sessions.append(session_id)
                        last[0] = presented_ms
            finally:
                conn.close()
        except BaseException as error:
            failure.append(error)

    before = Usage.now()
    worker = threading.Thread(target=deliver_all, name="anchor")
    worker.start()
    worker.join()
    after = Usage.now()
    if failure:
        raise BenchError(f"the anchor failed: {failure[0]!r}") from failure[0]
    figures = _figures(len(sessions), first_due, last[0], lateness, after.since(before))
    return {
        "contender": "anchor",
        **figures,
        "all_presented": len(sessions) == len(dues),
        "presented_twice": len(sessions) - len(set(sessions)),
        "load_average_at_end": load_average(),
    }


# --- correctness -------------------------------------------------------------------------------


def check_store(path: Path, dues: dict[str, int]) -> dict[str, int]:
    """Per-session counts read from the store: who got exactly one delivery, who none or more."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT session_id, seq, type, time, data FROM events WHERE type IN (?, ?, ?)"
            " ORDER BY session_id, seq",
            (SCHEDULE_CHANGE_TYPE, INBOX_EVENT, TURN_COMPLETED_EVENT),
        ).fetchall()
        (index_left,) = conn.execute("SELECT COUNT(*) FROM due_index").fetchone()
    finally:
        conn.close()
    dispatches: dict[str, int] = {}
    inbox: dict[str, set[int]] = {}
    completed: dict[str, set[int]] = {}
    early_dispatches = 0
    for session_id, seq, type_, time_ms, data in rows:
        value = decode_payload(data)
        if type_ == INBOX_EVENT:
            inbox.setdefault(session_id, set()).add(seq)
        elif type_ == TURN_COMPLETED_EVENT:
            assert isinstance(value, dict)
            completed.setdefault(session_id, set()).add(int(value["inbox"]))
        elif isinstance(value, dict) and value.get("operation") == "dispatch":
            dispatches[session_id] = dispatches.get(session_id, 0) + 1
            if time_ms < dues.get(session_id, 0):
                early_dispatches += 1
    exact = 0
    for session_id in dues:
        entries = inbox.get(session_id, set())
        done = entries & completed.get(session_id, set())
        if dispatches.get(session_id, 0) == 1 and len(entries) == 1 and len(done) == 1:
            exact += 1
    touched = set(dispatches) | set(inbox) | set(completed)
    return {
        "reminders": len(dues),
        "exactly_once": exact,
        "dispatches": sum(dispatches.values()),
        "inbox_entries": sum(len(v) for v in inbox.values()),
        "completed_turns": sum(len(v & completed.get(k, set())) for k, v in inbox.items()),
        "sessions_without_reminder_touched": len(touched - set(dues)),
        "early_dispatches": early_dispatches,
        "index_rows_left": int(index_left),
    }


def appended_rows(path: Path, session_id: str, after: int) -> list[tuple[str, Any]]:
    """``(type, data)`` of a session's events after seq ``after`` (times left out)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, after),
        ).fetchall()
    finally:
        conn.close()
    return [(type_, decode_payload(data)) for type_, data in rows]


def _exact(run: dict[str, Any], store: dict[str, int]) -> bool:
    return bool(
        run["all_presented"]
        and run["presented_twice"] == 0
        and run["early"] == 0
        and store["exactly_once"] == store["reminders"]
        and store["sessions_without_reminder_touched"] == 0
        and store["early_dispatches"] == 0
    )


# --- the run -----------------------------------------------------------------------------------


def run_case(
    root: Path,
    closed: Path,
    *,
    case: str,
    indexes: Sequence[int],
    spread_ms: int,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One case: add the reminders to a copy of the closed sessions, copy it, run both."""
    base = root / f"{case}-store"
    copy_store(closed, base)
    count = len(indexes)
    built = time.monotonic()
    first_due = wall_clock_ms() + int(args.lead * 1000)
    first_due -= first_due % 1000  # on a whole second
    dues_ms = [first_due + (spread_ms * slot) // max(1, count) for slot in range(count)]
    dues = add_reminders(store_path(base), indexes, dues_ms)
    serve_dir, anchor_dir = root / f"{case}-serve", root / f"{case}-anchor"
    copy_store(base, serve_dir)
    copy_store(base, anchor_dir)
    shutil.rmtree(base)
    prepare_s = time.monotonic() - built
    load_before = load_average()
    serve = run_serve(
        serve_dir, dues, quiet_s=args.quiet, timeout_s=args.lead + spread_ms / 1000 + 600
    )
    serve["load_average_at_start"] = load_before
    serve_store = check_store(store_path(serve_dir), dues)
    load_before = load_average()
    anchor = run_anchor(anchor_dir, dues)
    anchor["load_average_at_start"] = load_before
    anchor_store = check_store(store_path(anchor_dir), dues)
    first = min(dues, key=lambda s: (dues[s], s))
    same_rows = appended_rows(store_path(serve_dir), first, 1) == appended_rows(
        store_path(anchor_dir), first, 1
    )
    shutil.rmtree(serve_dir)
    shutil.rmtree(anchor_dir)
    return {
        "case": case,
        "reminders": count,
        "spread_s": spread_ms / 1000,
        "prepare_s": round(prepare_s, 2),
        "serve": serve | {"store": serve_store, "exact": _exact(serve, serve_store)},
        "anchor": anchor | {"store": anchor_store, "exact": _exact(anchor, anchor_store)},
        "anchor_rows_like_serve": same_rows,
        "serve_vs_anchor": {
            "wakeups_per_s": serve["wakeups_per_s"] / max(1e-9, anchor["wakeups_per_s"]),
            "cpu_per_wakeup": serve["cpu_ms_per_wakeup"] / max(1e-9, anchor["cpu_ms_per_wakeup"]),
            "switches_per_wakeup": serve["switches_per_wakeup"]
            / max(1e-9, anchor["switches_per_wakeup"]),
        },
    }


def _load(value: tuple[float, float, float] | None) -> str:
    return "?" if value is None else f"{value[0]:.2f}"


def print_cases(cases: Sequence[dict[str, Any]]) -> None:
    """The table of both contenders per case, then serve against the anchor."""
    rows: list[list[str]] = []
    for case in cases:
        for name in ("serve", "anchor"):
            run = case[name]
            late = run["lateness"]
            rows.append(
                [
                    f"{case['case']} {name}",
                    fmt(run["delivered"]),
                    fmt(run["wakeups_per_s"], 1),
                    fmt(run["cpu_ms_per_wakeup"], 3),
                    fmt(run["switches_per_wakeup"], 1),
                    fmt(late["p50_ms"], 1),
                    fmt(late["p99_ms"], 1),
                    verdict(run["exact"]),
                    _load(run["load_average_at_start"]),
                    _load(run["load_average_at_end"]),
                ]
            )
    print_table(
        [
            "case",
            "delivered",
            "wake-ups/s",
            "CPU ms/wake",
            "ctx sw/wake",
            "p50 late ms",
            "p99 late ms",
            "each once",
            "load 1m before",
            "after",
        ],
        rows,
    )
    print_table(
        ["serve / anchor", "wake-ups/s", "CPU per wake", "ctx sw per wake", "rows alike"],
        [
            [
                case["case"],
                fmt(case["serve_vs_anchor"]["wakeups_per_s"], 3),
                fmt(case["serve_vs_anchor"]["cpu_per_wakeup"], 2),
                fmt(case["serve_vs_anchor"]["switches_per_wakeup"], 2),
                fmt(case["anchor_rows_like_serve"]),
            ]
            for case in cases
        ],
    )
    for case in cases:
        serve = case["serve"]
        print(
            f"{case['case']}: {case['reminders']} reminders over {case['spread_s']:g} s; serve "
            f"started {serve['lead_at_start_ms'] / 1000:.1f} s before the first due time "
            f"(start {serve['start']['cpu_s'] * 1000:.0f} ms CPU), stopped in "
            f"{serve['stop_s']:.1f} s; "
            f"serve store {serve['store']}; anchor store {case['anchor']['store']}"
        )


def main(args: argparse.Namespace, argv: Sequence[str] | None) -> dict[str, Any]:
    """The herd mode of :mod:`bench.wake_scale`; writes ``wake_scale_herd.json``."""
    if os.environ.get(_STORE_ENV):
        raise BenchError(f"unset ${_STORE_ENV}: serve would open that store instead")
    quiet_logs()
    result = header(NAME, argv)
    indexes = due_indexes(args.sessions, args.due)
    with data_root(args.data, "dsh-wake-herd-") as root:
        result["machine"] = machine_info(root)
        print_machine(result["machine"])
        closed = root / "closed"
        began = time.monotonic()
        build_closed(store_path(closed), args.sessions, set(indexes), wall_clock_ms())
        result["build_s"] = round(time.monotonic() - began, 1)
        cases = [
            run_case(root, closed, case="herd", indexes=indexes, spread_ms=0, args=args),
            run_case(
                root,
                closed,
                case="spread",
                indexes=indexes,
                spread_ms=int(args.spread * 1000),
                args=args,
            ),
        ]
    result["parameters"] = {
        "sessions": args.sessions,
        "due": len(indexes),
        "spread_s": args.spread,
        "lead_s": args.lead,
        "quiet_period_s": args.quiet,
        "serve_concurrency": SERVE_CONCURRENCY,
    }
    result["cases"] = cases
    result["targets"] = {
        f"{case['case']}_{name}_each_once": {"met": case[name]["exact"]}
        for case in cases
        for name in ("serve", "anchor")
    }
    result["load_average_at_end"] = load_average()
    print(
        f"{args.sessions} sessions ({len(indexes)} with a reminder), closed sessions built in "
        f"{result['build_s']} s; serve: concurrency {SERVE_CONCURRENCY}, quiet period "
        f"{args.quiet:g} s; CPU and switches of the whole process, from the first due time "
        "through the stop (serve) or the last commit (anchor)"
    )
    print_cases(cases)
    path = write_results(args.results, NAME, result)
    print(f"\nresults: {path}")
    return result
