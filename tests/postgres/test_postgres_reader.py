"""The read-only PostgreSQL reader: no schema, no migration, no lease connection, no writes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

psycopg = pytest.importorskip("psycopg")

from host_bridge.embedded.codec import encode_payload  # noqa: E402
from host_bridge.embedded.stores import (  # noqa: E402  # noqa: E402
    PostgresEventStore,
    PostgresStoreReader,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreMissingError,
    StoreVersionError,
    open_store,
)
from host_bridge.protocols import SessionEvent, SessionHeader  # noqa: E402

TIMEOUT = 20.0


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    return {row[0] for row in rows}


def seeded(url: str, *session_ids: str) -> None:
    store = PostgresEventStore(url)
    try:
        for session_id in session_ids:
            store.acquire_session(session_id)
            item = SessionEvent("note", 0, 1_700_000_000_000, {"n": 0})
            store.create_session(SessionHeader(session_id), [(item, encode_payload(item.data))])
        assert store.flush_all().result(TIMEOUT) is True
    finally:
        store.close()


@pytest.fixture
def live_store(pg_url: str) -> Iterator[PostgresEventStore]:
    """A writable store holding the lease of session ``live`` meanwhile."""
    seeded(pg_url, "a", "live")
    store = PostgresEventStore(pg_url)
    store.acquire_session("live")
    yield store
    store.close()


def test_the_reader_reads_sessions_leased_elsewhere_without_a_lease_of_its_own(
    pg_url: str, live_store: PostgresEventStore
) -> None:
    with open_store(pg_url, read_only=True) as reader:
        assert isinstance(reader, PostgresStoreReader)
        assert reader.session_ids() == ["a", "live"]
        stored = reader.load("live")
        assert stored is not None and [e.data for e in stored.events] == [{"n": 0}]
        assert reader.load_header("a") == SessionHeader("a")
        assert reader.load("nope") is None
        with psycopg.connect(pg_url, autocommit=True) as conn:
            names = [
                row[0]
                for row in conn.execute(
                    "SELECT application_name FROM pg_stat_activity"
                    " WHERE datname = current_database()"
                )
            ]
        assert names.count("dsh-schedule-reader") == 1
        assert sum(name.startswith("dsh-lease ") for name in names) == 1  # the live store's only
    assert live_store.holds_lease("live")
    with pytest.raises(StoreClosedError):
        reader.session_ids()


def test_the_reader_session_refuses_to_write(pg_url: str) -> None:
    seeded(pg_url, "a")
    reader = PostgresStoreReader(pg_url)
    try:
        conn = reader._conn  # the reader's own connection: read-only by default
        assert conn is not None
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("DELETE FROM sessions")
    finally:
        reader.close()
    assert tables(pg_url) >= {"sessions", "events"}


def test_an_empty_database_is_missing_and_stays_empty(pg_url: str) -> None:
    with pytest.raises(StoreMissingError, match="there is no session store in"):
        PostgresStoreReader(pg_url)
    assert tables(pg_url) == set()


def test_a_newer_or_foreign_schema_is_refused_unchanged(pg_url: str) -> None:
    seeded(pg_url, "a")
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreVersionError, match="schema version 99"):
        PostgresStoreReader(pg_url)
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE meta SET value = 'x' WHERE key = 'schema_version'")
    with pytest.raises(StoreCorruptError, match="no valid schema_version"):
        PostgresStoreReader(pg_url)
    with psycopg.connect(pg_url) as conn:
        conn.execute("DROP TABLE meta")
    with pytest.raises(StoreError, match="not a dsh-schedule store"):
        PostgresStoreReader(pg_url)


def test_an_unreachable_server_is_one_clear_error(pg_url: str) -> None:
    url = "postgresql://postgres@127.0.0.1:1/nothing"
    with pytest.raises(StoreError, match=r"cannot connect to the session store .*127\.0\.0\.1:1"):
        PostgresStoreReader(url)
