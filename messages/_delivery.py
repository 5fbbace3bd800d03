"""The pure delivery decision: what is due at one clock sample, and what to do about it.

From a fold and one decision time ``now``:

1. a due one-shot (``after``/``at``) comes first: the earliest target, ties in
   create order, one per transaction (:class:`DeliverNow`);
2. else every due repeating (``every``, ``cron``) record joins **one** batch,
   ordered by stored target then create order, accepted at ``now``
   (:class:`DeliverBatch`);
3. else wait for the earliest future target of any kind (:class:`WaitFor`);
4. else nothing is active (``None``).

A decision that cannot be made (a clock outside years 0001–9999 on the
repeating path) is the value :class:`Undecidable`, for the caller to log and
treat as no decision; the function itself never raises for it.

:func:`reminder_delivery` turns a due plan into what a delivery appends: the
reminder message's framing, then the ``dispatch`` changes in order, and the
receipt of each reminder (what a host shows or hands on). A live owner and
a cold-delivery pass both take it from here, so they cannot differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from messages._errors import ScheduleLogError
from messages._fold import FoldedSchedules
from messages._instant import format_instant
from messages._occurrence import resolve_repeating_occurrence
from messages._presentation import render_reminder_batch_framing, render_reminder_framing
from messages._records import (
    REPEATING_KINDS,
    DispatchChange,
    OneShotRecord,
    RepeatingRecord,
    ScheduleRecord,
)

__all__ = [
    "MAX_TIMER_DELAY_MS",
    "BatchMember",
    "DeliverBatch",
    "DeliverNow",
    "DeliveredReminder",
    "DeliveryPlan",
    "ReminderDelivery",
    "Undecidable",
    "WaitFor",
    "plan_delivery",
    "reminder_delivery",
]

MAX_TIMER_DELAY_MS = 2**31 - 1
"""The longest single timer an actor arms (``2**31 - 1``, what every timer API accepts).

An owner re-arms after re-reading the clock; the wake-up actor caps its waits with it."""


@dataclass(frozen=True, slots=True)
class DeliverNow:
    """One-shot ``record`` is due (its target is at or before the decision time)."""

    record: OneShotRecord


@dataclass(frozen=True, slots=True)
class BatchMember:
    """One repeating record of a batch: the occurrence delivered and its next target."""

    record: RepeatingRecord
    occurrence_at: str
    next_scheduled_at: str | None
    """``None``: the record is exhausted after this delivery."""


@dataclass(frozen=True, slots=True)
class DeliverBatch:
    """Every due repeating record, in batch order, accepted at ``accepted_at``.

    One reminder message covers the batch; each member then gets its own dispatch
    carrying ``accepted_at``, in this order.
    """

    accepted_at: str
    members: tuple[BatchMember, ...]

    def framing_items(self) -> tuple[tuple[RepeatingRecord, str], ...]:
        """The ``(record, occurrence_at)`` pairs the batch framing takes."""
        return tuple((member.record, member.occurrence_at) for member in self.members)


@dataclass(frozen=True, slots=True)
class WaitFor:
    """Nothing is due yet: wake after ``delay_ms`` and decide again."""

    record: ScheduleRecord
    delay_ms: int


@dataclass(frozen=True, slots=True)
class Undecidable:
    """No decision could be made at this clock sample; ``reason`` says why (for a log)."""

    reason: str


DeliveryPlan: TypeAlias = DeliverNow | DeliverBatch | WaitFor | Undecidable | None
"""What to do next; ``None`` when nothing is active."""


def _batch(folded: FoldedSchedules, now_ms: int) -> DeliverBatch | Undecidable:
    due = [r for r in folded.active if isinstance(r, REPEATING_KINDS) and r.target_ms <= now_ms]
    due.sort(key=lambda record: record.target_ms)  # stable: equal targets keep create order
    try:
        accepted_at = format_instant(now_ms)
        members = []
        for record in due:
            occurrence_at, next_at = resolve_repeating_occurrence(record, now_ms)
            members.append(BatchMember(record, occurrence_at, next_at))
    except (ScheduleLogError, ValueError) as error:
        return Undecidable(f"no repeating batch at clock {now_ms!r:.40}: {error}")
    return DeliverBatch(accepted_at, tuple(members))


def plan_delivery(folded: FoldedSchedules, now_ms: int) -> DeliveryPlan:
    """Decide what to deliver at ``now_ms`` (see the module docstring for the order)."""
    one_shot = folded.earliest_one_shot()
    if one_shot is not None and now_ms >= one_shot.target_ms:
        return DeliverNow(one_shot)
    earliest = folded.earliest()
    if earliest is None:
        return None
    if now_ms < earliest.target_ms:
        return WaitFor(earliest, min(earliest.target_ms - now_ms, MAX_TIMER_DELAY_MS))
    return _batch(folded, now_ms)  # the earliest is due and is not a one-shot: a repeating one


@dataclass(frozen=True, slots=True)
class DeliveredReminder:
    """One reminder a delivery presents: its id, prompt and the occurrence delivered."""

    schedule_id: str
    prompt: str
    occurrence_at: str

    def receipt(self) -> dict[str, str]:
        """The ``{"scheduleId", "prompt", "occurrenceAt"}`` receipt (as read back from a log)."""
        return {
            "scheduleId": self.schedule_id,
            "prompt": self.prompt,
            "occurrenceAt": self.occurrence_at,
        }


@dataclass(frozen=True, slots=True)
class ReminderDelivery:
    """What delivering a due plan appends, in order: one message, then its ``dispatches``.

    ``framing`` is the reminder message's text; ``reminders`` the receipts of
    the reminders it presents, in dispatch order.
    """

    framing: str
    dispatches: tuple[DispatchChange, ...]
    reminders: tuple[DeliveredReminder, ...]


def reminder_delivery(plan: DeliverNow | DeliverBatch) -> ReminderDelivery:
    """The message and dispatches of a due plan (a one-shot alone, or one repeating batch).

    Raises ``ValueError`` when the framing cannot be rendered (the records stay active).
    """
    if isinstance(plan, DeliverNow):
        record = plan.record
        return ReminderDelivery(
            render_reminder_framing(record),
            (DispatchChange(record.id),),
            (DeliveredReminder(record.id, record.prompt, record.scheduled_at),),
        )
    members = plan.members
    return ReminderDelivery(
        render_reminder_batch_framing(plan.framing_items()),
        tuple(DispatchChange(m.record.id, plan.accepted_at) for m in members),
        tuple(DeliveredReminder(m.record.id, m.record.prompt, m.occurrence_at) for m in members),
    )
