"""A fake agent whose turns run only when a test says so."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, Protocol

from actors._contract import Agent, AgentStatus, Session, UserMessage
from host_bridge.testing._journal import Journal

__all__ = ["FakeAgent", "StatusSink"]


class StatusSink(Protocol):
    """Where a :class:`FakeAgent` reports ``"running"``/``"idle"`` (a ``FakeAgentRegistry``)."""

    def notify_status(self, agent: Agent, status: AgentStatus) -> None:
        """Tell the status listeners that ``agent`` is now ``status``."""
        ...


_MAX_TURNS = 10_000


def _resolve(futures: list[Future[None]]) -> None:
    for future in futures:
        with contextlib.suppress(InvalidStateError):  # cancelled by its waiter
            future.set_result(None)


class FakeAgent:
    """An ``Agent`` whose turns run only when the test says so.

    State: :attr:`status` is ``"idle"`` or ``"running"``; :attr:`queued` holds
    follow-ups waiting for a turn, :attr:`received` every accepted follow-up, and
    :attr:`turns` the messages each turn took. The agent is *settled* when it is
    idle, not reserved and has nothing queued:

    * ``reserve_turn_admission()`` grants only when settled (a queued follow-up
      means "about to wake");
    * ``when_idle()`` resolves at once when settled, else the next time the agent
      becomes settled (after :meth:`end_turn` or a reservation's release);
      futures a waiter cancelled are skipped;
    * :meth:`run_queued_turns` does nothing while reserved, so a follow-up queued
      during a reservation starts its turn only after release.

    Journal entries: ``("followup", id, text)``, ``("followup-failed", id, text)``,
    ``("reserve", id, granted)``, ``("release", id)``, ``("when_idle", id)``,
    ``("turn-begin", id, message_count)``, ``("turn-end", id)``.
    """

    def __init__(
        self,
        id: str,
        session: Session,
        *,
        registry: StatusSink | None = None,
        journal: Journal | None = None,
    ) -> None:
        self._id = id
        self._session = session
        self.registry = registry
        self.journal = journal
        self._lock = threading.RLock()
        self._status: AgentStatus = "idle"
        self._queued: list[UserMessage] = []
        self._received: list[UserMessage] = []
        self._turns: list[tuple[UserMessage, ...]] = []
        self._reservation: object | None = None
        self._idle_waiters: list[Future[None]] = []
        self._hold_idle = False
        self._followup_failure: tuple[BaseException | type[BaseException], int | None] | None = None
        self.disposed = False
        self.release_count = 0
        self.reserve_calls = 0
        self.when_idle_calls = 0

    # -- the Agent protocol ---------------------------------------------------------

    @property
    def id(self) -> str:
        """The agent id."""
        return self._id

    @property
    def session(self) -> Session:
        """The agent's session."""
        return self._session

    def followup(self, message: UserMessage) -> None:
        """Queue ``message`` for a later turn, or raise an injected failure (nothing queued).

        A disposed agent raises ``RuntimeError``.
        """
        with self._lock:
            failure = self._take_followup_failure()
            if failure is None and self.disposed:
                failure = RuntimeError(f"agent {self._id} is disposed")
            if failure is not None:
                self._record("followup-failed", self._id, message.text)
                raise failure
            self._queued.append(message)
            self._received.append(message)
            self._record("followup", self._id, message.text)

    def reserve_turn_admission(self) -> Callable[[], None] | None:
        """Hold the agent idle; None when running, reserved, queued or disposed."""
        with self._lock:
            self.reserve_calls += 1
            granted = self._settled() and not self.disposed
            self._record("reserve", self._id, granted)
            if not granted:
                return None
            token = object()
            self._reservation = token

        def release() -> None:
            with self._lock:
                if self._reservation is not token:
                    return
                self._reservation = None
                self.release_count += 1
                self._record("release", self._id)
                ready = self._take_waiters_if_settled()
            _resolve(ready)

        return release

    def when_idle(self) -> Future[None]:
        """A future resolved once the agent is settled (at once if it is now)."""
        future: Future[None] = Future()
        with self._lock:
            self.when_idle_calls += 1
            self._record("when_idle", self._id)
            self._idle_waiters.append(future)
            ready = self._take_waiters_if_settled()
        _resolve(ready)
        return future

    # -- turn control for tests ---------------------------------------------------------

    def begin_turn(self) -> tuple[UserMessage, ...]:
        """Start a turn taking every queued message; notifies the registry ``"running"``.

        Raises ``RuntimeError`` when already running or reserved.
        """
        with self._lock:
            if self._status == "running":
                raise RuntimeError(f"agent {self._id} is already running")
            if self._reservation is not None:
                raise RuntimeError(f"agent {self._id} is reserved")
            self._status = "running"
            taken = tuple(self._queued)
            self._queued.clear()
            self._turns.append(taken)
            self._record("turn-begin", self._id, len(taken))
        self._notify("running")
        return taken

    def end_turn(self) -> None:
        """End the running turn: idle waiters resolve if settled; notifies ``"idle"``."""
        with self._lock:
            if self._status != "running":
                raise RuntimeError(f"agent {self._id} is not running")
            self._status = "idle"
            self._record("turn-end", self._id)
            ready = self._take_waiters_if_settled()
        _resolve(ready)
        self._notify("idle")

    def run_queued_turns(self) -> int:
        """Run turns (begin + end) while messages are queued and the agent is free.

        Does nothing while reserved or running. Returns how many turns ran.
        """
        count = 0
        while True:
            with self._lock:
                if not self._queued or self._reservation is not None or self._status != "idle":
                    return count
            self.begin_turn()
            self.end_turn()
            count += 1
            if count >= _MAX_TURNS:
                raise RuntimeError("follow-ups keep arriving; giving up")

    def hold_idle_forever(self, hold: bool = True) -> None:
        """While held, ``when_idle`` futures never resolve; un-holding resolves them if settled."""
        with self._lock:
            self._hold_idle = hold
            ready = self._take_waiters_if_settled()
        _resolve(ready)

    def fail_followups(
        self, exc: BaseException | type[BaseException], times: int | None = None
    ) -> None:
        """Make the next ``times`` follow-ups (all by default) raise ``exc`` (instance or class)."""
        with self._lock:
            self._followup_failure = (exc, times)

    def clear_followup_failures(self) -> None:
        """Stop injecting follow-up failures."""
        with self._lock:
            self._followup_failure = None

    # -- inspection ---------------------------------------------------------------------

    @property
    def status(self) -> AgentStatus:
        """``"idle"`` or ``"running"``."""
        with self._lock:
            return self._status

    @property
    def reserved(self) -> bool:
        """True while a reservation is held."""
        with self._lock:
            return self._reservation is not None

    @property
    def queued(self) -> list[UserMessage]:
        """Follow-ups waiting for a turn (a copy)."""
        with self._lock:
            return list(self._queued)

    @property
    def received(self) -> list[UserMessage]:
        """Every accepted follow-up, in order (a copy)."""
        with self._lock:
            return list(self._received)

    @property
    def turns(self) -> list[tuple[UserMessage, ...]]:
        """The messages each turn took, oldest turn first (a copy)."""
        with self._lock:
            return list(self._turns)

    @property
    def settled(self) -> bool:
        """Idle, not reserved, nothing queued: what ``when_idle`` waits for (not journalled)."""
        with self._lock:
            return self._settled()

    def idle_waiters(self) -> list[Future[None]]:
        """The ``when_idle`` futures not resolved yet (cancelled ones excluded)."""
        with self._lock:
            return [f for f in self._idle_waiters if not f.done()]

    # -- internals ------------------------------------------------------------------------

    def _settled(self) -> bool:
        return self._status == "idle" and self._reservation is None and not self._queued

    def _take_waiters_if_settled(self) -> list[Future[None]]:
        if self._hold_idle or not self._settled():
            return []
        ready, self._idle_waiters = self._idle_waiters, []
        return ready

    def _take_followup_failure(self) -> BaseException | None:
        if self._followup_failure is None:
            return None
        exc, times = self._followup_failure
        if times is not None:
            times -= 1
            self._followup_failure = (exc, times) if times > 0 else None
        return exc if isinstance(exc, BaseException) else exc()

    def _record(self, kind: str, *fields: Any) -> None:
        if self.journal is not None:
            self.journal.record(kind, *fields)

    def _notify(self, status: AgentStatus) -> None:
        registry = self.registry
        if registry is not None:
            registry.notify_status(self, status)

    def __repr__(self) -> str:
        return f"FakeAgent({self._id!r}, status={self.status!r})"
