"""The SQLite persistence listener: durability, group commit, failure handling, hostile input."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from host_bridge.embedded.codec import MAX_PAYLOAD_BYTES, encode_payload
from host_bridge.embedded.paths import DEFAULT_DATA_ENV, default_data_dir, store_path
from host_bridge.embedded.stores import (
    SCHEMA_VERSION,
    SessionLeaseError,
    SqliteEventStore,
    StoreClosedError,
    StoreCorruptError,
    StoredSession,
    StoreError,
    StoreVersionError,
    StoreWriteError,
)
from host_bridge.embedded.stores import _sqlite as sqlite_store
from host_bridge.embedded.stores import _writer as event_store
from host_bridge.protocols import SessionEvent, SessionHeader

TIMEOUT = 20.0


class Seam:
    """A ``fault_hook``: pauses the writer inside its transaction and/or fails commits."""

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self._paused = False
        self.entered = threading.Event()
        self._resume = threading.Event()

    def pause(self) -> None:
        self.entered.clear()
        self._resume.clear()
        self._paused = True

    def unpause(self) -> None:
        self._paused = False
        self._resume.set()

    def __call__(self) -> None:
        self.calls += 1
        if self._paused:
            self.entered.set()
            if not self._resume.wait(TIMEOUT):
                raise TimeoutError("test seam was never released")
        if self.failures:
            self.failures -= 1
            raise OSError("injected disk failure")


def event(seq: int, data: Any = None, type_: str = "note") -> SessionEvent:
    return SessionEvent(type_, seq, 1_700_000_000_000 + seq, {"n": seq} if data is None else data)


def record(store: SqliteEventStore, session_id: str, seq: int, data: Any = None) -> SessionEvent:
    item = event(seq, data)
    store.record_append(session_id, item, encode_payload(item.data))
    return item


def ok(future: Future[bool]) -> None:
    assert future.result(TIMEOUT) is True


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "data" / "sessions.sqlite3"


@pytest.fixture
def seam() -> Seam:
    return Seam()


@pytest.fixture
def store(db: Path, seam: Seam) -> Iterator[SqliteEventStore]:
    opened = SqliteEventStore(db, fault_hook=seam)
    yield opened
    seam.unpause()
    seam.failures = 0
    opened.close()


# --- opening and schema -----------------------------------------------------------


def test_open_creates_directories_and_a_versioned_wal_schema(db: Path) -> None:
    with SqliteEventStore(db) as opened:
        assert db.is_file()
        assert opened.path == db
        with raw(db) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone() == (str(SCHEMA_VERSION),)
            tables = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            assert {"meta", "sessions", "events", "leases"} <= tables


def test_write_connection_is_synchronous_full(store: SqliteEventStore) -> None:
    conn = store._sqlite.writer_connection  # the writer is idle: inspecting its pragma is safe
    assert conn is not None
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_empty_existing_file_is_initialised(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite3"
    path.touch(0o600)  # private, as the store makes its files
    with SqliteEventStore(path, create=False) as opened:
        assert opened.session_ids() == []
    with raw(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)


def test_create_false_refuses_a_missing_file_without_creating_it(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "sessions.sqlite3"
    with pytest.raises(StoreError, match="no session store"):
        SqliteEventStore(path, create=False)
    assert not path.exists()
    assert not path.parent.exists()


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a file"):
        SqliteEventStore(tmp_path)


def test_random_bytes_are_a_corrupt_store_and_stay_untouched(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    garbage = os.urandom(8192)
    path.write_bytes(garbage)
    path.chmod(0o600)  # private: the content is what is wrong
    with pytest.raises(StoreCorruptError, match="corrupt or not an SQLite database"):
        SqliteEventStore(path)
    assert path.read_bytes() == garbage


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    with raw(path) as conn:
        conn.execute("CREATE TABLE accounts(id INTEGER)")
    path.chmod(0o600)
    with pytest.raises(StoreError, match="not a dsh-schedule session store"):
        SqliteEventStore(path)
    with raw(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"accounts"}


def test_newer_schema_version_is_refused(db: Path) -> None:
    SqliteEventStore(db).close()
    newer = SCHEMA_VERSION + 1
    with raw(db) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(newer),))
    with pytest.raises(StoreVersionError, match=f"schema version {newer}"):
        SqliteEventStore(db)


def test_a_version_1_store_is_migrated_and_keeps_its_data(db: Path) -> None:
    db.parent.mkdir(parents=True)
    with raw(db) as conn:  # the version 1 schema, as an older release wrote it
        conn.executescript(
            "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
            "CREATE TABLE sessions(id TEXT PRIMARY KEY, seed_length INTEGER,"
            " parent_session TEXT, created_at INTEGER);"
            "CREATE TABLE events(session_id TEXT, seq INTEGER, type TEXT, time INTEGER,"
            " data BLOB, PRIMARY KEY(session_id, seq)) WITHOUT ROWID;"
            "INSERT INTO meta VALUES ('schema_version', '1');"
            "INSERT INTO sessions VALUES ('old', NULL, NULL, 1);"
        )
        conn.execute(
            "INSERT INTO events VALUES ('old', 0, 'note', 5, ?)", (encode_payload({"n": 0}),)
        )
    db.chmod(0o600)
    with SqliteEventStore(db) as opened:
        stored = opened.load("old")
        assert stored is not None and [e.data for e in stored.events] == [{"n": 0}]
        opened.acquire_session("old")
        record(opened, "old", 1)
        ok(opened.flush("old"))
    with raw(db) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)
        assert conn.execute("SELECT COUNT(*) FROM events").fetchone() == (2,)


@pytest.mark.parametrize("value", ["one", "", "-1", "١", "0", "9" * 5000])
def test_invalid_schema_version_is_corrupt(db: Path, value: str) -> None:
    SqliteEventStore(db).close()
    with raw(db) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    with pytest.raises(StoreCorruptError, match="schema_version"):
        SqliteEventStore(db)


@pytest.mark.parametrize("table", ["events", "leases"])
def test_missing_tables_are_corrupt(db: Path, table: str) -> None:
    SqliteEventStore(db).close()
    with raw(db) as conn:
        conn.execute(f"DROP TABLE {table}")
    with pytest.raises(StoreCorruptError, match="missing session tables"):
        SqliteEventStore(db)


# --- round trips and durability ----------------------------------------------------


def test_events_and_header_round_trip(store: SqliteEventStore, db: Path) -> None:
    header = SessionHeader("s1")
    before = time.time_ns() // 1_000_000
    store.create_session(header)
    events = [
        record(store, "s1", 0, {"version": 1, "operation": "create"}),
        record(store, "s1", 1, ["list", 2, 3.5, None, True]),
        record(store, "s1", 2, "é 🎉 \x00"),
    ]
    ok(store.flush("s1"))
    after = time.time_ns() // 1_000_000
    stored = store.load("s1")
    assert stored == StoredSession(header, tuple(events))
    assert store.load_header("s1") == header
    assert store.session_ids() == ["s1"]
    with raw(db) as conn:
        (created_at,) = conn.execute("SELECT created_at FROM sessions").fetchone()
    assert before <= created_at <= after


def test_round_trip_survives_reopening(db: Path) -> None:
    with SqliteEventStore(db) as first:
        first.create_session(SessionHeader("a"))
        written = [record(first, "a", i, {"i": i, "s": "x" * i}) for i in range(20)]
        ok(first.flush("a"))
    with SqliteEventStore(db, create=False) as second:
        stored = second.load("a")
        assert stored is not None
        assert stored.events == tuple(written)


def test_fork_header_and_seed_round_trip(store: SqliteEventStore, db: Path) -> None:
    store.create_session(SessionHeader("parent"))
    parent_events = [record(store, "parent", i) for i in range(3)]
    fork = SessionHeader("child", seed_length=2, parent_session="parent")
    store.create_session(fork, [(e, encode_payload(e.data)) for e in parent_events[:2]])
    own = record(store, "child", 2, {"own": True})
    ok(store.flush_all())
    store.close()
    with SqliteEventStore(db) as reopened:
        child = reopened.load("child")
        assert child == StoredSession(fork, (*parent_events[:2], own))
        assert reopened.load_header("child") == fork
        assert reopened.session_ids() == ["child", "parent"]


def test_seed_length_none_and_zero_stay_distinct(store: SqliteEventStore) -> None:
    store.create_session(SessionHeader("none"))
    store.create_session(SessionHeader("zero", seed_length=0, parent_session="none"))
    ok(store.flush_all())
    assert store.load_header("none") == SessionHeader("none", None, None)
    assert store.load_header("zero") == SessionHeader("zero", 0, "none")


def test_seed_must_be_contiguous(store: SqliteEventStore) -> None:
    seed = [(event(0), encode_payload({"n": 0})), (event(2), encode_payload({"n": 2}))]
    with pytest.raises(StoreError, match="seed event 1"):
        store.create_session(SessionHeader("f", seed_length=2, parent_session="p"), seed)
    assert store.pending_rows == 0


def test_unflushed_rows_are_not_visible_to_reads(store: SqliteEventStore) -> None:
    store.create_session(SessionHeader("s"))
    record(store, "s", 0)
    assert store.pending_rows == 2
    assert store.load("s") is None
    assert store.session_ids() == []
    ok(store.flush("s"))
    assert store.pending_rows == 0
    loaded = store.load("s")
    assert loaded is not None
    assert len(loaded.events) == 1


def test_flush_covers_rows_recorded_before_it(store: SqliteEventStore) -> None:
    store.create_session(SessionHeader("a"))
    store.create_session(SessionHeader("b"))
    mine = [record(store, "a", 0), record(store, "a", 1)]
    record(store, "b", 0)
    ok(store.flush("a"))
    loaded = store.load("a")
    assert loaded is not None
    assert loaded.events == tuple(mine)


def test_flush_requested_during_a_write_waits_for_its_own_rows(
    store: SqliteEventStore, seam: Seam
) -> None:
    store.create_session(SessionHeader("a"))
    ok(store.flush("a"))
    seam.pause()
    first = record(store, "a", 0)
    early = store.flush("a")
    assert seam.entered.wait(TIMEOUT)  # the writer holds [first] in an open transaction
    second = record(store, "a", 1)
    late = store.flush("a")
    assert not early.done()
    assert not late.done()
    commits = store.commit_count
    seam.unpause()
    ok(early)
    ok(late)
    loaded = store.load("a")
    assert loaded is not None
    assert loaded.events == (first, second)
    assert store.commit_count == commits + 2


def test_flush_with_nothing_pending_resolves_without_a_commit(store: SqliteEventStore) -> None:
    store.create_session(SessionHeader("a"))
    record(store, "a", 0)
    ok(store.flush("a"))
    commits = store.commit_count
    requests = store.flush_requests
    quiet = store.flush("a")
    assert quiet.done()
    ok(quiet)
    ok(store.flush("never-created"))
    ok(store.flush_all())
    assert store.commit_count == commits
    assert store.flush_requests == requests + 3


def test_flush_of_one_session_ignores_another_sessions_pending_rows(
    store: SqliteEventStore, seam: Seam
) -> None:
    store.create_session(SessionHeader("a"))
    store.create_session(SessionHeader("b"))
    ok(store.flush_all())
    seam.pause()
    record(store, "b", 0)
    busy = store.flush("b")
    assert seam.entered.wait(TIMEOUT)
    quiet = store.flush("a")  # nothing of "a" is uncommitted: no need to wait for "b"
    assert quiet.done()
    ok(quiet)
    seam.unpause()
    ok(busy)


def test_flush_rejects_a_non_string_id(store: SqliteEventStore) -> None:
    with pytest.raises(StoreError, match="session id string"):
        store.flush(42).result(TIMEOUT)  # type: ignore[arg-type]


def test_flush_futures_cannot_be_cancelled(store: SqliteEventStore, seam: Seam) -> None:
    store.create_session(SessionHeader("a"))
    seam.pause()
    pending = store.flush("a")
    assert seam.entered.wait(TIMEOUT)
    assert pending.cancel() is False
    seam.unpause()
    ok(pending)


def test_group_commit_across_sessions(store: SqliteEventStore, seam: Seam) -> None:
    count = 50
    ids = [f"session-{i}" for i in range(count)]
    for session_id in ids:
        store.create_session(SessionHeader(session_id))
    store.create_session(SessionHeader("blocker"))
    ok(store.flush_all())
    base_requests = store.flush_requests

    seam.pause()
    record(store, "blocker", 0)
    blocker = store.flush("blocker")
    assert seam.entered.wait(TIMEOUT)  # the writer is inside a transaction

    futures: list[Future[bool] | None] = [None] * count
    start = threading.Barrier(count)

    def flush_one(index: int) -> None:
        start.wait(TIMEOUT)
        record(store, ids[index], 0, {"from": index})
        futures[index] = store.flush(ids[index])

    threads = [threading.Thread(target=flush_one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    commits = store.commit_count
    requests = store.flush_requests
    assert all(f is not None and not f.done() for f in futures)

    seam.unpause()
    ok(blocker)
    for future in futures:
        assert future is not None
        ok(future)
    # one commit finishes the paused batch, ONE more makes all 50 sessions durable
    assert store.commit_count - commits == 2
    assert requests == base_requests + count + 1
    for index, session_id in enumerate(ids):
        loaded = store.load(session_id)
        assert loaded is not None
        assert [e.data for e in loaded.events] == [{"from": index}]


def test_writer_commits_a_large_queue_without_a_flush(
    store: SqliteEventStore, seam: Seam, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_store, "AUTO_WRITE_ROWS", 10)  # the shared writer reads it
    store.create_session(SessionHeader("a"))
    ok(store.flush("a"))
    requests = store.flush_requests
    seam.pause()
    for seq in range(10):
        record(store, "a", seq)
    assert seam.entered.wait(TIMEOUT)  # a write started although nobody flushed
    assert store.flush_requests == requests
    seam.unpause()
    ok(store.flush("a"))
    loaded = store.load("a")
    assert loaded is not None
    assert len(loaded.events) == 10


def test_many_threads_write_and_read_concurrently(store: SqliteEventStore) -> None:
    sessions_per_thread, events_per_session, workers = 5, 8, 8
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for s in range(sessions_per_thread):
                session_id = f"w{worker}-s{s}"
                store.create_session(SessionHeader(session_id))
                for seq in range(events_per_session):
                    record(store, session_id, seq, {"w": worker, "seq": seq})
                    if seq % 3 == 0:
                        ok(store.flush(session_id))
                ok(store.flush(session_id))
                loaded = store.load(session_id)
                assert loaded is not None
                assert len(loaded.events) == events_per_session
                store.session_ids()
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT * 3)
    assert errors == []
    assert len(store.session_ids()) == workers * sessions_per_thread
    assert store.commit_count <= store.flush_requests


def test_done_callbacks_may_call_back_into_the_store(store: SqliteEventStore, seam: Seam) -> None:
    store.create_session(SessionHeader("a"))
    record(store, "a", 0)
    seam.pause()
    first = store.flush("a")
    assert seam.entered.wait(TIMEOUT)
    chained: list[Future[bool]] = []

    def on_done(_: Future[bool]) -> None:  # runs on the writer thread
        record(store, "a", 1)
        chained.append(store.flush("a"))

    first.add_done_callback(on_done)
    seam.unpause()
    ok(first)
    assert len(chained) == 1
    ok(chained[0])
    loaded = store.load("a")
    assert loaded is not None
    assert len(loaded.events) == 2


def test_data_survives_a_process_that_exits_without_closing(db: Path) -> None:
    script = textwrap.dedent(
        """
        import os, sys
        from host_bridge.embedded.codec import encode_payload
        from host_bridge.embedded.stores import SqliteEventStore
        from host_bridge.protocols import SessionEvent, SessionHeader

        store = SqliteEventStore(sys.argv[1])
        store.create_session(SessionHeader("proc", seed_length=None, parent_session=None))
        for i in range(5):
            event = SessionEvent("note", i, 1000 + i, {"i": i, "text": "é"})
            store.record_append("proc", event, encode_payload(event.data))
        assert store.flush("proc").result(30) is True
        sys.stdout.write("flushed\\n")
        sys.stdout.flush()
        os._exit(0)  # no close(): durability must not depend on a clean shutdown
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "flushed\n"
    with SqliteEventStore(db, create=False) as reader:
        stored = reader.load("proc")
    assert stored is not None
    assert stored.header == SessionHeader("proc")
    assert stored.events == tuple(
        SessionEvent("note", i, 1000 + i, {"i": i, "text": "é"}) for i in range(5)
    )


# --- sessions: ids, duplicates, appends ---------------------------------------------

HOSTILE_IDS = [
    "'; DROP TABLE events; --",
    "Robert'); DROP TABLE sessions;--",
    "../../etc/passwd",
    "..\\..\\windows\\system32",
    "\"double\" and 'single' quotes",
    "x" * 10_000,
    "🎉🔥 emoji ✓",
    "line\nbreak\ttab\r",
    "%",
    "_",
    "* ? [a-z]",
    " padded ",
    "\u202eright-to-left",
    "\ufeffbom",
    "NULL",
]


def test_hostile_ids_are_stored_verbatim(db: Path) -> None:
    with SqliteEventStore(db) as first:
        for index, session_id in enumerate(HOSTILE_IDS):
            first.create_session(
                SessionHeader(session_id, seed_length=0, parent_session=session_id)
            )
            record(first, session_id, 0, {"index": index})
        ok(first.flush_all())
    with SqliteEventStore(db) as second:
        assert second.session_ids() == sorted(HOSTILE_IDS)
        for index, session_id in enumerate(HOSTILE_IDS):
            stored = second.load(session_id)
            assert stored is not None
            assert stored.header == SessionHeader(session_id, 0, session_id)
            assert [e.data for e in stored.events] == [{"index": index}]
        assert second.load("%%") is None
        assert second.load("x") is None
        assert second.load("'") is None
    with raw(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"meta", "sessions", "events"} <= tables
        assert conn.execute("SELECT COUNT(*) FROM events").fetchone() == (len(HOSTILE_IDS),)


@pytest.mark.parametrize(
    "bad_id",
    ["", "nul\x00inside", "\x00", "\ud800", "lone\udfffsurrogate"],
    ids=["empty", "nul", "only-nul", "high-surrogate", "low-surrogate"],
)
def test_unstorable_ids_are_refused_at_create(store: SqliteEventStore, bad_id: str) -> None:
    with pytest.raises(StoreError, match="cannot be stored"):
        store.create_session(SessionHeader(bad_id))
    assert store.pending_rows == 0
    with pytest.raises(StoreError, match="unknown"):
        record(store, bad_id, 0)
    assert store.load(bad_id) is None
    assert store.load_header(bad_id) is None
    ok(store.flush_all())
    assert store.session_ids() == []


def test_unstorable_parent_session_is_refused(store: SqliteEventStore) -> None:
    with pytest.raises(StoreError, match="parent_session"):
        store.create_session(SessionHeader("child", seed_length=0, parent_session="p\x00"))
    with pytest.raises(StoreError, match="must be a string"):
        store.create_session(SessionHeader(7))  # type: ignore[arg-type]
    assert store.pending_rows == 0


@pytest.mark.parametrize("seed_length", [-1, True, 2**63, "2"])
def test_invalid_seed_length_is_refused(store: SqliteEventStore, seed_length: Any) -> None:
    with pytest.raises(StoreError, match="seed_length"):
        store.create_session(SessionHeader("s", seed_length=seed_length))
    assert store.pending_rows == 0


def test_duplicate_create_is_refused_while_pending_and_once_durable(db: Path) -> None:
    with SqliteEventStore(db) as first:
        first.create_session(SessionHeader("dup"))
        record(first, "dup", 0, {"original": True})
        with pytest.raises(StoreError, match="already exists"):
            first.create_session(SessionHeader("dup"))
        ok(first.flush("dup"))
        with pytest.raises(StoreError, match="already exists"):
            first.create_session(SessionHeader("dup", seed_length=0, parent_session="x"))
    with SqliteEventStore(db) as second:
        with pytest.raises(StoreError, match="already exists"):
            second.create_session(SessionHeader("dup"))
        stored = second.load("dup")
        assert stored is not None
        assert stored.header == SessionHeader("dup")
        assert [e.data for e in stored.events] == [{"original": True}]


def test_append_to_an_unknown_session_is_refused(store: SqliteEventStore) -> None:
    with pytest.raises(StoreError, match="unknown to the store"):
        record(store, "ghost", 0)
    assert store.pending_rows == 0


def test_append_with_a_wrong_seq_is_refused(store: SqliteEventStore) -> None:
    store.create_session(SessionHeader("a"))
    record(store, "a", 0)
    for wrong in (0, 2, 5):
        with pytest.raises(StoreError, match=f"has seq {wrong}, expected 1"):
            record(store, "a", wrong)
    assert store.pending_rows == 2
    record(store, "a", 1)
    ok(store.flush("a"))
    loaded = store.load("a")
    assert loaded is not None
    assert [e.seq for e in loaded.events] == [0, 1]


@pytest.mark.parametrize(
    ("item", "payload", "reason"),
    [
        (SessionEvent("t", 0, 1, None), "not bytes", "payload must be bytes"),
        (SessionEvent("t", 0, 1, None), b"\xc0" * (MAX_PAYLOAD_BYTES + 1), "larger than"),
        (SessionEvent("t", True, 1, None), b"\xc0", "seq"),
        (SessionEvent("t", -1, 1, None), b"\xc0", "negative"),
        (SessionEvent("t", 0, 2**63, None), b"\xc0", "time"),
        (SessionEvent("t", 0, 1.5, None), b"\xc0", "time"),  # type: ignore[arg-type]
        (SessionEvent("", 0, 1, None), b"\xc0", "event type"),
        (SessionEvent("t\udc00", 0, 1, None), b"\xc0", "event type"),
        ("not an event", b"\xc0", "SessionEvent"),
    ],
)
def test_invalid_rows_are_refused_before_queueing(
    store: SqliteEventStore, item: Any, payload: Any, reason: str
) -> None:
    store.create_session(SessionHeader("a"))
    with pytest.raises(StoreError, match=reason):
        store.record_append("a", item, payload)
    assert store.pending_rows == 1  # only the session row
    record(store, "a", 0)  # the expected seq did not move


def test_appends_continue_a_reopened_session(db: Path) -> None:
    with SqliteEventStore(db) as first:
        for session_id in ("loaded", "lazy"):
            first.create_session(SessionHeader(session_id))
            for seq in range(3):
                record(first, session_id, seq)
        ok(first.flush_all())
    with SqliteEventStore(db) as second:
        assert second.load("loaded") is not None
        with pytest.raises(StoreError, match="expected 3"):
            record(second, "loaded", 0)
        record(second, "loaded", 3)
        with pytest.raises(StoreError, match="expected 3"):
            record(second, "lazy", 1)  # not loaded: its length is read once
        record(second, "lazy", 3)
        ok(second.flush_all())
        for session_id in ("loaded", "lazy"):
            stored = second.load(session_id)
            assert stored is not None
            assert [e.seq for e in stored.events] == [0, 1, 2, 3]


# --- corrupt rows ------------------------------------------------------------------------


def _store_with(db: Path, session_id: str, events: int) -> None:
    with SqliteEventStore(db) as writer:
        writer.create_session(SessionHeader(session_id))
        for seq in range(events):
            record(writer, session_id, seq)
        writer.create_session(SessionHeader("healthy"))
        record(writer, "healthy", 0)
        ok(writer.flush_all())


def _assert_healthy_still_loads(reader: SqliteEventStore) -> None:
    healthy = reader.load("healthy")
    assert healthy is not None
    assert len(healthy.events) == 1


@pytest.mark.parametrize(
    "broken",
    [b"\xc1", b"\x92\x01", b"\xc4\x01x", b"\xd4\x05\x00", b"\xa1\xff"],
    ids=["garbage", "truncated", "bin", "ext", "bad-utf8"],
)
def test_a_broken_payload_fails_load_naming_session_and_seq(db: Path, broken: bytes) -> None:
    _store_with(db, "victim's", 3)
    with raw(db) as conn:
        conn.execute(
            "UPDATE events SET data = ? WHERE seq = 1 AND session_id = ?", (broken, "victim's")
        )
    with SqliteEventStore(db) as reader:
        with pytest.raises(StoreCorruptError, match=r"session \"victim's\" .*seq 1") as info:
            reader.load("victim's")
        assert repr(broken) not in str(info.value)
        assert reader.session_ids() == ["healthy", "victim's"]
        _assert_healthy_still_loads(reader)


def test_a_seq_gap_fails_load_naming_the_missing_seq(db: Path) -> None:
    _store_with(db, "gappy", 4)
    with raw(db) as conn:
        conn.execute("DELETE FROM events WHERE session_id = 'gappy' AND seq = 1")
    with SqliteEventStore(db) as reader:
        with pytest.raises(StoreCorruptError, match=r"'gappy'.*seq 1 \(found 2\)"):
            reader.load("gappy")
        with pytest.raises(StoreCorruptError, match="gap"):
            record(reader, "gappy", 4)
        _assert_healthy_still_loads(reader)


def test_a_log_not_starting_at_zero_is_corrupt(db: Path) -> None:
    _store_with(db, "headless", 2)
    with raw(db) as conn:
        conn.execute("DELETE FROM events WHERE session_id = 'headless' AND seq = 0")
    with SqliteEventStore(db) as reader, pytest.raises(StoreCorruptError, match="seq 0"):
        reader.load("headless")


@pytest.mark.parametrize(
    ("column", "value"),
    [("type", None), ("type", b"blob"), ("time", "noon"), ("data", "text, not a blob")],
)
def test_malformed_event_columns_are_corrupt(db: Path, column: str, value: Any) -> None:
    _store_with(db, "odd", 1)
    with raw(db) as conn:
        conn.execute(f"UPDATE events SET {column} = ? WHERE session_id = 'odd'", (value,))
    with (
        SqliteEventStore(db) as reader,
        pytest.raises(StoreCorruptError, match="malformed event at seq 0"),
    ):
        reader.load("odd")


@pytest.mark.parametrize(
    ("column", "value"), [("seed_length", -3), ("seed_length", "x"), ("parent_session", b"blob")]
)
def test_malformed_session_rows_are_corrupt(db: Path, column: str, value: Any) -> None:
    _store_with(db, "odd", 0)
    with raw(db) as conn:
        conn.execute(f"UPDATE sessions SET {column} = ? WHERE id = 'odd'", (value,))
    with SqliteEventStore(db) as reader:
        with pytest.raises(StoreCorruptError, match=column):
            reader.load("odd")
        with pytest.raises(StoreCorruptError, match=column):
            reader.load_header("odd")


# --- failures and retries ------------------------------------------------------------------


def _durable_counts(db: Path) -> tuple[int, int]:
    with raw(db) as conn:
        sessions = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
        events = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    return int(sessions), int(events)


def test_a_failed_commit_keeps_rows_queued_and_the_next_flush_retries(
    store: SqliteEventStore, seam: Seam, db: Path
) -> None:
    store.create_session(SessionHeader("a"))
    store.create_session(SessionHeader("b"))
    a_events = [record(store, "a", i) for i in range(3)]
    b_events = [record(store, "b", i) for i in range(2)]
    seam.failures = 1
    failing_a = store.flush("a")
    with pytest.raises(StoreWriteError, match="stay queued") as info:
        failing_a.result(TIMEOUT)
    assert info.value.category == "OSError"
    assert "injected" not in str(info.value)  # no raw backend text
    assert seam.calls == 1
    assert store.commit_count == 0
    assert store.pending_rows == 7
    assert _durable_counts(db) == (0, 0)  # rolled back: nothing half-written
    assert store.load("a") is None

    ok(store.flush("b"))  # the retry writes every queued row, once
    assert seam.calls == 2
    assert store.commit_count == 1
    assert store.pending_rows == 0
    assert _durable_counts(db) == (2, 5)
    assert store.load("a") == StoredSession(SessionHeader("a"), tuple(a_events))
    assert store.load("b") == StoredSession(SessionHeader("b"), tuple(b_events))


def test_a_failure_fails_only_requests_made_before_that_attempt(
    store: SqliteEventStore, seam: Seam
) -> None:
    store.create_session(SessionHeader("a"))
    ok(store.flush("a"))
    seam.failures = 1
    seam.pause()
    first = record(store, "a", 0)
    early = store.flush("a")
    assert seam.entered.wait(TIMEOUT)
    second = record(store, "a", 1)
    late = store.flush("a")
    seam.unpause()
    with pytest.raises(StoreWriteError):
        early.result(TIMEOUT)
    ok(late)  # its own attempt came after the failure, and it covers the re-queued rows too
    loaded = store.load("a")
    assert loaded is not None
    assert loaded.events == (first, second)


def test_a_real_sqlite_failure_is_rolled_back_and_retried(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 50)
    with SqliteEventStore(db) as opened:
        opened.create_session(SessionHeader("a"))
        written = record(opened, "a", 0)
        blocker = raw(db)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        try:
            with pytest.raises(StoreWriteError) as info:
                opened.flush("a").result(TIMEOUT)
            assert info.value.category.startswith("SQLITE_BUSY")
            assert opened.pending_rows == 2
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        ok(opened.flush("a"))
        assert opened.load("a") == StoredSession(SessionHeader("a"), (written,))


# --- close ------------------------------------------------------------------------------------


def test_close_writes_pending_rows(db: Path) -> None:
    opened = SqliteEventStore(db)
    opened.create_session(SessionHeader("a"))
    written = record(opened, "a", 0)
    opened.close()
    with SqliteEventStore(db) as reopened:
        assert reopened.load("a") == StoredSession(SessionHeader("a"), (written,))


def test_close_resolves_flushes_in_flight(db: Path) -> None:
    seam = Seam()
    opened = SqliteEventStore(db, fault_hook=seam)
    opened.create_session(SessionHeader("a"))
    seam.pause()
    waiting = opened.flush("a")
    assert seam.entered.wait(TIMEOUT)
    closer = threading.Thread(target=opened.close)
    closer.start()
    seam.unpause()
    closer.join(TIMEOUT)
    assert not closer.is_alive()
    ok(waiting)
    assert opened.closed


def test_every_call_after_close_fails(db: Path) -> None:
    opened = SqliteEventStore(db)
    opened.create_session(SessionHeader("a"))
    opened.close()
    with pytest.raises(StoreClosedError):
        opened.create_session(SessionHeader("b"))
    with pytest.raises(StoreClosedError):
        record(opened, "a", 0)
    with pytest.raises(StoreClosedError):
        opened.flush("a").result(TIMEOUT)
    with pytest.raises(StoreClosedError):
        opened.flush_all().result(TIMEOUT)
    with pytest.raises(StoreClosedError):
        opened.load("a")
    with pytest.raises(StoreClosedError):
        opened.session_ids()
    opened.close()  # idempotent
    assert issubclass(StoreClosedError, StoreError)


def test_close_reports_rows_it_could_not_write(db: Path) -> None:
    seam = Seam()
    opened = SqliteEventStore(db, fault_hook=seam)
    opened.create_session(SessionHeader("a"))
    record(opened, "a", 0)
    seam.failures = 1
    with pytest.raises(StoreWriteError, match="could not write 2 unflushed rows"):
        opened.close()
    opened.close()  # reported once
    with SqliteEventStore(db) as reopened:
        assert reopened.session_ids() == []


def test_a_close_that_stopped_waiting_keeps_the_sessions_locked_until_the_writer_ends(
    db: Path,
) -> None:
    """Rows of a stuck commit may still be committed: nobody else may take their session."""
    seam = Seam()
    opened = SqliteEventStore(db, fault_hook=seam)
    opened.acquire_session("a")
    opened.create_session(SessionHeader("a"))
    seam.pause()
    waiting = opened.flush("a")
    assert seam.entered.wait(TIMEOUT)
    other = SqliteEventStore(db)
    try:
        with pytest.raises(StoreWriteError, match="timed out after 0 s") as caught:
            opened.close(timeout=0)
        assert caught.value.category == "CLOSE_TIMEOUT"
        with pytest.raises(StoreWriteError):
            waiting.result(0)
        with pytest.raises(SessionLeaseError, match="live in another process"):
            other.acquire_session("a")
        seam.unpause()
        opened._writer._thread.join(TIMEOUT)
        assert not opened._writer._thread.is_alive()
        other.acquire_session("a")  # the writer ended: its locks went with it
        assert other.load("a") == StoredSession(SessionHeader("a"), ())
    finally:
        seam.unpause()
        other.close()


# --- paths ---------------------------------------------------------------------------------------


def test_default_data_dir_prefers_the_override(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DEFAULT_DATA_ENV, str(tmp_path / "custom"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "custom"


def test_default_data_dir_uses_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DEFAULT_DATA_ENV, "")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_data_dir() == tmp_path / "xdg" / "dsh-schedule"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert default_data_dir() == tmp_path / "home" / ".local" / "share" / "dsh-schedule"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.delenv(DEFAULT_DATA_ENV)
    assert default_data_dir() == tmp_path / "home" / ".local" / "share" / "dsh-schedule"


def test_store_path_is_inside_the_data_dir(tmp_path: Path) -> None:
    assert store_path(tmp_path) == tmp_path / "sessions.sqlite3"
    assert store_path(str(tmp_path)) == tmp_path / "sessions.sqlite3"
