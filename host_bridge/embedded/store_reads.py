"""The reads both read-only stores offer, written once over a backend's queries.

:class:`~host_bridge.embedded.sqlite_reader.SqliteStoreReader` and
:class:`~host_bridge.embedded.postgres_store.PostgresStoreReader` differ in how
they connect and in their SQL; what they answer, and how (ids checked before
anything is read, one snapshot per session, rows decoded by
:func:`~host_bridge.embedded.sqlite_store.decode_session`), is the same. A
reader names its backend's queries in :class:`ReadQueries` and implements
``_read``; :class:`StoreReadsBase` does the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from host_bridge.embedded.due_index import DueEntry
from host_bridge.embedded.store_rows import (
    StoredSession,
    decode_header,
    decode_session,
    is_storable_id,
)
from host_bridge.protocols import SessionHeader

__all__ = ["ReadQueries", "StoreReadsBase"]

_T = TypeVar("_T")
_C = TypeVar("_C", bound="_Closable")

Rows = list[tuple[Any, ...]]


class _Closable(Protocol):
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ReadQueries(Generic[_C]):
    """A backend's read queries, each run inside :meth:`StoreReadsBase._read`."""

    session_ids: Callable[[_C, str], list[str]]
    """Every stored session id, sorted (the ``str`` names the store in errors)."""
    header: Callable[[_C, str], tuple[Any, ...] | None]
    """A session's ``(seed_length, parent_session)`` row, or None."""
    session: Callable[[_C, str], tuple[Any, Rows]]
    """A session's header row and event rows, in one snapshot."""
    due_entries: Callable[[_C], dict[str, DueEntry]]
    """Every due index row, by session id."""
    indexed: Callable[[_C, str], tuple[Any, Rows, DueEntry | None]]
    """A session's header row, event rows and due index row, in one snapshot."""


class StoreReadsBase(Generic[_C]):
    """Reads of durably stored sessions over one connection, guarded by a lock.

    A subclass names its queries in :meth:`_reads`, sets
    :attr:`_due_index_version`, assigns
    ``_lock``, ``_conn``, ``_version`` and ``_label`` when it opens, and
    implements :meth:`_read` (which turns its driver's errors into
    :class:`~host_bridge.embedded.store_errors.StoreError`).
    """

    _due_index_version: ClassVar[int]
    _lock: threading.Lock
    _conn: _C | None
    _version: int
    _label: str

    @property
    def label(self) -> str:
        """How messages name the store."""
        return self._label

    @property
    def schema_version(self) -> int:
        """The schema version of the store (older versions are read as they are)."""
        return self._version

    def session_ids(self) -> list[str]:
        """The ids of every durably stored session, sorted."""
        return self._read(lambda conn: self._reads().session_ids(conn, self._label))

    def load_header(self, session_id: str) -> SessionHeader | None:
        """The stored header of ``session_id``, or ``None`` when it is not stored."""
        if not is_storable_id(session_id):
            return None
        row = self._read(lambda conn: self._reads().header(conn, session_id))
        return None if row is None else decode_header(session_id, row)

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session (header and decoded log), or ``None`` when it is not stored.

        Raises :class:`~host_bridge.embedded.store_errors.StoreCorruptError`
        naming the session and seq when its rows are not ``0 … n-1``
        contiguous or a row does not decode.
        """
        if not is_storable_id(session_id):
            return None
        head, rows = self._read(lambda conn: self._reads().session(conn, session_id))
        return decode_session(session_id, head, rows)

    @property
    def has_due_index(self) -> bool:
        """Whether the store's schema has a due index (older stores have none)."""
        return self._version >= self._due_index_version

    def due_entries(self) -> dict[str, DueEntry]:
        """Every stored due index row, by session id (empty without a due index)."""
        if not self.has_due_index:
            return {}
        return self._read(self._reads().due_entries)

    def load_indexed(self, session_id: str) -> tuple[StoredSession | None, DueEntry | None]:
        """The stored session and its due index row, read in one snapshot.

        Without a due index (an older store) the row is always ``None``.
        """
        if not self.has_due_index:
            return self.load(session_id), None
        if not is_storable_id(session_id):
            return None, None
        head, rows, due = self._read(lambda conn: self._reads().indexed(conn, session_id))
        return decode_session(session_id, head, rows), due

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

    def _reads(self) -> ReadQueries[_C]:
        """The backend's read queries."""
        raise NotImplementedError

    def _read(self, query: Callable[[_C], _T]) -> _T:
        """Run ``query`` on the open connection, under the lock."""
        raise NotImplementedError
