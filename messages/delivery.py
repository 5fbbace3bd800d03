"""The pure delivery decision: which record is next, and is it due."""

from __future__ import annotations

from dataclasses import dataclass

from messages.fold import FoldedSchedules
from messages.records import ScheduleRecord

__all__ = ["MAX_TIMER_DELAY_MS", "DeliverNow", "DeliveryPlan", "WaitFor", "plan_delivery"]

MAX_TIMER_DELAY_MS = 2**31 - 1
"""The longest single timer an owner arms; longer waits re-arm after re-reading the clock."""


@dataclass(frozen=True, slots=True)
class DeliverNow:
    """``record`` is due (its target is at or before the decision time)."""

    record: ScheduleRecord


@dataclass(frozen=True, slots=True)
class WaitFor:
    """Nothing is due yet: wake after ``delay_ms`` and decide again."""

    record: ScheduleRecord
    delay_ms: int


DeliveryPlan = DeliverNow | WaitFor | None
"""What to do next; ``None`` when nothing is active."""


def plan_delivery(folded: FoldedSchedules, now_ms: int) -> DeliveryPlan:
    """Decide on the earliest active record (ties in create order) at ``now_ms``."""
    record = folded.earliest()
    if record is None:
        return None
    if now_ms >= record.target_ms:
        return DeliverNow(record)
    return WaitFor(record, min(record.target_ms - now_ms, MAX_TIMER_DELAY_MS))
