"""The due index is told, not re-derived: decoded rows and the appender's schedule target."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.stores import DueEntry, SqliteEventStore, StoreError
from host_bridge.embedded.stores import _due as due_module
from host_bridge.protocols import SessionEvent, SessionHeader
from messages._instant import format_instant
from messages._records import SCHEDULE_CHANGE_TYPE

TIMEOUT = 20.0
T0 = 1_800_000_000_000


def at(schedule_id: str, due_ms: int) -> dict[str, Any]:
    schedule = {
        "id": schedule_id,
        "kind": "at",
        "prompt": "p",
        "scheduledAt": format_instant(due_ms),
    }
    return {"version": 1, "operation": "create", "schedule": schedule}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEventStore]:
    opened = SqliteEventStore(tmp_path / "sessions.sqlite3")
    opened.create_session(SessionHeader("s"))
    yield opened
    if not opened.closed:
        opened.close()


def change(seq: int, data: dict[str, Any]) -> tuple[SessionEvent, bytes]:
    return SessionEvent(SCHEDULE_CHANGE_TYPE, seq, T0, data), encode_payload(data)


def flushed(store: SqliteEventStore) -> None:
    assert store.flush("s").result(TIMEOUT) is True


def test_the_writer_never_decodes_a_payload_to_keep_the_index(store: SqliteEventStore) -> None:
    with mock.patch.object(due_module, "decode_payload", side_effect=AssertionError("decoded")):
        store.record_appends("s", [change(0, at("schedule-1", T0 + 5_000))])
        flushed(store)
    assert store.due_entry("s") == DueEntry(T0 + 5_000, None)


def test_a_told_schedule_target_is_taken_instead_of_folding(store: SqliteEventStore) -> None:
    with mock.patch.object(due_module, "check_schedule_candidate") as fold:
        store.record_appends("s", [change(0, at("schedule-1", T0))], schedule_due_ms=T0 + 7)
        flushed(store)
    fold.assert_not_called()
    assert store.due_entry("s") == DueEntry(T0 + 7, None)  # what it was told


def test_told_nothing_active_deletes_the_row(store: SqliteEventStore) -> None:
    store.record_appends("s", [change(0, at("schedule-1", T0))])
    flushed(store)
    assert store.due_entry("s") == DueEntry(T0, None)
    store.record_appends("s", [change(1, at("schedule-2", T0 + 1))], schedule_due_ms=None)
    flushed(store)
    assert store.due_entry("s") is None


def test_an_untold_change_after_a_told_one_reads_the_log(store: SqliteEventStore) -> None:
    store.record_append("s", *change(0, at("schedule-1", T0 + 2_000)), schedule_due_ms=T0 + 2_000)
    flushed(store)
    reads = store.due_projector.reads
    store.record_append("s", *change(1, at("schedule-2", T0 + 1_000)))
    flushed(store)
    assert store.due_projector.reads == reads + 1  # the stale fold is not trusted
    assert store.due_entry("s") == DueEntry(T0 + 1_000, None)


def test_an_untold_change_after_a_told_one_in_the_same_round_reads_the_log(
    store: SqliteEventStore,
) -> None:
    store.record_append("s", *change(0, at("schedule-1", T0 + 5_000)))
    flushed(store)  # the session's state is cached, folded, never told
    reads = store.due_projector.reads
    store.record_append("s", *change(1, at("schedule-2", T0 + 6_000)), schedule_due_ms=T0 + 5_000)
    store.record_append("s", *change(2, at("schedule-3", T0 + 1_000)))  # untold, same round
    flushed(store)
    assert store.due_projector.reads == reads + 1  # the fold never saw the told rows
    assert store.due_entry("s") == DueEntry(T0 + 1_000, None)
    assert store.reindex_session("s") == DueEntry(T0 + 1_000, None)


def test_reindex_ignores_what_was_told_and_folds_the_log(store: SqliteEventStore) -> None:
    store.record_appends("s", [change(0, at("schedule-1", T0))], schedule_due_ms=T0 + 99)
    flushed(store)
    assert store.reindex_session("s") == DueEntry(T0, None)
    assert store.due_entry("s") == DueEntry(T0, None)


def test_a_told_target_must_be_whole_milliseconds(store: SqliteEventStore) -> None:
    with pytest.raises(StoreError, match="schedule_due_ms"):
        store.record_appends("s", [change(0, at("schedule-1", T0))], schedule_due_ms=1.5)  # type: ignore[arg-type]
    assert store.pending_rows == 1  # only the session row: nothing of the refused append
