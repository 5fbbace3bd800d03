"""The embedded host's durable session stores: SQLite and PostgreSQL, one engine.

Hosts open one with :func:`open_store` (or construct :class:`SqliteEventStore`
or :class:`PostgresEventStore`); tools that only look use a :class:`StoreReader`.
How the engine is put together: docs/storage.md.
The PostgreSQL names are imported on first use (they need the ``postgres`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from host_bridge.embedded.stores._checkpoints import checkpoint_problem
from host_bridge.embedded.stores._due import (
    DueEntry,
    IndexRow,
    SessionProjection,
    index_problem,
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
from host_bridge.embedded.stores._locks import SessionLockFile, lock_offset, ofd_locks_available
from host_bridge.embedded.stores._open import StoreReader, open_store
from host_bridge.embedded.stores._rows import StoredSession, show_id
from host_bridge.embedded.stores._sqlite import (
    BUSY_TIMEOUT_MS,
    SCHEMA_VERSION,
    SqliteEventStore,
    check_write_lock,
)
from host_bridge.embedded.stores._sqlite_reader import SqliteStoreReader
from host_bridge.embedded.stores._store import (
    DEFAULT_PROGRAM,
    EventStore,
    Holder,
    new_owner,
    parse_holder,
)
from host_bridge.embedded.stores._zone_data import ZONE_DATA_KEY, ZoneDataCheck, zone_data_version

if TYPE_CHECKING:
    from host_bridge.embedded.stores._postgres import (
        PG_SCHEMA_VERSION,
        PostgresEventStore,
        PostgresStoreReader,
    )

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DEFAULT_PROGRAM",
    "PG_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "ZONE_DATA_KEY",
    "DueEntry",
    "EventStore",
    "Holder",
    "IndexRow",
    "PostgresEventStore",
    "PostgresStoreReader",
    "SessionLeaseError",
    "SessionLockFile",
    "SessionProjection",
    "SharedStoreError",
    "SqliteEventStore",
    "SqliteStoreReader",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreMissingError",
    "StoreReader",
    "StoreVersionError",
    "StoreWriteError",
    "StoredSession",
    "ZoneDataCheck",
    "check_write_lock",
    "checkpoint_problem",
    "index_problem",
    "lock_offset",
    "new_owner",
    "ofd_locks_available",
    "open_store",
    "parse_holder",
    "project_session",
    "show_id",
    "zone_data_version",
]

_POSTGRES_NAMES = frozenset({"PG_SCHEMA_VERSION", "PostgresEventStore", "PostgresStoreReader"})


def __getattr__(name: str) -> Any:
    """Import the PostgreSQL backend when one of its names is first asked for."""
    if name in _POSTGRES_NAMES:
        from host_bridge.embedded.stores import _postgres

        return getattr(_postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
