"""Wall clock, monotonic clock, clock-jump arithmetic and the default timer service.

The timer service runs every callback of the process on one shared scheduler
thread (a heap ordered by due time), not a thread per timer. Callbacks must be
short: Schedule's callbacks only post a message to an actor mailbox.

Timers run on the monotonic clock, so they do not notice when the wall clock
jumps or the machine is suspended (Linux's monotonic clock stands still during
a suspend while the wall clock moves on). Both show as a change of
``wall − monotonic``; :func:`clock_jump_ms` is that test, and
:class:`host_bridge._watchdog.ClockWatchdog` applies it on a coarse tick.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from actors._contract import monotonic_ms, wall_clock_ms

__all__ = [
    "DEFAULT_CLOCK_JUMP_TOLERANCE_MS",
    "ThreadTimers",
    "TimerHandle",
    "clock_jump_ms",
    "clock_offset_ms",
    "default_timers",
    "monotonic_ms",
    "wall_clock_ms",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

_COMPACT_MIN = 1024
"""Heap size from which cancelled entries are swept out when a timer is armed."""


def _cancelled_callback() -> None:
    """What a cancelled handle holds instead of its callback."""


DEFAULT_CLOCK_JUMP_TOLERANCE_MS = 250
"""How far ``wall − monotonic`` may move before it counts as a clock jump.

Far above sampling noise and NTP slewing (at most 0.5 ms per second); a smaller
jump can make a reminder at most this late.
"""


def clock_offset_ms(wall_ms: int, mono_ms: int) -> int:
    """``wall − monotonic``: constant while both clocks run, whatever the time.

    It changes when the wall clock is stepped (forward or back) and when the
    machine resumes from a suspend (the wall clock moved, the monotonic clock
    did not).
    """
    return wall_ms - mono_ms


def clock_jump_ms(baseline_ms: int, offset_ms: int, tolerance_ms: int) -> int:
    """How far the wall clock jumped against the monotonic clock since ``baseline_ms``.

    ``baseline_ms`` and ``offset_ms`` are two :func:`clock_offset_ms` values.
    Returns the signed jump (positive: the wall clock moved forward, or a
    suspend), or ``0`` when it is within ``tolerance_ms`` either way.
    """
    jump = offset_ms - baseline_ms
    return jump if abs(jump) > tolerance_ms else 0


@dataclass(eq=False)
class TimerHandle:
    """A cancellable handle to one armed callback of :class:`ThreadTimers`."""

    due: float
    callback: Callable[[], None]
    cancelled: bool = field(default=False)

    def cancel(self) -> None:
        """Stop the callback from running if it has not started; idempotent.

        The callback is dropped at once, so a cancelled far-future timer does not
        keep what it references alive until its due time.
        """
        self.cancelled = True
        self.callback = _cancelled_callback


class ThreadTimers:
    """A timer service backed by one daemon thread and a monotonic-clock heap.

    Delays are measured on the monotonic clock, so wall-clock jumps do not move
    an armed timer; callers that care about wall time re-read it when woken.
    """

    def __init__(self, name: str = "dsh-schedule-timers") -> None:
        self._name = name
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._counter = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._compact_at = _COMPACT_MIN

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once after ``delay_ms`` milliseconds (negative counts as 0)."""
        due = time.monotonic() + max(0, delay_ms) / 1000.0
        handle = TimerHandle(due, callback)
        with self._cond:
            if self._closed:
                raise RuntimeError("timer service is closed")
            if len(self._heap) >= self._compact_at:
                # Cancelled entries wait in the heap until their due time; sweep them
                # so re-armed far-future timers cannot pile up.
                self._heap = [entry for entry in self._heap if not entry[2].cancelled]
                heapq.heapify(self._heap)
                self._compact_at = max(_COMPACT_MIN, 2 * len(self._heap))
            heapq.heappush(self._heap, (due, next(self._counter), handle))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            if self._heap[0][2] is handle:  # only an earlier deadline changes the thread's wait
                self._cond.notify()
        return handle

    def pending(self) -> int:
        """How many armed, uncancelled callbacks are waiting."""
        with self._cond:
            return sum(1 for _, _, handle in self._heap if not handle.cancelled)

    def close(self) -> None:
        """Stop the scheduler thread; armed callbacks never run."""
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    while self._heap and self._heap[0][2].cancelled:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        _, _, handle = heapq.heappop(self._heap)
                        break
                    self._cond.wait(wait)
            if handle.cancelled:
                continue
            try:
                handle.callback()
            except Exception:
                _log.exception("timer callback failed")


_default: ThreadTimers | None = None
_default_lock = threading.Lock()


def default_timers() -> ThreadTimers:
    """The process-wide shared :class:`ThreadTimers`, created on first use."""
    global _default  # noqa: PLW0603 - a process-wide singleton by design
    with _default_lock:
        if _default is None:
            _default = ThreadTimers()
        return _default
