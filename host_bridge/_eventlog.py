"""An append-only event log with O(1) immutable snapshots.

The log keeps one growing list. A :class:`LogSnapshot` is a window
``[start, stop)`` onto that list; since committed entries are never replaced,
a window never changes after it was taken, so taking or slicing a snapshot
copies nothing.

A log may start at a ``base`` above 0: its list then holds only the events
from ``base`` on, and the earlier ones (durable, so immutable) are read on
demand from an :class:`EventHistory`, a page at a time (:class:`PagedHistory`),
and not kept. Its snapshots are full-length sequences all the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, overload

from actors._contract import SessionEvent, SessionHeader
from messages._fold import FoldedSchedules

__all__ = [
    "DEFAULT_PAGE_EVENTS",
    "EventHistory",
    "EventLog",
    "LogBackedSession",
    "LogSnapshot",
    "PagedHistory",
]

DEFAULT_PAGE_EVENTS = 256
"""Events a :class:`PagedHistory` reads at once."""


class EventHistory(Protocol):
    """Where a log's events below its base are read from (they never change)."""

    def event(self, index: int) -> SessionEvent:
        """The event at ``index`` (``0 <= index < base``)."""
        ...

    def iterate(self, start: int, stop: int) -> Iterator[SessionEvent]:
        """The events ``start … stop-1`` in order (``0 <= start <= stop <= base``)."""
        ...


class PagedHistory:
    """Reads the events ``0 … length-1`` of a log through ``read(start, stop)``, in pages.

    ``read`` returns the events ``start … stop-1`` in order (and raises when it
    cannot). Only the page read last by :meth:`event` is kept, so walking the
    history by index reads each page once and memory stays at one page however
    long the history; :meth:`iterate` keeps nothing. A read that returns
    anything but those events raises ``ValueError``.
    """

    def __init__(
        self,
        read: Callable[[int, int], Sequence[SessionEvent]],
        length: int,
        page: int = DEFAULT_PAGE_EVENTS,
    ) -> None:
        """History of ``length`` events read through ``read``, ``page`` events at a time."""
        if length < 0 or page < 1:
            raise ValueError("need length >= 0 and page >= 1")
        self._read = read
        self._length = length
        self._page = page
        self._kept: tuple[int, Sequence[SessionEvent]] | None = None
        self.reads = 0  # pages read so far (for tests and diagnostics)

    def __len__(self) -> int:
        return self._length

    def event(self, index: int) -> SessionEvent:
        """The event at ``index``, from the page kept or from a page read now."""
        kept = self._kept
        if kept is not None:
            start, events = kept
            if start <= index < start + len(events):
                return events[index - start]
        if not 0 <= index < self._length:
            raise IndexError("event index out of range")
        start = index - index % self._page
        events = self._checked(start, min(start + self._page, self._length))
        self._kept = (start, events)  # (one assignment: readers on other threads see either)
        return events[index - start]

    def iterate(self, start: int, stop: int) -> Iterator[SessionEvent]:
        """The events ``start … stop-1``, a page read at a time (none kept)."""
        if not 0 <= start <= stop <= self._length:
            raise IndexError("event range out of range")
        for first in range(start, stop, self._page):
            yield from self._checked(first, min(first + self._page, stop))

    def _checked(self, start: int, stop: int) -> Sequence[SessionEvent]:
        events = self._read(start, stop)
        self.reads += 1
        if len(events) != stop - start or any(
            event.seq != start + offset for offset, event in enumerate(events)
        ):
            raise ValueError(f"the history read of events {start}..{stop - 1} is not contiguous")
        return events


class LogSnapshot(Sequence[SessionEvent]):
    """An immutable window ``[start, stop)`` onto an :class:`EventLog`.

    Indices are the log's own (``start``/``stop`` absolute): those from ``base``
    on are in ``items`` (at ``index - base``), earlier ones come from ``history``.
    """

    __slots__ = ("_base", "_checkpoint", "_history", "_items", "_start", "_stop")

    def __init__(
        self,
        items: list[SessionEvent],
        start: int,
        stop: int,
        *,
        base: int = 0,
        history: EventHistory | None = None,
        checkpoint: FoldedSchedules | None = None,
    ) -> None:
        """A window onto ``items`` (the log from ``base`` on) and ``history`` (before it).

        ``checkpoint``: the log's schedule checkpoint, offered by a snapshot of the
        whole log only (see :attr:`schedule_checkpoint`).
        """
        if base and history is None:
            raise ValueError("a snapshot with a base needs a history")
        self._items = items
        self._start = start
        self._stop = stop
        self._base = base
        self._history = history
        self._checkpoint = checkpoint if start == 0 else None

    @property
    def schedule_checkpoint(self) -> FoldedSchedules | None:
        """The fold of a prefix of the log, as its session offers it (``None``: none).

        Lets a reader of a long bounded log (an append guard) fold only what follows.
        """
        return self._checkpoint

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
                picked = [self[i] for i in range(start, stop, step)]
                return LogSnapshot(picked, 0, len(picked))
            stop = max(start, stop)
            return LogSnapshot(
                self._items,
                self._start + start,
                self._start + stop,
                base=self._base,
                history=self._history,
            )
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("event index out of range")
        index += self._start
        if index >= self._base:
            return self._items[index - self._base]
        assert self._history is not None
        return self._history.event(index)

    def __iter__(self) -> Iterator[SessionEvent]:
        start, stop, base = self._start, self._stop, self._base
        if start < base:
            assert self._history is not None
            yield from self._history.iterate(start, min(stop, base))
            start = base
        items = self._items
        for i in range(start - base, stop - base):
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
    """A thread-safe append-only list of :class:`SessionEvent` whose ``seq`` is its index.

    With ``base`` > 0 the list holds only the events from ``base`` on (``events``
    must start at seq ``base``); the earlier ones are read from ``history``.
    """

    def __init__(
        self,
        events: Sequence[SessionEvent] = (),
        *,
        base: int = 0,
        history: EventHistory | None = None,
        checkpoint: FoldedSchedules | None = None,
    ) -> None:
        """A log holding ``events`` from seq ``base`` on, the ones before it in ``history``;
        ``checkpoint`` is the fold of a prefix of it, offered by its snapshots."""
        if base < 0 or (base and history is None):
            raise ValueError("a log with a base needs a history")
        self._items: list[SessionEvent] = list(events)
        for i, event in enumerate(self._items):
            if event.seq != base + i:
                raise ValueError(f"event at index {base + i} has seq {event.seq}")
        self._base = base
        self._history = history
        self._checkpoint = checkpoint
        self._lock = threading.Lock()

    @property
    def base(self) -> int:
        """The first seq held in memory (``0``: the whole log is)."""
        return self._base

    def __len__(self) -> int:
        return self._base + len(self._items)

    def snapshot(self) -> LogSnapshot:
        """The whole log as it is now, as an immutable sequence."""
        return LogSnapshot(
            self._items,
            0,
            self._base + len(self._items),
            base=self._base,
            history=self._history,
            checkpoint=self._checkpoint,
        )

    def append(self, type_: str, time_ms: int, data: object) -> SessionEvent:
        """Append an event with the next ``seq`` and return it."""
        with self._lock:
            event = SessionEvent(type_, self._base + len(self._items), time_ms, data)
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
