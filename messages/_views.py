"""The tool-facing view of an active record."""

from __future__ import annotations

from messages._records import AfterRecord, CronRecord, EveryRecord, ScheduleRecord

__all__ = ["DELIVERY_MODE", "schedule_view"]

DELIVERY_MODE = "session-local"
"""How reminders are delivered: only to a live, resumed session."""


def schedule_view(record: ScheduleRecord, now_ms: int) -> dict[str, object]:
    """The canonical camelCase view of ``record`` as seen at ``now_ms``.

    The record's wire keys in order, then ``state`` and ``deliveryMode``:
    ``after`` → ``id, kind, prompt, afterSeconds, scheduledAt``; ``at`` → ``id,
    kind, prompt, scheduledAt``; ``every`` → ``id, kind, prompt, everySeconds,
    scheduledAt``; ``cron`` → ``id, kind, prompt, expression, timeZone,
    scheduledAt``. ``state`` is ``"overdue"`` iff ``now_ms >= record.target_ms``
    (for a repeating record, its current target), else ``"scheduled"``.
    """
    view: dict[str, object] = {"id": record.id, "kind": record.kind, "prompt": record.prompt}
    if isinstance(record, AfterRecord):
        view["afterSeconds"] = record.after_seconds
    elif isinstance(record, EveryRecord):
        view["everySeconds"] = record.every_seconds
    elif isinstance(record, CronRecord):
        view["expression"] = record.expression
        view["timeZone"] = record.time_zone
    view["scheduledAt"] = record.scheduled_at
    view["state"] = "overdue" if now_ms >= record.target_ms else "scheduled"
    view["deliveryMode"] = DELIVERY_MODE
    return view
