"""Reading a session's schedule changes back: from its events or from a closed SQLite store."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from host_bridge.embedded.stores import SqliteEventStore, StoredSession
from host_bridge.protocols import SessionEvent
from messages import SCHEDULE_CHANGE_TYPE, validate_schedule_stream


def change_of(data: Any) -> tuple[str, str]:
    """``(operation, schedule id)`` of one ``schedule/change`` payload."""
    operation = data["operation"]
    return operation, data["schedule"]["id"] if operation == "create" else data["id"]


def schedule_changes(events: Iterable[SessionEvent]) -> list[tuple[str, str]]:
    """``(operation, schedule id)`` of every schedule change among ``events``, in log order."""
    return [change_of(event.data) for event in events if event.type == SCHEDULE_CHANGE_TYPE]


def reopened(path: Path, session_id: str) -> StoredSession:
    """Reopen the closed store at ``path`` as a restarted host would; the stream-checked session."""
    store = SqliteEventStore(path, create=False)
    try:
        stored = store.load(session_id)
    finally:
        store.close()
    assert stored is not None, f"session {session_id!r} is not stored"
    validate_schedule_stream(stored.events, stored.header.seed_length)
    return stored


def reopened_changes(path: Path, session_id: str) -> list[tuple[str, str]]:
    """The schedule changes of ``session_id`` in the closed store at ``path`` (stream-checked)."""
    return schedule_changes(reopened(path, session_id).events)
