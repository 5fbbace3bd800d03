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

A failed write is rolled back, so nothing is half-written. What happens next
depends on why it failed:

* a whole-store failure (disk full, database locked, I/O error, the file
  replaced): every row goes back to the front of the queue, nothing queued is
  dropped, the flush requests of that round fail with :class:`StoreWriteError`
  and the next flush retries;
* rows that can never be written (a key another writer already stored, e.g. a
  ``seq`` it took): the round is bisected by session, so every other session
  still commits (one transaction per healthy half), and the session whose rows
  conflict is *fenced*: its queued rows are discarded, its flushes fail with
  :class:`SessionLeaseError`, its later appends are refused, and this is
  logged once. A refused row never blocks the other sessions of the process.

Before each ``COMMIT`` the writer checks that the database and WAL files at
the path are still the ones it opened. If they were deleted under it, it
rebuilds the store at its path from its open connection before committing,
so an acknowledgement never refers to an unlinked file; if another file took
the path, it refuses to write (see :meth:`SqliteEventStore._write`).

One owner per session. Many processes (and many store objects in one process)
may open the same file, but a session is written by one store at a time:
:meth:`~SqliteEventStore.acquire_session` takes the session's exclusive lock
in ``<file>.locks`` beside the database, a byte-range lock on an *open file
description* (``F_OFD_SETLK``, see :mod:`host_bridge.embedded.session_locks`),
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

The due index (:mod:`host_bridge.embedded.due_index`) is a projection of the
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
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from host_bridge.embedded.codec import MAX_PAYLOAD_BYTES, PayloadError, decode_payload
from host_bridge.embedded.due_index import (
    WAKE_EVENT_TYPES,
    DueEntry,
    DueProjector,
    IndexPlan,
    StoredRow,
    project_logs,
)
from host_bridge.embedded.session_locks import SessionLockFile
from host_bridge.embedded.store_errors import (
    SessionLeaseError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
    StoreWriteError,
)
from host_bridge.protocols import SessionEvent, SessionHeader

__all__ = [
    "AUTO_WRITE_BYTES",
    "AUTO_WRITE_ROWS",
    "BUSY_TIMEOUT_MS",
    "CLOSE_TIMEOUT",
    "DUE_INDEX_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "SessionLeaseError",
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

_log = logging.getLogger("dsh_schedule.store")

SCHEMA_VERSION = 3
"""The schema version this code reads and writes."""

DUE_INDEX_SCHEMA_VERSION = 3
"""The first schema version with the ``due_index`` table."""

BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for another connection's lock before failing."""

CLOSE_TIMEOUT = 30.0
"""Seconds :meth:`SqliteEventStore.close` waits for its last write by default."""

AUTO_WRITE_ROWS = 4096
"""Queued rows that make the writer commit even when no flush is waiting."""

AUTO_WRITE_BYTES = 32 * 1024 * 1024
"""Queued payload bytes that make the writer commit even when no flush is waiting."""

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

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


@dataclass(frozen=True, slots=True)
class _Loss:
    """Why this store lost a session; every later write of the session is refused.

    ``kind`` ``"lease"``: the session's lock or lease is no longer held here
    (another store may own it now); its flushes resolve ``False``.
    ``"conflict"``: its queued rows can never be written (another writer stored
    rows with the same keys); its flushes fail with a :class:`SessionLeaseError`.
    """

    session_id: str
    kind: Literal["lease", "conflict"]
    message: str

    def error(self) -> SessionLeaseError:
        """A fresh exception for one refused call."""
        return SessionLeaseError(self.message, session_id=self.session_id)

    def flush_outcome(self) -> bool | BaseException:
        """What a flush of the lost session resolves to."""
        return False if self.kind == "lease" else self.error()


@dataclass(slots=True)
class _Round:
    """What one write round of the writer thread did."""

    committed: list[_Op] = field(default_factory=list)  # rows now durable
    commits: int = 0  # transactions committed
    retry: list[_Op] = field(default_factory=list)  # rows back to the head of the queue
    error: StoreWriteError | None = None  # why ``retry`` failed (a whole-store failure)
    lost: dict[str, _Loss] = field(default_factory=dict)  # sessions lost in this round
    unconfirmed: set[str] = field(default_factory=set)  # ownership checks that failed (``error``)
    conflict_category: str = ""  # the backend's name of the last row conflict


_T = TypeVar("_T")
_Statement = tuple[str, tuple[object, ...]]
_Outcome = tuple[Future[bool], bool | BaseException]
_Commit = tuple[BaseException | None, dict[str, _Loss]]
"""What one write transaction returns: its failure (rolled back) and the sessions found lost."""


class SqliteEventStore:
    """Durable session logs in one SQLite file; the embedded host's persistence listener.

    ``path`` is the database file (see :func:`host_bridge.embedded.paths.store_path`).
    With ``create`` (the default) missing parent directories and the file are
    created; otherwise a missing file is a :class:`StoreError`. Opening a file
    that is not a session store, is corrupt, or has a newer schema raises
    :class:`StoreError` (:class:`StoreCorruptError`, :class:`StoreVersionError`).

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
        self._close_deadline: float | None = None  # monotonic; set by start_closing()
        self._close_wait = 0.0  # the seconds that deadline allowed
        self._in_flight: list[_Waiter] = []  # the flush requests of the writer's current round
        self._writer_stopped = False
        self._auto_write_blocked = False
        self._final_error: StoreWriteError | None = None
        self._commit_count = 0
        self._flush_requests = 0
        self._read_lock = threading.Lock()
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lease_lock = threading.Lock()  # serialises taking and giving back leases
        self._leases: dict[str, int] = {}  # session -> fencing epoch (0 on SQLite)
        self._lost: dict[str, _Loss] = {}
        self._session_locks: SessionLockFile | None = None  # SQLite: opened with the first lease
        self._holder_ops: list[_Statement] = []  # SQLite: ``leases`` rows, written by the writer
        self._holder_blocked = False  # their last write failed: wait for the next round
        self._holder_unsynced = 0  # of those queued or being written
        self._due = DueProjector()  # the due index's per-session state (writer thread)
        self._due_listeners: list[Callable[[dict[str, int | None]], None]] = []

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
    def owner(self) -> str:
        """How this store names itself as a session's holder (``host:pid:random``)."""
        return self._owner

    @property
    def lock_mechanism(self) -> str | None:
        """How sessions are locked (``"ofd"`` or ``"flock"``), None before the first lease."""
        locks = self._session_locks
        return None if locks is None else locks.mechanism

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
        surrogate), already stored or already queued, or when a seed row is invalid,
        and :class:`SessionLeaseError` when another store holds the session (a
        session not yet held here is taken on the way, see :meth:`acquire_session`).
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
        self._ensure_lease(session_id)
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
        for an unknown session, a wrong seq or an invalid row, and
        :class:`SessionLeaseError` when the session is held by another store or
        was lost by this one; nothing is queued then. The first append to a
        stored session that was not :meth:`load`-ed by this store reads its length once.
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
            self._check_not_lost(session_id)
            expected = self._next_seq.get(session_id)
            held = session_id in self._leases
        if expected is None:
            stored = self._stored_length(session_id)
            if stored is None:
                raise StoreError(
                    f"session {_show(session_id)} is unknown to the store; create it first"
                )
            expected = stored
        if not held:
            self._ensure_lease(session_id)
        with self._lock:
            self._check_open()
            self._check_not_lost(session_id)
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
        includes unknown sessions): on SQLite the session's lock, held through
        an open file, cannot be lost while the store is open. It fails with
        :class:`StoreWriteError` when the write attempt made for it failed (the
        rows stay queued; flush again to retry) and with :class:`StoreClosedError`
        after :meth:`close`. When the session was lost (see :meth:`lease_lost`)
        it resolves ``False`` if its lease went elsewhere and fails with
        :class:`SessionLeaseError` if its rows could never be written.
        The future cannot be cancelled.
        """
        if not isinstance(session_id, str):
            return _failed(
                StoreError(f"flush needs a session id string, not {type(session_id).__name__}")
            )
        return self._request_flush(session_id)

    def flush_all(self) -> Future[bool]:
        """Like :meth:`flush`, for every row of every session (and holder record) queued before."""
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
        self._due.forget(session_id)

    # --- ownership -------------------------------------------------------------------

    def acquire_session(self, session_id: str) -> int:
        """Take ``session_id`` for this store before it goes live; returns its fencing epoch.

        On SQLite this takes the session's exclusive lock in the lock file
        beside the database (no waiting; see :mod:`host_bridge.embedded.session_locks`)
        and records this store as its holder in ``leases``; the epoch is always
        ``0`` (the lock cannot be lost while the store is open). Raises
        :class:`SessionLeaseError`, naming the holder when it is known, when
        another process or another store object holds the session or this
        store already does, and :class:`StoreError` for an unstorable id.
        """
        _check_id(session_id, "session id")
        with self._lease_lock:
            with self._lock:
                self._check_open()
                if session_id in self._leases:
                    raise SessionLeaseError(
                        f"session {_show(session_id)} is already held by this store",
                        session_id=session_id,
                        holder=self._owner,
                    )
            if not self._lock_session(session_id):
                holder = self._recorded_holder(session_id)
                named = f"held by {holder}" if holder else "its holder is not recorded yet"
                raise SessionLeaseError(
                    f"session {_show(session_id)} is live in another process or store "
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

    def release_session(self, session_id: str) -> None:
        """Give up ``session_id`` after its queued rows are written; nothing if not held here.

        When those rows cannot be written the session stays held (the next
        flush retries them) and the error is logged. After :meth:`start_closing`
        it waits for them only until the close deadline, then keeps the session
        the same way.
        """
        with self._lock:
            if session_id not in self._leases:
                return
        try:
            self._request_flush(session_id).result(self._time_left())
        except SessionLeaseError:
            pass  # lost: nothing of it will be written any more
        except StoreError as error:
            _log.error("keeping session %r: its rows are not durable (%s)", session_id, error)
            return
        except TimeoutError:
            _log.error(
                "keeping session %r: its rows were not written before the store's close deadline",
                session_id,
            )
            return
        with self._lease_lock:
            with self._lock:
                if self._leases.pop(session_id, None) is None:
                    return
            self._unlock_session(session_id)

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store holds ``session_id`` and has not lost it."""
        with self._lock:
            return session_id in self._leases and session_id not in self._lost

    def lease_lost(self, session_id: str) -> bool:
        """Whether this store lost ``session_id`` since it took it.

        A lost session's queued rows were discarded and every later write of it
        is refused with :class:`SessionLeaseError` until it is taken again.
        """
        with self._lock:
            return session_id in self._lost

    def _check_not_lost(self, session_id: str) -> None:
        """Lock held: raise the refusal of a session this store lost."""
        loss = self._lost.get(session_id)
        if loss is not None:
            raise loss.error()

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
                locks = self._session_locks = SessionLockFile(_sidecar(self._path, ".locks"))
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
                f"cannot lock session {_show(session_id)} in {locks.path}"
                f" ({error.strerror or type(error).__name__})"
            ) from None

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

    def start_closing(self, timeout: float | None) -> None:
        """Bound the waits of a shutdown that starts now: they end ``timeout`` seconds from now.

        From this call on, :meth:`release_session` waits for a session's rows
        and :meth:`close` for its last write at most until that deadline (an
        earlier deadline set before stays); ``None`` sets none. The store keeps
        working meanwhile. A host calls it before it detaches its sessions, so
        that a writer stuck in a commit (a hung disk or database) cannot hold
        the whole shutdown.
        """
        if timeout is None:
            return
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            if self._close_deadline is None or deadline < self._close_deadline:
                self._close_deadline = deadline
                self._close_wait = max(0.0, timeout)

    def close(self, timeout: float | None = CLOSE_TIMEOUT) -> None:
        """Write what is queued, stop the writer, give back every session, close; idempotent.

        Raises :class:`StoreWriteError` when that last write failed (those rows
        were never acknowledged and are not durable). Every later call fails
        with :class:`StoreClosedError` (``flush`` returns a failed future).

        Waits for the last write at most ``timeout`` seconds (``None``: as long
        as it takes), or until an earlier :meth:`start_closing` deadline. When
        the writer has not finished by then (blocked inside SQLite or the
        database driver), the store stops waiting for it: it is closed at once,
        every flush still pending fails with :class:`StoreWriteError`, the
        error is logged, and the :class:`StoreWriteError` raised names the
        rows that are not confirmed durable. The writer is a daemon thread: if
        it finishes later it still commits what it holds and then gives back
        the sessions; until then (or until the process exits) they stay locked,
        so no other store can take a session whose rows may still be committed.
        """
        self.start_closing(timeout)
        with self._wake:
            first = not self._closed
            if first and self._leases and self._session_locks is not None:
                self._holder_ops.append(("DELETE FROM leases WHERE owner = ?", (self._owner,)))
                self._holder_unsynced += 1
            self._closed = True
            self._wake.notify_all()
        abandoned: StoreWriteError | None = None
        if threading.current_thread() is not self._thread:
            self._thread.join(self._time_left())
            if self._thread.is_alive() and first:
                abandoned = self._stop_waiting_for_writer()
        with self._read_lock:
            if self._read_conn is not None:
                self._read_conn.close()
                self._read_conn = None
        if first and abandoned is not None:
            raise abandoned
        if first and self._final_error is not None:
            raise self._final_error

    def _time_left(self) -> float | None:
        """Seconds until the close deadline (0 once it passed); None without one."""
        with self._lock:
            deadline = self._close_deadline
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def _stop_waiting_for_writer(self) -> StoreWriteError:
        """The writer missed the close deadline: refuse all work, fail every pending flush."""
        with self._lock:
            self._writer_stopped = True
            rows = sum(self._unsynced.values())
            sessions = sorted(self._unsynced)
            futures = [w.future for w in (*self._in_flight, *self._waiters)]
            self._waiters = []
            waited = self._close_wait
        which = ", ".join(_show(s) for s in sessions[:5]) + (" …" if len(sessions) > 5 else "")
        error = StoreWriteError(
            f"closing the session store timed out after {waited:.3g} s: its writer did not "
            f"finish the last write (a stuck disk or database?); {rows} unflushed rows"
            + (f" of sessions {which}" if sessions else "")
            + " are not confirmed durable",
            category="CLOSE_TIMEOUT",
        )
        _settle_all([(future, error) for future in futures if not future.done()])
        _log.error("session store %s: %s; the writer thread is left running", self._label, error)
        return error

    def _give_back_all(self) -> None:
        """Once the writer stopped (on its thread): drop every session lock."""
        with self._lease_lock:
            with self._lock:
                self._leases.clear()
            locks, self._session_locks = self._session_locks, None
            if locks is not None:
                locks.close()

    def __enter__(self) -> SqliteEventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- reads ---------------------------------------------------------------------

    def session_ids(self) -> list[str]:
        """The ids of every durably stored session, sorted."""

        return self._read(lambda conn: _select_session_ids(conn, self._path))

    def load_header(self, session_id: str) -> SessionHeader | None:
        """The durably stored header of ``session_id``, or ``None`` when it is not stored."""
        if not _is_storable_id(session_id):
            return None

        row = self._read(lambda conn: _select_header(conn, session_id))
        return None if row is None else _header(session_id, row)

    def load(self, session_id: str) -> StoredSession | None:
        """The durably stored session (header and decoded log), or ``None`` when it is not stored.

        Raises :class:`StoreCorruptError` naming the session and seq when its
        rows are not ``0 … n-1`` contiguous or a row does not decode.
        """
        if not _is_storable_id(session_id):
            return None

        head, rows = self._read(lambda conn: _select_session(conn, session_id))
        return self._stored_session(session_id, head, rows)

    def _stored_session(
        self, session_id: str, head: Sequence[Any] | None, rows: Sequence[Sequence[Any]]
    ) -> StoredSession | None:
        """Decode a header row and event rows read in one snapshot; note the next seq."""
        stored = decode_session(session_id, head, rows)
        if stored is not None:
            with self._lock:
                self._next_seq.setdefault(session_id, len(stored.events))
        return stored

    # --- due index ---------------------------------------------------------------------

    def add_due_listener(
        self, listener: Callable[[dict[str, int | None]], None]
    ) -> Callable[[], None]:
        """Hear of every commit of this store that moved the due index; returns ``remove``.

        ``listener({session_id: due_ms or None, ...})`` runs on the writer
        thread right after the commit: it must be short and must not wait for
        the store (post a message). Commits of other processes are not heard.
        """
        with self._lock:
            self._due_listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._due_listeners:
                    self._due_listeners.remove(listener)

        return remove

    def due_entry(self, session_id: str) -> DueEntry | None:
        """The durably stored due index row of ``session_id`` (``None``: no row)."""
        if not _is_storable_id(session_id):
            return None
        row = self._read(
            lambda conn: conn.execute(
                "SELECT schedule_ms, inbox_ms FROM due_index WHERE session_id = ?", (session_id,)
            ).fetchone()
        )
        return None if row is None else _due_entry(session_id, row)

    @property
    def has_due_index(self) -> bool:
        """Always True: a writable store migrates to the schema with the due index."""
        return True

    def due_entries(self) -> dict[str, DueEntry]:
        """Every stored due index row, by session id (for checks; reads the whole index)."""
        return self._read(_select_due_entries)

    def load_indexed(self, session_id: str) -> tuple[StoredSession | None, DueEntry | None]:
        """The stored session and its due index row, read in one snapshot (for checks)."""
        if not _is_storable_id(session_id):
            return None, None
        head, rows, due = self._read(lambda conn: _select_indexed(conn, session_id))
        return self._stored_session(session_id, head, rows), due

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

    def next_due(self) -> int | None:
        """The earliest ``due_ms`` among sessions nobody holds (see :meth:`due_sessions`)."""
        first = self.due_sessions(None, 1)
        return first[0][1] if first else None

    def claim_due_session(self, session_id: str, now_ms: int) -> bool:
        """Take ``session_id`` to deliver what is due in it; False when that is not for us.

        False when another process or store holds the session, or when its
        index row says nothing is due at ``now_ms`` (then it is not kept).
        True: this store holds the session (:meth:`acquire_session`) and it is due.
        """
        try:
            self.acquire_session(session_id)
        except SessionLeaseError:
            return False
        try:
            entry = self.due_entry(session_id)
        except BaseException:
            self.release_session(session_id)
            raise
        if entry is None or entry.due_ms > now_ms:
            self.release_session(session_id)
            return False
        return True

    def reindex(self) -> int:
        """Rebuild the due index from the stored logs in one transaction; the rows written.

        Safe while hosts write: the transaction excludes every writer of the
        file, so no commit can fall between reading the logs and replacing the index.
        """
        with self._lock:
            self._check_open()
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("DELETE FROM due_index")
                _build_due_index(conn)
                (count,) = conn.execute("SELECT COUNT(*) FROM due_index").fetchone()
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise StoreError(
                f"cannot rebuild the due index of {self._path} ({_category(error)})"
            ) from None
        finally:
            conn.close()
        self._due.clear()
        _log.info("rebuilt the due index of %s: %d sessions", self._path, count)
        return int(count)

    @property
    def due_projector(self) -> DueProjector:
        """The writer's due index state (for diagnostics and benchmarks)."""
        return self._due

    def _due_page(
        self, after: tuple[int, str] | None, until_ms: int | None, limit: int
    ) -> list[tuple[str, int]]:
        """One page of the index in ``(due_ms, session_id)`` order after ``after``."""
        clauses: list[str] = []
        params: list[object] = []
        if after is not None:
            clauses.append("(due_ms, session_id) > (?, ?)")
            params += list(after)
        if until_ms is not None:
            clauses.append("due_ms <= ?")
            params.append(until_ms)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
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
                    locks = self._session_locks = SessionLockFile(_sidecar(self._path, ".locks"))
                except OSError:
                    return False  # taking the session will say
            try:
                return locks.held_elsewhere(session_id)
            except OSError:
                return False

    def _plan_due_index(self, batch: Sequence[_Op], read: Callable[[str], Any]) -> IndexPlan:
        """The due index changes of ``batch`` (writer thread, inside its transaction)."""
        rows = [
            (op.session_id, op.seq, op.type, op.time, op.payload)
            for op in batch
            if isinstance(op, _EventRow)
        ]
        created = {op.session_id: op.seed_length for op in batch if isinstance(op, _SessionRow)}
        return self._due.plan(rows, created, read)

    def _due_committed(self, plan: IndexPlan) -> None:
        """After ``COMMIT``: keep the projection state and tell the listeners; never raises."""
        plan.adopt()
        if not plan.changes:
            return
        with self._lock:
            listeners = tuple(self._due_listeners)
        if not listeners:
            return
        moved = {sid: None if e is None else e.due_ms for sid, e in plan.changes.items()}
        for listener in listeners:
            try:
                listener(dict(moved))
            except Exception:
                _log.warning("a due index listener failed", exc_info=True)

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
            loss = None if session_id is None else self._lost.get(session_id)
            if loss is not None:
                outcome = loss.flush_outcome()
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
                return future
            if self._is_synced(session_id) and not self._needs_round(session_id):
                future.set_result(True)  # no callbacks can be attached yet
                return future
            self._waiters.append(_Waiter(session_id, future))
            self._wake.notify()
        return future

    def _needs_round(self, session_id: str | None) -> bool:
        """Lock held: whether a flush must confirm ownership in a write round (not on SQLite)."""
        return False

    def _is_synced(self, session_id: str | None) -> bool:
        """Lock held: nothing of ``session_id`` (or of anything, for None) is uncommitted."""
        if session_id is None:
            return not self._unsynced and not self._holder_unsynced
        return session_id not in self._unsynced

    # --- internals: writer thread ----------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._wake:
                    while not (
                        self._closed
                        or self._waiters
                        or self._auto_write_due()
                        or self._side_writes_due()
                    ):
                        self._wake.wait()
                    final = self._closed
                    batch: list[_Op] = []
                    if final or self._waiters or self._auto_write_due():
                        batch, self._queue, self._queued_bytes = self._queue, [], 0
                    # (else only holder rows are due: queued session rows wait for a flush)
                    waiters, self._waiters = self._waiters, []
                    self._in_flight = waiters
                result = self._write_round(batch, waiters)
                _settle_all(self._settle(result, waiters))
                if final:
                    error = result.error
                    if error is not None:
                        self._final_error = StoreWriteError(
                            f"closing the session store could not write {len(result.retry)} "
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
            self._give_back_all()

    def _write_round(self, batch: list[_Op], waiters: list[_Waiter]) -> _Round:
        """Write everything taken for this round; group commit, isolation on a row conflict.

        The healthy path is one transaction for every session's rows. When it
        fails on rows that can never be written (a key another writer already
        stored), the round is bisected by session so every other session still
        commits, and the sessions whose rows conflict are lost (``"conflict"``).
        Any other failure (disk full, locked, I/O) keeps all rows for a retry.
        """
        result = _Round()
        check = self._round_checks(waiters)
        if not (batch or check or self._side_writes_pending()):
            return result
        outcome, groups = self._attempt(_by_session(batch), check, result)
        if outcome == "conflict":
            # (a conflict comes from an INSERT, after the ownership check ran: its answers stand)
            self._isolate(groups, result)
        return result

    def _attempt(
        self, groups: list[list[_Op]], check: set[str], result: _Round
    ) -> tuple[Literal["ok", "conflict", "failed"], list[list[_Op]]]:
        """Commit ``groups`` (rows by session) in one transaction and book it in ``result``.

        Returns ``"conflict"`` (nothing booked) when rows of some session can
        never be written, with the groups that are not lost.
        """
        error, lost = self._commit([op for group in groups for op in group], check)
        result.lost.update(lost)
        groups = [group for group in groups if group[0].session_id not in result.lost]
        if error is None:
            result.committed.extend(op for group in groups for op in group)
            result.commits += 1 if groups else 0
            return "ok", groups
        if groups and self._is_row_conflict(error):
            result.conflict_category = self._error_category(error)
            return "conflict", groups
        rows = [op for group in groups for op in group]
        unconfirmed = check - result.lost.keys()
        if rows or unconfirmed:
            result.retry.extend(rows)
            result.unconfirmed |= unconfirmed
            result.error = commit_failed(error, len(rows), self._error_category(error))
        return "failed", groups

    def _isolate(self, groups: list[list[_Op]], result: _Round) -> None:
        """Bisect ``groups`` (a set known to hold a conflict) until each conflict is one session.

        Healthy halves commit as they are found; a single session that still
        conflicts is lost. A whole-store failure on the way stops the search
        and keeps everything not yet committed queued.
        """
        suspects = [groups]
        while suspects:
            part = suspects.pop()
            if result.error is not None:
                result.retry.extend(op for group in part for op in group)
                continue
            if len(part) == 1:
                session_id = part[0][0].session_id
                result.lost[session_id] = _Loss(
                    session_id,
                    "conflict",
                    f"session {_show(session_id)} was fenced out: another writer stored rows "
                    f"this store was about to write ({result.conflict_category}); its unwritten "
                    "events were discarded and it accepts no more writes here",
                )
                continue
            middle = len(part) // 2
            first, second = part[:middle], part[middle:]
            outcome, first = self._attempt(first, set(), result)
            if outcome == "conflict":
                suspects.append(first)
            if result.error is not None:
                result.retry.extend(op for group in second for op in group)
            elif outcome == "ok":
                suspects.append(second)  # the conflict is in the other half
            else:
                outcome, second = self._attempt(second, set(), result)
                if outcome == "conflict":
                    suspects.append(second)

    def _side_writes_due(self) -> bool:
        """Lock held: whether writes besides session rows wait for the writer (holder rows)."""
        return bool(self._holder_ops) and not self._holder_blocked

    def _side_writes_pending(self) -> bool:
        """Whether writes besides session rows wait, even ones whose last attempt failed."""
        with self._lock:
            return bool(self._holder_ops)

    def _round_checks(self, waiters: list[_Waiter]) -> set[str]:
        """Sessions whose ownership this round must confirm (none on SQLite: locks hold)."""
        return set()

    def _is_row_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` means some rows can never be written (not a whole-store failure)."""
        return _category(error).startswith(_ROW_ERRORS)

    def _error_category(self, error: BaseException) -> str:
        """A short backend name of ``error`` for messages (no backend text)."""
        return _category(error)

    def _commit(self, rows: list[_Op], check: set[str]) -> _Commit:
        """Write ``rows`` in one transaction; returns the failure (rolled back) and lost sessions.

        First moves the session locks to the lock file now at the path if
        ours was deleted or replaced (:meth:`SessionLockFile.ensure_current`);
        sessions another holder took meanwhile are lost and their rows are not written.
        """
        lost: dict[str, _Loss] = {}
        locks = self._session_locks
        if locks is not None and rows:
            for session_id in locks.ensure_current():
                lost[session_id] = _Loss(
                    session_id,
                    "lease",
                    f"session {_show(session_id)} was taken by another store after the lock "
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
        self, batch: list[_Op], holders: Sequence[_Statement] = (), *, restored: bool = False
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
            for statement, params in holders:
                conn.execute(statement, params)
            plan = self._plan_due_index(batch, lambda sid: _read_due_state(conn, sid))
            _write_due_changes(conn, plan, "?")
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

    def _settle(self, result: _Round, waiters: list[_Waiter]) -> list[_Outcome]:
        """Book one write round; returns the futures to settle (outside the lock)."""
        outcomes: list[_Outcome] = []
        newly_lost: list[tuple[_Loss, int]] = []
        with self._lock:
            for loss in result.lost.values():
                dropped = self._lose(loss)
                if dropped is not None:
                    newly_lost.append((loss, dropped))
            self._commit_count += result.commits
            for op in result.committed:
                self._unsynced[op.session_id] -= 1
                if self._unsynced[op.session_id] <= 0:
                    del self._unsynced[op.session_id]
                    if op.session_id in self._forget_when_synced:
                        self._forget_when_synced.discard(op.session_id)
                        self._next_seq.pop(op.session_id, None)
            if result.retry:
                self._queue[:0] = result.retry
                self._queued_bytes += sum(
                    len(op.payload) for op in result.retry if isinstance(op, _EventRow)
                )
                self._auto_write_blocked = True  # retry on the next flush, not in a loop
            else:
                self._auto_write_blocked = False
            failed = {op.session_id for op in result.retry}
            for waiter in waiters:
                outcomes.append((waiter.future, self._outcome(waiter.session_id, result, failed)))
            # Requests made during the write are covered too if their session is now clean
            # (unless its ownership must be confirmed by a round of its own).
            still_waiting: list[_Waiter] = []
            for waiter in self._waiters:
                lost = None if waiter.session_id is None else self._lost.get(waiter.session_id)
                if lost is not None:
                    outcomes.append((waiter.future, lost.flush_outcome()))
                elif self._is_synced(waiter.session_id) and not self._needs_round(
                    waiter.session_id
                ):
                    outcomes.append((waiter.future, True))
                else:
                    still_waiting.append(waiter)
            self._waiters = still_waiting
        for loss, dropped in newly_lost:
            _log.error("%s (%d rows dropped)", loss.message, dropped)
        return outcomes

    def _outcome(
        self, session_id: str | None, result: _Round, failed: set[str]
    ) -> bool | BaseException:
        """Lock held: what a flush request that took part in ``result`` resolves to."""
        error = result.error
        if session_id is None:
            if error is not None and failed:
                return StoreWriteError(str(error), category=error.category)
            conflicts = sorted(s for s, loss in result.lost.items() if loss.kind == "conflict")
            if conflicts:
                return SessionLeaseError(
                    f"sessions {', '.join(_show(s) for s in conflicts)} were fenced out; "
                    "their unwritten events were discarded"
                )
            return not result.lost
        loss = self._lost.get(session_id)
        if loss is not None:
            return loss.flush_outcome()
        if error is not None and (session_id in failed or session_id in result.unconfirmed):
            return StoreWriteError(str(error), category=error.category)
        return True

    def _lose(self, loss: _Loss) -> int | None:
        """Lock held: discard everything queued of a lost session; None if it was lost already."""
        session_id = loss.session_id
        if session_id in self._lost:
            return None
        self._lost[session_id] = loss
        dropped = self._unsynced.pop(session_id, 0)
        kept = [op for op in self._queue if op.session_id != session_id]
        if len(kept) != len(self._queue):
            self._queued_bytes -= sum(
                len(op.payload)
                for op in self._queue
                if op.session_id == session_id and isinstance(op, _EventRow)
            )
            self._queue = kept
        self._next_seq.pop(session_id, None)
        self._forget_when_synced.discard(session_id)
        return dropped

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
            raise StoreMissingError(
                f"there is no session store at {self._path}",
                location=str(self._path),
                reason="no such file",
            )
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
            raise StoreCorruptError(
                f"session {_show(session_id)} has a gap in its stored events",
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


def _select_due_entries(conn: sqlite3.Connection) -> dict[str, DueEntry]:
    """Every due index row, by session id."""
    rows = conn.execute("SELECT session_id, schedule_ms, inbox_ms FROM due_index").fetchall()
    return {row[0]: _due_entry(row[0], row[1:]) for row in rows}


def _select_indexed(
    conn: sqlite3.Connection, session_id: str
) -> tuple[tuple[Any, ...] | None, list[tuple[Any, ...]], DueEntry | None]:
    """A session's header row, event rows and due index row, read in one snapshot."""
    conn.execute("BEGIN")
    try:
        head = _select_header(conn, session_id)
        rows = conn.execute(
            "SELECT seq, type, time, data FROM events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        due = conn.execute(
            "SELECT schedule_ms, inbox_ms FROM due_index WHERE session_id = ?", (session_id,)
        ).fetchone()
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    return (
        head,
        rows if head is not None else [],
        None if due is None else _due_entry(session_id, due),
    )


def decode_session(
    session_id: str, head: Sequence[Any] | None, rows: Sequence[Sequence[Any]]
) -> StoredSession | None:
    """A session from its header row and event rows (one snapshot); None without a header.

    Raises :class:`StoreCorruptError` naming the session and seq when the rows
    are not ``0 … n-1`` contiguous or a row does not decode.
    """
    if head is None:
        return None
    header = _header(session_id, tuple(head))
    events = tuple(_event(session_id, index, tuple(row)) for index, row in enumerate(rows))
    return StoredSession(header, events)


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


def _write_due_changes(conn: Any, plan: IndexPlan, mark: str) -> None:
    """Write ``plan``'s index rows on ``conn`` (``mark``: the driver's placeholder)."""
    upserts = [
        (session_id, entry.due_ms, entry.schedule_ms, entry.inbox_ms)
        for session_id, entry in plan.changes.items()
        if entry is not None
    ]
    deletes = [(session_id,) for session_id, entry in plan.changes.items() if entry is None]
    if upserts:
        conn.executemany(
            "INSERT INTO due_index(session_id, due_ms, schedule_ms, inbox_ms)"
            f" VALUES ({mark}, {mark}, {mark}, {mark})"
            " ON CONFLICT (session_id) DO UPDATE SET due_ms = EXCLUDED.due_ms,"
            " schedule_ms = EXCLUDED.schedule_ms, inbox_ms = EXCLUDED.inbox_ms",
            upserts,
        )
    if deletes:
        conn.executemany(f"DELETE FROM due_index WHERE session_id = {mark}", deletes)


def _due_entry(session_id: str, row: Sequence[Any]) -> DueEntry:
    schedule_ms, inbox_ms = row
    for value in (schedule_ms, inbox_ms):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise StoreCorruptError(f"the due index row of session {_show(session_id)} is invalid")
    entry = DueEntry.of(schedule_ms, inbox_ms)
    if entry is None:
        raise StoreCorruptError(f"the due index row of session {_show(session_id)} is empty")
    return entry


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
        raise StoreCorruptError(
            f"session {_show(session_id)} has an invalid seed_length", session_id=session_id
        )
    if parent is not None and not isinstance(parent, str):
        raise StoreCorruptError(
            f"session {_show(session_id)} has an invalid parent_session", session_id=session_id
        )
    return SessionHeader(session_id, seed_length, parent)


def _event(session_id: str, index: int, row: tuple[Any, ...]) -> SessionEvent:
    seq, type_, time_ms, data = row
    if seq != index or not isinstance(seq, int):
        raise StoreCorruptError(
            f"session {_show(session_id)} has no event with seq {index} (found {seq!r})",
            session_id=session_id,
        )
    if not isinstance(type_, str) or not isinstance(time_ms, int) or not isinstance(data, bytes):
        raise StoreCorruptError(
            f"session {_show(session_id)} has a malformed event at seq {seq}",
            session_id=session_id,
        )
    try:
        value = decode_payload(data)
    except PayloadError as error:
        raise StoreCorruptError(
            f"session {_show(session_id)} has an unreadable payload at seq {seq}: {error}",
            session_id=session_id,
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


def commit_failed(error: BaseException, rows: int, category: str | None = None) -> StoreWriteError:
    """Log a failed write round (detail at debug level) and describe it without backend text.

    ``category`` names the error (default: its SQLite error name or type).
    """
    if category is None:
        category = _category(error)
    if rows == 0:  # only ownership checks were in that round
        _log.error("session store lease check failed (%s)", category)
        _log.debug("lease check failure detail", exc_info=error)
        return StoreWriteError(
            f"could not confirm the session's lease in the session store ({category}); "
            "flush again to retry",
            category=category,
        )
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


def _by_session(batch: Sequence[_Op]) -> list[list[_Op]]:
    """The rows of ``batch`` grouped by session, each group in queue order."""
    groups: dict[str, list[_Op]] = {}
    for op in batch:
        groups.setdefault(op.session_id, []).append(op)
    return list(groups.values())


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
        try:
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        except InvalidStateError:
            pass  # failed already by a close that stopped waiting for the writer
