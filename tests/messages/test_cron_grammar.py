"""``cron`` rules: the strict grammar, canonical text, the day rule and the frequency rule.

The frequency test compares the parser with a brute-force enumeration of
matching local minutes over 36 years of calendar, for thousands of seeded
random expressions whose meaning is computed apart from the parser
(:mod:`tests.messages.cron_cases`).
"""

from __future__ import annotations

import datetime
import itertools
import random

import pytest

from messages._cron import (
    CRON_MACROS,
    MAX_CRON_EXPRESSION_LENGTH,
    CronRule,
    CronRuleError,
    parse_cron_expression,
)
from tests.messages.cron_cases import ModelRule, matching_days, random_rule

RULE = "invalid_rule"
FREQUENCY = "frequency_too_high"


def refusal(expression: object) -> str:
    """The code ``parse_cron_expression`` refuses ``expression`` with."""
    with pytest.raises(CronRuleError) as caught:
        parse_cron_expression(expression)
    assert caught.value.reason == str(caught.value)
    assert caught.value.reason  # a reason, never empty
    return caught.value.code


# ---- the issue's examples ----------------------------------------------------------------

ISSUE_EXAMPLES: list[tuple[str, str | None]] = [
    ("0 9 * * 1-5", None),
    ("0 8 1 * *", None),
    ("*/5 * * * *", None),
    ("@hourly", None),
    ("@daily", None),
    ("@weekly", None),
    ("@monthly", None),
    ("@yearly", None),
    ("@annually", None),
    ("*/4 * * * *", FREQUENCY),
    ("0,1 9 * * *", FREQUENCY),
    ("58,2 * * * *", FREQUENCY),
    ("0 9 31 4,6 *", RULE),
    ("0 9 30 2 *", RULE),
]


@pytest.mark.parametrize(("expression", "code"), ISSUE_EXAMPLES)
def test_the_issue_examples(expression: str, code: str | None) -> None:
    if code is None:
        assert parse_cron_expression(expression).expression == expression
    else:
        assert refusal(expression) == code


# ---- accepted forms and their canonical text ---------------------------------------------

CANONICAL: list[tuple[str, str]] = [
    ("0 9 * * 1-5", "0 9 * * 1-5"),
    ("0 9 * * mon-fri", "0 9 * * MON-FRI"),
    ("0 9 * * Mon-Fri", "0 9 * * MON-FRI"),
    ("0 9 * jan,Feb,MAR *", "0 9 * JAN,FEB,MAR *"),
    ("  0 9 * * 1-5", "0 9 * * 1-5"),
    ("0 9 * * 1-5 \t\n", "0 9 * * 1-5"),
    ("\ufeff\u00a00 9 * * sun\u3000\u2028", "0 9 * * SUN"),
    ("@DAILY", "@daily"),
    ("@Annually", "@annually"),
    (" @yearly ", "@yearly"),
    ("\t@Weekly", "@weekly"),
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL)
def test_canonical_text_is_trimmed_names_upper_macros_lower(text: str, canonical: str) -> None:
    rule = parse_cron_expression(text)
    assert rule.expression == canonical
    assert parse_cron_expression(canonical) == rule  # the canonical text is a fixed point
    assert parse_cron_expression(canonical).expression == canonical


@pytest.mark.parametrize(
    ("macro", "fields"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
    ],
)
def test_macros_stand_for_their_five_fields(macro: str, fields: str) -> None:
    assert CRON_MACROS[macro] == fields
    rule, expanded = parse_cron_expression(macro), parse_cron_expression(fields)
    assert rule.expression == macro
    assert rule.fields == tuple(fields.split(" "))
    for name in ("minutes", "hours", "days", "months", "weekdays"):
        assert getattr(rule, name) == getattr(expanded, name)
    assert (rule.days_restricted, rule.weekdays_restricted) == (
        expanded.days_restricted,
        expanded.weekdays_restricted,
    )


ALL_MINUTES = tuple(range(60))
ALL_HOURS = tuple(range(24))
ALL_DAYS = frozenset(range(1, 32))
ALL_MONTHS = tuple(range(1, 13))
ALL_WEEKDAYS = frozenset(range(7))

# expression → (minutes, hours, days, months, weekdays)
VALUES: list[tuple[str, tuple[object, object, object, object, object]]] = [
    ("0 9 * * 1-5", ((0,), (9,), ALL_DAYS, ALL_MONTHS, frozenset({1, 2, 3, 4, 5}))),
    ("*/5 * * * *", (tuple(range(0, 60, 5)), ALL_HOURS, ALL_DAYS, ALL_MONTHS, ALL_WEEKDAYS)),
    ("0 0 * * 0", ((0,), (0,), ALL_DAYS, ALL_MONTHS, frozenset({0}))),
    ("0 0 * * 7", ((0,), (0,), ALL_DAYS, ALL_MONTHS, frozenset({0}))),
    ("0 0 * * sun", ((0,), (0,), ALL_DAYS, ALL_MONTHS, frozenset({0}))),
    ("0 0 * * 0,7", ((0,), (0,), ALL_DAYS, ALL_MONTHS, frozenset({0}))),
    ("0 0 * * 5-7", ((0,), (0,), ALL_DAYS, ALL_MONTHS, frozenset({5, 6, 0}))),
    ("0 0 * * FRI-SAT", ((0,), (0,), ALL_DAYS, ALL_MONTHS, frozenset({5, 6}))),
    ("0 0 * * 0-7", ((0,), (0,), ALL_DAYS, ALL_MONTHS, ALL_WEEKDAYS)),
    ("0 0 * * 3-3", ((0,), (0,), ALL_DAYS, ALL_MONTHS, frozenset({3}))),
    ("0 0 * * */2", ((0,), (0,), ALL_DAYS, ALL_MONTHS, frozenset({0, 2, 4, 6}))),
    ("0 0 * * MON-FRI/2", ((0,), (0,), ALL_DAYS, ALL_MONTHS, frozenset({1, 3, 5}))),
    ("10-20/5 * * * *", ((10, 15, 20), ALL_HOURS, ALL_DAYS, ALL_MONTHS, ALL_WEEKDAYS)),
    ("0,30 9-17/4 * * *", ((0, 30), (9, 13, 17), ALL_DAYS, ALL_MONTHS, ALL_WEEKDAYS)),
    ("0 1,5-7,*/12 * * *", ((0,), (0, 1, 5, 6, 7, 12), ALL_DAYS, ALL_MONTHS, ALL_WEEKDAYS)),
    ("0 9 1-31/10 * *", ((0,), (9,), frozenset({1, 11, 21, 31}), ALL_MONTHS, ALL_WEEKDAYS)),
    ("0 9 * JAN-MAR/2 *", ((0,), (9,), ALL_DAYS, (1, 3), ALL_WEEKDAYS)),
    ("0 9 * jan,dec,6 *", ((0,), (9,), ALL_DAYS, (1, 6, 12), ALL_WEEKDAYS)),
    ("*/60 */24 * * *", ((0,), (0,), ALL_DAYS, ALL_MONTHS, ALL_WEEKDAYS)),
    ("59 23 31 12 *", ((59,), (23,), frozenset({31}), (12,), ALL_WEEKDAYS)),
    ("0 0 1 1 6", ((0,), (0,), frozenset({1}), (1,), frozenset({6}))),
    ("15,45 9,21 1,1,15 * *", ((15, 45), (9, 21), frozenset({1, 15}), ALL_MONTHS, ALL_WEEKDAYS)),
]


@pytest.mark.parametrize(("expression", "values"), VALUES)
def test_field_values(
    expression: str, values: tuple[object, object, object, object, object]
) -> None:
    rule = parse_cron_expression(expression)
    assert (rule.minutes, rule.hours, rule.days, rule.months, rule.weekdays) == values
    assert rule.fields == tuple(expression.upper().split(" "))


@pytest.mark.parametrize(
    ("expression", "days_restricted", "weekdays_restricted"),
    [
        ("0 9 * * *", False, False),
        ("0 9 1 * *", True, False),
        ("0 9 * * 1", False, True),
        ("0 9 */2 * *", True, False),  # `*/2` is restricted (readers differ: the docs say so)
        ("0 9 */1 * *", True, False),
        ("0 9 1-31 * *", True, False),
        ("0 9 * * */1", False, True),
        ("0 9 * * 0-7", False, True),
        ("0 9 1 * 1", True, True),
    ],
)
def test_a_day_field_is_unrestricted_only_when_exactly_a_star(
    expression: str, days_restricted: bool, weekdays_restricted: bool
) -> None:
    rule = parse_cron_expression(expression)
    assert (rule.days_restricted, rule.weekdays_restricted) == (
        days_restricted,
        weekdays_restricted,
    )


def _date(text: str) -> datetime.date:
    return datetime.date.fromisoformat(text)


# 2026-03-01 is a Sunday; 2026-02-02 and 2026-03-02 Mondays; 2026-03-06 and 2026-03-13 Fridays.
DAY_RULE: list[tuple[str, str, bool]] = [
    ("0 9 13 * 5", "2026-03-13", True),  # both: Friday the 13th
    ("0 9 13 * 5", "2026-03-06", True),  # a Friday, not the 13th
    ("0 9 13 * 5", "2026-04-13", True),  # the 13th, a Monday
    ("0 9 13 * 5", "2026-04-14", False),
    ("0 9 13 * *", "2026-03-06", False),  # only the day of month decides
    ("0 9 13 * *", "2026-04-13", True),
    ("0 9 * * 5", "2026-04-13", False),  # only the day of week decides
    ("0 9 * * 5", "2026-03-06", True),
    ("0 9 */2 * 1", "2026-03-02", True),  # an even day, but a Monday: either matches
    ("0 9 */2 * 1", "2026-03-03", True),  # odd
    ("0 9 */2 * 1", "2026-03-04", False),  # even, a Wednesday
    ("0 9 */2 * *", "2026-03-02", False),
    ("0 9 */2 * *", "2026-03-03", True),
    ("0 9 1 * */1", "2026-03-04", True),  # `*/1` is restricted: the 1st OR any day of week
    ("0 9 1 * *", "2026-03-04", False),
    ("0 9 1-31 * 1", "2026-03-04", True),  # OR with every day of month
    ("0 9 * 2 1", "2026-02-02", True),
    ("0 9 * 2 1", "2026-03-02", False),  # the month gates both day fields
    ("0 9 30 2 1", "2026-02-02", True),  # the 30th never comes; Mondays of February do
    ("0 9 30 2 1", "2026-02-03", False),
    ("0 9 1 2 1", "2026-03-01", False),
    ("0 9 29 2 *", "2028-02-29", True),
    ("0 9 * * 7", "2026-03-01", True),
    ("0 9 * * 0", "2026-03-01", True),
    ("0 9 * * 6", "2026-03-01", False),
]


@pytest.mark.parametrize(("expression", "day", "matches"), DAY_RULE)
def test_the_day_rule(expression: str, day: str, matches: bool) -> None:
    rule = parse_cron_expression(expression)
    assert rule.matches_day(_date(day)) is matches
    nine = datetime.datetime.combine(_date(day), datetime.time(9, 0))
    assert rule.matches(nine) is matches
    assert rule.matches(nine.replace(second=59)) is matches  # seconds are ignored
    assert not rule.matches(nine.replace(minute=1))


# ---- refused forms -----------------------------------------------------------------------

LONGEST = "0 9 " + ",".join(map(str, range(1, 32))) + " " + ",".join(map(str, range(1, 13)))
LONGEST += " " + ",".join(map(str, range(7)))

REFUSED: list[tuple[str, object, str]] = [
    ("not a string: None", None, RULE),
    ("not a string: int", 5, RULE),
    ("not a string: bytes", b"0 9 * * *", RULE),
    ("not a string: list", ["0", "9", "*", "*", "*"], RULE),
    ("empty", "", RULE),
    ("blank", "   ", RULE),
    ("seconds field", "0 0 9 * * *", RULE),
    ("six fields", "0 9 * * * 2026", RULE),
    ("four fields", "0 9 * *", RULE),
    ("one field", "*", RULE),
    ("L day of month", "0 9 L * *", RULE),
    ("LW day of month", "0 9 LW * *", RULE),
    ("W day of month", "0 9 15W * *", RULE),
    ("L day of week", "0 9 * * 5L", RULE),
    ("# day of week", "0 9 * * 1#2", RULE),
    ("? day of month", "0 9 ? * *", RULE),
    ("? day of week", "0 9 * * ?", RULE),
    ("@reboot", "@reboot", RULE),
    ("@midnight", "@midnight", RULE),
    ("@every", "@every 5m", RULE),
    ("macro with a field", "@daily 9", RULE),
    ("macro spelled apart", "@ daily", RULE),
    ("double space", "0  9 * * *", RULE),
    ("double space at the end of the fields", "0 9 * *  *", RULE),
    ("tab between fields", "0\t9 * * *", RULE),
    ("newline between fields", "0 9 * *\n*", RULE),
    ("no-break space between fields", "0 9\u00a0* * *", RULE),
    ("backwards range", "5-1 * * * *", RULE),
    ("backwards day names", "0 9 * * FRI-MON", RULE),
    ("SUN is 0 in a range", "0 9 * * FRI-SUN", RULE),
    ("backwards month names", "0 9 * DEC-JAN *", RULE),
    ("backwards range with a step", "0 20-10/2 * * *", RULE),
    ("step 0", "*/0 * * * *", RULE),
    ("range step 0", "0 9 1-10/0 * *", RULE),
    ("empty step", "0 9 * * 1-5/", RULE),
    ("step without a range", "0 9 * * /2", RULE),
    ("double step", "*/5/2 * * * *", RULE),
    ("value step", "5/15 * * * *", RULE),
    ("hour value step", "0 9/2 * * *", RULE),
    ("minute 60", "60 * * * *", RULE),
    ("hour 24", "0 24 * * *", RULE),
    ("hour range to 24", "0 9-24 * * *", RULE),
    ("day 0", "0 9 0 * *", RULE),
    ("day 32", "0 9 32 * *", RULE),
    ("month 0", "0 9 * 0 *", RULE),
    ("month 13", "0 9 * 13 *", RULE),
    ("weekday 8", "0 9 * * 8", RULE),
    ("negative value", "-1 * * * *", RULE),
    ("signed value", "+5 * * * *", RULE),
    ("decimal value", "5.0 * * * *", RULE),
    ("hex value", "0x5 * * * *", RULE),
    ("three digits", "0 009 * * *", RULE),
    ("weekday name in day of month", "0 9 MON * *", RULE),
    ("weekday name in month", "0 9 * MON *", RULE),
    ("month name in day of week", "0 9 * * JAN", RULE),
    ("month name in minute", "JAN 9 * * *", RULE),
    ("weekday name in hour", "0 MON * * *", RULE),
    ("full weekday name", "0 9 * * MONDAY", RULE),
    ("full month name", "0 9 * JANUARY *", RULE),
    ("empty list item", "0,,30 9 * * *", RULE),
    ("leading empty item", ",0 9 * * *", RULE),
    ("trailing empty item", "0 9 * * 1,", RULE),
    ("star in a list", "*,5 * * * *", RULE),
    ("star range", "*-5 * * * *", RULE),
    ("three-part range", "1-2-3 * * * *", RULE),
    ("fullwidth digit", "\uff10 9 * * *", RULE),
    ("fullwidth name", "0 9 * * \uff2d\uff2f\uff2e", RULE),
    ("en dash range", "0 9 * * 1\u20135", RULE),
    ("accented name", "0 9 * * m\u00f6n", RULE),
    ("Kelvin sign in a macro (it lower-cases to k)", "@wee\u212aly", RULE),
    ("Kelvin sign in a name", "0 9 * * \u212aON", RULE),
    ("over 128 characters", LONGEST + ",1", RULE),
    ("128 characters plus trimmed space", " " + LONGEST, RULE),
    ("never: April and June 31", "0 9 31 4,6 *", RULE),
    ("never: February 30", "0 9 30 2 *", RULE),
    ("never: February 30 and 31", "0 9 30,31 2 *", RULE),
    ("never: the 31st of short months", "0 9 31 2,4,6,9,11 *", RULE),
    ("never, and dense times", "*/4 * 31 2 *", RULE),  # nothing ever matches: no two times
    ("never, dense across midnight", "58,1 0,23 30 2 *", RULE),
]


@pytest.mark.parametrize(
    ("expression", "code"), [(e, c) for _, e, c in REFUSED], ids=[n for n, _, _ in REFUSED]
)
def test_refused_forms(expression: object, code: str) -> None:
    assert refusal(expression) == code


def test_the_length_bound_is_measured_before_trimming() -> None:
    assert MAX_CRON_EXPRESSION_LENGTH == 128
    assert len(LONGEST) == 128
    assert parse_cron_expression(LONGEST).expression == LONGEST
    assert refusal(LONGEST + " ") == RULE  # 129 characters as given, though it trims to 128
    assert refusal(LONGEST + ",1") == RULE


# ---- the frequency rule: examples --------------------------------------------------------

FREQUENCY_EXAMPLES: list[tuple[str, str | None]] = [
    ("*/5 * * * *", None),  # the densest accepted
    ("*/4 * * * *", FREQUENCY),
    ("* * * * *", FREQUENCY),
    ("0,5 9 * * *", None),
    ("0,4 9 * * *", FREQUENCY),
    ("0-4 9 * * *", FREQUENCY),
    ("1-59/29 * * * *", FREQUENCY),  # 1, 30, 59, then 1 of the next hour
    ("1-59/29 9 * * *", None),  # one hour a day: 09:59 is the last
    ("58,2 * * * *", FREQUENCY),
    ("58,2 9 * * *", None),  # 09:58 then 10:02 does not happen: the hour is 9 only
    ("58,3 9,10 * * *", None),  # 09:58 → 10:03: five minutes
    ("58,2 9,10 * * *", FREQUENCY),  # 09:58 → 10:02
    ("57,2 0,23 * * *", None),  # 23:57 → 00:02 the next day: five minutes
    ("0,55 0,23 * * *", None),  # 23:55 → 00:00
    ("0,56 0,23 * * *", FREQUENCY),  # 23:56 → 00:00
    ("58,1 0,23 * * *", FREQUENCY),  # 23:58 → 00:01 every night
    ("58,1 0,23 * * MON,TUE", FREQUENCY),  # Monday night into Tuesday
    ("58,1 0,23 * * MON,WED", None),  # never on consecutive days
    ("58,1 0,23 * * SAT,SUN", FREQUENCY),
    ("58,1 0,23 * * 6,7", FREQUENCY),
    ("58,1 0,23 * * 0,1", FREQUENCY),
    ("58,1 0,23 1,3 * *", None),
    ("58,1 0,23 1,2 * *", FREQUENCY),
    ("58,1 0,23 31,1 * *", FREQUENCY),  # the 31st into the 1st of the next month
    ("58,1 0,23 31,1 1 *", None),  # January 31 → February 1 is outside the months
    ("58,1 0,23 31,1 1,2 *", FREQUENCY),
    ("58,1 0,23 29,1 2,3 *", FREQUENCY),  # February 29 → March 1 in leap years
    ("58,1 0,23 28,1 2,3 *", FREQUENCY),  # February 28 → March 1 in other years
    ("58,1 0,23 31,1 12,1 *", FREQUENCY),  # December 31 → January 1 of the next year
    ("58,1 0,23 31 12 1", FREQUENCY),  # December 31 → January 1 when that is a Monday
    ("58,1 0,23 15 * 5", FREQUENCY),  # a Friday the 14th, then the 15th (either day rule)
    ("58,1 0,23 13 * 6", FREQUENCY),  # a Friday the 13th, then a Saturday
]


@pytest.mark.parametrize(("expression", "code"), FREQUENCY_EXAMPLES)
def test_frequency_examples(expression: str, code: str | None) -> None:
    if code is None:
        parse_cron_expression(expression)
    else:
        assert refusal(expression) == code


# ---- the frequency rule against brute-force enumeration ----------------------------------


def _expected(model: ModelRule) -> str | None:
    """Enumerate the model's matching minutes over :data:`DAY_KEYS`: the code, or ``None``.

    The matching minutes are every matching day's times of day, in order; the
    smallest gap between consecutive ones is the smaller of the gaps within a
    day and those from one matching day's last time to the next one's first.
    """
    times = sorted(hour * 60 + minute for hour in model.hours for minute in model.minutes)
    matching = matching_days(model)
    if not matching:
        return RULE
    within = min((b - a for a, b in itertools.pairwise(times)), default=1440)
    across = min(
        (later - earlier) * 1440 + times[0] - times[-1]
        for earlier, later in itertools.pairwise(matching)
    )
    return FREQUENCY if min(within, across) < 5 else None


def _assert_same_values(rule: CronRule, model: ModelRule) -> None:
    assert rule.minutes == tuple(sorted(model.minutes))
    assert rule.hours == tuple(sorted(model.hours))
    assert rule.days == model.days
    assert rule.months == tuple(sorted(model.months))
    assert rule.weekdays == model.weekdays
    assert (rule.days_restricted, rule.weekdays_restricted) == (
        model.days_restricted,
        model.weekdays_restricted,
    )


def test_the_frequency_rule_against_enumeration() -> None:
    rng = random.Random(20260308)
    seen: dict[str | None, int] = {None: 0, RULE: 0, FREQUENCY: 0}
    for _ in range(2_500):
        model = random_rule(rng)
        expected = _expected(model)
        try:
            rule = parse_cron_expression(model.expression)
        except CronRuleError as error:
            assert error.code == expected, model.expression
        else:
            assert expected is None, model.expression
            assert rule.expression == model.expression.upper()
            _assert_same_values(rule, model)
        seen[expected] += 1
    # the draw reaches every verdict often enough to mean something
    assert min(seen.values()) >= 100, seen
