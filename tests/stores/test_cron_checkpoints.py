"""``cron`` records in a store's due index and schedule checkpoints, on SQLite and PostgreSQL.

A checkpoint taken with an active cron record (fresh, or advanced by
dispatches) reads back equal to the fold of its log; reads from it and the tail
after it give the full fold's state; the due index holds the record's current
target and a claim takes the session at that target, never before; ``reindex``
rebuilds both; and ``verify`` finds nothing wrong, also when the stored target
is no occurrence under the installed zone rules (tzdata changed).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any, ClassVar

import pytest

from host_bridge.cli._verify import verify_session
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.inbox import INBOX_EVENT
from host_bridge.embedded.stores._checkpoints import decode_checkpoint, encode_checkpoint
from host_bridge.protocols import SessionEvent
from messages._fold import fold_schedule_events
from messages._instant import format_instant
from messages._records import SCHEDULE_CHANGE_TYPE, CronRecord
from tests.cron_records import cron_create, cron_dispatch, next_after, zone_data_moved
from tests.stores.backends import DueEntry, PostgresEventStore, SqliteEventStore, Store, open_store
from tests.stores.case import TIMEOUT, StoreCase
from tests.stores.checkpoints import PERSON, projection, same
from tests.stores.due_index import T0, Log, every, new_log

MINUTE = 60_000
HOUR = 60 * MINUTE
WEEKDAYS, SHANGHAI = "0 9 * * 1-5", "Asia/Shanghai"
FIRST = next_after(WEEKDAYS, SHANGHAI, T0)
"""The first weekday 09:00 in Shanghai after ``T0``."""


def advanced_log(log: Log) -> int:
    """A cron record created, dispatched twice (once late), and an ``every`` record beside it.

    Returns the cron record's current target.
    """
    log.change(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, FIRST))
    log.add("message", {"role": "user", "content": "noted"})
    log.change(every("schedule-2", T0 + HOUR))
    log.change(cron_dispatch("schedule-1", FIRST + 3 * HOUR))  # accepted three hours late
    second = next_after(WEEKDAYS, SHANGHAI, FIRST + 3 * HOUR)
    log.change(cron_dispatch("schedule-1", second))
    return next_after(WEEKDAYS, SHANGHAI, second)


class CronStoreCases(StoreCase):
    """The cron cases, on whichever backend the concrete class gives."""

    def checkpoint_row(self, session_id: str) -> tuple[Any, bytes] | None:
        rows = self.sql(
            "SELECT next_seq, state FROM schedule_checkpoints WHERE session_id = ?", session_id
        )
        return (rows[0][0], bytes(rows[0][1])) if rows else None

    def verified(self, session_id: str) -> tuple[int, str | None]:
        with open_store(self.location, read_only=True) as reader:
            verdict = verify_session(reader, session_id)
        return verdict.active, verdict.problem

    def test_a_checkpoint_with_an_advanced_cron_record_reads_back_equal(self) -> None:
        store = self.make()
        log = new_log(store, "s")
        target = advanced_log(log)
        log.flush()
        row = self.checkpoint_row("s")
        assert row is not None and row[0] == 5
        stored = decode_checkpoint(*row)
        assert same(stored, projection(store, "s"))
        assert stored.folded is not None
        cron, _ = stored.folded.active
        assert cron == CronRecord(
            "schedule-1", "standup", WEEKDAYS, SHANGHAI, format_instant(target)
        )
        assert cron.target_ms == target
        again = decode_checkpoint(row[0], encode_checkpoint(stored))
        assert same(again, stored)  # encoded again, it reads back the same
        assert store.due_entry("s") == DueEntry(min(target, T0 + HOUR), None)
        assert self.verified("s") == (2, None)

    def test_reads_from_a_cron_checkpoint_and_its_tail_equal_the_full_fold(self) -> None:
        store = self.make()
        log = new_log(store, "s")
        target = advanced_log(log)
        log.flush()
        before = self.checkpoint_row("s")
        # a told append leaves the checkpoint behind: the read folds it and the tail after it
        change = cron_dispatch("schedule-1", target + 5 * MINUTE)
        following = next_after(WEEKDAYS, SHANGHAI, target + 5 * MINUTE)
        event = SessionEvent(SCHEDULE_CHANGE_TYPE, log.seq, T0, change)
        store.record_append("s", event, encode_payload(change), schedule_due_ms=T0 + HOUR)
        log.seq += 1
        log.flush()
        assert self.checkpoint_row("s") == before
        reader = self.make()
        state = reader.schedule_state("s")
        assert state is not None and same(state, projection(reader, "s"))
        assert state.folded is not None
        assert [r.target_ms for r in state.folded.active] == [following, T0 + HOUR]
        loaded = reader.load("s")
        assert loaded is not None
        full = fold_schedule_events(loaded.events)
        assert state.folded.active == full.active  # (a projection's fold skips other events)
        again = reader.schedule_states(["s"])["s"].folded
        assert again is not None and again.active == full.active
        assert self.verified("s") == (2, None)

    def test_the_due_index_holds_a_cron_target_and_a_claim_takes_it_there_never_before(
        self,
    ) -> None:
        writer = self.make()
        log = new_log(writer, "s")
        log.change(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, FIRST))
        log.flush()
        writer.release_session("s")
        assert writer.due_entries() == {"s": DueEntry(FIRST, None)}
        store = self.make()
        assert store.claim_due_sessions(FIRST - 1, 10) == []
        assert store.claim_due_sessions(FIRST, 10) == ["s"]
        Log(store, "s", seq=1).change(cron_dispatch("schedule-1", FIRST + 2_000))
        assert store.flush("s").result(TIMEOUT) is True
        following = next_after(WEEKDAYS, SHANGHAI, FIRST + 2_000)
        assert store.due_entry("s") == DueEntry(following, None)
        store.release_sessions(["s"])
        assert store.claim_due_sessions(following - 1, 10) == []

    def test_reindex_rebuilds_a_cron_sessions_row_and_checkpoint(self) -> None:
        store = self.make()
        log = new_log(store, "s")
        target = advanced_log(log)
        log.change(cron_create("schedule-3", "odd", "30 7 * * *", "Europe/London", T0 + 7))
        log.add(INBOX_EVENT, PERSON)
        log.flush()
        expected_row, expected_checkpoint = store.due_entry("s"), self.checkpoint_row("s")
        assert expected_row == DueEntry(min(target, T0 + 7), None)
        self.sql("DELETE FROM due_index")
        self.sql("DELETE FROM schedule_checkpoints")
        assert store.reindex() == 1
        assert store.due_entry("s") == expected_row
        rebuilt = self.checkpoint_row("s")
        assert rebuilt is not None and expected_checkpoint is not None
        assert same(decode_checkpoint(*rebuilt), decode_checkpoint(*expected_checkpoint))
        assert self.verified("s") == (3, None)

    @pytest.mark.parametrize(
        ("expression", "zone", "offset_ms"),
        [
            ("0 9 * * *", SHANGHAI, 7 * MINUTE),  # 09:07, an odd minute
            ("0 9 * * *", SHANGHAI, -HOUR),  # as if the zone's offset had been +09:00
            ("*/5 * * * *", "UTC", 1),  # not even on a minute
        ],
    )
    def test_a_stored_cron_target_off_the_zone_rules_verifies_and_is_indexed_there(
        self, expression: str, zone: str, offset_ms: int
    ) -> None:
        store = self.make()
        log = new_log(store, "s")
        stored = next_after(expression, zone, T0) + offset_ms
        log.change(cron_create("schedule-1", "pills", expression, zone, stored))
        log.flush()
        assert store.due_entry("s") == DueEntry(stored, None)
        assert self.verified("s") == (1, None)
        log.change(cron_dispatch("schedule-1", stored))  # delivered at the stored target
        log.flush()
        following = next_after(expression, zone, stored)
        assert store.due_entry("s") == DueEntry(following, None)  # a real occurrence next
        assert self.verified("s") == (1, None)
        row = self.checkpoint_row("s")
        assert row is not None
        state = decode_checkpoint(*row)
        assert state.folded is not None
        assert [r.target_ms for r in state.folded.active] == [following]

    @pytest.mark.xfail(
        strict=True,
        reason="known gap: the due index row and checkpoint keep targets derived under the "
        "zone data they were written with, and verify reports them as wrong",
    )
    def test_a_zone_data_change_is_not_reported_as_a_wrong_index_or_checkpoint(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The store was written under +08:00 rules; a tzdata release moved Shanghai to +07:00."""
        store = self.make()
        log = new_log(store, "s")
        log.change(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, FIRST))
        log.change(cron_dispatch("schedule-1", FIRST + 5_000))
        log.flush()
        assert self.verified("s") == (1, None)
        zone_data_moved(monkeypatch, SHANGHAI, "Asia/Bangkok")
        assert self.verified("s") == (1, None)


class TestSqliteCron(CronStoreCases):
    """The cron cases on an SQLite file."""

    store_class: ClassVar[type[Store]] = SqliteEventStore

    def new_location(self, request: pytest.FixtureRequest) -> str:
        return str(request.getfixturevalue("tmp_path") / "sessions.sqlite3")

    def construct(self, **options: Any) -> Store:
        return SqliteEventStore(self.location, **options)

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.location, isolation_level=None)) as conn:
            return list(conn.execute(statement, params))


class TestPostgresCron(CronStoreCases):
    """The cron cases on a PostgreSQL database (skipped without a server, as the contract)."""

    store_class: ClassVar[type[Store]] = PostgresEventStore

    def new_location(self, request: pytest.FixtureRequest) -> str:
        pytest.importorskip("psycopg")
        url: str = request.getfixturevalue("pg_url")
        return url

    def construct(self, **options: Any) -> Store:
        return PostgresEventStore(self.location, **options)

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.location, autocommit=True) as conn:
            cursor = conn.execute(statement.replace("?", "%s"), params)
            return list(cursor.fetchall()) if cursor.description else []
