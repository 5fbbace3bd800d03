"""Occurrence arithmetic of fixed-rate ``every`` records, in integer milliseconds.

With ``T`` the record's current target, ``I`` its interval and ``A`` the time a
delivery was accepted (``acceptedAt`` on replay, the decision clock sample at run
time), ``A`` must lie within years 0001–9999 and ``A >= T``; then

* ``steps = (A - T) // I``;
* the **occurrence** delivered is ``T + steps * I``, the latest due grid point;
* the **next** target is ``occurrence + I``, or none when that falls after
  9999-12-31T23:59:59.999Z (the record is exhausted).

The grid is anchored at creation, so every target is ``created + k * I``, k ≥ 1,
and missed intervals are never enumerated or replayed (latest-only catch-up).
"""

from __future__ import annotations

import dataclasses

from messages._errors import ScheduleLogError
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS, format_instant
from messages._records import EveryRecord

__all__ = ["advance_every_record", "every_occurrence_ms", "resolve_every_occurrence"]


def every_occurrence_ms(record: EveryRecord, accepted_ms: int) -> tuple[int, int | None]:
    """``(occurrence_ms, next_ms | None)`` of ``record`` accepted at ``accepted_ms``.

    Raises ``ScheduleLogError`` when ``accepted_ms`` is not an integer, lies outside
    years 0001–9999, or precedes the record's target.
    """
    if type(accepted_ms) is not int:
        raise ScheduleLogError("acceptedAt must be an integer number of epoch milliseconds")
    if not MIN_INSTANT_MS <= accepted_ms <= MAX_INSTANT_MS:
        raise ScheduleLogError(
            "acceptedAt is outside 0001-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z"
        )
    target = record.target_ms
    if accepted_ms < target:
        raise ScheduleLogError(
            f"every dispatch of {record.id!r:.80} accepted at {format_instant(accepted_ms)} "
            f"precedes its target {record.scheduled_at}"
        )
    interval = record.interval_ms
    occurrence = target + (accepted_ms - target) // interval * interval
    following = occurrence + interval
    return occurrence, following if following <= MAX_INSTANT_MS else None


def resolve_every_occurrence(record: EveryRecord, accepted_ms: int) -> tuple[str, str | None]:
    """``(occurrence_at, next_scheduled_at | None)`` as canonical instants.

    The occurrence a delivery of ``record`` accepted at ``accepted_ms`` reports,
    and the record's next target (``None``: exhausted). Raises ``ScheduleLogError``
    as :func:`every_occurrence_ms` does.
    """
    occurrence, following = every_occurrence_ms(record, accepted_ms)
    return format_instant(occurrence), None if following is None else format_instant(following)


def advance_every_record(record: EveryRecord, accepted_ms: int) -> EveryRecord | None:
    """The record after a dispatch accepted at ``accepted_ms``: same fields, next target.

    ``None`` when the record is exhausted; errors as :func:`every_occurrence_ms`.
    """
    _, following = every_occurrence_ms(record, accepted_ms)
    if following is None:
        return None
    return dataclasses.replace(record, scheduled_at=format_instant(following))
