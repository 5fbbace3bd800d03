"""``cron`` occurrences across clock changes: exact instants, table-driven.

The rules (``docs/protocol.md`` §10): an occurrence is a matching local minute
at the instant ``zoneinfo`` gives it with ``fold=0``. A skipped local time is
shifted forward by the gap; a repeated one fires once, at its first instant;
two matches that resolve to one instant are one occurrence.
"""

from __future__ import annotations

import datetime
import itertools

import pytest

from messages import format_instant, parse_instant
from messages._cron_zone import cron_schedule
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS
from messages._zones import load_time_zone

NEW_YORK = "America/New_York"
LONDON = "Europe/London"
SYDNEY = "Australia/Sydney"
LORD_HOWE = "Australia/Lord_Howe"
KOLKATA = "Asia/Kolkata"
APIA = "Pacific/Apia"


def z(text: str) -> str:
    """A UTC instant written short: ``2026-03-08T07:30`` → ``2026-03-08T07:30:00.000Z``."""
    return f"{text}:00.000Z" if len(text) == 16 else text


FOLLOWING: list[tuple[str, str, str, str, list[str]]] = [
    # -- New York: 2026-03-08 02:00 EST → 03:00 EDT (07:00Z); 2026-11-01 02:00 EDT → 01:00 EST
    (
        "a skipped time is shifted forward by the gap",
        NEW_YORK,
        "30 2 * * *",
        "2026-03-07T00:00",
        ["2026-03-07T07:30", "2026-03-08T07:30", "2026-03-09T06:30"],
    ),
    (
        "the start of the gap is its end",
        NEW_YORK,
        "0 2 * * *",
        "2026-03-08T05:00",
        ["2026-03-08T07:00", "2026-03-09T06:00"],
    ),
    (
        "the end of the gap",
        NEW_YORK,
        "0 3 * * *",
        "2026-03-08T05:00",
        ["2026-03-08T07:00", "2026-03-09T07:00"],
    ),
    (
        "02:00 and 03:00 on the gap night are one occurrence",
        NEW_YORK,
        "0 2,3 * * *",
        "2026-03-08T05:00",
        ["2026-03-08T07:00", "2026-03-09T06:00", "2026-03-09T07:00"],
    ),
    (
        "every quarter hour across the gap: each instant once",
        NEW_YORK,
        "*/15 * * * *",
        "2026-03-08T06:30",
        [
            "2026-03-08T06:45",  # 01:45 EST
            "2026-03-08T07:00",  # 02:00 (skipped) and 03:00 EDT
            "2026-03-08T07:15",  # 02:15 (skipped) and 03:15 EDT
            "2026-03-08T07:30",
            "2026-03-08T07:45",
            "2026-03-08T08:00",  # 04:00 EDT
        ],
    ),
    (
        "a repeated time fires once, at its first instant",
        NEW_YORK,
        "30 1 * * *",
        "2026-11-01T04:00",
        ["2026-11-01T05:30", "2026-11-02T06:30"],
    ),
    (
        "not again at the repeated instant",
        NEW_YORK,
        "30 1 * * *",
        "2026-11-01T05:30",
        ["2026-11-02T06:30"],
    ),
    (
        "every half hour across the overlap: each local time once",
        NEW_YORK,
        "*/30 * * * *",
        "2026-11-01T04:00",
        [
            "2026-11-01T04:30",  # 00:30 EDT
            "2026-11-01T05:00",  # 01:00 EDT
            "2026-11-01T05:30",  # 01:30 EDT; 01:00 and 01:30 EST (06:00Z, 06:30Z) do not fire
            "2026-11-01T07:00",  # 02:00 EST
            "2026-11-01T07:30",
        ],
    ),
    (
        "the last minute of the repeated hour, first instant",
        NEW_YORK,
        "59 1 * * *",
        "2026-11-01T04:00",
        ["2026-11-01T05:59", "2026-11-02T06:59"],
    ),
    (
        "after the overlap, once",
        NEW_YORK,
        "0 2 * * *",
        "2026-11-01T04:00",
        ["2026-11-01T07:00", "2026-11-02T07:00"],
    ),
    # -- London: 2026-03-29 01:00 GMT → 02:00 BST; 2026-10-25 02:00 BST → 01:00 GMT
    (
        "London spring: skipped 01:30 is 02:30 BST",
        LONDON,
        "30 1 * * *",
        "2026-03-28T12:00",
        ["2026-03-29T01:30", "2026-03-30T00:30"],
    ),
    (
        "London spring: 01:00 and 02:00 are one occurrence",
        LONDON,
        "0 1,2 * * *",
        "2026-03-28T12:00",
        ["2026-03-29T01:00", "2026-03-30T00:00", "2026-03-30T01:00"],
    ),
    (
        "London: 09:00 local every day, an hour earlier in UTC after the change",
        LONDON,
        "0 9 * * *",
        "2026-03-28T00:00",
        ["2026-03-28T09:00", "2026-03-29T08:00"],
    ),
    (
        "London autumn: 01:30 once, in BST",
        LONDON,
        "30 1 * * *",
        "2026-10-24T12:00",
        ["2026-10-25T00:30", "2026-10-26T01:30"],
    ),
    # -- Sydney: 2026-04-05 03:00 AEDT → 02:00 AEST; 2026-10-04 02:00 AEST → 03:00 AEDT
    (
        "Sydney autumn: 02:30 once, in AEDT",
        SYDNEY,
        "30 2 * * *",
        "2026-04-04T12:00",
        ["2026-04-04T15:30", "2026-04-05T16:30"],
    ),
    (
        "Sydney autumn: the repeated hour's matches once each",
        SYDNEY,
        "*/30 2 * * *",
        "2026-04-04T12:00",
        ["2026-04-04T15:00", "2026-04-04T15:30", "2026-04-05T16:00"],
    ),
    (
        "Sydney spring: skipped 02:30 is 03:30 AEDT",
        SYDNEY,
        "30 2 * * *",
        "2026-10-03T12:00",
        ["2026-10-03T16:30", "2026-10-04T15:30"],
    ),
    (
        "Sydney spring: 09:00 local, an hour earlier in UTC after the change",
        SYDNEY,
        "0 9 * * *",
        "2026-10-02T12:00",
        ["2026-10-02T23:00", "2026-10-03T22:00"],
    ),
    # -- Lord Howe, 30-minute DST: 2026-10-04 02:00 (+10:30) → 02:30 (+11);
    #    2026-04-05 02:00 (+11) → 01:30 (+10:30)
    (
        "Lord Howe spring: skipped 02:15 is 02:45 (+11)",
        LORD_HOWE,
        "15 2 * * *",
        "2026-10-03T12:00",
        ["2026-10-03T15:45", "2026-10-04T15:15"],
    ),
    (
        "Lord Howe spring: 02:00 (skipped) and 02:30 are one occurrence",
        LORD_HOWE,
        "0,30 2 * * *",
        "2026-10-03T12:00",
        ["2026-10-03T15:30", "2026-10-04T15:00", "2026-10-04T15:30"],
    ),
    (
        "Lord Howe autumn: 01:45 once, at +11",
        LORD_HOWE,
        "45 1 * * *",
        "2026-04-04T12:00",
        ["2026-04-04T14:45", "2026-04-05T15:15"],
    ),
    (
        "Lord Howe autumn: the repeated half hour's matches once each",
        LORD_HOWE,
        "*/15 1 * * *",
        "2026-04-04T12:00",
        [
            "2026-04-04T14:00",
            "2026-04-04T14:15",
            "2026-04-04T14:30",  # 01:30 (+11); its repeat at 15:00Z does not fire
            "2026-04-04T14:45",  # 01:45 (+11); its repeat at 15:15Z does not fire
            "2026-04-05T14:30",  # 01:00 (+10:30) the next day
        ],
    ),
    # -- Kolkata, +05:30 all year
    ("Kolkata: 09:00 is 03:30Z", KOLKATA, "0 9 * * *", "2026-08-01T00:00", ["2026-08-01T03:30"]),
    (
        "Kolkata: half past each local hour is on the UTC hour",
        KOLKATA,
        "30 * * * *",
        "2026-08-01T00:10",
        ["2026-08-01T01:00", "2026-08-01T02:00"],
    ),
    (
        "Kolkata: the local new year",
        KOLKATA,
        "@yearly",
        "2026-06-01T00:00",
        ["2026-12-31T18:30", "2027-12-31T18:30"],
    ),
    (
        "Kathmandu: +05:45",
        "Asia/Kathmandu",
        "0 9 * * *",
        "2026-08-01T00:00",
        ["2026-08-01T03:15"],
    ),
    # -- Apia skipped 2011-12-30: 2011-12-29 24:00 (−10) → 2011-12-31 00:00 (+14), at 10:00Z
    (
        "Apia: daily, no occurrence on the 30th local; the next is on the 31st",
        APIA,
        "0 9 * * *",
        "2011-12-29T12:00",
        ["2011-12-29T19:00", "2011-12-30T19:00", "2011-12-31T19:00"],
    ),
    (
        "Apia: the skipped 30th is shifted a day forward, onto the 31st's 09:00",
        APIA,
        "0 9 30 12 *",
        "2011-12-01T00:00",
        ["2011-12-30T19:00", "2012-12-29T19:00"],
    ),
    (
        "Apia: the 30th and the 31st of December 2011 are one occurrence",
        APIA,
        "0 9 30,31 12 *",
        "2011-12-01T00:00",
        ["2011-12-30T19:00", "2012-12-29T19:00", "2012-12-30T19:00"],
    ),
    # -- the ends of the years
    (
        "the last year: one occurrence left",
        "UTC",
        "0 0 1 1 *",
        "9998-06-01T00:00",
        ["9999-01-01T00:00"],
    ),
    (
        "the last minute",
        "UTC",
        "59 23 31 12 *",
        "9999-12-31T23:58",
        ["9999-12-31T23:59"],
    ),
    (
        "a local time past the last instant is no occurrence",
        NEW_YORK,
        "0 23 31 12 *",
        "9999-01-01T00:00",
        [],
    ),
    (
        "east of UTC the local year ends first",
        "Asia/Tokyo",
        "0 8 31 12 *",
        "9999-12-30T00:00",
        ["9999-12-30T23:00"],
    ),
    (
        "the first year, in local mean time (to the second)",
        NEW_YORK,
        "0 0 1 1 *",
        "0001-01-01T00:00",
        ["0001-01-01T04:56:02.000Z", "0002-01-01T04:56:02.000Z"],
    ),
]


@pytest.mark.parametrize(
    ("zone", "expression", "after", "expected"),
    [case[1:] for case in FOLLOWING],
    ids=[case[0] for case in FOLLOWING],
)
def test_following(zone: str, expression: str, after: str, expected: list[str]) -> None:
    schedule = cron_schedule(expression, zone)
    found = schedule.following(parse_instant(z(after)), len(expected) + 1)
    assert [format_instant(instant) for instant in found[: len(expected)]] == [
        z(text) for text in expected
    ]
    first = schedule.next_after(parse_instant(z(after)))
    assert first == (found[0] if found else None)
    for earlier, later in itertools.pairwise(found):
        assert schedule.next_after(earlier) == later


def _local_dates(zone: str, instants: tuple[int, ...]) -> list[str]:
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    tz = load_time_zone(zone)
    return [
        (epoch + datetime.timedelta(milliseconds=ms)).astimezone(tz).date().isoformat()
        for ms in instants
    ]


def test_apia_has_no_30_december_2011() -> None:
    found = cron_schedule("0 9 * * *", APIA).following(parse_instant(z("2011-12-28T12:00")), 4)
    assert _local_dates(APIA, found) == ["2011-12-28", "2011-12-29", "2011-12-31", "2012-01-01"]


def test_following_counts() -> None:
    schedule = cron_schedule("0 9 * * 1-5", "Asia/Shanghai")
    start = parse_instant(z("2026-08-07T02:00"))  # a Friday, 10:00 in Shanghai
    assert schedule.following(start, 0) == ()
    assert [format_instant(ms) for ms in schedule.following(start, 3)] == [
        z("2026-08-10T01:00"),  # Monday 09:00
        z("2026-08-11T01:00"),
        z("2026-08-12T01:00"),
    ]


@pytest.mark.parametrize(
    ("zone", "expression", "after_ms", "expected"),
    [
        ("UTC", "0 0 1 1 *", MIN_INSTANT_MS, "0002-01-01T00:00:00.000Z"),
        ("UTC", "0 0 1 1 *", MIN_INSTANT_MS - 1, "0001-01-01T00:00:00.000Z"),
        ("UTC", "59 23 31 12 *", MAX_INSTANT_MS - 60_000, "9999-12-31T23:59"),
        ("UTC", "59 23 31 12 *", MAX_INSTANT_MS - 59_999, None),
        ("Asia/Tokyo", "*/5 * * * *", MAX_INSTANT_MS - 1, None),  # local time is past 9999
        ("Asia/Tokyo", "*/5 * * * *", parse_instant(z("9999-12-31T14:55")), None),
        ("Asia/Tokyo", "*/5 * * * *", parse_instant(z("9999-12-31T14:50")), "9999-12-31T14:55"),
        ("America/New_York", "*/5 * * * *", MAX_INSTANT_MS - 1, None),
        ("America/New_York", "*/5 * * * *", MAX_INSTANT_MS - 300_000, "9999-12-31T23:55"),
    ],
)
def test_next_after_at_the_ends_of_the_range(
    zone: str, expression: str, after_ms: int, expected: str | None
) -> None:
    found = cron_schedule(expression, zone).next_after(after_ms)
    assert found == (None if expected is None else parse_instant(z(expected)))


# ---- latest_between ----------------------------------------------------------------------

LATEST: list[tuple[str, str, str, str, str, str]] = [
    (
        "the latest of several",
        "UTC",
        "0 9 * * *",
        "2026-01-01T09:00",
        "2026-01-05T12:00",
        "2026-01-05T09:00",
    ),
    (
        "at is inclusive",
        "UTC",
        "0 9 * * *",
        "2026-01-01T09:00",
        "2026-01-05T09:00",
        "2026-01-05T09:00",
    ),
    (
        "one millisecond before",
        "UTC",
        "0 9 * * *",
        "2026-01-01T09:00",
        "2026-01-05T08:59:59.999Z",
        "2026-01-04T09:00",
    ),
    (
        "earliest is inclusive",
        "UTC",
        "0 9 * * *",
        "2026-01-05T09:00",
        "2026-01-05T09:00",
        "2026-01-05T09:00",
    ),
    (
        "none there: earliest",
        "UTC",
        "0 9 * * *",
        "2026-01-01T10:00",
        "2026-01-01T12:00",
        "2026-01-01T10:00",
    ),
    (
        "the latest is before earliest: earliest",
        "UTC",
        "0 9 * * *",
        "2026-01-05T09:00:00.001Z",
        "2026-01-06T08:00",
        "2026-01-05T09:00:00.001Z",
    ),
    (
        "weekdays only",
        KOLKATA,
        "0 9 * * 1-5",
        "2026-08-03T03:30",
        "2026-08-09T12:00",
        "2026-08-07T03:30",
    ),
    (
        "a long outage: the latest due only",
        "Asia/Shanghai",
        "0 9 * * 1-5",
        "2026-01-05T01:00",
        "2026-08-20T05:00",
        "2026-08-20T01:00",
    ),
    (
        "the overlap's repeats are not occurrences",
        NEW_YORK,
        "*/30 * * * *",
        "2026-11-01T04:30",
        "2026-11-01T06:45",
        "2026-11-01T05:30",
    ),
    (
        "a repeated time counts at its first instant",
        NEW_YORK,
        "30 1 * * *",
        "2026-10-31T05:30",
        "2026-11-01T06:45",
        "2026-11-01T05:30",
    ),
    (
        "across the gap",
        NEW_YORK,
        "*/15 * * * *",
        "2026-03-08T06:00",
        "2026-03-08T07:20",
        "2026-03-08T07:15",
    ),
    (
        "a skipped time is due at its shifted instant, not before",
        NEW_YORK,
        "30 2 * * *",
        "2026-03-07T07:30",
        "2026-03-08T07:29:59.999Z",
        "2026-03-07T07:30",
    ),
    (
        "a skipped time at its shifted instant",
        NEW_YORK,
        "30 2 * * *",
        "2026-03-07T07:30",
        "2026-03-08T07:30",
        "2026-03-08T07:30",
    ),
    (
        "Apia: the 31st's 09:00 is the latest",
        APIA,
        "0 9 * * *",
        "2011-12-29T19:00",
        "2011-12-31T12:00",
        "2011-12-30T19:00",
    ),
    (
        "Lord Howe: the repeated half hour",
        LORD_HOWE,
        "*/15 1 * * *",
        "2026-04-04T14:00",
        "2026-04-04T15:20",
        "2026-04-04T14:45",
    ),
]


@pytest.mark.parametrize(
    ("zone", "expression", "earliest", "at", "expected"),
    [case[1:] for case in LATEST],
    ids=[case[0] for case in LATEST],
)
def test_latest_between(zone: str, expression: str, earliest: str, at: str, expected: str) -> None:
    found = cron_schedule(expression, zone).latest_between(
        parse_instant(z(earliest)), parse_instant(z(at))
    )
    assert format_instant(found) == z(expected)
