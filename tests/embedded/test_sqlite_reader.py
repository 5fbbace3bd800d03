"""The read-only SQLite reader: it reads every kind of store file and never writes one.

"Never writes" is checked on the bytes of the database file and on the
directory listing: no migration, no schema in an empty file, no ``.locks``
file, no writer thread. Reads work while another process holds the write lock,
while a writer is inside a transaction, on a read-only file and in a
read-only directory (opened ``immutable=1`` there).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.stores import (
    SCHEMA_VERSION,
    SqliteEventStore,
    SqliteStoreReader,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
    open_store,
)
from host_bridge.protocols import SessionEvent, SessionHeader
from tests.cli.helpers import read_only_prefix, write_locked

TIMEOUT = 20.0


def event(seq: int) -> tuple[SessionEvent, bytes]:
    item = SessionEvent("note", seq, 1_700_000_000_000 + seq, {"n": seq})
    return item, encode_payload(item.data)


def write_store(path: Path, sessions: dict[str, int]) -> None:
    """A store at ``path`` with these sessions and event counts, closed cleanly."""
    with SqliteEventStore(path) as store:
        for session_id, count in sessions.items():
            store.create_session(SessionHeader(session_id), [event(i) for i in range(count)])
        assert store.flush_all().result(TIMEOUT) is True


def fingerprint(path: Path) -> tuple[str, list[str]]:
    """The database file's bytes (hashed) and the names in its directory."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), sorted(os.listdir(path.parent))


def run_read_only(script: str, db: Path, *, read_only: Path, mode: int) -> str:
    """Run ``script`` on ``db`` while ``read_only`` cannot be written; its stdout.

    ``read_only`` (the file or its directory) gets ``mode`` back afterwards.
    """
    prefix = read_only_prefix(read_only)
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-c", script, str(db)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        read_only.chmod(mode)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "sessions.sqlite3"


def test_the_reader_reads_what_the_store_wrote_and_writes_nothing(db: Path) -> None:
    write_store(db, {"a": 2, "b": 0})
    before = fingerprint(db)
    threads = {t.name for t in threading.enumerate()}
    with open_store(db, read_only=True) as reader:
        assert isinstance(reader, SqliteStoreReader)
        assert reader.label == str(db) and reader.schema_version == SCHEMA_VERSION
        assert not reader.immutable
        assert reader.session_ids() == ["a", "b"]
        assert reader.load_header("a") == SessionHeader("a")
        stored = reader.load("a")
        assert stored is not None and [e.data for e in stored.events] == [{"n": 0}, {"n": 1}]
        assert reader.load("missing") is None and reader.load_header("missing") is None
        assert reader.load("") is None
        assert {t.name for t in threading.enumerate()} == threads  # no writer thread
    digest, names = fingerprint(db)
    assert digest == before[0]
    # SQLite's reader may add its empty -wal and -shm companions; nothing else appears.
    assert set(names) - set(before[1]) <= {"sessions.sqlite3-wal", "sessions.sqlite3-shm"}
    with pytest.raises(StoreClosedError):
        reader.session_ids()
    reader.close()  # idempotent


def test_a_missing_file_is_missing_and_nothing_is_created(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "sessions.sqlite3"
    with pytest.raises(StoreMissingError, match=f"there is no session store at {path}"):
        SqliteStoreReader(path)
    assert not path.parent.exists()


def test_a_zero_length_file_stays_zero_length(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.touch()
    with pytest.raises(StoreMissingError, match="is empty: no session store was written to it"):
        SqliteStoreReader(path)
    assert path.stat().st_size == 0
    assert os.listdir(tmp_path) == ["sessions.sqlite3"]


def test_an_sqlite_database_without_tables_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 7")  # writes a header, no table
    before = path.read_bytes()
    with pytest.raises(StoreMissingError, match="without tables"):
        SqliteStoreReader(path)
    assert path.read_bytes() == before


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is not a file"):
        SqliteStoreReader(tmp_path)


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def _zeroed(path: Path) -> None:
    write_store(path, {"a": 1})
    path.write_bytes(bytes(path.stat().st_size))


def _truncated(path: Path) -> None:
    write_store(path, {f"s{i}": 50 for i in range(20)})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE accounts(id INTEGER)")


def _newer(path: Path) -> None:
    write_store(path, {"a": 1})
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")


@pytest.mark.parametrize(
    ("make", "error", "says"),
    [
        (_garbage, StoreCorruptError, "corrupt or not an SQLite database (SQLITE_NOTADB)"),
        (_zeroed, StoreCorruptError, "corrupt or not an SQLite database (SQLITE_NOTADB)"),
        (_truncated, StoreCorruptError, "corrupt"),
        (_foreign, StoreError, "is an SQLite database but not a dsh-schedule session store"),
        (_newer, StoreVersionError, "schema version 99, newer than the"),
    ],
    ids=["garbage", "zeroed", "truncated", "foreign", "newer"],
)
def test_bad_files_are_refused_and_left_as_they_were(
    tmp_path: Path, make: Any, error: type[Exception], says: str
) -> None:
    path = tmp_path / "sessions.sqlite3"
    make(path)
    before = fingerprint(path)

    def read_everything() -> None:
        with SqliteStoreReader(path) as reader:
            for session_id in reader.session_ids():
                reader.load(session_id)

    with pytest.raises(error, match=says.replace("(", r"\(").replace(")", r"\)")):
        read_everything()
    digest, names = fingerprint(path)
    assert digest == before[0]
    assert set(names) - set(before[1]) <= {"sessions.sqlite3-wal", "sessions.sqlite3-shm"}


def test_a_version_1_store_is_read_as_it_is(db: Path) -> None:
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:  # the version 1 schema, as an older release wrote it
        conn.executescript(
            "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
            "CREATE TABLE sessions(id TEXT PRIMARY KEY, seed_length INTEGER,"
            " parent_session TEXT, created_at INTEGER);"
            "CREATE TABLE events(session_id TEXT, seq INTEGER, type TEXT, time INTEGER,"
            " data BLOB, PRIMARY KEY(session_id, seq)) WITHOUT ROWID;"
            "INSERT INTO meta VALUES ('schema_version', '1');"
            "INSERT INTO sessions VALUES ('old', NULL, NULL, 1);"
        )
        conn.execute("INSERT INTO events VALUES ('old', 0, 'note', 5, ?)", (event(0)[1],))
    before = db.read_bytes()
    with SqliteStoreReader(db) as reader:
        assert reader.schema_version == 1
        stored = reader.load("old")
        assert stored is not None and [e.data for e in stored.events] == [{"n": 0}]
        assert not reader.has_due_index  # before the due index: nothing to compare
        assert reader.due_entries() == {}
        assert not reader.has_checkpoints  # nor checkpoints: states are folded from the log
        state = reader.schedule_state("old")
        assert state is not None and state.next_seq == 1 and state.entry() is None
        assert reader.load_checked("old")[2] is None
        indexed, entry = reader.load_indexed("old")
        assert indexed == stored and entry is None
    assert db.read_bytes() == before  # not migrated: no leases table, still version 1


def test_the_reader_reads_a_session_with_its_due_index_row_in_one_snapshot(db: Path) -> None:
    write_store(db, {"a": 1})
    with sqlite3.connect(db) as conn:  # a row the index would hold for a due session
        conn.execute("INSERT INTO due_index VALUES ('a', 5, 5, NULL)")
    with SqliteStoreReader(db) as reader:
        assert reader.has_due_index
        stored, entry = reader.load_indexed("a")
        assert stored is not None and len(stored.events) == 1
        assert entry is not None and entry.due_ms == 5 and entry.schedule_ms == 5
        assert reader.load_indexed("missing") == (None, None)
        assert list(reader.due_entries()) == ["a"]


def test_rows_that_do_not_decode_name_the_session_and_seq(db: Path) -> None:
    write_store(db, {"a": 3})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET data = x'c1' WHERE session_id = 'a' AND seq = 1")
    with SqliteStoreReader(db) as reader:
        assert reader.session_ids() == ["a"]
        with pytest.raises(StoreCorruptError, match="'a' has an unreadable payload at seq 1"):
            reader.load("a")


def test_the_reader_reads_while_another_process_holds_the_write_lock(db: Path) -> None:
    write_store(db, {"a": 1})
    with write_locked(db), SqliteStoreReader(db) as reader:
        assert reader.session_ids() == ["a"]
        stored = reader.load("a")
        assert stored is not None and len(stored.events) == 1


def test_the_reader_sees_committed_rows_only_while_a_writer_is_inside_its_transaction(
    db: Path,
) -> None:
    write_store(db, {"a": 1})
    inside, release = threading.Event(), threading.Event()

    def stuck_disk() -> None:
        inside.set()
        assert release.wait(TIMEOUT)

    store = SqliteEventStore(db, fault_hook=stuck_disk)
    try:
        store.record_append("a", *event(1))
        flushed = store.flush("a")
        assert inside.wait(TIMEOUT)  # the writer holds the write lock, before COMMIT
        with SqliteStoreReader(db) as reader:
            stored = reader.load("a")
            assert stored is not None and len(stored.events) == 1
        release.set()
        assert flushed.result(TIMEOUT) is True
        with SqliteStoreReader(db) as reader:
            stored = reader.load("a")
            assert stored is not None and len(stored.events) == 2
    finally:
        release.set()
        store.close()


def test_a_read_only_file_is_read(db: Path) -> None:
    write_store(db, {"a": 1})
    script = textwrap.dedent(
        """
        import sys
        from host_bridge.embedded.stores import SqliteStoreReader
        with SqliteStoreReader(sys.argv[1]) as reader:
            print(reader.immutable, reader.session_ids())
        """
    )
    assert run_read_only(script, db, read_only=db, mode=0o644) == "False ['a']\n"


def test_a_store_in_a_read_only_directory_is_opened_immutable(db: Path) -> None:
    write_store(db, {"a": 2})
    before = fingerprint(db)
    script = textwrap.dedent(
        """
        import sys
        from host_bridge.embedded.stores import SqliteStoreReader
        with SqliteStoreReader(sys.argv[1]) as reader:
            stored = reader.load("a")
            print(reader.immutable, reader.session_ids(), len(stored.events))
        """
    )
    assert run_read_only(script, db, read_only=db.parent, mode=0o755) == "True ['a'] 2\n"
    assert fingerprint(db) == before
