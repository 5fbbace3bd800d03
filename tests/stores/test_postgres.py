"""The store contract on PostgreSQL: a database per test, edited behind the store's back."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from tests.stores.backends import POSTGRES_SCHEMA_VERSION, PostgresEventStore, Store
from tests.stores.checkpoints import CheckpointContract
from tests.stores.claims import ClaimContract
from tests.stores.contract import StoreContract
from tests.stores.cron import CronContract
from tests.stores.due_index import DueIndexContract
from tests.stores.wants import WantContract

psycopg = pytest.importorskip("psycopg")


class TestPostgresStore(
    StoreContract, DueIndexContract, CheckpointContract, ClaimContract, CronContract, WantContract
):
    """Every case of the store contract, its due index, checkpoints, batch claims, cron
    records and hand-over requests, on a PostgreSQL database."""

    store_class: ClassVar[type[Store]] = PostgresEventStore
    schema_version = POSTGRES_SCHEMA_VERSION
    due_index_version = 2
    conflict_category = "UniqueViolation 23505"
    flush_confirms_lease = True  # a preflight asks the database, even with nothing queued
    # The lease may go with its connection at close, before the writer asks for it.
    events_after_a_stuck_close: ClassVar[tuple[int, ...]] = (1, 2)
    location: str

    def new_location(self, request: pytest.FixtureRequest) -> str:
        url: str = request.getfixturevalue("pg_url")
        return url

    def construct(self, **options: Any) -> Store:
        return PostgresEventStore(self.location, **options)

    def collide_want_keys(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from host_bridge.embedded.stores import _postgres  # needs the postgres extra

        monkeypatch.setattr(_postgres, "want_key", lambda session_id: 7)

    def wait_gone(self, backend_pid: int) -> None:
        # the server ends a dead client's backend once it sees the closed socket: wait for it
        self.sql("SELECT pg_terminate_backend(?, 60000)", backend_pid)

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.location, autocommit=True) as conn:
            cursor = conn.execute(statement.replace("?", "%s"), params)
            return list(cursor.fetchall()) if cursor.description else []

    def write_previous_schema(self, events: list[tuple[str, int, str, bytes]]) -> None:
        statements = [
            "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)",
            "CREATE TABLE sessions(id TEXT PRIMARY KEY, seed_length BIGINT,"
            " parent_session TEXT, created_at BIGINT)",
            "CREATE TABLE events(session_id TEXT, seq BIGINT, type TEXT, time BIGINT,"
            " data BYTEA, PRIMARY KEY(session_id, seq))",
            "CREATE TABLE leases(session_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL,"
            " owner TEXT, acquired_at TIMESTAMPTZ)",
            "INSERT INTO meta VALUES ('schema_version', '1')",
        ]
        for statement in statements:
            self.sql(statement)
        for session_id in sorted({e[0] for e in events}):
            self.sql("INSERT INTO sessions VALUES (?, NULL, NULL, 1)", session_id)
        for session_id, seq, type_, payload in events:
            self.sql("INSERT INTO events VALUES (?, ?, ?, 1, ?)", session_id, seq, type_, payload)
