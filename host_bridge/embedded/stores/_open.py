"""Choose the persistence listener from configuration: an SQLite path or a PostgreSQL URL."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol, Self, overload

from host_bridge.embedded.paths import is_postgres_url, names_a_connection, redact_url
from host_bridge.embedded.stores._due import DueEntry, IndexRow, SessionProjection
from host_bridge.embedded.stores._errors import StoreError
from host_bridge.embedded.stores._sqlite import SqliteEventStore
from host_bridge.embedded.stores._store import EventStore

if TYPE_CHECKING:
    from host_bridge.embedded.stores._rows import StoredSession
    from host_bridge.embedded.stores._zone_data import ZoneDataCheck
    from host_bridge.protocols import SessionHeader

__all__ = ["StoreReader", "open_store"]


class StoreReader(Protocol):
    """What tools that only look at a store need (``open_store(..., read_only=True)``);
    the writable stores offer the same reads."""

    @property
    def label(self) -> str:
        """How messages name the store (a path, or a URL without password)."""

    def session_ids(self) -> list[str]:
        """The ids of every durably stored session, sorted."""

    def zone_data_check(self) -> ZoneDataCheck:
        """The zone data version the store recorded for its due index, beside the installed
        one (a difference explains a ``cron`` session's disagreeing index row)."""

    def load_header(self, session_id: str) -> SessionHeader | None:
        """The stored header of ``session_id``, or ``None`` when it is not stored."""

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session (header and decoded log), or ``None`` when it is not stored."""

    @property
    def has_due_index(self) -> bool:
        """Whether the store keeps a due index (stores written by older versions may not)."""

    def due_entries(self) -> dict[str, DueEntry]:
        """Every due index row, by session id (empty without a due index)."""

    def index_rows(self) -> dict[str, IndexRow]:
        """Every due index row as stored, sound or not, by session id."""

    def load_indexed(self, session_id: str) -> tuple[StoredSession | None, IndexRow | None]:
        """The stored session and its due index row as stored, read in one snapshot."""

    def load_checked(
        self, session_id: str
    ) -> tuple[StoredSession | None, IndexRow | None, tuple[object, object] | None]:
        """The stored session, its due index row and its schedule checkpoint as stored
        (``(next_seq, state)``; ``None`` when absent), read in one snapshot."""

    def schedule_states(self, session_ids: Sequence[str]) -> dict[str, SessionProjection]:
        """Each stored session's durable projection (sessions not stored are left out)."""

    def close(self) -> None:
        """Release the store's connections; idempotent."""

    def __enter__(self) -> Self:
        """The reader itself."""

    def __exit__(self, *exc: object) -> None:
        """Close it."""


@overload
def open_store(
    spec: str | os.PathLike[str],
    *,
    create: bool = ...,
    lease_wait: float = ...,
    read_only: Literal[False] = ...,
    allow_shared_store: bool = ...,
    program: str | None = ...,
) -> EventStore: ...


@overload
def open_store(spec: str | os.PathLike[str], *, read_only: Literal[True]) -> StoreReader: ...


@overload
def open_store(
    spec: str | os.PathLike[str],
    *,
    create: bool = ...,
    lease_wait: float = ...,
    read_only: bool,
    allow_shared_store: bool = ...,
    program: str | None = ...,
) -> EventStore | StoreReader: ...


def open_store(
    spec: str | os.PathLike[str],
    *,
    create: bool = True,
    lease_wait: float = 0.0,
    read_only: bool = False,
    allow_shared_store: bool = False,
    program: str | None = None,
) -> EventStore | StoreReader:
    """Open the session store named by ``spec``: an :class:`EventStore`, or a reader.

    A ``postgresql://…`` URL opens a ``PostgresEventStore`` (needs the ``postgres``
    extra; ``lease_wait``: how long to wait for a lease held elsewhere); anything else
    is an SQLite file (``create``: make it if missing; a store other local users can
    reach is refused with ``SharedStoreError`` unless ``allow_shared_store``).
    ``read_only=True`` opens a :class:`StoreReader` that writes, migrates and locks
    nothing (``StoreMissingError`` for a missing or empty store; a shared one is only
    warned about). Any other connection string is refused with :class:`StoreError`.
    ``program`` names the program in the store's holder records (see
    :func:`~host_bridge.embedded.stores.new_owner`; a reader holds nothing).
    """
    if not is_postgres_url(spec) and names_a_connection(spec):
        assert isinstance(spec, str)
        raise StoreError(
            f"the session store {redact_url(spec)} looks like a connection string: a PostgreSQL "
            "store needs a postgresql:// or postgres:// URL (for an SQLite file of that name, "
            "start it with ./)"
        )
    if is_postgres_url(spec):
        assert isinstance(spec, str)
        try:
            from host_bridge.embedded.stores._postgres import (
                PostgresEventStore,
                PostgresStoreReader,
            )
        except ImportError as error:  # pragma: no cover - depends on the installation
            raise StoreError(
                "a postgresql:// store needs psycopg 3: pip install 'dsh-tool-schedule[postgres]'"
                f" ({error})"
            ) from None
        if read_only:
            return PostgresStoreReader(spec)
        return PostgresEventStore(spec, lease_wait=lease_wait, program=program)
    if read_only:
        from host_bridge.embedded.stores._sqlite_reader import SqliteStoreReader

        return SqliteStoreReader(spec)
    return SqliteEventStore(
        spec, create=create, allow_shared_store=allow_shared_store, program=program
    )
