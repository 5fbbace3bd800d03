"""OwnerStatusBox: where an owner publishes its status, readable and awaitable from any thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from actors.waiting import Wake, make_wake
from messages.status import OwnerStatus

__all__ = ["OwnerStatusBox"]


class OwnerStatusBox:
    """Where an owner publishes its :class:`OwnerStatus`; readable and awaitable from any thread.

    The owner publishes after every mailbox message it handles (on its own
    thread or greenlet); anyone may read :attr:`current` or wait for a status.
    Waiting follows the caller (:func:`actors.waiting.make_wake`): a greenlet on a
    gevent hub thread is suspended, not the hub, so waiting from an actor of the
    same hub cannot deadlock.
    """

    def __init__(self, agent_id: str) -> None:
        self._lock = threading.Lock()
        self._waiters: list[Wake] = []
        self._current = OwnerStatus(agent_id, "starting")
        self._inbox_empty: Callable[[], bool] = lambda: True

    @property
    def current(self) -> OwnerStatus:
        """The latest published status."""
        return self._current

    def publish(self, status: OwnerStatus) -> None:
        """Replace the status and wake every waiter (called by the owner).

        Waiters are woken even when ``status`` equals the current one: they may be
        waiting for the owner's mailbox to drain (see :meth:`wait_quiet`). With
        nobody waiting, an equal status is not even stored.
        """
        with self._lock:
            if status == self._current and not self._waiters:
                return
            self._current = status
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.wake()

    def watch_inbox(self, inbox_empty: Callable[[], bool]) -> None:
        """Tell the box how to see whether the owner's mailbox is empty (called by the owner)."""
        self._inbox_empty = inbox_empty

    def wait_for(self, predicate: Callable[[OwnerStatus], bool], timeout: float) -> OwnerStatus:
        """Block until a published status satisfies ``predicate``; ``TimeoutError`` otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                current = self._current
                if predicate(current):
                    return current
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"owner status never matched; last: {current}")
                wake = make_wake()
                self._waiters.append(wake)
            if not wake.wait(remaining):
                with self._lock:
                    if wake in self._waiters:
                        self._waiters.remove(wake)

    def wait_quiet(self, timeout: float = 10.0) -> OwnerStatus:
        """Block until the owner has nothing in flight, nothing queued and an empty mailbox."""
        return self.wait_for(
            lambda s: s.state == "disposed" or (not s.busy and self._inbox_empty()), timeout
        )
