"""Status boxes: where an actor publishes its status, readable and awaitable from any thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from actors._waiting import Wake, make_wake
from messages._status import OwnerStatus

__all__ = ["OwnerStatusBox", "StatusBox"]

S = TypeVar("S")


class StatusBox(Generic[S]):
    """Where an actor publishes its latest status; readable and awaitable from any thread.

    The actor publishes after every mailbox message it handles (on its own
    thread or greenlet); anyone may read :attr:`current` or wait for a status.
    Waiting follows the caller (:func:`actors._waiting.make_wake`): a greenlet on a
    gevent hub thread is suspended, not the hub, so waiting from an actor of the
    same hub cannot deadlock.
    """

    def __init__(self, initial: S, name: str) -> None:
        self._lock = threading.Lock()
        self._waiters: list[Wake] = []
        self._current = initial
        self._name = name

    @property
    def current(self) -> S:
        """The latest published status."""
        return self._current

    def publish(self, status: S) -> None:
        """Replace the status and wake every waiter (called by the actor).

        Waiters are woken even when ``status`` equals the current one: they may be
        waiting for something the status does not show (see
        :meth:`OwnerStatusBox.wait_quiet`). With nobody waiting, an equal status
        is not even stored.
        """
        with self._lock:
            if status == self._current and not self._waiters:
                return
            self._current = status
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.wake()

    def wait_for(self, predicate: Callable[[S], bool], timeout: float) -> S:
        """Block until a published status satisfies ``predicate``; ``TimeoutError`` otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                current = self._current
                if predicate(current):
                    return current
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self._name} status never matched; last: {current}")
                wake = make_wake()
                self._waiters.append(wake)
            if not wake.wait(remaining):
                with self._lock:
                    if wake in self._waiters:
                        self._waiters.remove(wake)


class OwnerStatusBox(StatusBox[OwnerStatus]):
    """Where an owner publishes its :class:`OwnerStatus`; :meth:`wait_quiet` waits for quiet."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(OwnerStatus(agent_id, "starting"), "owner")
        self._inbox_empty: Callable[[], bool] = lambda: True

    def watch_inbox(self, inbox_empty: Callable[[], bool]) -> None:
        """Tell the box how to see whether the owner's mailbox is empty (called by the owner)."""
        self._inbox_empty = inbox_empty

    def wait_quiet(self, timeout: float = 10.0) -> OwnerStatus:
        """Block until the owner has nothing in flight, nothing queued and an empty mailbox."""
        return self.wait_for(
            lambda s: s.state == "disposed" or (not s.busy and self._inbox_empty()), timeout
        )
