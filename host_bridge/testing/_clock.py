"""A controllable wall clock and a timer service driven by it.

:class:`FakeClock` keeps two counters:

* the **wall clock** (epoch ms) returned by calling the clock — what a host's
  ``HostContext.clock`` reports; :meth:`FakeClock.set` may jump it forward or back;
* a **monotonic elapsed** counter, moved only by :meth:`FakeClock.advance`
  (and :meth:`FakeTimers.advance`, which uses it); :meth:`FakeClock.monotonic`
  reads it and can be passed as ``HostContext.monotonic``.

:meth:`FakeClock.suspend` models a machine that sleeps: the wall clock moves,
the monotonic counter does not (as Linux's monotonic clock during a suspend),
and no timer fires.

:class:`FakeTimers` measures due points on the monotonic counter, like a real
timer service: a wall-clock jump (``set``) never fires or delays an armed timer,
so code under test must re-read the wall clock when it wakes.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from host_bridge.testing._journal import Journal

__all__ = ["DEFAULT_START_MS", "FakeClock", "FakeTimerHandle", "FakeTimers"]

DEFAULT_START_MS = 1_767_225_600_000
"""``2026-01-01T00:00:00.000Z``: the default start of a :class:`FakeClock`."""

_MAX_FIRES_PER_CALL = 100_000


class FakeClock:
    """A wall clock in epoch milliseconds that only moves when told to.

    Call the instance (or :meth:`now`) to read it, so it can be passed as
    ``HostContext.clock``.
    """

    def __init__(self, start_ms: int = DEFAULT_START_MS) -> None:
        self._lock = threading.Lock()
        self._wall = start_ms
        self._elapsed = 0

    def __call__(self) -> int:
        """The wall clock (epoch ms)."""
        return self.now()

    def now(self) -> int:
        """The wall clock (epoch ms)."""
        with self._lock:
            return self._wall

    def monotonic(self) -> int:
        """Milliseconds of elapsed time since creation (moved only by ``advance``)."""
        with self._lock:
            return self._elapsed

    def set(self, ms: int) -> None:
        """Jump the wall clock to ``ms`` (forward or back); elapsed time is unchanged."""
        with self._lock:
            self._wall = ms

    def suspend(self, ms: int) -> None:
        """The machine sleeps for ``ms``: the wall clock moves on, elapsed time stands still.

        No timer fires (the monotonic clock timers run on did not move); after
        "resume", timers are as late as the sleep was long. For the clock alone
        this is a forward :meth:`set`; the name says what a test models.
        """
        if ms < 0:
            raise ValueError("a suspend lasts a non-negative time")
        with self._lock:
            self._wall += ms

    def advance(self, ms: int) -> None:
        """Let ``ms`` milliseconds pass: moves the wall clock and elapsed time.

        This fires no timer; use :meth:`FakeTimers.advance` (or call
        :meth:`FakeTimers.fire_due` afterwards) for that.
        """
        if ms < 0:
            raise ValueError("time cannot pass backwards; use set() for a wall-clock jump")
        with self._lock:
            self._wall += ms
            self._elapsed += ms

    def _advance_elapsed_to(self, elapsed: int) -> None:
        with self._lock:
            if elapsed > self._elapsed:
                self._wall += elapsed - self._elapsed
                self._elapsed = elapsed

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now()}, elapsed={self.monotonic()})"


@dataclass(eq=False)
class FakeTimerHandle:
    """An armed callback of :class:`FakeTimers`; implements ``Cancellable``."""

    delay_ms: int
    due: int
    callback: Callable[[], None]
    _owner: FakeTimers = field(repr=False)
    cancelled: bool = False
    fired: bool = False

    def cancel(self) -> None:
        """Stop the callback from running if it has not run; idempotent."""
        self._owner._cancel(self)

    @property
    def live(self) -> bool:
        """Neither fired nor cancelled."""
        return not (self.cancelled or self.fired)


class FakeTimers:
    """A ``Timers`` implementation whose callbacks run only when a test moves time.

    A timer armed with ``call_later(d, cb)`` is due at ``clock.monotonic() + d``
    (negative delays count as 0). Callbacks run synchronously in the thread that
    calls :meth:`advance`, :meth:`fire_due` or :meth:`run_next`, in due order
    (ties in arm order), with the clock set to the timer's due point. An exception
    raised by a callback propagates to that caller; the clock then stays at that
    timer's due point and the remaining timers stay armed.
    """

    def __init__(self, clock: FakeClock, journal: Journal | None = None) -> None:
        self.clock = clock
        self.journal = journal
        self._lock = threading.Lock()
        self._heap: list[tuple[int, int, FakeTimerHandle]] = []
        self._seq = itertools.count()

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> FakeTimerHandle:
        """Arm ``callback`` to run once ``delay_ms`` ms of elapsed time from now."""
        with self._lock:
            due = self.clock.monotonic() + max(0, delay_ms)
            handle = FakeTimerHandle(delay_ms, due, callback, self)
            heapq.heappush(self._heap, (due, next(self._seq), handle))
            if self.journal is not None:
                self.journal.record("timer-armed", delay_ms)
        return handle

    def _cancel(self, handle: FakeTimerHandle) -> None:
        with self._lock:
            if not handle.live:
                return
            handle.cancelled = True
            if self.journal is not None:
                self.journal.record("timer-cancelled")

    def _pop_due(self, limit: int | None) -> FakeTimerHandle | None:
        """Take the earliest live timer (due at or before ``limit`` unless None)."""
        with self._lock:
            while self._heap:
                due, _, handle = self._heap[0]
                if not handle.live:
                    heapq.heappop(self._heap)
                    continue
                if limit is not None and due > limit:
                    return None
                heapq.heappop(self._heap)
                handle.fired = True
                if self.journal is not None:
                    self.journal.record("timer-fired")
                return handle
            return None

    def _fire_until(self, limit: int | None, *, once: bool = False) -> int:
        fired = 0
        while True:
            handle = self._pop_due(limit)
            if handle is None:
                return fired
            self.clock._advance_elapsed_to(handle.due)
            fired += 1
            handle.callback()
            if once:
                return fired
            if fired >= _MAX_FIRES_PER_CALL:
                raise RuntimeError("timers keep re-arming within the window; giving up")

    def advance(self, ms: int) -> int:
        """Let ``ms`` ms pass, firing every timer that falls due; returns how many fired.

        Timers armed by callbacks during the advance fire too if they fall due
        within the window. Afterwards the clock has moved exactly ``ms``.
        """
        if ms < 0:
            raise ValueError("time cannot pass backwards; use clock.set() for a wall-clock jump")
        target = self.clock.monotonic() + ms
        fired = self._fire_until(target)
        self.clock._advance_elapsed_to(target)
        return fired

    def fire_due(self) -> int:
        """Fire every timer due at the current elapsed time (e.g. after ``clock.advance``)."""
        return self._fire_until(self.clock.monotonic())

    def run_next(self) -> bool:
        """Fire the earliest live timer whatever its due point, moving the clock to it.

        Returns False when no timer is armed.
        """
        return self._fire_until(None, once=True) == 1

    def armed(self) -> list[int]:
        """Remaining delays (ms) of the live timers, earliest first."""
        with self._lock:
            now = self.clock.monotonic()
            return [max(0, due - now) for due, _, handle in sorted(self._heap) if handle.live]

    def pending_count(self) -> int:
        """How many timers are armed and neither fired nor cancelled."""
        with self._lock:
            return sum(1 for _, _, handle in self._heap if handle.live)

    def handles(self) -> list[FakeTimerHandle]:
        """The live timer handles, earliest first."""
        with self._lock:
            return [handle for _, _, handle in sorted(self._heap) if handle.live]
