"""Time zones for ``at`` reminders: names, loading, and local wall time to UTC.

Zone data comes from the ``tzdata`` package (a dependency), never from the
machine's zone directory, so results are the same everywhere. Reading the
package's resources is the only I/O here; a loaded zone is cached.

A name is exactly ``UTC`` or an Area/Location name (``America/New_York``,
``Etc/GMT+3``) that ``tzdata`` lists, links included (``US/Eastern``,
``Asia/Calcutta``), matched case-insensitively. Bare abbreviations and legacy
names (``GMT``, ``EST``, ``EST5EDT``), offsets, and ``posix/``/``right/`` names
are rejected.
"""

from __future__ import annotations

import bisect
import datetime
import functools
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from zoneinfo import ZoneInfo

from messages._errors import ErrorCode, ScheduleInputError
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS

__all__ = [
    "MAX_OFFSET_SPAN_MS",
    "ZoneOffsets",
    "canonicalize_time_zone",
    "load_time_zone",
    "resolve_local_time",
    "time_zone_error",
    "zone_offset_ever_changes",
    "zone_offsets",
]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+.-]*(?:/[A-Za-z0-9_+.-]+)+")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)
_HOUR_MS = 3_600_000
_WINDOW_HOURS = 48
"""Offsets are collected within ±2 days of the wall time (every real offset is < 1 day)."""


def time_zone_error() -> ScheduleInputError:
    """The ``invalid_time_zone`` error, with its fixed message."""
    return ScheduleInputError(
        ErrorCode.INVALID_TIME_ZONE,
        "time_zone must be UTC or an Area/Location name of the tz database",
    )


@functools.cache
def _zone_keys() -> Mapping[str, str]:
    """Every Area/Location key ``tzdata`` lists (links included), by its lower-case form."""
    listing = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    keys = (line.strip() for line in listing.splitlines())
    return {key.lower(): key for key in keys if _NAME.fullmatch(key)}


def canonicalize_time_zone(name: object) -> str:
    """The tz database key ``name`` resolves to (``"UTC"`` for exactly ``UTC``).

    Matching is case-insensitive (``america/new_york`` → ``America/New_York``);
    a link resolves to its own key (``US/Eastern``). Anything else raises
    ``ScheduleInputError("invalid_time_zone")``.
    """
    if not isinstance(name, str):
        raise time_zone_error()
    if name == "UTC":
        return "UTC"
    if _NAME.fullmatch(name) is None:
        raise time_zone_error()
    lowered = name.lower()
    if lowered.startswith(("posix/", "right/")):
        raise time_zone_error()
    key = _zone_keys().get(lowered)
    if key is None:
        raise time_zone_error()
    return key


@functools.lru_cache(maxsize=128)
def load_time_zone(key: str) -> datetime.tzinfo:
    """The zone for a key :func:`canonicalize_time_zone` returned, read from ``tzdata``."""
    if key == "UTC":
        return datetime.UTC
    if _zone_keys().get(key.lower()) != key:
        raise time_zone_error()
    resource = resources.files("tzdata.zoneinfo")
    for part in key.split("/"):
        resource = resource.joinpath(part)
    with resource.open("rb") as data:
        return ZoneInfo.from_file(data, key=key)


MAX_OFFSET_SPAN_MS = 26 * _HOUR_MS
"""More than any zone's widest offset swing (Pacific/Apia's, LMT +12:33 to −11:00, is 25.5 h)."""

_FOOTER_SAMPLES = tuple(
    datetime.datetime(2400, month, 1, tzinfo=datetime.UTC) for month in (1, 4, 7, 10)
)
"""Instants after every zone's last listed transition: its footer rule's offsets hold there."""


@dataclass(frozen=True, slots=True)
class ZoneOffsets:
    """Which UTC offsets (seconds) a zone uses when, as its ``tzdata`` file lists them.

    ``transitions`` are the instants (epoch seconds, ascending) at which
    ``offsets[i]`` takes over; ``first`` holds before the first of them, and
    ``footer`` (the offsets of the file's rule for later times, with the last
    listed one) after the last.
    """

    transitions: tuple[int, ...]
    offsets: tuple[int, ...]
    first: int
    footer: frozenset[int]

    def span_ms(self, low_ms: int, high_ms: int) -> int:
        """``max − min`` (ms) of the offsets in force at some instant of ``[low_ms, high_ms]``."""
        low, high = low_ms // 1000, -(-high_ms // 1000)
        start = bisect.bisect_right(self.transitions, low)
        stop = bisect.bisect_right(self.transitions, high)
        used = {self.offsets[start - 1] if start else self.first, *self.offsets[start:stop]}
        if stop == len(self.transitions):
            used.update(self.footer)
        return (max(used) - min(used)) * 1000


@functools.lru_cache(maxsize=128)
def zone_offset_ever_changes(key: str) -> bool:
    """Whether the zone ``key`` ever had more than one UTC offset (not ``UTC``, not ``Etc/…``)."""
    return zone_offsets(key).span_ms(MIN_INSTANT_MS, MAX_INSTANT_MS) > 0


_UNKNOWN_OFFSETS = ZoneOffsets((), (), 0, frozenset({0, MAX_OFFSET_SPAN_MS // 1000}))
"""What an unreadable zone file gives: the widest span anywhere, at every instant."""


def _tzif_offsets(data: bytes) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """``(transitions, offsets, first)`` of a TZif file (see :class:`ZoneOffsets`).

    Reads the version 2+ (64-bit) data block when there is one, else version 1.
    Malformed data raises ``ValueError`` (or ``struct.error``).
    """
    if data[:4] != b"TZif":
        raise ValueError("not TZif data")
    header = struct.Struct(">4sc15x6l")
    _, version, isut, isstd, leap, times, types, chars = header.unpack_from(data, 0)
    start, time_format = header.size, "l"
    if version != b"\x00":
        start += times * 5 + types * 6 + chars + leap * 8 + isstd + isut
        _, _, isut, isstd, leap, times, types, chars = header.unpack_from(data, start)
        start += header.size
        time_format = "q"
    indices_at = start + times * struct.calcsize(f">{time_format}")
    records_at = indices_at + times
    if types < 1 or records_at + types * 6 > len(data):
        raise ValueError("truncated TZif data")
    instants = struct.unpack_from(f">{times}{time_format}", data, start)
    indices = data[indices_at:records_at]
    utoffs = [struct.unpack_from(">l", data, records_at + 6 * i)[0] for i in range(types)]
    if any(index >= types for index in indices):
        raise ValueError("a transition names no local time type")
    return tuple(instants), tuple(utoffs[index] for index in indices), utoffs[0]


@functools.lru_cache(maxsize=128)
def zone_offsets(key: str) -> ZoneOffsets:
    """The offsets the zone ``key`` uses and when (``UTC``: only 0).

    A zone file that cannot be read gives a table whose every span is
    :data:`MAX_OFFSET_SPAN_MS`, which is always safe for a caller that uses the
    span as a search margin.
    """
    if key == "UTC":
        return ZoneOffsets((), (), 0, frozenset({0}))
    zone = load_time_zone(key)
    resource = resources.files("tzdata.zoneinfo")
    for part in key.split("/"):
        resource = resource.joinpath(part)
    try:
        transitions, offsets, first = _tzif_offsets(resource.read_bytes())
    except (OSError, ValueError, struct.error):
        return _UNKNOWN_OFFSETS
    footer = {offsets[-1] if offsets else first}
    for sample in _FOOTER_SAMPLES:
        offset = sample.astimezone(zone).utcoffset()
        if offset is not None:
            footer.add(offset // datetime.timedelta(seconds=1))
    return ZoneOffsets(transitions, offsets, first, frozenset(footer))


def _offset_ms(zone: datetime.tzinfo, instant_ms: int) -> int | None:
    """The zone's UTC offset at an instant, or ``None`` where local time leaves the range."""
    try:
        local = (_EPOCH + instant_ms * _MS).astimezone(zone)
    except (OverflowError, ValueError):
        return None
    offset = local.utcoffset()
    return None if offset is None else offset // _MS


def _wall_ms(wall: datetime.datetime) -> int:
    """The wall time's fields read as if they were UTC, in epoch milliseconds."""
    return (wall.replace(tzinfo=datetime.UTC) - _EPOCH) // _MS


def resolve_local_time(wall: datetime.datetime, zone: str) -> int:
    """The earliest instant (epoch ms) at which the zone's clocks show the naive ``wall``.

    Collects the zone's distinct UTC offsets around the wall time (±2 days, and
    both sides of a nearby transition), keeps the candidates that convert back to
    exactly ``wall``, and takes the earliest: a fall-back overlap resolves to its
    first instant. No candidate raises ``ScheduleInputError`` — ``invalid_rule``
    (a spring-forward gap: that wall time never happens), or ``time_out_of_range``
    when a candidate fell outside years 0001–9999. ``zone`` must be a key from
    :func:`canonicalize_time_zone`. Dates are proleptic Gregorian.
    """
    tz = load_time_zone(zone)
    wall = wall.replace(tzinfo=None)
    wall_ms = _wall_ms(wall)
    offsets: set[int] = set()
    for fold in (0, 1):
        offset = wall.replace(tzinfo=tz, fold=fold).utcoffset()
        if offset is not None:
            offsets.add(offset // _MS)
    for hours in range(-_WINDOW_HOURS, _WINDOW_HOURS + 1):
        sample = wall_ms + hours * _HOUR_MS
        if MIN_INSTANT_MS <= sample <= MAX_INSTANT_MS:
            offset_ms = _offset_ms(tz, sample)
            if offset_ms is not None:
                offsets.add(offset_ms)
    out_of_range = False
    for candidate in sorted(wall_ms - offset for offset in offsets):
        if not MIN_INSTANT_MS <= candidate <= MAX_INSTANT_MS:
            out_of_range = True
        elif _offset_ms(tz, candidate) == wall_ms - candidate:
            return candidate
    if out_of_range:
        raise ScheduleInputError(
            ErrorCode.TIME_OUT_OF_RANGE,
            "the reminder time must fall within 0001-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z",
        )
    raise ScheduleInputError(
        ErrorCode.INVALID_RULE, "that local time does not exist in the time zone (a clock change)"
    )
