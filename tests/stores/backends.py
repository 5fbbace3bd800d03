"""The store classes, errors and projection types under test, imported in this one place."""

from __future__ import annotations

from host_bridge.embedded import event_store as writer_module
from host_bridge.embedded import sqlite_store as sqlite_module
from host_bridge.embedded.due_index import DueEntry, IndexRow, project_session
from host_bridge.embedded.event_store import EventStore as Store
from host_bridge.embedded.postgres_store import SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION
from host_bridge.embedded.postgres_store import PostgresEventStore
from host_bridge.embedded.sqlite_store import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION
from host_bridge.embedded.sqlite_store import SqliteEventStore
from host_bridge.embedded.store_errors import (
    SessionLeaseError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreVersionError,
    StoreWriteError,
)
from host_bridge.embedded.store_rows import StoredSession
from host_bridge.embedded.stores import StoreReader, open_store

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
