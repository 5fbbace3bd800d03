"""The cron searches' narrow margins find what a search over a day and more finds.

A search for the next (or latest) occurrence starts as far from the local
minute as the offsets its zone uses near the instant differ
(``messages._zones.ZoneOffsets``). Searching 27 hours either side instead is
obviously enough (no zone's offset ever jumped by more than 26 hours), so both
must answer alike; the instants are drawn mostly near real transitions, where
a too-narrow margin would miss an occurrence.
"""

from __future__ import annotations

import datetime
import random

import pytest

from messages._cron import parse_cron_expression
from messages._cron_zone import CronSchedule
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS
from messages._zones import MAX_OFFSET_SPAN_MS, ZoneOffsets, _zone_keys, zone_offsets

RULES = (
    "*/5 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0 9 * * 1-5",
    "*/15 1-3 * * *",
    "0 0 1 * *",
    "45 23 * * 6",
    "*/10 0,1,2,3,23 * * *",
    "59 23 * * *",
)


class _Wide(CronSchedule):
    """The same schedule searching 27 hours either side of every local minute."""

    def _margin(self, instant_ms: int) -> datetime.timedelta:
        return datetime.timedelta(hours=27)


def _cases(count: int, seed: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    zones = sorted(set(_zone_keys().values()))
    cases: list[tuple[str, str, int]] = []
    while len(cases) < count:
        zone, rule = rng.choice(zones), rng.choice(RULES)
        transitions = zone_offsets(zone).transitions
        if transitions and rng.random() < 0.85:
            instant = rng.choice(transitions) * 1000 + rng.randrange(-30, 30) * 3_600_000
            instant += rng.choice((0, rng.randrange(3_600_000)))
        else:
            instant = rng.randrange(-2_208_988_800_000, 4_102_444_800_000)
        if MIN_INSTANT_MS <= instant <= MAX_INSTANT_MS:
            cases.append((rule, zone, instant))
    return cases


@pytest.mark.parametrize("seed", [1, 2])
def test_narrow_margins_agree_with_a_day_either_side(seed: int) -> None:
    for rule, zone, instant in _cases(1500, seed):
        narrow = CronSchedule(parse_cron_expression(rule), zone)
        wide = _Wide(parse_cron_expression(rule), zone)
        case = (rule, zone, instant)
        assert narrow.next_after(instant) == wide.next_after(instant), case
        earliest = instant - 30 * 86_400_000
        assert narrow.latest_between(earliest, instant) == wide.latest_between(earliest, instant), (
            case
        )


def test_offset_spans_near_an_instant() -> None:
    summer = 1_785_931_200_000  # 2026-08-05T12:00Z
    shanghai = zone_offsets("Asia/Shanghai")  # no daylight saving since 1991
    assert shanghai.span_ms(summer - 3_600_000, summer + 3_600_000) == 0
    new_york = zone_offsets("America/New_York")
    long_ago = -1_000_000_000_000  # 1938-04-24T22:13:20Z, between listed transitions
    assert new_york.span_ms(long_ago, long_ago + 3_600_000) == 0
    # After its last listed transition a zone follows its file's rule, whose
    # offsets all count wherever the window lies: an hour in New York.
    assert new_york.span_ms(summer - 3_600_000, summer + 3_600_000) == 3_600_000
    apia = zone_offsets("Pacific/Apia")  # 2011-12-29 −10:00 → 2011-12-31 +14:00
    skipped = 1_325_239_200_000  # 2011-12-30T10:00Z, the instant the day was skipped
    assert apia.span_ms(skipped - 3_600_000, skipped + 3_600_000) == 24 * 3_600_000
    assert apia.span_ms(summer, summer) == 0  # no daylight saving since 2021
    assert zone_offsets("UTC").span_ms(MIN_INSTANT_MS, MAX_INSTANT_MS) == 0


def test_every_zone_swings_by_less_than_the_widest_margin() -> None:
    for zone in sorted(set(_zone_keys().values())):
        offsets = zone_offsets(zone)
        assert isinstance(offsets, ZoneOffsets)
        assert offsets.span_ms(MIN_INSTANT_MS, MAX_INSTANT_MS) <= MAX_OFFSET_SPAN_MS, zone
