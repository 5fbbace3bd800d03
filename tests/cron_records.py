"""Builders of ``cron`` records for the runtime tests: stored payloads, views and occurrences.

:func:`cron_create` writes a create change exactly as given (no check), so a
test can store a target its rule would not compute (as under older zone rules).
Views are compared whole, so a cron view is asserted exactly, not only shaped.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from messages import SCHEDULE_CHANGE_TYPE
from messages._cron_zone import cron_schedule
from messages._instant import format_instant

__all__ = [
    "answer",
    "cron_create",
    "cron_dispatch",
    "cron_event",
    "cron_view",
    "latest_between",
    "next_after",
    "zone_data_moved",
]


def _instant(value: int | str) -> str:
    return format_instant(value) if isinstance(value, int) else value


def cron_create(
    schedule_id: str, prompt: str, expression: str, zone: str, scheduled_at: int | str
) -> dict[str, Any]:
    """The ``create`` payload of a ``cron`` record, its fields as given."""
    schedule = {
        "id": schedule_id,
        "kind": "cron",
        "prompt": prompt,
        "expression": expression,
        "timeZone": zone,
        "scheduledAt": _instant(scheduled_at),
    }
    return {"version": 1, "operation": "create", "schedule": schedule}


def cron_dispatch(schedule_id: str, accepted: int | str) -> dict[str, Any]:
    """The ``dispatch`` payload of a repeating record accepted at ``accepted``."""
    return {
        "version": 1,
        "operation": "dispatch",
        "id": schedule_id,
        "acceptedAt": _instant(accepted),
    }


def cron_event(payload: dict[str, Any]) -> tuple[str, Any]:
    """``payload`` as a ``(type, data)`` schedule change event."""
    return SCHEDULE_CHANGE_TYPE, payload


def cron_view(
    schedule_id: str,
    prompt: str,
    expression: str,
    zone: str,
    scheduled_at: int | str,
    state: str = "scheduled",
) -> dict[str, Any]:
    """The tool view of a ``cron`` record, keys in the contract's order."""
    return {
        "id": schedule_id,
        "kind": "cron",
        "prompt": prompt,
        "expression": expression,
        "timeZone": zone,
        "scheduledAt": _instant(scheduled_at),
        "state": state,
        "deliveryMode": "session-local",
    }


def next_after(expression: str, zone: str, after_ms: int) -> int:
    """The rule's first occurrence strictly after ``after_ms`` (one must exist)."""
    found = cron_schedule(expression, zone).next_after(after_ms)
    assert found is not None
    return found


def latest_between(expression: str, zone: str, earliest_ms: int, at_ms: int) -> int:
    """The rule's latest occurrence in ``[earliest_ms, at_ms]`` (``earliest_ms`` if none)."""
    return cron_schedule(expression, zone).latest_between(earliest_ms, at_ms)


def answer(reply: Future[Any]) -> Any:
    """The value an owner answered with (it must have answered)."""
    assert reply.done(), "the owner has not answered"
    return reply.result(timeout=0)


def zone_data_moved(monkeypatch: Any, zone: str, to: str) -> None:
    """Fold as a newer ``tzdata`` would that gave ``zone`` the rules of ``to``.

    Only the occurrence arithmetic of stored records changes (what a fold and a
    delivery compute); decoding still sees the canonical key ``zone``.
    """
    import messages._records as records

    def moved(expression: str, time_zone: str) -> Any:
        return cron_schedule(expression, to if time_zone == zone else time_zone)

    monkeypatch.setattr(records, "cron_schedule", moved)
