"""Occurrence arithmetic of repeating records (``every``, ``cron``), in integer milliseconds.

For a ``cron`` record accepted at ``A`` (checked as below), the occurrence
delivered is the latest occurrence of its rule in ``[T, A]`` (``T`` itself
when zone rules changed so that none lies there) and the next target is the
first occurrence strictly after ``A`` (see :mod:`messages._cron_zone`).

For ``every``:

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
from messages._records import CronRecord, EveryRecord, RepeatingRecord
from messages._zones import zone_offset_ever_changes

__all__ = [
    "advance_every_record",
    "advance_repeating_record",
    "every_occurrence_ms",
    "move_cron_record",
    "repeating_occurrence_ms",
    "resolve_every_occurrence",
    "resolve_repeating_occurrence",
]


def _check_accepted(record: RepeatingRecord, accepted_ms: int) -> None:
    """Raise ``ScheduleLogError`` unless the fold accepts a dispatch at ``accepted_ms``.

    It must lie within years 0001–9999 and at or after the record's target,
    except for a ``cron`` record that a dispatch moved, in a zone whose offset
    ever changed: there it must only follow that dispatch. Such a target was
    derived with the installed zone data, and an owner that wrote the log
    under another release derived its own, earlier or later by any amount (an
    occurrence the other rules put before the dispatch is skipped, the next
    may be a week away). What holds under every release is that one record's
    dispatches follow one another, the first at or after the stored target.
    """
    if type(accepted_ms) is not int:
        raise ScheduleLogError("acceptedAt must be an integer number of epoch milliseconds")
    if not MIN_INSTANT_MS <= accepted_ms <= MAX_INSTANT_MS:
        raise ScheduleLogError(
            "acceptedAt is outside 0001-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z"
        )
    moved_by = record.moved_by_ms if isinstance(record, CronRecord) else None
    if moved_by is not None and _zone_data_may_move(record):
        if accepted_ms <= moved_by:
            raise ScheduleLogError(
                f"cron dispatch of {record.id!r:.80} accepted at {format_instant(accepted_ms)} "
                f"does not follow the dispatch before it, at {format_instant(moved_by)}"
            )
        return
    if accepted_ms < record.target_ms:
        raise ScheduleLogError(
            f"{record.kind} dispatch of {record.id!r:.80} accepted at "
            f"{format_instant(accepted_ms)} precedes its target {record.scheduled_at}"
        )


def _zone_data_may_move(record: RepeatingRecord) -> bool:
    """Whether another ``tzdata`` release could derive another target: not in ``UTC``, ``Etc/``."""
    return isinstance(record, CronRecord) and zone_offset_ever_changes(record.time_zone)


def every_occurrence_ms(record: EveryRecord, accepted_ms: int) -> tuple[int, int | None]:
    """``(occurrence_ms, next_ms | None)`` of ``record`` accepted at ``accepted_ms``.

    Raises ``ScheduleLogError`` when ``accepted_ms`` is not an integer, lies outside
    years 0001–9999, or precedes the record's target.
    """
    _check_accepted(record, accepted_ms)
    target = record.target_ms
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


def repeating_occurrence_ms(record: RepeatingRecord, accepted_ms: int) -> tuple[int, int | None]:
    """``(occurrence_ms, next_ms | None)`` of a repeating record accepted at ``accepted_ms``.

    Errors as :func:`every_occurrence_ms`, for both kinds.
    """
    if isinstance(record, EveryRecord):
        return every_occurrence_ms(record, accepted_ms)
    _check_accepted(record, accepted_ms)
    schedule = record.schedule
    # (a dispatch before the target, under older zone data, delivered at its acceptedAt)
    occurrence = schedule.latest_between(min(record.target_ms, accepted_ms), accepted_ms)
    return occurrence, schedule.next_after(accepted_ms)


def resolve_repeating_occurrence(
    record: RepeatingRecord, accepted_ms: int
) -> tuple[str, str | None]:
    """:func:`resolve_every_occurrence` for either repeating kind."""
    occurrence, following = repeating_occurrence_ms(record, accepted_ms)
    return format_instant(occurrence), None if following is None else format_instant(following)


def advance_repeating_record(
    record: RepeatingRecord, accepted_ms: int
) -> RepeatingRecord | None:
    """The record after a dispatch accepted at ``accepted_ms`` (``None``: exhausted).

    For ``cron`` only the next target is computed (a fold never needs the occurrence).
    """
    if isinstance(record, EveryRecord):
        return advance_every_record(record, accepted_ms)
    _check_accepted(record, accepted_ms)
    return move_cron_record(record, accepted_ms)


def move_cron_record(record: CronRecord, accepted_ms: int) -> CronRecord | None:
    """``record`` moved by a dispatch accepted at ``accepted_ms`` (``None``: exhausted).

    Its target becomes the first occurrence after ``accepted_ms`` under the
    installed zone data, and ``moved_by_ms`` becomes ``accepted_ms``; the rule is
    not checked again (it was checked once). Nothing else is checked here.
    """
    following = record.schedule.next_after(accepted_ms)
    if following is None:
        return None
    moved: CronRecord = object.__new__(CronRecord)
    for name in ("id", "prompt", "expression", "time_zone"):
        object.__setattr__(moved, name, getattr(record, name))
    object.__setattr__(moved, "scheduled_at", format_instant(following))
    object.__setattr__(moved, "moved_by_ms", accepted_ms)
    object.__setattr__(moved, "target_ms", following)
    return moved
