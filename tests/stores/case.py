"""The base of the store contract: one backend's location, its stores, and hand edits to it.

A backend's test class fills in three hooks: :meth:`StoreCase.new_location`
(a fresh, empty place for stores), :meth:`StoreCase.construct` (a store on it
with constructor options) and :meth:`StoreCase.sql` (a statement run behind
the stores' back, ``?`` marking parameters).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, ClassVar

import pytest

from host_bridge.embedded.codec import encode_payload
from host_bridge.protocols import SessionEvent, SessionHeader
from tests.stores.backends import Store

TIMEOUT = 20.0


class Seam:
    """A ``fault_hook``: pauses the writer inside its transaction and/or fails commits."""

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self._paused = False
        self.entered = threading.Event()
        self._resume = threading.Event()

    def pause(self) -> None:
        """Hold the writer's next transaction before COMMIT until :meth:`unpause`."""
        self.entered.clear()
        self._resume.clear()
        self._paused = True

    def unpause(self) -> None:
        """Let a held transaction go on, and hold no more."""
        self._paused = False
        self._resume.set()

    def __call__(self) -> None:
        self.calls += 1
        if self._paused:
            self.entered.set()
            if not self._resume.wait(TIMEOUT):
                raise TimeoutError("test seam was never released")
        if self.failures:
            self.failures -= 1
            raise OSError("injected disk failure")


def event(seq: int, data: Any = None, type_: str = "note") -> SessionEvent:
    """A note at ``seq`` (its data ``{"n": seq}`` unless given)."""
    return SessionEvent(type_, seq, 1_700_000_000_000 + seq, {"n": seq} if data is None else data)


def row(seq: int, data: Any = None) -> tuple[SessionEvent, bytes]:
    """:func:`event` with its encoded payload, as a seed or a unit takes it."""
    item = event(seq, data)
    return item, encode_payload(item.data)


def record(store: Store, session_id: str, seq: int, data: Any = None) -> SessionEvent:
    """Append :func:`event` to a session of ``store``; the event."""
    item = event(seq, data)
    store.record_append(session_id, item, encode_payload(item.data))
    return item


def new_session(store: Store, session_id: str, header: SessionHeader | None = None) -> None:
    """Take a session and create it (``header`` defaults to a plain one)."""
    store.acquire_session(session_id)
    store.create_session(header if header is not None else SessionHeader(session_id))


def ok(future: Future[bool]) -> None:
    """The flush resolved ``True`` in time."""
    assert future.result(TIMEOUT) is True


class StoreCase(ABC):
    """Fixtures and hooks shared by the contract classes; knows nothing of a backend."""

    #: The class :func:`open_store` picks for this backend's locations.
    store_class: ClassVar[type[Store]]
    #: The schema version this backend's stores write.
    schema_version: ClassVar[int]
    #: The backend's own name for a row another writer already took.
    conflict_category: ClassVar[str]
    #: Whether a flush with nothing queued asks the database for the session's lease.
    flush_confirms_lease: ClassVar[bool]
    #: How many of its two rows a store whose close stopped waiting for a stuck commit keeps.
    events_after_a_stuck_close: ClassVar[tuple[int, ...]]

    location: str
    opened: list[Store]

    @abstractmethod
    def new_location(self, request: pytest.FixtureRequest) -> str:
        """A fresh, empty place where this test's stores live."""

    @abstractmethod
    def construct(self, **options: Any) -> Store:
        """A store on :attr:`location` built with these constructor options."""

    @abstractmethod
    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement on :attr:`location` behind the stores' back; its rows."""

    @pytest.fixture(autouse=True)
    def _backend(self, request: pytest.FixtureRequest) -> Iterator[None]:
        self.location = self.new_location(request)
        self.opened = []
        yield
        for store in self.opened:
            if not store.closed:
                store.close()

    def make(self, **options: Any) -> Store:
        """A store on this test's location, closed at teardown."""
        store = self.construct(**options)
        self.opened.append(store)
        return store

    def make_with_writer(self, **options: Any) -> tuple[Store, Callable[[], None]]:
        """:meth:`make`, and a call that waits until every thread that store started has ended."""
        before = set(threading.enumerate())
        store = self.make(**options)
        mine = set(threading.enumerate()) - before
        assert mine  # the writer at least

        def join() -> None:
            for thread in mine:
                thread.join(TIMEOUT)
                assert not thread.is_alive()

        return store, join

    def foreign_event(self, session_id: str, seq: int) -> None:
        """Store an event row directly, as a writer that takes no lock or lease would."""
        self.sql(
            "INSERT INTO events(session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
            session_id,
            seq,
            "note",
            1,
            encode_payload({"foreign": seq}),
        )

    def durable_counts(self) -> tuple[int, int]:
        """How many session rows and event rows are committed."""
        ((sessions,),) = self.sql("SELECT COUNT(*) FROM sessions")
        ((events,),) = self.sql("SELECT COUNT(*) FROM events")
        return int(sessions), int(events)
