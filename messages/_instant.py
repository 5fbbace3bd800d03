"""Canonical UTC instants ``YYYY-MM-DDTHH:MM:SS.sssZ`` as epoch milliseconds."""

from __future__ import annotations

import calendar
import datetime
import re

__all__ = ["MAX_INSTANT_MS", "MIN_INSTANT_MS", "format_instant", "parse_instant"]

_DAY_MS = 86_400_000
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()

MIN_INSTANT_MS = (datetime.date(1, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY_MS
"""Epoch milliseconds of ``0001-01-01T00:00:00.000Z``, the earliest representable instant."""

MAX_INSTANT_MS = (datetime.date(9999, 12, 31).toordinal() - _EPOCH_ORDINAL + 1) * _DAY_MS - 1
"""Epoch milliseconds of ``9999-12-31T23:59:59.999Z``, the latest representable instant."""

_CANONICAL = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{3})Z"
)


def format_instant(ms: int) -> str:
    """Format epoch milliseconds as the canonical ``YYYY-MM-DDTHH:MM:SS.sssZ``.

    Raises ``ValueError`` for a non-integer or an instant outside years 0001–9999.
    """
    if isinstance(ms, bool) or not isinstance(ms, int):
        raise ValueError("instant must be an integer number of epoch milliseconds")
    if not MIN_INSTANT_MS <= ms <= MAX_INSTANT_MS:
        raise ValueError("instant is outside 0001-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z")
    days, rest = divmod(int(ms), _DAY_MS)
    day = datetime.date.fromordinal(_EPOCH_ORDINAL + days)
    seconds, millis = divmod(rest, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return (
        f"{day.year:04d}-{day.month:02d}-{day.day:02d}"
        f"T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"
    )


def parse_instant(text: object) -> int:
    """Parse a canonical ``YYYY-MM-DDTHH:MM:SS.sssZ`` string into epoch milliseconds.

    Raises ``ValueError`` naming the reason unless ``text`` is a string in exactly
    canonical form: three fractional digits, year 0001–9999, a real calendar date
    and time of day (no second 60), upper-case ``T`` and ``Z``.
    """
    if not isinstance(text, str):
        raise ValueError("instant must be a string")
    match = _CANONICAL.fullmatch(text)
    if match is None:
        raise ValueError("instant is not in the form YYYY-MM-DDTHH:MM:SS.sssZ")
    year, month, day, hour, minute, second, millis = map(int, match.groups())
    if year < 1:
        raise ValueError("instant year must be in 0001..9999")
    if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        raise ValueError("instant is not a real calendar date")
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError("instant is not a real time of day")
    days = datetime.date(year, month, day).toordinal() - _EPOCH_ORDINAL
    ms = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
    if format_instant(ms) != text:
        raise ValueError("instant does not re-format to the identical string")
    return ms
