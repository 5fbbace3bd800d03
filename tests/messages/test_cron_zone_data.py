"""Cron logs and fold states stay sound when a tzdata release changes a zone's rules.

Simulated as in ``tests/cron_records.py``: the stored key ``Asia/Shanghai`` is
evaluated with ``Asia/Bangkok``'s rules (+07:00 instead of +08:00), so a 09:00
occurrence moves from 01:00Z to 02:00Z.
"""

from __future__ import annotations

from typing import Any

import pytest

from host_bridge.protocols import SessionEvent
from messages import ScheduleLogError, decode_schedule_state, encode_schedule_state
from messages._fold import continue_fold, fold_schedule_events
from messages._instant import format_instant, parse_instant
from messages._records import CronRecord
from tests.cron_records import cron_create, cron_dispatch, cron_event, zone_data_moved

HOUR = 3_600_000
DAY = 24 * HOUR
MONDAY = parse_instant("2026-08-10T01:00:00.000Z")  # 09:00 in Shanghai
WEEKDAYS = "0 9 * * 1-5"
SHANGHAI = "Asia/Shanghai"


def _log(*changes: dict[str, Any]) -> list[SessionEvent]:
    return [
        SessionEvent(type_, seq, MONDAY, data)
        for seq, (type_, data) in enumerate(cron_event(change) for change in changes)
    ]


def _entries(state: dict[str, object]) -> list[dict[str, object]]:
    active = state["active"]
    assert isinstance(active, list)
    return active


def test_a_dispatch_after_the_one_that_moved_the_record_is_sound_under_new_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = _log(
        cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, MONDAY),
        cron_dispatch("schedule-1", MONDAY + 2 * HOUR),  # late: Tuesday 01:00Z next, old rules
        cron_dispatch("schedule-1", MONDAY + DAY),  # on time under the old rules
    )
    zone_data_moved(monkeypatch, SHANGHAI, "Asia/Bangkok")
    (record,) = fold_schedule_events(log).active
    assert isinstance(record, CronRecord)
    # Tuesday 09:00 is 02:00Z now, after the second dispatch: the fold moves there.
    assert record.scheduled_at == "2026-08-11T02:00:00.000Z"
    assert record.moved_by_ms == MONDAY + DAY


@pytest.mark.parametrize(
    ("accepted", "why"),
    [
        (MONDAY - 1, "the first dispatch precedes the stored target"),
        (MONDAY + 2 * HOUR, "a second dispatch at the time of the first"),
        (MONDAY + HOUR, "a second dispatch before the first"),
    ],
)
def test_dispatches_that_no_zone_data_explains_stay_corrupt(accepted: int, why: str) -> None:
    first = (cron_dispatch("schedule-1", MONDAY + 2 * HOUR),) if "second" in why else ()
    log = _log(
        cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, MONDAY),
        *first,
        cron_dispatch("schedule-1", accepted),
    )
    message = "does not follow the dispatch before it" if first else "precedes its target"
    with pytest.raises(ScheduleLogError, match=message):
        fold_schedule_events(log)


@pytest.mark.parametrize(
    ("rule", "first", "second", "rules_now"),
    [
        # Shanghai on +09:00 rules: 09:00 Monday is 00:00Z, before the first dispatch, so
        # the next target is a week away; the second dispatch (on time under +08:00) stays sound.
        ("0 9,10 * * MON", "2026-08-10T01:00:01.000Z", "2026-08-10T02:00:01.000Z", "Asia/Tokyo"),
        # A Thursday reminder delivered late on Friday morning, then Friday's on time.
        ("0 9 * * 1-5", "2026-08-14T00:10:00.000Z", "2026-08-14T01:00:01.000Z", "Asia/Tokyo"),
        # Half an hour later: Dhaka's rules read as Yangon's (+06:30).
        ("0,30 9 1 * *", "2026-08-01T03:00:01.000Z", "2026-08-01T03:30:01.000Z", "Asia/Yangon"),
    ],
)
def test_a_log_written_before_a_release_moved_the_offset_forward_stays_sound(
    monkeypatch: pytest.MonkeyPatch, rule: str, first: str, second: str, rules_now: str
) -> None:
    zone = "Asia/Dhaka" if rules_now == "Asia/Yangon" else SHANGHAI
    created = next(
        iter(fold_schedule_events(_log(cron_create("c", "p", rule, zone, first))).active)
    )
    assert isinstance(created, CronRecord)
    target = created.schedule.latest_between(parse_instant(first) - 40 * DAY, parse_instant(first))
    log = _log(
        cron_create("c", "p", rule, zone, format_instant(target)),
        cron_dispatch("c", first),
        cron_dispatch("c", second),
    )
    assert len(fold_schedule_events(log).active) == 1  # sound under the rules it was written
    zone_data_moved(monkeypatch, zone, rules_now)
    (record,) = fold_schedule_events(log).active
    assert record.target_ms > parse_instant(second)


def test_a_fold_state_derives_moved_targets_again_when_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = _log(
        cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, MONDAY),
        cron_dispatch("schedule-1", MONDAY + 5_000),
    )
    stored = encode_schedule_state(fold_schedule_events(log))
    entry = _entries(stored)[0]
    assert entry["scheduledAt"] == "2026-08-11T01:00:00.000Z"
    assert entry["acceptedAt"] == format_instant(MONDAY + 5_000)
    assert decode_schedule_state(stored) == fold_schedule_events(log)
    zone_data_moved(monkeypatch, SHANGHAI, "Asia/Bangkok")
    read = decode_schedule_state(stored)
    (record,) = read.active
    # Monday 09:00 is 02:00Z under the new rules, after the dispatch: as a fold would.
    assert record.scheduled_at == "2026-08-10T02:00:00.000Z"
    assert read == fold_schedule_events(log)
    assert continue_fold(read, log) == fold_schedule_events(log)


def test_an_unmoved_record_keeps_its_stored_target_and_no_accepted_at() -> None:
    log = _log(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, MONDAY))
    stored = encode_schedule_state(fold_schedule_events(log))
    entry = _entries(stored)[0]
    assert "acceptedAt" not in entry


@pytest.mark.parametrize(
    "accepted",
    ["2026-08-10T01:00:05Z", 1786323605000, None],
)
def test_a_fold_state_with_a_malformed_accepted_at_is_refused(accepted: object) -> None:
    log = _log(
        cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, MONDAY),
        cron_dispatch("schedule-1", MONDAY + 5_000),
    )
    stored = encode_schedule_state(fold_schedule_events(log))
    _entries(stored)[0]["acceptedAt"] = accepted
    with pytest.raises(ScheduleLogError, match=r"active\[0\]: acceptedAt"):
        decode_schedule_state(stored)


def test_accepted_at_belongs_to_moved_cron_records_only() -> None:
    stored = encode_schedule_state(
        fold_schedule_events(_log(cron_create("schedule-1", "p", WEEKDAYS, SHANGHAI, MONDAY)))
    )
    every = {
        "id": "schedule-1",
        "kind": "every",
        "prompt": "p",
        "everySeconds": 300,
        "scheduledAt": "2026-08-10T01:00:00.000Z",
        "acceptedAt": "2026-08-10T00:55:00.000Z",
    }
    stored["active"] = [every]
    with pytest.raises(ScheduleLogError, match="unknown key 'acceptedAt'"):
        decode_schedule_state(stored)


@pytest.mark.parametrize(
    ("rule", "zone", "target", "accepted", "sound"),
    [
        # UTC and Etc zones never changed their offset: their targets are the same under
        # every release, so a dispatch before one is corrupt.
        ("@yearly", "UTC", "2028-01-01T00:00:00.000Z", "2027-12-31T23:59:59.000Z", False),
        ("@daily", "Etc/GMT+3", "2026-08-11T03:00:00.000Z", "2026-08-11T02:59:00.000Z", False),
        # Elsewhere another release may have derived any target: a dispatch after the one
        # that moved the record is sound, however far before the target it is.
        ("0 9 * * 1", SHANGHAI, "2026-08-17T01:00:00.000Z", "2026-08-10T01:00:02.000Z", True),
        (
            "0 9 * * *",
            "America/New_York",
            "2026-08-11T13:00:00.000Z",
            "2026-08-10T13:00:02.000Z",
            True,
        ),
    ],
)
def test_which_dispatches_before_a_moved_target_are_sound(
    rule: str, zone: str, target: str, accepted: str, sound: bool
) -> None:
    moved = parse_instant(target)
    # The dispatch before moved the record to ``target`` from just after the previous occurrence.
    first = next(
        iter(fold_schedule_events(_log(cron_create("schedule-1", "p", rule, zone, target))).active)
    )
    assert isinstance(first, CronRecord)
    previous = first.schedule.latest_between(moved - 400 * DAY, moved - 1)
    log = _log(
        cron_create("schedule-1", "p", rule, zone, format_instant(previous)),
        cron_dispatch("schedule-1", previous + 1_000),
        cron_dispatch("schedule-1", parse_instant(accepted)),
    )
    folded = fold_schedule_events(log[:2])
    assert folded.active[0].scheduled_at == target
    if sound:
        (record,) = fold_schedule_events(log).active
        assert record.target_ms > parse_instant(accepted)
    else:
        with pytest.raises(ScheduleLogError, match="precedes its target"):
            fold_schedule_events(log)
