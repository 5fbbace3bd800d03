"""Calendar rules of ``cron`` records: the expression grammar and its local-time matching.

An expression is five fields separated by single spaces (minute, hour, day of
month, month, day of week) or one of the macros ``@hourly``, ``@daily``,
``@weekly``, ``@monthly``, ``@yearly``/``@annually``. Each field is ``*``, a
value, a range ``a-b`` (``a <= b``), a step ``*/n`` or ``a-b/n`` (``n >= 1``),
or a comma list of values, ranges and steps. Months take ``JAN``–``DEC`` and
days of week ``SUN``–``SAT`` (0 and 7 are Sunday), case-insensitively.

:func:`parse_cron_expression` is strict and total: it returns a
:class:`CronRule` or raises :class:`CronRuleError` naming what is wrong. A
rule that can never match, or whose consecutive matching local times can be
less than :data:`MIN_CRON_GAP_MINUTES` apart, is refused too. The rule matches
naive local wall-clock minutes; turning them into instants in a zone is
:mod:`messages._cron_zone`'s job. Pure: no clock, no I/O.
"""

from __future__ import annotations

import bisect
import calendar
import datetime
import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from messages._text import ecma_trim

__all__ = [
    "CRON_MACROS",
    "MAX_CRON_EXPRESSION_LENGTH",
    "MIN_CRON_GAP_MINUTES",
    "CronRule",
    "CronRuleError",
    "parse_cron_expression",
]

MAX_CRON_EXPRESSION_LENGTH = 128
"""The longest expression accepted, in characters as given (the bound of ids)."""

MIN_CRON_GAP_MINUTES = 5
"""Two consecutive matching local times must be at least this far apart (300 s)."""

CRON_MACROS: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
"""The macros and the five fields each stands for."""

_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTH_WORDS = tuple(calendar.month_name[1:])
_DAY_WORDS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_DIGITS = frozenset("0123456789")
_MINUTE = datetime.timedelta(minutes=1)
_DAY = datetime.timedelta(days=1)

# Every calendar year type (leap or not, each first weekday) occurs in 2001–2028, and
# each weekday's 31 December → 1 January in 2001–2029: what a day rule can match.
_PROBE_START = datetime.date(2001, 1, 1)
_PROBE_DAYS = (datetime.date(2029, 1, 1) - _PROBE_START).days + 1

FieldName = Literal["minute", "hour", "day of month", "month", "day of week"]


class CronRuleError(ValueError):
    """An expression that is not a valid ``cron`` rule.

    ``code`` is ``"invalid_rule"`` (the grammar, or a rule that never matches)
    or ``"frequency_too_high"`` (matches can come less than five minutes apart);
    ``reason`` says which rule was broken, without repeating the expression.
    """

    def __init__(self, code: Literal["invalid_rule", "frequency_too_high"], reason: str) -> None:
        super().__init__(reason)
        self.code: Literal["invalid_rule", "frequency_too_high"] = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class _Field:
    name: FieldName
    low: int
    high: int
    names: tuple[str, ...] = ()
    """Names of the values from ``low`` on (months from 1, days of week from 0)."""


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, _MONTH_NAMES),
    _Field("day of week", 0, 7, _DAY_NAMES),
)


def _invalid(reason: str) -> CronRuleError:
    return CronRuleError("invalid_rule", reason)


def _value(text: str, spec: _Field) -> int:
    if spec.names and text in spec.names:
        return spec.names.index(text) + (1 if spec.name == "month" else 0)
    if not text or len(text) > 2 or not _DIGITS.issuperset(text):
        raise _invalid(f"{spec.name}: each value must be a number or a name")
    number = int(text)
    if not spec.low <= number <= spec.high:
        raise _invalid(f"{spec.name}: values must be in {spec.low}-{spec.high}")
    return number


def _step(text: str, spec: _Field) -> int:
    if not text or len(text) > 2 or not _DIGITS.issuperset(text) or int(text) < 1:
        raise _invalid(f"{spec.name}: a step must be a number from 1 to 99")
    return int(text)


def _item(text: str, spec: _Field) -> range:
    """The values of one list item: ``*/n``, ``a-b/n``, ``a-b`` or ``a``."""
    body, slash, step_text = text.partition("/")
    step = _step(step_text, spec) if slash else 1
    if body == "*":
        if not slash:
            raise _invalid(f"{spec.name}: * stands alone, not in a list")
        return range(spec.low, spec.high + 1, step)
    first, dash, last = body.partition("-")
    if not dash:
        if slash:
            raise _invalid(f"{spec.name}: a step needs * or a range before it")
        value = _value(first, spec)
        return range(value, value + 1)
    low, high = _value(first, spec), _value(last, spec)
    if low > high:
        raise _invalid(f"{spec.name}: a range must not run backwards")
    return range(low, high + 1, step)


def _field(text: str, spec: _Field) -> frozenset[int]:
    values: set[int] = set()
    if text == "*":
        values.update(range(spec.low, spec.high + 1))
    else:
        for item in text.split(","):
            values.update(_item(item, spec))
    if spec.name == "day of week" and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values)


def _canonical_text(expression: object) -> str:
    """The expression's canonical text: trimmed, macros lower-case, names upper-case."""
    if not isinstance(expression, str):
        raise _invalid("the expression must be a string")
    if len(expression) > MAX_CRON_EXPRESSION_LENGTH:
        raise _invalid(f"the expression must be at most {MAX_CRON_EXPRESSION_LENGTH} characters")
    text = ecma_trim(str(expression))
    if not text.isascii():  # before case folding: "\u212a".lower() is "k"
        raise _invalid("the expression must be ASCII")
    if text.startswith("@"):
        lowered = text.lower()
        if lowered not in CRON_MACROS:
            raise _invalid("the macros are @hourly, @daily, @weekly, @monthly, @yearly, @annually")
        return lowered
    return text.upper()


@dataclass(frozen=True, slots=True)
class CronRule:
    """A parsed, checked calendar rule; it matches naive local wall-clock minutes.

    ``expression`` is the canonical text the rule was parsed from. A day of
    month or day of week field is *restricted* unless it is exactly ``*``;
    when both are restricted a day matches if either matches.
    """

    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: tuple[int, ...]
    weekdays: frozenset[int]
    """Days of week, 0 (Sunday) … 6 (Saturday)."""
    days_restricted: bool
    weekdays_restricted: bool
    fields: tuple[str, str, str, str, str]
    """The five field texts (a macro's expansion)."""
    _minute_set: frozenset[int] = field(init=False, repr=False, compare=False)
    _hour_set: frozenset[int] = field(init=False, repr=False, compare=False)
    _month_set: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_minute_set", frozenset(self.minutes))
        object.__setattr__(self, "_hour_set", frozenset(self.hours))
        object.__setattr__(self, "_month_set", frozenset(self.months))

    def matches_day(self, day: datetime.date) -> bool:
        """Whether the rule's month and day fields match the local date ``day``."""
        if day.month not in self._month_set:
            return False
        return self._day_fields_match(day)

    def _day_fields_match(self, day: datetime.date) -> bool:
        if self.days_restricted:
            if day.day in self.days:
                return True
            if not self.weekdays_restricted:
                return False
        elif not self.weekdays_restricted:
            return True
        return (day.weekday() + 1) % 7 in self.weekdays

    def matches(self, wall: datetime.datetime) -> bool:
        """Whether the local wall-clock minute ``wall`` matches (seconds are ignored)."""
        return (
            wall.minute in self._minute_set
            and wall.hour in self._hour_set
            and self.matches_day(wall.date())
        )

    def next_match(self, wall: datetime.datetime) -> datetime.datetime | None:
        """The first matching minute at or after ``wall`` (a whole minute); ``None`` past 9999."""
        months, hours, minutes = self.months, self.hours, self.minutes
        try:
            while True:
                if wall.month not in self._month_set:
                    index = bisect.bisect_right(months, wall.month)
                    if index < len(months):
                        wall = datetime.datetime(wall.year, months[index], 1)
                    elif wall.year == datetime.MAXYEAR:
                        return None
                    else:
                        wall = datetime.datetime(wall.year + 1, months[0], 1)
                    continue
                if not self._day_fields_match(wall):
                    wall = datetime.datetime(wall.year, wall.month, wall.day) + _DAY
                    continue
                if wall.hour not in self._hour_set:
                    index = bisect.bisect_right(hours, wall.hour)
                    if index == len(hours):
                        wall = datetime.datetime(wall.year, wall.month, wall.day) + _DAY
                        continue
                    wall = wall.replace(hour=hours[index], minute=minutes[0])
                    return wall
                if wall.minute not in self._minute_set:
                    index = bisect.bisect_right(minutes, wall.minute)
                    if index < len(minutes):
                        return wall.replace(minute=minutes[index])
                    wall = wall.replace(minute=0) + datetime.timedelta(hours=1)
                    continue
                return wall
        except OverflowError:
            return None

    def previous_match(self, wall: datetime.datetime) -> datetime.datetime | None:
        """The last matching minute at or before ``wall`` (a whole minute); ``None`` before 0001."""
        months, hours, minutes = self.months, self.hours, self.minutes
        try:
            while True:
                if wall.month not in self._month_set:
                    index = bisect.bisect_left(months, wall.month) - 1
                    year = wall.year
                    if index < 0:
                        if year == datetime.MINYEAR:
                            return None
                        year -= 1
                    month = months[index]
                    last = calendar.monthrange(year, month)[1]
                    wall = datetime.datetime(year, month, last, 23, 59)
                    continue
                if not self._day_fields_match(wall):
                    wall = datetime.datetime(wall.year, wall.month, wall.day) - _MINUTE
                    continue
                if wall.hour not in self._hour_set:
                    index = bisect.bisect_left(hours, wall.hour) - 1
                    if index < 0:
                        wall = datetime.datetime(wall.year, wall.month, wall.day) - _MINUTE
                        continue
                    return wall.replace(hour=hours[index], minute=minutes[-1])
                if wall.minute not in self._minute_set:
                    index = bisect.bisect_left(minutes, wall.minute) - 1
                    if index >= 0:
                        return wall.replace(minute=minutes[index])
                    wall = wall.replace(minute=0) - _MINUTE
                    continue
                return wall
        except OverflowError:
            return None

    def times_of_day(self) -> tuple[tuple[int, int], ...]:
        """Every matching ``(hour, minute)`` of a matching day, in order."""
        return tuple((hour, minute) for hour in self.hours for minute in self.minutes)

    def describe(self) -> str:
        """The rule in plain words, such as ``at 09:00, on Monday to Friday``."""
        return _describe(self)


def _gap_check(rule: CronRule) -> None:
    """Refuse a rule that never matches, or whose matches can be under five minutes apart."""
    times = [hour * 60 + minute for hour in rule.hours for minute in rule.minutes]
    closest = min((b - a for a, b in itertools.pairwise(times)), default=1440)
    overnight = times[0] + 1440 - times[-1] < MIN_CRON_GAP_MINUTES
    matched_before = False
    matched_any = False
    day = _PROBE_START
    for _ in range(_PROBE_DAYS):
        matched = rule.matches_day(day)
        if matched and closest < MIN_CRON_GAP_MINUTES:  # (a rule that never matches is not dense)
            raise CronRuleError(
                "frequency_too_high", "matching times must be at least five minutes apart"
            )
        if matched and not overnight:
            return
        if matched and matched_before:
            raise CronRuleError(
                "frequency_too_high",
                "matching times on consecutive days must be at least five minutes apart",
            )
        matched_any = matched_any or matched
        matched_before = matched
        day += _DAY
    if not matched_any:
        raise _invalid("the day of month and month fields can never match")


@functools.lru_cache(maxsize=1024)
def _parse(text: str) -> CronRule:
    fields_text = CRON_MACROS.get(text, text)
    parts = fields_text.split(" ")
    if len(parts) != 5:
        raise _invalid("the expression must have five fields separated by single spaces")
    values = [_field(part, spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    minute_text, hour_text, day_text, month_text, weekday_text = parts
    rule = CronRule(
        expression=text,
        minutes=tuple(sorted(values[0])),
        hours=tuple(sorted(values[1])),
        days=values[2],
        months=tuple(sorted(values[3])),
        weekdays=values[4],
        days_restricted=day_text != "*",
        weekdays_restricted=weekday_text != "*",
        fields=(minute_text, hour_text, day_text, month_text, weekday_text),
    )
    _gap_check(rule)
    return rule


def parse_cron_expression(expression: object) -> CronRule:
    """The checked rule of ``expression``; :class:`CronRuleError` for anything else.

    The text is ECMAScript-trimmed; it may hold at most
    :data:`MAX_CRON_EXPRESSION_LENGTH` characters before trimming. The rule's
    ``expression`` is the canonical text (macros lower-case, names upper-case),
    which is what a ``cron`` record stores.
    """
    return _parse(_canonical_text(expression))


def canonical_cron_expression(expression: str) -> str | None:
    """``expression`` if it is a valid rule in canonical form, else ``None`` (for decoders)."""
    try:
        rule = parse_cron_expression(expression)
    except CronRuleError:
        return None
    return expression if rule.expression == expression else None


# ---- plain words ------------------------------------------------------------------------


def _join(words: Sequence[str]) -> str:
    if len(words) <= 2:
        return " and ".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def _ordinal(number: int) -> str:
    if 10 <= number % 100 <= 20:
        return f"{number}th"
    return f"{number}" + {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")


def _spans(
    values: Sequence[int],
    label: Callable[[int], str],
    noun: tuple[str, str] | None = None,
    unit: str = "",
) -> str:
    """Values in words: ``days 1 to 5``, ``Monday and Friday``, ``every 2nd day from 1 to 31``.

    ``noun`` is the singular and plural word put before the values (none for
    names); ``unit`` names a step (``every 3rd month``), ``noun``'s singular by default.
    """
    steps = {b - a for a, b in itertools.pairwise(values)}
    if len(values) >= 4 and len(steps) == 1 and min(steps) > 1:
        thing = unit or (noun[0] if noun else "")
        first, last = label(values[0]), label(values[-1])
        return f"every {_ordinal(min(steps))} {thing} from {first} to {last}"
    prefix = "" if noun is None else (noun[0] if len(values) == 1 else noun[1]) + " "
    runs: list[list[int]] = []
    for value in values:
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    words: list[str] = []
    for run in runs:
        if len(run) >= 3:
            words.append(f"{label(run[0])} to {label(run[-1])}")
        else:
            words.extend(label(value) for value in run)
    return prefix + _join(words)


def _time_words(rule: CronRule) -> str:
    times = rule.times_of_day()
    if len(times) <= 4:
        return "at " + _join([f"{hour:02d}:{minute:02d}" for hour, minute in times])
    minutes, every_hour = rule.minutes, len(rule.hours) == 24
    gaps = {b - a for a, b in itertools.pairwise((*minutes, minutes[0] + 60))}
    if every_hour and minutes[0] < min(gaps) and len(gaps) == 1:
        step = gaps.pop()
        start = "" if minutes[0] == 0 else f" from minute {minutes[0]}"
        return f"every {step} minutes{start}"
    minute_words = _spans(minutes, str, ("minute", "minutes"))
    if every_hour:
        return f"at {minute_words} of every hour"
    return f"at {minute_words} past {_spans(rule.hours, str, ('hour', 'hours'))}"


def _weekday_label(weekday: int) -> str:
    return _DAY_WORDS[weekday % 7]


def _describe(rule: CronRule) -> str:
    days: list[str] = []
    if rule.days_restricted:
        days.append(f"on {_spans(sorted(rule.days), str, ('day', 'days'))} of the month")
    if rule.weekdays_restricted:
        if len(rule.weekdays) == 7:
            days.append("on every day of the week")
        else:  # Monday first, Sunday last, as a week is read
            ordered = sorted(day if day else 7 for day in rule.weekdays)
            days.append("on " + _spans(ordered, _weekday_label))
    when = " or ".join(days) if days else "every day"
    if len(rule.months) < 12:
        when += " in " + _spans(rule.months, lambda month: _MONTH_WORDS[month - 1], unit="month")
    return f"{_time_words(rule)}, {when}"
