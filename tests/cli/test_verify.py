"""``dsh-schedule verify``: every stored session's stream, exit 1 with ``id: rule`` when invalid."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from host_bridge.embedded.paths import store_path
from tests.cli.helpers import create, delete, dispatch, message, run_cli, write_session

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
