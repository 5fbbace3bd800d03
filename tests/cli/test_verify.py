"""``dsh-schedule verify``: every stored session's stream, exit 1 with ``id: rule`` when invalid."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from host_bridge.embedded.inbox import INBOX_EVENT
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import zone_data_version
from messages import CreateChange, DispatchChange
from messages._creation import create_cron_schedule_record
from messages._instant import format_instant
from messages._presentation import REMINDER_SOURCE
from tests.cli.helpers import (
    change,
    create,
    delete,
    dispatch,
    message,
    run_cli,
    write_session,
)

NOW = 1_800_000_000_000


def verify(data_dir: Path, home: Path) -> tuple[int, str, str]:
    run = run_cli(["verify", "--data", str(data_dir)], home)
    return run.code, run.out, run.err


def test_a_missing_store_is_a_clear_error_with_exit_2(data_dir: Path, home: Path) -> None:
    code, _, err = verify(data_dir, home)
    assert code == 2
    assert err == f"Error: there is nothing to verify at {store_path(data_dir)} (no such file)\n"
    assert "Traceback" not in err
    assert not data_dir.exists()  # reading never creates a store


def test_a_file_that_is_not_a_store_exits_2(data_dir: Path, home: Path) -> None:
    data_dir.mkdir()
    store_path(data_dir).write_bytes(b"this is not an SQLite database, just bytes" * 20)
    code, _, err = verify(data_dir, home)
    assert code == 2
    assert "corrupt or not an SQLite database" in err


def test_an_empty_store_is_valid(data_dir: Path, home: Path) -> None:
    write_session(data_dir, "s", [])
    sqlite3.connect(store_path(data_dir)).execute("DELETE FROM sessions").connection.commit()
    code, out, _ = verify(data_dir, home)
    assert code == 0
    assert "no stored sessions" in out


def test_valid_sessions_pass(data_dir: Path, home: Path) -> None:
    write_session(
        data_dir,
        "good",
        [
            message("hi"),
            create("schedule-1", "a", 5, NOW),
            create("schedule-2", "b", 9, NOW),
            dispatch("schedule-1"),
            delete("schedule-2"),
            create("schedule-3", "c", 1, NOW),
        ],
    )
    write_session(data_dir, "empty", [])
    code, out, _ = verify(data_dir, home)
    assert code == 0
    assert "ok       good (6 events, 5 schedule changes, 1 active)" in out
    assert "ok       empty (0 events, 0 schedule changes, 0 active)" in out
    assert "all 2 session(s) valid" in out


def test_a_deliberately_corrupted_store_fails_naming_session_and_rule(
    data_dir: Path, home: Path
) -> None:
    write_session(data_dir, "fine", [create("schedule-1", "ok", 5, NOW)])
    write_session(data_dir, "ghost-dispatch", [message("x"), dispatch("schedule-9")])
    write_session(
        data_dir,
        "reused-id",
        [
            create("schedule-1", "a", 5, NOW),
            delete("schedule-1"),
            create("schedule-1", "b", 5, NOW),
        ],
    )
    write_session(
        data_dir,
        "bad-version",
        [("schedule/change", {"version": 2, "operation": "delete", "id": "schedule-1"})],
    )
    write_session(data_dir, "garbled", [create("schedule-1", "a", 5, NOW)])
    with sqlite3.connect(store_path(data_dir)) as db:  # a row that no longer decodes
        db.execute("UPDATE events SET data = x'c1' WHERE session_id = 'garbled'")

    code, out, err = verify(data_dir, home)
    assert code == 1
    lines = out.splitlines()
    assert "ok       fine (1 events, 1 schedule changes, 1 active)" in lines
    invalid = {line.split(":", 1)[0]: line for line in lines if line.startswith("INVALID")}
    assert set(invalid) == {
        "INVALID  ghost-dispatch",
        "INVALID  reused-id",
        "INVALID  bad-version",
        "INVALID  garbled",
    }
    assert "inactive id" in invalid["INVALID  ghost-dispatch"]
    assert "was reused" in invalid["INVALID  reused-id"]
    assert "version" in invalid["INVALID  bad-version"]
    assert "garbled: store:" in invalid["INVALID  garbled"]
    assert "4 of 5 session(s) invalid" in err
    assert "Traceback" not in err


def test_only_a_forks_own_suffix_is_judged(data_dir: Path, home: Path) -> None:
    # The seed (copied from the parent) holds a broken stream; the fork's own part is fine.
    write_session(
        data_dir,
        "fork-ok",
        [dispatch("schedule-7"), create("schedule-1", "own", 5, NOW)],
        seed_length=1,
        parent="p",
    )
    # A fork does not inherit reminders: dispatching the parent's record is invalid.
    write_session(
        data_dir,
        "fork-bad",
        [create("schedule-1", "parent's", 5, NOW), dispatch("schedule-1")],
        seed_length=1,
        parent="p",
    )
    code, out, _ = verify(data_dir, home)
    assert code == 1
    assert "ok       fork-ok (2 events, 2 schedule changes, 1 active)" in out
    assert "INVALID  fork-bad: " in out
    assert "inactive id" in out


# --- the due index: every column of every row, each session on its own line ---------------

YEAR_9999 = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def damaged(data_dir: Path, *statements: str) -> None:
    """Edit the due index by hand, as a person or a restored backup can."""
    with sqlite3.connect(store_path(data_dir)) as db:
        for statement in statements:
            db.execute(statement)


def invalid_lines(out: str) -> dict[str, str]:
    """``{session_id: problem}`` of the ``INVALID`` lines."""
    lines = [line.removeprefix("INVALID  ") for line in out.splitlines()]
    return dict(line.split(": ", 1) for line in lines if ": " in line and "store:" not in line)


def test_a_due_ms_moved_to_year_9999_or_made_text_is_reported_for_its_session(
    data_dir: Path, home: Path
) -> None:
    """Regression: both passed verify (exit 0) while serve never woke the session."""
    for session_id in ("fine", "moved", "text"):
        write_session(data_dir, session_id, [create("schedule-1", "stretch", 60, NOW)])
    damaged(
        data_dir,
        f"UPDATE due_index SET due_ms = {YEAR_9999} WHERE session_id = 'moved'",
        "UPDATE due_index SET due_ms = 'soon' WHERE session_id = 'text'",
    )
    code, out, err = verify(data_dir, home)
    assert code == 1
    assert "ok       fine (1 events, 1 schedule changes, 1 active)" in out.splitlines()
    assert invalid_lines(out) == {
        "moved": "the due index row is inconsistent: its due_ms says 9999-12-31T23:59:59.999Z, "
        "its schedule_ms and inbox_ms say 2027-01-15T08:01:00.000Z "
        "(dsh-schedule reindex rebuilds the index)",
        "text": "the due index row is unreadable: its due_ms holds text, not an integer "
        "(dsh-schedule reindex rebuilds the index)",
    }
    assert err == "2 of 3 session(s) invalid\n"


def test_a_garbage_schedule_ms_is_its_sessions_problem_not_the_whole_stores(
    data_dir: Path, home: Path
) -> None:
    """Regression: one such row made verify exit 2 for the whole store."""
    write_session(data_dir, "fine", [create("schedule-1", "a", 60, NOW)])
    write_session(data_dir, "garbled", [create("schedule-1", "b", 60, NOW)])
    damaged(data_dir, "UPDATE due_index SET schedule_ms = x'00ff' WHERE session_id = 'garbled'")
    code, out, err = verify(data_dir, home)
    assert code == 1
    assert "ok       fine (1 events, 1 schedule changes, 1 active)" in out.splitlines()
    assert invalid_lines(out) == {
        "garbled": "the due index row is unreadable: its schedule_ms holds a blob, not an "
        "integer (dsh-schedule reindex rebuilds the index)"
    }
    assert err == "1 of 2 session(s) invalid\n"
    assert "Traceback" not in err


def test_every_column_of_every_row_is_compared_with_the_log(data_dir: Path, home: Path) -> None:
    owes = [
        create("schedule-1", "a", 60, NOW),
        (INBOX_EVENT, {"content": ["[SCHEDULE REMINDER]"], "source": dict(REMINDER_SOURCE)}),
        dispatch("schedule-1"),
    ]  # dispatched; the reminder's turn never completed: owed since its queue time
    for session_id in ("moved", "zeroed", "real", "emptied", "lost", "owed"):
        write_session(data_dir, session_id, [create("schedule-1", "a", 60, NOW)])
    write_session(data_dir, "quiet", [message("nothing scheduled")])
    write_session(data_dir, "turn-owed", owes)
    owed_since = NOW + 1  # write_session stamps event seq N at start_ms + N
    damaged(
        data_dir,
        # moved consistently: every column agrees with the others, not with the log
        f"UPDATE due_index SET due_ms = {NOW}, schedule_ms = {NOW} WHERE session_id = 'moved'",
        "UPDATE due_index SET due_ms = 0 WHERE session_id = 'zeroed'",
        "UPDATE due_index SET inbox_ms = 1.5 WHERE session_id = 'real'",
        "UPDATE due_index SET schedule_ms = NULL WHERE session_id = 'emptied'",
        "DELETE FROM due_index WHERE session_id = 'lost'",
        f"UPDATE due_index SET due_ms = {NOW}, inbox_ms = {NOW} WHERE session_id = 'owed'",
        "INSERT INTO due_index VALUES ('quiet', 5, 5, NULL)",
        "UPDATE due_index SET inbox_ms = NULL, schedule_ms = due_ms WHERE session_id = 'turn-owed'",
        "INSERT INTO due_index VALUES ('ghost', 5, 5, NULL)",
    )
    code, out, _ = verify(data_dir, home)
    assert code == 1
    due = "a reminder due 2027-01-15T08:01:00.000Z"
    hint = " (dsh-schedule reindex rebuilds the index)"
    assert invalid_lines(out) == {
        "moved": f"the due index says a reminder due 2027-01-15T08:00:00.000Z, the log says {due}"
        + hint,
        "zeroed": "the due index row is inconsistent: its due_ms says 1970-01-01T00:00:00.000Z, "
        "its schedule_ms and inbox_ms say 2027-01-15T08:01:00.000Z" + hint,
        "real": "the due index row is unreadable: its inbox_ms holds a real number, not an integer"
        + hint,
        "emptied": "the due index row is inconsistent: neither its schedule_ms nor its inbox_ms "
        "is set" + hint,
        "lost": f"the due index says nothing due, the log says {due}" + hint,
        "owed": f"the due index says {due} and a reminder turn owed since "
        f"2027-01-15T08:00:00.000Z, the log says {due}" + hint,
        "quiet": "the due index says a reminder due 1970-01-01T00:00:00.005Z, the log says "
        "nothing due" + hint,
        "turn-owed": f"the due index says a reminder due {format_instant(owed_since)}, the log "
        f"says a reminder turn owed since {format_instant(owed_since)}" + hint,
        "ghost": "the due index has a row for this session, which is not stored" + hint,
    }
    assert run_cli(["reindex", "--data", str(data_dir)], home).code == 0
    code, out, _ = verify(data_dir, home)
    assert code == 0, out
    assert "all 8 session(s) valid" in out


def test_cron_sessions_are_checked_like_the_other_kinds(data_dir: Path, home: Path) -> None:
    daily = {"expression": "0 9 * * *", "time_zone": "Asia/Shanghai"}
    record = create_cron_schedule_record("schedule-1", "stand-up", daily, NOW)
    target = record.scheduled_at  # 2027-01-16T01:00:00.000Z (09:00 in Shanghai)
    made = change(CreateChange(record))
    sessions: dict[str, list[tuple[str, object]]] = {
        "cron-ok": [made, change(DispatchChange("schedule-1", target)), message("hi")],
        "cron-no-accepted": [made, dispatch("schedule-1")],
        "cron-early": [made, change(DispatchChange("schedule-1", format_instant(NOW)))],
        "cron-index": [made],
    }
    for session_id, events in sessions.items():
        write_session(data_dir, session_id, events)
    damaged(
        data_dir,
        f"UPDATE due_index SET due_ms = {NOW}, schedule_ms = {NOW} WHERE session_id = 'cron-index'",
    )
    code, out, err = verify(data_dir, home)
    assert code == 1
    assert "ok       cron-ok (3 events, 2 schedule changes, 1 active)" in out.splitlines()
    assert invalid_lines(out) == {
        "cron-no-accepted": "event seq 1: dispatch of cron record 'schedule-1' lacks acceptedAt",
        "cron-early": "event seq 1: cron dispatch of 'schedule-1' accepted at "
        f"{format_instant(NOW)} precedes its target {target}",
        "cron-index": "the due index says a reminder due 2027-01-15T08:00:00.000Z, the log says "
        f"a reminder due {target} (dsh-schedule reindex rebuilds the index)",
    }
    assert err == "3 of 4 session(s) invalid\n"


def test_a_cron_row_of_other_zone_data_is_a_note_until_the_index_is_rebuilt(
    data_dir: Path, home: Path
) -> None:
    """The store says its index was computed with tzdata 2024a; 2026-something is installed."""
    daily = {"expression": "0 9 * * *", "time_zone": "Asia/Shanghai"}
    record = create_cron_schedule_record("schedule-1", "stand-up", daily, NOW)
    target = record.scheduled_at  # 2027-01-16T01:00:00.000Z (09:00 in Shanghai)
    write_session(data_dir, "cron", [change(CreateChange(record))])
    write_session(data_dir, "plain", [create("schedule-1", "a", 60, NOW)])
    moved = "UPDATE due_index SET due_ms = {0}, schedule_ms = {0} WHERE session_id = '{1}'"
    damaged(
        data_dir,
        moved.format(NOW, "cron"),
        "UPDATE meta SET value = '2024a' WHERE key = 'zone_data'",
    )
    note = (
        f"note     cron: due index computed with zone data 2024a, installed "
        f"{zone_data_version()} (the due index says a reminder due 2027-01-15T08:00:00.000Z, "
        f"the log says a reminder due {target}); a writing host or dsh-schedule reindex "
        "refreshes it"
    )
    code, out, err = verify(data_dir, home)
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        "ok       cron (1 events, 1 schedule changes, 1 active)",
        note,
        "ok       plain (1 events, 1 schedule changes, 1 active)",
        "all 2 session(s) valid",
    ]
    damaged(data_dir, moved.format(NOW, "plain"))  # no cron record: zone data explain nothing
    code, out, err = verify(data_dir, home)
    assert code == 1
    assert out.splitlines()[1:4] == [
        "ok       cron (1 events, 1 schedule changes, 1 active)",
        note,
        "INVALID  plain: the due index says a reminder due 2027-01-15T08:00:00.000Z, the log "
        "says a reminder due 2027-01-15T08:01:00.000Z (dsh-schedule reindex rebuilds the index)",
    ]
    assert err == "1 of 2 session(s) invalid\n"
    assert run_cli(["reindex", "--data", str(data_dir)], home).code == 0
    code, out, _ = verify(data_dir, home)
    assert code == 0, out
    assert "note" not in out
    with sqlite3.connect(store_path(data_dir)) as db:
        stamp = db.execute("SELECT value FROM meta WHERE key = 'zone_data'").fetchall()
    assert stamp == [(zone_data_version(),)]
