"""Commit rate of the embedded SQLite store compared with the raw fsync rate of its disk.

Usage::

    python bench/store_commit_rate.py [--data DIR] [--seconds 2] [--sessions 50]

Prints, for the disk holding ``--data`` (a fresh temporary directory by default):

1. raw fsync rate: write a few bytes to a file and ``fsync`` it, repeatedly;
2. sequential flushes/s for one session: append one event, flush, wait, repeat
   (each flush needs its own commit, so this is bounded by the fsync rate);
3. aggregate flushes/s with N sessions flushing concurrently from N threads,
   and commits per flush (group commit makes this well below 1).

Phases 2 and 3 run twice: straight on the persistence listener (``store``), and
through live sessions (``session``: each append goes through the session's
SessionActor mailbox and each flush is a ``SessionStore.flush`` barrier).

Figures only; nothing is asserted. Each phase runs for ``--seconds``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.sessions import EmbeddedSession, EmbeddedSessionStore
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import SessionEvent, SessionHeader

PAYLOAD = {"version": 1, "operation": "dispatch", "id": "schedule-1"}


def raw_fsync_rate(directory: Path, seconds: float) -> float:
    """fsyncs per second of a small file in ``directory``."""
    path = directory / "fsync-probe.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        count = 0
        deadline = time.perf_counter() + seconds
        start = time.perf_counter()
        while time.perf_counter() < deadline:
            os.write(fd, b"0123456789abcdef")
            os.fsync(fd)
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


SQLITE_ROW_BYTES = 200
"""Payload of one row in :func:`sqlite_commit_rate` (about a create's msgpack event)."""


def sqlite_commit_rate(directory: Path, seconds: float) -> float:
    """INSERT + COMMIT per second of one thread on a fresh SQLite file in ``directory``.

    The same settings as the store (WAL, ``synchronous=FULL``), one row of
    :data:`SQLITE_ROW_BYTES` per transaction: the realistic ceiling of anything
    that needs one durable commit per operation on this file system.
    """
    path = directory / "commit-probe.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, at INTEGER, payload BLOB)")
        payload = os.urandom(SQLITE_ROW_BYTES)
        count = 0
        deadline = time.perf_counter() + seconds
        start = time.perf_counter()
        while time.perf_counter() < deadline:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO rows(at, payload) VALUES (?, ?)", (time.time_ns(), payload))
            conn.execute("COMMIT")
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


class _Appender:
    """Appends one event and flushes it, straight on the store or through a live session."""

    def __init__(
        self, store: SqliteEventStore, session_id: str, live: EmbeddedSessionStore | None
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.seq = 0
        self.payload = encode_payload(PAYLOAD)
        self.live = live
        self.session: EmbeddedSession | None = None
        if live is not None:
            self.session = live.create(session_id)
        else:
            store.create_session(SessionHeader(session_id))

    def record(self) -> None:
        if self.session is not None:
            self.session.append("message", PAYLOAD)
            return
        event = SessionEvent("schedule/change", self.seq, int(time.time() * 1000), PAYLOAD)
        self.store.record_append(self.session_id, event, self.payload)
        self.seq += 1

    def flush(self) -> bool:
        if self.live is not None and self.session is not None:
            return self.live.flush(self.session).result(30)
        return self.store.flush(self.session_id).result(30)


def sequential(
    store: SqliteEventStore, seconds: float, live: EmbeddedSessionStore | None = None
) -> tuple[float, float, float]:
    """(flushes/s, commits per flush, median latency ms) for one session flushing in a loop."""
    appender = _Appender(store, f"sequential-{live is not None}", live)
    assert appender.flush()
    commits0, flushes = store.commit_count, 0
    latencies: list[float] = []
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        appender.record()
        began = time.perf_counter()
        if appender.flush() is not True:
            raise RuntimeError("flush did not resolve True")
        latencies.append(time.perf_counter() - began)
        flushes += 1
    elapsed = time.perf_counter() - start
    commits = store.commit_count - commits0
    return flushes / elapsed, commits / flushes, statistics.median(latencies) * 1000


def concurrent(
    store: SqliteEventStore, sessions: int, seconds: float, live: EmbeddedSessionStore | None = None
) -> tuple[float, float, float]:
    """(flushes/s, commits per flush, median latency ms) for N threads, one session each."""
    appenders = [
        _Appender(store, f"concurrent-{live is not None}-{i}", live) for i in range(sessions)
    ]
    assert store.flush_all().result(30)
    start_line = threading.Barrier(sessions + 1)
    stop = threading.Event()
    counts = [0] * sessions
    latencies: list[list[float]] = [[] for _ in range(sessions)]

    def worker(index: int) -> None:
        appender = appenders[index]
        start_line.wait()
        while not stop.is_set():
            appender.record()
            began = time.perf_counter()
            if appender.flush() is not True:
                raise RuntimeError("flush did not resolve True")
            latencies[index].append(time.perf_counter() - began)
            counts[index] += 1

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(sessions)]
    for thread in threads:
        thread.start()
    commits0 = store.commit_count
    start_line.wait()
    start = time.perf_counter()
    time.sleep(seconds)  # measuring a duration, not synchronising
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    flushes = sum(counts)
    commits = store.commit_count - commits0
    all_latencies = [value for per_thread in latencies for value in per_thread]
    return flushes / elapsed, commits / flushes, statistics.median(all_latencies) * 1000


def main() -> None:
    """Run the three measurements and print them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--data", type=Path, help="directory on the disk to measure (default: a temp dir)"
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each phase")
    parser.add_argument("--sessions", type=int, default=50, help="concurrent sessions/threads")
    args = parser.parse_args()

    owned = args.data is None
    data: Path = Path(tempfile.mkdtemp(prefix="dsh-bench-")) if owned else args.data
    work = Path(tempfile.mkdtemp(prefix="store-commit-rate-", dir=data))
    try:
        print(f"data directory: {work}")
        fsyncs = raw_fsync_rate(work, args.seconds)
        print(f"raw fsync rate:            {fsyncs:10.0f} fsync/s")
        inserts = sqlite_commit_rate(work, args.seconds)
        print(f"SQLite insert+commit, one thread: {inserts:10.0f} commits/s")
        with SqliteEventStore(store_path(work)) as store:
            live = EmbeddedSessionStore(store)
            try:
                for path, through in (("store", None), ("session", live)):
                    rate, per_flush, median = sequential(store, args.seconds, through)
                    print(
                        f"{path:8} sequential, 1 session:   {rate:8.0f} flush/s"
                        f"   commits/flush {per_flush:.3f}   median latency {median:.2f} ms"
                    )
                    rate, per_flush, median = concurrent(
                        store, args.sessions, args.seconds, through
                    )
                    print(
                        f"{path:8} concurrent, {args.sessions} sessions: {rate:8.0f} flush/s"
                        f"   commits/flush {per_flush:.3f}   median latency {median:.2f} ms"
                        f"   ({rate / fsyncs:.2f} x raw fsync)"
                    )
            finally:
                live.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if owned:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
