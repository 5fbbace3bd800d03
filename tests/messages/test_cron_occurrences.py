"""``cron`` occurrences as instants: a seeded differential test against ``cronsim``.

Thousands of random valid expressions × zones × start instants: the first
occurrence strictly after the start (``next_after``) and the latest at or
before an instant (``latest_between``) must be the oracle's, except where the
two rule sets differ on purpose:

* readings: a ``*/n`` day field is restricted here and unrestricted for
  ``cronsim`` (Debian's reading), so such a field is not drawn when the other
  day field is restricted (the day rule has its own tests in
  ``test_cron_grammar.py``); nor is ``a-a/n``, which ``cronsim`` reads as
  ``a/n`` (a form this grammar refuses);
* clock changes: here a skipped local time is shifted forward by the gap and
  a repeated one fires once, at its first instant; ``cronsim`` moves a skipped
  time to the end of the gap (or drops it) and may fire a repeated one twice.
  Both sets of instants are the same outside ``[T, T + |Δ|)`` for each
  transition ``T`` that changes the offset by ``Δ``, so a case is excluded
  exactly when such a span meets the searched interval (between the start and
  the later of the two answers), and the exclusions are counted. The DST rules
  themselves have table tests in ``test_cron_dst.py``.
"""

from __future__ import annotations

import bisect
import datetime
import functools
import random
from dataclasses import dataclass

from cronsim import CronSim

from messages._cron import CRON_MACROS, CronRule, CronRuleError, parse_cron_expression
from messages._cron_zone import cron_schedule
from messages._zones import load_time_zone
from tests.messages.cron_cases import random_rule

ZONES = (
    "UTC",
    "Asia/Shanghai",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Etc/GMT+3",
    "America/New_York",
    "America/St_Johns",
    "America/Santiago",
    "America/Havana",
    "Europe/London",
    "Europe/Dublin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Pacific/Apia",
    "Africa/Casablanca",
)
"""Fixed offsets (whole, half and quarter hours), DST north and south, 30-minute
DST, changes at midnight, negative DST (Dublin), a skipped day (Apia, 2011) and
many changes a year (Casablanca)."""

FIRST_YEAR, LAST_YEAR = 2000, 2035
"""Start instants are drawn in these years (every zone's offsets are whole minutes)."""

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)
_SAMPLE_S = 6 * 3600
"""Offsets are sampled every 6 hours, then each change is bisected to the second. No
offset of these zones lasts less than 6 hours, so every transition is found."""


def _ms(instant: datetime.datetime) -> int:
    return (instant - _EPOCH) // _MS


def _year_ms(year: int) -> int:
    return _ms(datetime.datetime(year, 1, 1, tzinfo=datetime.UTC))


@dataclass(frozen=True, slots=True)
class Transitions:
    """A zone's offset changes: ``at[i]`` (epoch ms) changes the offset by ``size[i]`` ms."""

    at: tuple[int, ...]
    size: tuple[int, ...]

    def meets(self, low_ms: int, high_ms: int) -> bool:
        """Whether some ``[T, T + |Δ|)`` meets ``[low_ms, high_ms]``."""
        index = bisect.bisect_right(self.at, low_ms - 25 * 3_600_000)
        while index < len(self.at) and self.at[index] <= high_ms:
            if self.at[index] + self.size[index] > low_ms:
                return True
            index += 1
        return False


@functools.cache
def transitions(zone_key: str) -> Transitions:
    """Every offset change of the zone from 1999 to 2046 (answers can lie years ahead)."""
    zone = load_time_zone(zone_key)

    def offset(seconds: int) -> datetime.timedelta | None:
        return (_EPOCH + datetime.timedelta(seconds=seconds)).astimezone(zone).utcoffset()

    at: list[int] = []
    size: list[int] = []
    second = _year_ms(1999) // 1000
    stop = _year_ms(2047) // 1000
    before = offset(second)
    while second < stop:
        later = second + _SAMPLE_S
        after = offset(later)
        if after != before:
            low, high = second, later  # offset(low) == before, offset(high) == after
            while high - low > 1:
                middle = (low + high) // 2
                if offset(middle) == before:
                    low = middle
                else:
                    high = middle
            assert before is not None and after is not None
            at.append(high * 1000)
            size.append(abs(after - before) // _MS)
        second, before = later, after
    return Transitions(tuple(at), tuple(size))


def _oracle_zone(zone_key: str) -> datetime.tzinfo:
    return load_time_zone(zone_key)  # the same tzdata as the rule's, as zoneinfo reads it


def _oracle_fields(expression: str) -> str:
    return CRON_MACROS.get(expression, expression)


def oracle_next(expression: str, zone_key: str, after_ms: int) -> int:
    start = (_EPOCH + after_ms * _MS).astimezone(_oracle_zone(zone_key))
    return _ms(next(CronSim(_oracle_fields(expression), start)))


def oracle_latest(expression: str, zone_key: str, at_ms: int) -> int:
    """The latest occurrence at or before ``at_ms`` (which must not be a whole second)."""
    assert at_ms % 1000
    start = (_EPOCH + at_ms * _MS).astimezone(_oracle_zone(zone_key))
    return _ms(next(CronSim(_oracle_fields(expression), start, reverse=True)))


def _local(instant_ms: int, zone: datetime.tzinfo) -> datetime.datetime:
    return (_EPOCH + instant_ms * _MS).astimezone(zone).replace(tzinfo=None)


def _walls(rule: CronRule, day: datetime.date) -> list[datetime.datetime]:
    if not rule.matches_day(day):
        return []
    return [datetime.datetime.combine(day, datetime.time(h, m)) for h, m in rule.times_of_day()]


def reference_next(expression: str, zone_key: str, after_ms: int) -> int:
    """The contract's next occurrence by enumeration of matching local minutes.

    Every matching minute from two local days before the start on is resolved
    with ``fold=0``; the search ends two days past the best one found (no two
    offsets differ by more than a day, so later minutes resolve later).
    """
    rule, zone = parse_cron_expression(expression), load_time_zone(zone_key)
    day = _local(after_ms, zone).date() - datetime.timedelta(days=2)
    best: tuple[int, datetime.date] | None = None
    while best is None or day <= best[1] + datetime.timedelta(days=2):
        for wall in _walls(rule, day):
            instant = _ms(wall.replace(tzinfo=zone, fold=0))
            if instant > after_ms and (best is None or instant < best[0]):
                best = (instant, day)
        day += datetime.timedelta(days=1)
    return best[0]


def reference_latest(expression: str, zone_key: str, earliest_ms: int, at_ms: int) -> int:
    """The contract's latest occurrence in ``[earliest_ms, at_ms]`` (else ``earliest_ms``)."""
    rule, zone = parse_cron_expression(expression), load_time_zone(zone_key)
    day = _local(at_ms, zone).date() + datetime.timedelta(days=2)
    floor = _local(earliest_ms, zone).date() - datetime.timedelta(days=2)
    best: tuple[int, datetime.date] | None = None
    while day >= floor and (best is None or day >= best[1] - datetime.timedelta(days=2)):
        for wall in _walls(rule, day):
            instant = _ms(wall.replace(tzinfo=zone, fold=0))
            if earliest_ms <= instant <= at_ms and (best is None or instant > best[0]):
                best = (instant, day)
        day -= datetime.timedelta(days=1)
    return earliest_ms if best is None else best[0]


def _start(rng: random.Random, zone_key: str) -> int:
    """A start instant: anywhere in the years, or within 36 hours of an offset change."""
    changes = transitions(zone_key).at
    if changes and rng.random() < 0.3:
        return rng.choice(changes) + rng.randint(-36 * 3_600_000, 36 * 3_600_000)
    return rng.randint(_year_ms(FIRST_YEAR), _year_ms(LAST_YEAR + 1) - 1)


def _valid_expression(rng: random.Random) -> str:
    """A random expression the parser accepts, as its canonical text (macros too)."""
    while True:
        if rng.random() < 0.03:
            return rng.choice(sorted(CRON_MACROS))
        try:
            return parse_cron_expression(random_rule(rng, oracle=True).expression).expression
        except CronRuleError:
            continue


def test_next_occurrence_agrees_with_the_oracle() -> None:
    rng = random.Random(25)
    compared = excluded = 0
    for _ in range(3_000):
        expression = _valid_expression(rng)
        zone = rng.choice(ZONES)
        start = _start(rng, zone)
        ours = cron_schedule(expression, zone).next_after(start)
        theirs = oracle_next(expression, zone, start)
        assert ours is not None
        if transitions(zone).meets(start + 1, max(ours, theirs)):
            excluded += 1  # the oracle's rules differ here; ours are enumerated instead
            assert ours == reference_next(expression, zone, start), (expression, zone, start)
            continue
        assert ours == theirs, (expression, zone, start)
        assert ours > start
        if compared % 8 == 0:  # the enumeration is sound where the rules agree
            assert reference_next(expression, zone, start) == ours
        compared += 1
    # a measure of the exclusion, reported by -rP: a small share, never the bulk
    print(f"next_after: {compared} agree with cronsim, {excluded} near clock changes enumerated")
    assert excluded < compared // 4


def test_latest_occurrence_agrees_with_the_oracle() -> None:
    rng = random.Random(2025)
    compared = excluded = 0
    for _ in range(2_000):
        expression = _valid_expression(rng)
        zone = rng.choice(ZONES)
        at = _start(rng, zone)
        at += 0 if at % 1000 else 1  # the oracle takes a whole second as "before"
        earliest = at - rng.choice([0, 60_000, 3_600_000, 86_400_000, 40 * 86_400_000, 2**40])
        ours = cron_schedule(expression, zone).latest_between(earliest, at)
        theirs = oracle_latest(expression, zone, at)
        if transitions(zone).meets(min(ours, theirs), at):
            excluded += 1  # the oracle's rules differ here; ours are enumerated instead
            reference = reference_latest(expression, zone, earliest, at)
            assert ours == reference, (expression, zone, earliest, at)
            continue
        assert ours == max(theirs, earliest), (expression, zone, earliest, at)
        if compared % 8 == 0:
            assert reference_latest(expression, zone, earliest, at) == ours
        compared += 1
    print(
        f"latest_between: {compared} agree with cronsim, {excluded} near clock changes enumerated"
    )
    assert excluded < compared // 4


def test_the_exclusion_criterion_is_exact_on_a_known_change() -> None:
    """New York springs forward at 2026-03-08T07:00Z (Δ = 1 h): the span is [07:00Z, 08:00Z)."""
    spring = transitions("America/New_York")
    change = datetime.datetime(2026, 3, 8, 7, tzinfo=datetime.UTC)
    assert _ms(change) in spring.at
    assert spring.size[spring.at.index(_ms(change))] == 3_600_000
    hour = 3_600_000
    assert spring.meets(_ms(change) - hour, _ms(change))  # reaches T
    assert not spring.meets(_ms(change) - hour, _ms(change) - 1)  # stops just before T
    assert spring.meets(_ms(change) + hour - 1, _ms(change) + 2 * hour)  # starts inside
    assert not spring.meets(_ms(change) + hour, _ms(change) + 2 * hour)  # starts past the span
    assert not transitions("Asia/Kolkata").at
    assert not transitions("UTC").at
