"""The reads every store offers, written once over a backend's queries.

:class:`SessionReads` answers the read API (ids checked first, one snapshot per
session) over a backend's :class:`ReadQueries`; writable stores and readers build on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Self, TypeVar

from host_bridge.embedded.stores._checkpoints import read_schedule_states
from host_bridge.embedded.stores._due import (
    WAKE_EVENT_TYPES,
    CheckpointWarnings,
    DueEntry,
    IndexRow,
    SessionProjection,
    StoredRow,
    decode_due_entry,
)
from host_bridge.embedded.stores._errors import StoreClosedError, StoreCorruptError, StoreError
from host_bridge.embedded.stores._rows import (
    StoredSession,
    decode_event,
    decode_header,
    decode_session,
    is_storable_id,
    show_id,
)
from host_bridge.embedded.stores._zone_data import (
    ZoneDataCheck,
    read_zone_stamp,
    zone_data_version,
)
from host_bridge.protocols import SessionEvent, SessionHeader

__all__ = [
    "SEQS_CHUNK",
    "STATES_CHUNK",
    "OneConnectionReader",
    "ReadQueries",
    "SessionReads",
    "StoredCheckpoint",
    "StoredTail",
    "read_due_state",
    "sql_reads",
]

_T = TypeVar("_T")
_C = TypeVar("_C")

Rows = list[tuple[Any, ...]]

StoredCheckpoint = tuple[object, object]
"""A schedule checkpoint row as stored: ``(next_seq, state)``, unchecked."""

STATES_CHUNK = 500
"""Sessions whose schedule state one snapshot reads (two statements)."""

SEQS_CHUNK = 500
"""Events one statement of :meth:`SessionReads.load_events_at` names."""


@dataclass(frozen=True, slots=True)
class StoredTail:
    """A stored session's header and the events of its log from ``start`` on.

    ``length`` is the stored log's length, read in the same snapshot: the
    events are ``start … length-1`` (none when ``start >= length``).
    """

    header: SessionHeader
    start: int
    events: tuple[SessionEvent, ...]
    length: int


@dataclass(frozen=True, slots=True)
class ReadQueries(Generic[_C]):
    """A backend's read queries, each run inside :meth:`SessionReads._read`."""

    session_ids: Callable[[_C, str], list[str]]
    """Every stored session id, sorted (the ``str`` names the store in errors)."""
    header: Callable[[_C, str], tuple[Any, ...] | None]
    """A session's ``(seed_length, parent_session)`` row, or None."""
    session: Callable[[_C, str], tuple[Any, Rows]]
    """A session's header row and event rows, in one snapshot."""
    index_rows: Callable[[_C], dict[str, IndexRow]]
    """Every due index row as stored, by session id."""
    index_row: Callable[[_C, str], IndexRow | None]
    """A session's due index row as stored, or None."""
    indexed: Callable[[_C, str], tuple[Any, Rows, IndexRow | None]]
    """A session's header row, event rows and due index row, in one snapshot."""
    index_suspects: Callable[[_C], list[tuple[str, IndexRow]]]
    """Every unsound due index row, and maybe a few more (the database filters, one scan)."""
    length: Callable[[_C, str], tuple[Any, Any, Any]]
    """Whether a session is stored, its event count and its last seq, in one snapshot."""
    schedule_states: Callable[
        [_C, Sequence[str], bool], dict[str, tuple[SessionProjection, str | None]]
    ]
    """The projections of those of some sessions that are stored, from their checkpoints
    (when the schema has them: the ``bool``) and the rows after, in one snapshot."""
    checked: Callable[[_C, str], tuple[Any, Rows, IndexRow | None, StoredCheckpoint | None]]
    """A session's header row, event rows, due index row and checkpoint, in one snapshot."""
    tail: Callable[[_C, str, int], tuple[Any, Any, Rows]]
    """A session's header row, its stored length (one past its last seq) and its event
    rows from a seq on, in one snapshot."""
    events_range: Callable[[_C, str, int, int], Rows]
    """A session's event rows with ``start <= seq < stop``, by seq."""
    events_at: Callable[[_C, str, Sequence[int]], Rows]
    """A session's event rows at some seqs (those stored), by seq."""


def sql_reads(
    mark: str,
    snapshot: Callable[[Any], AbstractContextManager[object]],
    index_suspects: Callable[[Any], list[tuple[str, IndexRow]]],
) -> ReadQueries[Any]:
    """The read queries of a DB-API backend with placeholder ``mark``; ``snapshot(conn)``
    makes the statements inside read one snapshot, ``index_suspects`` is its own scan."""
    events_sql = f"SELECT seq, type, time, data FROM events WHERE session_id = {mark} ORDER BY seq"

    def header(conn: Any, session_id: str) -> tuple[Any, ...] | None:
        sql = f"SELECT seed_length, parent_session FROM sessions WHERE id = {mark}"
        row = conn.execute(sql, (session_id,)).fetchone()
        return None if row is None else tuple(row)

    def events(conn: Any, session_id: str) -> Rows:
        return [_blob_row(row) for row in conn.execute(events_sql, (session_id,)).fetchall()]

    def index_row(conn: Any, session_id: str) -> IndexRow | None:
        sql = f"SELECT due_ms, schedule_ms, inbox_ms FROM due_index WHERE session_id = {mark}"
        row = conn.execute(sql, (session_id,)).fetchone()
        return None if row is None else IndexRow(*row)

    def session(conn: Any, session_id: str) -> tuple[Any, Rows]:
        with snapshot(conn):
            head = header(conn, session_id)
            return head, [] if head is None else events(conn, session_id)

    def indexed(conn: Any, session_id: str) -> tuple[Any, Rows, IndexRow | None]:
        with snapshot(conn):
            head = header(conn, session_id)
            rows = [] if head is None else events(conn, session_id)
            return head, rows, index_row(conn, session_id)

    def checkpoint(conn: Any, session_id: str) -> StoredCheckpoint | None:
        sql = f"SELECT next_seq, state FROM schedule_checkpoints WHERE session_id = {mark}"
        row = conn.execute(sql, (session_id,)).fetchone()
        if row is None:
            return None
        blob = row[1]
        return row[0], bytes(blob) if isinstance(blob, memoryview) else blob

    def checked(
        conn: Any, session_id: str
    ) -> tuple[Any, Rows, IndexRow | None, StoredCheckpoint | None]:
        with snapshot(conn):
            head = header(conn, session_id)
            rows = [] if head is None else events(conn, session_id)
            return head, rows, index_row(conn, session_id), checkpoint(conn, session_id)

    def schedule_states(
        conn: Any, session_ids: Sequence[str], checkpoints: bool
    ) -> dict[str, tuple[SessionProjection, str | None]]:
        with snapshot(conn):
            return read_schedule_states(conn, session_ids, mark, checkpoints=checkpoints)

    def length(conn: Any, session_id: str) -> tuple[Any, Any, Any]:
        with snapshot(conn):
            exists = conn.execute(
                f"SELECT 1 FROM sessions WHERE id = {mark}", (session_id,)
            ).fetchone()
            count, last = conn.execute(
                f"SELECT COUNT(*), MAX(seq) FROM events WHERE session_id = {mark}", (session_id,)
            ).fetchone()
            return exists, count, last

    def tail(conn: Any, session_id: str, start: int) -> tuple[Any, Any, Rows]:
        with snapshot(conn):
            head = header(conn, session_id)
            if head is None:
                return None, 0, []
            (length,) = conn.execute(  # (not a count: the resume must not cost the log)
                f"SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE session_id = {mark}",
                (session_id,),
            ).fetchone()
            return head, length, events_range(conn, session_id, start, None)

    def events_range(conn: Any, session_id: str, start: int, stop: int | None) -> Rows:
        sql = (
            f"SELECT seq, type, time, data FROM events WHERE session_id = {mark} AND seq >= {mark}"
        )
        params: tuple[Any, ...] = (session_id, start)
        if stop is not None:
            sql += f" AND seq < {mark}"
            params += (stop,)
        return [_blob_row(row) for row in conn.execute(sql + " ORDER BY seq", params).fetchall()]

    def events_at(conn: Any, session_id: str, seqs: Sequence[int]) -> Rows:
        marks = ", ".join(mark for _ in seqs)
        sql = (
            f"SELECT seq, type, time, data FROM events WHERE session_id = {mark}"
            f" AND seq IN ({marks}) ORDER BY seq"
        )
        return [_blob_row(row) for row in conn.execute(sql, (session_id, *seqs)).fetchall()]

    return ReadQueries(
        session_ids=_session_ids,
        header=header,
        session=session,
        index_rows=_index_rows,
        index_row=index_row,
        indexed=indexed,
        index_suspects=index_suspects,
        length=length,
        schedule_states=schedule_states,
        checked=checked,
        tail=tail,
        events_range=events_range,
        events_at=events_at,
    )


def read_due_state(
    conn: Any, session_id: str, mark: str
) -> tuple[int | None, int, list[StoredRow]] | None:
    """A session's seed length, next seq and wake-relevant rows, read on ``conn`` (a cursor)."""
    head = conn.execute(f"SELECT seed_length FROM sessions WHERE id = {mark}", (session_id,))
    head = head.fetchone()
    if head is None:
        return None
    seed = head[0] if isinstance(head[0], int) else 0
    (next_seq,) = conn.execute(
        f"SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE session_id = {mark}", (session_id,)
    ).fetchone()
    marks = ", ".join(mark for _ in WAKE_EVENT_TYPES)
    rows = conn.execute(
        f"SELECT seq, type, time, data FROM events WHERE session_id = {mark} AND seq >= {mark}"
        f" AND type IN ({marks}) ORDER BY seq",
        (session_id, seed, *WAKE_EVENT_TYPES),
    ).fetchall()
    return seed, int(next_seq), [_blob_row(row) for row in rows]


def _blob_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """A stored event row with its payload as ``bytes`` (a driver may hand a memoryview)."""
    seq, type_, time_ms, data = row
    return seq, type_, time_ms, bytes(data) if isinstance(data, memoryview) else data


def _session_ids(conn: Any, label: str) -> list[str]:
    """Every stored session id, sorted; a non-text id is corruption (``label``: the store)."""
    ids = [row[0] for row in conn.execute("SELECT id FROM sessions").fetchall()]
    if not all(isinstance(session_id, str) for session_id in ids):
        raise StoreCorruptError(f"{label}: the sessions table holds an id that is not text")
    return sorted(ids)


def _index_rows(conn: Any) -> dict[str, IndexRow]:
    """Every due index row as stored; a damaged non-text id is keyed by its ``repr``."""
    rows = conn.execute("SELECT session_id, due_ms, schedule_ms, inbox_ms FROM due_index")
    return {
        row[0] if isinstance(row[0], str) else repr(row[0]): IndexRow(*row[1:])
        for row in rows.fetchall()
    }


class SessionReads(Generic[_C]):
    """Reads of durably stored sessions through a backend's :class:`ReadQueries`.

    ``run`` runs one query (driver errors become ``StoreError``); ``due_index`` and
    ``checkpoints`` say whether the schema has a due index and schedule checkpoints;
    ``on_loaded`` hears the length of every log read; ``warnings`` hears of unusable
    checkpoints.
    """

    def __init__(
        self,
        label: str,
        queries: ReadQueries[_C],
        run: Callable[[Callable[[_C], Any]], Any],
        due_index: Callable[[], bool],
        on_loaded: Callable[[str, int], None] | None = None,
        *,
        checkpoints: Callable[[], bool] | None = None,
        warnings: CheckpointWarnings | None = None,
    ) -> None:
        """Read through ``queries`` run by ``run``; ``label`` names the store in errors."""
        self._reads_label = label
        self._queries = queries
        self._run = run
        self._due_index = due_index
        self._checkpoints = checkpoints if checkpoints is not None else due_index
        self._on_loaded = on_loaded
        self._warnings = warnings if warnings is not None else CheckpointWarnings()

    @property
    def label(self) -> str:
        """How messages name the store (a path, or a URL without password)."""
        return self._reads_label

    @property
    def has_due_index(self) -> bool:
        """Whether the store's schema has a due index (older stores have none)."""
        return self._due_index()

    @property
    def has_checkpoints(self) -> bool:
        """Whether the store's schema keeps schedule checkpoints (older stores have none)."""
        return self._checkpoints()

    def session_ids(self) -> list[str]:
        """The ids of every durably stored session, sorted."""
        ids: list[str] = self._run(lambda conn: self._queries.session_ids(conn, self._reads_label))
        return ids

    def zone_data_check(self) -> ZoneDataCheck:
        """The zone data version the store recorded for its due index (see ``_zone_data``),
        beside the installed one."""
        recorded: str | None = self._run(read_zone_stamp)
        return ZoneDataCheck(recorded, zone_data_version())

    def load_header(self, session_id: str) -> SessionHeader | None:
        """The stored header of ``session_id``, or ``None`` when it is not stored."""
        if not is_storable_id(session_id):
            return None
        row = self._run(lambda conn: self._queries.header(conn, session_id))
        return None if row is None else decode_header(session_id, tuple(row))

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session (header and decoded log), or ``None`` when it is not stored;
        ``StoreCorruptError`` unless its rows are ``0 … n-1`` and decode."""
        if not is_storable_id(session_id):
            return None
        head, rows = self._run(lambda conn: self._queries.session(conn, session_id))
        return self._decoded(session_id, head, rows)

    def stored_length(self, session_id: str) -> int | None:
        """The number of stored events of ``session_id``, or None when it is not stored."""
        if not is_storable_id(session_id):
            return None  # such an id can never have been stored
        exists, count, last = self._run(lambda conn: self._queries.length(conn, session_id))
        if exists is None:
            return None
        if count and last != count - 1:
            raise StoreCorruptError(
                f"session {show_id(session_id)} has a gap in its stored events",
                session_id=session_id,
            )
        return int(count)

    def due_entries(self) -> dict[str, DueEntry]:
        """Every stored due index row, by session id (``StoreCorruptError``: one is unsound)."""
        rows = self.index_rows()
        return {session_id: decode_due_entry(session_id, row) for session_id, row in rows.items()}

    def due_entry(self, session_id: str) -> DueEntry | None:
        """The stored due index row of ``session_id`` (``None``: none; unsound: raises)."""
        row = self.due_row(session_id)
        return None if row is None else decode_due_entry(session_id, row)

    def index_rows(self) -> dict[str, IndexRow]:
        """Every due index row as stored, sound or not, by session id (empty without an index)."""
        if not self.has_due_index:
            return {}
        rows: dict[str, IndexRow] = self._run(self._queries.index_rows)
        return rows

    def due_row(self, session_id: str) -> IndexRow | None:
        """The due index row of ``session_id`` as stored, sound or not (``None``: no row)."""
        if not self.has_due_index or not is_storable_id(session_id):
            return None
        row: IndexRow | None = self._run(lambda conn: self._queries.index_row(conn, session_id))
        return row

    def unsound_due_rows(self) -> list[tuple[str, str]]:
        """``(session_id, defect)`` of every due index row unsound in itself (one read; a
        sound row that disagrees with its log is for ``dsh-schedule verify``)."""
        if not self.has_due_index:
            return []
        found: list[tuple[str, IndexRow]] = self._run(self._queries.index_suspects)
        return [
            (session_id, defect)
            for session_id, row in found
            if (defect := row.defect()) is not None
        ]

    def load_indexed(self, session_id: str) -> tuple[StoredSession | None, IndexRow | None]:
        """The stored session and its due index row as stored (``None`` without an index),
        read in one snapshot."""
        if not self.has_due_index:
            return self.load(session_id), None
        if not is_storable_id(session_id):
            return None, None
        head, rows, due = self._run(lambda conn: self._queries.indexed(conn, session_id))
        return self._decoded(session_id, head, rows), due

    def load_checked(
        self, session_id: str
    ) -> tuple[StoredSession | None, IndexRow | None, StoredCheckpoint | None]:
        """The stored session, its due index row and its schedule checkpoint as stored
        (``None`` when absent or the schema has none), read in one snapshot."""
        if not self.has_checkpoints:
            return (*self.load_indexed(session_id), None)
        if not is_storable_id(session_id):
            return None, None, None
        head, rows, due, checkpoint = self._run(
            lambda conn: self._queries.checked(conn, session_id)
        )
        return self._decoded(session_id, head, rows), due, checkpoint

    def schedule_states(self, session_ids: Sequence[str]) -> dict[str, SessionProjection]:
        """Each stored session's durable projection (sessions not stored are left out).

        Read from its schedule checkpoint and the wake-relevant rows after it, a
        few statements per :data:`STATES_CHUNK` sessions; a missing checkpoint, or
        one that is unusable (logged once per session), is replaced by the fold
        of the session's log.
        """
        wanted = list(dict.fromkeys(s for s in session_ids if is_storable_id(s)))
        checkpoints = self.has_checkpoints
        states: dict[str, SessionProjection] = {}
        unusable: set[str] = set()
        for start in range(0, len(wanted), STATES_CHUNK):
            chunk = wanted[start : start + STATES_CHUNK]
            found: dict[str, tuple[SessionProjection, str | None]] = self._run(
                partial(self._read_chunk, chunk, checkpoints)
            )
            for session_id, (state, problem) in found.items():
                states[session_id] = state
                if problem is not None:
                    unusable.add(session_id)
                    self._warnings.warn(session_id, problem)
        self._read_states(states, unusable)
        return states

    def _read_chunk(
        self, chunk: Sequence[str], checkpoints: bool, conn: _C
    ) -> dict[str, tuple[SessionProjection, str | None]]:
        return self._queries.schedule_states(conn, chunk, checkpoints)

    def schedule_state(self, session_id: str) -> SessionProjection | None:
        """The durable projection of ``session_id`` (see :meth:`schedule_states`), or
        ``None`` when it is not stored."""
        return self.schedule_states((session_id,)).get(session_id)

    def _read_states(self, states: dict[str, SessionProjection], unusable: set[str]) -> None:
        """Hear of states :meth:`schedule_states` read (``unusable``: their checkpoint was)."""

    def load_tail(self, session_id: str, start: int) -> StoredTail | None:
        """The stored header and the events from seq ``start`` on, in one snapshot, or
        ``None`` when the session is not stored; ``StoreCorruptError`` unless the events
        from ``start`` are ``start … length-1`` and decode. The earlier rows are not
        read: a gap or a damaged payload among them is found when they are
        (:meth:`load_events`). Tells ``on_loaded`` the stored length."""
        if not is_storable_id(session_id):
            return None
        head, length, rows = self._run(lambda conn: self._queries.tail(conn, session_id, start))
        if head is None:
            return None
        header = decode_header(session_id, tuple(head))
        if not isinstance(length, int) or len(rows) != max(0, length - start):
            raise StoreCorruptError(
                f"session {show_id(session_id)} has a gap in its stored events",
                session_id=session_id,
            )
        events = tuple(
            decode_event(session_id, start + offset, tuple(row)) for offset, row in enumerate(rows)
        )
        if self._on_loaded is not None:
            self._on_loaded(session_id, length)
        return StoredTail(header, start, events, length)

    def load_events(self, session_id: str, start: int, stop: int) -> tuple[SessionEvent, ...]:
        """The stored events ``start … stop-1`` of ``session_id``, decoded;
        ``StoreCorruptError`` unless every one of them is stored and decodes."""
        if not is_storable_id(session_id) or not 0 <= start <= stop:
            raise StoreError(f"no events {start}..{stop - 1} of session {show_id(session_id)}")
        rows: Rows = self._run(
            lambda conn: self._queries.events_range(conn, session_id, start, stop)
        )
        if len(rows) != stop - start:
            raise StoreCorruptError(
                f"session {show_id(session_id)} has a gap in its stored events",
                session_id=session_id,
            )
        return tuple(
            decode_event(session_id, start + offset, tuple(row)) for offset, row in enumerate(rows)
        )

    def _events_at(self, session_id: str, seqs: Sequence[int], conn: _C) -> Rows:
        return self._queries.events_at(conn, session_id, seqs)

    def load_events_at(self, session_id: str, seqs: Sequence[int]) -> dict[int, SessionEvent]:
        """The stored events of ``session_id`` at ``seqs`` (those stored), by seq, decoded
        (``StoreCorruptError`` when one does not)."""
        wanted = sorted({seq for seq in seqs if isinstance(seq, int) and seq >= 0})
        if not is_storable_id(session_id) or not wanted:
            return {}
        found: dict[int, SessionEvent] = {}
        for first in range(0, len(wanted), SEQS_CHUNK):
            chunk = wanted[first : first + SEQS_CHUNK]
            rows: Rows = self._run(partial(self._events_at, session_id, chunk))
            for row in rows:
                seq = row[0]
                if isinstance(seq, int):
                    found[seq] = decode_event(session_id, seq, tuple(row))
        return found

    def _decoded(
        self, session_id: str, head: Sequence[Any] | None, rows: Sequence[Sequence[Any]]
    ) -> StoredSession | None:
        """Decode a header row and event rows read in one snapshot; tell ``on_loaded``."""
        stored = decode_session(session_id, head, rows)
        if stored is not None and self._on_loaded is not None:
            self._on_loaded(session_id, len(stored.events))
        return stored


class OneConnectionReader(SessionReads[_C]):
    """A read-only store: :class:`SessionReads` over one connection behind a lock
    (``translate`` turns a driver error, one of ``errors``, into a ``StoreError``)."""

    def __init__(
        self,
        label: str,
        queries: ReadQueries[_C],
        conn: _C,
        *,
        version: int,
        due_index_version: int,
        checkpoint_version: int,
        errors: tuple[type[Exception], ...],
        translate: Callable[[Exception], StoreError],
    ) -> None:
        """Read ``conn`` through ``queries``; ``label`` names the store in errors."""
        self._conn_lock = threading.Lock()
        self._conn: _C | None = conn
        self._version = version
        self._errors = errors
        self._translate = translate
        super().__init__(
            label,
            queries,
            self._query,
            lambda: version >= due_index_version,
            checkpoints=lambda: version >= checkpoint_version,
        )

    @property
    def schema_version(self) -> int:
        """The schema version of the store (older versions are read as they are)."""
        return self._version

    def close(self) -> None:
        """Close the connection; later reads raise ``StoreClosedError``."""
        with self._conn_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()  # type: ignore[attr-defined]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _query(self, query: Callable[[_C], _T]) -> _T:
        with self._conn_lock:
            conn = self._conn
            if conn is None:
                raise StoreClosedError(f"the session store {self._reads_label} is closed")
            try:
                return query(conn)
            except self._errors as error:
                raise self._translate(error) from None
