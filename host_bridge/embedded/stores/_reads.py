"""The reads every store offers, written once over a backend's queries.

The writable stores (:class:`~host_bridge.embedded.stores._sqlite.SqliteEventStore`,
:class:`~host_bridge.embedded.stores._postgres.PostgresEventStore`) and the
read-only ones (:class:`~host_bridge.embedded.stores._sqlite_reader.SqliteStoreReader`,
:class:`~host_bridge.embedded.stores._postgres.PostgresStoreReader`) differ in how
they connect and in their SQL; what they answer, and how (ids checked before
anything is read, one snapshot per session, rows decoded by
:func:`~host_bridge.embedded.stores._rows.decode_session`), is the same. A store
names its backend's queries in :class:`ReadQueries` and implements ``_read``;
:class:`SessionReads` does the rest, and :class:`StoreReadsBase` adds what a
read-only store needs besides (its schema version and closing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from host_bridge.embedded.stores._due import DueEntry, IndexRow
from host_bridge.embedded.stores._rows import (
    StoredSession,
    decode_due_entry,
    decode_header,
    decode_session,
    is_storable_id,
)
from host_bridge.protocols import SessionHeader

__all__ = ["ReadQueries", "SessionReads", "StoreReadsBase"]

_T = TypeVar("_T")
_C = TypeVar("_C")
_K = TypeVar("_K", bound="_Closable")

Rows = list[tuple[Any, ...]]


class _Closable(Protocol):
    def close(self) -> None: ...


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


class SessionReads(Generic[_C]):
    """Reads of durably stored sessions through a backend's :class:`ReadQueries`.

    A subclass names its queries in :meth:`_reads`, runs them in :meth:`_read`
    (which turns its driver's errors into
    :class:`~host_bridge.embedded.stores._errors.StoreError`), says whether it has
    a due index, and sets ``_label`` (how errors name the store). A writable
    store overrides :meth:`_decoded` to note what it read.
    """

    _label: str

    @property
    def has_due_index(self) -> bool:
        """Whether the store's schema has a due index (older stores have none)."""
        raise NotImplementedError

    def session_ids(self) -> list[str]:
        """The ids of every durably stored session, sorted."""
        return self._read(lambda conn: self._reads().session_ids(conn, self._label))

    def load_header(self, session_id: str) -> SessionHeader | None:
        """The stored header of ``session_id``, or ``None`` when it is not stored."""
        if not is_storable_id(session_id):
            return None
        row = self._read(lambda conn: self._reads().header(conn, session_id))
        return None if row is None else decode_header(session_id, tuple(row))

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session (header and decoded log), or ``None`` when it is not stored.

        Raises :class:`~host_bridge.embedded.stores._errors.StoreCorruptError`
        naming the session and seq when its rows are not ``0 … n-1``
        contiguous or a row does not decode.
        """
        if not is_storable_id(session_id):
            return None
        head, rows = self._read(lambda conn: self._reads().session(conn, session_id))
        return self._decoded(session_id, head, rows)

    def due_entries(self) -> dict[str, DueEntry]:
        """Every stored due index row, by session id (empty without a due index).

        Raises :class:`~host_bridge.embedded.stores._errors.StoreCorruptError`
        when a row does not read (see :meth:`index_rows` for the rows as stored).
        """
        rows = self.index_rows()
        return {session_id: decode_due_entry(session_id, row) for session_id, row in rows.items()}

    def due_entry(self, session_id: str) -> DueEntry | None:
        """The durably stored due index row of ``session_id`` (``None``: no row).

        Raises :class:`~host_bridge.embedded.stores._errors.StoreCorruptError`
        when the row does not read (see :meth:`due_row`).
        """
        row = self.due_row(session_id)
        return None if row is None else decode_due_entry(session_id, row)

    def index_rows(self) -> dict[str, IndexRow]:
        """Every due index row as stored, sound or not, by session id (empty without an index)."""
        if not self.has_due_index:
            return {}
        return self._read(self._reads().index_rows)

    def due_row(self, session_id: str) -> IndexRow | None:
        """The due index row of ``session_id`` as stored, sound or not (``None``: no row)."""
        if not self.has_due_index or not is_storable_id(session_id):
            return None
        return self._read(lambda conn: self._reads().index_row(conn, session_id))

    def unsound_due_rows(self) -> list[tuple[str, str]]:
        """``(session_id, defect)`` of every due index row unreadable or inconsistent in itself.

        One read of the whole index (see :meth:`IndexRow.defect`); it cannot
        see a sound row that disagrees with its log (``dsh-schedule verify`` does).
        """
        if not self.has_due_index:
            return []
        found = self._read(self._reads().index_suspects)
        return [
            (session_id, defect)
            for session_id, row in found
            if (defect := row.defect()) is not None
        ]

    def load_indexed(self, session_id: str) -> tuple[StoredSession | None, IndexRow | None]:
        """The stored session and its due index row as stored, read in one snapshot.

        Without a due index (an older store) the row is always ``None``.
        """
        if not self.has_due_index:
            return self.load(session_id), None
        if not is_storable_id(session_id):
            return None, None
        head, rows, due = self._read(lambda conn: self._reads().indexed(conn, session_id))
        return self._decoded(session_id, head, rows), due

    def _decoded(
        self, session_id: str, head: Sequence[Any] | None, rows: Sequence[Sequence[Any]]
    ) -> StoredSession | None:
        """Decode a header row and event rows read in one snapshot."""
        return decode_session(session_id, head, rows)

    def _reads(self) -> ReadQueries[_C]:
        """The backend's read queries."""
        raise NotImplementedError

    def _read(self, query: Callable[[_C], _T]) -> _T:
        """Run ``query`` on the store's connection; driver errors become ``StoreError``."""
        raise NotImplementedError


class StoreReadsBase(SessionReads[_K]):
    """A read-only store: :class:`SessionReads` over one connection, guarded by a lock.

    A subclass sets :attr:`_due_index_version` and assigns ``_lock``,
    ``_conn``, ``_version`` and ``_label`` when it opens.
    """

    _due_index_version: ClassVar[int]
    _lock: threading.Lock
    _conn: _K | None
    _version: int

    @property
    def label(self) -> str:
        """How messages name the store."""
        return self._label

    @property
    def schema_version(self) -> int:
        """The schema version of the store (older versions are read as they are)."""
        return self._version

    @property
    def has_due_index(self) -> bool:
        """Whether the store's schema has a due index (older stores have none)."""
        return self._version >= self._due_index_version

    def close(self) -> None:
        """Close the connection; later reads raise ``StoreClosedError``."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
