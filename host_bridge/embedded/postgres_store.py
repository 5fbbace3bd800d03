"""The shared persistence listener: session logs in PostgreSQL, group-committed and leased.

:class:`PostgresEventStore` keeps the contract of
:class:`~host_bridge.embedded.sqlite_store.SqliteEventStore` (it reuses its
write-behind queue, flush waiters and group-commit bookkeeping): appends are
queued in memory, one writer thread writes everything queued for every session
in one transaction per round and resolves the flush futures it covers only
after ``COMMIT`` returned with ``synchronous_commit = on`` (the WAL is flushed).
Payloads are msgpack (see :mod:`host_bridge.embedded.codec`) in ``BYTEA``
columns; the schema is versioned and migrated on open inside a transaction
guarded by an advisory lock. Reads use a ``psycopg_pool`` connection pool.

Session ownership across processes: before a session can be created, resumed
or appended to, the store must hold its *lease* (:meth:`acquire_session`):

* a session-level advisory lock (``pg_try_advisory_lock(hashtextextended(id, 0))``)
  on one connection the store keeps open for its leases. A second process
  asking for the same session gets :class:`SessionLeaseError`; when the owner
  process dies its connection closes and PostgreSQL releases the lock;
* a fencing epoch in ``leases(session_id, epoch, owner)``, bumped on every
  acquisition. Each write round locks the lease rows of its sessions
  (``FOR SHARE``) and writes only the sessions whose epoch is still the one this
  store acquired. A writer that lost its lock (its lease connection dropped and
  another process took the session) is fenced out: its rows for that session
  are discarded, its flushes fail with :class:`SessionLeaseError` and later
  appends are refused. (Distinct ids with the same 64-bit hash share a lock:
  the second one is refused while the first is live elsewhere.)

Schema (version :data:`SCHEMA_VERSION`)::

    meta(key TEXT PRIMARY KEY, value TEXT)                 -- schema_version
    sessions(id TEXT PRIMARY KEY, seed_length BIGINT, parent_session TEXT, created_at BIGINT)
    events(session_id TEXT, seq BIGINT, type TEXT, time BIGINT, data BYTEA,
           PRIMARY KEY(session_id, seq))
    leases(session_id TEXT PRIMARY KEY, epoch BIGINT, owner TEXT, acquired_at TIMESTAMPTZ)
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg_pool

from host_bridge.embedded.sqlite_store import (
    SqliteEventStore,
    StoreClosedError,
    StoreCorruptError,
    StoredSession,
    StoreError,
    StoreVersionError,
    StoreWriteError,
    _EventRow,
    _failed,
    _header,
    _is_storable_id,
    _Op,
    _Outcome,
    _SessionRow,
    _show,
    _Waiter,
    commit_failed,
)
from host_bridge.embedded.stores import is_postgres_url
from host_bridge.protocols import SessionEvent, SessionHeader

__all__ = ["SCHEMA_VERSION", "PostgresEventStore", "SessionLeaseError", "is_postgres_url"]

_log = logging.getLogger("dsh_schedule.store.postgres")

SCHEMA_VERSION = 1
"""The PostgreSQL schema version this code reads and writes."""

_MIGRATION_LOCK = 0x64736873  # advisory lock key serialising migrations ("dshs")

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    0: (
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)",
        "CREATE TABLE sessions("
        " id TEXT PRIMARY KEY,"
        " seed_length BIGINT,"
        " parent_session TEXT,"
        " created_at BIGINT)",
        "CREATE TABLE events("
        " session_id TEXT,"
        " seq BIGINT,"
        " type TEXT,"
        " time BIGINT,"
        " data BYTEA,"
        " PRIMARY KEY(session_id, seq))",
        "CREATE TABLE leases("
        " session_id TEXT PRIMARY KEY,"
        " epoch BIGINT NOT NULL,"
        " owner TEXT,"
        " acquired_at TIMESTAMPTZ)",
    ),
}
"""Statements that migrate schema version N to N+1, keyed by N (0 is an empty database)."""

_T = TypeVar("_T")


class SessionLeaseError(StoreError):
    """This process does not own the session: another process holds its lease, or it was fenced."""


def redact_url(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://…"
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


class _FencedError(Exception):
    def __init__(self, sessions: set[str]) -> None:
        super().__init__(sorted(sessions))
        self.sessions = sessions


class PostgresEventStore(SqliteEventStore):
    """Durable, leased session logs in a PostgreSQL database shared by many host processes.

    ``url`` is a libpq connection URL (``postgresql://user@host:port/db``).
    ``pool_size`` bounds the read pool. ``lease_wait`` is how many seconds
    :meth:`acquire_session` waits for a lease held elsewhere before refusing
    (0: refuse at once). ``fault_hook`` is the same test seam as SQLite's: it is
    called inside every write transaction just before ``COMMIT``.
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        lease_wait: float = 0.0,
        fault_hook: Callable[[], None] | None = None,
    ) -> None:
        if not is_postgres_url(url):
            raise StoreError("a PostgreSQL store needs a postgresql:// URL")
        self._url = url
        self._path = Path(redact_url(url))
        self._init_write_behind(redact_url(url), fault_hook)
        self._writer_conn = None
        self._read_conn = None
        self._lease_wait = lease_wait
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._epochs: dict[str, int] = {}
        self._fenced: set[str] = set()
        self._rejected_waiters: list[_Waiter] = []
        self._fenced_round: set[str] = set()
        self._lease_lock = threading.Lock()

        self._pg_writer: psycopg.Connection[Any] | None = self._pg_connect(migrate=True)
        self._lease_conn: psycopg.Connection[Any] | None = None
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        try:
            self._lease_conn = self._pg_connect(migrate=False, autocommit=True)
            self._pool = psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=max(1, pool_size),
                open=True,
                name="dsh-store-read",
                kwargs={"autocommit": True},
            )
            self._pool.wait(timeout=30)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as error:
            self._close_connections()
            raise StoreError(
                f"cannot connect to the session store {self._label} ({_category(error)})"
            ) from None
        except BaseException:
            self._close_connections()
            raise
        self._thread = threading.Thread(target=self._run, name="dsh-pg-writer", daemon=True)
        self._thread.start()
        _log.debug("session store open at %s", self._label)

    # --- properties ------------------------------------------------------------

    @property
    def url(self) -> str:
        """The connection URL without its password."""
        return self._label

    @property
    def owner(self) -> str:
        """How this store names itself in lease rows (``host:pid:random``)."""
        return self._owner

    # --- leases ----------------------------------------------------------------

    def acquire_session(self, session_id: str) -> int:
        """Take the lease of ``session_id`` for this store; returns the new fencing epoch.

        Raises :class:`SessionLeaseError` when another process holds it (after
        waiting ``lease_wait`` seconds) and :class:`StoreError` when the
        database cannot be reached.
        """
        if not _is_storable_id(session_id):
            raise StoreError(f"session id {_show(str(session_id))} cannot be stored")
        with self._lease_lock:
            self._check_open()
            conn = self._lease_conn
            if conn is None or conn.closed:
                raise StoreClosedError(f"the session store {self._label} is closed")
            if session_id in self._epochs:
                raise SessionLeaseError(f"session {_show(session_id)} is already leased here")
            try:
                if self._lease_wait > 0:
                    conn.execute(f"SET lock_timeout = {int(self._lease_wait * 1000):d}")
                    try:
                        conn.execute(
                            "SELECT pg_advisory_lock(hashtextextended(%s, 0))", (session_id,)
                        )
                        got = True
                    except psycopg.errors.LockNotAvailable:
                        got = False
                    finally:
                        conn.execute("SET lock_timeout = 0")
                else:
                    row = conn.execute(
                        "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (session_id,)
                    ).fetchone()
                    got = bool(row and row[0])
                if not got:
                    holder = self._lease_holder(conn, session_id)
                    raise SessionLeaseError(
                        f"session {_show(session_id)} is live in another process"
                        f"{f' ({holder})' if holder else ''}; it cannot be resumed here "
                        "until that process detaches it or exits"
                    )
                row = conn.execute(
                    "INSERT INTO leases(session_id, epoch, owner, acquired_at)"
                    " VALUES (%s, 1, %s, now())"
                    " ON CONFLICT (session_id) DO UPDATE"
                    " SET epoch = leases.epoch + 1, owner = EXCLUDED.owner, acquired_at = now()"
                    " RETURNING epoch",
                    (session_id, self._owner),
                ).fetchone()
            except psycopg.Error as error:
                raise StoreError(
                    f"cannot take the lease of session {_show(session_id)} ({_category(error)})"
                ) from None
            assert row is not None
            epoch = int(row[0])
        with self._lock:
            self._epochs[session_id] = epoch
            self._fenced.discard(session_id)
        _log.debug("leased session %r (epoch %d)", session_id, epoch)
        return epoch

    def release_session(self, session_id: str) -> None:
        """Give up the lease of ``session_id`` after its queued rows are written.

        When those rows cannot be written the lease is kept (the next flush
        retries them) and the error is logged.
        """
        with self._lock:
            if session_id not in self._epochs:
                return
        try:
            self.flush(session_id).result()
        except StoreError as error:
            _log.error(
                "keeping the lease of session %r: its rows are not durable (%s)", session_id, error
            )
            return
        with self._lease_lock:
            with self._lock:
                if self._epochs.pop(session_id, None) is None:
                    return
            conn = self._lease_conn
            if conn is None or conn.closed:
                return
            try:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (session_id,))
            except psycopg.Error as error:
                _log.warning(
                    "releasing the lease of session %r failed (%s)", session_id, _category(error)
                )

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store holds the lease of ``session_id`` (and was not fenced out)."""
        with self._lock:
            return session_id in self._epochs

    def _lease_holder(self, conn: psycopg.Connection[Any], session_id: str) -> str | None:
        row = conn.execute(
            "SELECT owner FROM leases WHERE session_id = %s", (session_id,)
        ).fetchone()
        return None if row is None or row[0] is None else f"owner {row[0]}"

    # --- writes: lease checks ---------------------------------------------------

    def create_session(
        self, header: SessionHeader, seed: Sequence[tuple[SessionEvent, bytes]] = ()
    ) -> None:
        """Like SQLite's; the store must hold the session's lease."""
        if isinstance(header, SessionHeader):
            self._check_lease(header.id)
        super().create_session(header, seed)

    def record_append(self, session_id: str, event: SessionEvent, payload: bytes) -> None:
        """Like SQLite's; refused with :class:`SessionLeaseError` without the session's lease."""
        self._check_lease(session_id)
        super().record_append(session_id, event, payload)

    def record_appends(self, session_id: str, rows: Sequence[tuple[SessionEvent, bytes]]) -> None:
        """Like SQLite's (one unit, one commit); refused without the session's lease."""
        self._check_lease(session_id)
        super().record_appends(session_id, rows)

    def flush(self, session_id: str) -> Future[bool]:
        """Like SQLite's; fails with :class:`SessionLeaseError` for a fenced-out session."""
        with self._lock:
            fenced = isinstance(session_id, str) and session_id in self._fenced
        if fenced:
            return _failed(self._fenced_error(session_id))
        return super().flush(session_id)

    def _check_lease(self, session_id: str) -> None:
        with self._lock:
            if session_id in self._fenced:
                raise self._fenced_error(session_id)
            if session_id not in self._epochs:
                raise SessionLeaseError(
                    f"this process does not hold the lease of session {_show(str(session_id))}; "
                    "acquire it before writing"
                )

    def _fenced_error(self, session_id: str) -> SessionLeaseError:
        return SessionLeaseError(
            f"session {_show(session_id)} was taken over by another process; "
            "this process was fenced out and its unwritten events were discarded"
        )

    # --- close -----------------------------------------------------------------

    def close(self) -> None:
        """Write what is queued, stop the writer, drop every lease and close the connections."""
        try:
            super().close()
        finally:
            self._close_connections()

    def __enter__(self) -> PostgresEventStore:
        return self

    def _close_connections(self) -> None:
        with self._lease_lock:
            for conn in (self._pg_writer, self._lease_conn):
                if conn is not None and (self._thread_done() or conn is self._lease_conn):
                    conn.close()
            self._lease_conn = None
            if self._thread_done():
                self._pg_writer = None
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _thread_done(self) -> bool:
        thread = getattr(self, "_thread", None)
        return thread is None or not thread.is_alive()

    # --- reads -----------------------------------------------------------------

    def session_ids(self) -> list[str]:
        """The ids of every durably stored session, sorted."""
        rows = self._query(lambda conn: conn.execute("SELECT id FROM sessions").fetchall())
        ids = [row[0] for row in rows]
        if not all(isinstance(session_id, str) for session_id in ids):
            raise StoreCorruptError(f"{self._label}: the sessions table holds a non-text id")
        return sorted(ids)

    def load_header(self, session_id: str) -> SessionHeader | None:
        """The durably stored header of ``session_id``, or ``None`` when it is not stored."""
        if not _is_storable_id(session_id):
            return None
        row = self._query(
            lambda conn: conn.execute(
                "SELECT seed_length, parent_session FROM sessions WHERE id = %s", (session_id,)
            ).fetchone()
        )
        return None if row is None else _header(session_id, tuple(row))

    def load(self, session_id: str) -> StoredSession | None:
        """The durably stored session (header and decoded log), or ``None`` if not stored."""
        if not _is_storable_id(session_id):
            return None

        def query(conn: psycopg.Connection[Any]) -> tuple[Any, list[Any]]:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                head = conn.execute(
                    "SELECT seed_length, parent_session FROM sessions WHERE id = %s",
                    (session_id,),
                ).fetchone()
                rows = (
                    []
                    if head is None
                    else conn.execute(
                        "SELECT seq, type, time, data FROM events"
                        " WHERE session_id = %s ORDER BY seq",
                        (session_id,),
                    ).fetchall()
                )
            return head, rows

        head, rows = self._query(query)
        blobs = [(seq, type_, time_, bytes(data)) for seq, type_, time_, data in rows]
        return self._stored_session(session_id, head, blobs)

    def _stored_length(self, session_id: str) -> int | None:
        if not _is_storable_id(session_id):
            return None

        def query(conn: psycopg.Connection[Any]) -> tuple[Any, Any, Any]:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                exists = conn.execute(
                    "SELECT 1 FROM sessions WHERE id = %s", (session_id,)
                ).fetchone()
                row = conn.execute(
                    "SELECT COUNT(*), MAX(seq) FROM events WHERE session_id = %s", (session_id,)
                ).fetchone()
            assert row is not None
            return exists, row[0], row[1]

        exists, count, last = self._query(query)
        if exists is None:
            return None
        if count and last != count - 1:
            raise StoreCorruptError(f"session {_show(session_id)} has a gap in its stored events")
        return int(count)

    def _query(self, query: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        pool = self._pool
        if pool is None:
            raise StoreClosedError(f"the session store {self._label} is closed")
        try:
            with pool.connection(timeout=30) as conn:
                return query(conn)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as error:
            raise StoreError(
                f"cannot read the session store {self._label} ({_category(error)})"
            ) from None

    # --- writer thread ---------------------------------------------------------

    def _write(self, batch: list[_Op], *, restored: bool = False) -> StoreWriteError | None:
        """Write ``batch`` in one transaction (after the fencing check); on failure roll back."""
        try:
            conn = self._pg_writer
            if conn is None or conn.closed:
                conn = self._pg_writer = self._pg_connect(migrate=False)
            with conn.transaction(), conn.cursor() as cur:
                sessions = sorted({op.session_id for op in batch})
                cur.execute(
                    "SELECT session_id, epoch FROM leases WHERE session_id = ANY(%s)"
                    " ORDER BY session_id FOR SHARE",
                    (sessions,),
                )
                current = {row[0]: row[1] for row in cur.fetchall()}
                with self._lock:
                    held = {s: self._epochs.get(s) for s in sessions}
                fenced = {s for s in sessions if held[s] is None or current.get(s) != held[s]}
                if fenced:
                    raise _FencedError(fenced)
                session_rows = [
                    (op.session_id, op.seed_length, op.parent_session, op.created_at)
                    for op in batch
                    if isinstance(op, _SessionRow)
                ]
                if session_rows:
                    cur.executemany(
                        "INSERT INTO sessions(id, seed_length, parent_session, created_at)"
                        " VALUES (%s, %s, %s, %s)",
                        session_rows,
                    )
                event_rows = [
                    (op.session_id, op.seq, op.type, op.time, op.payload)
                    for op in batch
                    if isinstance(op, _EventRow)
                ]
                if event_rows:
                    cur.executemany(
                        "INSERT INTO events(session_id, seq, type, time, data)"
                        " VALUES (%s, %s, %s, %s, %s)",
                        event_rows,
                    )
                if self._fault_hook is not None:
                    self._fault_hook()
        except _FencedError as fenced:
            self._drop_fenced(batch, fenced.sessions)
            return self._write(batch) if batch else None
        except Exception as error:
            conn = self._pg_writer
            if conn is not None and (conn.closed or conn.broken):
                conn.close()
                self._pg_writer = None
            return commit_failed(error, len(batch))
        return None

    def _drop_fenced(self, batch: list[_Op], sessions: set[str]) -> None:
        """Discard every queued row of fenced-out sessions and fail their flushes."""
        with self._lock:
            dropped = [op for op in batch if op.session_id in sessions]
            batch[:] = [op for op in batch if op.session_id not in sessions]
            queued = [op for op in self._queue if op.session_id in sessions]
            self._queue = [op for op in self._queue if op.session_id not in sessions]
            self._queued_bytes -= sum(len(op.payload) for op in queued if isinstance(op, _EventRow))
            for session_id in sessions:
                self._unsynced.pop(session_id, None)
                self._next_seq.pop(session_id, None)
                self._forget_when_synced.discard(session_id)
                self._epochs.pop(session_id, None)
                self._fenced.add(session_id)
            keep: list[_Waiter] = []
            for waiter in self._waiters:
                if waiter.session_id is None or waiter.session_id in sessions:
                    self._rejected_waiters.append(waiter)
                else:
                    keep.append(waiter)
            self._waiters = keep
        _log.error(
            "fenced out of sessions %s: another process took them over; "
            "%d unwritten rows discarded",
            ", ".join(repr(s) for s in sorted(sessions)),
            len(dropped) + len(queued),
        )
        self._fenced_round |= sessions

    def _settle(
        self, batch: list[_Op], waiters: list[_Waiter], error: StoreWriteError | None
    ) -> list[_Outcome]:
        fenced, self._fenced_round = self._fenced_round, set()
        outcomes: list[_Outcome] = []
        if fenced:
            rejected = [w for w in waiters if w.session_id is None or w.session_id in fenced]
            waiters = [w for w in waiters if w not in rejected]
            with self._lock:
                rejected += self._rejected_waiters
                self._rejected_waiters = []
            for waiter in rejected:
                outcomes.append(
                    (waiter.future, self._fenced_error(waiter.session_id or ", ".join(fenced)))
                )
        return outcomes + super()._settle(batch, waiters, error)

    # --- connections and schema ------------------------------------------------

    def _pg_connect(self, *, migrate: bool, autocommit: bool = False) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self._url, autocommit=autocommit, connect_timeout=30)
        except psycopg.Error as error:
            raise StoreError(
                f"cannot connect to the session store {self._label} ({_category(error)})"
            ) from None
        try:
            conn.execute("SET synchronous_commit = on")
            if not autocommit:
                conn.commit()
            if migrate:
                self._pg_migrate(conn)
        except psycopg.Error as error:
            conn.close()
            raise StoreError(
                f"cannot open the session store {self._label} ({_category(error)})"
            ) from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _pg_migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Bring the schema to :data:`SCHEMA_VERSION` under a transaction-scoped advisory lock."""
        fsync = conn.execute("SHOW fsync").fetchone()
        if fsync is not None and fsync[0] != "on":
            _log.warning(
                "PostgreSQL at %s runs with fsync=%s: commits are not durable",
                self._label,
                fsync[0],
            )
        conn.commit()
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            version = self._pg_schema_version(conn)
            start = version
            while version < SCHEMA_VERSION:
                for statement in _MIGRATIONS[version]:
                    conn.execute(statement)
                version += 1
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (str(version),),
                )
        if start != SCHEMA_VERSION:
            _log.info("session store %s migrated to schema version %d", self._label, version)

    def _pg_schema_version(self, conn: psycopg.Connection[Any]) -> int:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema()"
            " AND table_name IN ('meta', 'sessions', 'events', 'leases')"
        ).fetchall()
        tables = {row[0] for row in rows}
        if "meta" not in tables:
            if tables:
                raise StoreError(
                    f"{self._label} has tables {sorted(tables)} but is not a dsh-schedule store"
                )
            return 0
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        value = None if row is None else row[0]
        if not (isinstance(value, str) and value.isascii() and value.isdigit()):
            raise StoreCorruptError(f"{self._label} has no valid schema_version")
        version = int(value)
        if version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"{self._label} has schema version {version}, newer than the {SCHEMA_VERSION} "
                "understood by this version of dsh-schedule; upgrade dsh-schedule to open it"
            )
        if version == SCHEMA_VERSION and not {"sessions", "events", "leases"} <= tables:
            raise StoreCorruptError(f"{self._label} is missing session tables")
        return version


def _category(error: BaseException) -> str:
    sqlstate = getattr(error, "sqlstate", None)
    name = type(error).__name__
    return f"{name} {sqlstate}" if isinstance(sqlstate, str) and sqlstate else name
