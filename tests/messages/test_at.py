"""``at`` reminders: the value grammar, zones, local-time resolution and record creation."""

from __future__ import annotations

import datetime
import math
from types import MappingProxyType
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages import (
    AtRecord,
    ErrorCode,
    ScheduleInputError,
    canonicalize_time_zone,
    create_at_schedule_record,
    format_instant,
    parse_instant,
)
from messages._absolute import resolve_at
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS
from messages._zones import load_time_zone, resolve_local_time
from tests.messages.helpers import AT_EXAMPLES, REFUSED_ZONE_NAMES, local

NOW = "2026-08-05T12:00:00.000Z"
NOW_MS = parse_instant(NOW)

RULE = ErrorCode.INVALID_RULE
ZONE = ErrorCode.INVALID_TIME_ZONE
RANGE = ErrorCode.TIME_OUT_OF_RANGE
NOT_FUTURE = ErrorCode.NOT_FUTURE


def code_of(at: object, now: object = NOW_MS) -> ErrorCode:
    with pytest.raises(ScheduleInputError) as caught:
        create_at_schedule_record("schedule-1", "p", at, now)
    return caught.value.code


# ---- every example row of the contract's table (now = 2026-08-05T12:00:00.000Z) ----------

ACCEPTED: list[tuple[object, str]] = list(AT_EXAMPLES)

REJECTED: list[tuple[object, ErrorCode]] = [
    ("2026-08-06T09:00:00", RULE),
    ("2026-08-06 01:00:00Z", RULE),
    ("2026-08-06t01:00:00Z", RULE),
    ("2026-08-06T01:00:00z", RULE),
    ("2026-02-29T01:00:00Z", RULE),
    ("2026-08-06T24:00:00Z", RULE),
    ("2026-08-06T01:00:60Z", RULE),
    ("2026-08-06T01:00:00-00:00", RULE),
    ("2026-08-06T01:00:00+24:00", RULE),
    ("2026-08-06T01:00:00+01:60", RULE),
    ("0000-01-01T00:00:00Z", RULE),
    ("2026-08-06T01:00:00+14:00", NOT_FUTURE),
    ("2026-08-05T12:00:00Z", NOT_FUTURE),
    ("2026-08-05T20:00:00+08:00", NOT_FUTURE),
    ("9999-12-31T23:59:59.999-23:59", RANGE),
    (local("2026-03-08", "02:30:00", "America/New_York"), RULE),
    (local("2026-03-29", "01:30:00", "Europe/London"), RULE),
    (local("2026-02-30", "09:00:00", "Bogus/Zone"), RULE),
    (local("9999-12-31", "23:59:59.999", "America/New_York"), RANGE),
    (42, RULE),
    (None, RULE),
    (["2026-08-06T01:00:00Z"], RULE),
]


@pytest.mark.parametrize(("at", "stored"), ACCEPTED, ids=[repr(a) for a, _ in ACCEPTED])
def test_contract_examples_accepted(at: object, stored: str) -> None:
    record = create_at_schedule_record("schedule-1", "p", at, NOW_MS)
    assert record == AtRecord("schedule-1", "p", stored)
    assert record.to_json() == {
        "id": "schedule-1",
        "kind": "at",
        "prompt": "p",
        "scheduledAt": stored,
    }


@pytest.mark.parametrize(("at", "code"), REJECTED, ids=[repr(a) for a, _ in REJECTED])
def test_contract_examples_rejected(at: object, code: ErrorCode) -> None:
    assert code_of(at) is code


# ---- the string grammar ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2026-08-06T01:00:00+0800",
        "2026-08-06T01:00:00+08",
        "2026-08-06T01:00:00.1234Z",
        "2026-08-06T01:00:00,5Z",
        "2026-08-06T01:00:00.Z",
        "2026-08-06T01:00:00Z\n",
        "\n2026-08-06T01:00:00Z",
        " 2026-08-06T01:00:00Z",
        "2026-08-06T01:00:00Z ",
        "12026-08-06T01:00:00Z",
        "+2026-08-06T01:00:00Z",
        "-2026-08-06T01:00:00Z",
        "2026-8-06T01:00:00Z",
        "2026-08-06T1:00:00Z",
        "2026-08-06T01:00Z",
        "2026-08-06",
        "2026-08-06T01:00:00+8:00",
        "2026-08-06T01:00:00+08:0",
        "2026-08-06T01:00:00UTC",
        "2026-08-06T01:00:00Z[UTC]",
        "٢٠٢٦-08-06T01:00:00Z",  # Arabic-Indic digits are not [0-9]
        "２０２６-08-06T01:00:00Z",  # full-width digits
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-08-00T00:00:00Z",
        "2026-08-06T01:60:00Z",
        "2100-02-29T00:00:00Z",
        "",
    ],
)
def test_malformed_strings_are_invalid_rule(text: str) -> None:
    with pytest.raises(ScheduleInputError) as caught:
        resolve_at(text)
    assert caught.value.code is RULE


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2026-08-06T01:00:00+00:00", "2026-08-06T01:00:00.000Z"),
        ("2026-08-06T01:00:00.1Z", "2026-08-06T01:00:00.100Z"),
        ("2026-08-06T01:00:00.01Z", "2026-08-06T01:00:00.010Z"),
        ("2026-08-06T01:00:00.001Z", "2026-08-06T01:00:00.001Z"),
        ("2026-08-06T01:00:00.000Z", "2026-08-06T01:00:00.000Z"),
        ("2026-08-06T01:00:00+23:59", "2026-08-05T01:01:00.000Z"),
        ("2026-08-06T01:00:00-23:59", "2026-08-07T00:59:00.000Z"),
        ("2000-02-29T00:00:00Z", "2000-02-29T00:00:00.000Z"),
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z"),
        ("0001-01-01T23:00:00+23:00", "0001-01-01T00:00:00.000Z"),
        ("1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z"),
        # proleptic Gregorian: the days the 1582 reform skipped exist
        ("1582-10-10T12:00:00Z", "1582-10-10T12:00:00.000Z"),
        ("9999-12-31T23:59:59.999+00:00", "9999-12-31T23:59:59.999Z"),
    ],
)
def test_strings_resolve_to_utc(text: str, instant: str) -> None:
    assert resolve_at(text) == parse_instant(instant)


@pytest.mark.parametrize(
    "text",
    ["0001-01-01T00:00:00+00:01", "0001-01-01T00:00:00.000+23:59", "9999-12-31T23:59:59.999-00:01"],
)
def test_strings_outside_the_years_are_out_of_range(text: str) -> None:
    with pytest.raises(ScheduleInputError) as caught:
        resolve_at(text)
    assert caught.value.code is RANGE


def test_julian_only_leap_day_does_not_exist() -> None:
    with pytest.raises(ScheduleInputError) as caught:
        resolve_at(local("1000-02-29", "00:00:00", "UTC"))
    assert caught.value.code is RULE
    assert resolve_at(local("1000-03-01", "00:00:00", "UTC")) == resolve_at("1000-03-01T00:00:00Z")


offsets = st.integers(-(23 * 60 + 59), 23 * 60 + 59).filter(lambda m: m != 0)


def _with_offset(instant_ms: int, minutes: int, digits: int) -> str:
    wall = format_instant(instant_ms + minutes * 60_000)
    body = wall[:19] + ("" if digits == 0 else wall[19 : 20 + digits])
    sign = "+" if minutes > 0 else "-"
    return f"{body}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@settings(max_examples=400, deadline=None)
@given(st.integers(MIN_INSTANT_MS + 86_400_000, MAX_INSTANT_MS - 86_400_000), offsets)
def test_any_offset_string_names_its_instant(instant_ms: int, minutes: int) -> None:
    assert resolve_at(_with_offset(instant_ms, minutes, 3)) == instant_ms
    seconds_only = instant_ms - instant_ms % 1000
    assert resolve_at(_with_offset(seconds_only, minutes, 0)) == seconds_only


# ---- the local object --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "code"),
    [
        # key set first
        ({"date": "2026-08-06", "time": "09:00:00"}, RULE),
        ({**local("2026-08-06", "09:00:00", "UTC"), "offset": "+08:00"}, RULE),
        ({"date": "2026-08-06", "time": "09:00:00", "timeZone": "UTC"}, RULE),
        ({}, RULE),
        ({"date": "x", "time": 5, "zone": 8}, RULE),
        # then date/time types (before the zone's type)
        (local(20260806, "09:00:00", 8), RULE),
        (local("2026-08-06", None, "UTC"), RULE),
        # then the zone's type (before date/time grammar)
        (local("2026-02-30", "09:00:00", 8), ZONE),
        (local("2026-08-06", "09:00:00", None), ZONE),
        # then date/time grammar and calendar (before the zone name)
        (local("2026-02-30", "09:00:00", "Bogus/Zone"), RULE),
        (local("2026-8-06", "09:00:00", "UTC"), RULE),
        (local("2026-08-06", "9:00:00", "UTC"), RULE),
        (local("2026-08-06", "09:00", "UTC"), RULE),
        (local("2026-08-06", "09:00:00Z", "UTC"), RULE),
        (local("2026-08-06", "09:00:00+08:00", "UTC"), RULE),
        (local("2026-08-06", "09:00:00.1234", "UTC"), RULE),
        (local("2026-08-06T09:00:00", "09:00:00", "UTC"), RULE),
        (local("2026-08-06", "24:00:00", "UTC"), RULE),
        (local("2026-08-06", "23:59:60", "UTC"), RULE),
        (local("2026-08-06\n", "09:00:00", "UTC"), RULE),
        (local("0000-01-01", "00:00:00", "UTC"), RULE),
        # then the zone name
        (local("2026-08-06", "09:00:00", "Bogus/Zone"), ZONE),
        (local("2026-08-06", "09:00:00", "GMT"), ZONE),
    ],
)
def test_local_object_checks_in_order(value: object, code: ErrorCode) -> None:
    with pytest.raises(ScheduleInputError) as caught:
        resolve_at(value)
    assert caught.value.code is code


def test_local_object_may_be_any_mapping() -> None:
    value = MappingProxyType(local("2026-08-06", "09:00:00", "UTC"))
    assert resolve_at(value) == parse_instant("2026-08-06T09:00:00.000Z")


# ---- zones ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("UTC", "UTC"),
        ("America/New_York", "America/New_York"),
        ("america/new_york", "America/New_York"),
        ("AMERICA/NEW_YORK", "America/New_York"),
        ("US/Eastern", "US/Eastern"),
        ("us/eastern", "US/Eastern"),
        ("Asia/Calcutta", "Asia/Calcutta"),
        ("Etc/GMT+3", "Etc/GMT+3"),
        ("etc/gmt-14", "Etc/GMT-14"),
        ("Etc/UTC", "Etc/UTC"),
        ("America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires"),
        ("Australia/Lord_Howe", "Australia/Lord_Howe"),
    ],
)
def test_canonicalize_time_zone(name: str, key: str) -> None:
    assert canonicalize_time_zone(name) == key


@pytest.mark.parametrize(
    "name",
    [
        *REFUSED_ZONE_NAMES,
        "America/New_York/",
        "/America/New_York",
        " America/New_York",
        "America/New_York\n",
        "posix/America/New_York",
        "right/America/New_York",
        "POSIX/UTC",
        "America/../Europe/London",
        "../../etc/passwd",
        "1America/New_York",
        "zoneinfo/America/New_York",
        "Europe/Lоndon",  # a Cyrillic o
        None,
        8,
        ["UTC"],
    ],
)
def test_canonicalize_time_zone_rejects(name: object) -> None:
    with pytest.raises(ScheduleInputError) as caught:
        canonicalize_time_zone(name)
    assert caught.value.code is ZONE


def test_zones_come_from_the_tzdata_package() -> None:
    zone = load_time_zone("America/New_York")
    assert isinstance(zone, ZoneInfo)
    assert str(zone) == "America/New_York"
    assert load_time_zone("America/New_York") is zone  # cached
    assert load_time_zone("UTC") is datetime.UTC
    with pytest.raises(ScheduleInputError):
        load_time_zone("america/new_york")  # only canonical keys load


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("US/Eastern", "America/New_York"),
        ("Asia/Calcutta", "Asia/Kolkata"),
        ("us/pacific", "America/Los_Angeles"),
        ("Etc/GMT+3", "America/Sao_Paulo"),  # UTC−3 without DST in 2026
    ],
)
def test_links_resolve_like_their_targets(link: str, target: str) -> None:
    for date, time in [("2026-01-15", "09:00:00"), ("2026-07-15", "09:00:00")]:
        assert resolve_at(local(date, time, link)) == resolve_at(local(date, time, target))


# ---- local time resolution across clock changes ------------------------------------------

DST: list[tuple[str, str, str, str | ErrorCode]] = [
    # New York, spring forward 2026-03-08 02:00 EST -> 03:00 EDT
    ("America/New_York", "2026-03-08", "01:59:59.999", "2026-03-08T06:59:59.999Z"),
    ("America/New_York", "2026-03-08", "02:00:00", RULE),
    ("America/New_York", "2026-03-08", "02:59:59.999", RULE),
    ("America/New_York", "2026-03-08", "03:00:00", "2026-03-08T07:00:00.000Z"),
    # New York, fall back 2026-11-01 02:00 EDT -> 01:00 EST: the first instant wins
    ("America/New_York", "2026-11-01", "00:59:59.999", "2026-11-01T04:59:59.999Z"),
    ("America/New_York", "2026-11-01", "01:00:00", "2026-11-01T05:00:00.000Z"),
    ("America/New_York", "2026-11-01", "01:59:59.999", "2026-11-01T05:59:59.999Z"),
    ("America/New_York", "2026-11-01", "02:00:00", "2026-11-01T07:00:00.000Z"),
    # London, 2026-03-29 01:00 GMT -> 02:00 BST and 2026-10-25 02:00 BST -> 01:00 GMT
    ("Europe/London", "2026-03-29", "00:59:59.999", "2026-03-29T00:59:59.999Z"),
    ("Europe/London", "2026-03-29", "01:00:00", RULE),
    ("Europe/London", "2026-03-29", "02:00:00", "2026-03-29T01:00:00.000Z"),
    ("Europe/London", "2026-10-25", "01:00:00", "2026-10-25T00:00:00.000Z"),
    ("Europe/London", "2026-10-25", "02:00:00", "2026-10-25T02:00:00.000Z"),
    # Lord Howe: a 30-minute shift. 2026-04-05 02:00 +11 -> 01:30 +10:30 (overlap 01:30-02:00);
    # 2026-10-04 02:00 +10:30 -> 02:30 +11 (gap 02:00-02:30)
    ("Australia/Lord_Howe", "2026-04-05", "01:29:59.999", "2026-04-04T14:29:59.999Z"),
    ("Australia/Lord_Howe", "2026-04-05", "01:30:00", "2026-04-04T14:30:00.000Z"),
    ("Australia/Lord_Howe", "2026-04-05", "01:45:00", "2026-04-04T14:45:00.000Z"),
    ("Australia/Lord_Howe", "2026-04-05", "02:00:00", "2026-04-04T15:30:00.000Z"),
    ("Australia/Lord_Howe", "2026-10-04", "01:59:59.999", "2026-10-03T15:29:59.999Z"),
    ("Australia/Lord_Howe", "2026-10-04", "02:00:00", RULE),
    ("Australia/Lord_Howe", "2026-10-04", "02:15:00", RULE),
    ("Australia/Lord_Howe", "2026-10-04", "02:30:00", "2026-10-03T15:30:00.000Z"),
    # Kolkata: +05:30 all year
    ("Asia/Kolkata", "2026-01-01", "00:00:00", "2025-12-31T18:30:00.000Z"),
    ("Asia/Kolkata", "2026-07-01", "05:29:59.999", "2026-06-30T23:59:59.999Z"),
    # history: Shanghai's local mean time was +08:05:43 until 1901
    ("Asia/Shanghai", "1900-01-01", "00:00:00", "1899-12-31T15:54:17.000Z"),
    # the year range applies to the resolved instant
    ("Asia/Tokyo", "0001-01-01", "00:00:00", RANGE),
    ("America/New_York", "0001-01-01", "00:00:00", "0001-01-01T04:56:02.000Z"),
    ("Asia/Tokyo", "9999-12-31", "23:59:59.999", "9999-12-31T14:59:59.999Z"),
]


@pytest.mark.parametrize(("zone", "date", "time", "expected"), DST)
def test_local_time_across_clock_changes(
    zone: str, date: str, time: str, expected: str | ErrorCode
) -> None:
    if isinstance(expected, ErrorCode):
        with pytest.raises(ScheduleInputError) as caught:
            resolve_at(local(date, time, zone))
        assert caught.value.code is expected
    else:
        assert format_instant(resolve_at(local(date, time, zone))) == expected


SAMPLE_ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "America/Santiago",
    "Africa/Casablanca",
    "Europe/Dublin",
    "Antarctica/Troll",
    "Pacific/Apia",
]


@settings(max_examples=300, deadline=None)
@given(
    st.integers(
        parse_instant("1800-01-01T00:00:00.000Z"), parse_instant("2200-01-01T00:00:00.000Z")
    ),
    st.sampled_from(SAMPLE_ZONES),
)
def test_wall_time_of_an_instant_resolves_to_its_first_occurrence(instant: int, zone: str) -> None:
    tz = load_time_zone(zone)
    wall = (
        (
            datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
            + datetime.timedelta(milliseconds=instant)
        )
        .astimezone(tz)
        .replace(tzinfo=None)
    )
    resolved = resolve_local_time(wall, zone)
    assert resolved <= instant
    assert instant - resolved <= 3 * 3_600_000  # at most one backward shift earlier
    back = (
        (
            datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
            + datetime.timedelta(milliseconds=resolved)
        )
        .astimezone(tz)
        .replace(tzinfo=None)
    )
    assert back == wall


# ---- creation: checks, order, the clock ---------------------------------------------------


def test_create_at_stores_only_the_resolved_instant() -> None:
    record = create_at_schedule_record(
        "schedule-7", "  call mom ", local("2026-08-06", "09:00:00", "us/eastern"), NOW_MS
    )
    assert record == AtRecord("schedule-7", "call mom", "2026-08-06T13:00:00.000Z")
    assert record.kind == "at"
    assert record.target_ms == parse_instant("2026-08-06T13:00:00.000Z")
    assert list(record.to_json()) == ["id", "kind", "prompt", "scheduledAt"]


@pytest.mark.parametrize(
    ("prompt", "at", "now", "code"),
    [
        ("", "2026-08-06T01:00:00Z", NOW_MS, ErrorCode.INVALID_PROMPT),
        ("\ud800", 42, None, ErrorCode.INVALID_PROMPT),  # prompt before everything
        ("p", "2026-08-06T01:00:00", None, RULE),  # grammar before the clock
        ("p", local("2026-02-30", "09:00:00", "UTC"), math.nan, RULE),
        ("p", local("2026-08-06", "09:00:00", "Bogus/Zone"), None, ZONE),
        ("p", local("2026-03-08", "02:30:00", "America/New_York"), None, RULE),
        ("p", "2026-08-06T01:00:00Z", None, RANGE),
        ("p", "2026-08-06T01:00:00Z", math.nan, RANGE),
        ("p", "2026-08-06T01:00:00Z", math.inf, RANGE),
        ("p", "2026-08-06T01:00:00Z", NOW_MS + 0.5, RANGE),
        ("p", "2026-08-06T01:00:00Z", True, RANGE),
        ("p", "2026-08-06T01:00:00Z", str(NOW_MS), RANGE),
        ("p", "9999-12-31T23:59:59.999-23:59", None, RANGE),  # range, then the clock
        ("p", "2020-01-01T00:00:00Z", None, RANGE),  # a bad clock is never "not future"
        ("p", NOW, NOW_MS, NOT_FUTURE),
        ("p", "2026-08-05T11:59:59.999Z", NOW_MS, NOT_FUTURE),
        ("p", "0001-01-01T00:00:00Z", NOW_MS, NOT_FUTURE),
    ],
)
def test_create_at_rejects_in_order(
    prompt: object, at: object, now: object, code: ErrorCode
) -> None:
    with pytest.raises(ScheduleInputError) as caught:
        create_at_schedule_record("schedule-1", prompt, at, now)
    assert caught.value.code is code
    assert "2026" not in caught.value.message  # fixed messages: no input is echoed


@pytest.mark.parametrize("now", [NOW_MS - 1, float(NOW_MS - 1)])
def test_create_at_one_millisecond_later_is_accepted(now: object) -> None:
    assert create_at_schedule_record("s", "p", NOW, now).scheduled_at == NOW


@pytest.mark.parametrize("bad_id", ["", " s", 5])
def test_create_at_rejects_a_malformed_id_as_a_bug(bad_id: object) -> None:
    with pytest.raises(ValueError, match="schedule id"):
        create_at_schedule_record(bad_id, "p", "2026-08-06T01:00:00Z", NOW_MS)  # type: ignore[arg-type]
