"""SQLite's recorder and store: session logs in one file, group-committed, locked per session.

:class:`SqliteRecorder` is the backend (a WAL transaction per round, errors named by
SQLite's error name); :class:`SqliteEventStore` composes it with the writer.

Schema (version :data:`SCHEMA_VERSION`; version 1 files are migrated on open)::

    meta(key TEXT PRIMARY KEY, value TEXT)              -- schema_version, zone_data
    sessions(id TEXT PRIMARY KEY, seed_length INTEGER, parent_session TEXT, created_at INTEGER)
    events(session_id TEXT, seq INTEGER, type TEXT, time INTEGER, data BLOB,
           PRIMARY KEY(session_id, seq)) WITHOUT ROWID   -- data: msgpack (see codec)
    leases(session_id TEXT PRIMARY KEY, owner TEXT, acquired_at INTEGER)  -- v2: holders
    due_index(session_id TEXT PRIMARY KEY, due_ms INTEGER NOT NULL,         -- v3: when each
              schedule_ms INTEGER, inbox_ms INTEGER)                        --     session is due
    schedule_checkpoints(session_id TEXT PRIMARY KEY,                       -- v4: each
                         next_seq INTEGER NOT NULL, state BLOB NOT NULL)    --     session's state
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from host_bridge.embedded.private_files import (
    PRIVATE_FILE_MODE,
    make_private_dirs,
    open_private_file,
    store_exposure,
)
from host_bridge.embedded.stores._due import DEFAULT_CACHE_SESSIONS, DueEntry, IndexRow
from host_bridge.embedded.stores._errors import (
    SessionLeaseError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
)
from host_bridge.embedded.stores._locks import SessionLockFile, want_offset
from host_bridge.embedded.stores._reads import ReadQueries, sql_reads
from host_bridge.embedded.stores._recorder import Epochs, LoseHeld, SideWrite, Stage, TakeMany
from host_bridge.embedded.stores._rows import INT64_MAX, CommitResult, Loss, Op, show_id
from host_bridge.embedded.stores._schema import (
    Migration,
    build_checkpoints,
    build_due_index,
    checkpoint_table,
    core_tables,
    due_index_tables,
    migrate,
    read_version,
    rewrite_index_row,
    write_rows,
)
from host_bridge.embedded.stores._store import EventStore, new_owner
from host_bridge.embedded.stores._zone_data import (
    ZONE_REFRESH_LOG,
    read_zone_stamp,
    refresh_zone_data,
    write_zone_stamp,
    zone_data_version,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CHECKPOINT_SCHEMA_VERSION",
    "DUE_INDEX_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "SqliteEventStore",
    "SqliteRecorder",
    "check_write_lock",
    "schema_version",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

SCHEMA_VERSION = 4
"""The schema version this code reads and writes."""

DUE_INDEX_SCHEMA_VERSION = 3
"""The first schema version with the ``due_index`` table."""

CHECKPOINT_SCHEMA_VERSION = 4
"""The first schema version with the ``schedule_checkpoints`` table."""

BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for another connection's lock before failing."""


def _build_checkpoints(conn: sqlite3.Connection) -> None:
    """Write every session's schedule checkpoint from its log (in the caller's transaction)."""
    build_checkpoints(conn.cursor(), conn.cursor(), "?")


def _rebuild_projections(conn: sqlite3.Connection) -> int:
    """Rebuild the due index and the schedule checkpoints from the logs (in the caller's
    write transaction); the index rows written."""
    conn.execute("DELETE FROM due_index")
    build_due_index(conn.cursor(), conn, "?")
    conn.execute("DELETE FROM schedule_checkpoints")
    _build_checkpoints(conn)
    (count,) = conn.execute("SELECT COUNT(*) FROM due_index").fetchone()
    return int(count)


_MIGRATIONS: dict[int, tuple[Migration[sqlite3.Connection], ...]] = {
    0: core_tables("INTEGER", "BLOB", " WITHOUT ROWID"),
    1: (
        "CREATE TABLE leases("
        " session_id TEXT PRIMARY KEY,"
        " owner TEXT NOT NULL,"
        " acquired_at INTEGER NOT NULL)",
    ),
    2: (*due_index_tables("INTEGER"), lambda conn: build_due_index(conn.cursor(), conn, "?")),
    3: (checkpoint_table("INTEGER", "BLOB"), _build_checkpoints),
}
"""Statements that migrate schema version N to N+1, keyed by N (0 is an empty file)."""

_SET_VERSION = "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)"

_ROW_ERRORS = ("SQLITE_CONSTRAINT", "SQLITE_TOOBIG", "SQLITE_MISMATCH")
"""SQLite error names of rows that can never be written, whatever the retry."""

_TABLES: dict[int, frozenset[str]] = {
    1: frozenset({"sessions", "events"}),
    2: frozenset({"sessions", "events", "leases"}),
    3: frozenset({"sessions", "events", "leases", "due_index"}),
    4: frozenset({"sessions", "events", "leases", "due_index", "schedule_checkpoints"}),
}
"""The tables besides ``meta`` that a store of each schema version has."""


_IDS_PER_STATEMENT = 500
"""Session ids bound in one ``IN (...)`` list (well under SQLite's parameter limit)."""

_MAX_CLAIM_PAGE = 4096
"""The most due index rows a batch claim reads at once (its pages double up to this)."""

_T = TypeVar("_T")


class SqliteRecorder:
    """SQLite's transactions, reads and session locks: one write connection (the writer
    thread's) and one ``query_only`` read connection (any thread, behind a lock)."""

    confirms_on_flush = False
    takes_free_sessions = True

    def __init__(self, path: Path, *, create: bool, allow_shared: bool, owner: str) -> None:
        """Open (create, migrate) the file at ``path``; ``owner`` names this store in ``leases``."""
        self._path = path
        self._owner = owner
        self._allow_shared = allow_shared
        self._file_mode = PRIVATE_FILE_MODE  # of the files this store creates
        self._read_lock = threading.Lock()
        self._locks_mutex = threading.Lock()  # opening and closing the lock file
        self._session_locks: SessionLockFile | None = None  # opened with the first lease
        self._wants: SessionLockFile | None = None  # opened with the first want or look
        self._wants_closed = False
        self._writer_conn: sqlite3.Connection | None = self._open_writer(
            create=create, initialise=True
        )
        with _closing_on_failure(self._writer_conn, path):
            self._read_conn: sqlite3.Connection | None = self._open_reader()
            self._files = _OpenFiles(path)

    @property
    def label(self) -> str:
        """The database file's path."""
        return str(self._path)

    @property
    def queries(self) -> ReadQueries[sqlite3.Connection]:
        """The read queries of an SQLite store file."""
        return SQLITE_READS

    @property
    def lock_mechanism(self) -> str | None:
        """How sessions are locked (``"ofd"`` or ``"flock"``), None before the first lease."""
        locks = self._session_locks
        return None if locks is None else locks.mechanism

    @property
    def writer_connection(self) -> sqlite3.Connection | None:
        """The write connection (for inspection while the writer is idle)."""
        return self._writer_conn

    # --- reads -----------------------------------------------------------------------

    def read(self, query: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``query`` on the read connection; SQLite errors become ``StoreError``."""
        with self._read_lock:
            conn = self._read_conn
            if conn is None:
                raise StoreClosedError(f"the session store {self._path} is closed")
            try:
                return query(conn)
            except sqlite3.Error as error:
                raise _file_error(self._path, error, "read") from None

    def due_sessions(
        self, until_ms: int | None, limit: int, held_here: Callable[[str], bool]
    ) -> list[tuple[str, int]]:
        """Due sessions not ``held_here`` whose lock looks free (with ``flock``: all)."""
        found: list[tuple[str, int]] = []
        after: tuple[int, str] | None = None
        page = limit + 16  # a few more than asked: some may be held
        while len(found) < limit:
            rows = self._due_page(after, until_ms, page)
            for session_id, due_ms in rows:
                if not (held_here(session_id) or self._held_elsewhere(session_id)):
                    found.append((session_id, due_ms))
                    if len(found) == limit:
                        break
            if len(rows) < page:
                break
            after = (rows[-1][1], rows[-1][0])
        return found

    def claim(self, session_id: str, now_ms: int, acquire: Callable[[str], int]) -> bool:
        """``acquire`` the session, then keep it only if its index row is due (or unsound)."""
        try:
            acquire(session_id)
        except SessionLeaseError:
            return False
        row = self.read(lambda conn: SQLITE_READS.index_row(conn, session_id))
        return row is not None and row.wake_ms <= now_ms

    def claim_due(
        self, now_ms: int, limit: int, wanted: Callable[[str], bool], take: TakeMany
    ) -> list[str]:
        """Page through the due rows (then the unsound ones), ``take`` the ``wanted`` whose lock
        looks free, and keep those whose index row, read again once locked, is still due."""
        claimed: list[str] = []
        seen: set[str] = set()

        def offer(candidates: Iterator[str]) -> None:
            while len(claimed) < limit:
                chunk = list(itertools.islice(candidates, limit - len(claimed)))
                if not chunk:
                    return
                got = take(chunk)
                rows = self._index_rows_of(got)
                claimed.extend(
                    session_id
                    for session_id in got
                    if (row := rows.get(session_id)) is not None and not row.wake_ms > now_ms
                )

        def free(session_id: str) -> bool:
            return wanted(session_id) and not self._held_elsewhere(session_id)

        after: tuple[int, str] | None = None
        page = limit + 16  # a few more than asked: some may be held
        while len(claimed) < limit:
            rows = self._due_page(after, now_ms, page)
            seen.update(session_id for session_id, _ in rows)
            offer(session_id for session_id, _ in rows if free(session_id))
            if len(rows) < page:
                break
            after = (rows[-1][1], rows[-1][0])
            page = min(2 * page, _MAX_CLAIM_PAGE)  # past many held rows in few reads
        if len(claimed) < limit:  # rows the listing cannot see: unsound ones, due at once
            suspects = sorted(self.read(_select_index_suspects), key=lambda item: item[0])
            offer(
                session_id
                for session_id, row in suspects
                if session_id not in seen and not row.wake_ms > now_ms and free(session_id)
            )
        return claimed

    def lock_many(self, session_ids: Sequence[str], lose_held: LoseHeld) -> dict[str, int]:
        """Take the bytes of those sessions whose lock is free (no waiting); epochs are 0."""
        got: dict[str, int] = {}
        try:
            for session_id in session_ids:
                if self._lock_session(session_id):
                    got[session_id] = 0
        except BaseException:
            self._drop_locks(list(got))
            raise
        return got

    def unlock_many(self, session_ids: Sequence[str], lost: Collection[str]) -> list[SideWrite]:
        """Drop the sessions' locks; their holder rows are forgotten by the writer."""
        self._drop_locks(session_ids)
        writes: list[SideWrite] = []
        for start in range(0, len(session_ids), _IDS_PER_STATEMENT):
            chunk = tuple(session_ids[start : start + _IDS_PER_STATEMENT])
            marks = ", ".join("?" for _ in chunk)
            writes.append(
                (
                    f"DELETE FROM leases WHERE owner = ? AND session_id IN ({marks})",
                    (self._owner, *chunk),
                )
            )
        return writes

    def _drop_locks(self, session_ids: Sequence[str]) -> None:
        """Unlock each session's byte; a failure is logged (the lock goes with the store)."""
        locks = self._session_locks
        if locks is None:
            return
        for session_id in session_ids:
            try:
                locks.unlock(session_id)
            except OSError as error:
                _log.warning(
                    "unlocking session %r failed (%s)",
                    session_id,
                    error.strerror or type(error).__name__,
                )

    def _index_rows_of(self, session_ids: Sequence[str]) -> dict[str, IndexRow]:
        """The due index rows of those sessions that have one, read in one query per chunk."""

        def select(conn: sqlite3.Connection, chunk: list[str]) -> list[tuple[str, IndexRow]]:
            marks = ", ".join("?" for _ in chunk)
            rows = conn.execute(
                "SELECT session_id, due_ms, schedule_ms, inbox_ms FROM due_index"
                f" WHERE session_id IN ({marks})",
                chunk,
            ).fetchall()
            return [(row[0], IndexRow(*row[1:])) for row in rows]

        found: dict[str, IndexRow] = {}
        for start in range(0, len(session_ids), _IDS_PER_STATEMENT):
            chunk = list(session_ids[start : start + _IDS_PER_STATEMENT])
            found.update(self.read(functools.partial(select, chunk=chunk)))
        return found

    def rebuild_index(self) -> int:
        """Rebuild the due index and the schedule checkpoints from the logs in one
        transaction, stamped with the installed zone data; the index rows written."""

        def rebuild(conn: sqlite3.Connection) -> int:
            count = _rebuild_projections(conn)
            write_zone_stamp(conn, "?", zone_data_version())
            return count

        return self._index_transaction(rebuild, f"rebuild the due index of {self._path}")

    def rebuild_session_index(self, session_id: str) -> DueEntry | None:
        """Rewrite one session's index row and checkpoint from its log in one transaction."""
        return self._index_transaction(
            lambda conn: rewrite_index_row(conn, session_id, "?"),
            f"rewrite the due index row of session {show_id(session_id)} in {self._path}",
        )

    def _due_page(
        self, after: tuple[int, str] | None, until_ms: int | None, limit: int
    ) -> list[tuple[str, int]]:
        """One page of the index in ``(due_ms, session_id)`` order after ``after``."""
        later = "" if after is None else "(due_ms, session_id) > (?, ?) AND "
        # (always bounded: text sorts after numbers, never listed)
        params = [*(after or ()), INT64_MAX if until_ms is None else until_ms, limit]
        rows = self.read(
            lambda conn: conn.execute(
                f"SELECT session_id, due_ms FROM due_index WHERE {later}due_ms <= ?"
                " ORDER BY due_ms, session_id LIMIT ?",
                params,
            ).fetchall()
        )
        return [(str(row[0]), int(row[1])) for row in rows]

    def _index_transaction(self, work: Callable[[sqlite3.Connection], _T], doing: str) -> _T:
        """Run ``work`` in one write transaction of its own, which excludes every writer of
        the file (``doing``: what errors say it could not do)."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise StoreError(f"cannot {doing} ({_category(error)})") from None
        finally:
            conn.close()
        return result

    # --- session locks ---------------------------------------------------------------

    def lock(self, session_id: str, lose_held: LoseHeld) -> int:
        """Take the session's byte in the lock file (no waiting); the epoch is always 0."""
        if not self._lock_session(session_id):
            holder = self._recorded_holder(session_id)
            named = f"held by {holder}" if holder else "its holder is not recorded yet"
            raise SessionLeaseError(
                f"session {show_id(session_id)} is live in another process or store "
                f"({named}); it cannot be taken here until its holder detaches it or exits",
                session_id=session_id,
                holder=holder,
            )
        return 0

    def took(self, session_id: str) -> list[SideWrite]:
        """Record this store as the holder in ``leases`` (for refusal messages only)."""
        return [
            (
                "INSERT OR REPLACE INTO leases(session_id, owner, acquired_at) VALUES (?, ?, ?)",
                (session_id, self._owner, time.time_ns() // 1_000_000),
            )
        ]

    def unlock(self, session_id: str, lost: bool) -> list[SideWrite]:
        """Drop the session's lock; the holder row is forgotten by the writer."""
        locks = self._session_locks
        if locks is not None:
            try:
                locks.unlock(session_id)
            except OSError as error:
                _log.warning(
                    "unlocking session %r failed (%s)", session_id, error.strerror or error
                )
        return [
            ("DELETE FROM leases WHERE session_id = ? AND owner = ?", (session_id, self._owner))
        ]

    def closing(self, holding: bool) -> list[SideWrite]:
        """The final round forgets this store's holder rows."""
        if holding and self._session_locks is not None:
            return [("DELETE FROM leases WHERE owner = ?", (self._owner,))]
        return []

    def _held_elsewhere(self, session_id: str) -> bool:
        """Whether the session's lock looks held by another store (the lock file can tell)."""
        try:
            return self._lock_file().held_elsewhere(session_id)
        except (OSError, StoreError):
            return False  # taking the session will say

    def _lock_session(self, session_id: str) -> bool:
        try:
            locks = self._lock_file()
        except OSError as error:
            raise StoreError(
                f"cannot open the session lock file of {self._path}"
                f" ({error.strerror or type(error).__name__})"
            ) from None
        try:
            return locks.try_lock(session_id)
        except OSError as error:
            raise StoreError(
                f"cannot lock session {show_id(session_id)} in {locks.path}"
                f" ({error.strerror or type(error).__name__})"
            ) from None

    # --- wanting a session held elsewhere ---------------------------------------------

    def want(self, session_id: str) -> bool:
        """Read-lock the session's byte in ``<store>.wants``; False when that cannot be
        (no OFD locks here, the file refused): then nobody hears of it."""
        wants = self._want_file(create=True)
        if wants is None:
            return False
        try:
            return wants.try_lock(session_id)
        except OSError as error:
            _log.debug("cannot want session %r (%s)", session_id, error.strerror or error)
            return False

    def unwant(self, session_id: str) -> None:
        """Drop the session's byte in the wants file (if this store holds it)."""
        wants = self._wants
        if wants is None:
            return
        try:
            wants.unlock(session_id)
        except OSError as error:
            _log.debug("cannot unwant session %r (%s)", session_id, error.strerror or error)

    def wanted(self, session_ids: Collection[str]) -> set[str]:
        """Those of ``session_ids`` whose byte another open file description read-locks in
        the wants file (no file yet: none; a look that fails: none)."""
        if not session_ids:
            return set()
        wants = self._want_file(create=False)
        if wants is None:
            return set()
        try:
            return {s for s in session_ids if wants.held_elsewhere(s)}
        except OSError as error:
            _log.debug("cannot read the wants file (%s)", error.strerror or error)
            return set()

    def _want_file(self, *, create: bool) -> SessionLockFile | None:
        """The wants file on OFD locks, opened on first use; None when there is none (yet)."""
        with self._locks_mutex:
            if self._wants is not None or self._wants_closed:
                return self._wants
            path = _sidecar(self._path, ".wants")
            if not create and not path.exists():
                return None  # nobody wanted a session of this store yet
            try:
                wants = SessionLockFile(
                    path,
                    mode=self._file_mode,
                    allow_shared=self._allow_shared,
                    shared=True,
                    offset=want_offset,
                )
            except (OSError, StoreError) as error:
                _log.debug("cannot open %s (%s)", path, error)
                return None
            if wants.mechanism != "ofd":  # a lock on the whole file would tell nothing
                wants.close()
                self._wants_closed = True
                return None
            self._wants = wants
            return wants

    def _lock_file(self) -> SessionLockFile:
        """The session lock file, opened on first use (raises ``OSError``, ``StoreError``)."""
        with self._locks_mutex:
            if self._session_locks is None:
                self._session_locks = SessionLockFile(
                    _sidecar(self._path, ".locks"),
                    mode=self._file_mode,
                    allow_shared=self._allow_shared,
                )
                _log.debug("session locks of %s use %s", self._path, self._session_locks.mechanism)
            return self._session_locks

    def _recorded_holder(self, session_id: str) -> str | None:
        """The holder recorded for ``session_id``, unless it is evidently stale."""
        try:
            row = self.read(
                lambda conn: conn.execute(
                    "SELECT owner FROM leases WHERE session_id = ?", (session_id,)
                ).fetchone()
            )
        except StoreError:
            return None
        owner = None if row is None else row[0]
        if not isinstance(owner, str) or owner == self._owner:
            return None
        return None if _is_dead_local_owner(owner) else owner

    # --- writes (writer thread) ------------------------------------------------------

    def write(
        self, rows: list[Op], side: list[SideWrite], check: set[str], stage: Stage, epochs: Epochs
    ) -> CommitResult:
        """No confirming; first the locks move to the lock file now at the path (or are lost)."""
        lost: dict[str, Loss] = {}
        locks = self._session_locks
        if locks is not None and rows:
            for session_id in locks.ensure_current():
                lost[session_id] = Loss(
                    session_id,
                    "lease",
                    f"session {show_id(session_id)} was taken by another store after the lock "
                    "file was deleted; its unwritten events were discarded and it accepts no "
                    "more writes here",
                )
            if lost:
                rows = [op for op in rows if op.session_id not in lost]
        if not (rows or side):
            return None, lost
        return self._write(rows, side, stage), lost

    def is_row_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` means some rows can never be written (not a whole-store failure)."""
        return _category(error).startswith(_ROW_ERRORS)

    def category(self, error: BaseException) -> str:
        """SQLite's error name of ``error`` (``SQLITE_FULL``...), else its type; no text."""
        return _category(error)

    def writer_stopped(self) -> None:
        """Close the write connection and drop every lock."""
        if self._writer_conn is not None:
            self._writer_conn.close()
            self._writer_conn = None
        with self._locks_mutex:
            locks, self._session_locks = self._session_locks, None
            wants, self._wants = self._wants, None
            self._wants_closed = True
        for held in (locks, wants):
            if held is not None:
                held.close()
        self._files.close()

    def close(self, writer_stopped: bool) -> None:
        """Close the read connection (the writer closes its own when it stops)."""
        with self._read_lock:
            if self._read_conn is not None:
                self._read_conn.close()
                self._read_conn = None
        if writer_stopped:
            self._files.close()

    def _write(
        self, batch: list[Op], side: Sequence[SideWrite], stage: Stage, *, restored: bool = False
    ) -> BaseException | None:
        """Write ``batch`` and ``side`` in one transaction; on failure roll back, return why.

        Before ``COMMIT`` the files are checked (:class:`_OpenFiles`): deleted ones are
        rebuilt (:meth:`_restore`) and the round written again; replaced ones fail it.
        """
        try:
            conn = self._writer_conn
            if conn is None:
                conn = self._writer_conn = self._open_writer(create=False, initialise=False)
            conn.execute("BEGIN IMMEDIATE")
            write_rows(conn, batch, stage, "?", side)
            self._files.check()
            conn.execute("COMMIT")
        except Exception as error:  # every failure rolls back; the writer names its category
            if isinstance(error, _StoreFileMovedError) and error.restorable and not restored:
                self._rollback()
                if self._restore():
                    return self._write(batch, side, stage, restored=True)
            self._rollback()
            return error
        return None

    def _restore(self) -> bool:
        """Rebuild the store file at its path by an online backup of the open connection.

        The copy is fsync'ed beside the path, then renamed into place. Returns False,
        changing nothing, when no copy can be made (the next flush tries again).
        """
        conn = self._writer_conn
        if conn is None:
            return False
        copy = _sidecar(self._path, ".restore")
        try:
            copy.unlink(missing_ok=True)
            os.close(open_private_file(copy, os.O_WRONLY, mode=self._file_mode))
            target = sqlite3.connect(copy, isolation_level=None)
            try:
                conn.backup(target)
            finally:
                target.close()
            _fsync_path(copy)
        except (OSError, sqlite3.Error) as error:
            _log.error(
                "the session store %s was deleted while open and cannot be rebuilt yet (%s)",
                self._path,
                _category(error),
            )
            return False
        try:
            conn.close()
            self._writer_conn = None
            with self._read_lock:
                if self._read_conn is not None:
                    self._read_conn.close()
                    self._read_conn = None
                for suffix in ("-wal", "-shm"):
                    _sidecar(self._path, suffix).unlink(missing_ok=True)
                os.replace(copy, self._path)
                _fsync_path(self._path.parent)
                self._writer_conn = self._open_writer(create=False, initialise=False)
                self._read_conn = self._open_reader()
            self._files.reopen()
        except (OSError, sqlite3.Error, StoreError) as error:
            _log.error(
                "rebuilding the session store %s failed (%s); a copy may remain at %s",
                self._path,
                _category(error),
                copy,
            )
            return False
        _log.warning(
            "the session store %s was deleted while open; rebuilt it from the open connection",
            self._path,
        )
        return True

    def _rollback(self) -> None:
        conn = self._writer_conn
        if conn is None:
            return
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            _log.warning("session store rollback failed; the write connection will be reopened")
            conn.close()
            self._writer_conn = None

    # --- connections -----------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_reader(self) -> sqlite3.Connection:
        conn = self._connect()
        conn.execute("PRAGMA query_only = ON")
        return conn

    def _open_writer(self, *, create: bool, initialise: bool) -> sqlite3.Connection:
        """Open the write connection: WAL, synchronous=FULL, schema checked or migrated."""
        if create:
            try:
                make_private_dirs(self._path.parent)
            except OSError as error:
                raise StoreError(
                    f"cannot create the data directory {self._path.parent}"
                    f" ({error.strerror or type(error).__name__})"
                ) from None
        try:
            found = self._path.exists()
        except OSError as error:  # a directory on the way cannot be searched
            reason = error.strerror or type(error).__name__
            raise StoreError(f"cannot read the session store {self._path} ({reason})") from None
        if not found and not create:
            raise StoreMissingError(
                f"there is no session store at {self._path}",
                location=str(self._path),
                reason="no such file",
            )
        if found and not self._path.is_file():
            raise StoreError(f"{self._path} is not a file")
        if initialise:
            self._make_private_file()
        try:
            conn = self._connect()
        except sqlite3.Error as error:
            raise _file_error(self._path, error) from None
        with _closing_on_failure(conn, self._path):
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                _log.warning("session store %s runs in journal mode %s, not WAL", self._path, mode)
            conn.execute("PRAGMA synchronous = FULL")
            if conn.execute("PRAGMA synchronous").fetchone()[0] != 2:
                raise StoreError(f"session store {self._path} refused synchronous=FULL")
            if initialise:
                self._migrate(conn)
        return conn

    def _make_private_file(self) -> None:
        """Before SQLite opens the file: refuse a shared store, or create it 0600 (SQLite
        gives the ``-wal`` and ``-shm`` files the database file's mode)."""
        exposure = store_exposure(self._path)
        if exposure is not None:
            if not self._allow_shared:
                raise exposure
            _log.warning("using a shared session store (allowed): %s", exposure.problem)
        try:
            if self._path.exists():
                self._file_mode = os.stat(self._path).st_mode & 0o666 | 0o600
            else:
                os.close(open_private_file(self._path, os.O_WRONLY))
        except OSError as error:
            raise StoreError(
                f"cannot create the session store {self._path}"
                f" ({error.strerror or type(error).__name__})"
            ) from None

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Bring the schema to :data:`SCHEMA_VERSION`, one table-driven step at a time, and
        the due index to the installed zone data (see ``_zone_data``), under the write lock."""
        version = schema_version(conn, self._path)
        if version == SCHEMA_VERSION and read_zone_stamp(conn) == zone_data_version():
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            start = schema_version(conn, self._path)  # again, now under the write lock
            migrate(conn, start, SCHEMA_VERSION, _MIGRATIONS, _SET_VERSION)
            refreshed = refresh_zone_data(
                conn,
                "?",
                index_existed=start >= DUE_INDEX_SCHEMA_VERSION,
                rebuild=lambda: _rebuild_projections(conn),
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if start != SCHEMA_VERSION:
            _log.info("session store %s migrated to schema version %d", self._path, SCHEMA_VERSION)
        if refreshed is not None:
            check, count = refreshed
            _log.info(ZONE_REFRESH_LOG, self._path, check.recorded_text, check.installed, count)


class SqliteEventStore(EventStore):
    """Durable session logs in one SQLite file; the embedded host's persistence listener.

    With ``create`` missing directories (0700) and the file (0600) are made; else a
    missing file is a :class:`StoreError`, as is a file that is no session store
    (:class:`StoreCorruptError`, :class:`StoreVersionError`). A store other users can
    reach is refused (:class:`SharedStoreError`) unless ``allow_shared_store``.
    ``fault_hook`` is called just before each ``COMMIT`` of session rows (a test seam);
    ``due_cache_sessions`` bounds the due index state kept between commits;
    ``program``: which program the holder record names (see
    :func:`~host_bridge.embedded.stores.new_owner`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        fault_hook: Callable[[], None] | None = None,
        allow_shared_store: bool = False,
        due_cache_sessions: int = DEFAULT_CACHE_SESSIONS,
        program: str | None = None,
    ) -> None:
        self._path = Path(os.fspath(path))
        owner = new_owner(program)
        self._sqlite = SqliteRecorder(
            self._path, create=create, allow_shared=allow_shared_store, owner=owner
        )
        super().__init__(self._sqlite, owner, due_cache_sessions, fault_hook, "dsh-store-writer")

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def lock_mechanism(self) -> str | None:
        """How sessions are locked (``"ofd"`` or ``"flock"``), None before the first lease."""
        return self._sqlite.lock_mechanism


# --- helpers -------------------------------------------------------------------------------


def schema_version(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> int:
    """The schema version of the database on ``conn``; 0 when it has no tables; only reads.

    Raises :class:`StoreError` for another application's database, else like
    :func:`~host_bridge.embedded.stores._schema.read_version`.
    """
    tables = {
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    if "meta" not in tables:
        if tables:
            raise StoreError(f"{path} is an SQLite database but not a dsh-schedule session store")
        return 0
    return read_version(conn, str(path), tables, SCHEMA_VERSION, _TABLES, least=1)


def check_write_lock(path: str | os.PathLike[str]) -> None:
    """Raise :class:`StoreError` when another connection keeps the SQLite file write-locked.

    Begins and rolls back an empty write transaction, waiting up to
    :data:`BUSY_TIMEOUT_MS`, so a locked store is found before a host starts rather
    than at its first commit. Writes and creates nothing; other failures are left to
    opening the store.
    """
    target = Path(os.fspath(path))
    if not target.is_file():
        return
    try:
        conn = sqlite3.connect(
            f"file:{quote(os.fspath(target))}?mode=rw",
            uri=True,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
        )
    except sqlite3.Error:
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.Error as error:
        category = _category(error)
        if category.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            raise StoreError(
                f"the session store {target} is locked by another process ({category} for "
                f"{BUSY_TIMEOUT_MS / 1000:g} s); retry once that process is done"
            ) from None
    finally:
        conn.close()


def _file_error(path: Path, error: sqlite3.Error, doing: str = "open") -> StoreError:
    """What a failure to ``doing`` (open, read) the store at ``path`` means, without SQLite's
    text; damage is named as such whatever was being done."""
    category = _category(error)
    if category.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return StoreCorruptError(
            f"{path} is corrupt or not an SQLite database ({category}); "
            "move it aside or restore a backup"
        )
    return StoreError(f"cannot {doing} the session store {path} ({category})")


@contextlib.contextmanager
def _closing_on_failure(conn: sqlite3.Connection, path: Path) -> Iterator[None]:
    """Close ``conn`` when the block fails; an SQLite error is told as on opening."""
    try:
        yield
    except sqlite3.Error as error:
        conn.close()
        raise _file_error(path, error) from None
    except BaseException:
        conn.close()
        raise


_SUSPECT_ROWS = (
    "SELECT session_id, due_ms, schedule_ms, inbox_ms FROM due_index"
    " WHERE typeof(session_id) = 'text' AND (typeof(due_ms) != 'integer'"
    " OR typeof(schedule_ms) NOT IN ('integer', 'null')"
    " OR typeof(inbox_ms) NOT IN ('integer', 'null')"
    " OR due_ms IS NOT min(coalesce(schedule_ms, inbox_ms), coalesce(inbox_ms, schedule_ms)))"
)
"""Rows with a column that is not an integer, or a ``due_ms`` that is not the earlier of
``schedule_ms`` and ``inbox_ms`` (NULL when neither is set): one scan of the index."""


def _select_index_suspects(conn: sqlite3.Connection) -> list[tuple[str, IndexRow]]:
    """The due index rows that may be unsound (see :data:`_SUSPECT_ROWS`)."""
    return [(row[0], IndexRow(*row[1:])) for row in conn.execute(_SUSPECT_ROWS)]


class _StoreFileMovedError(Exception):
    """The store's files are no longer the ones at its path (``args[0]`` is the category)."""

    def __init__(self, category: str, *, restorable: bool) -> None:
        super().__init__(category)
        self.sqlite_errorname = category
        self.restorable = restorable


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return (info.st_dev, info.st_ino)


class _OpenFiles:
    """The identity of the database and WAL files the connections write, checked at the path.

    Two ``stat`` calls per commit round and no descriptor of our own: closing a
    second descriptor of an SQLite database file would drop the POSIX locks
    SQLite holds on it for the whole process.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wal_path = _sidecar(path, "-wal")
        self._db: tuple[int, int] | None = None
        self._wal: tuple[int, int] | None = None
        self.reopen()

    def reopen(self) -> None:
        """Take the identity of the files now at the path (at opening, and after a rebuild)."""
        self._db, self._wal = _inode(self._path), _inode(self._wal_path)

    def check(self) -> None:
        """Raise :class:`_StoreFileMovedError` unless the store's files are still at its path.

        A file deleted or renamed away is restorable (the open connection still
        sees every committed row); another file at the path is not.
        """
        try:
            now_db, now_wal = _inode(self._path), _inode(self._wal_path)
        except OSError:
            raise _StoreFileMovedError("STORE_FILE_UNCHECKED", restorable=False) from None
        if self._db is None:
            raise _StoreFileMovedError("STORE_FILE_UNCHECKED", restorable=False)
        if now_db is None:
            raise _StoreFileMovedError("STORE_FILE_DELETED", restorable=True)
        if now_db != self._db:
            raise _StoreFileMovedError("STORE_FILE_REPLACED", restorable=False)
        if self._wal is None:
            self._wal = now_wal  # the WAL appears with the first write
        elif now_wal != self._wal:
            raise _StoreFileMovedError("STORE_WAL_DELETED", restorable=True)

    def close(self) -> None:
        """Forget the identities; idempotent (no descriptor is held)."""
        self._db = self._wal = None


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_dead_local_owner(owner: str) -> bool:
    """Whether ``owner`` (``host:pid:tag``) names a process of this host that no longer runs."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or parts[0] != socket.gethostname():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists (we may not signal it) or we cannot tell
    return False


def _category(error: BaseException) -> str:
    name = getattr(error, "sqlite_errorname", None)
    return name if isinstance(name, str) and name else type(error).__name__


@contextlib.contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """The statements inside read one snapshot (a read transaction, rolled back)."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


SQLITE_READS: ReadQueries[sqlite3.Connection] = sql_reads("?", _snapshot, _select_index_suspects)
"""The read queries of an SQLite store file (writable and read-only alike)."""
