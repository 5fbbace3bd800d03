"""PostgreSQL's recorder, store and reader: session logs shared by many hosts, leased.

:class:`PostgresRecorder` is the backend: each round confirms the leases of
its sessions (fencing epochs, ``FOR SHARE``) and writes their rows in one
transaction, committed with ``synchronous_commit = on``; driver errors are
named by class and SQLSTATE, never the server's text. :class:`PostgresEventStore`
composes it with the writer; :class:`PostgresStoreReader` reads without
writing. Leases and claims: see docs/storage.md.

Schema (version :data:`PG_SCHEMA_VERSION`)::

    meta(key TEXT PRIMARY KEY, value TEXT)                 -- schema_version, zone_data
    sessions(id TEXT PRIMARY KEY, seed_length BIGINT, parent_session TEXT, created_at BIGINT)
    events(session_id TEXT, seq BIGINT, type TEXT, time BIGINT, data BYTEA,
           PRIMARY KEY(session_id, seq))
    leases(session_id TEXT PRIMARY KEY, epoch BIGINT, owner TEXT, acquired_at TIMESTAMPTZ)
    due_index(session_id TEXT PRIMARY KEY, due_ms BIGINT NOT NULL,     -- v2: the due index
              schedule_ms BIGINT, inbox_ms BIGINT)
    schedule_checkpoints(session_id TEXT PRIMARY KEY,                  -- v3: each session's
                         next_seq BIGINT NOT NULL, state BYTEA NOT NULL) --   projection state
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
import psycopg_pool

from host_bridge.embedded.paths import is_postgres_url, redact_url
from host_bridge.embedded.stores._due import DEFAULT_CACHE_SESSIONS, DueEntry, IndexRow
from host_bridge.embedded.stores._errors import (
    SessionLeaseError,
    StoreClosedError,
    StoreError,
    StoreMissingError,
)
from host_bridge.embedded.stores._reads import OneConnectionReader, ReadQueries, sql_reads
from host_bridge.embedded.stores._recorder import Epochs, LoseHeld, SideWrite, Stage, TakeMany
from host_bridge.embedded.stores._rows import CommitResult, Loss, Op, is_storable_id, show_id
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
    refresh_zone_data,
    write_zone_stamp,
    zone_data_version,
)

__all__ = [
    "PG_SCHEMA_VERSION",
    "PostgresEventStore",
    "PostgresRecorder",
    "PostgresStoreReader",
    "want_key",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

PG_SCHEMA_VERSION = 3
"""The PostgreSQL schema version this code reads and writes."""

DUE_INDEX_SCHEMA_VERSION = 2
"""The first PostgreSQL schema version with the ``due_index`` table."""

CHECKPOINT_SCHEMA_VERSION = 3
"""The first PostgreSQL schema version with the ``schedule_checkpoints`` table."""

_MIGRATION_LOCK = 0x64736873  # advisory lock key serialising migrations ("dshs")

_WANT_CLASS = 0x64736877  # first key of the two-key advisory locks that want a session ("dshw")
"""Wanting a session: ``pg_advisory_lock_shared(_WANT_CLASS, want_key(id))`` on the lease
connection. Two int4 keys are another key space than the leases' one bigint key."""

_WANTED = (
    "SELECT DISTINCT k.objid::bigint FROM pg_locks k"
    " WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 2"
    " AND k.classid = %s::bigint::oid AND k.objid::bigint = ANY(%s::bigint[]) AND k.pid <> %s"
    " AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
"""Which of the given want keys another connection holds (one snapshot of ``pg_locks``)."""

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
"""Per session: its epoch, and whether the lease connection (backend pid and start time),
which holds its advisory lock, still runs (see docs/storage.md)."""

_LEASE_CHECK = _LEASE_READ + " FOR SHARE OF l"
""":data:`_LEASE_READ` in a write transaction: the lease rows stay locked until it commits."""

_LOCK_HOLDER = (
    "SELECT k.pid, a.application_name FROM pg_locks k"
    " LEFT JOIN pg_stat_activity a ON a.pid = k.pid"
    f" WHERE {_ADVISORY_HERE} AND {_KEY_OF_LOCK} = hashtextextended(%s, 0) LIMIT 1"
)


def want_key(session_id: str) -> int:
    """The second key of ``session_id``'s want lock: 31 bits of BLAKE2b of its UTF-8 id.

    Two sessions on one key only make a holder think the other one is wanted
    too: it lets that one go early, as if its quiet period had ended.
    """
    digest = hashlib.blake2b(
        session_id.encode("utf-8", "surrogatepass"), digest_size=4, person=b"dsh-want"
    ).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF


def _build_due_index(conn: psycopg.Connection[Any]) -> None:
    """Fill ``due_index`` from the stored logs (inside the migrating or reindexing transaction)."""
    with conn.cursor(name="dsh_due_build") as rows, conn.cursor() as cur:
        rows.itersize = 2000
        build_due_index(rows, cur, "%s")


def _build_checkpoints(conn: psycopg.Connection[Any]) -> None:
    """Write every session's schedule checkpoint from its log (in the caller's transaction)."""
    with conn.cursor(name="dsh_checkpoint_build") as rows, conn.cursor() as cur:
        rows.itersize = 2000
        build_checkpoints(rows, cur, "%s")


def _rebuild_projections(conn: psycopg.Connection[Any]) -> int:
    """Rebuild the due index and the schedule checkpoints from the logs in the caller's
    transaction, both tables locked against writers first; the index rows written."""
    conn.execute("LOCK TABLE due_index, schedule_checkpoints IN SHARE ROW EXCLUSIVE MODE")
    conn.execute("DELETE FROM due_index")
    _build_due_index(conn)
    conn.execute("DELETE FROM schedule_checkpoints")
    _build_checkpoints(conn)
    row = conn.execute("SELECT COUNT(*) FROM due_index").fetchone()
    return int(row[0]) if row is not None else 0


_PG_TABLES = frozenset({"sessions", "events", "leases", "due_index", "schedule_checkpoints"})
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

_CLAIM_PAGE = (
    "WITH held AS MATERIALIZED ("
    f" SELECT {_KEY_OF_LOCK} AS key FROM pg_locks k WHERE {_ADVISORY_HERE})"
    " SELECT d.session_id, d.due_ms, d.schedule_ms, d.inbox_ms FROM due_index d"
    " WHERE (d.due_ms <= %s OR d.due_ms IS DISTINCT FROM LEAST(d.schedule_ms, d.inbox_ms))"
    "{after}"
    " AND hashtextextended(d.session_id, 0) NOT IN (SELECT held.key FROM held)"
    " ORDER BY d.due_ms, d.session_id LIMIT %s FOR UPDATE OF d SKIP LOCKED"
)
"""One page of a batch claim: index rows due (or unsound) whose lease nobody holds, locked
for the claiming transaction; rows another claimer locked are skipped, never waited for.
``{after}`` continues after a ``(due_ms, session_id)`` of the previous page."""

_TAKE_LEASES = (
    "WITH got AS MATERIALIZED ("
    " SELECT w.id FROM unnest(%s::text[]) AS w(id)"
    " WHERE pg_try_advisory_lock(hashtextextended(w.id, 0)))"
    " INSERT INTO leases(session_id, epoch, owner, acquired_at)"
    " SELECT got.id, 1, %s, now() FROM got"
    " ON CONFLICT (session_id) DO UPDATE"
    " SET epoch = leases.epoch + 1, owner = EXCLUDED.owner, acquired_at = now()"
    " RETURNING session_id, epoch"
)
"""Many leases in one statement on the lease connection: the advisory locks that are free
(never waiting), and a new epoch for each session locked."""

_DROP_PARTIAL = (
    "SELECT pg_advisory_unlock(hashtextextended(w.id, 0)) FROM unnest(%s::text[]) AS w(id)"
    " WHERE EXISTS (SELECT 1 FROM pg_locks k WHERE k.pid = pg_backend_pid()"
    f" AND {_ADVISORY_HERE} AND {_KEY_OF_LOCK} = hashtextextended(w.id, 0))"
)
"""Unlock those of the sessions whose advisory lock this connection holds (after a failed
:data:`_TAKE_LEASES`: such locks are not rolled back with the statement)."""

_UNLOCK_MANY = (
    "SELECT pg_advisory_unlock(hashtextextended(w.id, 0)) FROM unnest(%s::text[]) AS w(id)"
)

_MIGRATIONS: dict[int, tuple[Migration[psycopg.Connection[Any]], ...]] = {
    0: (
        *core_tables("BIGINT", "BYTEA"),
        "CREATE TABLE leases("
        " session_id TEXT PRIMARY KEY,"
        " epoch BIGINT NOT NULL,"
        " owner TEXT,"
        " acquired_at TIMESTAMPTZ)",
    ),
    1: (*due_index_tables("BIGINT"), _build_due_index),
    2: (checkpoint_table("BIGINT", "BYTEA"), _build_checkpoints),
}
"""Statements that migrate schema version N to N+1, keyed by N (0 is an empty database)."""

_SET_VERSION = (
    "INSERT INTO meta(key, value) VALUES ('schema_version', %s)"
    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)

_T = TypeVar("_T")


class PostgresRecorder:
    """PostgreSQL's transactions, reads and leases: one write connection (the writer
    thread's), one autocommit lease connection holding the advisory locks, a read pool."""

    confirms_on_flush = True
    takes_free_sessions = False

    def __init__(self, url: str, *, owner: str, pool_size: int, lease_wait: float) -> None:
        """Connect (migrating the schema), open the lease connection and the read pool."""
        self._url = url
        self._label = redact_url(url)
        self._owner = owner
        self._lease_wait = lease_wait
        self._lease_mutex = threading.Lock()  # the lease connection and closing
        self._checks_lock = threading.Lock()
        self._lease_checks = 0
        self._pg_writer: psycopg.Connection[Any] | None = self._pg_connect(migrate=True)
        self._lease_conn: psycopg.Connection[Any] | None = None
        self._lease_backend: tuple[int, Any] = (0, None)  # its pid and backend start time
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        try:
            self._open_lease_connection(None)
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
            self.close(True)
            raise StoreError(
                f"cannot connect to the session store {self._label} ({_category(error)})"
            ) from None
        except BaseException:
            self.close(True)
            raise

    @property
    def label(self) -> str:
        """The connection URL without its password."""
        return self._label

    @property
    def queries(self) -> ReadQueries[psycopg.Connection[Any]]:
        """The read queries of a PostgreSQL store."""
        return _POSTGRES_READS

    @property
    def lease_checks(self) -> int:
        """How many writer transactions confirmed leases in the database so far."""
        with self._checks_lock:
            return self._lease_checks

    @property
    def lease_backend_pid(self) -> int:
        """The server process id of the connection holding this store's advisory locks."""
        return int(self._lease_backend[0])

    # --- reads -----------------------------------------------------------------------

    def query(self, query: Callable[[psycopg.Connection[Any]], _T], doing: str = "") -> _T:
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

    read = query

    # --- leases ----------------------------------------------------------------------

    def lock(self, session_id: str, lose_held: LoseHeld) -> int:
        """Take the lease (advisory lock, new epoch), waiting ``lease_wait`` seconds; a
        closed lease connection is replaced first (``lose_held`` is told)."""
        cannot = f"cannot take the lease of session {show_id(session_id)}"
        with self._lease_mutex:
            try:
                try:
                    return self._take_lease(session_id)
                except psycopg.OperationalError:
                    conn = self._lease_conn
                    if conn is not None and not (conn.closed or conn.broken):
                        raise StoreError(cannot) from None
                _log.warning("the lease connection of %s was lost; opening a new one", self._label)
                self._open_lease_connection(lose_held)
                return self._take_lease(session_id)
            except psycopg.Error as error:
                raise StoreError(f"{cannot} ({_category(error)})") from None

    def took(self, session_id: str) -> list[SideWrite]:
        """Nothing to write: the lease row was written with the epoch."""
        return []

    def unlock(self, session_id: str, lost: bool) -> list[SideWrite]:
        """Drop the advisory lock unless the lease was lost with it."""
        with self._lease_mutex:
            conn = self._lease_conn
            if lost or conn is None or conn.closed:
                return []
            try:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (session_id,))
            except psycopg.Error as error:
                _log.warning(
                    "releasing the lease of session %r failed (%s)", session_id, _category(error)
                )
        return []

    def closing(self, holding: bool) -> list[SideWrite]:
        """Nothing to write: the leases go with the lease connection."""
        return []

    # --- wanting a session held elsewhere ---------------------------------------------

    def want(self, session_id: str) -> bool:
        """Take the session's shared want lock on the lease connection (never waiting);
        False when that fails. It goes with the lease connection."""
        with self._lease_mutex:
            conn = self._lease_conn
            if conn is None or conn.closed:
                return False
            try:
                row = conn.execute(
                    "SELECT pg_try_advisory_lock_shared(%s, %s)",
                    (_WANT_CLASS, want_key(session_id)),
                ).fetchone()
            except psycopg.Error as error:
                _log.debug("cannot want session %r (%s)", session_id, _category(error))
                return False
        return row is not None and row[0] is True

    def unwant(self, session_id: str) -> None:
        """Drop the session's want lock (nothing happens on a replaced lease connection)."""
        with self._lease_mutex:
            conn = self._lease_conn
            if conn is None or conn.closed:
                return
            try:
                conn.execute(
                    "SELECT pg_advisory_unlock_shared(%s, %s)", (_WANT_CLASS, want_key(session_id))
                )
            except psycopg.Error as error:
                _log.debug("cannot unwant session %r (%s)", session_id, _category(error))

    def wanted(self, session_ids: Collection[str]) -> set[str]:
        """Those of ``session_ids`` whose want lock another connection holds, in one query
        (a query that fails: none)."""
        by_key: dict[int, list[str]] = {}
        for session_id in session_ids:
            by_key.setdefault(want_key(session_id), []).append(session_id)
        if not by_key:
            return set()
        own = self._lease_backend[0]

        def look(conn: psycopg.Connection[Any]) -> list[Any]:
            return conn.execute(_WANTED, (_WANT_CLASS, list(by_key), own)).fetchall()

        try:
            rows = self.query(look, "read who wants a session")
        except StoreError as error:
            _log.debug("%s", error)
            return set()
        return {s for (key,) in rows for s in by_key.get(int(key), ())}

    def due_sessions(
        self, until_ms: int | None, limit: int, held_here: Callable[[str], bool]
    ) -> list[tuple[str, int]]:
        """Due sessions whose lease nobody holds (this store included), one lock snapshot."""
        bound = until_ms if until_ms is not None else 2**63 - 1
        rows = self.query(lambda conn: conn.execute(_DUE_HELD, (bound, limit)).fetchall())
        return [(str(row[0]), int(row[1])) for row in rows]

    def claim(self, session_id: str, now_ms: int, acquire: Callable[[str], int]) -> bool:
        """In one transaction: lock the index row ``FOR UPDATE SKIP LOCKED``, check it is
        due (or unsound), ``acquire`` the lease (held after the transaction)."""
        if not is_storable_id(session_id):
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
                    acquire(session_id)
                except SessionLeaseError:
                    return False
                return True

        return self.query(claim)

    def claim_due(
        self, now_ms: int, limit: int, wanted: Callable[[str], bool], take: TakeMany
    ) -> list[str]:
        """In one transaction: lock a page of due (or unsound) index rows whose lease nobody
        holds ``FOR UPDATE SKIP LOCKED``, ``take`` the ``wanted`` ones (their leases, in one
        statement); another page only when some were not taken."""

        def claim(conn: psycopg.Connection[Any]) -> list[str]:
            claimed: list[str] = []
            after: tuple[int, str] | None = None
            with conn.transaction():
                while len(claimed) < limit:
                    need = limit - len(claimed)
                    if after is None:
                        statement = _CLAIM_PAGE.format(after="")
                        params: tuple[object, ...] = (int(now_ms), need)
                    else:
                        statement = _CLAIM_PAGE.format(
                            after=" AND (d.due_ms, d.session_id) > (%s, %s)"
                        )
                        params = (int(now_ms), *after, need)
                    rows = conn.execute(statement, params).fetchall()
                    candidates = [
                        str(row[0])
                        for row in rows
                        if not IndexRow(*row[1:]).wake_ms > now_ms and wanted(str(row[0]))
                    ]
                    if candidates:
                        claimed.extend(take(candidates))
                    if len(rows) < need:
                        break
                    after = (int(rows[-1][1]), str(rows[-1][0]))
            return claimed

        return self.query(claim, f"claim due sessions in {self._label}")

    def lock_many(self, session_ids: Sequence[str], lose_held: LoseHeld) -> dict[str, int]:
        """Take the free leases among ``session_ids`` in one statement (advisory locks, new
        epochs), never waiting; a closed lease connection is replaced first."""
        if not session_ids:
            return {}
        cannot = f"cannot take the leases of {len(session_ids)} sessions"
        with self._lease_mutex:
            try:
                try:
                    return self._take_leases(session_ids)
                except psycopg.OperationalError:
                    conn = self._lease_conn
                    if conn is not None and not (conn.closed or conn.broken):
                        self._drop_partial(session_ids)
                        raise StoreError(cannot) from None
                _log.warning("the lease connection of %s was lost; opening a new one", self._label)
                self._open_lease_connection(lose_held)
                return self._take_leases(session_ids)
            except psycopg.Error as error:
                self._drop_partial(session_ids)
                raise StoreError(f"{cannot} ({_category(error)})") from None

    def unlock_many(self, session_ids: Sequence[str], lost: Collection[str]) -> list[SideWrite]:
        """Drop the advisory locks of those sessions not lost with them, in one statement."""
        mine = [session_id for session_id in session_ids if session_id not in lost]
        if not mine:
            return []
        with self._lease_mutex:
            conn = self._lease_conn
            if conn is None or conn.closed:
                return []
            try:
                conn.execute(_UNLOCK_MANY, (mine,))
            except psycopg.Error as error:
                _log.warning(
                    "releasing the leases of %d sessions failed (%s)", len(mine), _category(error)
                )
        return []

    def _take_leases(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Run :data:`_TAKE_LEASES` on the lease connection (mutex held); the epochs taken."""
        conn = self._lease_conn
        if conn is None or conn.closed:
            raise StoreClosedError(f"the session store {self._label} is closed")
        rows = conn.execute(_TAKE_LEASES, (list(session_ids), self._owner)).fetchall()
        return {str(row[0]): int(row[1]) for row in rows}

    def _drop_partial(self, session_ids: Sequence[str]) -> None:
        """After a failed :meth:`_take_leases`: unlock what it may have locked (mutex held)."""
        conn = self._lease_conn
        if conn is None or conn.closed or conn.broken:
            return  # (the locks went with the connection)
        try:
            conn.execute(_DROP_PARTIAL, (list(session_ids),))
        except psycopg.Error as error:
            _log.warning(
                "releasing the leases of %d sessions failed (%s)",
                len(session_ids),
                _category(error),
            )

    def rebuild_session_index(self, session_id: str) -> DueEntry | None:
        """Rewrite one session's index row and checkpoint from its log (``REPEATABLE READ``:
        a concurrent commit of the session fails it rather than leave a stale row)."""

        def rewrite(conn: psycopg.Connection[Any]) -> DueEntry | None:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                return rewrite_index_row(cur, session_id, "%s")

        doing = f"rewrite the due index row of session {show_id(session_id)} in {self._label}"
        return self.query(rewrite, doing)

    def _take_lease(self, session_id: str) -> int:
        """Lock ``session_id`` on the lease connection and bump its epoch (mutex held)."""
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

    def _open_lease_connection(self, lose_held: LoseHeld | None) -> None:
        """(Re)open the connection holding the advisory locks; replacing one loses its leases."""
        old = self._lease_conn
        if old is not None:
            old.close()
            if lose_held is not None:
                lose_held(lambda session_id: _lease_loss(session_id, None, None, False))
        self._lease_conn = self._pg_connect(
            migrate=False, autocommit=True, application_name=(_LEASE_APP + self._owner)[:63]
        )
        row = self._lease_conn.execute(
            "SELECT pid, backend_start FROM pg_stat_get_activity(pg_backend_pid())"
        ).fetchone()
        assert row is not None
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

    # --- writes (writer thread) ------------------------------------------------------

    def write(
        self, rows: list[Op], side: list[SideWrite], check: set[str], stage: Stage, epochs: Epochs
    ) -> CommitResult:
        """The leases of ``rows`` and ``check`` are confirmed first (epoch, share-locked until
        ``COMMIT``; lease connection alive); a session that fails is lost. No side writes."""
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
                return None, self._confirm(sessions, found, epochs)
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(_LEASE_CHECK, (*self._lease_backend, sessions))
                lost = self._confirm(sessions, cur.fetchall(), epochs)
                rows = [op for op in rows if op.session_id not in lost]
                write_rows(cur, rows, stage, "%s")
        except Exception as error:  # every failure rolls back; the writer names its category
            conn = self._pg_writer
            if conn is not None and (conn.closed or conn.broken):
                conn.close()
                self._pg_writer = None
            return error, lost
        return None, lost

    def _confirm(self, sessions: list[str], found: list[Any], epochs: Epochs) -> dict[str, Loss]:
        """The sessions whose lease the rows ``found`` by the lease check do not confirm."""
        current = {row[0]: (row[1], bool(row[2])) for row in found}
        held = epochs(sessions)
        with self._checks_lock:
            self._lease_checks += 1
        lost: dict[str, Loss] = {}
        for session_id in sessions:
            epoch, locked = current.get(session_id, (None, False))
            mine = held.get(session_id)
            if mine is not None and epoch == mine and locked:
                continue
            lost[session_id] = _lease_loss(session_id, mine, epoch, locked)
        return lost

    def is_row_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a data, integrity or limit error of some rows."""
        sqlstate = getattr(error, "sqlstate", None)
        return isinstance(sqlstate, str) and sqlstate[:2] in _ROW_ERROR_CLASSES

    def category(self, error: BaseException) -> str:
        """The driver's error class and SQLSTATE (``UniqueViolation 23505``); never its text."""
        return _category(error)

    def writer_stopped(self) -> None:
        """Nothing to do: the leases go with the lease connection at close."""

    def rebuild_index(self) -> int:
        """Rebuild the due index and the schedule checkpoints in one transaction, both tables
        locked against writers first, stamped with the installed zone data; the index rows
        written."""
        try:
            with psycopg.connect(self._url, connect_timeout=30) as conn, conn.transaction():
                count = _rebuild_projections(conn)
                write_zone_stamp(conn, "%s", zone_data_version())
        except psycopg.Error as error:
            raise StoreError(
                f"cannot rebuild the due index of {self._label} ({_category(error)})"
            ) from None
        return count

    def close(self, writer_stopped: bool) -> None:
        """Close the lease connection and the read pool; the writer's once it stopped."""
        with self._lease_mutex:
            lease, self._lease_conn = self._lease_conn, None
            if lease is not None:
                lease.close()
            if writer_stopped and self._pg_writer is not None:
                self._pg_writer.close()
                self._pg_writer = None
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _pg_connect(
        self, *, migrate: bool, autocommit: bool = False, application_name: str = "dsh-schedule"
    ) -> psycopg.Connection[Any]:
        def prepare(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SET synchronous_commit = on")
            if not autocommit:
                conn.commit()
            if migrate:
                self._pg_migrate(conn)

        return _connect(self._url, self._label, autocommit, 30, application_name, setup=prepare)[0]

    def _pg_migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Bring the schema to :data:`PG_SCHEMA_VERSION`, and the due index to the installed
        zone data (see ``_zone_data``), under a transaction-scoped lock."""
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
            start = _pg_schema_version(conn, self._label)
            version = migrate(conn, start, PG_SCHEMA_VERSION, _MIGRATIONS, _SET_VERSION)
            refreshed = refresh_zone_data(
                conn,
                "%s",
                index_existed=start >= DUE_INDEX_SCHEMA_VERSION,
                rebuild=lambda: _rebuild_projections(conn),
            )
        if start != PG_SCHEMA_VERSION:
            _log.info("session store %s migrated to schema version %d", self._label, version)
        if refreshed is not None:
            check, count = refreshed
            _log.info(ZONE_REFRESH_LOG, self._label, check.recorded_text, check.installed, count)


class PostgresEventStore(EventStore):
    """Durable, leased session logs in a PostgreSQL database shared by many host processes.

    ``url``: ``postgresql://user@host:port/db``; ``pool_size`` bounds the read pool;
    ``lease_wait``: seconds :meth:`acquire_session` waits for a lease held elsewhere;
    ``fault_hook``: the same test seam as SQLite's; ``program``: which program the
    holder record names (see :func:`~host_bridge.embedded.stores.new_owner`).
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        lease_wait: float = 0.0,
        fault_hook: Callable[[], None] | None = None,
        due_cache_sessions: int = DEFAULT_CACHE_SESSIONS,
        program: str | None = None,
    ) -> None:
        if not is_postgres_url(url):
            raise StoreError("a PostgreSQL store needs a postgresql:// URL")
        owner = new_owner(program)
        self._pg = PostgresRecorder(url, owner=owner, pool_size=pool_size, lease_wait=lease_wait)
        super().__init__(self._pg, owner, due_cache_sessions, fault_hook, "dsh-pg-writer")

    @property
    def url(self) -> str:
        """The connection URL without its password."""
        return self.label

    @property
    def lease_checks(self) -> int:
        """How many writer transactions confirmed leases in the database so far."""
        return self._pg.lease_checks

    @property
    def lease_backend_pid(self) -> int:
        """The server process id of the connection holding this store's advisory locks."""
        return self._pg.lease_backend_pid


class PostgresStoreReader(OneConnectionReader["psycopg.Connection[Any]"]):
    """Durably stored sessions of a PostgreSQL store, read on one read-only connection.

    Migrates, leases and writes nothing. Raises on open: :class:`StoreMissingError`
    (none of the tables), :class:`StoreError` (unreachable, another application's
    tables), :class:`StoreCorruptError` / :class:`StoreVersionError` like the store.
    """

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        if not is_postgres_url(url):
            raise StoreError("a PostgreSQL store needs a postgresql:// URL")
        self._label = redact_url(url)

        def prepare(conn: psycopg.Connection[Any]) -> int:
            conn.execute("SET default_transaction_read_only = on")
            return _pg_schema_version(conn, self._label)

        name = "dsh-schedule-reader"
        conn, version = _connect(url, self._label, True, connect_timeout, name, setup=prepare)
        if version == 0:
            conn.close()
            raise StoreMissingError(
                f"there is no session store in {self._label} (the database has none of its tables)",
                location=self._label,
                reason="the database has none of its tables",
            )
        super().__init__(
            self._label,
            _POSTGRES_READS,
            conn,
            version=version,
            due_index_version=DUE_INDEX_SCHEMA_VERSION,
            checkpoint_version=CHECKPOINT_SCHEMA_VERSION,
            errors=(psycopg.Error,),
            translate=lambda error: StoreError(
                f"cannot read the session store {self._label} ({_category(error)})"
            ),
        )
        _log.debug("session store %s open read-only", self._label)


def _select_index_suspects(conn: psycopg.Connection[Any]) -> list[tuple[str, IndexRow]]:
    """The due index rows whose ``due_ms`` is not the earlier of the other two (one scan;
    ``BIGINT`` columns are never unreadable, and ``LEAST`` of two NULLs is NULL)."""
    rows = conn.execute(
        "SELECT session_id, due_ms, schedule_ms, inbox_ms FROM due_index"
        " WHERE due_ms IS DISTINCT FROM LEAST(schedule_ms, inbox_ms)"
    )
    return [(row[0], IndexRow(*row[1:])) for row in rows.fetchall()]


def _pg_schema_version(conn: psycopg.Connection[Any], label: str) -> int:
    """The schema version of the database on ``conn``; 0 when it has none of the tables.

    Only reads. Raises like :func:`host_bridge.embedded.stores._sqlite.schema_version`.
    """
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = current_schema()"
        " AND table_name IN ('meta', 'sessions', 'events', 'leases', 'due_index',"
        " 'schedule_checkpoints')"
    ).fetchall()
    tables = {row[0] for row in rows}
    if "meta" not in tables:
        if tables:
            raise StoreError(f"{label} has tables {sorted(tables)} but is not a dsh-schedule store")
        return 0
    return read_version(
        conn, label, tables, PG_SCHEMA_VERSION, {PG_SCHEMA_VERSION: _PG_TABLES}, least=0
    )


def _connect(
    url: str,
    label: str,
    autocommit: bool,
    timeout: int,
    application_name: str,
    *,
    setup: Callable[[psycopg.Connection[Any]], _T],
) -> tuple[psycopg.Connection[Any], _T]:
    """Connect to ``url`` and run ``setup`` on the connection (closed again when it fails); a
    driver error is a :class:`StoreError` naming ``label`` and its kind."""
    try:
        conn = psycopg.connect(
            url, autocommit=autocommit, connect_timeout=timeout, application_name=application_name
        )
    except psycopg.Error as error:
        raise StoreError(
            f"cannot connect to the session store {label} ({_category(error)})"
        ) from None
    try:
        return conn, setup(conn)
    except psycopg.Error as error:
        conn.close()
        raise StoreError(f"cannot open the session store {label} ({_category(error)})") from None
    except BaseException:
        conn.close()
        raise


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


@contextlib.contextmanager
def _snapshot(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """The statements inside read one snapshot (a read-only repeatable-read transaction)."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


_POSTGRES_READS: ReadQueries[psycopg.Connection[Any]] = sql_reads(
    "%s", _snapshot, _select_index_suspects
)
