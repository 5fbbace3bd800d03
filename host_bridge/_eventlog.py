"""An append-only event log with O(1) immutable snapshots.

The log keeps one growing list. A :class:`LogSnapshot` is a window
``[start, stop)`` onto that list; since committed entries are never replaced,
a window never changes after it was taken, so taking or slicing a snapshot
copies nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import overload

from actors._contract import SessionEvent, SessionHeader

__all__ = ["EventLog", "LogBackedSession", "LogSnapshot"]


class LogSnapshot(Sequence[SessionEvent]):
    """An immutable window onto an :class:`EventLog`."""

    __slots__ = ("_items", "_start", "_stop")

    def __init__(self, items: list[SessionEvent], start: int, stop: int) -> None:
        self._items = items
        self._start = start
        self._stop = stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...

    @overload
    def __getitem__(self, index: slice) -> LogSnapshot: ...

    def __getitem__(self, index: int | slice) -> SessionEvent | LogSnapshot:
        length = self._stop - self._start
        if isinstance(index, slice):
            start, stop, step = index.indices(length)
            if step != 1:
                # Index the window explicitly: with a negative step ``stop`` may be -1,
                # which as a list bound would wrap around to the end of the storage.
                picked = [self._items[self._start + i] for i in range(start, stop, step)]
                return LogSnapshot(picked, 0, len(picked))
            stop = max(start, stop)
            return LogSnapshot(self._items, self._start + start, self._start + stop)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("event index out of range")
        return self._items[self._start + index]

    def __iter__(self) -> Iterator[SessionEvent]:
        items = self._items
        for i in range(self._start, self._stop):
            yield items[i]

    def __repr__(self) -> str:
        return f"LogSnapshot(len={len(self)})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LogSnapshot | list | tuple):
            return len(self) == len(other) and all(
                a == b for a, b in zip(self, other, strict=False)
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class EventLog:
    """A thread-safe append-only list of :class:`SessionEvent` whose ``seq`` is its index."""

    def __init__(self, events: Sequence[SessionEvent] = ()) -> None:
        self._items: list[SessionEvent] = list(events)
        for i, event in enumerate(self._items):
            if event.seq != i:
                raise ValueError(f"event at index {i} has seq {event.seq}")
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def snapshot(self) -> LogSnapshot:
        """The whole log as it is now, as an immutable sequence."""
        return LogSnapshot(self._items, 0, len(self._items))

    def append(self, type_: str, time_ms: int, data: object) -> SessionEvent:
        """Append an event with the next ``seq`` and return it."""
        with self._lock:
            event = SessionEvent(type_, len(self._items), time_ms, data)
            self._items.append(event)
            return event


class LogBackedSession:
    """The read side every session kept in an :class:`EventLog` shares.

    Subclasses set ``_header``, ``_log`` and ``_detached`` and add ``append``.
    """

    _header: SessionHeader
    _log: EventLog
    _detached: bool

    @property
    def id(self) -> str:
        """The session id."""
        return self._header.id

    @property
    def header(self) -> SessionHeader:
        """The session header (``seed_length``/``parent_session`` set on forks)."""
        return self._header

    @property
    def events(self) -> LogSnapshot:
        """An immutable O(1) snapshot of the log."""
        return self._log.snapshot()

    @property
    def detached(self) -> bool:
        """Whether the session was detached."""
        return self._detached
