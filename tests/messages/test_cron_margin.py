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
import struct

import pytest

from messages._cron import CronRule, parse_cron_expression
from messages._cron_zone import CronSchedule
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS
from messages._zones import (
    MAX_OFFSET_SPAN_MS,
    ZoneOffsets,
    _zone_keys,
    load_time_zone,
    zone_offsets,
)

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


def test_latest_between_sees_a_skipped_minute_below_the_first_plain_one() -> None:
    """Chatham skips 02:45–03:45 on 2026-09-27: 03:00 (shifted to 14:15Z) follows 03:50 (14:05Z)."""
    schedule = CronSchedule(parse_cron_expression("0,50 3 * * *"), "Pacific/Chatham")
    target = 1_790_431_500_000  # 2026-09-26T14:05:00Z, 03:50 local
    assert schedule.next_after(target) == target + 600_000  # 14:15Z, the skipped 03:00
    assert schedule.latest_between(target, target + 900_000) == target + 600_000


def test_version_1_zone_files_are_read_with_four_byte_times() -> None:
    """A TZif file of version 1 (no 64-bit block) gives the transitions a v2 file lists."""
    from importlib import resources

    from messages._zones import _tzif_offsets

    data = resources.files("tzdata.zoneinfo").joinpath("Asia").joinpath("Kathmandu").read_bytes()
    header = struct.Struct(">4sc15x6l")
    _, _, isut, isstd, leap, times, types, chars = header.unpack_from(data, 0)
    v2 = header.size + times * 5 + types * 6 + chars + leap * 8 + isstd + isut
    _, _, isut, isstd, leap, times, types, chars = header.unpack_from(data, v2)
    start = v2 + header.size
    instants = struct.unpack_from(f">{times}q", data, start)
    indices = data[start + 8 * times : start + 9 * times]
    records = data[start + 9 * times : start + 9 * times + 6 * types + chars]
    kept = [(t, i) for t, i in zip(instants, indices, strict=True) if -(2**31) <= t < 2**31]
    v1 = header.pack(b"TZif", b"\x00", 0, 0, 0, len(kept), types, chars)
    v1 += struct.pack(f">{len(kept)}l", *(t for t, _ in kept)) + bytes(i for _, i in kept) + records
    transitions, offsets, _ = _tzif_offsets(v1)
    assert transitions == tuple(t for t, _ in kept)
    assert set(offsets) == {19_800, 20_700}  # +05:30, then +05:45


_EPOCH = datetime.datetime(1970, 1, 1)
_MS = datetime.timedelta(milliseconds=1)
_BOUND = datetime.timedelta(hours=16)  # more than any UTC offset a zone ever had


def _brute_resolve(zone: str, wall: datetime.datetime) -> int:
    offset = wall.replace(tzinfo=load_time_zone(zone)).utcoffset()
    assert offset is not None
    return (wall - _EPOCH) // _MS - offset // _MS


def _brute_local(zone: str, instant: int) -> datetime.datetime:
    moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + instant * _MS
    return moment.astimezone(load_time_zone(zone)).replace(tzinfo=None, second=0, microsecond=0)


def _brute_next(rule: CronRule, zone: str, after: int) -> int | None:
    """Every matching minute from 40 h before on, until none can resolve earlier."""
    wall = rule.next_match(_brute_local(zone, after) - datetime.timedelta(hours=40))
    best: int | None = None
    while wall is not None:
        instant = _brute_resolve(zone, wall)
        if instant > after and (best is None or instant < best):
            best = instant
        if best is not None and (wall - _BOUND - _EPOCH) // _MS > best:
            break
        wall = rule.next_match(wall + datetime.timedelta(minutes=1))
    return best if best is not None and best <= MAX_INSTANT_MS else None


def _brute_latest(rule: CronRule, zone: str, earliest: int, at: int) -> int:
    """Every matching minute from 40 h after down, until none can resolve later."""
    wall = rule.previous_match(_brute_local(zone, at) + datetime.timedelta(hours=40))
    best: int | None = None
    while wall is not None:
        instant = _brute_resolve(zone, wall)
        if instant <= at and (best is None or instant > best):
            best = instant
        if best is not None and (wall + _BOUND - _EPOCH) // _MS < max(best, earliest):
            break
        wall = rule.previous_match(wall - datetime.timedelta(minutes=1))
    return earliest if best is None or best < earliest else best


@pytest.mark.parametrize("seed", [3, 4])
def test_searches_agree_with_a_brute_force_reference(seed: int) -> None:
    """In every zone, near its transitions: the stopping rules lose nothing."""
    rng = random.Random(seed)
    rules = (*RULES, "15 2,3 * * *", "45 0-3 * * *", "0,50 3 * * *", "5,55 * * * *")
    for zone in sorted(set(_zone_keys().values())):
        if zone == "UTC":
            continue
        transitions = [t * 1000 for t in zone_offsets(zone).transitions if -2e12 < t * 1000 < 4e12]
        for _ in range(3):
            _check_against_brute_force(rng, rules, zone, transitions)


def _check_against_brute_force(
    rng: random.Random, rules: tuple[str, ...], zone: str, transitions: list[int]
) -> None:
    rule_text = rng.choice(rules)
    rule = parse_cron_expression(rule_text)
    schedule = CronSchedule(rule, zone)
    instant = rng.choice(transitions or [1_700_000_000_000])
    instant += rng.randrange(-30 * 3600, 30 * 3600) * 1000 + rng.choice((0, 1, -1, 500))
    case = (rule_text, zone, instant)
    assert schedule.next_after(instant) == _brute_next(rule, zone, instant), case
    earliest = instant - rng.randrange(0, 3 * 86_400) * 1000
    assert schedule.latest_between(earliest, instant) == _brute_latest(
        rule, zone, earliest, instant
    ), case
