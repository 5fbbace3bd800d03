"""ClockWatchdog: notices wall-clock jumps and suspend/resume while timers sleep.

Timers run on the monotonic clock, so an armed timer neither fires early when
the wall clock is set back nor wakes when it is set forward, and on Linux the
monotonic clock stands still while the machine is suspended. The watchdog
samples ``wall − monotonic`` every tick (on the host's ``timers``) and reports
a change beyond the tolerance (:func:`host_bridge.clock.clock_jump_ms`) to its
listener, which re-drives the owners whose timers were armed from the old
reading. The plugin runs one watchdog while it has at least one owner.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from host_bridge.clock import DEFAULT_CLOCK_JUMP_TOLERANCE_MS, clock_jump_ms, clock_offset_ms
from host_bridge.protocols import Cancellable, Timers

__all__ = ["ClockWatchdog"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


class ClockWatchdog:
    """Compare ``clock()`` with ``monotonic()`` every ``tick_ms`` and report jumps to ``on_jump``.

    :meth:`start` and :meth:`stop` may be called from any thread and are
    idempotent. Ticks run where ``timers`` run their callbacks (a timer thread,
    a gevent hub, or the test thread that advances :class:`FakeTimers`);
    ``on_jump(jump_ms)`` is called there, outside the watchdog's lock, and must
    only post messages. A jump is measured against the offset at start or at
    the last reported jump, so slow drift that adds up beyond the tolerance is
    reported once too. A clock that raises, or a sample whose two monotonic
    readings lie far apart (the thread was preempted between them), is skipped.
    """

    def __init__(
        self,
        clock: Callable[[], int],
        monotonic: Callable[[], int],
        timers: Timers,
        tick_ms: int,
        on_jump: Callable[[int], None],
        *,
        tolerance_ms: int = DEFAULT_CLOCK_JUMP_TOLERANCE_MS,
        log: logging.Logger = _log,
    ) -> None:
        if isinstance(tick_ms, bool) or not isinstance(tick_ms, int) or tick_ms <= 0:
            raise ValueError("the clock watchdog's tick must be a positive number of milliseconds")
        self._clock = clock
        self._monotonic = monotonic
        self._timers = timers
        self._tick_ms = tick_ms
        self._on_jump = on_jump
        self._tolerance_ms = tolerance_ms
        self._log = log
        self._lock = threading.Lock()
        self._handle: Cancellable | None = None
        self._generation = 0
        self._baseline: int | None = None
        self._jumps = 0
        self._sample_failed = False

    @property
    def running(self) -> bool:
        """A tick is armed."""
        with self._lock:
            return self._handle is not None

    @property
    def jumps(self) -> int:
        """How many jumps were reported since creation."""
        with self._lock:
            return self._jumps

    def start(self) -> None:
        """Take the baseline and arm the first tick (no-op while running)."""
        with self._lock:
            if self._handle is not None:
                return
            self._generation += 1
            self._baseline = self._sample()
            self._arm()

    def stop(self) -> None:
        """Cancel the armed tick; a tick already running reports nothing more."""
        with self._lock:
            handle, self._handle = self._handle, None
            self._generation += 1
        if handle is not None:
            try:
                handle.cancel()
            except Exception:
                self._log.warning("the clock watchdog's tick could not be cancelled")

    def _arm(self) -> None:
        generation = self._generation
        try:
            self._handle = self._timers.call_later(self._tick_ms, lambda: self._tick(generation))
        except Exception:
            self._handle = None
            self._log.warning("the clock watchdog could not arm its tick; it stopped")

    def _tick(self, generation: int) -> None:
        jump = 0
        with self._lock:
            if generation != self._generation or self._handle is None:
                return
            offset = self._sample()
            if offset is not None:
                if self._baseline is None:
                    self._baseline = offset
                else:
                    jump = clock_jump_ms(self._baseline, offset, self._tolerance_ms)
                    if jump:
                        self._baseline = offset
                        self._jumps += 1
            self._arm()
        if jump:
            self._log.info(
                "the wall clock moved %+d ms against the monotonic clock (a clock jump or a "
                "suspend); re-driving armed reminders",
                jump,
            )
            try:
                self._on_jump(jump)
            except Exception:
                self._log.exception("a clock-jump listener failed")

    def _sample(self) -> int | None:
        """``wall − monotonic`` now, or None when the clocks cannot be read reliably."""
        try:
            before = self._monotonic()
            wall = self._clock()
            after = self._monotonic()
            spread = after - before
            offset = int(clock_offset_ms(wall, (before + after) // 2))
        except Exception:
            if not self._sample_failed:
                self._sample_failed = True
                self._log.warning("the clock watchdog could not read the clocks; tick skipped")
            return None
        if spread > self._tolerance_ms // 2:
            return None
        return offset
