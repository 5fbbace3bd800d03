"""The store contract on SQLite: a file per test, edited behind the store's back by sqlite3."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from typing import Any, ClassVar

import pytest

from host_bridge.protocols import SessionHeader
from tests.stores.backends import (
    SQLITE_SCHEMA_VERSION,
    SessionLeaseError,
    SqliteEventStore,
    Store,
    StoreClosedError,
    StoreCorruptError,
    StoredSession,
    StoreWriteError,
    sqlite_module,
)
from tests.stores.case import TIMEOUT, Seam, new_session, ok, record
from tests.stores.checkpoints import CheckpointContract
from tests.stores.claims import ClaimContract
from tests.stores.contract import StoreContract
from tests.stores.cron import CronContract
from tests.stores.due_index import DueIndexContract
from tests.stores.wants import WantContract


class TestSqliteStore(
    StoreContract, DueIndexContract, CheckpointContract, ClaimContract, CronContract, WantContract
):
    """Every case of the store contract, its due index, checkpoints, batch claims, cron
    records and hand-over requests, on an SQLite file."""

    store_class: ClassVar[type[Store]] = SqliteEventStore
    schema_version = SQLITE_SCHEMA_VERSION
    due_index_version = 3
    conflict_category = "SQLITE_CONSTRAINT"
    flush_confirms_lease = False
    # The file lock outlives a close that stopped waiting: the writer writes both rows.
    events_after_a_stuck_close: ClassVar[tuple[int, ...]] = (2,)
    location: str

    def new_location(self, request: pytest.FixtureRequest) -> str:
        return str(request.getfixturevalue("tmp_path") / "sessions.sqlite3")

    def construct(self, **options: Any) -> Store:
        return SqliteEventStore(self.location, **options)

    def collide_want_keys(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sqlite_module, "want_offset", lambda session_id: 7)

    def wait_gone(self, backend_pid: int) -> None:
        pass  # the kernel dropped the dead process's locks before its exit was reported

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.location, isolation_level=None)) as conn:
            return list(conn.execute(statement, params))

    def write_previous_schema(self, events: list[tuple[str, int, str, bytes]]) -> None:
        statements = [
            "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)",
            "CREATE TABLE sessions(id TEXT PRIMARY KEY, seed_length BIGINT,"
            " parent_session TEXT, created_at BIGINT)",
            "CREATE TABLE events(session_id TEXT, seq BIGINT, type TEXT, time BIGINT,"
            " data BLOB, PRIMARY KEY(session_id, seq))",
            "CREATE TABLE leases(session_id TEXT PRIMARY KEY, owner TEXT NOT NULL,"
            " acquired_at INTEGER NOT NULL)",
            "INSERT INTO meta VALUES ('schema_version', '2')",
        ]
        for statement in statements:
            self.sql(statement)
        for session_id in sorted({e[0] for e in events}):
            self.sql("INSERT INTO sessions VALUES (?, NULL, NULL, 1)", session_id)
        for session_id, seq, type_, payload in events:
            self.sql("INSERT INTO events VALUES (?, ?, ?, 1, ?)", session_id, seq, type_, payload)
        os.chmod(self.location, 0o600)  # private, as the store makes its files

    # --- SQLite only ------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("column", "value"),
        [("type", None), ("type", b"blob"), ("time", "noon"), ("data", "text, not a blob")],
    )
    def test_malformed_event_columns_are_corrupt(self, column: str, value: Any) -> None:
        reader = self.stored_with("odd", 1)  # PostgreSQL's column types refuse these values
        self.sql(f"UPDATE events SET {column} = ? WHERE session_id = 'odd'", value)
        with pytest.raises(StoreCorruptError, match="malformed event at seq 0"):
            reader.load("odd")

    @pytest.mark.parametrize(
        ("column", "value"),
        [("seed_length", -3), ("seed_length", "x"), ("parent_session", b"blob")],
    )
    def test_malformed_session_rows_are_corrupt(self, column: str, value: Any) -> None:
        reader = self.stored_with("odd", 0)
        self.sql(f"UPDATE sessions SET {column} = ? WHERE id = 'odd'", value)
        with pytest.raises(StoreCorruptError, match=column):
            reader.load("odd")
        with pytest.raises(StoreCorruptError, match=column):
            reader.load_header("odd")

    def test_a_real_busy_database_is_rolled_back_and_retried(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(sqlite_module, "BUSY_TIMEOUT_MS", 50)
        store = self.make()
        new_session(store, "a")
        written = record(store, "a", 0)
        blocker = sqlite3.connect(self.location, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        try:
            with pytest.raises(StoreWriteError) as info:
                store.flush("a").result(TIMEOUT)
            assert info.value.category.startswith("SQLITE_BUSY")
            assert store.pending_rows == 2
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        ok(store.flush("a"))
        assert store.load("a") == StoredSession(SessionHeader("a"), (written,))

    def test_creating_a_session_after_close_fails_as_closed(self) -> None:
        store = self.make()  # PostgreSQL refuses it for the lease close gave back
        store.close()
        with pytest.raises(StoreClosedError):
            store.create_session(SessionHeader("b"))

    def test_a_close_that_stopped_waiting_keeps_the_sessions_locked_until_the_writer_ends(
        self,
    ) -> None:
        """Rows of a stuck commit may still be committed: nobody else may take their session."""
        seam = Seam()
        opened, join_writer = self.make_with_writer(fault_hook=seam)
        new_session(opened, "a")
        seam.pause()
        waiting = opened.flush("a")
        assert seam.entered.wait(TIMEOUT)
        other = self.make()
        try:
            with pytest.raises(StoreWriteError, match="timed out after 0 s") as caught:
                opened.close(timeout=0)
            assert caught.value.category == "CLOSE_TIMEOUT"
            with pytest.raises(StoreWriteError):
                waiting.result(0)
            with pytest.raises(SessionLeaseError, match="live in another process"):
                other.acquire_session("a")
        finally:
            seam.unpause()
        join_writer()
        other.acquire_session("a")  # the writer ended: its locks went with it
        assert other.load("a") == StoredSession(SessionHeader("a"), ())
