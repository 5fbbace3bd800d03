"""The store contract on PostgreSQL: a database per test, edited behind the store's back."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from tests.stores.backends import PostgresEventStore, Store
from tests.stores.contract import StoreContract

psycopg = pytest.importorskip("psycopg")


class TestPostgresStore(StoreContract):
    """Every case of the store contract, on a PostgreSQL database."""

    store_class: ClassVar[type[Store]] = PostgresEventStore
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

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.location, autocommit=True) as conn:
            cursor = conn.execute(statement.replace("?", "%s"), params)
            return list(cursor.fetchall()) if cursor.description else []
