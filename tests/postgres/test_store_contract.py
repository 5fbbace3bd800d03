"""The persistence listener contract, run against SQLite and the real PostgreSQL server."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pykka
import pytest

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.sessions import EmbeddedSessionStore, SessionLeaseRefusedError
from host_bridge.embedded.stores import (
    EventStore,
    SessionLeaseError,
    SqliteEventStore,
    StoreError,
    StoreWriteError,
    open_store,
)
from host_bridge.protocols import SessionEvent, SessionHeader

TIMEOUT = 20.0

StoreFactory = Callable[..., EventStore]


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


@dataclass
class Backend:
    """Where the stores of one test live, and a writer that ignores session ownership."""

    kind: str
    spec: str

    def foreign_event(self, session_id: str, seq: int) -> None:
        """Store an event row directly, as a writer that takes no lock or lease would."""
        payload = encode_payload({"foreign": seq})
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.spec, isolation_level=None, timeout=10)
            try:
                conn.execute(
                    "INSERT INTO events(session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
                    (session_id, seq, "note", 1, payload),
                )
            finally:
                conn.close()
            return
        import psycopg

        with psycopg.connect(self.spec, autocommit=True) as pg:
            pg.execute(
                "INSERT INTO events(session_id, seq, type, time, data) VALUES (%s, %s, %s, %s, %s)",
                (session_id, seq, "note", 1, payload),
            )


@pytest.fixture(params=("sqlite", "postgresql"))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """One backend per run of a test: an SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return Backend("sqlite", str(tmp_path / "sessions.sqlite3"))
    return Backend("postgresql", request.getfixturevalue("pg_url"))


@pytest.fixture
def make_store(backend: Backend) -> Iterator[StoreFactory]:
    """Open (and later close) stores on one backend; every store shares one location."""
    opened: list[EventStore] = []

    def make(**options: Any) -> EventStore:
        if "fault_hook" in options:
            from host_bridge.embedded.stores import PostgresEventStore

            store: EventStore = (
                SqliteEventStore(backend.spec, **options)
                if backend.kind == "sqlite"
                else PostgresEventStore(backend.spec, **options)
            )
        else:
            store = open_store(backend.spec)
        opened.append(store)
        return store

    yield make
    for store in opened:
        if not store.closed:
            store.close()


def event(seq: int, data: Any = None) -> SessionEvent:
    return SessionEvent("note", seq, 1_700_000_000_000 + seq, {"n": seq} if data is None else data)


def record(store: EventStore, session_id: str, seq: int, data: Any = None) -> SessionEvent:
    item = event(seq, data)
    store.record_append(session_id, item, encode_payload(item.data))
    return item


def new_session(store: EventStore, session_id: str) -> None:
    store.acquire_session(session_id)
    store.create_session(SessionHeader(session_id))


def test_round_trip_after_flush(make_store: StoreFactory) -> None:
    store = make_store()
    new_session(store, "s-1")
    written = [
        record(store, "s-1", seq, {"text": "hé\0", "list": [1, 2.5, None]}) for seq in range(5)
    ]
    assert store.flush("s-1").result(TIMEOUT) is True
    assert store.pending_rows == 0
    other = make_store()
    stored = other.load("s-1")
    assert stored is not None
    assert stored.header == SessionHeader("s-1")
    assert stored.events == tuple(written)
    assert other.session_ids() == ["s-1"]
    assert other.load("missing") is None
    assert other.load_header("s-1") == SessionHeader("s-1")


def test_flush_covers_only_what_was_queued_and_unknown_sessions_are_clean(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    assert store.flush("nobody").result(TIMEOUT) is True
    new_session(store, "a")
    new_session(store, "b")
    record(store, "a", 0)
    record(store, "b", 0)
    assert store.flush("a").result(TIMEOUT) is True
    assert make_store().load("a") is not None
    assert store.flush_all().result(TIMEOUT) is True
    stored = make_store().load("b")
    assert stored is not None and len(stored.events) == 1
    with pytest.raises(StoreError, match="seq"):
        record(store, "a", 5)


def test_many_concurrent_flushes_share_one_commit(make_store: StoreFactory) -> None:
    entered = threading.Event()
    release = threading.Event()
    calls = [0]

    def hook() -> None:
        calls[0] += 1
        if calls[0] == 1:
            entered.set()
            assert release.wait(TIMEOUT)

    store = make_store(fault_hook=hook)
    new_session(store, "first")
    first = store.flush("first")
    assert entered.wait(TIMEOUT)  # the writer is inside its first transaction
    sessions = [f"s-{index}" for index in range(50)]
    for session_id in sessions:
        new_session(store, session_id)
        record(store, session_id, 0)
    futures = [store.flush(session_id) for session_id in sessions]
    before = store.commit_count
    release.set()
    assert first.result(TIMEOUT) is True
    assert all(future.result(TIMEOUT) is True for future in futures)
    assert store.commit_count - before <= 2  # the 50 flushes rode one group commit
    assert len(make_store().session_ids()) == 51


def test_fork_detach_and_resume_through_the_session_store(make_store: StoreFactory) -> None:
    store = make_store()
    sessions = EmbeddedSessionStore(store)
    parent = sessions.create("parent")
    for index in range(3):
        parent.append("note", {"i": index})
    child = sessions.fork(parent, at=2, session_id="child")
    child.append("note", {"child": True})
    assert sessions.flush(child).result(TIMEOUT) is True
    sessions.close()
    store.close()

    again = make_store()
    resumed = EmbeddedSessionStore(again)
    child2 = resumed.resume("child")
    assert child2.header == SessionHeader("child", seed_length=2, parent_session="parent")
    assert [e.data for e in child2.events] == [{"i": 0}, {"i": 1}, {"child": True}]
    parent2 = resumed.open("parent")
    assert [e.data for e in parent2.events] == [{"i": 0}, {"i": 1}, {"i": 2}]
    parent2.append("note", "more")
    assert resumed.flush(parent2).result(TIMEOUT) is True
    resumed.close()


@pytest.mark.parametrize(
    "session_id",
    ["x'; DROP TABLE sessions; --", "émoji 🎉", " ", "a" * 2000, "%s %(x)s", "\\x00"],
)
def test_hostile_ids_round_trip(make_store: StoreFactory, session_id: str) -> None:
    store = make_store()
    new_session(store, session_id)
    record(store, session_id, 0, {"id": session_id})
    assert store.flush(session_id).result(TIMEOUT) is True
    stored = make_store().load(session_id)
    assert stored is not None and stored.events[0].data == {"id": session_id}


@pytest.mark.parametrize("session_id", ["", "nul\x00inside", "lone \udc80"])
def test_unstorable_ids_are_refused(make_store: StoreFactory, session_id: str) -> None:
    store = make_store()
    with pytest.raises(StoreError):
        new_session(store, session_id)
    assert store.session_ids() == []


def test_reopening_keeps_the_schema_and_the_data(make_store: StoreFactory) -> None:
    store = make_store()
    new_session(store, "kept")
    record(store, "kept", 0)
    store.close()
    for _ in range(2):
        again = make_store()
        stored = again.load("kept")
        assert stored is not None and len(stored.events) == 1
        again.close()


def test_a_failed_commit_keeps_the_rows_queued_and_the_next_flush_retries(
    make_store: StoreFactory,
) -> None:
    failures = [1]

    def hook() -> None:
        if failures[0]:
            failures[0] -= 1
            raise OSError("injected failure before COMMIT")

    store = make_store(fault_hook=hook)
    new_session(store, "s")
    record(store, "s", 0)
    with pytest.raises(StoreWriteError):
        store.flush("s").result(TIMEOUT)
    assert store.pending_rows == 2
    assert make_store().load("s") is None  # nothing half-written
    assert store.flush("s").result(TIMEOUT) is True
    stored = make_store().load("s")
    assert stored is not None and len(stored.events) == 1


def test_both_backends_are_sibling_event_stores(make_store: StoreFactory, backend: Backend) -> None:
    store = make_store()  # opened by open_store
    assert isinstance(store, EventStore)
    assert isinstance(store, SqliteEventStore) is (backend.kind == "sqlite")


def test_a_row_conflict_is_named_by_the_backends_own_error_category(
    make_store: StoreFactory, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store()
    new_session(store, "s")
    assert store.flush("s").result(TIMEOUT) is True
    backend.foreign_event("s", 0)  # another writer took seq 0
    record(store, "s", 0)
    named = "SQLITE_CONSTRAINT" if backend.kind == "sqlite" else "UniqueViolation 23505"
    with (
        caplog.at_level(logging.INFO, logger="dsh_schedule"),
        pytest.raises(SessionLeaseError, match=f"fenced out.*{named}") as raised,
    ):
        store.flush("s").result(TIMEOUT)
    driver_texts = ("UNIQUE constraint failed", "duplicate key")
    diagnostics = [str(raised.value)] + [
        r.getMessage() for r in caplog.records if r.levelno >= logging.INFO
    ]
    assert not [text for text in diagnostics if any(d in text for d in driver_texts)]


# --- one owner per session ---------------------------------------------------------------


def test_a_session_is_owned_by_one_store_at_a_time(make_store: StoreFactory) -> None:
    one = make_store()
    two = make_store()  # another store on the same location, in the same process
    new_session(one, "s")
    record(one, "s", 0)
    assert one.flush("s").result(TIMEOUT) is True
    with pytest.raises(SessionLeaseError) as refused:
        two.acquire_session("s")
    assert refused.value.session_id == "s"
    assert refused.value.holder == one.owner
    assert one.owner in str(refused.value)
    with pytest.raises(SessionLeaseError):
        record(two, "s", 1)  # nor can it write the session
    with pytest.raises(SessionLeaseError, match="already"):
        one.acquire_session("s")
    new_session(two, "t")  # other sessions are free
    assert one.holds_lease("s") and not two.holds_lease("s") and two.holds_lease("t")

    one.release_session("s")
    assert not one.holds_lease("s")
    two.acquire_session("s")
    record(two, "s", 1)
    assert two.flush("s").result(TIMEOUT) is True
    with pytest.raises(SessionLeaseError):
        record(one, "s", 1)
    stored = make_store().load("s")
    assert stored is not None and len(stored.events) == 2


def test_closing_a_store_gives_its_sessions_back(make_store: StoreFactory) -> None:
    one = make_store()
    new_session(one, "s")
    record(one, "s", 0)
    one.close()  # writes the queued rows, then lets go
    two = make_store()
    two.acquire_session("s")
    stored = two.load("s")
    assert stored is not None and len(stored.events) == 1
    record(two, "s", 1)
    assert two.flush("s").result(TIMEOUT) is True


def test_the_session_store_refuses_a_session_held_elsewhere_naming_the_holder(
    make_store: StoreFactory,
) -> None:
    first_store = make_store()
    one = EmbeddedSessionStore(first_store)
    two = EmbeddedSessionStore(make_store())
    live = one.create("shared")
    live.append("note", 1)
    assert one.flush(live).result(TIMEOUT) is True
    for attempt in (two.open, two.resume, two.create):
        with pytest.raises(SessionLeaseRefusedError) as refused:
            attempt("shared")
        assert isinstance(refused.value, SessionLeaseError)
        assert refused.value.holder == first_store.owner
    assert two.get("shared") is None
    one.detach(live)
    resumed = two.open("shared")
    assert [e.data for e in resumed.events] == [1]
    assert not resumed.lease_lost
    one.close()
    two.close()


def test_a_session_whose_rows_conflict_is_fenced_and_the_others_still_commit(
    make_store: StoreFactory, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    armed = threading.Event()
    entered = threading.Event()
    release = threading.Event()

    def hook() -> None:
        if armed.is_set():
            armed.clear()
            entered.set()
            assert release.wait(TIMEOUT)

    store = make_store(fault_hook=hook)
    ids = [f"s-{n}" for n in range(7)]
    for session_id in [*ids, "quiet", "busy"]:
        new_session(store, session_id)
        record(store, session_id, 0)
    assert store.flush_all().result(TIMEOUT) is True
    poisoned = {"s-1", "s-4", "s-5"}
    for session_id in sorted(poisoned):
        backend.foreign_event(session_id, 1)  # another writer took the next seq
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="dsh_schedule"):
        armed.set()
        record(store, "busy", 1)
        busy = store.flush("busy")
        assert entered.wait(TIMEOUT)  # the writer waits inside a round: the next takes all below
        for session_id in ids:
            record(store, session_id, 1)
        flushes = {session_id: store.flush(session_id) for session_id in ids}
        quiet = store.flush("quiet")  # a preflight with nothing queued, in the same round
        commits = store.commit_count
        release.set()
        assert busy.result(TIMEOUT) is True
        assert quiet.result(TIMEOUT) is True
        for session_id, future in flushes.items():
            if session_id in poisoned:
                with pytest.raises(SessionLeaseError, match="fenced out"):
                    future.result(TIMEOUT)
            else:
                assert future.result(TIMEOUT) is True
    assert store.commit_count > commits  # the healthy sessions committed
    assert {s for s in ids if store.lease_lost(s)} == poisoned
    with pytest.raises(SessionLeaseError, match="fenced out"):
        record(store, "s-1", 2)
    with pytest.raises(SessionLeaseError, match="fenced out"):
        store.flush("s-1").result(TIMEOUT)
    record(store, "s-0", 2)  # the write queue is not stuck behind the refused rows
    assert store.flush("s-0").result(TIMEOUT) is True
    assert store.pending_rows == 0
    fenced = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert sorted(r.getMessage().split("'")[1] for r in fenced) == sorted(poisoned)  # once each
    assert not [r for r in caplog.records if r.levelno >= logging.INFO and r.exc_info]
    reader = make_store()
    for session_id in ids:
        stored = reader.load(session_id)
        assert stored is not None
        if session_id in poisoned:
            assert stored.events[1].data == {"foreign": 1} and len(stored.events) == 2
        else:
            assert [e.seq for e in stored.events] == ([0, 1, 2] if session_id == "s-0" else [0, 1])


def test_a_whole_store_failure_keeps_every_session_queued_and_fences_nobody(
    make_store: StoreFactory,
) -> None:
    failures = [1]

    def hook() -> None:
        if failures[0]:
            failures[0] -= 1
            raise OSError("injected failure before COMMIT")

    store = make_store(fault_hook=hook)
    for session_id in ("a", "b"):
        new_session(store, session_id)
        record(store, session_id, 0)
    with pytest.raises(StoreWriteError):
        store.flush_all().result(TIMEOUT)
    assert not store.lease_lost("a") and not store.lease_lost("b")
    assert store.pending_rows == 4
    assert store.flush("a").result(TIMEOUT) is True
    assert store.flush("b").result(TIMEOUT) is True


def test_record_appends_queues_a_unit_that_commits_together_or_not_at_all(
    make_store: StoreFactory,
) -> None:
    failures = [1]

    def hook() -> None:
        if failures[0]:
            failures[0] -= 1
            raise OSError("injected failure before COMMIT")

    store = make_store(fault_hook=hook)
    new_session(store, "s")
    assert store.flush("s").exception(TIMEOUT) is not None  # the session row waits for a retry
    rows = [event(0), event(1)]
    with pytest.raises(StoreError, match="seq"):  # a gap inside the unit refuses all of it
        store.record_appends("s", [(rows[0], encode_payload(rows[0].data)), (event(2), b"\x00")])
    assert store.pending_rows == 1
    store.record_appends("s", [(item, encode_payload(item.data)) for item in rows])
    assert store.pending_rows == 3
    assert store.flush("s").result(TIMEOUT) is True
    stored = make_store().load("s")
    assert stored is not None and stored.events == tuple(rows)
    store.record_appends("s", [])  # an empty unit queues nothing
    assert store.pending_rows == 0
    record(store, "s", 2)  # the next seq follows the unit


def test_record_appends_takes_the_queue_lock_once(make_store: StoreFactory, mocker: Any) -> None:
    store = make_store()
    new_session(store, "s")
    enqueue = mocker.spy(store._writer, "_enqueue")
    rows = [event(0), event(1), event(2)]
    store.record_appends("s", [(item, encode_payload(item.data)) for item in rows])
    assert enqueue.call_count == 1  # one lock hold: the writer cannot split the unit
    assert [op.seq for op in enqueue.call_args.args[0]] == [0, 1, 2]


def test_close_stops_waiting_for_a_writer_stuck_in_a_commit(
    make_store: StoreFactory, backend: Backend
) -> None:
    """A hung disk or database: close() returns, says what is not durable, fails every flush.

    The writer finishes its commit once the disk moves. SQLite keeps the
    session locked meanwhile, so the writer also writes what was queued after.
    On PostgreSQL the lease goes with the lease connection at close: the
    writer's lease check discards the queued row, unless the server had not
    yet ended that connection's backend when it asked (the lease still held:
    the row is written under its lease, and a new holder's epoch bump waits for
    that transaction).
    """
    entered = threading.Event()
    release = threading.Event()

    def stuck_disk() -> None:
        entered.set()
        assert release.wait(TIMEOUT)

    store = make_store(fault_hook=stuck_disk)
    try:
        new_session(store, "a")
        record(store, "a", 0)
        in_flight = store.flush("a")
        assert entered.wait(TIMEOUT)  # the writer is inside the commit
        record(store, "a", 1)
        queued = store.flush("a")  # waits for the next round
        store.start_closing(0)
        store.release_session("a")  # returns at the deadline, keeping the session
        assert store.holds_lease("a")
        with pytest.raises(StoreWriteError, match="timed out") as caught:
            store.close(timeout=0)
        assert caught.value.category == "CLOSE_TIMEOUT"
        assert "3 unflushed rows of sessions 'a' are not confirmed durable" in str(caught.value)
        assert store.closed
        for flush in (in_flight, queued):
            with pytest.raises(StoreWriteError, match="timed out"):
                flush.result(0)  # failed at once, not left pending
        with pytest.raises(StoreError, match="closed"):
            record(store, "a", 2)
        with pytest.raises(StoreError, match="closed"):
            store.flush("a").result(0)
        store.close()  # idempotent: reported once
    finally:
        release.set()
    store._writer._thread.join(TIMEOUT)  # the writer finishes on its own once the disk moves
    assert not store._writer._thread.is_alive()
    stored = make_store().load("a")
    assert stored is not None
    assert len(stored.events) in ((2,) if backend.kind == "sqlite" else (1, 2))
