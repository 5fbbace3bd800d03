"""``cron`` records in a store's due index and schedule checkpoints, on SQLite and PostgreSQL.

A checkpoint taken with an active cron record (fresh, or advanced by
dispatches) reads back equal to the fold of its log; reads from it and the tail
after it give the full fold's state; the due index holds the record's current
target and a claim takes the session at that target, never before; ``reindex``
rebuilds both; and ``verify`` finds nothing wrong, also when the stored target
is no occurrence under the installed zone rules (tzdata changed).

The zone data stamp: every whole build of the index records the installed
``tzdata`` version in ``meta``; a writable open under another version rebuilds
the index (and the checkpoints) and records it again, and ``verify`` takes a
cron session's row computed with other zone data as a note, not a problem.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import pytest
import tzdata  # type: ignore[import-untyped]

from host_bridge.cli._verify import REFRESH_HINT, REINDEX_HINT, SessionVerdict, verify_session
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.inbox import INBOX_EVENT
from host_bridge.embedded.stores import ZoneDataCheck, zone_data_version
from host_bridge.embedded.stores._checkpoints import decode_checkpoint, encode_checkpoint
from host_bridge.embedded.stores._zone_data import ZONE_REFRESH_LOG
from host_bridge.protocols import SessionEvent
from messages._fold import fold_schedule_events
from messages._instant import format_instant
from messages._records import SCHEDULE_CHANGE_TYPE, CronRecord
from tests.cron_records import cron_create, cron_dispatch, next_after, zone_data_moved
from tests.stores.backends import DueEntry, open_store
from tests.stores.case import TIMEOUT, StoreCase
from tests.stores.checkpoints import PERSON, REMINDER, projection, same
from tests.stores.due_index import T0, Log, at, delete, every, new_log

MINUTE = 60_000
HOUR = 60 * MINUTE
WEEKDAYS, SHANGHAI = "0 9 * * 1-5", "Asia/Shanghai"
FIRST = next_after(WEEKDAYS, SHANGHAI, T0)
"""The first weekday 09:00 in Shanghai after ``T0``."""
NEWER = "2099z"
"""The version of a ``tzdata`` release newer than any installed one."""


def tzdata_release(monkeypatch: pytest.MonkeyPatch, version: str = NEWER) -> None:
    """Run as if ``tzdata`` ``version`` were installed (what the stores stamp and compare)."""
    monkeypatch.setattr(tzdata, "IANA_VERSION", version)


def shanghai_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``tzdata`` release (:data:`NEWER`) that moved Shanghai to +07:00 is installed."""
    zone_data_moved(monkeypatch, SHANGHAI, "Asia/Bangkok")
    tzdata_release(monkeypatch)


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


class CronContract(StoreCase):
    """The cron cases, on whichever backend the concrete class gives."""

    def checkpoint_row(self, session_id: str) -> tuple[Any, bytes] | None:
        rows = self.sql(
            "SELECT next_seq, state FROM schedule_checkpoints WHERE session_id = ?", session_id
        )
        return (rows[0][0], bytes(rows[0][1])) if rows else None

    #: The first schema version of this backend with a due index.
    due_index_version: ClassVar[int]

    def verified(self, session_id: str) -> tuple[int, str | None]:
        verdict = self.verdict(session_id)
        return verdict.active, verdict.problem

    def verdict(self, session_id: str) -> SessionVerdict:
        with open_store(self.location, read_only=True) as reader:
            return verify_session(reader, session_id)

    def stamp(self) -> list[tuple[Any, ...]]:
        """The zone data rows of ``meta``, read behind the store's back."""
        return self.sql("SELECT value FROM meta WHERE key = 'zone_data'")

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
        shanghai_moved(monkeypatch)
        assert self.verified("s") == (1, None)

    # --- the zone data stamp ---------------------------------------------------------------

    def test_a_zone_data_change_is_a_note_about_the_index_row_until_it_is_rebuilt(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """As above: the note says what the index and the log say; under the same release
        the same row is a wrong one."""
        store = self.make()
        log = new_log(store, "s")
        log.change(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, FIRST))
        log.change(cron_dispatch("schedule-1", FIRST + 5_000))
        log.flush()
        installed = zone_data_version()
        shanghai_moved(monkeypatch)
        stale = next_after(WEEKDAYS, SHANGHAI, FIRST + 5_000)
        moved = next_after(WEEKDAYS, "Asia/Bangkok", FIRST + 5_000)
        assert stale != moved
        verdict = self.verdict("s")
        assert (verdict.active, verdict.problem) == (1, None)
        assert verdict.note == (
            f"due index computed with zone data {installed}, installed {NEWER} (the due index "
            f"says a reminder due {format_instant(stale)}, the log says a reminder due "
            f"{format_instant(moved)}); {REFRESH_HINT}"
        )
        tzdata_release(monkeypatch, installed)  # the same release, other rules: a wrong row
        assert self.verdict("s").problem == (
            f"the due index says a reminder due {format_instant(stale)}, the log says a "
            f"reminder due {format_instant(moved)} ({REINDEX_HINT})"
        )

    def test_creating_and_reindexing_stamp_the_installed_zone_data(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        installed = zone_data_version()
        assert installed == tzdata.IANA_VERSION
        store = self.make()
        assert self.stamp() == [(installed,)]
        assert store.zone_data_check() == ZoneDataCheck(installed, installed)
        self.sql("UPDATE meta SET value = '2000a' WHERE key = 'zone_data'")
        with open_store(self.location, read_only=True) as reader:
            assert reader.zone_data_check() == ZoneDataCheck("2000a", installed)
        assert self.stamp() == [("2000a",)]  # a reader writes nothing
        store.reindex()
        assert self.stamp() == [(installed,)]
        tzdata_release(monkeypatch)
        store.reindex()
        assert self.stamp() == [(NEWER,)]
        assert store.zone_data_check() == ZoneDataCheck(NEWER, NEWER)

    @pytest.mark.parametrize("before_the_index", [False, True])
    def test_a_migration_stamps_the_zone_data(
        self, caplog: pytest.LogCaptureFixture, before_the_index: bool
    ) -> None:
        """A migration stamps the store; an unstamped index is not rebuilt for it (a release
        that wrote no stamp wrote no cron record), one from before the index is built."""
        store = self.make()
        log = new_log(store, "s")
        log.change(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, FIRST))
        log.flush()
        store.close()
        self.sql("DROP TABLE schedule_checkpoints")
        self.sql("DELETE FROM meta WHERE key = 'zone_data'")
        previous = self.schema_version - 1
        if before_the_index:
            self.sql("DROP TABLE due_index")
            previous = self.due_index_version - 1
        else:
            self.sql("UPDATE due_index SET due_ms = 1, schedule_ms = 1")  # left as it was
        self.sql("UPDATE meta SET value = ? WHERE key = 'schema_version'", str(previous))
        with caplog.at_level(logging.INFO, logger="dsh_schedule"):
            reopened = self.make()
        assert self.stamp() == [(zone_data_version(),)]
        refreshed = [r.getMessage() for r in caplog.records if "zone data" in r.getMessage()]
        assert refreshed == []
        if before_the_index:
            assert reopened.due_entry("s") == DueEntry(FIRST, None)
            assert self.verified("s") == (1, None)
        else:
            assert reopened.due_entry("s") == DueEntry(1, None)  # not rebuilt

    def test_an_open_under_other_zone_data_rebuilds_the_index_and_stamps_it_again(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        store = self.make()
        log = new_log(store, "s")
        log.change(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, FIRST))
        log.change(cron_dispatch("schedule-1", FIRST + 5_000))
        log.add(INBOX_EVENT, REMINDER)  # a reminder turn owed: the rebuild keeps it
        every_log = new_log(store, "other")
        every_log.change(every("schedule-1", T0 + HOUR))
        log.flush()
        every_log.flush()
        store.close()
        installed = zone_data_version()
        stale = next_after(WEEKDAYS, SHANGHAI, FIRST + 5_000)
        moved = next_after(WEEKDAYS, "Asia/Bangkok", FIRST + 5_000)
        zone_data_moved(monkeypatch, SHANGHAI, "Asia/Bangkok")
        same_release = self.make()  # the stamp decides: the same release rebuilds nothing
        assert same_release.due_entry("s") == DueEntry(stale, T0)
        same_release.close()
        tzdata_release(monkeypatch)
        with caplog.at_level(logging.INFO, logger="dsh_schedule"):
            reopened = self.make()
        assert reopened.due_entries() == {
            "s": DueEntry(moved, T0),
            "other": DueEntry(T0 + HOUR, None),
        }
        assert self.stamp() == [(NEWER,)]
        refreshed = [r.getMessage() for r in caplog.records if "zone data" in r.getMessage()]
        assert refreshed == [ZONE_REFRESH_LOG % (reopened.label, installed, NEWER, 2)]
        assert self.verified("s") == (1, None)  # the checkpoint was rebuilt with the index
        assert self.verdict("s").note is None
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="dsh_schedule"):
            self.make()
        assert not [r for r in caplog.records if "zone data" in r.getMessage()]

    def test_verify_with_other_zone_data_notes_only_a_cron_sessions_reminder_target(
        self,
    ) -> None:
        """A row computed with other zone data can differ in a cron target, nothing else."""
        store = self.make()
        cron = cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, FIRST)
        sessions: dict[str, list[tuple[str, dict[str, Any]]]] = {
            "cron": [(SCHEDULE_CHANGE_TYPE, cron)],
            "cron-owed": [(SCHEDULE_CHANGE_TYPE, cron), (INBOX_EVENT, REMINDER)],
            "cron-unsound": [(SCHEDULE_CHANGE_TYPE, cron)],
            "cron-deleted": [
                (SCHEDULE_CHANGE_TYPE, cron),
                (SCHEDULE_CHANGE_TYPE, at("schedule-2", FIRST)),
                (SCHEDULE_CHANGE_TYPE, delete("schedule-1")),
            ],
            "every": [(SCHEDULE_CHANGE_TYPE, every("schedule-1", FIRST))],
            "cron-missing": [(SCHEDULE_CHANGE_TYPE, cron)],
            "cron-after-an-at": [
                (SCHEDULE_CHANGE_TYPE, cron),
                (SCHEDULE_CHANGE_TYPE, at("schedule-2", FIRST + HOUR)),
            ],
        }
        for session_id, events in sessions.items():
            log = new_log(store, session_id)
            for type_, data in events:
                log.add(type_, data)
            log.flush()
        moved = FIRST - HOUR
        for statement in (
            f"UPDATE due_index SET due_ms = {moved}, schedule_ms = {moved}"
            " WHERE session_id IN ('cron', 'cron-deleted', 'every')",
            f"UPDATE due_index SET due_ms = {moved}, inbox_ms = {moved}"
            " WHERE session_id = 'cron-owed'",
            f"UPDATE due_index SET due_ms = {moved} WHERE session_id = 'cron-unsound'",
            "DELETE FROM due_index WHERE session_id = 'cron-missing'",
            # No zone data moves the at record's target: a row later than it is wrong.
            f"UPDATE due_index SET due_ms = {FIRST + 2 * HOUR}, schedule_ms = {FIRST + 2 * HOUR}"
            " WHERE session_id = 'cron-after-an-at'",
            "UPDATE meta SET value = '2024a' WHERE key = 'zone_data'",
        ):
            self.sql(statement)
        installed = zone_data_version()
        due, was = format_instant(FIRST), format_instant(moved)
        with open_store(self.location, read_only=True) as reader:
            found = {s: verify_session(reader, s) for s in sessions}
        noted = {s: v.note for s, v in found.items() if v.note is not None}
        assert noted == {
            "cron": f"due index computed with zone data 2024a, installed {installed} (the due "
            f"index says a reminder due {was}, the log says a reminder due {due}); "
            f"{REFRESH_HINT}"
        }
        problems = {s: v.problem for s, v in found.items() if v.problem is not None}
        assert problems == {
            "cron-owed": f"the due index says a reminder due {due} and a reminder turn owed "
            f"since {was}, the log says a reminder due {due} and a reminder turn owed since "
            f"{format_instant(T0)} ({REINDEX_HINT})",
            "cron-unsound": f"the due index row is inconsistent: its due_ms says {was}, its "
            f"schedule_ms and inbox_ms say {due} ({REINDEX_HINT})",
            "cron-deleted": f"the due index says a reminder due {was}, the log says a reminder "
            f"due {due} ({REINDEX_HINT})",
            "every": f"the due index says a reminder due {was}, the log says a reminder due "
            f"{due} ({REINDEX_HINT})",
            "cron-missing": f"the due index says nothing due, the log says a reminder due {due} "
            f"({REINDEX_HINT})",
            "cron-after-an-at": "the due index says a reminder due "
            f"{format_instant(FIRST + 2 * HOUR)}, the log says a reminder due {due} "
            f"({REINDEX_HINT})",
        }
        self.sql("DELETE FROM meta WHERE key = 'zone_data'")
        unrecorded = self.verdict("cron")
        assert unrecorded.problem is None
        assert unrecorded.note is not None
        assert unrecorded.note.startswith(
            f"due index computed with zone data of an unrecorded version, installed {installed} "
        )
        self.sql("INSERT INTO meta(key, value) VALUES ('zone_data', ?)", installed)
        same = self.verdict("cron")
        assert (same.problem, same.note) == (
            f"the due index says a reminder due {was}, the log says a reminder due {due} "
            f"({REINDEX_HINT})",
            None,
        )
