"""``dsh-schedule serve`` and ``verify`` with ``cron`` records: real subprocesses, a real store.

The reminders are stored days overdue, so the wall clock decides nothing a
test could race: each rule's next occurrence is about twelve hours away. A
cold session with a ``cron`` record overdue by several occurrences gets
exactly one turn presenting the latest due occurrence and one dispatch, the due
index then holds the first occurrence after ``acceptedAt``, and a restart
delivers nothing. A cron and an every record due together are one turn with
one ``acceptedAt``. A stored target off the installed zone rules verifies clean
before and after serve delivers it. Waits are on output lines, never sleeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import DueEntry, SqliteEventStore
from host_bridge.protocols import wall_clock_ms
from messages import CreateChange, create_every_schedule_record
from messages._instant import format_instant, parse_instant
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.cli.helpers import Proc, change, deliveries, message, run_cli, write_session
from tests.cli.test_serve import serve
from tests.cron_records import cron_create, cron_event, latest_between, next_after

HOUR = 3_600_000
DAY = 24 * HOUR


def far_daily_rule() -> str:
    """A daily UTC rule whose occurrences lie about twelve hours from now."""
    hour = (wall_clock_ms() // HOUR + 12) % 24
    return f"0 {hour} * * *"


def stored(data_dir: Path) -> dict[str, tuple[list[Any], DueEntry | None]]:
    """Per session: its schedule changes and its due index entry."""
    store = SqliteEventStore(store_path(data_dir), create=False)
    try:
        found = {}
        for session_id in store.session_ids():
            log = store.load(session_id)
            assert log is not None
            changes = [e.data for e in log.events if e.type == SCHEDULE_CHANGE_TYPE]
            found[session_id] = (changes, store.due_entry(session_id))
        return found
    finally:
        store.close()


def counts(data_dir: Path, session_id: str) -> tuple[int, int, int]:
    store = SqliteEventStore(store_path(data_dir), create=False)
    try:
        log = store.load(session_id)
        assert log is not None
        return deliveries(log.events)
    finally:
        store.close()


def verify(data_dir: Path, home: Path) -> tuple[int, str]:
    run = run_cli(["verify", "--data", str(data_dir)], home)
    assert "Traceback" not in run.err
    return run.code, run.out


def test_serve_delivers_an_overdue_cron_record_once_and_indexes_its_next_occurrence(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    expression = far_daily_rule()
    now = wall_clock_ms()
    first = next_after(expression, "UTC", now - 4 * DAY)  # four occurrences missed
    created = cron_create("schedule-1", "water the plants", expression, "UTC", first)
    write_session(data_dir, "garden", [message("every day please"), cron_event(created)])
    latest = latest_between(expression, "UTC", first, now)
    assert latest > now - DAY

    proc = serve(procs, data_dir, home)
    line = proc.wait_line("reminder schedule-1 of session garden")
    assert f"(due {format_instant(latest)}): " in line  # the latest due, no backlog
    assert proc.stop() == 0
    assert proc.out[-1] == "stopped; 1 reminder(s) presented"

    ((changes, due),) = stored(data_dir).values()
    create, dispatch = changes
    assert create == created
    accepted = parse_instant(dispatch["acceptedAt"])
    assert dispatch == {
        "version": 1,
        "operation": "dispatch",
        "id": "schedule-1",
        "acceptedAt": format_instant(accepted),
    }
    assert now <= accepted < latest + DAY
    assert due == DueEntry(next_after(expression, "UTC", accepted), None)
    assert counts(data_dir, "garden") == (1, 1, 1)

    again = serve(procs, data_dir, home)  # a restart: nothing is due
    assert again.stop() == 0
    assert not [out for out in again.out if " reminder " in out]
    assert counts(data_dir, "garden") == (1, 1, 1)


def test_serve_presents_a_due_cron_and_every_record_in_one_turn(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    expression = far_daily_rule()
    now = wall_clock_ms()
    first = next_after(expression, "UTC", now - 3 * DAY)
    every = create_every_schedule_record("schedule-1", "stretch", DAY // 1000, first + HOUR)
    events = [
        change(CreateChange(every)),  # daily too, its target an hour after the cron one
        cron_event(cron_create("schedule-2", "water", expression, "UTC", first)),
    ]
    write_session(data_dir, "both", events)

    proc = serve(procs, data_dir, home)
    lines = [proc.wait_line(" reminder schedule-"), proc.wait_line(" reminder schedule-")]
    assert proc.stop() == 0
    assert [line.split(" reminder ")[1].split(" ")[0] for line in lines] == [
        "schedule-2",  # stored target order: the cron record's is earlier
        "schedule-1",
    ]
    ((changes, _),) = stored(data_dir).values()
    dispatches = changes[2:]
    assert [d["id"] for d in dispatches] == ["schedule-2", "schedule-1"]
    assert len({d["acceptedAt"] for d in dispatches}) == 1  # one acceptedAt for the batch
    assert counts(data_dir, "both") == (2, 1, 1)  # one turn presents both


def test_a_cron_target_off_the_zone_rules_verifies_and_serve_delivers_it(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    """As after a tzdata update moved the zone: the stored target is no occurrence now."""
    expression = far_daily_rule()
    now = wall_clock_ms()
    odd = next_after(expression, "UTC", now - 2 * DAY) + 7 * 60_000  # at :07, not :00
    created = cron_create("schedule-1", "pills", expression, "UTC", odd)
    write_session(data_dir, "tz", [cron_event(created)])
    code, out = verify(data_dir, home)
    assert code == 0
    assert "ok       tz (1 events, 1 schedule changes, 1 active)" in out

    proc = serve(procs, data_dir, home)
    line = proc.wait_line("reminder schedule-1 of session tz")
    assert proc.stop() == 0
    latest = latest_between(expression, "UTC", odd, now)  # the latest real occurrence since
    assert f"(due {format_instant(latest)}): " in line
    ((changes, due),) = stored(data_dir).values()
    accepted = parse_instant(changes[1]["acceptedAt"])
    assert due == DueEntry(next_after(expression, "UTC", accepted), None)  # on the rule again
    code, out = verify(data_dir, home)
    assert code == 0
    assert "all 1 session(s) valid" in out
