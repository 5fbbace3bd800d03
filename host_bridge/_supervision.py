"""Supervision of ScheduleOwners: restart with exponential back-off within a restart budget.

An unexpected exception contained by an owner stops its delivery
(:meth:`actors._supervised.OwnerSupervisor.owner_failed`). The plugin keeps
one :class:`OwnerSupervision` per owner: it decides with the plugin's
:class:`RestartPolicy` whether the owner restarts and, if so, tells it
:class:`~messages._mailbox.RestartOwner` after the back-off, timed on the host's
``timers``. Once the budget is spent the owner stays faulted. The owner restarts
in place (same actor, same mailbox), so two owners never run on one session.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pykka

from actors._contract import Cancellable, Timers
from messages._mailbox import RestartOwner

__all__ = ["OwnerSupervision", "RestartPolicy"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """When a failed owner restarts: exponential back-off within a restart budget.

    The k-th restart within the last ``window_ms`` (k = 0, 1, ...) waits
    ``min(first_delay_ms * 2**k, max_delay_ms)``; a failure after
    ``max_restarts`` restarts within ``window_ms`` is not restarted, and the
    owner stays faulted. The defaults allow 5 restarts per 10 minutes, after
    1, 2, 4, 8 and 16 seconds.
    """

    first_delay_ms: int = 1_000
    max_delay_ms: int = 60_000
    max_restarts: int = 5
    window_ms: int = 600_000

    def __post_init__(self) -> None:
        for name in ("first_delay_ms", "max_delay_ms", "max_restarts", "window_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"RestartPolicy.{name} must be a non-negative integer")
        if self.max_delay_ms < self.first_delay_ms:
            raise ValueError("RestartPolicy.max_delay_ms must not be below first_delay_ms")

    def next_delay(self, restarts: Iterable[int], now_ms: int) -> int | None:
        """The back-off before the next restart, or ``None`` when the budget is spent.

        ``restarts`` are the monotonic times (ms) of earlier restarts; only those
        within ``window_ms`` before ``now_ms`` count.
        """
        recent = sum(1 for at in restarts if now_ms - at < self.window_ms)
        if recent >= self.max_restarts:
            return None
        return min(self.first_delay_ms << min(recent, 62), self.max_delay_ms)


class OwnerSupervision:
    """The supervisor of one owner: its restart history and its pending restart.

    ``subject`` names the supervised actor in logs, ``restart`` makes the
    message that restarts it and ``stopped`` says what a spent budget means
    (the plugin's wake-up actor is supervised the same way).

    Implements :class:`actors._supervised.OwnerSupervisor`. ``owner_failed``
    runs on the owner's thread; :meth:`close` (at disposal) may run on any
    thread and cancels a pending restart.
    """

    def __init__(
        self,
        agent_id: str,
        policy: RestartPolicy,
        timers: Timers,
        monotonic: Callable[[], int],
        log: logging.Logger = _log,
        *,
        subject: str | None = None,
        restart: Callable[[], Any] = RestartOwner,
        stopped: str = "its delivery stays stopped, its tools keep answering",
    ) -> None:
        self._agent_id = agent_id
        self._subject = subject if subject is not None else f"schedule owner of agent {agent_id!r}"
        self._restart_message = restart
        self._stopped = stopped
        self._policy = policy
        self._timers = timers
        self._monotonic = monotonic
        self._log = log
        self._lock = threading.Lock()
        self._owner: pykka.ActorRef[Any] | None = None
        self._restarts: deque[int] = deque()
        self._pending: Cancellable | None = None
        self._closed = False

    def bind(self, owner: pykka.ActorRef[Any]) -> None:
        """Attach the supervised owner (it may fail only after this)."""
        with self._lock:
            self._owner = owner

    def owner_failed(self) -> int | None:
        """Schedule a restart after the policy's back-off; ``None`` if none is left."""
        with self._lock:
            owner = self._owner
            if self._closed or owner is None:
                return None
            now = self._monotonic()
            while self._restarts and now - self._restarts[0] >= self._policy.window_ms:
                self._restarts.popleft()
            delay = self._policy.next_delay(self._restarts, now)
            if delay is None:
                self._closed = True
                self._log.error(
                    "%s exhausted its restart budget (%d restarts within %d s); %s",
                    self._subject,
                    len(self._restarts),
                    self._policy.window_ms // 1000,
                    self._stopped,
                )
                return None
            try:
                message = self._restart_message
                self._pending = self._timers.call_later(delay, lambda: _restart(owner, message))
            except Exception:
                self._log.exception("the restart of the %s could not be armed", self._subject)
                return None
            self._restarts.append(now)
            return delay

    def close(self) -> None:
        """No more restarts; cancel a pending one (idempotent)."""
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, None
        if pending is not None:
            with contextlib.suppress(Exception):
                pending.cancel()


def _restart(owner: pykka.ActorRef[Any], message: Callable[[], Any]) -> None:
    with contextlib.suppress(pykka.ActorDeadError):
        owner.tell(message())
