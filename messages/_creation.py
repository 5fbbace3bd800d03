"""Building records for ``schedule_create``, and the rule checks the tools run first.

The tool layer checks the argument shape before the queue (:func:`create_selector`,
then the prompt, then :func:`check_after_seconds`, :func:`check_every_seconds` or
:func:`check_cron`); inside the queue, with one clock sample, :func:`after_record`,
:func:`at_record`, :func:`every_record` or :func:`cron_record` builds the record
from those checked values without judging them again (only the prompt's cheap
check stays). The ``at`` value is
inspected only there. The ``create_*_schedule_record`` functions check every
argument themselves, for callers that did not. Failures raise
``ScheduleInputError`` with a closed code and a fixed message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

from messages._absolute import resolve_at
from messages._cron import CronRuleError, parse_cron_expression
from messages._cron_zone import cron_schedule
from messages._errors import ErrorCode, ScheduleInputError
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS, format_instant
from messages._numbers import MAX_SAFE_INTEGER, json_integer
from messages._records import (
    MIN_EVERY_SECONDS,
    AfterRecord,
    AtRecord,
    CronRecord,
    EveryRecord,
    record_at_target,
)
from messages._text import ecma_trim, has_lone_surrogate, is_ecma_trimmed
from messages._zones import canonicalize_time_zone

__all__ = [
    "CREATE_ARGUMENT_KEYS",
    "CRON_KEYS",
    "SELECTOR_KEYS",
    "SelectorKey",
    "after_record",
    "at_record",
    "check_after_seconds",
    "check_cron",
    "check_every_seconds",
    "create_after_schedule_record",
    "create_at_schedule_record",
    "create_cron_schedule_record",
    "create_every_schedule_record",
    "create_selector",
    "cron_record",
    "every_record",
]

SelectorKey: TypeAlias = Literal["after_seconds", "at", "every_seconds", "cron"]
"""The argument that says when a reminder is due."""

SELECTOR_KEYS: tuple[SelectorKey, ...] = ("after_seconds", "at", "every_seconds", "cron")
"""The ``schedule_create`` selectors, exactly one of which a call names."""

CRON_KEYS = frozenset({"expression", "time_zone"})
"""The exact key set of a ``cron`` selector object."""

CREATE_ARGUMENT_KEYS = frozenset({"prompt", *SELECTOR_KEYS})
"""Every argument key ``schedule_create`` accepts."""

_RANGE = "the reminder time must fall within 0001-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z"


def create_selector(
    arguments: Mapping[str, object], *, cron: bool = True
) -> SelectorKey | None:
    """The one selector key present in ``arguments``, else ``None`` (``invalid_selector``).

    A present key counts even when its value is ``None``. ``None`` is returned when
    any key lies outside :data:`CREATE_ARGUMENT_KEYS` or the number of selectors
    present is not exactly one. With ``cron=False`` the ``cron`` key is unknown too.
    """
    if any(key not in CREATE_ARGUMENT_KEYS for key in arguments):
        return None
    if not cron and "cron" in arguments:
        return None
    present = [key for key in SELECTOR_KEYS if key in arguments]
    return present[0] if len(present) == 1 else None


def check_after_seconds(value: object) -> int:
    """``after_seconds`` as an ``int`` (JSON number semantics: ``5.0`` is 5).

    Not an integer in ``1..2**53-1`` (bools, strings, fractions, NaN, ``None``)
    raises ``ScheduleInputError("invalid_rule")``.
    """
    seconds = json_integer(value)
    if seconds is None or not 1 <= seconds <= MAX_SAFE_INTEGER:
        raise ScheduleInputError(
            ErrorCode.INVALID_RULE, f"after_seconds must be an integer in 1..{MAX_SAFE_INTEGER}"
        )
    return seconds


def check_every_seconds(value: object) -> int:
    """``every_seconds`` as an ``int`` (``300.0`` is 300), checked before the queue.

    Not an integer within ``±(2**53-1)`` (bools, strings, fractions, NaN, ``None``)
    raises ``ScheduleInputError("invalid_rule")``; an integer below 300 (zero and
    negatives included, and ``299.0``) raises ``frequency_too_high``. An interval
    too long for the calendar is found later, as ``time_out_of_range``.
    """
    seconds = json_integer(value)
    if seconds is None or not -MAX_SAFE_INTEGER <= seconds <= MAX_SAFE_INTEGER:
        raise ScheduleInputError(
            ErrorCode.INVALID_RULE, "every_seconds must be an integer number of seconds"
        )
    if seconds < MIN_EVERY_SECONDS:
        raise ScheduleInputError(
            ErrorCode.FREQUENCY_TOO_HIGH,
            f"every_seconds must be at least {MIN_EVERY_SECONDS} (five minutes)",
        )
    return seconds


def _prompt(prompt: object) -> str:
    if not isinstance(prompt, str) or has_lone_surrogate(prompt) or not ecma_trim(prompt):
        raise ScheduleInputError(
            ErrorCode.INVALID_PROMPT, "prompt must be a non-empty string of valid Unicode"
        )
    return ecma_trim(prompt)


def _clock(now_ms: object) -> int:
    now = json_integer(now_ms)
    if now is None:
        raise ScheduleInputError(ErrorCode.TIME_OUT_OF_RANGE, _RANGE)
    return now


def _in_range(target: int) -> int:
    if not MIN_INSTANT_MS <= target <= MAX_INSTANT_MS:
        raise ScheduleInputError(ErrorCode.TIME_OUT_OF_RANGE, _RANGE)
    return target


def _checked_id(id: object) -> str:
    if not isinstance(id, str) or not id or not is_ecma_trimmed(id):
        raise ValueError("schedule id must be a non-empty string equal to its own trim")
    return str(id)


def after_record(id: str, prompt: object, after_seconds: int, now_ms: object) -> AfterRecord:
    """The ``after`` record from a checked ``after_seconds`` (:func:`check_after_seconds`).

    Checks ``prompt`` (``invalid_prompt``; stored trimmed), ``now_ms`` and the
    target (``time_out_of_range``) as :func:`create_after_schedule_record` does.
    """
    return _after(id, _prompt(prompt), after_seconds, now_ms)


def _after(id: str, text: str, after_seconds: int, now_ms: object) -> AfterRecord:
    target = _in_range(_clock(now_ms) + after_seconds * 1000)
    record = record_at_target("after", _checked_id(id), text, after_seconds, target)
    assert isinstance(record, AfterRecord)
    return record


def create_after_schedule_record(
    id: str, prompt: object, after_seconds: object, now_ms: object
) -> AfterRecord:
    """Build the record for "remind me ``after_seconds`` from ``now_ms``" under ``id``.

    Checks, in order: ``prompt`` (a string, valid Unicode, non-empty after trim;
    stored trimmed) else ``invalid_prompt``; ``after_seconds`` (integer in
    1..2**53-1) else ``invalid_rule``; ``now_ms`` (integer) and the target instant
    (within years 0001–9999) else ``time_out_of_range``. A malformed ``id`` is a
    programming error and raises ``ValueError``.
    """
    text = _prompt(prompt)
    return _after(id, text, check_after_seconds(after_seconds), now_ms)


def at_record(id: str, prompt: object, at: object, now_ms: object) -> AtRecord:
    """The ``at`` record: the same checks as :func:`create_at_schedule_record`."""
    text = _prompt(prompt)
    target = resolve_at(at)
    now = _clock(now_ms)
    if target <= now:
        raise ScheduleInputError(ErrorCode.NOT_FUTURE, "the reminder time must be later than now")
    record = record_at_target("at", _checked_id(id), text, None, target)
    assert isinstance(record, AtRecord)
    return record


def create_at_schedule_record(id: str, prompt: object, at: object, now_ms: object) -> AtRecord:
    """Build the record for "remind me at ``at``" under ``id``, judged at ``now_ms``.

    Checks, in order: ``prompt`` (as for ``after``) else ``invalid_prompt``; the
    ``at`` value (see :func:`messages._absolute.resolve_at`: ``invalid_rule``,
    ``invalid_time_zone``, ``time_out_of_range``) before anything uses the clock;
    ``now_ms`` not an integer (NaN, fraction, ``None``, bool) else
    ``time_out_of_range``; a target at or before ``now_ms`` else ``not_future``
    (one millisecond later is accepted). Only the resolved UTC instant is stored.
    A malformed ``id`` raises ``ValueError``.
    """
    return at_record(id, prompt, at, now_ms)


def every_record(id: str, prompt: object, every_seconds: int, now_ms: object) -> EveryRecord:
    """The ``every`` record from a checked ``every_seconds`` (:func:`check_every_seconds`).

    Checks ``prompt``, ``now_ms`` and the first target as
    :func:`create_every_schedule_record` does.
    """
    return _every(id, _prompt(prompt), every_seconds, now_ms)


def _every(id: str, text: str, every_seconds: int, now_ms: object) -> EveryRecord:
    target = _in_range(_clock(now_ms) + every_seconds * 1000)
    record = record_at_target("every", _checked_id(id), text, every_seconds, target)
    assert isinstance(record, EveryRecord)
    return record


def create_every_schedule_record(
    id: str, prompt: object, every_seconds: object, now_ms: object
) -> EveryRecord:
    """Build the record for "remind me every ``every_seconds``" from ``now_ms`` under ``id``.

    Checks, in order: ``prompt`` else ``invalid_prompt``; ``every_seconds`` as
    :func:`check_every_seconds` (``invalid_rule``, ``frequency_too_high``);
    ``now_ms`` (integer) and the first target ``now_ms + every_seconds * 1000``
    (within years 0001–9999) else ``time_out_of_range``. The grid is anchored at
    creation: every later target is ``now_ms + k * every_seconds * 1000``.
    A malformed ``id`` raises ``ValueError``.
    """
    text = _prompt(prompt)
    return _every(id, text, check_every_seconds(every_seconds), now_ms)


def check_cron(value: object) -> tuple[str, str]:
    """A ``cron`` selector value as ``(canonical expression, canonical zone key)``.

    Judged in this order: not an object with exactly ``expression`` and
    ``time_zone``, or ``expression`` not a string → ``invalid_rule``;
    ``time_zone`` not a string → ``invalid_time_zone``; the expression's grammar,
    length, or a rule that can never match → ``invalid_rule``; matches that can
    come less than five minutes apart → ``frequency_too_high``; ``time_zone``
    not a zone name (as for ``at``) → ``invalid_time_zone``.
    """
    if not isinstance(value, Mapping) or set(value) != CRON_KEYS:
        raise ScheduleInputError(ErrorCode.INVALID_RULE, "cron must be {expression, time_zone}")
    expression, zone = value["expression"], value["time_zone"]
    if not isinstance(expression, str):
        raise ScheduleInputError(ErrorCode.INVALID_RULE, "cron expression must be a string")
    if not isinstance(zone, str):
        raise ScheduleInputError(ErrorCode.INVALID_TIME_ZONE, "time_zone must be a string")
    try:
        rule = parse_cron_expression(expression)
    except CronRuleError as error:
        raise ScheduleInputError(ErrorCode(error.code), error.reason) from None
    return rule.expression, canonicalize_time_zone(zone)


def cron_record(
    id: str, prompt: object, expression: str, time_zone: str, now_ms: object
) -> CronRecord:
    """The ``cron`` record from a checked rule (:func:`check_cron`), first due after ``now_ms``.

    Checks ``prompt`` (``invalid_prompt``) and ``now_ms`` (an integer within years
    0001–9999, else ``time_out_of_range``); the first target is the first
    occurrence strictly after ``now_ms`` (none by 9999-12-31 → ``time_out_of_range``).
    """
    text = _prompt(prompt)
    now = _in_range(_clock(now_ms))
    first = cron_schedule(expression, time_zone).next_after(now)
    if first is None:
        raise ScheduleInputError(ErrorCode.TIME_OUT_OF_RANGE, _RANGE)
    return CronRecord(_checked_id(id), text, expression, time_zone, format_instant(first))


def create_cron_schedule_record(
    id: str, prompt: object, cron: object, now_ms: object
) -> CronRecord:
    """Build the record for "remind me on this calendar rule" under ``id``, from ``now_ms``.

    Checks, in order: ``prompt`` else ``invalid_prompt``; the ``cron`` value as
    :func:`check_cron` (``invalid_rule``, ``invalid_time_zone``,
    ``frequency_too_high``); ``now_ms`` and the first occurrence as
    :func:`cron_record` (``time_out_of_range``). A malformed ``id`` raises ``ValueError``.
    """
    text = _prompt(prompt)
    expression, zone = check_cron(cron)
    return cron_record(id, text, expression, zone, now_ms)
