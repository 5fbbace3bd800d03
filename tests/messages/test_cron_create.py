"""Creating ``cron`` reminders: the first target, and the order of the input checks."""

from __future__ import annotations

import pytest

from messages import (
    CronRecord,
    ErrorCode,
    ScheduleInputError,
    create_cron_schedule_record,
    parse_instant,
)
from messages._cron_zone import cron_schedule
from messages._instant import MAX_INSTANT_MS
from messages._tool_values import CreateInput, CronSelector, ToolError, parse_create_input
from tests.messages.cron_cases import SHANGHAI, WEEKDAYS

# ---- creation ------------------------------------------------------------------------------

NOW_MS = parse_instant("2026-08-05T12:00:00.000Z")  # Wednesday, 20:00 in Shanghai


def cron(expression: object = WEEKDAYS, zone: object = SHANGHAI) -> dict[str, object]:
    return {"expression": expression, "time_zone": zone}


def created(*fields: str) -> CronRecord:
    """The created record: ``(scheduled_at)`` of the weekday rule, or all three fields."""
    expression, zone, at = fields if len(fields) == 3 else (WEEKDAYS, SHANGHAI, *fields)
    return CronRecord("schedule-1", "standup", expression, zone, at)


@pytest.mark.parametrize(
    ("value", "now", "expected"),
    [
        (cron(), NOW_MS, created("2026-08-06T01:00:00.000Z")),
        (
            cron(" 0 9 * * mon-fri\t", "asia/shanghai"),
            NOW_MS,
            created("0 9 * * MON-FRI", SHANGHAI, "2026-08-06T01:00:00.000Z"),
        ),
        (
            cron("@Daily", "Asia/Calcutta"),
            NOW_MS,
            created("@daily", "Asia/Calcutta", "2026-08-05T18:30:00.000Z"),
        ),
        (cron(), parse_instant("2026-08-06T01:00:00.000Z"), created("2026-08-07T01:00:00.000Z")),
        (cron(), parse_instant("2026-08-06T00:59:59.999Z"), created("2026-08-06T01:00:00.000Z")),
        (cron(), parse_instant("2026-08-07T01:00:00.000Z"), created("2026-08-10T01:00:00.000Z")),
        (
            cron("0 0 1 1 *", "UTC"),
            parse_instant("9998-06-01T00:00:00.000Z"),
            created("0 0 1 1 *", "UTC", "9999-01-01T00:00:00.000Z"),
        ),
    ],
)
def test_create_takes_the_first_occurrence_strictly_after_now(
    value: object, now: int, expected: CronRecord
) -> None:
    record = create_cron_schedule_record("schedule-1", " standup ", value, now)
    assert record == expected
    assert record.target_ms > now
    assert record.target_ms == cron_schedule(record.expression, record.time_zone).next_after(now)


RULE = ErrorCode.INVALID_RULE
ZONE = ErrorCode.INVALID_TIME_ZONE
FREQUENT = ErrorCode.FREQUENCY_TOO_HIGH
RANGE = ErrorCode.TIME_OUT_OF_RANGE
PROMPT = ErrorCode.INVALID_PROMPT
SELECTOR = ErrorCode.INVALID_SELECTOR

CREATE_ORDER: list[tuple[str, object, object, object, ErrorCode]] = [
    ("prompt before the rule", " ", "not an object", NOW_MS, PROMPT),
    ("not an object", "p", "0 9 * * *", NOW_MS, RULE),
    ("null", "p", None, NOW_MS, RULE),
    ("a list", "p", ["0 9 * * *", "UTC"], NOW_MS, RULE),
    ("a missing key", "p", {"expression": "0 9 * * *"}, NOW_MS, RULE),
    ("an extra key", "p", {**cron(), "tz": "UTC"}, NOW_MS, RULE),
    ("camelCase key", "p", {"expression": WEEKDAYS, "timeZone": SHANGHAI}, NOW_MS, RULE),
    ("expression not a string", "p", cron(5, 5), NOW_MS, RULE),
    ("zone not a string before the grammar", "p", cron("bad", None), NOW_MS, ZONE),
    ("grammar before the zone name", "p", cron("bad", "Nowhere/City"), NOW_MS, RULE),
    ("never matches before the zone name", "p", cron("0 9 30 2 *", "EST"), NOW_MS, RULE),
    ("never matches, however dense", "p", cron("*/4 * 31 2 *", SHANGHAI), NOW_MS, RULE),
    ("frequency before the zone name", "p", cron("*/4 * * * *", "EST"), NOW_MS, FREQUENT),
    ("frequency", "p", cron("0,1 9 * * *"), NOW_MS, FREQUENT),
    ("the zone name", "p", cron(WEEKDAYS, "EST"), NOW_MS, ZONE),
    ("the zone name, case", "p", cron(WEEKDAYS, "utc"), NOW_MS, ZONE),
    ("the rule before the clock", "p", cron("bad"), MAX_INSTANT_MS + 1, RULE),
    ("the clock", "p", cron(), MAX_INSTANT_MS + 1, RANGE),
    ("a clock that is not an integer", "p", cron(), 1.5, RANGE),
    (
        "no occurrence before 9999 ends",
        "p",
        cron("0 0 1 1 *", "UTC"),
        parse_instant("9999-06-01T00:00:00.000Z"),
        RANGE,
    ),
    (
        "none locally either",
        "p",
        cron("0 23 31 12 *", "America/New_York"),
        parse_instant("9999-06-01T00:00:00.000Z"),
        RANGE,
    ),
]


@pytest.mark.parametrize(
    ("prompt", "value", "now", "code"),
    [case[1:] for case in CREATE_ORDER],
    ids=[case[0] for case in CREATE_ORDER],
)
def test_create_checks_in_order(
    prompt: object, value: object, now: object, code: ErrorCode
) -> None:
    with pytest.raises(ScheduleInputError) as caught:
        create_cron_schedule_record("schedule-1", prompt, value, now)
    assert caught.value.code is code


def test_create_rejects_a_malformed_id() -> None:
    with pytest.raises(ValueError):
        create_cron_schedule_record(" schedule-1", "p", cron(), NOW_MS)


# ---- tool input ----------------------------------------------------------------------------


def test_parse_create_input_takes_a_cron_selector() -> None:
    expected = CreateInput(" standup ", CronSelector("0 9 * * MON-FRI", SHANGHAI))
    arguments = {"prompt": " standup ", "cron": cron("0 9 * * mon-fri", "asia/shanghai")}
    assert parse_create_input(arguments) == expected
    text = (
        '{"prompt": " standup ", "cron": {"expression": "0 9 * * mon-fri", '
        '"time_zone": "asia/shanghai"}}'
    )
    assert parse_create_input(text) == expected
    record = expected.when.record("schedule-1", "standup", NOW_MS)
    assert record == CronRecord(
        "schedule-1", "standup", "0 9 * * MON-FRI", SHANGHAI, "2026-08-06T01:00:00.000Z"
    )


LONG = "0 9 * * " + "1," * 62 + "1"  # 133 characters

OLD_KEYS = (
    "schedule_create accepts only prompt and one of after_seconds, at or every_seconds; "
    "cron and a time_zone outside at are not supported."
)
OLD_COUNT = "schedule_create needs exactly one of after_seconds, at or every_seconds."

TOOL_ORDER: list[tuple[str, object, bool, ToolError | None]] = [
    (
        "a time_zone beside cron",
        {"prompt": "p", "cron": cron(), "time_zone": "UTC"},
        True,
        ToolError.of(SELECTOR, "create_keys"),
    ),
    (
        "cron and at",
        {"prompt": "p", "cron": cron(), "at": "x"},
        True,
        ToolError.of(SELECTOR, "create_selector_count"),
    ),
    (
        "cron and every_seconds null",
        {"prompt": "p", "cron": cron(), "every_seconds": None},
        True,
        ToolError.of(SELECTOR, "create_selector_count"),
    ),
    ("no selector", {"prompt": "p"}, True, ToolError.of(SELECTOR, "create_selector_count")),
    (
        "the selector before the prompt",
        {"prompt": " ", "cron": cron(), "at": "x"},
        True,
        ToolError.of(SELECTOR, "create_selector_count"),
    ),
    (
        "the prompt before the rule",
        {"prompt": " ", "cron": "bad"},
        True,
        ToolError.of(PROMPT, "prompt"),
    ),
    ("no prompt", {"cron": cron()}, True, ToolError.of(PROMPT, "prompt")),
    ("cron null", {"prompt": "p", "cron": None}, True, ToolError.of(RULE, "cron")),
    ("cron a string", {"prompt": "p", "cron": "0 9 * * *"}, True, ToolError.of(RULE, "cron")),
    (
        "cron a missing key",
        {"prompt": "p", "cron": {"expression": "0 9 * * *"}},
        True,
        ToolError.of(RULE, "cron"),
    ),
    (
        "cron an extra key",
        {"prompt": "p", "cron": {**cron(), "x": 1}},
        True,
        ToolError.of(RULE, "cron"),
    ),
    (
        "expression not a string",
        {"prompt": "p", "cron": cron(5, 5)},
        True,
        ToolError.of(RULE, "cron"),
    ),
    (
        "zone not a string",
        {"prompt": "p", "cron": cron("bad", 5)},
        True,
        ToolError.of(ZONE, "time_zone"),
    ),
    (
        "grammar",
        {"prompt": "p", "cron": cron("bad", "Nowhere/City")},
        True,
        ToolError.of(RULE, "cron"),
    ),
    (
        "never matches",
        {"prompt": "p", "cron": cron("0 9 31 4,6 *")},
        True,
        ToolError.of(RULE, "cron"),
    ),
    (
        "frequency",
        {"prompt": "p", "cron": cron("58,2 * * * *", "Nowhere/City")},
        True,
        ToolError.of(FREQUENT, "cron_frequency"),
    ),
    (
        "zone name",
        {"prompt": "p", "cron": cron(WEEKDAYS, "EST")},
        True,
        ToolError.of(ZONE, "time_zone"),
    ),
    (
        "an over-long expression",
        {"prompt": "p", "cron": cron(LONG)},
        True,
        ToolError.of(RULE, "cron"),
    ),
    (
        "an over-long expression, zone not a string",
        {"prompt": "p", "cron": cron(LONG, None)},
        True,
        ToolError.of(ZONE, "time_zone"),
    ),
    (
        "an over-long zone",
        {"prompt": "p", "cron": cron(WEEKDAYS, "Asia/" + "x" * 60)},
        True,
        ToolError.of(ZONE, "time_zone"),
    ),
    (
        "without cron: cron is unknown",
        {"prompt": "p", "cron": cron()},
        False,
        ToolError(SELECTOR, OLD_KEYS),
    ),
    (
        "without cron: even alone with a bad prompt",
        {"prompt": " ", "cron": None},
        False,
        ToolError(SELECTOR, OLD_KEYS),
    ),
    (
        "without cron: a time_zone",
        {"prompt": "p", "after_seconds": 5, "time_zone": "UTC"},
        False,
        ToolError(SELECTOR, OLD_KEYS),
    ),
    ("without cron: no selector", {"prompt": "p"}, False, ToolError(SELECTOR, OLD_COUNT)),
    (
        "without cron: two selectors",
        {"prompt": "p", "after_seconds": 5, "at": "x"},
        False,
        ToolError(SELECTOR, OLD_COUNT),
    ),
    ("without cron: after_seconds", {"prompt": "p", "after_seconds": 5}, False, None),
]


@pytest.mark.parametrize(
    ("arguments", "with_cron", "expected"),
    [case[1:] for case in TOOL_ORDER],
    ids=[case[0] for case in TOOL_ORDER],
)
def test_parse_create_input_checks_in_order(
    arguments: object, with_cron: bool, expected: ToolError | None
) -> None:
    result = parse_create_input(arguments, cron=with_cron)
    if expected is None:
        assert isinstance(result, CreateInput)
    else:
        assert result == expected


def test_the_without_cron_messages_are_the_old_ones() -> None:
    assert ToolError.of(SELECTOR, "create_keys_without_cron").message == OLD_KEYS
    assert ToolError.of(SELECTOR, "create_selector_count_without_cron").message == OLD_COUNT
    assert "cron" in ToolError.of(SELECTOR, "create_selector_count").message
