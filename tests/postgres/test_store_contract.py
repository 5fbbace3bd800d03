"""The persistence listener contract, run against SQLite and the real PostgreSQL server."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.sessions import EmbeddedSessionStore
from host_bridge.embedded.sqlite_store import SqliteEventStore, StoreError, StoreWriteError
from host_bridge.embedded.stores import open_store
from host_bridge.protocols import SessionEvent, SessionHeader

TIMEOUT = 20.0

StoreFactory = Callable[..., SqliteEventStore]


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


@pytest.fixture(params=("sqlite", "postgresql"))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Open (and later close) stores on one backend; every store shares one location."""
    if request.param == "sqlite":
        spec = str(tmp_path / "sessions.sqlite3")
    else:
        spec = request.getfixturevalue("pg_url")
    opened: list[SqliteEventStore] = []

    def make(**options: Any) -> SqliteEventStore:
        if "fault_hook" in options:
            from host_bridge.embedded.postgres_store import PostgresEventStore

            store: SqliteEventStore = (
                SqliteEventStore(spec, **options)
                if request.param == "sqlite"
                else PostgresEventStore(spec, **options)
            )
        else:
            store = open_store(spec)
        opened.append(store)
        return store

    yield make
    for store in opened:
        if not store.closed:
            store.close()


def event(seq: int, data: Any = None) -> SessionEvent:
    return SessionEvent("note", seq, 1_700_000_000_000 + seq, {"n": seq} if data is None else data)


def record(store: SqliteEventStore, session_id: str, seq: int, data: Any = None) -> SessionEvent:
    item = event(seq, data)
    store.record_append(session_id, item, encode_payload(item.data))
    return item


def new_session(store: SqliteEventStore, session_id: str) -> None:
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
    enqueue = mocker.spy(store, "_enqueue")
    rows = [event(0), event(1), event(2)]
    store.record_appends("s", [(item, encode_payload(item.data)) for item in rows])
    assert enqueue.call_count == 1  # one lock hold: the writer cannot split the unit
    assert [op.seq for op in enqueue.call_args.args[0]] == [0, 1, 2]
