"""The embedded host's persistence listener: session logs in SQLite, group-committed.

:class:`SqliteEventStore` is an :class:`~host_bridge.embedded.stores._writer.EventStore`:
appends are queued in memory and one writer thread group-commits them (see
that module for the queue, flush barrier, retries and fencing). Here a round
is one SQLite transaction (WAL, ``synchronous=FULL``: the commit is fsync'ed),
and a failure is named by SQLite's error name (``SQLITE_FULL``...), never its text.

Before each ``COMMIT`` the writer checks that the database and WAL files at
the path are still the ones it opened. If they were deleted under it, it
rebuilds the store at its path from its open connection before committing,
so an acknowledgement never refers to an unlinked file; if another file took
the path, it refuses to write (see :meth:`SqliteEventStore._write`).

One owner per session. Many processes (and many store objects in one process)
may open the same file, but a session is written by one store at a time:
:meth:`~SqliteEventStore.acquire_session` takes the session's exclusive lock
in ``<file>.locks`` beside the database, a byte-range lock on an *open file
description* (``F_OFD_SETLK``, see :mod:`host_bridge.embedded.stores._locks`),
which the kernel drops when the process dies, so no heartbeat or expiry is
needed and a SIGKILLed owner frees its sessions at once. Another store asking
for a held session gets :class:`SessionLeaseError` naming the holder
(``host:pid:tag``, recorded in ``leases`` by the writer soon after the lock
is taken; a row left by a dead process of this host is not named). A write to a
session not yet held takes it first. :meth:`~SqliteEventStore.release_session`
lets go once the session's rows are durable; :meth:`~SqliteEventStore.close`
lets every session go after the last write. Such a lock cannot be lost while
the store is open, so a flush needs no extra check; only a lock file deleted
under the store is noticed (before the next ``COMMIT``, the locks are taken
again on a new file at the path, and a session someone else took meanwhile is
lost: its flushes resolve ``False``, see :meth:`~SqliteEventStore.lease_lost`).

The store's files are private to the user who runs it: its directory is made
``0700`` and every file of it ``0600`` whatever the umask, and a store other
local users can read or lock is refused (see :mod:`host_bridge.embedded.private_files`).

Reads (:meth:`~SqliteEventStore.load`, :meth:`~SqliteEventStore.session_ids`...)
see durable state only, use their own connection and are safe from any thread.
A session's rows are validated when queued (known session, next ``seq``).

Schema (version :data:`SCHEMA_VERSION`; version 1 files are migrated on open)::

    meta(key TEXT PRIMARY KEY, value TEXT)              -- schema_version
    sessions(id TEXT PRIMARY KEY, seed_length INTEGER, parent_session TEXT, created_at INTEGER)
    events(session_id TEXT, seq INTEGER, type TEXT, time INTEGER, data BLOB,
           PRIMARY KEY(session_id, seq)) WITHOUT ROWID   -- data: msgpack (see codec)
    leases(session_id TEXT PRIMARY KEY, owner TEXT, acquired_at INTEGER)  -- v2: holders
    due_index(session_id TEXT PRIMARY KEY, due_ms INTEGER NOT NULL,         -- v3: when each
              schedule_ms INTEGER, inbox_ms INTEGER)                        --     session is due

The due index (:mod:`host_bridge.embedded.stores._due`) is a projection of the
logs, written by the writer in the same transaction as the rows that move it,
built from the logs by the migration to version 3 and by :meth:`~SqliteEventStore.reindex`.

Session ids are opaque non-empty strings bound as SQL parameters; an id with a
NUL character or a lone surrogate cannot round-trip through SQLite text
faithfully and is refused with :class:`StoreError` by :meth:`~SqliteEventStore.create_session`.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from host_bridge.embedded.private_files import (
    PRIVATE_FILE_MODE,
    make_private_dirs,
    open_private_file,
    store_exposure,
)
from host_bridge.embedded.stores._due import (
    WAKE_EVENT_TYPES,
    DueEntry,
    IndexRow,
    StoredRow,
    project_logs,
    project_session,
)
from host_bridge.embedded.stores._errors import (
    SessionLeaseError,
    SharedStoreError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
    StoreWriteError,
)
from host_bridge.embedded.stores._locks import SessionLockFile
from host_bridge.embedded.stores._reads import ReadQueries
from host_bridge.embedded.stores._rows import (
    INT64_MAX,
    CommitResult,
    EventRow,
    Loss,
    Op,
    SessionRow,
    StoredSession,
    check_id,
    decode_session,
    is_storable_id,
    show_id,
    write_due_changes,
)
from host_bridge.embedded.stores._writer import (
    AUTO_WRITE_BYTES,
    AUTO_WRITE_ROWS,
    CLOSE_TIMEOUT,
    EventStore,
    refuses_claim_clock,
)
from host_bridge.embedded.stores._writer import commit_failed as _commit_failed

__all__ = [
    "AUTO_WRITE_BYTES",
    "AUTO_WRITE_ROWS",
    "BUSY_TIMEOUT_MS",
    "CLOSE_TIMEOUT",
    "DUE_INDEX_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "SessionLeaseError",
    "SharedStoreError",
    "SqliteEventStore",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreMissingError",
    "StoreVersionError",
    "StoreWriteError",
    "StoredSession",
    "check_write_lock",
    "commit_failed",
    "decode_session",
    "schema_version",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

SCHEMA_VERSION = 3
"""The schema version this code reads and writes."""

DUE_INDEX_SCHEMA_VERSION = 3
"""The first schema version with the ``due_index`` table."""

BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for another connection's lock before failing."""

_Migration = str | Callable[[sqlite3.Connection], None]
"""One migration step: an SQL statement, or a function run on the migrating connection."""

_DUE_INDEX_TABLE = (
    "CREATE TABLE due_index("
    " session_id TEXT PRIMARY KEY,"
    " due_ms INTEGER NOT NULL,"
    " schedule_ms INTEGER,"
    " inbox_ms INTEGER)"
)
_DUE_INDEX_ORDER = "CREATE INDEX due_index_by_due ON due_index(due_ms, session_id)"


def _build_due_index(conn: sqlite3.Connection) -> None:
    """Fill ``due_index`` from the stored logs (inside the migrating transaction)."""
    marks = ", ".join("?" for _ in WAKE_EVENT_TYPES)
    rows = conn.execute(
        "SELECT e.session_id, s.seed_length, e.seq, e.type, e.time, e.data"
        " FROM events e JOIN sessions s ON s.id = e.session_id"
        f" WHERE e.type IN ({marks}) ORDER BY e.session_id, e.seq",
        WAKE_EVENT_TYPES,
    )
    conn.executemany(
        "INSERT INTO due_index(session_id, due_ms, schedule_ms, inbox_ms) VALUES (?, ?, ?, ?)",
        (
            (session_id, entry.due_ms, entry.schedule_ms, entry.inbox_ms)
            for session_id, entry in project_logs(rows)
        ),
    )


_MIGRATIONS: dict[int, tuple[_Migration, ...]] = {
    0: (
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)",
        "CREATE TABLE sessions("
        " id TEXT PRIMARY KEY,"
        " seed_length INTEGER,"
        " parent_session TEXT,"
        " created_at INTEGER)",
        "CREATE TABLE events("
        " session_id TEXT,"
        " seq INTEGER,"
        " type TEXT,"
        " time INTEGER,"
        " data BLOB,"
        " PRIMARY KEY(session_id, seq)) WITHOUT ROWID",
    ),
    1: (
        "CREATE TABLE leases("
        " session_id TEXT PRIMARY KEY,"
        " owner TEXT NOT NULL,"
        " acquired_at INTEGER NOT NULL)",
    ),
    2: (_DUE_INDEX_TABLE, _DUE_INDEX_ORDER, _build_due_index),
}
"""Statements that migrate schema version N to N+1, keyed by N (0 is an empty file)."""

_ROW_ERRORS = ("SQLITE_CONSTRAINT", "SQLITE_TOOBIG", "SQLITE_MISMATCH")
"""SQLite error names of rows that can never be written, whatever the retry."""

_TABLES: dict[int, frozenset[str]] = {
    1: frozenset({"sessions", "events"}),
    2: frozenset({"sessions", "events", "leases"}),
    3: frozenset({"sessions", "events", "leases", "due_index"}),
}
"""The tables besides ``meta`` that a store of each schema version has."""


_T = TypeVar("_T")
_Statement = tuple[str, tuple[object, ...]]


class SqliteEventStore(EventStore):
    """Durable session logs in one SQLite file; the embedded host's persistence listener.

    ``path`` is the database file (see :func:`host_bridge.embedded.paths.store_path`).
    With ``create`` (the default) missing parent directories (mode 0700) and
    the file (0600, like every file of the store, whatever the umask) are
    created; otherwise a missing file is a :class:`StoreError`. Opening a file
    that is not a session store, is corrupt, or has a newer schema raises
    :class:`StoreError` (:class:`StoreCorruptError`, :class:`StoreVersionError`).

    A store other local users can reach is refused with :class:`SharedStoreError`
    (see :mod:`host_bridge.embedded.private_files`): its directory is another
    user's or writable by others, or its database, WAL, SHM, journal or lock
    file is another user's or open to group or others. ``allow_shared_store``
    accepts such a store as it is (a lock file it creates then gets the
    database file's mode, as SQLite gives its own files).

    ``fault_hook`` is a test seam: when given, the writer thread calls it inside
    every write transaction of session rows, after the rows are inserted and
    just before ``COMMIT``. An exception it raises fails that attempt exactly
    like a failed commit (rolled back, rows kept queued); blocking in it pauses
    the writer.

    Sessions are owned by one store at a time (see the module docstring):
    :meth:`acquire_session` takes a session's lock, :meth:`release_session`
    and :meth:`close` give it back, and the operating system drops the locks of
    a process that dies.

    Done-callbacks of the futures returned by :meth:`flush` run on the writer
    thread and should be short. They may call back into the store (append,
    request a flush) but must not *wait* for a flush: that would block the writer.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        fault_hook: Callable[[], None] | None = None,
        allow_shared_store: bool = False,
    ) -> None:
        self._path = Path(os.fspath(path))
        super().__init__(str(self._path), fault_hook)
        self._allow_shared = allow_shared_store
        self._file_mode = PRIVATE_FILE_MODE  # of the files this store creates
        self._read_lock = threading.Lock()
        self._session_locks: SessionLockFile | None = None  # opened with the first lease
        self._holder_ops: list[_Statement] = []  # ``leases`` rows, written by the writer
        self._holder_blocked = False  # their last write failed: wait for the next round
        self._holder_unsynced = 0  # of those queued or being written

        self._writer_conn: sqlite3.Connection | None = self._open_writer(
            create=create, initialise=True
        )
        try:
            self._read_conn: sqlite3.Connection | None = self._connect()
            self._read_conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error as error:
            self._writer_conn.close()
            raise self._open_error(error) from None
        except BaseException:
            self._writer_conn.close()
            raise
        self._identity = self._file_identity()
        self._start_writer("dsh-store-writer")
        _log.debug("session store open at %s", self._path)

    # --- properties ----------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def lock_mechanism(self) -> str | None:
        """How sessions are locked (``"ofd"`` or ``"flock"``), None before the first lease."""
        locks = self._session_locks
        return None if locks is None else locks.mechanism

    # --- ownership -------------------------------------------------------------------

    def acquire_session(self, session_id: str) -> int:
        """Take ``session_id`` for this store before it goes live; returns its fencing epoch.

        On SQLite this takes the session's exclusive lock in the lock file
        beside the database (no waiting; see :mod:`host_bridge.embedded.stores._locks`)
        and records this store as its holder in ``leases``; the epoch is always
        ``0`` (the lock cannot be lost while the store is open). Raises
        :class:`SessionLeaseError`, naming the holder when it is known, when
        another process or another store object holds the session or this
        store already does, and :class:`StoreError` for an unstorable id.
        """
        check_id(session_id, "session id")
        with self._lease_lock:
            with self._lock:
                self._check_open()
                if session_id in self._leases:
                    raise SessionLeaseError(
                        f"session {show_id(session_id)} is already held by this store",
                        session_id=session_id,
                        holder=self._owner,
                    )
            if not self._lock_session(session_id):
                holder = self._recorded_holder(session_id)
                named = f"held by {holder}" if holder else "its holder is not recorded yet"
                raise SessionLeaseError(
                    f"session {show_id(session_id)} is live in another process or store "
                    f"({named}); it cannot be taken here until its holder detaches it or exits",
                    session_id=session_id,
                    holder=holder,
                )
            with self._lock:
                self._leases[session_id] = 0
                self._lost.pop(session_id, None)
            self._record_holder(session_id)
        _log.debug("took session %r", session_id)
        return 0

    def _ensure_lease(self, session_id: str) -> None:
        """Raise unless this store may write ``session_id``; SQLite takes a free one here."""
        with self._lock:
            self._check_not_lost(session_id)
            if session_id in self._leases:
                return
        try:
            self.acquire_session(session_id)
        except SessionLeaseError:
            if not self.holds_lease(session_id):  # (another thread took it for us meanwhile)
                raise

    def _lock_session(self, session_id: str) -> bool:
        """Take the session's lock (``_lease_lock`` held); False when another holder has it."""
        locks = self._session_locks
        if locks is None:
            try:
                locks = self._session_locks = self._open_session_locks()
            except OSError as error:
                raise StoreError(
                    f"cannot open the session lock file of {self._path}"
                    f" ({error.strerror or type(error).__name__})"
                ) from None
            _log.debug("session locks of %s use %s locks", self._path, locks.mechanism)
        try:
            return locks.try_lock(session_id)
        except OSError as error:
            raise StoreError(
                f"cannot lock session {show_id(session_id)} in {locks.path}"
                f" ({error.strerror or type(error).__name__})"
            ) from None

    def _open_session_locks(self) -> SessionLockFile:
        """The lock file beside the database, created with the store's file mode."""
        return SessionLockFile(
            _sidecar(self._path, ".locks"), mode=self._file_mode, allow_shared=self._allow_shared
        )

    def _unlock_session(self, session_id: str) -> None:
        """Forget the recorded holder, then drop the lock (``_lease_lock`` held)."""
        self._queue_holder_write(
            "DELETE FROM leases WHERE session_id = ? AND owner = ?", (session_id, self._owner)
        )
        locks = self._session_locks
        if locks is not None:
            try:
                locks.unlock(session_id)
            except OSError as error:
                _log.warning(
                    "unlocking session %r failed (%s)", session_id, error.strerror or error
                )

    def _record_holder(self, session_id: str) -> None:
        """Note in ``leases`` that this store holds the session (for refusal messages only)."""
        self._queue_holder_write(
            "INSERT OR REPLACE INTO leases(session_id, owner, acquired_at) VALUES (?, ?, ?)",
            (session_id, self._owner, time.time_ns() // 1_000_000),
        )

    def _queue_holder_write(self, statement: str, params: tuple[object, ...]) -> None:
        """Hand one ``leases`` statement to the writer; it commits it soon, without waiting.

        The lock, not the row, is the ownership: the row only lets a refused
        store name the holder, so it never delays taking or giving back a session.
        """
        with self._wake:
            self._holder_ops.append((statement, params))
            self._holder_unsynced += 1
            self._wake.notify()

    def _recorded_holder(self, session_id: str) -> str | None:
        """The holder recorded for ``session_id``, unless it is evidently stale."""
        try:
            row = self._read(
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

    def _closing(self) -> None:
        """Lock held, at the first close: the final round forgets this store's holder rows."""
        if self._leases and self._session_locks is not None:
            self._holder_ops.append(("DELETE FROM leases WHERE owner = ?", (self._owner,)))
            self._holder_unsynced += 1

    def _close_connections(self) -> None:
        """At close: the read connection goes (the writer closes its own when it stops)."""
        with self._read_lock:
            if self._read_conn is not None:
                self._read_conn.close()
                self._read_conn = None

    def _writer_done(self) -> None:
        """Once the writer stopped (on its thread): close its connection, drop every lock."""
        if self._writer_conn is not None:
            self._writer_conn.close()
            self._writer_conn = None
        with self._lease_lock:
            with self._lock:
                self._leases.clear()
            locks, self._session_locks = self._session_locks, None
            if locks is not None:
                locks.close()

    # --- reads ---------------------------------------------------------------------

    def _reads(self) -> ReadQueries[sqlite3.Connection]:
        return SQLITE_READS

    # --- due index ---------------------------------------------------------------------

    def due_sessions(self, until_ms: int | None, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` ``(session_id, due_ms)`` of sessions nobody holds, earliest first.

        Only sessions due at or before ``until_ms`` (any time when ``None``).
        Sessions this store holds are skipped, and so are those whose lock
        another process or store holds (as far as the lock file can tell: with
        the ``flock`` fallback, only taking the session decides).
        """
        found: list[tuple[str, int]] = []
        after: tuple[int, str] | None = None
        page = limit + 16  # a few more than asked: some may be held
        while len(found) < limit:
            rows = self._due_page(after, until_ms, page)
            for session_id, due_ms in rows:
                if not self._held_anywhere(session_id):
                    found.append((session_id, due_ms))
                    if len(found) == limit:
                        break
            if len(rows) < page:
                break
            after = (rows[-1][1], rows[-1][0])
        return found

    def claim_due_session(self, session_id: str, now_ms: int) -> bool:
        """Take ``session_id`` to deliver what is due in it; False when that is not for us.

        False when another process or store holds the session, or when its
        index row says nothing is due at ``now_ms`` (then it is not kept).
        True: this store holds the session (:meth:`acquire_session`) and it is
        due, or its row is unsound (:attr:`IndexRow.wake_ms`): its log decides.
        False, with nothing taken, for a ``now_ms`` that is not an ``int``; on
        any exception the session is given back.
        """
        if refuses_claim_clock(session_id, now_ms):
            return False
        with self._claiming(session_id):
            try:
                self.acquire_session(session_id)
            except SessionLeaseError:
                return False
            row = self.due_row(session_id)
            if row is None or row.wake_ms > now_ms:
                self.release_session(session_id)
                return False
        return True

    def reindex(self) -> int:
        """Rebuild the due index from the stored logs in one transaction; the rows written.

        Safe while hosts write: the transaction excludes every writer of the
        file, so no commit can fall between reading the logs and replacing the index.
        """

        def rebuild(conn: sqlite3.Connection) -> int:
            conn.execute("DELETE FROM due_index")
            _build_due_index(conn)
            (count,) = conn.execute("SELECT COUNT(*) FROM due_index").fetchone()
            return int(count)

        count = self._index_transaction(rebuild, f"rebuild the due index of {self._path}")
        self._due.clear()
        _log.info("rebuilt the due index of %s: %d sessions", self._path, count)
        return count

    def reindex_session(self, session_id: str) -> DueEntry | None:
        """Rewrite one session's due index row from its stored log, in one transaction.

        Returns the row written (``None``: the row was deleted, nothing is due
        or the session is not stored).
        """

        def rewrite(conn: sqlite3.Connection) -> DueEntry | None:
            stored = _read_due_state(conn, session_id)
            entry = None if stored is None else project_session(stored[0], stored[2]).entry()
            write_due_changes(conn, {session_id: entry}, "?")
            return entry

        check_id(session_id, "session id")
        entry = self._index_transaction(
            rewrite, f"rewrite the due index row of session {show_id(session_id)} in {self._path}"
        )
        self._due.forget(session_id)
        return entry

    def _index_transaction(self, work: Callable[[sqlite3.Connection], _T], doing: str) -> _T:
        """Run ``work`` in one write transaction on a connection of its own (``doing``: for errors).

        The transaction excludes every writer of the file, so no commit can
        fall between what ``work`` reads and what it writes.
        """
        with self._lock:
            self._check_open()
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

    def _due_page(
        self, after: tuple[int, str] | None, until_ms: int | None, limit: int
    ) -> list[tuple[str, int]]:
        """One page of the index in ``(due_ms, session_id)`` order after ``after``."""
        clauses: list[str] = []
        params: list[object] = []
        if after is not None:
            clauses.append("(due_ms, session_id) > (?, ?)")
            params += list(after)
        clauses.append("due_ms <= ?")  # always bounded: text sorts after numbers, never listed
        params.append(INT64_MAX if until_ms is None else until_ms)
        where = f" WHERE {' AND '.join(clauses)}"
        params.append(limit)
        rows = self._read(
            lambda conn: conn.execute(
                f"SELECT session_id, due_ms FROM due_index{where}"
                " ORDER BY due_ms, session_id LIMIT ?",
                params,
            ).fetchall()
        )
        return [(str(row[0]), int(row[1])) for row in rows]

    def _held_anywhere(self, session_id: str) -> bool:
        """Whether this store holds the session, or its lock looks held by another holder."""
        with self._lock:
            if session_id in self._leases:
                return True
        with self._lease_lock:
            locks = self._session_locks
            if locks is None:
                try:
                    locks = self._session_locks = self._open_session_locks()
                except (OSError, StoreError):
                    return False  # taking the session will say
            try:
                return locks.held_elsewhere(session_id)
            except OSError:
                return False

    def _side_writes_due(self) -> bool:
        """Lock held: whether writes besides session rows wait for the writer (holder rows)."""
        return bool(self._holder_ops) and not self._holder_blocked

    def _side_writes_pending(self) -> bool:
        """Whether writes besides session rows wait, even ones whose last attempt failed."""
        with self._lock:
            return bool(self._holder_ops)

    def _side_writes_synced(self) -> bool:
        """Lock held: whether every holder row is committed."""
        return not self._holder_unsynced

    def _is_row_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` means some rows can never be written (not a whole-store failure)."""
        return _category(error).startswith(_ROW_ERRORS)

    def _category(self, error: BaseException) -> str:
        """SQLite's error name of ``error`` (``SQLITE_FULL``...), else its type; no text."""
        return _category(error)

    def _commit(self, rows: list[Op], check: set[str]) -> CommitResult:
        """Write ``rows`` in one transaction; returns the failure (rolled back) and lost sessions.

        First moves the session locks to the lock file now at the path if
        ours was deleted or replaced (:meth:`SessionLockFile.ensure_current`);
        sessions another holder took meanwhile are lost and their rows are not written.
        """
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
        with self._lock:
            holders, self._holder_ops = self._holder_ops, []
        if not (rows or holders):
            return None, lost
        error = self._write(rows, holders)
        with self._lock:
            if error is None:
                self._holder_blocked = False
                self._holder_unsynced -= len(holders)
            elif holders:
                self._holder_ops[:0] = holders
                self._holder_blocked = True
        return error, lost

    def _write(
        self, batch: list[Op], holders: Sequence[_Statement] = (), *, restored: bool = False
    ) -> BaseException | None:
        """Write ``batch`` and ``holders`` in one transaction; on failure roll back, return why.

        Just before ``COMMIT`` it checks that the database and WAL files at the
        store's path are still the ones its connections write to. When they were
        deleted under the store, a commit would only reach unlinked files that
        vanish with the process: the round is rolled back, the store file is
        rebuilt at its path from the open connection (which still sees every
        committed row, see :meth:`_restore`) and the round is written again.
        When another file took the path, the round fails and every later one too.
        """
        try:
            conn = self._writer_conn
            if conn is None:
                conn = self._writer_conn = self._open_writer(create=False, initialise=False)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO sessions(id, seed_length, parent_session, created_at)"
                " VALUES (?, ?, ?, ?)",
                [
                    (op.session_id, op.seed_length, op.parent_session, op.created_at)
                    for op in batch
                    if isinstance(op, SessionRow)
                ],
            )
            conn.executemany(
                "INSERT INTO events(session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
                [
                    (op.session_id, op.seq, op.type, op.time, op.payload)
                    for op in batch
                    if isinstance(op, EventRow)
                ],
            )
            for statement, params in holders:
                conn.execute(statement, params)
            plan = self._plan_due_index(batch, lambda sid: _read_due_state(conn, sid))
            write_due_changes(conn, plan.changes, "?")
            if self._fault_hook is not None and batch:
                self._fault_hook()
            self._check_identity()
            conn.execute("COMMIT")
        except Exception as error:
            if isinstance(error, _StoreFileMovedError) and error.restorable and not restored:
                self._rollback()
                if self._restore():
                    return self._write(batch, holders, restored=True)
            self._rollback()
            return error
        self._due_committed(plan)
        return None

    def _file_identity(self) -> _Identity:
        """``(device, inode)`` of the database file and of its WAL file (None when absent)."""
        return (_inode(self._path), _inode(_sidecar(self._path, "-wal")))

    def _check_identity(self) -> None:
        """Raise :class:`_StoreFileMovedError` unless the store's files are still at its path."""
        db, wal = self._identity
        try:
            now_db = _inode(self._path)
            now_wal = _inode(_sidecar(self._path, "-wal"))
        except OSError:
            raise _StoreFileMovedError("STORE_FILE_UNCHECKED", restorable=False) from None
        if now_db is None:
            raise _StoreFileMovedError("STORE_FILE_DELETED", restorable=True)
        if now_db != db:
            raise _StoreFileMovedError("STORE_FILE_REPLACED", restorable=False)
        if wal is None:
            self._identity = (db, now_wal)  # the WAL appears with the first write
        elif now_wal != wal:
            raise _StoreFileMovedError("STORE_WAL_DELETED", restorable=True)

    def _restore(self) -> bool:
        """Rebuild the store file at its path from the open write connection.

        The connection still reads the unlinked files, so an online backup
        copies every committed row. The copy is written and fsync'ed beside the
        path first; only then are the old connections closed, stale WAL/SHM
        files removed and the copy renamed into place. Returns False (leaving
        everything as it was) when the copy cannot be made, e.g. while the data
        directory itself is missing: the next flush tries again.
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
                self._read_conn = self._connect()
                self._read_conn.execute("PRAGMA query_only = ON")
            self._identity = self._file_identity()
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

    # --- internals: connections ------------------------------------------------------

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
            raise self._open_error(error) from None
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                _log.warning("session store %s runs in journal mode %s, not WAL", self._path, mode)
            conn.execute("PRAGMA synchronous = FULL")
            if conn.execute("PRAGMA synchronous").fetchone()[0] != 2:
                raise StoreError(f"session store {self._path} refused synchronous=FULL")
            if initialise:
                self._migrate(conn)
        except sqlite3.Error as error:
            conn.close()
            raise self._open_error(error) from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _make_private_file(self) -> None:
        """Before SQLite opens the file: refuse a shared store, or create the file 0600.

        SQLite would create a missing file with its default mode (``0644`` less
        the umask); made here first, it is private, and so are the ``-wal`` and
        ``-shm`` files SQLite then gives the database file's mode.
        """
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
        """Bring the schema to :data:`SCHEMA_VERSION`, one table-driven step at a time."""
        version = self._schema_version(conn)
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._schema_version(conn)  # again, now under the write lock
            while version < SCHEMA_VERSION:
                for step in _MIGRATIONS[version]:
                    if isinstance(step, str):
                        conn.execute(step)
                    else:
                        step(conn)
                version += 1
                conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                    (str(version),),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        _log.info("session store %s migrated to schema version %d", self._path, SCHEMA_VERSION)

    def _schema_version(self, conn: sqlite3.Connection) -> int:
        return schema_version(conn, self._path)

    def _open_error(self, error: sqlite3.Error) -> StoreError:
        return _open_error(self._path, error)

    # --- internals: reads --------------------------------------------------------------

    def _read(self, query: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._read_lock:
            conn = self._read_conn
            if conn is None:
                raise StoreClosedError(f"the session store {self._label} is closed")
            try:
                return query(conn)
            except sqlite3.Error as error:
                raise _read_error(self._path, error) from None

    def _stored_length(self, session_id: str) -> int | None:
        """The number of stored events of ``session_id``, or None when it is not stored."""
        if not is_storable_id(session_id):
            return None  # such an id can never have been stored

        def query(conn: sqlite3.Connection) -> tuple[Any, Any, Any]:
            conn.execute("BEGIN")
            try:
                exists = conn.execute(
                    "SELECT 1 FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
                count, last = conn.execute(
                    "SELECT COUNT(*), MAX(seq) FROM events WHERE session_id = ?", (session_id,)
                ).fetchone()
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            return exists, count, last

        exists, count, last = self._read(query)
        if exists is None:
            return None
        if count and last != count - 1:
            raise StoreCorruptError(
                f"session {show_id(session_id)} has a gap in its stored events",
                session_id=session_id,
            )
        return int(count)


# --- helpers -------------------------------------------------------------------------------


def schema_version(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> int:
    """The schema version of the SQLite database open on ``conn``; 0 when it has no tables.

    Only reads. Raises :class:`StoreError` for an SQLite database of another
    application, :class:`StoreCorruptError` when ``meta`` holds no valid version
    or a session table of that version is missing, and :class:`StoreVersionError`
    for a version newer than :data:`SCHEMA_VERSION`. ``path`` names the file in messages.
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
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    value = None if row is None else row[0]
    if not (
        isinstance(value, str)
        and value.isascii()
        and value.isdigit()
        and len(value) <= 9  # (an absurd length is no version; int() would refuse it too)
        and int(value) >= 1
    ):
        raise StoreCorruptError(f"{path} has no valid schema_version")
    version = int(value)
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f"{path} has schema version {version}, newer than the {SCHEMA_VERSION} understood "
            "by this version of dsh-schedule; upgrade dsh-schedule to open it"
        )
    if not tables >= _TABLES[version]:
        raise StoreCorruptError(f"{path} is missing session tables")
    return version


def check_write_lock(path: str | os.PathLike[str]) -> None:
    """Raise :class:`StoreError` when another connection keeps the SQLite file write-locked.

    Opening a store takes no write lock (unless it migrates), so a store that
    another process keeps locked is otherwise found out at the first commit,
    after the host started. This begins and rolls back an empty write
    transaction on a connection of its own, waiting for the lock up to
    :data:`BUSY_TIMEOUT_MS` like every write does, and raises when it is still
    held then. It writes nothing and creates no file: a missing file, and any
    failure other than a held lock, are left to opening the store to report.
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


def _open_error(path: Path, error: sqlite3.Error) -> StoreError:
    """What a failure to open the store at ``path`` means, without SQLite's text."""
    category = _category(error)
    if category.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return StoreCorruptError(
            f"{path} is corrupt or not an SQLite database ({category}); "
            "move it aside or restore a backup"
        )
    return StoreError(f"cannot open the session store {path} ({category})")


def _read_error(path: Path, error: sqlite3.Error) -> StoreError:
    """What a failed read of the store at ``path`` means, without SQLite's text.

    A damaged file reads as it does on open (:func:`_open_error`), so a store
    gets one message whichever page the damage is on.
    """
    category = _category(error)
    if category.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return _open_error(path, error)
    return StoreError(f"cannot read the session store {path} ({category})")


def _select_session_ids(conn: sqlite3.Connection, where: object) -> list[str]:
    """Every stored session id, sorted; a non-text id is corruption (``where`` names the store)."""
    ids = [row[0] for row in conn.execute("SELECT id FROM sessions")]
    if not all(isinstance(session_id, str) for session_id in ids):
        raise StoreCorruptError(f"{where}: the sessions table holds an id that is not text")
    return sorted(ids)


def _select_header(conn: sqlite3.Connection, session_id: str) -> tuple[Any, ...] | None:
    """The ``(seed_length, parent_session)`` row of a session, or None."""
    row: tuple[Any, ...] | None = conn.execute(
        "SELECT seed_length, parent_session FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return row


def _select_session(
    conn: sqlite3.Connection, session_id: str
) -> tuple[tuple[Any, ...] | None, list[tuple[Any, ...]]]:
    """A session's header row and its event rows in seq order, read in one snapshot."""
    conn.execute("BEGIN")
    try:
        head = _select_header(conn, session_id)
        rows = (
            []
            if head is None
            else conn.execute(
                "SELECT seq, type, time, data FROM events WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
        )
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    return head, rows


def _select_index_rows(conn: sqlite3.Connection) -> dict[str, IndexRow]:
    """Every due index row as stored, by session id.

    A damaged row whose id is not text is keyed by its ``repr`` (no stored session has it).
    """
    rows = conn.execute("SELECT session_id, due_ms, schedule_ms, inbox_ms FROM due_index")
    return {row[0] if isinstance(row[0], str) else repr(row[0]): IndexRow(*row[1:]) for row in rows}


def _select_index_row(conn: sqlite3.Connection, session_id: str) -> IndexRow | None:
    """A session's due index row as stored, or None."""
    row = conn.execute(
        "SELECT due_ms, schedule_ms, inbox_ms FROM due_index WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else IndexRow(*row)


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


def _select_indexed(
    conn: sqlite3.Connection, session_id: str
) -> tuple[tuple[Any, ...] | None, list[tuple[Any, ...]], IndexRow | None]:
    """A session's header row, event rows and due index row as stored, read in one snapshot."""
    conn.execute("BEGIN")
    try:
        head = _select_header(conn, session_id)
        rows = conn.execute(
            "SELECT seq, type, time, data FROM events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        due = _select_index_row(conn, session_id)
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    return head, rows if head is not None else [], due


def _read_due_state(
    conn: sqlite3.Connection, session_id: str
) -> tuple[int | None, int, list[StoredRow]] | None:
    """A session's seed length, next seq and wake-relevant rows, read on ``conn``."""
    head = conn.execute("SELECT seed_length FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if head is None:
        return None
    seed = head[0] if isinstance(head[0], int) else 0
    (next_seq,) = conn.execute(
        "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE session_id = ?", (session_id,)
    ).fetchone()
    marks = ", ".join("?" for _ in WAKE_EVENT_TYPES)
    rows = conn.execute(
        "SELECT seq, type, time, data FROM events WHERE session_id = ? AND seq >= ?"
        f" AND type IN ({marks}) ORDER BY seq",
        (session_id, seed, *WAKE_EVENT_TYPES),
    ).fetchall()
    return seed, int(next_seq), [tuple(row) for row in rows]


_Inode = tuple[int, int]
_Identity = tuple[_Inode | None, _Inode | None]


class _StoreFileMovedError(Exception):
    """The store's files are no longer the ones at its path (``args[0]`` is the category)."""

    def __init__(self, category: str, *, restorable: bool) -> None:
        super().__init__(category)
        self.sqlite_errorname = category
        self.restorable = restorable


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _inode(path: Path) -> _Inode | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return (info.st_dev, info.st_ino)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit_failed(error: BaseException, rows: int, category: str | None = None) -> StoreWriteError:
    """Log a failed write round (detail at debug level) and describe it without backend text.

    ``category`` names the error (default: its SQLite error name or type).
    """
    return _commit_failed(error, rows, _category(error) if category is None else category)


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


SQLITE_READS: ReadQueries[sqlite3.Connection] = ReadQueries(
    session_ids=_select_session_ids,
    header=_select_header,
    session=_select_session,
    index_rows=_select_index_rows,
    index_row=_select_index_row,
    indexed=_select_indexed,
    index_suspects=_select_index_suspects,
)
"""The read queries of an SQLite store file (writable and read-only alike)."""
