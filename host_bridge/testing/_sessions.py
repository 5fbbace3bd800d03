"""Fake sessions and a session store with a scriptable durability barrier."""

from __future__ import annotations

import builtins
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, replace
from typing import Any, Final, TypeAlias

from actors._contract import (
    AppendGuard,
    Session,
    SessionDetachedError,
    SessionEvent,
    SessionHeader,
    wall_clock_ms,
)
from host_bridge._eventlog import EventLog, LogBackedSession
from host_bridge.testing._journal import Journal

__all__ = [
    "PENDING",
    "FakeSession",
    "FakeSessionStore",
    "FlushOutcome",
    "FlushRecord",
    "Pending",
    "SessionDetachedError",
]


class Pending:
    """The type of :data:`PENDING`."""

    _instance: Pending | None = None

    def __new__(cls) -> Pending:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "PENDING"


PENDING: Final = Pending()
"""A flush outcome: the future stays pending until ``FakeSessionStore.release``."""

FlushOutcome: TypeAlias = bool | BaseException | type[BaseException] | Pending
"""``True``/``False`` resolve the flush future, an exception (instance or class)
fails it, :data:`PENDING` leaves it pending."""

ExceptionSpec: TypeAlias = BaseException | type[BaseException] | Callable[[], BaseException]
AppendPredicate: TypeAlias = Callable[[str, Any], bool]
FakeSessionGuard: TypeAlias = Callable[["FakeSession", str, Any], None]
"""A guard of one :class:`FakeSession`: called with (session, type, data); raising rejects."""
CreationGuard: TypeAlias = Callable[[SessionHeader, Sequence[SessionEvent]], None]


def _add_guard(lock: threading.Lock, guards: builtins.list[Any], guard: Any) -> Callable[[], None]:
    with lock:
        guards.append(guard)

    def remove() -> None:
        with lock:
            if guard in guards:
                guards.remove(guard)

    return remove


def _make_exception(spec: ExceptionSpec) -> BaseException:
    if isinstance(spec, BaseException):
        return spec
    return spec()


@dataclass
class _AppendFailure:
    spec: ExceptionSpec
    when: AppendPredicate | None
    times: int | None


def _seed(events: Iterable[SessionEvent | tuple[str, Any]]) -> list[SessionEvent]:
    seeded: list[SessionEvent] = []
    for index, item in enumerate(events):
        if isinstance(item, SessionEvent):
            seeded.append(item if item.seq == index else replace(item, seq=index))
        else:
            type_, data = item
            seeded.append(SessionEvent(type_, index, 0, data))
    return seeded


class FakeSession(LogBackedSession):
    """An in-memory ``Session`` backed by an :class:`~host_bridge._eventlog.EventLog`.

    ``seed_events`` pre-fill the log (``SessionEvent`` values or ``(type, data)``
    pairs; ``seq`` is renumbered to the index). ``seed_length`` and
    ``parent_session`` go into the header unchecked, so a test can build a
    broken fork on purpose. ``clock`` stamps appended events (wall clock by default).
    """

    def __init__(
        self,
        id: str,
        *,
        seed_events: Iterable[SessionEvent | tuple[str, Any]] = (),
        seed_length: int | None = None,
        parent_session: str | None = None,
        clock: Callable[[], int] | None = None,
        journal: Journal | None = None,
    ) -> None:
        self._header = SessionHeader(id, seed_length, parent_session)
        self._log = EventLog(_seed(seed_events))
        self._clock = clock if clock is not None else wall_clock_ms
        self.journal = journal
        self._lock = threading.RLock()
        self._failures: list[_AppendFailure] = []
        self._guards: list[FakeSessionGuard] = []
        self._detached = False

    def detach(self) -> None:
        """Mark the session detached: appends raise, flushes fail."""
        self._detached = True

    def fail_appends(
        self,
        exc: ExceptionSpec,
        *,
        when: AppendPredicate | None = None,
        times: int | None = None,
    ) -> None:
        """Make matching appends raise ``exc`` (an exception, class or factory).

        ``when(type, data)`` selects the appends (all by default); ``times``
        limits how many fail (forever by default). Rules are tried in the order
        they were added. A failed append appends nothing.
        """
        if times is not None and times < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self._failures.append(_AppendFailure(exc, when, times))

    def clear_append_failures(self) -> None:
        """Remove every rule added by :meth:`fail_appends`."""
        with self._lock:
            self._failures.clear()

    def add_append_guard(self, guard: FakeSessionGuard) -> Callable[[], None]:
        """Run ``guard(session, type, data)`` before each append; it raises to reject.

        Returns an idempotent remover.
        """
        with self._lock:
            self._guards.append(guard)

        def remove() -> None:
            with self._lock:
                if guard in self._guards:
                    self._guards.remove(guard)

        return remove

    def _injected_failure(self, type_: str, data: Any) -> BaseException | None:
        for rule in self._failures:
            if rule.when is not None and not rule.when(type_, data):
                continue
            if rule.times is not None:
                rule.times -= 1
                if rule.times == 0:
                    self._failures.remove(rule)
            return _make_exception(rule.spec)
        return None

    def append(self, type: str, data: Any) -> SessionEvent:
        """Commit one event synchronously; guards run first, then injected failures.

        Records ``("append", id, type, data)``, or ``("append-failed", id, type, data)``
        when the append raised.
        """
        with self._lock:
            try:
                if self._detached:
                    raise SessionDetachedError(f"session {self.id} is detached")
                for guard in list(self._guards):
                    guard(self, type, data)
                failure = self._injected_failure(type, data)
                if failure is not None:
                    raise failure
            except BaseException:
                if self.journal is not None:
                    self.journal.record("append-failed", self.id, type, data)
                raise
            event = self._log.append(type, self._clock(), data)
            if self.journal is not None:
                self.journal.record("append", self.id, type, data)
            return event

    def __repr__(self) -> str:
        return f"FakeSession({self.id!r}, events={len(self._log)})"


@dataclass
class FlushRecord:
    """One ``flush`` call: the session, its length at call time, and the future."""

    session_id: str
    length: int
    future: Future[bool]
    outcome: bool | BaseException | None = None
    """The final outcome once resolved (an exception instance for failures)."""


class FakeSessionStore:
    """A ``SessionStore`` whose flush outcomes a test scripts.

    ``flush`` takes the next outcome from :meth:`script` (FIFO), else
    :attr:`default_outcome` (``True``). Non-pending outcomes resolve the future
    synchronously in the caller's thread, so done-callbacks run at once. A
    detached session, or one not added to the store, gets a failed future
    (:class:`SessionDetachedError`) without consuming a scripted outcome.

    Journal: ``("flush", session_id)`` at call time, then
    ``("flush-resolved", session_id, outcome)`` where outcome is ``True``,
    ``False`` or the exception, just before the future resolves.

    Like the embedded store, it takes creation guards (run by :meth:`add`) and
    store-wide append guards, so an invariant companion can be installed on it.

    Scripted outcomes go to whichever flush comes next, and with Schedule
    installed that includes the start-up flush: a new root agent's owner drives
    once when it starts, and that drive's preflight flushes. Script after the
    owner has started (``FakeHost.spawn_root`` waits for it when the plugin was
    installed with ``FakeHost.install_schedule``; else ``settle`` the owner),
    or the start-up drive may consume the outcome meant for the next tool call.
    """

    def __init__(self, journal: Journal | None = None) -> None:
        self.journal = journal
        self.default_outcome: FlushOutcome = True
        self._lock = threading.Lock()
        self._sessions: dict[str, FakeSession] = {}
        self._script: deque[FlushOutcome] = deque()
        self._flushes: list[FlushRecord] = []
        self._pending: deque[FlushRecord] = deque()
        self._durable: dict[str, int] = {}
        self._creation_guards: list[CreationGuard] = []
        self._append_guards: list[AppendGuard] = []

    # -- the SessionStore protocol --------------------------------------------------

    def get(self, session_id: str) -> FakeSession | None:
        """The session added under this id, or None."""
        with self._lock:
            return self._sessions.get(session_id)

    def list(self) -> list[FakeSession]:
        """Every added session, in insertion order."""
        with self._lock:
            return list(self._sessions.values())

    def flush(self, session: Session) -> Future[bool]:
        """Start a durability barrier for ``session``; see the class docstring."""
        future: Future[bool] = Future()
        with self._lock:
            length = len(session.events)
            record = FlushRecord(session.id, length, future)
            self._flushes.append(record)
            if self.journal is not None:
                self.journal.record("flush", session.id)
            known = self._sessions.get(session.id) is session
            if not known or getattr(session, "detached", False):
                outcome: FlushOutcome = SessionDetachedError(
                    f"session {session.id} is detached or unknown"
                )
            else:
                outcome = self._script.popleft() if self._script else self.default_outcome
            if isinstance(outcome, Pending):
                self._pending.append(record)
                return future
        self._resolve(record, outcome)
        return future

    # -- scripting ----------------------------------------------------------------------

    def add(self, session: FakeSession) -> FakeSession:
        """Make ``session`` live in the store; returns it. Duplicate ids raise ValueError.

        Creation guards run first, with the session's header and events; one
        that raises refuses the session (the error propagates, nothing is added).
        """
        with self._lock:
            creation_guards = tuple(self._creation_guards)
        for guard in creation_guards:
            guard(session.header, session.events)
        with self._lock:
            if session.id in self._sessions:
                raise ValueError(f"session {session.id!r} already exists")
            self._sessions[session.id] = session
        session.add_append_guard(self._judge_append)
        return session

    def add_creation_guard(self, guard: CreationGuard) -> Callable[[], None]:
        """Run ``guard(header, events)`` in :meth:`add` before a session is added.

        Returns an idempotent remover.
        """
        return _add_guard(self._lock, self._creation_guards, guard)

    def add_append_guard(self, guard: AppendGuard) -> Callable[[], None]:
        """Run ``guard(header, events, type, data)`` before each append of every added session.

        It raises to reject (nothing is appended). Returns an idempotent remover.
        """
        return _add_guard(self._lock, self._append_guards, guard)

    def _judge_append(self, session: FakeSession, type_: str, data: Any) -> None:
        with self._lock:
            guards = tuple(self._append_guards)
        for guard in guards:
            guard(session.header, session.events, type_, data)

    def remove(self, session: FakeSession) -> None:
        """Forget ``session`` (later flushes of it fail as unknown)."""
        with self._lock:
            if self._sessions.get(session.id) is session:
                del self._sessions[session.id]

    def script(self, *outcomes: FlushOutcome) -> None:
        """Queue outcomes for the next flushes, consumed first in first out."""
        with self._lock:
            self._script.extend(outcomes)

    def scripted(self) -> builtins.list[FlushOutcome]:
        """The scripted outcomes not consumed yet."""
        with self._lock:
            return list(self._script)

    def pending(self) -> builtins.list[Future[bool]]:
        """The futures of flushes still waiting for :meth:`release`, oldest first."""
        with self._lock:
            return [record.future for record in self._pending]

    def release(self, outcome: FlushOutcome = True) -> Future[bool]:
        """Resolve the oldest pending flush with ``outcome``; returns its future."""
        if isinstance(outcome, Pending):
            raise ValueError("release needs a final outcome")
        with self._lock:
            if not self._pending:
                raise LookupError("no flush is pending")
            record = self._pending.popleft()
        self._resolve(record, outcome)
        return record.future

    def release_all(self, outcome: FlushOutcome = True) -> int:
        """Resolve every pending flush (oldest first) with ``outcome``; returns how many."""
        count = 0
        while True:
            with self._lock:
                if not self._pending:
                    return count
            self.release(outcome)
            count += 1

    # -- inspection ---------------------------------------------------------------------

    @property
    def flush_count(self) -> int:
        """How many times ``flush`` was called."""
        with self._lock:
            return len(self._flushes)

    @property
    def flushes(self) -> builtins.list[FlushRecord]:
        """Every flush call, oldest first."""
        with self._lock:
            return list(self._flushes)

    @property
    def flushed_lengths(self) -> builtins.list[int]:
        """For each flush call (oldest first), the session's event count at call time."""
        with self._lock:
            return [record.length for record in self._flushes]

    def durable_length(self, session: Session | str) -> int:
        """The longest prefix of the session's log covered by a flush that resolved True."""
        session_id = session if isinstance(session, str) else session.id
        with self._lock:
            return self._durable.get(session_id, 0)

    def _resolve(self, record: FlushRecord, outcome: FlushOutcome) -> None:
        final: bool | BaseException
        if isinstance(outcome, bool):
            final = outcome
        elif isinstance(outcome, Pending):
            raise ValueError("cannot resolve a flush with PENDING")
        else:
            final = _make_exception(outcome)
        with self._lock:
            record.outcome = final
            if final is True:
                previous = self._durable.get(record.session_id, 0)
                self._durable[record.session_id] = max(previous, record.length)
        if self.journal is not None:
            self.journal.record("flush-resolved", record.session_id, final)
        try:
            if isinstance(final, BaseException):
                record.future.set_exception(final)
            else:
                record.future.set_result(final)
        except InvalidStateError:
            pass  # the caller cancelled the future; nothing to deliver
