"""``every`` reminders: interval checks, creation, and the occurrence arithmetic.

The seeded property test runs thousands of cases checking that the run-time
arithmetic (what the delivery decision computes) and the durable fold (what
replay of the dispatch computes) agree.
"""

from __future__ import annotations

import math
import random

import pytest

from messages import (
    CreateChange,
    DispatchChange,
    ErrorCode,
    EveryRecord,
    ScheduleInputError,
    ScheduleLogError,
    create_every_schedule_record,
    fold_schedule_events,
    format_instant,
    parse_instant,
    resolve_every_occurrence,
    schedule_reminder_presentation,
)
from messages._creation import check_after_seconds, check_every_seconds, create_selector
from messages._delivery import DeliverBatch, WaitFor, plan_delivery
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS
from messages._numbers import MAX_SAFE_INTEGER
from messages._records import MAX_EVERY_SECONDS, MIN_EVERY_SECONDS
from tests.messages.helpers import Event, log

T0 = parse_instant("2026-08-05T12:00:00.000Z")


def ms(text: str) -> int:
    return parse_instant(f"2026-08-05T{text}Z")


def every(at: str = "2026-08-05T12:05:00.000Z", seconds: int = 300) -> EveryRecord:
    return EveryRecord("schedule-1", "stretch", seconds, at)


def test_interval_bounds() -> None:
    assert MIN_EVERY_SECONDS == 300
    assert MAX_EVERY_SECONDS * 1000 <= MAX_SAFE_INTEGER < (MAX_EVERY_SECONDS + 1) * 1000


# ---- interval checks before the queue --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "result"),
    [
        (300, 300),
        (300.0, 300),
        (301, 301),
        (86_400, 86_400),
        (MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        (299, ErrorCode.FREQUENCY_TOO_HIGH),
        (299.0, ErrorCode.FREQUENCY_TOO_HIGH),
        (1, ErrorCode.FREQUENCY_TOO_HIGH),
        (0, ErrorCode.FREQUENCY_TOO_HIGH),
        (-0.0, ErrorCode.FREQUENCY_TOO_HIGH),
        (-300, ErrorCode.FREQUENCY_TOO_HIGH),
        (-MAX_SAFE_INTEGER, ErrorCode.FREQUENCY_TOO_HIGH),
        (-(2**53), ErrorCode.INVALID_RULE),
        (2**53, ErrorCode.INVALID_RULE),
        (300.5, ErrorCode.INVALID_RULE),
        (299.5, ErrorCode.INVALID_RULE),
        ("300", ErrorCode.INVALID_RULE),
        (None, ErrorCode.INVALID_RULE),
        (True, ErrorCode.INVALID_RULE),
        (False, ErrorCode.INVALID_RULE),
        (math.nan, ErrorCode.INVALID_RULE),
        (math.inf, ErrorCode.INVALID_RULE),
        ([300], ErrorCode.INVALID_RULE),
    ],
)
def test_check_every_seconds(value: object, result: int | ErrorCode) -> None:
    if isinstance(result, ErrorCode):
        with pytest.raises(ScheduleInputError) as caught:
            check_every_seconds(value)
        assert caught.value.code is result
    else:
        checked = check_every_seconds(value)
        assert checked == result
        assert type(checked) is int


@pytest.mark.parametrize(
    ("value", "result"),
    [
        (1, 1),
        (5.0, 5),
        (MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        (0, None),
        (-1, None),
        (1.5, None),
        (True, None),
        (None, None),
        ("5", None),
        (math.nan, None),
        (2**53, None),
    ],
)
def test_check_after_seconds(value: object, result: int | None) -> None:
    if result is None:
        with pytest.raises(ScheduleInputError) as caught:
            check_after_seconds(value)
        assert caught.value.code is ErrorCode.INVALID_RULE
    else:
        assert check_after_seconds(value) == result


@pytest.mark.parametrize(
    ("arguments", "selector"),
    [
        ({"prompt": "p", "after_seconds": 5}, "after_seconds"),
        ({"prompt": "p", "at": "2026-08-06T01:00:00Z"}, "at"),
        ({"prompt": "p", "every_seconds": 300}, "every_seconds"),
        ({"prompt": "p", "at": None}, "at"),  # present counts, whatever its value
        ({"prompt": "p", "every_seconds": None}, "every_seconds"),
        ({"at": "x"}, "at"),  # the prompt is judged after the selector
        ({"prompt": "p"}, None),
        ({}, None),
        ({"prompt": "p", "after_seconds": 5, "at": "x"}, None),
        ({"prompt": "p", "at": None, "every_seconds": None}, None),
        ({"prompt": "p", "after_seconds": 1, "at": 1, "every_seconds": 1}, None),
        ({"prompt": "p", "cron": "* * * * *"}, "cron"),  # a selector, whatever its value
        ({"prompt": "p", "cron": None}, "cron"),
        ({"prompt": "p", "at": "x", "time_zone": "UTC"}, None),
        ({"prompt": "p", "every_seconds": 300, "cron": None}, None),
        ({"prompt": "p", "after_seconds": 5, "cron": {}}, None),
        ({"prompt": "p", "afterSeconds": 5}, None),
    ],
)
def test_create_selector(arguments: dict[str, object], selector: str | None) -> None:
    assert create_selector(arguments) == selector
    assert create_selector(arguments, cron=True) == selector


@pytest.mark.parametrize(
    ("arguments", "selector"),
    [
        ({"prompt": "p", "after_seconds": 5}, "after_seconds"),
        ({"prompt": "p", "at": "x"}, "at"),
        ({"prompt": "p", "every_seconds": 300}, "every_seconds"),
        ({"prompt": "p", "cron": {"expression": "0 9 * * *", "time_zone": "UTC"}}, None),
        ({"prompt": "p", "cron": None}, None),  # an unknown key, even when null
        ({"prompt": "p", "after_seconds": 5, "cron": None}, None),
        ({"prompt": "p"}, None),
        ({"prompt": "p", "after_seconds": 5, "at": "x"}, None),
    ],
)
def test_create_selector_without_cron(arguments: dict[str, object], selector: str | None) -> None:
    assert create_selector(arguments, cron=False) == selector


# ---- creation --------------------------------------------------------------------------------


def test_create_every_first_target_is_one_interval_after_now() -> None:
    record = create_every_schedule_record("schedule-2", " stretch\n", 300.0, T0)
    assert record == EveryRecord("schedule-2", "stretch", 300, "2026-08-05T12:05:00.000Z")
    assert type(record.every_seconds) is int
    assert record.kind == "every"
    assert record.interval_ms == 300_000
    assert list(record.to_json().items()) == [
        ("id", "schedule-2"),
        ("kind", "every"),
        ("prompt", "stretch"),
        ("everySeconds", 300),
        ("scheduledAt", "2026-08-05T12:05:00.000Z"),
    ]


@pytest.mark.parametrize(
    ("prompt", "seconds", "now", "code"),
    [
        ("", 300, T0, ErrorCode.INVALID_PROMPT),
        ("", "x", None, ErrorCode.INVALID_PROMPT),
        ("p", "300", None, ErrorCode.INVALID_RULE),
        ("p", 300.5, T0, ErrorCode.INVALID_RULE),
        ("p", None, T0, ErrorCode.INVALID_RULE),
        ("p", 299.0, None, ErrorCode.FREQUENCY_TOO_HIGH),
        ("p", -1, T0, ErrorCode.FREQUENCY_TOO_HIGH),
        ("p", 300, None, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 300, 1.5, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 300, True, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 300, MAX_INSTANT_MS - 299_999, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", MAX_EVERY_SECONDS, T0, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", MAX_EVERY_SECONDS + 1, T0, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", MAX_SAFE_INTEGER, MIN_INSTANT_MS, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 300, MIN_INSTANT_MS - 300_001, ErrorCode.TIME_OUT_OF_RANGE),
    ],
)
def test_create_every_rejects_in_order(
    prompt: object, seconds: object, now: object, code: ErrorCode
) -> None:
    with pytest.raises(ScheduleInputError) as caught:
        create_every_schedule_record("schedule-1", prompt, seconds, now)
    assert caught.value.code is code


def test_create_every_range_boundaries() -> None:
    last = create_every_schedule_record("s", "p", 300, MAX_INSTANT_MS - 300_000)
    assert last.scheduled_at == "9999-12-31T23:59:59.999Z"
    first = create_every_schedule_record("s", "p", 300, MIN_INSTANT_MS - 300_000)
    assert first.scheduled_at == "0001-01-01T00:00:00.000Z"


@pytest.mark.parametrize("seconds", [299, 300.0, MAX_EVERY_SECONDS + 1, True])
def test_every_record_construction_checks_the_interval(seconds: object) -> None:
    with pytest.raises(ValueError, match="every_seconds"):
        EveryRecord("s", "p", seconds, "2026-08-05T12:05:00.000Z")  # type: ignore[arg-type]


# ---- occurrence arithmetic ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accepted", "occurrence", "following"),
    [
        ("12:05:00.000", "12:05:00.000", "2026-08-05T12:10:00.000Z"),
        ("12:05:00.001", "12:05:00.000", "2026-08-05T12:10:00.000Z"),
        ("12:09:59.999", "12:05:00.000", "2026-08-05T12:10:00.000Z"),
        ("12:10:00.000", "12:10:00.000", "2026-08-05T12:15:00.000Z"),
        ("12:17:34.000", "12:15:00.000", "2026-08-05T12:20:00.000Z"),
        ("23:59:59.999", "23:55:00.000", "2026-08-06T00:00:00.000Z"),
    ],
)
def test_contract_occurrence_examples(accepted: str, occurrence: str, following: str) -> None:
    """Created 12:00:00 with 300 seconds: the first target is 12:05."""
    assert resolve_every_occurrence(every(), ms(accepted)) == (
        f"2026-08-05T{occurrence}Z",
        following,
    )


@pytest.mark.parametrize(
    ("accepted", "fragment"),
    [
        (ms("12:04:59.999"), "precedes its target 2026-08-05T12:05:00.000Z"),
        (T0, "precedes"),
        (MIN_INSTANT_MS - 1, "outside"),
        (MAX_INSTANT_MS + 1, "outside"),
        (float(ms("12:05:00.000")), "integer"),
        (True, "integer"),
    ],
)
def test_occurrence_rejects(accepted: object, fragment: str) -> None:
    with pytest.raises(ScheduleLogError) as caught:
        resolve_every_occurrence(every(), accepted)  # type: ignore[arg-type]
    assert fragment in caught.value.message
    assert caught.value.code is ErrorCode.CORRUPT_SCHEDULE_LOG


def test_exhaustion_at_the_end_of_year_9999() -> None:
    fits = every(format_instant(MAX_INSTANT_MS - 600_000))
    assert resolve_every_occurrence(fits, MAX_INSTANT_MS) == ("9999-12-31T23:59:59.999Z", None)
    assert resolve_every_occurrence(fits, MAX_INSTANT_MS - 1) == (
        format_instant(MAX_INSTANT_MS - 300_000),
        "9999-12-31T23:59:59.999Z",
    )
    last = every(format_instant(MAX_INSTANT_MS - 300_000))
    assert resolve_every_occurrence(last, MAX_INSTANT_MS - 300_000) == (
        format_instant(MAX_INSTANT_MS - 300_000),
        "9999-12-31T23:59:59.999Z",
    )
    beyond = every("9999-12-31T23:55:00.000Z")
    assert resolve_every_occurrence(beyond, MAX_INSTANT_MS) == ("9999-12-31T23:55:00.000Z", None)
    huge = every("2026-08-05T12:05:00.000Z", MAX_EVERY_SECONDS)
    assert resolve_every_occurrence(huge, ms("12:05:00.000")) == ("2026-08-05T12:05:00.000Z", None)

    events = log(
        CreateChange(beyond).to_json(),
        DispatchChange("schedule-1", "9999-12-31T23:59:59.999Z").to_json(),
    )
    folded = fold_schedule_events(events)
    assert folded.active == ()
    assert folded.seen_ids == ("schedule-1",)
    with pytest.raises(ScheduleLogError, match="event seq 2: dispatch of inactive id"):
        fold_schedule_events(
            [
                *events,
                Event(
                    "schedule/change",
                    2,
                    DispatchChange("schedule-1", "9999-12-31T23:59:59.999Z").to_json(),
                ),
            ]
        )


def test_latest_only_catch_up() -> None:
    """An hour late, one occurrence is delivered (the latest) and nothing is owed after it."""
    record = create_every_schedule_record("schedule-1", "stretch", 300, T0)
    late = ms("13:00:01.000")
    folded = fold_schedule_events(log(CreateChange(record).to_json()))
    plan = plan_delivery(folded, late)
    assert isinstance(plan, DeliverBatch)
    assert [(m.occurrence_at, m.next_scheduled_at) for m in plan.members] == [
        ("2026-08-05T13:00:00.000Z", "2026-08-05T13:05:00.000Z")
    ]
    dispatched = log(
        CreateChange(record).to_json(), DispatchChange("schedule-1", plan.accepted_at).to_json()
    )
    after = fold_schedule_events(dispatched)
    assert after.active == (EveryRecord("schedule-1", "stretch", 300, "2026-08-05T13:05:00.000Z"),)
    assert plan_delivery(after, late) == WaitFor(after.active[0], 299_000)


# ---- the seeded property: run-time arithmetic and the durable fold agree ----------------------

INTERVALS = (300, 301, 599, 600, 900, 3_599, 3_600, 7_200, 43_200, 86_399, 86_400)


def _case(rng: random.Random) -> tuple[int, int, list[tuple[int, int]]]:
    seconds = rng.choice(INTERVALS) if rng.random() < 0.3 else rng.randint(300, 86_400)
    created = rng.randint(MIN_INSTANT_MS, parse_instant("9000-01-01T00:00:00.000Z"))
    dispatches = []
    for _ in range(rng.randint(1, 3)):
        skipped = rng.choice((0, 1, 10_000)) if rng.random() < 0.2 else rng.randint(0, 10_000)
        offset = (
            rng.choice((0, seconds * 1000 - 1))
            if rng.random() < 0.2
            else rng.randrange(seconds * 1000)
        )
        dispatches.append((skipped, offset))
    return seconds, created, dispatches


def test_runtime_arithmetic_and_durable_fold_agree() -> None:
    rng = random.Random(20260805)
    for _ in range(3_000):
        seconds, created, steps = _case(rng)
        interval = seconds * 1000
        record = create_every_schedule_record("schedule-1", "p", seconds, created)
        events = log(CreateChange(record).to_json())
        target = created + interval
        for skipped, offset in steps:
            accepted = target + skipped * interval + offset
            # run time: the decision's arithmetic
            folded = fold_schedule_events(events)
            current = folded.get("schedule-1")
            assert isinstance(current, EveryRecord)
            assert current.target_ms == target
            assert (current.target_ms - created) % interval == 0  # on the creation grid
            plan = plan_delivery(folded, accepted)
            assert isinstance(plan, DeliverBatch)
            (member,) = plan.members
            occurrence = target + skipped * interval
            assert member.occurrence_at == format_instant(occurrence)
            assert member.next_scheduled_at == format_instant(occurrence + interval)
            assert resolve_every_occurrence(current, accepted) == (
                member.occurrence_at,
                member.next_scheduled_at,
            )
            # durable: replaying the dispatch moves the record to the same next target
            events.append(
                Event(
                    "schedule/change",
                    len(events),
                    DispatchChange("schedule-1", plan.accepted_at).to_json(),
                )
            )
            replayed = fold_schedule_events(events)
            advanced = replayed.get("schedule-1")
            assert isinstance(advanced, EveryRecord)
            assert advanced.scheduled_at == member.next_scheduled_at
            assert advanced.every_seconds == seconds
            assert schedule_reminder_presentation(events, len(events) - 1) == {
                "scheduleId": "schedule-1",
                "prompt": "p",
                "occurrenceAt": member.occurrence_at,
            }
            target = occurrence + interval
