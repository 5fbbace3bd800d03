"""Builders for the ``cron`` tests: records in the log, and random expressions.

:func:`create_cron` writes a ``create`` payload of a ``cron`` record.

:func:`random_rule` writes an expression from randomly drawn field items and,
alongside it, the value sets those items stand for, so a test can compare the
parser (and the occurrence search) with a model that shares none of its code.
The draws lean towards the cases that matter: minutes close together or close
to the ends of the hour, hours 0 and 23, the last days of months, February,
Sunday as 0 or 7, names in any case.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Sequence
from dataclasses import dataclass

from messages._instant import parse_instant

__all__ = [
    "DAY_KEYS",
    "MONDAY",
    "SHANGHAI",
    "WEEKDAYS",
    "ModelRule",
    "create_cron",
    "matching_days",
    "random_rule",
]

_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MINUTE_POOL = (0, 1, 2, 3, 4, 5, 6, 10, 15, 29, 30, 31, 45, 54, 55, 56, 57, 58, 59)
_HOUR_POOL = (0, 0, 1, 2, 3, 9, 12, 22, 23, 23)
_DAY_POOL = (1, 1, 2, 13, 15, 28, 29, 29, 30, 30, 31, 31)
_LATE_DAYS = tuple(
    (text, frozenset(values))
    for text, values in [
        ("30", {30}),
        ("31", {31}),
        ("30,31", {30, 31}),
        ("29-31", {29, 30, 31}),
        ("29", {29}),
        ("31-31/1", {31}),
    ]
)
_SHORT_MONTHS = tuple(
    (text, frozenset(values))
    for text, values in [
        ("2", {2}),
        ("feb", {2}),
        ("4,6", {4, 6}),
        ("4,6,9,11", {4, 6, 9, 11}),
        ("APR-JUN/2", {4, 6}),
        ("2,4", {2, 4}),
        ("SEP,nov", {9, 11}),
    ]
)


@dataclass(frozen=True, slots=True)
class ModelRule:
    """An expression and what it means, by the grammar's rules."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 (Sunday) … 6 (Saturday); a 7 in the text is 0 here."""
    days_restricted: bool
    weekdays_restricted: bool

    @property
    def fields(self) -> list[str]:
        """The five field texts."""
        return self.expression.split(" ")


@dataclass(frozen=True, slots=True)
class _Spec:
    low: int
    high: int
    names: tuple[str, ...] = ()
    first_name: int = 0


_SPECS = {
    "minute": _Spec(0, 59),
    "hour": _Spec(0, 23),
    "day": _Spec(1, 31),
    "month": _Spec(1, 12, _MONTH_NAMES, 1),
    "weekday": _Spec(0, 7, _DAY_NAMES, 0),
}


def _render(value: int, spec: _Spec, rng: random.Random) -> str:
    """A value as a number, or (sometimes) as a name in a random case."""
    index = value - spec.first_name
    if spec.names and 0 <= index < len(spec.names) and rng.random() < 0.3:
        name = spec.names[index]
        return rng.choice([name, name.lower(), name.capitalize()])
    return str(value)


def _item(
    rng: random.Random, spec: _Spec, pool: Sequence[int], oracle: bool
) -> tuple[str, set[int]]:
    """One list item (value, range, ``*/n`` or ``a-b/n``) and its values."""
    kind = rng.random()
    if kind < 0.45:
        value = (
            rng.choice(pool) if pool and rng.random() < 0.7 else rng.randint(spec.low, spec.high)
        )
        return _render(value, spec, rng), {value}
    if kind < 0.65:
        low = rng.randint(spec.low, spec.high)
        high = rng.randint(low, min(spec.high, low + rng.choice([1, 2, 4, 10, 60])))
        text = f"{_render(low, spec, rng)}-{_render(high, spec, rng)}"
        return text, set(range(low, high + 1))
    step = rng.choice([1, 2, 3, 4, 5, 6, 7, 10, 12, 15, 20, 29, 30, 45, 60])
    if kind < 0.8:
        return f"*/{step}", set(range(spec.low, spec.high + 1, step))
    low = rng.randint(spec.low, spec.high)
    high = rng.randint(low, spec.high)
    if oracle and low == high:  # cronsim reads `a-a/n` as `a/n`: a, a + n, … to the end
        return _render(low, spec, rng), {low}
    text = f"{_render(low, spec, rng)}-{_render(high, spec, rng)}/{step}"
    return text, set(range(low, high + 1, step))


def _field(
    rng: random.Random, name: str, star: float, pool: Sequence[int], oracle: bool
) -> tuple[str, set[int], bool]:
    """A field's text, its values, and whether it is restricted (not exactly ``*``)."""
    spec = _SPECS[name]
    if rng.random() < star:
        return "*", set(range(spec.low, spec.high + 1)), False
    count = rng.choice([1, 1, 1, 2, 2, 3, 4])
    texts, values = [], set()
    for _ in range(count):
        text, items = _item(rng, spec, pool, oracle)
        texts.append(text)
        values |= items
    return ",".join(texts), values, True


def random_rule(rng: random.Random, *, oracle: bool = False) -> ModelRule:
    """A random expression of the grammar (valid grammar; it may never match or be too dense).

    With ``oracle=True`` the forms ``cronsim`` reads differently are not drawn:
    a day field starting with ``*`` (a ``*/n`` step) when both day fields are
    restricted (cronsim takes it as unrestricted, as Debian's cron does), and
    a step over a one-value range ``a-a/n``.
    """
    minute_text, minutes, _ = _field(rng, "minute", 0.0, _MINUTE_POOL, oracle)
    hour_text, hours, _ = _field(rng, "hour", 0.35, _HOUR_POOL, oracle)
    month_text, months, _ = _field(rng, "month", 0.55, (2, 2, 4, 6, 12), oracle)
    if rng.random() < 0.1:  # the last days of short months only: rare, or never
        late_text, late_days = rng.choice(_LATE_DAYS)
        short_text, short_months = rng.choice(_SHORT_MONTHS)
        expression = " ".join([minute_text, hour_text, late_text, short_text, "*"])
        every_weekday = frozenset(range(7))
        return ModelRule(
            expression,
            frozenset(minutes),
            frozenset(hours),
            late_days,
            short_months,
            every_weekday,
            True,
            False,
        )
    while True:
        day_text, days, days_restricted = _field(rng, "day", 0.5, _DAY_POOL, oracle)
        weekday_text, weekdays, weekdays_restricted = _field(
            rng, "weekday", 0.55, (0, 1, 6, 7), oracle
        )
        both = days_restricted and weekdays_restricted
        starred = day_text.startswith("*") or weekday_text.startswith("*")
        if not (oracle and both and starred):
            break
    if 7 in weekdays:
        weekdays = (weekdays - {7}) | {0}
    expression = " ".join([minute_text, hour_text, day_text, month_text, weekday_text])
    return ModelRule(
        expression,
        frozenset(minutes),
        frozenset(hours),
        frozenset(days),
        frozenset(months),
        frozenset(weekdays),
        days_restricted,
        weekdays_restricted,
    )


def _day_keys(first: datetime.date, last: datetime.date) -> tuple[tuple[int, int, int], ...]:
    keys = []
    day = first
    while day <= last:
        keys.append((day.month, day.day, day.isoweekday() % 7))
        day += datetime.timedelta(days=1)
    return tuple(keys)


DAY_KEYS = _day_keys(datetime.date(1995, 12, 20), datetime.date(2032, 1, 10))
"""``(month, day, weekday)`` of every day from 1995-12-20 to 2032-01-10 in order.

Over 36 years every calendar year type occurs (2000 is a leap century year),
each date with each weekday, and every pair of consecutive days."""

_BY_MONTH_DAY: dict[tuple[int, int], set[int]] = {}
_BY_MONTH_WEEKDAY: dict[tuple[int, int], set[int]] = {}
for _index, (_month, _day, _weekday) in enumerate(DAY_KEYS):
    _BY_MONTH_DAY.setdefault((_month, _day), set()).add(_index)
    _BY_MONTH_WEEKDAY.setdefault((_month, _weekday), set()).add(_index)


def matching_days(rule: ModelRule) -> list[int]:
    """The indexes into :data:`DAY_KEYS` of the days the model matches, in order.

    Both day fields restricted: a day matches when either matches; otherwise
    both must (an unrestricted field matches every day).
    """
    empty: set[int] = set()
    by_day = empty.union(
        *(_BY_MONTH_DAY.get((month, day), empty) for month in rule.months for day in rule.days)
    )
    by_weekday = empty.union(
        *(
            _BY_MONTH_WEEKDAY.get((month, weekday), empty)
            for month in rule.months
            for weekday in rule.weekdays
        )
    )
    if rule.days_restricted and rule.weekdays_restricted:
        return sorted(by_day | by_weekday)
    return sorted(by_day & by_weekday)


# ---- records in the log ------------------------------------------------------------------

WEEKDAYS = "0 9 * * 1-5"
"""Weekdays at 9:00, the issue's first example."""
SHANGHAI = "Asia/Shanghai"
MONDAY = "2026-08-03T01:00:00.000Z"
"""09:00 in Shanghai on Monday 3 August 2026: the weekday rule's occurrence there."""


def create_cron(
    id: str,
    prompt: str = "p",
    expression: object = WEEKDAYS,
    zone: object = SHANGHAI,
    at: object = MONDAY,
) -> dict[str, object]:
    """A ``create`` payload of a ``cron`` record."""
    schedule = {
        "id": id,
        "kind": "cron",
        "prompt": prompt,
        "expression": expression,
        "timeZone": zone,
        "scheduledAt": at,
    }
    return {"version": 1, "operation": "create", "schedule": schedule}


def t(clock: str, day: str = "2026-08-05") -> str:
    """A canonical instant on ``day`` at ``clock`` (``HH:MM:SS``), UTC."""
    return f"{day}T{clock}.000Z"


def ms(clock: str, day: str = "2026-08-05") -> int:
    """:func:`t` in epoch milliseconds."""
    return parse_instant(t(clock, day))
