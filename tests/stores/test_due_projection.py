"""The due projection's inbox rule: only well-formed reminder entries are owed turns."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT, completed_data
from host_bridge.embedded.stores._due import SessionProjection
from messages._presentation import REMINDER_SOURCE

REMINDER: dict[str, Any] = {"content": ["[SCHEDULE REMINDER] ..."], "source": dict(REMINDER_SOURCE)}


def owed(data: Any) -> int | None:
    state = SessionProjection()
    state.apply(0, INBOX_EVENT, 1_000, data)
    entry = state.entry()
    return None if entry is None else entry.inbox_ms


@pytest.mark.parametrize(
    "data",
    [
        REMINDER,
        {"content": ("a", "b"), "source": dict(REMINDER_SOURCE)},
        MappingProxyType({"content": [], "source": MappingProxyType(dict(REMINDER_SOURCE))}),
    ],
)
def test_a_well_formed_reminder_entry_is_owed_from_its_queue_time(data: Mapping[str, Any]) -> None:
    assert owed(data) == 1_000


@pytest.mark.parametrize(
    "data",
    [
        {"content": ["hi"], "source": {"kind": "user"}},  # a person's prompt
        {"content": ["x"], "source": dict(REMINDER_SOURCE), "extra": 1},
        {"content": "not a list", "source": dict(REMINDER_SOURCE)},
        {"content": [1], "source": dict(REMINDER_SOURCE)},
        {"content": ["x"], "source": "reminder"},
        {"content": ["x"]},
        MappingProxyType({"content": ["x"], "source": {"kind": "user"}}),
        ["content", "source"],
        None,
    ],
)
def test_anything_else_owes_nothing(data: Any) -> None:
    assert owed(data) is None


def test_a_completion_settles_the_owed_turn() -> None:
    state = SessionProjection()
    state.apply(0, INBOX_EVENT, 1_000, REMINDER)
    state.apply(1, TURN_COMPLETED_EVENT, 2_000, completed_data(0, failed=False))
    assert state.entry() is None


PERSON: dict[str, Any] = {"content": ["hi"], "source": {"kind": "user"}}


def test_a_persons_entry_is_unfinished_until_its_turn_completes() -> None:
    state = SessionProjection()
    state.apply(0, INBOX_EVENT, 1_000, PERSON)
    state.apply(1, INBOX_EVENT, 2_000, REMINDER)
    state.apply(2, INBOX_EVENT, 3_000, {"content": "malformed", "source": {}})
    assert state.unfinished == {0: 1_000} and state.pending == {1: 2_000}
    entry = state.entry()
    assert entry is not None and entry.inbox_ms == 2_000  # only reminders make it due
    kept = state.copy()
    state.apply(3, TURN_COMPLETED_EVENT, 4_000, completed_data(0, failed=True))
    assert state.unfinished == {} and state.pending == {1: 2_000}
    assert kept.unfinished == {0: 1_000}  # a copy is independent
    kept.apply(3, TURN_COMPLETED_EVENT, 4_000, completed_data(1, failed=False))
    assert kept.unfinished == {0: 1_000} and kept.pending == {}


def test_a_forks_inherited_entries_are_not_its_own() -> None:
    state = SessionProjection(seed_length=1)
    state.apply(0, INBOX_EVENT, 1_000, PERSON)
    assert state.unfinished == {} and state.next_seq == 1
