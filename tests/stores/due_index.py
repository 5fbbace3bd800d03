"""The due index cases of the store contract: kept in the same commit, rebuilt, claimed once.

A row damaged behind the store's back is found (by ``verify`` column by column,
by the waking host's audit when it is unsound in itself), claimed so that the
session's log decides, and rewritten from that log.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from abc import abstractmethod
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from host_bridge.cli._verify import REINDEX_HINT, verify_session
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT
from host_bridge.embedded.stores import zone_data_version
from host_bridge.protocols import DueSession, SessionEvent, SessionHeader
from host_bridge.testing import FakeClock, FakeTimers
from messages._instant import format_instant
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.stores.backends import (
    DueEntry,
    IndexRow,
    Store,
    StoreCorruptError,
    StoreWriteError,
    open_store,
    project_session,
)
from tests.stores.case import TIMEOUT, StoreCase

T0 = 1_800_000_000_000
YEAR_9999 = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
REMINDER_SOURCE = {"kind": "plugin", "plugin": "tool-schedule"}


class Log:
    """Appends to one session of one store and remembers the next seq."""

    def __init__(self, store: Store, session_id: str, seq: int = 0) -> None:
        self.store = store
        self.session_id = session_id
        self.seq = seq

    def add(self, type_: str, data: Any, time_ms: int = T0) -> int:
        """Append one event; its seq."""
        event = SessionEvent(type_, self.seq, time_ms, data)
        self.store.record_append(self.session_id, event, encode_payload(data))
        self.seq += 1
        return event.seq

    def change(self, data: dict[str, Any]) -> int:
        """Append one schedule change record; its seq."""
        return self.add(SCHEDULE_CHANGE_TYPE, data)

    def flush(self) -> None:
        """Flush the session; it must commit."""
        assert self.store.flush(self.session_id).result(TIMEOUT) is True


def at(schedule_id: str, due_ms: int) -> dict[str, Any]:
    """The record that creates a one-off reminder due at ``due_ms``."""
    when = format_instant(due_ms)
    schedule = {"id": schedule_id, "kind": "at", "prompt": "p", "scheduledAt": when}
    return {"version": 1, "operation": "create", "schedule": schedule}


def every(schedule_id: str, due_ms: int, seconds: int = 300) -> dict[str, Any]:
    """The record that creates a repeating reminder, first due at ``due_ms``."""
    schedule = {
        "id": schedule_id,
        "kind": "every",
        "prompt": "p",
        "everySeconds": seconds,
        "scheduledAt": format_instant(due_ms),
    }
    return {"version": 1, "operation": "create", "schedule": schedule}


def dispatch(schedule_id: str, accepted_ms: int | None = None) -> dict[str, Any]:
    """The record of a reminder's delivery (accepted at ``accepted_ms`` if given)."""
    data: dict[str, Any] = {"version": 1, "operation": "dispatch", "id": schedule_id}
    if accepted_ms is not None:
        data["acceptedAt"] = format_instant(accepted_ms)
    return data


def delete(schedule_id: str) -> dict[str, Any]:
    """The record that deletes a reminder."""
    return {"version": 1, "operation": "delete", "id": schedule_id}


def new_log(store: Store, session_id: str) -> Log:
    """Take and create a session; a :class:`Log` on it."""
    store.acquire_session(session_id)
    store.create_session(SessionHeader(session_id))
    return Log(store, session_id)


def from_log(store: Store, session_id: str) -> DueEntry | None:
    """What the index row should be, projected from the stored log."""
    stored = store.load(session_id)
    assert stored is not None
    events = ((e.seq, e.type, e.time, e.data) for e in stored.events)
    return project_session(stored.header.seed_length, events).entry()


class RaisingInt(int):
    """A clock reading that is an ``int`` but cannot be compared with one."""

    def __lt__(self, other: object) -> bool:
        raise OSError("the clock reading cannot be compared")

    __le__ = __gt__ = __ge__ = __lt__


def index_reports(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    """What the activation said about index rows (level, message)."""
    return [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == "dsh_schedule.host_bridge.embedded.activation"
        and "due index" in r.getMessage()
    ]


class DueIndexContract(StoreCase):
    """The due index cases of the store contract."""

    @abstractmethod
    def write_previous_schema(self, events: list[tuple[str, int, str, bytes]]) -> None:
        """Lay down the schema version before the due index, as an older release left it.

        Its sessions are those of ``events`` (``(session_id, seq, type, payload)``).
        """

    def test_the_migration_builds_the_index_from_the_stored_logs(self) -> None:
        rows = [
            ("a", 0, SCHEDULE_CHANGE_TYPE, at("schedule-1", T0 + 5)),
            ("a", 1, "message", {"role": "user", "content": "x"}),
            ("b", 0, SCHEDULE_CHANGE_TYPE, at("schedule-1", T0)),
            ("b", 1, SCHEDULE_CHANGE_TYPE, dispatch("schedule-1")),
        ]
        self.write_previous_schema([(s, q, t, encode_payload(d)) for s, q, t, d in rows])
        store = self.make()
        assert store.due_entries() == {"a": DueEntry(T0 + 5, None)}
        assert store.due_sessions(None, 5) == [("a", T0 + 5)]
        stamp = self.sql("SELECT value FROM meta WHERE key = 'zone_data'")
        assert stamp == [(zone_data_version(),)]  # the zone data the index was built with

    def damage(self, *statements: str) -> None:
        """Edit the due index by hand, behind the store's back."""
        for statement in statements:
            self.sql(statement)

    def raw_row(self, session_id: str) -> tuple[Any, ...] | None:
        """A session's ``(due_ms, schedule_ms, inbox_ms)`` as stored, read behind its back."""
        rows = self.sql(
            "SELECT due_ms, schedule_ms, inbox_ms FROM due_index WHERE session_id = ?", session_id
        )
        return tuple(rows[0]) if rows else None

    def test_the_index_follows_every_kind_with_each_commit(self) -> None:
        store, reader = self.make(), self.make()
        log = new_log(store, "s")
        steps: list[tuple[dict[str, Any], DueEntry | None]] = [
            (at("schedule-1", T0 + 60_000), DueEntry(T0 + 60_000, None)),
            (every("schedule-2", T0 + 30_000), DueEntry(T0 + 30_000, None)),
            (dispatch("schedule-2", T0 + 31_000), DueEntry(T0 + 60_000, None)),  # next: +330 s
            (dispatch("schedule-1"), DueEntry(T0 + 330_000, None)),
            (delete("schedule-2"), None),
        ]
        for data, expected in steps:
            log.change(data)
            log.add("message", {"role": "assistant", "content": "unrelated"})
            log.flush()
            assert reader.due_entry("s") == expected
            assert from_log(reader, "s") == expected
        assert reader.due_entries() == {}

    def test_a_failed_commit_writes_neither_the_rows_nor_their_index_row(
        self,
    ) -> None:
        failures = {"left": 1}

        def hook() -> None:
            if failures["left"]:
                failures["left"] -= 1
                raise sqlite3.OperationalError("database or disk is full")

        store, reader = self.make(fault_hook=hook), self.make()
        log = new_log(store, "s")
        log.change(at("schedule-1", T0))
        with pytest.raises(StoreWriteError):
            store.flush("s").result(TIMEOUT)
        assert reader.load("s") is None
        assert reader.due_entries() == {}  # the crash point is between insert and COMMIT
        log.flush()  # the retry commits both
        assert reader.due_entry("s") == DueEntry(T0, None)
        assert from_log(reader, "s") == DueEntry(T0, None)

    def test_a_fork_does_not_inherit_its_parents_reminders(self) -> None:
        store = self.make()
        copied = SessionEvent(SCHEDULE_CHANGE_TYPE, 0, T0, at("schedule-1", T0))
        store.acquire_session("child")
        store.create_session(
            SessionHeader("child", seed_length=1, parent_session="parent"),
            [(copied, encode_payload(copied.data))],
        )
        log = Log(store, "child", seq=1)
        log.add("message", {"role": "user", "content": "hi"})
        log.flush()
        assert store.due_entry("child") is None
        log.change(at("schedule-1", T0 + 5_000))  # the child's own schedule-1
        log.flush()
        assert store.due_entry("child") == DueEntry(T0 + 5_000, None)

    def test_an_owed_reminder_turn_makes_the_session_due_until_it_completes(
        self,
    ) -> None:
        store = self.make()
        log = new_log(store, "s")
        prompt = log.add(INBOX_EVENT, {"content": ["hello"], "source": {"kind": "user"}}, T0 - 9)
        log.flush()
        assert store.due_entry("s") is None  # a person's prompt does not wake a session
        log.change(at("schedule-1", T0))
        entry = log.add(
            INBOX_EVENT, {"content": ["[SCHEDULE REMINDER]"], "source": REMINDER_SOURCE}
        )
        log.change(dispatch("schedule-1"))
        log.flush()
        assert store.due_entry("s") == DueEntry(None, T0)  # dispatched, its turn still owed
        log.add(TURN_COMPLETED_EVENT, {"inbox": prompt, "failed": False})
        log.flush()
        assert store.due_entry("s") == DueEntry(None, T0)
        log.add(TURN_COMPLETED_EVENT, {"inbox": entry, "failed": False})
        log.flush()
        assert store.due_entry("s") is None

    def test_a_corrupt_stream_is_never_due(self) -> None:
        store = self.make()
        log = new_log(store, "s")
        log.change(at("schedule-1", T0))
        log.change(dispatch("schedule-9"))  # an inactive id: the fold breaks here
        log.flush()
        assert store.due_entry("s") is None
        assert from_log(store, "s") is None

    def test_a_new_holder_reads_the_session_once_inside_its_transaction(
        self,
    ) -> None:
        first, second = self.make(), self.make()
        log = new_log(first, "s")
        log.change(at("schedule-1", T0))
        log.change(at("schedule-2", T0 + 1_000))
        log.flush()
        first.release_session("s")
        second.acquire_session("s")
        Log(second, "s", seq=2).change(dispatch("schedule-1"))
        assert second.flush("s").result(TIMEOUT) is True
        assert second.due_projector.reads == 1
        assert first.due_entry("s") == DueEntry(T0 + 1_000, None)

    def test_due_sessions_skip_sessions_held_anywhere_and_a_claim_takes_one_once(
        self,
    ) -> None:
        owner, one, two = self.make(), self.make(), self.make()
        for session_id, due in (("early", T0), ("late", T0 + 50_000), ("future", T0 + 10**9)):
            log = new_log(owner, session_id)
            log.change(at("schedule-1", due))
            log.flush()
        assert one.due_sessions(T0 + 60_000, 10) == []  # all live in "owner"
        owner.release_session("late")
        owner.release_session("future")
        assert one.due_sessions(T0 + 60_000, 10) == [("late", T0 + 50_000)]
        assert one.next_due() == T0 + 50_000
        owner.release_session("early")
        assert one.due_sessions(T0 + 60_000, 10) == [("early", T0), ("late", T0 + 50_000)]
        assert one.due_sessions(None, 1) == [("early", T0)]
        assert one.claim_due_session("future", T0 + 60_000) is False  # not due yet
        assert not one.holds_lease("future")
        assert one.claim_due_session("early", T0) is True
        assert two.claim_due_session("early", T0) is False
        assert two.due_sessions(T0 + 60_000, 10) == [("late", T0 + 50_000)]
        assert one.due_sessions(T0 + 60_000, 10) == [("late", T0 + 50_000)]

    def stored_due(self, session_id: str = "s") -> None:
        """Store ``session_id`` with a reminder due at ``T0``; nobody holds it afterwards."""
        owner = self.make()
        log = new_log(owner, session_id)
        log.change(at("schedule-1", T0))
        log.flush()
        owner.release_session(session_id)

    @pytest.mark.parametrize("reading", [None, 1.5, math.nan, True, "x"])
    def test_a_claim_at_a_reading_that_is_not_an_int_takes_nothing(
        self, reading: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        self.stored_due()
        one, two = self.make(), self.make()
        with caplog.at_level(logging.WARNING, logger="dsh_schedule"):
            assert one.claim_due_session("s", reading) is False
        (warning,) = [r for r in caplog.records if "not claiming session" in r.getMessage()]
        assert f"the clock reading is a {type(reading).__name__}" in warning.getMessage()
        assert not one.holds_lease("s")
        assert two.claim_due_session("s", T0) is True  # nothing was left held

    @pytest.mark.parametrize("fault", ["the reading", "after the lock"])
    def test_a_claim_that_raises_gives_the_session_back(
        self, monkeypatch: pytest.MonkeyPatch, fault: str
    ) -> None:
        self.stored_due()
        one, two = self.make(), self.make()
        now: int = T0
        if fault == "the reading":
            now = RaisingInt(T0)  # SQLite compares it once the lock is taken
        else:
            acquire = one.acquire_session

            def acquire_then_raise(session_id: str) -> int:
                acquire(session_id)
                raise OSError("after the lock")

            monkeypatch.setattr(one, "acquire_session", acquire_then_raise)
        with pytest.raises(OSError):
            one.claim_due_session("s", now)
        assert not one.holds_lease("s")
        assert two.claim_due_session("s", T0) is True

    def test_reindex_rebuilds_a_damaged_index_from_the_logs(
        self,
    ) -> None:
        store = self.make()
        for session_id, due in (("a", T0), ("b", T0 + 7)):
            log = new_log(store, session_id)
            log.change(at("schedule-1", due))
            log.flush()
        expected = store.due_entries()
        self.damage(
            "DELETE FROM due_index WHERE session_id = 'a'",
            "UPDATE due_index SET due_ms = 1, schedule_ms = 1 WHERE session_id = 'b'",
            "INSERT INTO due_index VALUES ('ghost', 3, 3, NULL)",
        )
        assert store.due_entries() != expected
        assert store.reindex() == 2
        assert store.due_entries() == expected

    # --- damaged rows: found, claimed for the log to decide, rewritten from the log ------------

    def stored(self, reminders: dict[str, int]) -> None:
        """Store closed sessions, each with one ``at`` reminder due at the given time."""
        store = self.make()
        for session_id, due in reminders.items():
            log = new_log(store, session_id)
            log.change(at("schedule-1", due))
            log.flush()
        store.close()

    def test_unsound_rows_are_found_claimed_for_their_log_and_rewritten_one_by_one(
        self,
    ) -> None:
        self.stored({"moved": T0 + 5_000, "emptied": T0 + 7_000, "fine": T0 + 9_000})
        self.damage(
            f"UPDATE due_index SET due_ms = {YEAR_9999} WHERE session_id = 'moved'",
            "UPDATE due_index SET schedule_ms = NULL WHERE session_id = 'emptied'",
            "INSERT INTO due_index VALUES ('ghost', 3, 3, NULL)",  # sound, but no such session
        )
        store = self.make()
        assert sorted(store.unsound_due_rows()) == [
            ("emptied", "inconsistent: neither its schedule_ms nor its inbox_ms is set"),
            (
                "moved",
                "inconsistent: its due_ms says 9999-12-31T23:59:59.999Z, its schedule_ms and "
                f"inbox_ms say {format_instant(T0 + 5_000)}",
            ),
        ]
        assert store.due_sessions(T0 + 60_000, 10) == [
            ("ghost", 3),
            ("emptied", T0 + 7_000),
            ("fine", T0 + 9_000),
        ]  # "moved" is hidden from the listing: only the audit finds it
        with pytest.raises(StoreCorruptError, match="session 'moved' is inconsistent"):
            store.due_entry("moved")
        # An unsound row is claimed whatever its due_ms says: the log decides.
        assert store.claim_due_session("moved", T0) is True
        assert store.claim_due_session("fine", T0) is False  # a sound row is believed
        assert store.reindex_session("moved") == DueEntry(T0 + 5_000, None)
        assert store.reindex_session("ghost") is None
        assert store.unsound_due_rows() == [("emptied", mock.ANY)]
        assert store.due_row("moved") == IndexRow(T0 + 5_000, T0 + 5_000, None)
        assert store.due_row("ghost") is None
        assert store.reindex_session("emptied") == DueEntry(T0 + 7_000, None)
        assert store.due_entries() == {
            session_id: from_log(store, session_id) for session_id in ("moved", "emptied", "fine")
        }

    def serving_host(self, data_dir: Path, now_ms: int) -> EmbeddedHost:
        """A host on the backend whose fake clock reads ``now_ms`` (no plugin: activation only)."""
        clock = FakeClock(now_ms)
        return EmbeddedHost(data_dir, store=self.location, clock=clock, timers=FakeTimers(clock))

    def test_a_row_that_says_due_while_the_log_does_not_costs_one_declined_activation(
        self,
        tmp_path: Path,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Regression: such a session was woken again after every quiet period, forever."""
        self.stored({"quiet": T0 + 3_600_000})
        self.damage("UPDATE due_index SET due_ms = 0, schedule_ms = 0 WHERE session_id = 'quiet'")
        host = self.serving_host(tmp_path, T0)
        try:
            activation = host.enable_activation()
            with caplog.at_level(logging.INFO, logger="dsh_schedule"):
                assert [d.session_id for d in activation.due_sessions(T0, 8)] == ["quiet"]
                assert activation.activate("quiet").result(TIMEOUT) is None  # nothing due after all
                assert activation.due_sessions(T0, 8) == []
            assert host.sessions.list() == () and host.agents.roots() == ()
            assert not host.persistence.holds_lease("quiet")  # type: ignore[union-attr]
            assert self.raw_row("quiet") == (T0 + 3_600_000, T0 + 3_600_000, None)
        finally:
            host.close()
        assert index_reports(caplog) == [
            (
                logging.WARNING,
                "session 'quiet': the due index says a reminder due 1970-01-01T00:00:00.000Z, the "
                f"log says a reminder due {format_instant(T0 + 3_600_000)}; rewriting the row from "
                "the log",
            )
        ]

    def test_a_due_ms_that_hides_a_due_reminder_is_found_woken_and_rewritten(
        self,
        tmp_path: Path,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Regression: a due_ms moved to 9999 kept the reminder from ever being woken."""
        self.stored({"hidden": T0})
        self.damage(f"UPDATE due_index SET due_ms = {YEAR_9999} WHERE session_id = 'hidden'")
        host = self.serving_host(tmp_path, T0 + 1_000)
        try:
            activation = host.enable_activation()
            with caplog.at_level(logging.INFO, logger="dsh_schedule"):
                assert activation.due_sessions(T0 + 1_000, 8) == [DueSession("hidden", T0 + 1_000)]
                agent = activation.activate("hidden").result(TIMEOUT)
                assert agent is not None and agent.session.id == "hidden"
            assert self.raw_row("hidden") == (T0, T0, None)
        finally:
            host.close()
        problem = (
            "the due index row is inconsistent: its due_ms says 9999-12-31T23:59:59.999Z, its "
            f"schedule_ms and inbox_ms say {format_instant(T0)}"
        )
        assert index_reports(caplog) == [
            (
                logging.WARNING,
                f"session 'hidden': {problem}; waking the session so that its log decides",
            ),
            (logging.INFO, f"session 'hidden': {problem}; rewriting the row from the log"),
        ]

    def test_a_row_of_a_session_that_is_not_stored_is_reported_and_deleted(
        self,
        tmp_path: Path,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Regression: the claim took it, the resume failed, and it was retried silently forever."""
        self.stored({"real": T0 + 3_600_000})
        self.damage(f"INSERT INTO due_index VALUES ('ghost', {T0}, {T0}, NULL)")
        host = self.serving_host(tmp_path, T0)
        try:
            activation = host.enable_activation()
            with caplog.at_level(logging.INFO, logger="dsh_schedule"):
                assert [d.session_id for d in activation.due_sessions(T0, 8)] == ["ghost"]
                assert activation.activate("ghost").result(TIMEOUT) is None
                assert activation.due_sessions(T0, 8) == []
            assert self.raw_row("ghost") is None
            assert not host.persistence.holds_lease("ghost")  # type: ignore[union-attr]
        finally:
            host.close()
        assert index_reports(caplog) == [
            (
                logging.WARNING,
                "session 'ghost': the due index has a row for this session, which is not stored; "
                "rewriting the row from the log",
            )
        ]

    def test_verify_reads_every_column_of_every_row_on_both_backends(
        self,
    ) -> None:
        self.stored({"moved": T0 + 5_000, "zeroed": T0 + 5_000, "lost": T0, "fine": T0})
        store = self.make()
        new_log(store, "quiet").add("message", {"role": "user", "content": "hi"})
        store.flush_all().result(TIMEOUT)
        store.close()
        self.damage(
            f"UPDATE due_index SET due_ms = {T0}, schedule_ms = {T0} WHERE session_id = 'moved'",
            "UPDATE due_index SET due_ms = 0 WHERE session_id = 'zeroed'",
            "DELETE FROM due_index WHERE session_id = 'lost'",
            "INSERT INTO due_index VALUES ('quiet', 5, 5, NULL)",
            "INSERT INTO due_index VALUES ('ghost', 5, 5, NULL)",
        )
        with open_store(self.location, read_only=True) as reader:
            problems = {s: verify_session(reader, s).problem for s in reader.session_ids()}
            rows = reader.index_rows()
        assert problems == {
            "fine": None,
            "moved": f"the due index says a reminder due {format_instant(T0)}, the log says a "
            f"reminder due {format_instant(T0 + 5_000)} ({REINDEX_HINT})",
            "zeroed": "the due index row is inconsistent: its due_ms says "
            "1970-01-01T00:00:00.000Z, its schedule_ms and inbox_ms say "
            f"{format_instant(T0 + 5_000)} ({REINDEX_HINT})",
            "lost": "the due index says nothing due, the log says a reminder due "
            f"{format_instant(T0)} ({REINDEX_HINT})",
            "quiet": "the due index says a reminder due 1970-01-01T00:00:00.005Z, the log says "
            f"nothing due ({REINDEX_HINT})",
        }
        assert set(rows) == {"moved", "zeroed", "quiet", "ghost", "fine"}
