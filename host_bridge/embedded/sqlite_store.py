"""The embedded host's persistence listener: session logs in SQLite, group-committed.

Callers (one ``SessionActor`` per session) hand every committed event to
:meth:`SqliteEventStore.record_append`, which only queues it in memory.
:meth:`SqliteEventStore.flush` is the durability barrier: its future resolves
``True`` once every row queued for that session before the call is in a
committed SQLite transaction (WAL, ``synchronous=FULL``: the commit is fsync'ed).

One writer thread owns the write connection. Each round it takes *everything*
queued, for all sessions, writes it in one transaction, commits once and then
resolves every flush request the commit covers, so many concurrent flushes cost
about one fsync (group commit). It writes when a flush is waiting, when the
queue grows past :data:`AUTO_WRITE_ROWS` rows or :data:`AUTO_WRITE_BYTES`
bytes, and when the store closes.

A failed write is rolled back and its rows go back to the front of the queue,
so nothing is half-written and nothing queued is dropped; the flush requests of
that round fail with :class:`StoreWriteError` and the next flush retries.

Before each ``COMMIT`` the writer checks that the database and WAL files at
the path are still the ones it opened. If they were deleted under it, it
rebuilds the store at its path from its open connection before committing,
so an acknowledgement never refers to an unlinked file; if another file took
the path, it refuses to write (see :meth:`SqliteEventStore._write`).

Reads (:meth:`~SqliteEventStore.load`, :meth:`~SqliteEventStore.session_ids`...)
see durable state only, use their own connection and are safe from any thread.
A store file is meant to be written by one ``SqliteEventStore`` at a time
(readers may be many); a session's rows are validated when queued (known
session, next ``seq``), so a queued row can always be written.

Schema (version :data:`SCHEMA_VERSION`)::

    meta(key TEXT PRIMARY KEY, value TEXT)              -- schema_version
    sessions(id TEXT PRIMARY KEY, seed_length INTEGER, parent_session TEXT, created_at INTEGER)
    events(session_id TEXT, seq INTEGER, type TEXT, time INTEGER, data BLOB,
           PRIMARY KEY(session_id, seq)) WITHOUT ROWID   -- data: msgpack (see codec)

Session ids are opaque non-empty strings bound as SQL parameters; an id with a
NUL character or a lone surrogate cannot round-trip through SQLite text
faithfully and is refused with :class:`StoreError` by :meth:`~SqliteEventStore.create_session`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from host_bridge.embedded.codec import MAX_PAYLOAD_BYTES, PayloadError, decode_payload
from host_bridge.protocols import SessionEvent, SessionHeader

__all__ = [
    "AUTO_WRITE_BYTES",
    "AUTO_WRITE_ROWS",
    "BUSY_TIMEOUT_MS",
    "SCHEMA_VERSION",
    "SqliteEventStore",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreVersionError",
    "StoreWriteError",
    "StoredSession",
    "commit_failed",
]

_log = logging.getLogger("dsh_schedule.store")

SCHEMA_VERSION = 1
"""The schema version this code reads and writes."""

BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for another connection's lock before failing."""

AUTO_WRITE_ROWS = 4096
"""Queued rows that make the writer commit even when no flush is waiting."""

AUTO_WRITE_BYTES = 32 * 1024 * 1024
"""Queued payload bytes that make the writer commit even when no flush is waiting."""

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_MIGRATIONS: dict[int, tuple[str, ...]] = {
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
}
"""Statements that migrate schema version N to N+1, keyed by N (0 is an empty file)."""


class StoreError(Exception):
    """The session store cannot do what was asked; the message is meant for operators."""


class StoreCorruptError(StoreError):
    """The store file, or a session's rows in it, are unreadable or inconsistent."""


class StoreVersionError(StoreError):
    """The store was written by a newer schema version than this code understands."""


class StoreClosedError(StoreError):
    """The store was closed (or its writer stopped); it accepts no more work."""


class StoreWriteError(StoreError):
    """A write transaction failed and was rolled back; its rows stay queued for the next attempt.

    ``category`` is a short backend error name such as ``"SQLITE_FULL"``.
    """

    def __init__(self, message: str, *, category: str) -> None:
        super().__init__(message)
        self.category = category


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session as durably stored: its header and its whole log (``events[i].seq == i``)."""

    header: SessionHeader
    events: tuple[SessionEvent, ...]


@dataclass(frozen=True, slots=True)
class _SessionRow:
    session_id: str
    seed_length: int | None
    parent_session: str | None
    created_at: int


@dataclass(frozen=True, slots=True)
class _EventRow:
    session_id: str
    seq: int
    type: str
    time: int
    payload: bytes


_Op = _SessionRow | _EventRow


@dataclass(frozen=True, slots=True)
class _Waiter:
    session_id: str | None  # None: every session
    future: Future[bool]


_T = TypeVar("_T")
_Outcome = tuple[Future[bool], bool | BaseException]


class SqliteEventStore:
    """Durable session logs in one SQLite file; the embedded host's persistence listener.

    ``path`` is the database file (see :func:`host_bridge.embedded.paths.store_path`).
    With ``create`` (the default) missing parent directories and the file are
    created; otherwise a missing file is a :class:`StoreError`. Opening a file
    that is not a session store, is corrupt, or has a newer schema raises
    :class:`StoreError` (:class:`StoreCorruptError`, :class:`StoreVersionError`).

    ``fault_hook`` is a test seam: when given, the writer thread calls it inside
    every write transaction, after the rows are inserted and just before
    ``COMMIT``. An exception it raises fails that attempt exactly like a failed
    commit (rolled back, rows kept queued); blocking in it pauses the writer.

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
    ) -> None:
        self._path = Path(os.fspath(path))
        self._init_write_behind(str(self._path), fault_hook)

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
        self._thread = threading.Thread(target=self._run, name="dsh-store-writer", daemon=True)
        self._thread.start()
        _log.debug("session store open at %s", self._path)

    def _init_write_behind(self, label: str, fault_hook: Callable[[], None] | None) -> None:
        """The queue, waiters and counters every backend's writer thread shares."""
        self._label = label  # how messages name the store
        self._fault_hook = fault_hook
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: list[_Op] = []
        self._queued_bytes = 0
        self._unsynced: Counter[str] = Counter()
        self._next_seq: dict[str, int] = {}
        self._forget_when_synced: set[str] = set()
        self._waiters: list[_Waiter] = []
        self._closed = False
        self._writer_stopped = False
        self._auto_write_blocked = False
        self._final_error: StoreWriteError | None = None
        self._commit_count = 0
        self._flush_requests = 0
        self._read_lock = threading.Lock()

    # --- properties ----------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def label(self) -> str:
        """How messages name the store: the file path (a URL without password on PostgreSQL)."""
        return self._label

    @property
    def commit_count(self) -> int:
        """How many durable write transactions were committed so far."""
        with self._lock:
            return self._commit_count

    @property
    def flush_requests(self) -> int:
        """How many flush requests (:meth:`flush` and :meth:`flush_all`) were accepted so far."""
        with self._lock:
            return self._flush_requests

    @property
    def pending_rows(self) -> int:
        """Rows queued or being written that are not committed yet (sessions and events)."""
        with self._lock:
            return sum(self._unsynced.values())

    @property
    def tracked_sessions(self) -> int:
        """Sessions whose next ``seq`` the store keeps in memory (live or with rows queued)."""
        with self._lock:
            return len(self._next_seq)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        with self._lock:
            return self._closed

    # --- writes --------------------------------------------------------------------

    def create_session(
        self, header: SessionHeader, seed: Sequence[tuple[SessionEvent, bytes]] = ()
    ) -> None:
        """Queue a new session row and the fork's copied ``seed`` events (seq ``0 … len(seed)-1``).

        ``seed`` pairs each event with its payload encoded by
        :func:`host_bridge.embedded.codec.encode_payload`. Raises
        :class:`StoreError` at once when the id is invalid (empty, NUL, lone
        surrogate), already stored or already queued, or when a seed row is invalid.
        Durable only after a :meth:`flush` of the session resolves ``True``.
        """
        if not isinstance(header, SessionHeader):
            raise StoreError(f"create_session needs a SessionHeader, not {type(header).__name__}")
        session_id = header.id
        _check_id(session_id, "session id")
        if header.parent_session is not None:
            _check_id(header.parent_session, "parent_session")
        seed_length = header.seed_length
        if seed_length is not None and (
            isinstance(seed_length, bool)
            or not isinstance(seed_length, int)
            or not 0 <= seed_length <= _INT64_MAX
        ):
            raise StoreError(
                f"seed_length of session {_show(session_id)} must be None or a non-negative integer"
            )
        rows = [_event_row(session_id, event, payload) for event, payload in seed]
        for index, row in enumerate(rows):
            if row.seq != index:
                raise StoreError(
                    f"seed event {index} of session {_show(session_id)} has seq {row.seq}"
                )
        if self._stored_length(session_id) is not None:
            raise StoreError(f"session {_show(session_id)} already exists in the store")
        session_row = _SessionRow(
            session_id, seed_length, header.parent_session, time.time_ns() // 1_000_000
        )
        with self._lock:
            self._check_open()
            if session_id in self._next_seq:
                raise StoreError(f"session {_show(session_id)} already exists in the store")
            self._next_seq[session_id] = len(rows)
            self._enqueue([session_row, *rows])

    def record_append(self, session_id: str, event: SessionEvent, payload: bytes) -> None:
        """Queue one committed event; never waits for disk.

        ``payload`` is ``encode_payload(event.data)``.

        ``event.seq`` must be the session's next seq. Raises :class:`StoreError`
        for an unknown session, a wrong seq or an invalid row; nothing is queued then.
        The first append to a stored session that was not :meth:`load`-ed by this
        store reads its length once.
        """
        self.record_appends(session_id, ((event, payload),))

    def record_appends(self, session_id: str, rows: Sequence[tuple[SessionEvent, bytes]]) -> None:
        """Queue consecutive committed events of one session as a unit; never waits for disk.

        Like :meth:`record_append` for each ``(event, payload)`` pair, with the
        seqs following each other from the session's next seq. The rows are
        validated first and queued under one lock hold, so the writer takes
        all of them into the same write round: they become durable in one
        commit or not at all. Nothing is queued when any row is refused.
        """
        checked = [_event_row(session_id, event, payload) for event, payload in rows]
        if not checked:
            return
        with self._lock:
            self._check_open()
            expected = self._next_seq.get(session_id)
        if expected is None:
            stored = self._stored_length(session_id)
            if stored is None:
                raise StoreError(
                    f"session {_show(session_id)} is unknown to the store; create it first"
                )
            expected = stored
        with self._lock:
            self._check_open()
            # (a concurrent forget() only drops an entry that equals the stored length)
            expected = self._next_seq.setdefault(session_id, expected)
            for offset, row in enumerate(checked):
                if row.seq != expected + offset:
                    raise StoreError(
                        f"event for session {_show(session_id)} has seq {row.seq}, "
                        f"expected {expected + offset}"
                    )
            self._next_seq[session_id] = expected + len(checked)
            self._enqueue(list(checked))

    def flush(self, session_id: str) -> Future[bool]:
        """Resolve ``True`` once the rows of ``session_id`` queued before the call are durable.

        It resolves at once when nothing of that session is uncommitted (this
        includes unknown sessions). It fails with :class:`StoreWriteError` when
        the write attempt made for it failed (the rows stay queued; flush again
        to retry) and with :class:`StoreClosedError` after :meth:`close`.
        The future cannot be cancelled.
        """
        if not isinstance(session_id, str):
            return _failed(
                StoreError(f"flush needs a session id string, not {type(session_id).__name__}")
            )
        return self._request_flush(session_id)

    def flush_all(self) -> Future[bool]:
        """Like :meth:`flush`, for every row of every session queued before this call."""
        return self._request_flush(None)

    def forget(self, session_id: str) -> None:
        """Drop the in-memory bookkeeping of a session that went offline; its rows stay stored.

        A host calls it when it detaches a session, so a long-running store does
        not keep an entry per session it ever saw. Rows still queued for the
        session are written first (the entry goes once they are committed); a
        later append to the session reads its stored length again.
        """
        with self._lock:
            if session_id in self._unsynced:
                self._forget_when_synced.add(session_id)
            else:
                self._next_seq.pop(session_id, None)

    def acquire_session(self, session_id: str) -> int:
        """Take the lease of a session before it goes live; returns its fencing epoch.

        An SQLite store is written by one process, which owns every session in
        it: there is nothing to lease (always ``0``). The PostgreSQL store
        overrides this (see :mod:`host_bridge.embedded.postgres_store`).
        """
        return 0

    def release_session(self, session_id: str) -> None:
        """Give up the lease taken by :meth:`acquire_session` (nothing to do on SQLite)."""

    def close(self) -> None:
        """Write what is queued, stop the writer and close the connections; idempotent.

        Raises :class:`StoreWriteError` when that last write failed (those rows
        were never acknowledged and are not durable). Every later call fails
        with :class:`StoreClosedError` (``flush`` returns a failed future).
        """
        with self._wake:
            first = not self._closed
            self._closed = True
            self._wake.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        with self._read_lock:
            if self._read_conn is not None:
                self._read_conn.close()
                self._read_conn = None
        if first and self._final_error is not None:
            raise self._final_error

    def __enter__(self) -> SqliteEventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reads ---------------------------------------------------------------------

    def session_ids(self) -> list[str]:
        """The ids of every durably stored session, sorted."""

        def query(conn: sqlite3.Connection) -> list[Any]:
            return [row[0] for row in conn.execute("SELECT id FROM sessions")]

        ids = self._read(query)
        if not all(isinstance(session_id, str) for session_id in ids):
            raise StoreCorruptError(
                f"{self._path}: the sessions table holds an id that is not text"
            )
        return sorted(ids)

    def load_header(self, session_id: str) -> SessionHeader | None:
        """The durably stored header of ``session_id``, or ``None`` when it is not stored."""
        if not _is_storable_id(session_id):
            return None

        def query(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                "SELECT seed_length, parent_session FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            return row

        row = self._read(query)
        return None if row is None else _header(session_id, row)

    def load(self, session_id: str) -> StoredSession | None:
        """The durably stored session (header and decoded log), or ``None`` when it is not stored.

        Raises :class:`StoreCorruptError` naming the session and seq when its
        rows are not ``0 … n-1`` contiguous or a row does not decode.
        """
        if not _is_storable_id(session_id):
            return None

        def query(conn: sqlite3.Connection) -> tuple[tuple[Any, ...] | None, list[tuple[Any, ...]]]:
            conn.execute("BEGIN")  # one snapshot for the header and the events
            try:
                head = conn.execute(
                    "SELECT seed_length, parent_session FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
                rows = (
                    []
                    if head is None
                    else conn.execute(
                        "SELECT seq, type, time, data FROM events"
                        " WHERE session_id = ? ORDER BY seq",
                        (session_id,),
                    ).fetchall()
                )
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            return head, rows

        head, rows = self._read(query)
        return self._stored_session(session_id, head, rows)

    def _stored_session(
        self, session_id: str, head: Sequence[Any] | None, rows: Sequence[Sequence[Any]]
    ) -> StoredSession | None:
        """Decode a header row and event rows read in one snapshot; note the next seq."""
        if head is None:
            return None
        header = _header(session_id, tuple(head))
        events = tuple(_event(session_id, index, tuple(row)) for index, row in enumerate(rows))
        with self._lock:
            self._next_seq.setdefault(session_id, len(events))
        return StoredSession(header, events)

    # --- internals: queue ------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed or self._writer_stopped:
            raise StoreClosedError(f"the session store {self._label} is closed")

    def _enqueue(self, ops: list[_Op]) -> None:
        """Queue ops (lock held) and wake the writer when the queue is large."""
        self._queue.extend(ops)
        for op in ops:
            self._unsynced[op.session_id] += 1
            if isinstance(op, _EventRow):
                self._queued_bytes += len(op.payload)
        if self._auto_write_due():
            self._wake.notify()

    def _auto_write_due(self) -> bool:
        return not self._auto_write_blocked and (
            len(self._queue) >= AUTO_WRITE_ROWS or self._queued_bytes >= AUTO_WRITE_BYTES
        )

    def _request_flush(self, session_id: str | None) -> Future[bool]:
        future: Future[bool] = Future()
        future.set_running_or_notify_cancel()  # not cancellable: the writer owns its outcome
        with self._lock:
            if self._closed or self._writer_stopped:
                future.set_exception(StoreClosedError(f"the session store {self._label} is closed"))
                return future
            self._flush_requests += 1
            if self._is_synced(session_id):
                future.set_result(True)  # no callbacks can be attached yet
                return future
            self._waiters.append(_Waiter(session_id, future))
            self._wake.notify()
        return future

    def _is_synced(self, session_id: str | None) -> bool:
        """Lock held: nothing of ``session_id`` (or of anything, for None) is uncommitted."""
        return not self._unsynced if session_id is None else session_id not in self._unsynced

    # --- internals: writer thread ----------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._wake:
                    while not (self._closed or self._waiters or self._auto_write_due()):
                        self._wake.wait()
                    final = self._closed
                    batch, self._queue, self._queued_bytes = self._queue, [], 0
                    waiters, self._waiters = self._waiters, []
                error = self._write(batch) if batch else None
                _settle_all(self._settle(batch, waiters, error))
                if final:
                    if error is not None:
                        self._final_error = StoreWriteError(
                            f"closing the session store could not write {len(batch)} "
                            f"unflushed rows ({error.category}); they are not durable",
                            category=error.category,
                        )
                    break
        except BaseException:  # pragma: no cover - a bug in the writer itself
            _log.exception("the session store writer stopped unexpectedly")
        finally:
            with self._lock:
                self._writer_stopped = True
                leftover, self._waiters = self._waiters, []
            _settle_all(
                [(w.future, StoreClosedError("the session store writer stopped")) for w in leftover]
            )
            if self._writer_conn is not None:
                self._writer_conn.close()
                self._writer_conn = None

    def _write(self, batch: list[_Op], *, restored: bool = False) -> StoreWriteError | None:
        """Write ``batch`` in one transaction; on failure roll back and describe it.

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
                    if isinstance(op, _SessionRow)
                ],
            )
            conn.executemany(
                "INSERT INTO events(session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
                [
                    (op.session_id, op.seq, op.type, op.time, op.payload)
                    for op in batch
                    if isinstance(op, _EventRow)
                ],
            )
            if self._fault_hook is not None:
                self._fault_hook()
            self._check_identity()
            conn.execute("COMMIT")
        except Exception as error:
            if isinstance(error, _StoreFileMovedError) and error.restorable and not restored:
                self._rollback()
                if self._restore():
                    return self._write(batch, restored=True)
            self._rollback()
            return commit_failed(error, len(batch))
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

    def _settle(
        self, batch: list[_Op], waiters: list[_Waiter], error: StoreWriteError | None
    ) -> list[_Outcome]:
        """Book the outcome of one write round; returns the futures to settle (outside the lock)."""
        outcomes: list[_Outcome] = []
        with self._lock:
            if error is not None:
                self._queue[:0] = batch
                self._queued_bytes += sum(
                    len(op.payload) for op in batch if isinstance(op, _EventRow)
                )
                self._auto_write_blocked = True  # retry on the next flush, not in a loop
                for waiter in waiters:
                    outcomes.append(
                        (waiter.future, StoreWriteError(str(error), category=error.category))
                    )
                return outcomes
            if batch:
                self._commit_count += 1
            self._auto_write_blocked = False
            for op in batch:
                self._unsynced[op.session_id] -= 1
                if self._unsynced[op.session_id] <= 0:
                    del self._unsynced[op.session_id]
                    if op.session_id in self._forget_when_synced:
                        self._forget_when_synced.discard(op.session_id)
                        self._next_seq.pop(op.session_id, None)
            outcomes.extend((waiter.future, True) for waiter in waiters)
            # Requests made during the write are covered too if their session is now clean.
            still_waiting: list[_Waiter] = []
            for waiter in self._waiters:
                if self._is_synced(waiter.session_id):
                    outcomes.append((waiter.future, True))
                else:
                    still_waiting.append(waiter)
            self._waiters = still_waiting
        return outcomes

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
                self._path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise StoreError(
                    f"cannot create the data directory {self._path.parent}"
                    f" ({error.strerror or type(error).__name__})"
                ) from None
        elif not self._path.exists():
            raise StoreError(f"there is no session store at {self._path}")
        if self._path.exists() and not self._path.is_file():
            raise StoreError(f"{self._path} is not a file")
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

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Bring the schema to :data:`SCHEMA_VERSION`, one table-driven step at a time."""
        version = self._schema_version(conn)
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._schema_version(conn)  # again, now under the write lock
            while version < SCHEMA_VERSION:
                for statement in _MIGRATIONS[version]:
                    conn.execute(statement)
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
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        if "meta" not in tables:
            if tables:
                raise StoreError(
                    f"{self._path} is an SQLite database but not a dsh-schedule session store"
                )
            return 0
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        value = None if row is None else row[0]
        if not (isinstance(value, str) and value.isascii() and value.isdigit()):
            raise StoreCorruptError(f"{self._path} has no valid schema_version")
        version = int(value)
        if version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"{self._path} has schema version {version}, newer than the {SCHEMA_VERSION} "
                "understood "
                "by this version of dsh-schedule; upgrade dsh-schedule to open it"
            )
        if version == SCHEMA_VERSION and not {"sessions", "events"} <= tables:
            raise StoreCorruptError(f"{self._path} is missing session tables")
        return version

    def _open_error(self, error: sqlite3.Error) -> StoreError:
        category = _category(error)
        if category.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
            return StoreCorruptError(
                f"{self._path} is corrupt or not an SQLite database ({category}); "
                "move it aside or restore a backup"
            )
        return StoreError(f"cannot open the session store {self._path} ({category})")

    # --- internals: reads --------------------------------------------------------------

    def _read(self, query: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._read_lock:
            conn = self._read_conn
            if conn is None:
                raise StoreClosedError(f"the session store {self._label} is closed")
            try:
                return query(conn)
            except sqlite3.Error as error:
                category = _category(error)
                if category.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
                    raise StoreCorruptError(f"{self._path} is corrupt ({category})") from None
                raise StoreError(
                    f"cannot read the session store {self._path} ({category})"
                ) from None

    def _stored_length(self, session_id: str) -> int | None:
        """The number of stored events of ``session_id``, or None when it is not stored."""
        if not _is_storable_id(session_id):
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
            raise StoreCorruptError(f"session {_show(session_id)} has a gap in its stored events")
        return int(count)


# --- helpers -------------------------------------------------------------------------------


def _is_storable_id(value: object) -> bool:
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_id(value: object, what: str) -> None:
    if not isinstance(value, str):
        raise StoreError(f"{what} must be a string, not {type(value).__name__}")
    if not _is_storable_id(value):
        raise StoreError(
            f"{what} {_show(value)} cannot be stored: "
            "it must be non-empty, without NUL or lone surrogates"
        )


def _event_row(session_id: str, event: SessionEvent, payload: bytes) -> _EventRow:
    """Validate one event row before it is queued, so a queued row can always be written."""
    if not isinstance(event, SessionEvent):
        raise StoreError(f"expected a SessionEvent, not {type(event).__name__}")
    if not isinstance(event.type, str) or not _is_storable_id(event.type):
        raise StoreError(
            f"event type of session {_show(session_id)} must be a non-empty valid string"
        )
    for name, number in (("seq", event.seq), ("time", event.time)):
        if (
            isinstance(number, bool)
            or not isinstance(number, int)
            or not _INT64_MIN <= number <= _INT64_MAX
        ):
            raise StoreError(
                f"event {name} of session {_show(session_id)} must be a 64-bit integer"
            )
    if event.seq < 0:
        raise StoreError(f"event seq of session {_show(session_id)} must not be negative")
    if not isinstance(payload, bytes | bytearray):
        raise StoreError(f"event payload must be bytes, not {type(payload).__name__}")
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise StoreError(
            f"event payload of {len(payload)} bytes is larger than {MAX_PAYLOAD_BYTES}"
        )
    return _EventRow(session_id, event.seq, event.type, event.time, bytes(payload))


def _header(session_id: str, row: tuple[Any, ...]) -> SessionHeader:
    seed_length, parent = row
    if seed_length is not None and (not isinstance(seed_length, int) or seed_length < 0):
        raise StoreCorruptError(f"session {_show(session_id)} has an invalid seed_length")
    if parent is not None and not isinstance(parent, str):
        raise StoreCorruptError(f"session {_show(session_id)} has an invalid parent_session")
    return SessionHeader(session_id, seed_length, parent)


def _event(session_id: str, index: int, row: tuple[Any, ...]) -> SessionEvent:
    seq, type_, time_ms, data = row
    if seq != index or not isinstance(seq, int):
        raise StoreCorruptError(
            f"session {_show(session_id)} has no event with seq {index} (found {seq!r})"
        )
    if not isinstance(type_, str) or not isinstance(time_ms, int) or not isinstance(data, bytes):
        raise StoreCorruptError(f"session {_show(session_id)} has a malformed event at seq {seq}")
    try:
        value = decode_payload(data)
    except PayloadError as error:
        raise StoreCorruptError(
            f"session {_show(session_id)} has an unreadable payload at seq {seq}: {error}"
        ) from None
    return SessionEvent(type_, seq, time_ms, value)


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


def commit_failed(error: BaseException, rows: int) -> StoreWriteError:
    """Log a failed write round (detail at debug level) and describe it without backend text."""
    category = _category(error)
    _log.error(
        "session store commit failed (%s); %d rows stay queued for the next attempt",
        category,
        rows,
    )
    _log.debug("commit failure detail", exc_info=error)
    return StoreWriteError(
        f"could not commit {rows} queued rows to the session store ({category}); "
        "they stay queued and the next flush retries",
        category=category,
    )


def _category(error: BaseException) -> str:
    name = getattr(error, "sqlite_errorname", None)
    return name if isinstance(name, str) and name else type(error).__name__


def _show(value: str, limit: int = 80) -> str:
    """A session id for messages: repr'd (control characters escaped) and shortened."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-2:]}"


def _failed(error: BaseException) -> Future[bool]:
    future: Future[bool] = Future()
    future.set_exception(error)
    return future


def _settle_all(outcomes: list[_Outcome]) -> None:
    for future, outcome in outcomes:
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
