"""A ``cron`` rule in a time zone: its occurrences as instants (epoch milliseconds).

An occurrence is a matching local wall-clock minute, at the instant ``zoneinfo``
gives it with ``fold=0``:

* a minute that a clock change skips happens shifted forward by the gap
  (02:30 on a spring-forward night in New York is 03:30 EDT, 07:30Z);
* a minute that happens twice fires once, at its first instant;
* two matching minutes that resolve to one instant are one occurrence.

So the occurrences are a *set of instants*. Local time is not monotonic in
instants across a gap (02:59 resolves after 03:00), so the searches below
start as far before (or after) the obvious local minute as the offsets the
zone uses within a day of the instant can differ
(:meth:`messages._zones.ZoneOffsets.span_ms`: an hour in most zones, none in
``UTC``) and
stop at the first minute that is *plain* (neither skipped nor repeated): such a
minute's instant is monotonic in local time, and no later matching minute can
beat it. (Searching back, minutes a gap skipped just below a plain one resolve
after it, so that search goes on one margin further down.)
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass, field

from messages._cron import CronRule, parse_cron_expression
from messages._instant import MAX_INSTANT_MS
from messages._zones import ZoneOffsets, load_time_zone, zone_offsets

__all__ = ["CronSchedule", "cron_schedule"]

_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)
_MINUTE = datetime.timedelta(minutes=1)
_WINDOW_MS = 27 * 3_600_000
_FIRST = datetime.datetime.min
_LAST = datetime.datetime.max.replace(second=0, microsecond=0)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A rule in the zone ``time_zone`` (a canonical key): next and latest occurrences."""

    rule: CronRule
    time_zone: str
    offsets: ZoneOffsets = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", zone_offsets(self.time_zone))

    def _margin(self, instant_ms: int) -> datetime.timedelta:
        """How far from the local minute at ``instant_ms`` another can resolve on its other side.

        Every offset that can matter is in force within a day of the instant (a
        zone's offset never jumps by more than 26 hours); the margin is their
        spread in whole minutes, plus one.
        """
        span = self.offsets.span_ms(instant_ms - _WINDOW_MS, instant_ms + _WINDOW_MS)
        return (-(-span // 60_000) + 1) * _MINUTE

    def _resolve(self, wall: datetime.datetime) -> tuple[int, bool]:
        """``(instant_ms, plain)``: the ``fold=0`` instant of ``wall`` and whether it is unique."""
        zone = load_time_zone(self.time_zone)
        wall_ms = (wall - _EPOCH) // _MS
        if zone is datetime.UTC:
            return wall_ms, True
        first = wall.replace(tzinfo=zone).utcoffset()
        second = wall.replace(tzinfo=zone, fold=1).utcoffset()
        assert first is not None and second is not None
        return wall_ms - first // _MS, first == second

    def _local_minute(self, instant_ms: int) -> datetime.datetime | None:
        """The local wall-clock minute at ``instant_ms``; ``None`` past year 9999 locally."""
        zone = load_time_zone(self.time_zone)
        try:
            local = (_EPOCH_UTC + instant_ms * _MS).astimezone(zone)
        except OverflowError:
            return None
        return local.replace(tzinfo=None, second=0, microsecond=0)

    def next_after(self, after_ms: int) -> int | None:
        """The first occurrence strictly after ``after_ms``; ``None`` if none by 9999-12-31.

        ``after_ms`` must lie within years 0001–9999.
        """
        rule = self.rule
        local = self._local_minute(after_ms)
        if local is None:  # the local clock is past 9999 already (or before 0001)
            local = _LAST if after_ms > 0 else None
        start = _FIRST if local is None else _shift(local, -self._margin(after_ms))
        best: int | None = None
        wall = rule.next_match(start)
        while wall is not None:
            instant, plain = self._resolve(wall)
            if instant > after_ms and (best is None or instant < best):
                best = instant
            if plain and (local is None or wall > local):
                break
            wall = rule.next_match(wall + _MINUTE) if wall < _LAST else None
        return best if best is not None and best <= MAX_INSTANT_MS else None

    def latest_between(self, earliest_ms: int, at_ms: int) -> int:
        """The latest occurrence in ``[earliest_ms, at_ms]``, or ``earliest_ms`` if none lies there.

        ``earliest_ms`` is a record's current target: normally an occurrence
        itself, so the answer is an occurrence; only when zone rules changed
        since the target was computed can there be none, and the target stands.
        """
        rule = self.rule
        local = self._local_minute(at_ms)
        if local is None:
            local = _LAST if at_ms > 0 else None
        if local is None:
            return earliest_ms
        best: int | None = None
        margin = self._margin(at_ms)
        wall = rule.previous_match(_shift(local, margin))
        floor: datetime.datetime | None = None  # where the search may stop
        while wall is not None and (floor is None or wall >= floor):
            instant, plain = self._resolve(wall)
            if instant <= at_ms and (best is None or instant > best):
                best = instant
            if plain and wall <= local and floor is None:
                # Minutes a clock change skipped just below it resolve after it.
                floor = _shift(wall, -margin)
            wall = rule.previous_match(wall - _MINUTE) if wall > _FIRST else None
        if best is None or best < earliest_ms:
            return earliest_ms
        return best

    def following(self, after_ms: int, count: int) -> tuple[int, ...]:
        """Up to ``count`` consecutive occurrences strictly after ``after_ms``."""
        found: list[int] = []
        instant: int | None = after_ms
        while len(found) < count and instant is not None:
            instant = self.next_after(instant)
            if instant is not None:
                found.append(instant)
        return tuple(found)


def _shift(wall: datetime.datetime, by: datetime.timedelta) -> datetime.datetime:
    try:
        return wall + by
    except OverflowError:
        return _FIRST if by < datetime.timedelta(0) else _LAST


@functools.lru_cache(maxsize=1024)
def cron_schedule(expression: str, time_zone: str) -> CronSchedule:
    """The schedule of a canonical expression in a canonical zone key (cached)."""
    return CronSchedule(parse_cron_expression(expression), time_zone)
