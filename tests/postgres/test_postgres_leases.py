"""PostgreSQL leases: every preflight confirms the lease in the database; a lost one is seen."""

from __future__ import annotations

import logging
import threading

import pytest

psycopg = pytest.importorskip("psycopg")

from host_bridge.embedded.codec import encode_payload  # noqa: E402
from host_bridge.embedded.sessions import EmbeddedSessionStore  # noqa: E402
from host_bridge.embedded.stores import (  # noqa: E402
    PostgresEventStore,
    SessionLeaseError,
    StoreWriteError,
)
from host_bridge.protocols import SessionHeader  # noqa: E402
from tests.postgres.helpers import append, open_pg  # noqa: E402

TIMEOUT = 20.0


def terminate_lease_connection(url: str, store: PostgresEventStore) -> None:
    """What a network cut or a failover does to the store's lease connection."""
    with psycopg.connect(url, autocommit=True) as admin:
        (done,) = admin.execute(
            "SELECT pg_terminate_backend(%s, 10000)", (store.lease_backend_pid,)
        ).fetchone()
    assert done is True


def lease_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and "lost the lease" in r.getMessage()
    ]


def test_a_lost_lease_connection_fails_the_next_preflight_with_nothing_queued(
    pg_url: str, stores: list[PostgresEventStore], caplog: pytest.LogCaptureFixture
) -> None:
    store = open_pg(pg_url, stores)
    sessions = EmbeddedSessionStore(store)
    live = sessions.create("s")
    live.append("note", 1)
    assert sessions.flush(live).result(TIMEOUT) is True
    assert sessions.flush(live).result(TIMEOUT) is True  # nothing queued: still asked
    assert not live.lease_lost

    terminate_lease_connection(pg_url, store)
    with caplog.at_level(logging.ERROR, logger="dsh_schedule"):
        assert sessions.flush(live).result(TIMEOUT) is False  # not an exception
        assert sessions.flush(live).result(TIMEOUT) is False
    assert live.lease_lost and store.lease_lost("s") and not store.holds_lease("s")
    assert len(lease_errors(caplog)) == 1  # logged once
    assert "lease connection was closed" in lease_errors(caplog)[0]
    assert not [r for r in caplog.records if r.exc_info]
    with pytest.raises(SessionLeaseError, match="lost the lease"):
        live.append("note", 2)
    assert [e.data for e in live.events] == [1]
    sessions.close()


def test_a_session_taken_over_elsewhere_gets_nothing_of_ours(
    pg_url: str, stores: list[PostgresEventStore]
) -> None:
    old = open_pg(pg_url, stores)
    old_sessions = EmbeddedSessionStore(old)
    live = old_sessions.create("s")
    live.append("note", "durable")
    assert old_sessions.flush(live).result(TIMEOUT) is True
    live.append("note", "queued, never to be written")  # accepted before the loss is known
    terminate_lease_connection(pg_url, old)

    new = open_pg(pg_url, stores, lease_wait=10)
    new_sessions = EmbeddedSessionStore(new)
    taken = new_sessions.resume("s")
    taken.append("note", "the new owner's")
    assert new_sessions.flush(taken).result(TIMEOUT) is True

    assert old_sessions.flush(live).result(TIMEOUT) is False
    assert live.lease_lost
    with pytest.raises(SessionLeaseError):
        live.append("note", "refused")
    assert old.pending_rows == 0  # discarded, not retried
    stored = new.load("s")
    assert stored is not None
    assert [e.data for e in stored.events] == ["durable", "the new owner's"]
    assert not taken.lease_lost
    new_sessions.close()
    old_sessions.close()


def test_concurrent_preflights_share_one_lease_check(
    pg_url: str, stores: list[PostgresEventStore]
) -> None:
    entered = threading.Event()
    release = threading.Event()
    blocked = [False]

    def hook() -> None:
        if blocked[0]:
            blocked[0] = False
            entered.set()
            assert release.wait(TIMEOUT)

    store = open_pg(pg_url, stores, fault_hook=hook)
    ids = [f"idle-{n}" for n in range(30)]
    for session_id in ["busy", *ids]:
        store.acquire_session(session_id)
        store.create_session(SessionHeader(session_id))
    assert store.flush_all().result(TIMEOUT) is True
    blocked[0] = True  # the next round with rows stops inside its transaction
    append(store, "busy", 0)
    busy = store.flush("busy")
    assert entered.wait(TIMEOUT)  # the writer is inside a round
    preflights = [store.flush(session_id) for session_id in ids]  # nothing queued for them
    assert not any(f.done() for f in preflights)  # each waits for the database
    before = store.lease_checks
    release.set()
    assert busy.result(TIMEOUT) is True
    assert all(f.result(TIMEOUT) is True for f in preflights)
    assert store.lease_checks - before <= 2  # the blocked round, then one for all thirty


def test_every_lease_is_confirmed_and_every_holder_named_and_a_new_connection_serves_new_ones(
    pg_url: str, stores: list[PostgresEventStore]
) -> None:
    store = open_pg(pg_url, stores)
    other = open_pg(pg_url, stores)
    ids = [f"key-{n}" for n in range(40)]
    with psycopg.connect(pg_url) as conn:
        signs = {
            row[0] < 0
            for row in conn.execute(
                "SELECT hashtextextended(id, 0) FROM unnest(%s::text[]) AS t(id)", (ids,)
            )
        }
    assert signs == {True, False}  # negative and positive advisory keys are both covered
    for session_id in ids:
        store.acquire_session(session_id)
        assert store.flush(session_id).result(TIMEOUT) is True
        with pytest.raises(SessionLeaseError) as refused:
            other.acquire_session(session_id)
        assert refused.value.holder == store.owner  # found from the lock's connection
    terminate_lease_connection(pg_url, store)
    assert store.flush("key-0").result(TIMEOUT) is False
    # Every lease of the dead connection is lost; a new session is leased on a new one.
    epoch = store.acquire_session("fresh")
    assert epoch == 1
    assert store.flush("fresh").result(TIMEOUT) is True
    assert all(store.flush(s).result(TIMEOUT) is False for s in ids[1:])
    store.create_session(SessionHeader("fresh"))
    append(store, "fresh", 0)
    assert store.flush("fresh").result(TIMEOUT) is True


def test_a_refusal_names_the_process_that_holds_the_lock(
    pg_url: str, stores: list[PostgresEventStore]
) -> None:
    holder = open_pg(pg_url, stores)
    other = open_pg(pg_url, stores)
    holder.acquire_session("s")
    holder.release_session("s")
    other.acquire_session("s")  # the lease row last named the first store...
    with pytest.raises(SessionLeaseError) as refused:
        holder.acquire_session("s")
    assert refused.value.holder == other.owner  # ...but the lock names the real holder


def test_a_preflight_that_cannot_reach_the_database_fails_and_the_next_one_asks_again(
    pg_url: str, stores: list[PostgresEventStore]
) -> None:
    store = open_pg(pg_url, stores)
    store.acquire_session("s")
    assert store.flush("s").result(TIMEOUT) is True
    with psycopg.connect(pg_url, autocommit=True) as admin:  # cut the writer's connection
        (cut,) = admin.execute(
            "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'dsh-schedule'"
        ).fetchone()
    assert cut == 1
    with pytest.raises(StoreWriteError, match="confirm the session's lease"):
        store.flush("s").result(TIMEOUT)  # never True without an answer from the database
    assert not store.lease_lost("s")
    assert store.flush("s").result(TIMEOUT) is True  # a new writer connection


def test_a_preflight_in_a_round_with_a_conflict_still_gets_its_answer(
    pg_url: str, stores: list[PostgresEventStore]
) -> None:
    armed = threading.Event()
    entered = threading.Event()
    release = threading.Event()

    def hook() -> None:
        if armed.is_set():
            armed.clear()
            entered.set()
            assert release.wait(TIMEOUT)

    store = open_pg(pg_url, stores, fault_hook=hook)
    for session_id in ("healthy", "poisoned", "quiet", "busy"):
        store.acquire_session(session_id)
        store.create_session(SessionHeader(session_id))
    assert store.flush_all().result(TIMEOUT) is True
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(  # another writer took the poisoned session's next seq
            "INSERT INTO events VALUES ('poisoned', 0, 'note', 1, %s)", (encode_payload(0),)
        )
        admin.execute(  # and someone bumped the quiet session's epoch (a takeover)
            "UPDATE leases SET epoch = epoch + 1 WHERE session_id = 'quiet'"
        )
    armed.set()
    append(store, "busy", 0)
    busy = store.flush("busy")
    assert entered.wait(TIMEOUT)
    append(store, "healthy", 0)
    append(store, "poisoned", 0)
    flushes = [store.flush(s) for s in ("healthy", "poisoned", "quiet")]
    release.set()
    assert busy.result(TIMEOUT) is True
    assert flushes[0].result(TIMEOUT) is True
    with pytest.raises(SessionLeaseError, match="fenced out"):
        flushes[1].result(TIMEOUT)
    assert flushes[2].result(TIMEOUT) is False  # its lease check stands: lost, not waved through
    assert store.lease_lost("quiet") and store.lease_lost("poisoned")
    assert not store.lease_lost("healthy")
