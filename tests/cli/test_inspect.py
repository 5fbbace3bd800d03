"""``dsh-schedule inspect``: active reminders with state, dispatch receipts, tables and JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from host_bridge.embedded.paths import store_path
from host_bridge.protocols import wall_clock_ms
from messages import (
    CreateChange,
    DispatchChange,
    create_at_schedule_record,
    create_every_schedule_record,
    format_instant,
)
from messages._creation import create_cron_schedule_record
from messages._instant import parse_instant
from tests.cli.helpers import change, create, delete, dispatch, message, run_cli, write_session

HOUR_MS = 3_600_000


def inspect(data_dir: Path, home: Path, *args: str) -> tuple[int, str, str]:
    run = run_cli(["inspect", "--data", str(data_dir), *args], home)
    return run.code, run.out, run.err


def build(data_dir: Path) -> int:
    """A store with a live-looking session and a fork; returns the creation time used."""
    now = wall_clock_ms()
    write_session(
        data_dir,
        "main",
        [
            message("remind me"),
            create("schedule-1", "stretch", 60, now - 2 * HOUR_MS),  # delivered
            create("schedule-2", "oven", 60, now - 2 * HOUR_MS),  # deleted
            create("schedule-3", 'say "hi"\nto Ann', 60, now - HOUR_MS),  # overdue, cold session
            create("schedule-4", "later", 3600, now),  # scheduled
            dispatch("schedule-1"),
            delete("schedule-2"),
        ],
    )
    # The fork copies the first six events: its seed holds an inherited dispatch.
    write_session(
        data_dir,
        "fork",
        [
            message("remind me"),
            create("schedule-1", "stretch", 60, now - 2 * HOUR_MS),
            create("schedule-2", "oven", 60, now - 2 * HOUR_MS),
            create("schedule-3", 'say "hi"\nto Ann', 60, now - HOUR_MS),
            create("schedule-4", "later", 3600, now),
            dispatch("schedule-1"),
            create("schedule-1", "fork's own", 60, now - HOUR_MS),
            dispatch("schedule-1"),
        ],
        seed_length=6,
        parent="main",
    )
    return now


def test_a_missing_store_exits_2(data_dir: Path, home: Path) -> None:
    code, _, err = inspect(data_dir, home)
    assert code == 2
    assert err == f"Error: there is nothing to inspect at {store_path(data_dir)} (no such file)\n"
    assert not data_dir.exists()


def test_a_zero_length_store_is_nothing_to_inspect_and_stays_empty(
    data_dir: Path, home: Path
) -> None:
    """Regression: inspect wrote a 24 KiB schema into a zero-length file."""
    data_dir.mkdir()
    path = store_path(data_dir)
    path.touch()
    code, _, err = inspect(data_dir, home)
    assert code == 2
    assert err == f"Error: there is nothing to inspect at {path} (the file is empty)\n"
    assert path.stat().st_size == 0
    assert sorted(p.name for p in data_dir.iterdir()) == [path.name]


def test_an_unknown_session_exits_2(data_dir: Path, home: Path) -> None:
    build(data_dir)
    code, _, err = inspect(data_dir, home, "--session", "nope")
    assert code == 2
    assert f"no stored session 'nope' in {store_path(data_dir)}" in err


def test_json_lists_active_views_with_state_and_every_dispatch_receipt(
    data_dir: Path, home: Path
) -> None:
    now = build(data_dir)
    code, out, err = inspect(data_dir, home, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["store"] == str(store_path(data_dir))
    sessions: dict[str, Any] = {s["id"]: s for s in document["sessions"]}
    assert list(sessions) == ["fork", "main"]
    main = sessions["main"]
    assert main["error"] is None
    assert main["eventCount"] == 7
    assert main["parentSession"] is None
    assert [(v["id"], v["state"]) for v in main["active"]] == [
        ("schedule-3", "overdue"),
        ("schedule-4", "scheduled"),
    ]
    assert main["active"][1] == {
        "id": "schedule-4",
        "kind": "after",
        "prompt": "later",
        "afterSeconds": 3600,
        "scheduledAt": format_instant(now + HOUR_MS),
        "state": "scheduled",
        "deliveryMode": "session-local",
    }
    assert main["dispatches"] == [
        {
            "seq": 5,
            "time": format_instant(1_800_000_000_000 + 5),
            "inherited": False,
            "scheduleId": "schedule-1",
            "prompt": "stretch",
            "occurrenceAt": format_instant(now - 2 * HOUR_MS + 60_000),
            "deliveryMode": "session-local",
        }
    ]
    fork = sessions["fork"]
    assert (fork["parentSession"], fork["seedLength"]) == ("main", 6)
    assert fork["active"] == []  # a fork does not inherit its parent's reminders
    assert [(d["seq"], d["inherited"], d["prompt"]) for d in fork["dispatches"]] == [
        (5, True, "stretch"),
        (7, False, "fork's own"),
    ]


def test_the_human_table_shows_state_receipts_and_escaped_prompts(
    data_dir: Path, home: Path
) -> None:
    build(data_dir)
    code, out, err = inspect(data_dir, home, "--session", "main")
    assert code == 0, err
    assert "session main (7 events)" in out
    assert "fork" not in out
    rows = out.splitlines()
    overdue = next(row for row in rows if row.strip().startswith("schedule-3"))
    assert "overdue" in overdue
    assert '"say \\"hi\\"\\nto Ann"' in overdue  # one line, quoted like JSON
    scheduled = next(row for row in rows if row.strip().startswith("schedule-4"))
    assert "scheduled" in scheduled
    receipt = next(row for row in rows if row.strip().startswith("5 "))
    assert "schedule-1" in receipt
    assert "session-local" in receipt
    assert '"stretch"' in receipt
    assert "schedule-2" not in out  # deleted: neither active nor dispatched


def test_a_corrupt_session_is_reported_and_exits_1(data_dir: Path, home: Path) -> None:
    build(data_dir)
    write_session(data_dir, "broken", [dispatch("schedule-5")])
    code, out, err = inspect(data_dir, home)
    assert code == 1
    assert err == "1 of 3 session(s) could not be read or folded\n"
    assert "session broken (1 events)" in out
    assert "ERROR: " in out
    assert "inactive id" in out
    assert "session main (7 events)" in out  # the others are still shown
    code, out, _ = inspect(data_dir, home, "--json", "--session", "broken")
    assert code == 1
    assert "inactive id" in json.loads(out)["sessions"][0]["error"]


def test_kinds_next_targets_and_the_last_every_occurrence(data_dir: Path, home: Path) -> None:
    now = wall_clock_ms()
    start = now - 2 * HOUR_MS
    every = create_every_schedule_record("schedule-1", "check metrics", 600, start)
    at = create_at_schedule_record("schedule-2", "call mom", "2099-01-01T09:00:00+08:00", start)
    fresh = create_every_schedule_record("schedule-3", "water", 300, now)
    accepted = [start + 10 * 60_000, start + 47 * 60_000 + 5_000]  # occurrences 0:10 and 0:40
    write_session(
        data_dir,
        "kinds",
        [
            change(CreateChange(every)),
            change(CreateChange(at)),
            change(DispatchChange("schedule-1", format_instant(accepted[0]))),
            change(DispatchChange("schedule-1", format_instant(accepted[1]))),
            change(CreateChange(fresh)),
        ],
    )
    code, out, err = inspect(data_dir, home, "--json", "--session", "kinds")
    assert code == 0, err
    (session,) = json.loads(out)["sessions"]
    first, second, third = session["active"]
    assert first == {
        "id": "schedule-1",
        "kind": "every",
        "prompt": "check metrics",
        "everySeconds": 600,
        "scheduledAt": format_instant(start + 50 * 60_000),
        "state": "overdue",
        "deliveryMode": "session-local",
        "lastOccurrenceAt": format_instant(start + 40 * 60_000),
    }
    assert (second["kind"], second["scheduledAt"]) == ("at", "2099-01-01T01:00:00.000Z")
    assert "lastOccurrenceAt" not in second
    assert (third["kind"], third["lastOccurrenceAt"]) == ("every", None)
    assert [(d["occurrenceAt"], d["acceptedAt"]) for d in session["dispatches"]] == [
        (format_instant(start + 10 * 60_000), format_instant(accepted[0])),
        (format_instant(start + 40 * 60_000), format_instant(accepted[1])),
    ]

    code, out, err = inspect(data_dir, home, "--session", "kinds")
    assert code == 0, err
    rows = out.splitlines()
    header = next(row for row in rows if row.strip().startswith("ID "))
    assert header.split() == [
        "ID", "KIND", "STATE", "NEXT", "(UTC)", "SECONDS", "LAST", "OCCURRENCE", "PROMPT"
    ]  # fmt: skip
    cells = {row.split()[0]: row.split() for row in rows if row.strip().startswith("schedule-")}
    assert cells["schedule-1"][:6] == [
        "schedule-1",
        "every",
        "overdue",
        format_instant(start + 50 * 60_000),
        "600s",
        format_instant(start + 40 * 60_000),
    ]
    assert cells["schedule-2"][:6] == [
        "schedule-2",
        "at",
        "scheduled",
        "2099-01-01T01:00:00.000Z",
        "-",
        "-",
    ]
    assert cells["schedule-3"][4:7] == ["300s", "none", "yet"]


def test_a_cron_record_shows_its_rule_in_words_and_its_next_three_occurrences(
    data_dir: Path, home: Path
) -> None:
    thursday = parse_instant("2026-08-06T12:00:00.000Z")  # 20:00 in Shanghai
    weekdays = create_cron_schedule_record(
        "schedule-1",
        "stand-up",
        {"expression": "0 9 * * mon-fri", "time_zone": "asia/shanghai"},
        thursday,
    )
    # 02:30 does not happen in New York on 2026-03-08 (clocks go from 02:00 to 03:00)
    nightly = create_cron_schedule_record(
        "schedule-2",
        "bins",
        {"expression": "30 2 * * *", "time_zone": "America/New_York"},
        parse_instant("2026-03-07T12:00:00.000Z"),
    )
    last = create_cron_schedule_record(  # the rule runs out: one occurrence is left
        "schedule-3",
        "the end",
        {"expression": "0 9 31 12 *", "time_zone": "Pacific/Kiritimati"},
        parse_instant("9999-06-01T00:00:00.000Z"),
    )
    friday = "2026-08-07T01:00:00.000Z"
    assert weekdays.scheduled_at == friday
    write_session(
        data_dir,
        "cron",
        [
            change(CreateChange(weekdays)),
            change(DispatchChange("schedule-1", "2026-08-07T01:00:05.000Z")),
            change(CreateChange(nightly)),
            change(CreateChange(last)),
        ],
    )
    code, out, err = inspect(data_dir, home, "--json", "--session", "cron")
    assert code == 0, err
    (session,) = json.loads(out)["sessions"]
    first, second, third = session["active"]
    assert {key: value for key, value in first.items() if key != "state"} == {
        "id": "schedule-1",
        "kind": "cron",
        "prompt": "stand-up",
        "expression": "0 9 * * MON-FRI",
        "timeZone": "Asia/Shanghai",
        "scheduledAt": "2026-08-10T01:00:00.000Z",  # Monday: the weekend does not match
        "deliveryMode": "session-local",
        "lastOccurrenceAt": friday,
        "description": "at 09:00, on Monday to Friday",
        "nextOccurrences": [  # the stored target, then the two after it
            "2026-08-10T01:00:00.000Z",
            "2026-08-11T01:00:00.000Z",
            "2026-08-12T01:00:00.000Z",
        ],
    }
    assert (second["lastOccurrenceAt"], second["description"]) == (None, "at 02:30, every day")
    assert second["nextOccurrences"] == [
        "2026-03-08T07:30:00.000Z",  # the skipped 02:30 happens at 03:30 EDT
        "2026-03-09T06:30:00.000Z",
        "2026-03-10T06:30:00.000Z",
    ]
    assert third["nextOccurrences"] == ["9999-12-30T19:00:00.000Z"]  # 09:00 at UTC+14
    assert [
        (d["scheduleId"], d["occurrenceAt"], d["acceptedAt"]) for d in session["dispatches"]
    ] == [("schedule-1", friday, "2026-08-07T01:00:05.000Z")]

    code, out, err = inspect(data_dir, home, "--session", "cron")
    assert code == 0, err
    rows = out.splitlines()
    cells = {row.split()[0]: row.split() for row in rows if row.strip().startswith("schedule-")}
    assert cells["schedule-1"][1:2] + cells["schedule-1"][3:6] == [
        "cron",
        "2026-08-10T01:00:00.000Z",
        "-",
        friday,
    ]
    assert cells["schedule-2"][5:7] == ["none", "yet"]
    start = rows.index(
        "  cron rules (next 3 occurrences: the stored target, then the 2 after it; UTC, local):"
    )
    assert rows[start + 1 : start + 11] == [
        '    schedule-1: "0 9 * * MON-FRI" in Asia/Shanghai: at 09:00, on Monday to Friday',
        "      2026-08-10T01:00:00.000Z  Mon 2026-08-10 09:00 +08:00",
        "      2026-08-11T01:00:00.000Z  Tue 2026-08-11 09:00 +08:00",
        "      2026-08-12T01:00:00.000Z  Wed 2026-08-12 09:00 +08:00",
        '    schedule-2: "30 2 * * *" in America/New_York: at 02:30, every day',
        "      2026-03-08T07:30:00.000Z  Sun 2026-03-08 03:30 -04:00",
        "      2026-03-09T06:30:00.000Z  Mon 2026-03-09 02:30 -04:00",
        "      2026-03-10T06:30:00.000Z  Tue 2026-03-10 02:30 -04:00",
        '    schedule-3: "0 9 31 12 *" in Pacific/Kiritimati: '
        "at 09:00, on day 31 of the month in December",
        "      9999-12-30T19:00:00.000Z  Fri 9999-12-31 09:00 +14:00",
    ]
    assert rows[start + 11].startswith("  dispatches (receipts):")
