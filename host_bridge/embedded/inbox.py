"""The embedded host's durable inbox: how queued messages and finished turns look in a session log.

An agent of the embedded host records every message it queues (a plugin's
follow-up or a person's prompt) as an ``inbox/queued`` event before it
accepts it, names that entry in the ``message`` event that starts its turn,
and appends a ``turn/completed`` event naming it when the model returns. The
log therefore says which queued messages never finished their turn, and a
host resuming the session queues exactly those again (:func:`pending_entries`).

Event data::

    inbox/queued    {"content": [text, ...], "source": {...}}    -- the UserMessage
    turn/completed  {"inbox": seq, "failed": bool}                -- seq of the inbox/queued event

Only this module knows the shapes; everything here is pure.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actors._contract import SessionEvent, TextBlock, UserMessage

__all__ = [
    "INBOX_EVENT",
    "TURN_COMPLETED_EVENT",
    "InboxEntry",
    "completed_data",
    "completed_entry",
    "message_of",
    "pending_after",
    "pending_entries",
    "queued_data",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

INBOX_EVENT = "inbox/queued"
"""Event type of a message an agent accepted into its queue."""

TURN_COMPLETED_EVENT = "turn/completed"
"""Event type recorded when the turn started by an inbox entry returned."""


@dataclass(frozen=True, slots=True)
class InboxEntry:
    """A queued message and the seq of the ``inbox/queued`` event that recorded it."""

    seq: int
    message: UserMessage


def queued_data(message: UserMessage) -> dict[str, Any]:
    """The data of the ``inbox/queued`` event recording ``message``."""
    return {
        "content": [block.text for block in message.content],
        "source": dict(message.source),
    }


def message_of(data: Any) -> UserMessage | None:
    """The message an ``inbox/queued`` event recorded; ``None`` when its data is malformed."""
    if not isinstance(data, Mapping) or set(data) != {"content", "source"}:
        return None
    content, source = data["content"], data["source"]
    if not isinstance(content, list | tuple) or not all(isinstance(t, str) for t in content):
        return None
    if not isinstance(source, Mapping):
        return None
    return UserMessage(tuple(TextBlock(text) for text in content), dict(source))


def completed_data(seq: int, *, failed: bool) -> dict[str, Any]:
    """The data of the ``turn/completed`` event of the turn started by inbox entry ``seq``."""
    return {"inbox": seq, "failed": failed}


def completed_entry(data: Any) -> int | None:
    """The inbox seq a ``turn/completed`` event names; ``None`` when its data is malformed."""
    if not isinstance(data, Mapping):
        return None
    seq = data.get("inbox")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def pending_entries(events: Sequence[SessionEvent], start: int = 0) -> list[InboxEntry]:
    """Inbox entries of ``events[start:]`` whose turn never completed, in log order.

    ``start`` is a fork's ``seed_length``: a child does not inherit its
    parent's queue. A malformed ``inbox/queued`` event is skipped (and logged).
    """
    return pending_after((), events, start)


def pending_after(
    entries: Iterable[InboxEntry], events: Sequence[SessionEvent], start: int
) -> list[InboxEntry]:
    """Carry the pending ``entries`` of ``events[:start]`` on through ``events[start:]``.

    ``entries`` (in log order) are the inbox entries before ``start`` whose
    turn had not completed there, as :func:`pending_entries` would find them;
    the result equals ``pending_entries`` of the whole log while reading only
    the events from ``start`` on (a resume from a checkpoint).
    """
    queued: dict[int, UserMessage] = {entry.seq: entry.message for entry in entries}
    for index in range(start, len(events)):
        event = events[index]
        if event.type == INBOX_EVENT:
            message = message_of(event.data)
            if message is None:
                _log.warning("inbox entry at seq %d is malformed; not queued again", event.seq)
                continue
            queued[event.seq] = message
        elif event.type == TURN_COMPLETED_EVENT:
            seq = completed_entry(event.data)
            if seq is not None:
                queued.pop(seq, None)
    return [InboxEntry(seq, message) for seq, message in queued.items()]
