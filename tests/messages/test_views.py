"""The tool-facing view of a record."""

from __future__ import annotations

import pytest

from messages import AfterRecord, AtRecord, EveryRecord, schedule_view
from messages._text import canonical_json
from messages._views import DELIVERY_MODE
from tests.messages.helpers import AT, AT_MS

RECORD = AfterRecord("schedule-1", "call mom", 60, AT)


@pytest.mark.parametrize(
    ("now", "state"),
    [
        (AT_MS - 60_000, "scheduled"),
        (AT_MS - 1, "scheduled"),
        (AT_MS, "overdue"),
        (AT_MS + 1, "overdue"),
        (AT_MS + 10**12, "overdue"),
    ],
)
def test_state_boundary(now: int, state: str) -> None:
    assert schedule_view(RECORD, now)["state"] == state


def test_view_keys_values_and_rendering() -> None:
    view = schedule_view(RECORD, 0)
    assert list(view.items()) == [
        ("id", "schedule-1"),
        ("kind", "after"),
        ("prompt", "call mom"),
        ("afterSeconds", 60),
        ("scheduledAt", AT),
        ("state", "scheduled"),
        ("deliveryMode", "session-local"),
    ]
    assert DELIVERY_MODE == "session-local"
    assert canonical_json(view) == (
        '{"id":"schedule-1","kind":"after","prompt":"call mom","afterSeconds":60,'
        '"scheduledAt":"2026-01-01T00:00:00.000Z","state":"scheduled","deliveryMode":"session-local"}'
    )


def test_view_works_before_1970() -> None:
    record = AfterRecord("schedule-1", "p", 1, "1969-12-31T23:59:59.999Z")
    assert schedule_view(record, -2)["state"] == "scheduled"
    assert schedule_view(record, -1)["state"] == "overdue"


def test_at_view_key_order() -> None:
    view = schedule_view(AtRecord("schedule-2", "standup", AT), AT_MS)
    assert list(view.items()) == [
        ("id", "schedule-2"),
        ("kind", "at"),
        ("prompt", "standup"),
        ("scheduledAt", AT),
        ("state", "overdue"),
        ("deliveryMode", "session-local"),
    ]


def test_every_view_key_order_and_state_of_the_current_target() -> None:
    record = EveryRecord("schedule-3", "stretch", 1800, AT)
    assert list(schedule_view(record, AT_MS - 1).items()) == [
        ("id", "schedule-3"),
        ("kind", "every"),
        ("prompt", "stretch"),
        ("everySeconds", 1800),
        ("scheduledAt", AT),
        ("state", "scheduled"),
        ("deliveryMode", "session-local"),
    ]
    assert schedule_view(record, AT_MS)["state"] == "overdue"
    assert canonical_json(schedule_view(record, AT_MS)) == (
        '{"id":"schedule-3","kind":"every","prompt":"stretch","everySeconds":1800,'
        '"scheduledAt":"2026-01-01T00:00:00.000Z","state":"overdue","deliveryMode":"session-local"}'
    )
