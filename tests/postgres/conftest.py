"""Fixtures of the PostgreSQL store tests: the stores a test opened, closed at teardown.

The server and the per-test databases (``pg_server``, ``pg_url``) come from
``tests.pg_server``, registered for the whole suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from host_bridge.embedded.stores import PostgresEventStore


@pytest.fixture
def stores(pg_url: str) -> Iterator[list[PostgresEventStore]]:
    """PostgreSQL stores a test opened (with ``helpers.open_pg``), closed at teardown."""
    opened: list[PostgresEventStore] = []
    yield opened
    for store in opened:
        if not store.closed:
            store.close()
