"""The SQLite store's own cases: its file, schema and migration, its writer's internals, paths.

What every store does (on SQLite and PostgreSQL alike) is the contract in
``tests/stores``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.paths import DEFAULT_DATA_ENV, default_data_dir, store_path
from host_bridge.embedded.stores import (
    SCHEMA_VERSION,
    SqliteEventStore,
    StoreCorruptError,
    StoreError,
)
from host_bridge.embedded.stores import _sqlite as sqlite_store
from host_bridge.embedded.stores import _writer as event_store
from host_bridge.protocols import SessionHeader
from tests.stores.case import event, ok, record


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "data" / "sessions.sqlite3"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteEventStore]:
    with SqliteEventStore(db) as opened:
        yield opened


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


def test_a_failed_commit_is_named_by_sqlite_never_by_its_text() -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorname = "SQLITE_FULL"
    error = event_store.commit_failed(full, 3, sqlite_store._category(full))
    assert error.category == "SQLITE_FULL"
    assert "disk is full" not in str(error)


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


# --- the writer's internals ---------------------------------------------------------------
# These two look inside the engine; the rest of the store contract is in tests/stores.


def test_record_appends_takes_the_queue_lock_once(store: SqliteEventStore, mocker: Any) -> None:
    store.acquire_session("s")
    store.create_session(SessionHeader("s"))
    enqueue = mocker.spy(store._writer, "_enqueue")
    rows = [event(0), event(1), event(2)]
    store.record_appends("s", [(item, encode_payload(item.data)) for item in rows])
    assert enqueue.call_count == 1  # one lock hold: the writer cannot split the unit
    assert [op.seq for op in enqueue.call_args.args[0]] == [0, 1, 2]


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


def test_a_conflict_in_the_final_round_still_clears_the_holder_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteEventStore(path)
    for session_id in ("s1", "s2"):
        store.acquire_session(session_id)
        store.create_session(SessionHeader(session_id))
    ok(store.flush_all())
    with sqlite3.connect(path) as conn:  # another writer took seq 0 of s1
        conn.execute("INSERT INTO events VALUES ('s1', 0, 'note', 1, x'01')")
    for session_id in ("s1", "s2"):
        record(store, session_id, 0)
    store.close()  # the final round is bisected; its holder rows go with the healthy half
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT session_id FROM leases").fetchall() == []
        assert conn.execute("SELECT session_id FROM events WHERE session_id = 's2'").fetchall()
