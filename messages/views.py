"""The tool-facing view of an active record."""

from __future__ import annotations

from messages.records import ScheduleRecord

__all__ = ["DELIVERY_MODE", "schedule_view"]

DELIVERY_MODE = "session-local"
"""How reminders are delivered in v1: only to a live, resumed session."""


def schedule_view(record: ScheduleRecord, now_ms: int) -> dict[str, object]:
    """The canonical camelCase view of ``record`` as seen at ``now_ms``.

    ``state`` is ``"overdue"`` iff ``now_ms >= record.target_ms``, else ``"scheduled"``.
    """
    return {
        "id": record.id,
        "kind": record.kind,
        "prompt": record.prompt,
        "afterSeconds": record.after_seconds,
        "scheduledAt": record.scheduled_at,
        "state": "overdue" if now_ms >= record.target_ms else "scheduled",
        "deliveryMode": DELIVERY_MODE,
    }
