"""The store classes, errors and projection types under test, imported in this one place."""

from __future__ import annotations

from host_bridge.embedded.stores import (
    PG_SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION,
)
from host_bridge.embedded.stores import (
    SCHEMA_VERSION as SQLITE_SCHEMA_VERSION,
)
from host_bridge.embedded.stores import (
    DueEntry,
    IndexRow,
    PostgresEventStore,
    SessionLeaseError,
    SqliteEventStore,
    StoreClosedError,
    StoreCorruptError,
    StoredSession,
    StoreError,
    StoreReader,
    StoreVersionError,
    StoreWriteError,
    open_store,
    project_session,
)
from host_bridge.embedded.stores import EventStore as Store
from host_bridge.embedded.stores import _sqlite as sqlite_module
from host_bridge.embedded.stores import _writer as writer_module

__all__ = [
    "POSTGRES_SCHEMA_VERSION",
    "SQLITE_SCHEMA_VERSION",
    "DueEntry",
    "IndexRow",
    "PostgresEventStore",
    "SessionLeaseError",
    "SqliteEventStore",
    "Store",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreReader",
    "StoreVersionError",
    "StoreWriteError",
    "StoredSession",
    "open_store",
    "project_session",
    "sqlite_module",
    "writer_module",
]
