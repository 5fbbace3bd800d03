"""The ``at`` value of ``schedule_create``: grammar, calendar, zone, resolution to UTC.

``at`` is either an instant string with an explicit offset or a local object
``{"date", "time", "time_zone"}``. :func:`resolve_at` turns it into epoch
milliseconds without a clock; every failure is a ``ScheduleInputError`` with a
closed code and a fixed message (no input text is echoed).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping

from messages._errors import ErrorCode, ScheduleInputError
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS
from messages._zones import canonicalize_time_zone, resolve_local_time, time_zone_error

__all__ = ["LOCAL_AT_KEYS", "resolve_at"]

LOCAL_AT_KEYS = frozenset({"date", "time", "time_zone"})
"""The exact key set of a local ``at`` object."""

# ASCII digits only ([0-9], never \d) and full matches, so a trailing newline is invalid.
_INSTANT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,3}))?"
    r"(?:Z|([+-])([0-9]{2}):([0-9]{2}))"
)
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,3}))?")
_EPOCH = datetime.datetime(1970, 1, 1)
_MS = datetime.timedelta(milliseconds=1)


def _invalid(message: str) -> ScheduleInputError:
    return ScheduleInputError(ErrorCode.INVALID_RULE, message)


_BAD_STRING = (
    "at must be YYYY-MM-DDTHH:MM:SS[.sss] followed by Z or an offset +HH:MM/-HH:MM, "
    "naming a real calendar date and time in years 0001-9999"
)
_BAD_LOCAL = (
    "at must be an instant string or an object with exactly date (YYYY-MM-DD), "
    "time (HH:MM:SS[.sss]) and time_zone, naming a real calendar date and time"
)


def _out_of_range() -> ScheduleInputError:
    return ScheduleInputError(
        ErrorCode.TIME_OUT_OF_RANGE,
        "the reminder time must fall within 0001-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z",
    )


def _wall(
    date: tuple[str, str, str], time: tuple[str, str, str, str | None], message: str
) -> datetime.datetime:
    """A naive wall time from matched digit groups; the fraction is right-padded."""
    year, month, day = (int(part) for part in date)
    hour, minute, second = (int(part) for part in time[:3])
    millis = int((time[3] or "").ljust(3, "0"))
    try:
        return datetime.datetime(year, month, day, hour, minute, second, millis * 1000)
    except ValueError:  # year 0000, Feb 29 of a common year, hour 24, second 60 …
        raise _invalid(message) from None


def _resolve_string(text: str) -> int:
    match = _INSTANT.fullmatch(text)
    if match is None:
        raise _invalid(_BAD_STRING)
    groups = match.groups()
    wall = _wall(
        (groups[0], groups[1], groups[2]), (groups[3], groups[4], groups[5], groups[6]), _BAD_STRING
    )
    offset_ms = 0
    sign, hours, minutes = groups[7], groups[8], groups[9]
    if sign is not None and hours is not None and minutes is not None:
        if int(hours) > 23 or int(minutes) > 59 or (sign == "-" and hours == minutes == "00"):
            raise _invalid(_BAD_STRING)
        offset_ms = (int(hours) * 60 + int(minutes)) * 60_000 * (1 if sign == "+" else -1)
    target = (wall - _EPOCH) // _MS - offset_ms
    if not MIN_INSTANT_MS <= target <= MAX_INSTANT_MS:
        raise _out_of_range()
    return target


def _resolve_local(value: Mapping[object, object]) -> int:
    if set(value) != LOCAL_AT_KEYS:
        raise _invalid(_BAD_LOCAL)
    date, time, zone = value["date"], value["time"], value["time_zone"]
    if not isinstance(date, str) or not isinstance(time, str):
        raise _invalid(_BAD_LOCAL)
    if not isinstance(zone, str):
        raise time_zone_error()
    date_match = _DATE.fullmatch(date)
    time_match = _TIME.fullmatch(time)
    if date_match is None or time_match is None:
        raise _invalid(_BAD_LOCAL)
    day = date_match.groups()
    clock = time_match.groups()
    wall = _wall((day[0], day[1], day[2]), (clock[0], clock[1], clock[2], clock[3]), _BAD_LOCAL)
    return resolve_local_time(wall, canonicalize_time_zone(zone))


def resolve_at(value: object) -> int:
    """The UTC instant (epoch ms) an ``at`` value names; no clock is involved.

    * A string must match ``YYYY-MM-DDTHH:MM:SS[.f{1,3}](Z|+HH:MM|-HH:MM)`` in full
      (ASCII digits, upper-case ``T``/``Z``), name a real proleptic-Gregorian date
      and time in years 0001–9999, and carry an offset of at most ``±23:59``
      (``-00:00`` is refused); a fraction is right-padded (``.1`` is 100 ms).
    * An object must have exactly ``date`` (``YYYY-MM-DD``), ``time``
      (``HH:MM:SS[.f{1,3}]``) and ``time_zone``; checked in this order: key set,
      ``date``/``time`` are strings, ``time_zone`` is a string, date/time grammar and
      calendar, zone name, then resolution of the wall time in the zone (the
      earliest instant showing it; a spring-forward gap does not exist).

    Raises ``ScheduleInputError``: ``invalid_rule`` (anything malformed, another
    type, a nonexistent local time), ``invalid_time_zone`` (the zone), or
    ``time_out_of_range`` (an instant outside 0001-01-01T00:00:00.000Z …
    9999-12-31T23:59:59.999Z).
    """
    if isinstance(value, str):
        return _resolve_string(value)
    if isinstance(value, Mapping):
        return _resolve_local(value)
    raise _invalid(_BAD_LOCAL)
