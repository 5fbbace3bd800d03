"""One owner per session on SQLite: other processes and stores are refused until it lets go."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.sessions import (
    EmbeddedSessionStore,
    SessionError,
    SessionLeaseRefusedError,
)
from host_bridge.embedded.stores import (
    SessionLeaseError,
    SessionLockFile,
    SqliteEventStore,
    StoreError,
)
from host_bridge.embedded.stores import _locks as session_locks
from host_bridge.protocols import SessionEvent
from tests.embedded.helpers import python_child

TIMEOUT = 20.0


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "sessions.sqlite3"


@pytest.fixture
def stores() -> Iterator[list[SqliteEventStore]]:
    opened: list[SqliteEventStore] = []
    yield opened
    for store in opened:
        if not store.closed:
            store.close()


def open_sqlite(db: Path, opened: list[SqliteEventStore]) -> SqliteEventStore:
    store = SqliteEventStore(db)
    opened.append(store)
    return store


def record(store: SqliteEventStore, session_id: str, seq: int) -> None:
    item = SessionEvent("note", seq, 1_700_000_000_000 + seq, {"n": seq})
    store.record_append(session_id, item, encode_payload(item.data))


_CHILD = textwrap.dedent(
    """
    import json, sys
    from host_bridge.embedded.sessions import EmbeddedSessionStore
    from host_bridge.embedded.stores import SqliteEventStore

    store = SqliteEventStore(sys.argv[1])
    sessions = EmbeddedSessionStore(store)
    live = sessions.open("shared")
    live.append("note", "from the child")
    assert sessions.flush(live).result(10) is True
    print(json.dumps({"owner": store.owner}), flush=True)
    sys.stdin.read()  # hold the session until killed
    """
)


def test_a_session_live_in_another_process_is_refused_until_that_process_dies(
    db: Path, stores: list[SqliteEventStore]
) -> None:
    child = python_child(_CHILD, str(db))
    try:
        assert child.stdout is not None
        owner = json.loads(child.stdout.readline())["owner"]
        assert owner.startswith(f"{socket.gethostname()}:{child.pid}:")
        sessions = EmbeddedSessionStore(open_sqlite(db, stores))
        for attempt in (sessions.open, sessions.resume):
            with pytest.raises(SessionLeaseRefusedError) as refused:
                attempt("shared")
            error = refused.value
            assert isinstance(error, SessionLeaseError) and isinstance(error, StoreError)
            assert isinstance(error, SessionError)
            assert error.holder == owner and error.session_id == "shared"
            assert f"held by {owner}" in str(error)
        assert sessions.get("shared") is None
        other = sessions.create("mine")  # the refusal leaves this process's sessions alone
        other.append("note", 1)
        assert sessions.flush(other).result(TIMEOUT) is True

        child.send_signal(signal.SIGKILL)  # the kernel drops the child's locks
        child.wait(TIMEOUT)
        taken = sessions.open("shared")
        assert [e.data for e in taken.events] == ["from the child"]
        taken.append("note", "from the parent")
        assert sessions.flush(taken).result(TIMEOUT) is True
        sessions.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(TIMEOUT)


def test_a_stale_holder_row_of_a_dead_process_is_not_named(
    db: Path, stores: list[SqliteEventStore]
) -> None:
    store = open_sqlite(db, stores)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    stale = f"{socket.gethostname()}:{dead.stdout.strip()}:00000000"
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("INSERT INTO leases VALUES ('s', ?, 0)", (stale,))
    finally:
        conn.close()
    other = SessionLockFile(Path(f"{db}.locks"))  # an owner whose row is not written yet
    try:
        assert other.try_lock("s")
        with pytest.raises(SessionLeaseError) as refused:
            store.acquire_session("s")
        assert refused.value.holder is None
        assert "held by" not in str(refused.value) and "not recorded yet" in str(refused.value)
    finally:
        other.close()
    store.acquire_session("s")


def test_the_holder_row_goes_with_the_session(db: Path, stores: list[SqliteEventStore]) -> None:
    store = open_sqlite(db, stores)
    store.acquire_session("s")
    assert store.flush_all().result(TIMEOUT) is True

    def holders() -> list[tuple[str, str]]:
        conn = sqlite3.connect(db)
        try:
            return list(conn.execute("SELECT session_id, owner FROM leases"))
        finally:
            conn.close()

    assert holders() == [("s", store.owner)]
    store.acquire_session("t")
    store.release_session("s")
    assert store.flush_all().result(TIMEOUT) is True
    assert holders() == [("t", store.owner)]
    store.close()
    assert holders() == []


@pytest.mark.parametrize("move", ["deleted", "renamed away"])
def test_a_lock_file_no_longer_at_its_path_is_made_again_before_the_next_commit(
    db: Path, stores: list[SqliteEventStore], move: str
) -> None:
    store = open_sqlite(db, stores)
    sessions = EmbeddedSessionStore(store)
    live = sessions.create("s")
    live.append("note", 1)
    assert sessions.flush(live).result(TIMEOUT) is True
    locks = Path(f"{db}.locks")
    if move == "deleted":
        locks.unlink()
    else:
        locks.rename(db.parent / "moved.locks")  # still linked, no longer at the path
    live.append("note", 2)
    assert sessions.flush(live).result(TIMEOUT) is True  # the writer moved the lock first
    later = EmbeddedSessionStore(open_sqlite(db, stores))
    with pytest.raises(SessionLeaseRefusedError):
        later.open("s")
    assert not live.lease_lost
    sessions.close()


def test_a_database_renamed_away_is_rebuilt_at_its_path_before_the_next_commit(
    db: Path, stores: list[SqliteEventStore]
) -> None:
    store = open_sqlite(db, stores)
    sessions = EmbeddedSessionStore(store)
    live = sessions.create("s")
    live.append("note", 1)
    assert sessions.flush(live).result(TIMEOUT) is True
    for suffix in ("", "-wal", "-shm"):
        moved = Path(f"{db}{suffix}")
        if moved.exists():
            moved.rename(db.parent / f"moved{suffix}")  # still linked, not at the path
    live.append("note", 2)
    assert sessions.flush(live).result(TIMEOUT) is True
    sessions.close()
    reopened = open_sqlite(db, stores)
    loaded = reopened.load("s")
    assert loaded is not None
    assert [e.data for e in loaded.events] == [1, 2]  # what was acknowledged is at the path


def test_without_ofd_locks_one_store_holds_the_whole_file(
    db: Path, stores: list[SqliteEventStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_locks, "ofd_locks_available", lambda: False)
    one = open_sqlite(db, stores)
    two = open_sqlite(db, stores)
    one.acquire_session("a")
    assert one.lock_mechanism == "flock"
    with pytest.raises(SessionLeaseError):
        two.acquire_session("b")  # coarser than OFD locks, never less safe
    one.release_session("a")
    two.acquire_session("b")
    with pytest.raises(SessionLeaseError):
        one.acquire_session("a")


def test_a_direct_write_takes_the_session_or_is_refused(
    db: Path, stores: list[SqliteEventStore]
) -> None:
    one = open_sqlite(db, stores)
    two = open_sqlite(db, stores)
    one.acquire_session("s")
    with pytest.raises(SessionLeaseError):
        two.acquire_session("s")
    from host_bridge.protocols import SessionHeader

    two.create_session(SessionHeader("t"))  # takes "t" on the way
    assert two.holds_lease("t")
    record(two, "t", 0)
    assert two.flush("t").result(TIMEOUT) is True
    with pytest.raises(SessionLeaseError):
        record(one, "t", 1)
