"""The shared persistence listener: session logs in PostgreSQL, group-committed and leased.

:class:`PostgresEventStore` is an :class:`~host_bridge.embedded.stores._writer.EventStore`,
a sibling of :class:`~host_bridge.embedded.stores._sqlite.SqliteEventStore` with
the same contract, write-behind queue, flush waiters and group-commit
bookkeeping: appends are queued in memory, one writer thread writes everything
queued for every session in one transaction per round and resolves the flush
futures it covers only after ``COMMIT`` returned with ``synchronous_commit = on``
(the WAL is flushed). Driver errors are named by their class and SQLSTATE
(``UniqueViolation 23505``), never by the server's message text.
Payloads are msgpack (see :mod:`host_bridge.embedded.codec`) in ``BYTEA``
columns; the schema is versioned and migrated on open inside a transaction
guarded by an advisory lock. Reads use a ``psycopg_pool`` connection pool.

Session ownership across processes: before a session can be created, resumed
or appended to, the store must hold its *lease* (:meth:`acquire_session`):

* a session-level advisory lock (``pg_try_advisory_lock(hashtextextended(id, 0))``)
  on one connection the store keeps open for its leases (its
  ``application_name`` names the store's owner, ``host:pid:tag``). A second
  process asking for the same session gets :class:`SessionLeaseError` naming
  the holder of the lock; when the owner process dies its connection closes
  and PostgreSQL releases the lock;
* a fencing epoch in ``leases(session_id, epoch, owner)``, bumped on every
  acquisition.

Every write round, and every :meth:`flush` of a leased session even when
nothing is queued for it, confirms the lease in the database before anything
is written or acknowledged: in the writer's transaction, the lease rows of the
round's sessions are locked (``FOR SHARE``, so nobody can take them over until
``COMMIT``), their epochs must still be the ones this store acquired, and the
lease connection that holds their advisory locks must still run (its backend pid
and start time in ``pg_stat_get_activity``: such locks go only with their
connection or by this store's own unlock, so a live lease connection still holds
them, and a dead one means every lease is lost; the check costs the same
whatever the number of leases, unlike a scan of ``pg_locks``). Flushes
that arrive together share one round, so the check costs one round trip for
all of them. A session that fails the check is *lost* (a network cut, a
failover or a server restart closed the lease connection, and another process
may own it now): its queued rows are discarded and never written, the flush
resolves ``False`` (not an exception), the loss is logged once at error level,
:meth:`lease_lost` (and ``EmbeddedSession.lease_lost``) report it, and every
later append is refused with :class:`SessionLeaseError`. The lease is not
renewed behind the host's back: the session must be detached and resumed to
be taken again. New sessions are leased on a new lease connection.

Rows that can never be written (an integrity error) are isolated exactly as on
SQLite: the other sessions of the round still commit. (Distinct ids with the
same 64-bit hash share a lock: the second one is refused while the first is
live elsewhere.)

Schema (version :data:`PG_SCHEMA_VERSION`)::

    meta(key TEXT PRIMARY KEY, value TEXT)                 -- schema_version
    sessions(id TEXT PRIMARY KEY, seed_length BIGINT, parent_session TEXT, created_at BIGINT)
    events(session_id TEXT, seq BIGINT, type TEXT, time BIGINT, data BYTEA,
           PRIMARY KEY(session_id, seq))
    leases(session_id TEXT PRIMARY KEY, epoch BIGINT, owner TEXT, acquired_at TIMESTAMPTZ)
    due_index(session_id TEXT PRIMARY KEY, due_ms BIGINT NOT NULL,     -- v2: the due index
              schedule_ms BIGINT, inbox_ms BIGINT)                     -- (see due_index.py)

Cold sessions are claimed for activation with :meth:`PostgresEventStore.claim_due_session`:
a short transaction locks the session's index row ``FOR UPDATE SKIP LOCKED`` (two
hosts never claim one row at the same moment; each skips to other work) and takes
the session's lease inside it; the lease is what excludes another owner.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import psycopg_pool

from host_bridge.embedded.paths import is_postgres_url, redact_url
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
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
)
from host_bridge.embedded.stores._reads import ReadQueries, StoreReadsBase
from host_bridge.embedded.stores._rows import (
    CommitResult,
    EventRow,
    Loss,
    Op,
    SessionRow,
    Waiter,
    check_id,
    is_storable_id,
    show_id,
    write_due_changes,
)
from host_bridge.embedded.stores._writer import CLOSE_TIMEOUT, EventStore, refuses_claim_clock

__all__ = [
    "PG_SCHEMA_VERSION",
    "PostgresEventStore",
    "PostgresStoreReader",
    "SessionLeaseError",
    "is_postgres_url",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

PG_SCHEMA_VERSION = 2
"""The PostgreSQL schema version this code reads and writes."""

DUE_INDEX_SCHEMA_VERSION = 2
"""The first PostgreSQL schema version with the ``due_index`` table."""

_MIGRATION_LOCK = 0x64736873  # advisory lock key serialising migrations ("dshs")

_LEASE_APP = "dsh-lease "
"""``application_name`` prefix of a store's lease connection; the rest names its owner."""

_ROW_ERROR_CLASSES = ("22", "23", "54")
"""SQLSTATE classes of rows that can never be written: data exception, integrity, limits."""

_KEY_OF_LOCK = "((k.classid::bigint << 32) | k.objid::bigint)"
"""The bigint key of an advisory lock row ``k`` of ``pg_locks`` (``objsubid = 1``)."""

_ADVISORY_HERE = (
    "k.locktype = 'advisory' AND k.granted AND k.objsubid = 1"
    " AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)

_LEASE_READ = (
    "SELECT l.session_id, l.epoch,"
    " EXISTS (SELECT 1 FROM pg_stat_get_activity(%s) a WHERE a.backend_start = %s)"
    " FROM leases l WHERE l.session_id = ANY(%s) ORDER BY l.session_id"
)
"""Per session: its epoch, and whether the lease connection (backend pid and start time)
still runs. The advisory locks of a session-level connection go only with it (or when
this store unlocks them), so a live lease connection still holds every lease taken on it.
One statement: a preflight with nothing to write runs it alone."""

_LEASE_CHECK = _LEASE_READ + " FOR SHARE OF l"
""":data:`_LEASE_READ` in a write transaction: the lease rows stay locked until it commits."""

_LOCK_HOLDER = (
    "SELECT k.pid, a.application_name FROM pg_locks k"
    " LEFT JOIN pg_stat_activity a ON a.pid = k.pid"
    f" WHERE {_ADVISORY_HERE} AND {_KEY_OF_LOCK} = hashtextextended(%s, 0) LIMIT 1"
)


def _build_due_index(conn: psycopg.Connection[Any]) -> None:
    """Fill ``due_index`` from the stored logs (inside the migrating or reindexing transaction)."""
    with conn.cursor(name="dsh_due_build") as rows:
        rows.itersize = 2000
        rows.execute(
            "SELECT e.session_id, s.seed_length, e.seq, e.type, e.time, e.data"
            " FROM events e JOIN sessions s ON s.id = e.session_id"
            " WHERE e.type = ANY(%s) ORDER BY e.session_id, e.seq",
            (list(WAKE_EVENT_TYPES),),
        )
        entries = [
            (session_id, entry.due_ms, entry.schedule_ms, entry.inbox_ms)
            for session_id, entry in project_logs(
                (sid, seed, seq, type_, time_, bytes(data))
                for sid, seed, seq, type_, time_, data in rows
            )
        ]
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO due_index(session_id, due_ms, schedule_ms, inbox_ms)"
            " VALUES (%s, %s, %s, %s)",
            entries,
        )


_PG_TABLES = frozenset({"sessions", "events", "leases", "due_index"})
"""The tables besides ``meta`` that a store of :data:`PG_SCHEMA_VERSION` has."""

_DUE_HELD = (
    "WITH held AS MATERIALIZED ("
    f" SELECT {_KEY_OF_LOCK} AS key FROM pg_locks k WHERE {_ADVISORY_HERE})"
    " SELECT d.session_id, d.due_ms FROM due_index d"
    " WHERE d.due_ms <= %s"
    " AND NOT EXISTS (SELECT 1 FROM held WHERE held.key = hashtextextended(d.session_id, 0))"
    " ORDER BY d.due_ms, d.session_id LIMIT %s"
)
"""Due sessions whose lease nobody holds (one snapshot of the advisory locks per query)."""

_MIGRATIONS: dict[int, tuple[str | Callable[[psycopg.Connection[Any]], None], ...]] = {
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
    1: (
        "CREATE TABLE due_index("
        " session_id TEXT PRIMARY KEY,"
        " due_ms BIGINT NOT NULL,"
        " schedule_ms BIGINT,"
        " inbox_ms BIGINT)",
        "CREATE INDEX due_index_by_due ON due_index(due_ms, session_id)",
        _build_due_index,
    ),
}
"""Statements that migrate schema version N to N+1, keyed by N (0 is an empty database)."""

_T = TypeVar("_T")


class PostgresEventStore(EventStore):
    """Durable, leased session logs in a PostgreSQL database shared by many host processes.

    ``url`` is a libpq connection URL (``postgresql://user@host:port/db``).
    ``pool_size`` bounds the read pool. ``lease_wait`` is how many seconds
    :meth:`acquire_session` waits for a lease held elsewhere before refusing
    (0: refuse at once). ``fault_hook`` is the same test seam as SQLite's: it is
    called inside every writer transaction that writes rows, just before ``COMMIT``.
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
        super().__init__(redact_url(url), fault_hook)
        self._lease_wait = lease_wait
        self._lease_checks = 0

        self._pg_writer: psycopg.Connection[Any] | None = self._pg_connect(migrate=True)
        self._lease_conn: psycopg.Connection[Any] | None = None
        self._lease_pid = 0  # backend pid of the lease connection (holds the advisory locks)
        self._lease_backend: tuple[int, Any] = (0, None)  # its pid and backend start time
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        try:
            self._open_lease_connection()
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
        self._start_writer("dsh-pg-writer")
        _log.debug("session store open at %s", self._label)

    # --- properties ------------------------------------------------------------

    @property
    def url(self) -> str:
        """The connection URL without its password."""
        return self._label

    @property
    def lease_checks(self) -> int:
        """How many writer transactions confirmed leases in the database so far."""
        with self._lock:
            return self._lease_checks

    @property
    def lease_backend_pid(self) -> int:
        """The server process id of the connection holding this store's advisory locks."""
        return self._lease_pid

    # --- leases ----------------------------------------------------------------

    def acquire_session(self, session_id: str) -> int:
        """Take the lease of ``session_id`` for this store; returns the new fencing epoch.

        Raises :class:`SessionLeaseError` naming the holder when another process
        holds it (after waiting ``lease_wait`` seconds) and :class:`StoreError`
        when the database cannot be reached. A lease connection that the server
        closed is opened again first (every lease it held is lost already).
        """
        if not is_storable_id(session_id):
            raise StoreError(f"session id {show_id(str(session_id))} cannot be stored")
        with self._lease_lock:
            with self._lock:
                self._check_open()
                if session_id in self._leases:
                    raise SessionLeaseError(
                        f"session {show_id(session_id)} is already leased here",
                        session_id=session_id,
                        holder=self._owner,
                    )
            try:
                epoch = self._take_lease(session_id)
            except psycopg.OperationalError:
                conn = self._lease_conn
                if conn is not None and not (conn.closed or conn.broken):
                    raise StoreError(
                        f"cannot take the lease of session {show_id(session_id)}"
                    ) from None
                _log.warning("the lease connection of %s was lost; opening a new one", self._label)
                try:
                    self._open_lease_connection()
                    epoch = self._take_lease(session_id)
                except psycopg.Error as error:
                    raise StoreError(
                        f"cannot take the lease of session {show_id(session_id)}"
                        f" ({_category(error)})"
                    ) from None
            except psycopg.Error as error:
                raise StoreError(
                    f"cannot take the lease of session {show_id(session_id)} ({_category(error)})"
                ) from None
            with self._lock:
                self._leases[session_id] = epoch
                self._lost.pop(session_id, None)
        _log.debug("leased session %r (epoch %d)", session_id, epoch)
        return epoch

    def _take_lease(self, session_id: str) -> int:
        """Lock ``session_id`` on the lease connection and bump its epoch (``_lease_lock`` held)."""
        conn = self._lease_conn
        if conn is None or conn.closed:
            raise StoreClosedError(f"the session store {self._label} is closed")
        if self._lease_wait > 0:
            conn.execute(f"SET lock_timeout = {int(self._lease_wait * 1000):d}")
            try:
                conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (session_id,))
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
                f"session {show_id(session_id)} is live in another process"
                f"{f' (held by {holder})' if holder else ''}; it cannot be resumed here "
                "until that process detaches it or exits",
                session_id=session_id,
                holder=holder,
            )
        row = conn.execute(
            "INSERT INTO leases(session_id, epoch, owner, acquired_at)"
            " VALUES (%s, 1, %s, now())"
            " ON CONFLICT (session_id) DO UPDATE"
            " SET epoch = leases.epoch + 1, owner = EXCLUDED.owner, acquired_at = now()"
            " RETURNING epoch",
            (session_id, self._owner),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def _open_lease_connection(self) -> None:
        """(Re)open the connection that holds this store's advisory locks (``_lease_lock`` held).

        Replacing a dead one loses every lease taken on it, here and now: the
        liveness check of later rounds looks at the new connection.
        """
        old = self._lease_conn
        if old is not None:
            old.close()
            dropped: list[tuple[Loss, int]] = []
            with self._lock:
                for session_id in [s for s in self._leases if s not in self._lost]:
                    loss = _lease_loss(session_id, None, None, False)
                    dropped.append((loss, self._lose(loss) or 0))
            for loss, rows in dropped:
                _log.error("%s (%d rows dropped)", loss.message, rows)
        self._lease_conn = self._pg_connect(
            migrate=False, autocommit=True, application_name=(_LEASE_APP + self._owner)[:63]
        )
        row = self._lease_conn.execute(
            "SELECT pid, backend_start FROM pg_stat_get_activity(pg_backend_pid())"
        ).fetchone()
        assert row is not None
        self._lease_pid = int(row[0])
        self._lease_backend = (int(row[0]), row[1])

    def _lease_holder(self, conn: psycopg.Connection[Any], session_id: str) -> str | None:
        """Who holds ``session_id``'s advisory lock now: the owner named by its connection."""
        row = conn.execute(_LOCK_HOLDER, (session_id,)).fetchone()
        if row is None:
            return None
        name = row[1]
        if isinstance(name, str) and name.startswith(_LEASE_APP):
            return name[len(_LEASE_APP) :]
        return f"PostgreSQL backend {row[0]}"

    def _unlock_session(self, session_id: str) -> None:
        """Drop the advisory lock (``_lease_lock`` held) unless the lease was lost with it."""
        with self._lock:
            loss = self._lost.get(session_id)
        conn = self._lease_conn
        if (loss is not None and loss.kind == "lease") or conn is None or conn.closed:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (session_id,))
        except psycopg.Error as error:
            _log.warning(
                "releasing the lease of session %r failed (%s)", session_id, _category(error)
            )

    def _ensure_lease(self, session_id: str) -> None:
        """Raise :class:`SessionLeaseError` unless this store holds ``session_id``'s lease."""
        with self._lock:
            self._check_not_lost(session_id)
            if session_id in self._leases:
                return
        raise SessionLeaseError(
            f"this process does not hold the lease of session {show_id(str(session_id))}; "
            "acquire it before writing",
            session_id=session_id,
        )

    def _needs_round(self, session_id: str | None) -> bool:
        """Lock held: a flush of a leased session confirms the lease in the database."""
        return session_id is not None and session_id in self._leases

    def _round_checks(self, waiters: list[Waiter]) -> set[str]:
        with self._lock:
            return {
                w.session_id
                for w in waiters
                if w.session_id is not None
                and w.session_id in self._leases
                and w.session_id not in self._lost
            }

    def _writer_done(self) -> None:
        """The writer stopped: the leases go with the lease connection (see :meth:`close`)."""
        with self._lock:
            self._leases.clear()

    # --- close -----------------------------------------------------------------

    def close(self, timeout: float | None = CLOSE_TIMEOUT) -> None:
        """Write what is queued, stop the writer, drop every lease and close the connections.

        Bounded like :meth:`EventStore.close`: a writer still inside its
        transaction after ``timeout`` seconds is left to finish on its own (its
        connection stays open until it does, and its lease rows stay share-locked,
        so a store taking over one of its sessions waits for that transaction);
        the lease connection and the read pool are closed at once, so the
        writer's next lease check finds its leases gone and discards the rows
        it still holds queued.
        """
        super().close(timeout)

    def _close_connections(self) -> None:
        """Close the lease connection and the read pool; the writer's once it stopped."""
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
        return not self._thread.is_alive()

    # --- reads -----------------------------------------------------------------

    def _reads(self) -> ReadQueries[psycopg.Connection[Any]]:
        return _POSTGRES_READS

    def _read(self, query: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        return self._query(query)

    def _stored_length(self, session_id: str) -> int | None:
        if not is_storable_id(session_id):
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
            raise StoreCorruptError(
                f"session {show_id(session_id)} has a gap in its stored events",
                session_id=session_id,
            )
        return int(count)

    def _query(self, query: Callable[[psycopg.Connection[Any]], _T], doing: str = "") -> _T:
        """Run ``query`` on a pooled connection (``doing``: what errors say it could not do)."""
        pool = self._pool
        if pool is None:
            raise StoreClosedError(f"the session store {self._label} is closed")
        try:
            with pool.connection(timeout=30) as conn:
                return query(conn)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as error:
            doing = doing or f"read the session store {self._label}"
            raise StoreError(f"cannot {doing} ({_category(error)})") from None

    # --- writer thread ---------------------------------------------------------

    def _commit(self, rows: list[Op], check: set[str]) -> CommitResult:
        """One writer transaction: confirm the leases, then write the rows of sessions still held.

        The leases of every session in ``rows`` and in ``check`` are confirmed
        first: the epoch in ``leases`` must still be the one this store took
        (the rows stay share-locked until ``COMMIT``, so nobody can take the
        session over meanwhile) and the advisory lock must still be held by
        this store's lease connection. Sessions that fail either are lost
        (``"lease"``) and their rows are not written.
        """
        sessions = sorted({op.session_id for op in rows} | check)
        lost: dict[str, Loss] = {}
        try:
            conn = self._pg_writer
            if conn is None or conn.closed:
                conn = self._pg_writer = self._pg_connect(migrate=False)
            if not rows:  # only preflights: one statement, one round trip, nothing to lock
                conn.autocommit = True
                try:
                    found = conn.execute(_LEASE_READ, (*self._lease_backend, sessions)).fetchall()
                finally:
                    conn.autocommit = False
                lost = self._confirm(sessions, found)
                return None, lost
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(_LEASE_CHECK, (*self._lease_backend, sessions))
                lost = self._confirm(sessions, cur.fetchall())
                rows = [op for op in rows if op.session_id not in lost]
                session_rows = [
                    (op.session_id, op.seed_length, op.parent_session, op.created_at)
                    for op in rows
                    if isinstance(op, SessionRow)
                ]
                if session_rows:
                    cur.executemany(
                        "INSERT INTO sessions(id, seed_length, parent_session, created_at)"
                        " VALUES (%s, %s, %s, %s)",
                        session_rows,
                    )
                event_rows = [
                    (op.session_id, op.seq, op.type, op.time, op.payload)
                    for op in rows
                    if isinstance(op, EventRow)
                ]
                if event_rows:
                    cur.executemany(
                        "INSERT INTO events(session_id, seq, type, time, data)"
                        " VALUES (%s, %s, %s, %s, %s)",
                        event_rows,
                    )
                plan = self._plan_due_index(rows, lambda sid: _read_due_state(cur, sid))
                write_due_changes(cur, plan.changes, "%s")
                if self._fault_hook is not None and rows:
                    self._fault_hook()
        except Exception as error:
            conn = self._pg_writer
            if conn is not None and (conn.closed or conn.broken):
                conn.close()
                self._pg_writer = None
            return error, lost
        self._due_committed(plan)
        return None, lost

    def _confirm(self, sessions: list[str], found: list[Any]) -> dict[str, Loss]:
        """The sessions whose lease the rows ``found`` by the lease check do not confirm."""
        current = {row[0]: (row[1], bool(row[2])) for row in found}
        lost: dict[str, Loss] = {}
        with self._lock:
            held = {s: self._leases.get(s) for s in sessions}
            self._lease_checks += 1
        for session_id in sessions:
            epoch, locked = current.get(session_id, (None, False))
            if held[session_id] is not None and epoch == held[session_id] and locked:
                continue
            lost[session_id] = _lease_loss(session_id, held[session_id], epoch, locked)
        return lost

    def _is_row_conflict(self, error: BaseException) -> bool:
        sqlstate = getattr(error, "sqlstate", None)
        return isinstance(sqlstate, str) and sqlstate[:2] in _ROW_ERROR_CLASSES

    def _category(self, error: BaseException) -> str:
        """The driver's error class and SQLSTATE (``UniqueViolation 23505``); never its text."""
        return _category(error)

    # --- due index -------------------------------------------------------------

    def due_sessions(self, until_ms: int | None, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` ``(session_id, due_ms)`` of sessions whose lease nobody holds.

        Earliest first, due at or before ``until_ms`` (any time when ``None``).
        Sessions leased by any process (this one included) are skipped, read
        from one snapshot of the server's advisory locks.
        """
        bound = until_ms if until_ms is not None else 2**63 - 1
        rows = self._query(lambda conn: conn.execute(_DUE_HELD, (bound, limit)).fetchall())
        return [(str(row[0]), int(row[1])) for row in rows]

    def next_due(self) -> int | None:
        """The earliest ``due_ms`` among sessions whose lease nobody holds."""
        first = self.due_sessions(None, 1)
        return first[0][1] if first else None

    def claim_due_session(self, session_id: str, now_ms: int) -> bool:
        """Take ``session_id``'s lease to deliver what is due in it; False when not for us.

        In one short transaction: lock the session's index row ``FOR UPDATE
        SKIP LOCKED`` (a row another host is claiming right now is skipped, not
        waited for), check that it is due at ``now_ms`` (or unsound, see
        :attr:`IndexRow.wake_ms`: its log decides), and take the lease
        (:meth:`acquire_session`), which stays held after the transaction.
        False when the row is locked, missing or not due, or the lease is held elsewhere,
        and, with nothing taken, for a ``now_ms`` that is not an ``int``. When
        anything raises after the lease was taken (the transaction's ``COMMIT``,
        giving the connection back) the lease is given back.
        """
        if not is_storable_id(session_id) or refuses_claim_clock(session_id, now_ms):
            return False

        def claim(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                row = conn.execute(
                    "SELECT due_ms, schedule_ms, inbox_ms FROM due_index WHERE session_id = %s"
                    " FOR UPDATE SKIP LOCKED",
                    (session_id,),
                ).fetchone()
                if row is None or IndexRow(*row).wake_ms > now_ms:
                    return False
                try:
                    self.acquire_session(session_id)
                except SessionLeaseError:
                    return False
                return True

        with self._claiming(session_id):
            return self._query(claim)

    def reindex(self) -> int:
        """Rebuild the due index from the stored logs in one transaction; the rows written.

        The transaction locks ``due_index`` against every writer's update
        first, so no commit can fall between reading the logs and replacing the index.
        """
        with self._lock:
            self._check_open()
        try:
            with psycopg.connect(self._url, connect_timeout=30) as conn, conn.transaction():
                conn.execute("LOCK TABLE due_index IN SHARE ROW EXCLUSIVE MODE")
                conn.execute("DELETE FROM due_index")
                _build_due_index(conn)
                row = conn.execute("SELECT COUNT(*) FROM due_index").fetchone()
        except psycopg.Error as error:
            raise StoreError(
                f"cannot rebuild the due index of {self._label} ({_category(error)})"
            ) from None
        self._due.clear()
        count = int(row[0]) if row is not None else 0
        _log.info("rebuilt the due index of %s: %d sessions", self._label, count)
        return count

    def reindex_session(self, session_id: str) -> DueEntry | None:
        """Rewrite one session's due index row from its stored log, in one transaction.

        Returns the row written (``None``: the row was deleted, nothing is due
        or the session is not stored). The transaction is ``REPEATABLE READ``:
        a commit of the session by another host after its snapshot makes it
        fail rather than write a stale row.
        """
        check_id(session_id, "session id")

        def rewrite(conn: psycopg.Connection[Any]) -> DueEntry | None:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                stored = _read_due_state(cur, session_id)
                entry = None if stored is None else project_session(stored[0], stored[2]).entry()
                write_due_changes(cur, {session_id: entry}, "%s")
            return entry

        doing = f"rewrite the due index row of session {show_id(session_id)} in {self._label}"
        entry = self._query(rewrite, doing)
        self._due.forget(session_id)
        return entry

    # --- connections and schema ------------------------------------------------

    def _pg_connect(
        self, *, migrate: bool, autocommit: bool = False, application_name: str = "dsh-schedule"
    ) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(
                self._url,
                autocommit=autocommit,
                connect_timeout=30,
                application_name=application_name,
            )
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
        """Bring the schema to :data:`PG_SCHEMA_VERSION` under a transaction-scoped lock."""
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
            version = _pg_schema_version(conn, self._label)
            start = version
            while version < PG_SCHEMA_VERSION:
                for step in _MIGRATIONS[version]:
                    if isinstance(step, str):
                        conn.execute(step)
                    else:
                        step(conn)
                version += 1
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (str(version),),
                )
        if start != PG_SCHEMA_VERSION:
            _log.info("session store %s migrated to schema version %d", self._label, version)


class PostgresStoreReader(StoreReadsBase["psycopg.Connection[Any]"]):
    """Durably stored sessions of a PostgreSQL store, read without writing anything.

    One connection in read-only mode (``default_transaction_read_only``): no
    schema is created or migrated, no lease connection is opened, no writer
    thread runs, so it reads while host processes write to the same database.
    Raises on open: :class:`StoreMissingError` when the database holds no
    session store (none of its tables), :class:`StoreError` when the server
    cannot be reached or the tables belong to another application, and
    :class:`StoreCorruptError` / :class:`StoreVersionError` like the writable store.
    """

    _due_index_version = DUE_INDEX_SCHEMA_VERSION

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        if not is_postgres_url(url):
            raise StoreError("a PostgreSQL store needs a postgresql:// URL")
        self._label = redact_url(url)
        self._lock = threading.Lock()
        try:
            conn = psycopg.connect(
                url,
                autocommit=True,
                connect_timeout=connect_timeout,
                application_name="dsh-schedule-reader",
            )
        except psycopg.Error as error:
            raise StoreError(
                f"cannot connect to the session store {self._label} ({_category(error)})"
            ) from None
        try:
            conn.execute("SET default_transaction_read_only = on")
            version = _pg_schema_version(conn, self._label)
        except psycopg.Error as error:
            conn.close()
            raise StoreError(
                f"cannot open the session store {self._label} ({_category(error)})"
            ) from None
        except BaseException:
            conn.close()
            raise
        if version == 0:
            conn.close()
            raise StoreMissingError(
                f"there is no session store in {self._label} (the database has none of its tables)",
                location=self._label,
                reason="the database has none of its tables",
            )
        self._version = version
        self._conn = conn
        _log.debug("session store %s open read-only", self._label)

    def _reads(self) -> ReadQueries[psycopg.Connection[Any]]:
        return _POSTGRES_READS

    def _read(self, query: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreClosedError(f"the session store {self._label} is closed")
            try:
                return query(conn)
            except psycopg.Error as error:
                raise StoreError(
                    f"cannot read the session store {self._label} ({_category(error)})"
                ) from None


def _select_index_rows(conn: psycopg.Connection[Any]) -> dict[str, IndexRow]:
    """Every due index row as stored, by session id."""
    rows = conn.execute("SELECT session_id, due_ms, schedule_ms, inbox_ms FROM due_index")
    return {row[0]: IndexRow(*row[1:]) for row in rows.fetchall()}


def _select_index_row(conn: psycopg.Connection[Any], session_id: str) -> IndexRow | None:
    """A session's due index row as stored, or None."""
    row = conn.execute(
        "SELECT due_ms, schedule_ms, inbox_ms FROM due_index WHERE session_id = %s", (session_id,)
    ).fetchone()
    return None if row is None else IndexRow(*row)


def _select_index_suspects(conn: psycopg.Connection[Any]) -> list[tuple[str, IndexRow]]:
    """The due index rows whose ``due_ms`` is not the earlier of the other two (one scan).

    The columns are ``BIGINT``: a row is never unreadable, only inconsistent.
    ``LEAST`` ignores NULLs and is NULL when both are: a row with neither is found too.
    """
    rows = conn.execute(
        "SELECT session_id, due_ms, schedule_ms, inbox_ms FROM due_index"
        " WHERE due_ms IS DISTINCT FROM LEAST(schedule_ms, inbox_ms)"
    )
    return [(row[0], IndexRow(*row[1:])) for row in rows.fetchall()]


def _select_indexed(
    conn: psycopg.Connection[Any], session_id: str
) -> tuple[Any, list[tuple[Any, ...]], IndexRow | None]:
    """A session's header row, event rows (payloads as bytes) and due index row, one snapshot."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        head = conn.execute(
            "SELECT seed_length, parent_session FROM sessions WHERE id = %s", (session_id,)
        ).fetchone()
        rows = conn.execute(
            "SELECT seq, type, time, data FROM events WHERE session_id = %s ORDER BY seq",
            (session_id,),
        ).fetchall()
        due = _select_index_row(conn, session_id)
    blobs = [(seq, type_, time_, bytes(data)) for seq, type_, time_, data in rows]
    return head, blobs if head is not None else [], due


def _pg_schema_version(conn: psycopg.Connection[Any], label: str) -> int:
    """The schema version of the database on ``conn``; 0 when it has none of the tables.

    Only reads. Raises like :func:`host_bridge.embedded.stores._sqlite.schema_version`.
    """
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = current_schema()"
        " AND table_name IN ('meta', 'sessions', 'events', 'leases', 'due_index')"
    ).fetchall()
    tables = {row[0] for row in rows}
    if "meta" not in tables:
        if tables:
            raise StoreError(f"{label} has tables {sorted(tables)} but is not a dsh-schedule store")
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    value = None if row is None else row[0]
    if not (isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 9):
        raise StoreCorruptError(f"{label} has no valid schema_version")
    version = int(value)
    if version > PG_SCHEMA_VERSION:
        raise StoreVersionError(
            f"{label} has schema version {version}, newer than the {PG_SCHEMA_VERSION} "
            "understood by this version of dsh-schedule; upgrade dsh-schedule to open it"
        )
    if version == PG_SCHEMA_VERSION and not tables >= _PG_TABLES:
        raise StoreCorruptError(f"{label} is missing session tables")
    return version


def _select_session_ids(conn: psycopg.Connection[Any], label: str) -> list[str]:
    """Every stored session id, sorted; a non-text id is corruption."""
    ids = [row[0] for row in conn.execute("SELECT id FROM sessions").fetchall()]
    if not all(isinstance(session_id, str) for session_id in ids):
        raise StoreCorruptError(f"{label}: the sessions table holds a non-text id")
    return sorted(ids)


def _select_header(conn: psycopg.Connection[Any], session_id: str) -> tuple[Any, ...] | None:
    """The ``(seed_length, parent_session)`` row of a session, or None."""
    row = conn.execute(
        "SELECT seed_length, parent_session FROM sessions WHERE id = %s", (session_id,)
    ).fetchone()
    return None if row is None else tuple(row)


def _select_session(
    conn: psycopg.Connection[Any], session_id: str
) -> tuple[tuple[Any, ...] | None, list[tuple[Any, ...]]]:
    """A session's header row and event rows (payloads as bytes) in one read-only snapshot."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        head = _select_header(conn, session_id)
        rows = (
            []
            if head is None
            else conn.execute(
                "SELECT seq, type, time, data FROM events WHERE session_id = %s ORDER BY seq",
                (session_id,),
            ).fetchall()
        )
    return head, [(seq, type_, time_, bytes(data)) for seq, type_, time_, data in rows]


def _read_due_state(
    cur: psycopg.Cursor[Any], session_id: str
) -> tuple[int | None, int, list[StoredRow]] | None:
    """A session's seed length, next seq and wake-relevant rows (in the writer's transaction)."""
    head = cur.execute("SELECT seed_length FROM sessions WHERE id = %s", (session_id,)).fetchone()
    if head is None:
        return None
    seed = int(head[0]) if head[0] is not None else 0
    count = cur.execute(
        "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE session_id = %s", (session_id,)
    ).fetchone()
    rows = cur.execute(
        "SELECT seq, type, time, data FROM events WHERE session_id = %s AND seq >= %s"
        " AND type = ANY(%s) ORDER BY seq",
        (session_id, seed, list(WAKE_EVENT_TYPES)),
    ).fetchall()
    next_seq = int(count[0]) if count is not None else 0
    return seed, next_seq, [(int(r[0]), str(r[1]), int(r[2]), bytes(r[3])) for r in rows]


def _lease_loss(session_id: str, held: int | None, epoch: int | None, locked: bool) -> Loss:
    """The loss of a lease the writer could not confirm, with the reason for operators."""
    if held is not None and epoch is not None and epoch != held:
        reason = f"another process took it over (epoch {held} became {epoch})"
    elif not locked:
        reason = "its lease connection was closed (a network cut, failover or restart)"
    else:
        reason = "its lease row is gone"  # (``held`` None: released meanwhile, see release_session)
    return Loss(
        session_id,
        "lease",
        f"lost the lease of session {show_id(session_id)}: {reason}; its unwritten events "
        "were discarded and it accepts no more writes here until it is taken again",
    )


def _category(error: BaseException) -> str:
    sqlstate = getattr(error, "sqlstate", None)
    name = type(error).__name__
    return f"{name} {sqlstate}" if isinstance(sqlstate, str) and sqlstate else name


_POSTGRES_READS: ReadQueries[psycopg.Connection[Any]] = ReadQueries(
    session_ids=_select_session_ids,
    header=_select_header,
    session=_select_session,
    index_rows=_select_index_rows,
    index_row=_select_index_row,
    indexed=_select_indexed,
    index_suspects=_select_index_suspects,
)
