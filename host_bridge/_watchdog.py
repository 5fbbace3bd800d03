"""ClockWatchdog: notices wall-clock steps and suspend/resume while timers sleep.

Timers run on the monotonic clock, so an armed timer neither fires early when
the wall clock is set back nor wakes when it is set forward, and on Linux the
monotonic clock stands still while the machine is suspended. The watchdog
reads the plugin's :class:`~host_bridge._steady_clock.SteadyClock` every tick
(on the host's ``timers``), which also confirms a forward step once it held,
and reports every step the clock took since the last report to its listener,
which re-drives the owners whose timers were armed from the old reading. The
plugin runs one watchdog while it has at least one owner.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from actors._contract import Cancellable, Timers
from host_bridge._steady_clock import SteadyClock, SteadyState

__all__ = ["ClockWatchdog"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


class ClockWatchdog:
    """Read ``clock`` every ``tick_ms`` and report the steps it took to ``on_jump``.

    :meth:`start` and :meth:`stop` may be called from any thread and are
    idempotent. Ticks run where ``timers`` run their callbacks (a timer thread,
    a gevent hub, or the test thread that advances :class:`FakeTimers`);
    ``on_jump(jump_ms)`` is called there, outside the watchdog's lock, and must
    only post messages. ``jump_ms`` is how far the clock's confirmed offset
    moved since start or the last report (a step back at once, a step forward
    once it held for the clock's confirmation interval; slow drift that adds
    up beyond the tolerance counts too). A clock that raises skips a tick.
    """

    def __init__(
        self,
        clock: SteadyClock,
        timers: Timers,
        tick_ms: int,
        on_jump: Callable[[int], None],
        *,
        log: logging.Logger = _log,
    ) -> None:
        if isinstance(tick_ms, bool) or not isinstance(tick_ms, int) or tick_ms <= 0:
            raise ValueError("the clock watchdog's tick must be a positive number of milliseconds")
        self._clock = clock
        self._timers = timers
        self._tick_ms = tick_ms
        self._on_jump = on_jump
        self._log = log
        self._lock = threading.Lock()
        self._handle: Cancellable | None = None
        self._generation = 0
        self._seen = SteadyState()
        self._jumps = 0
        self._read_failed = False

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
        """Take the clock's state as the baseline and arm the first tick (no-op while running)."""
        with self._lock:
            if self._handle is not None:
                return
            self._generation += 1
            self._seen = self._read()
            self._arm()

    def stop(self) -> None:
        """Cancel the armed tick; a tick already running reports nothing more."""
        with self._lock:
            handle, self._handle = self._handle, None
            self._generation += 1
        if handle is not None:
            try:
                handle.cancel()
            except Exception:  # a host's Cancellable may raise anything; stopping goes on
                self._log.warning("the clock watchdog's tick could not be cancelled")

    def _arm(self) -> None:
        generation = self._generation
        try:
            self._handle = self._timers.call_later(self._tick_ms, lambda: self._tick(generation))
        except Exception:  # a host's Timers may raise anything; the watchdog stops
            self._handle = None
            self._log.warning("the clock watchdog could not arm its tick; it stopped")

    def _tick(self, generation: int) -> None:
        jump: int | None = None
        with self._lock:
            if generation != self._generation or self._handle is None:
                return
            state = self._read()
            seen, self._seen = self._seen, state
            if state.steps != seen.steps and seen.offset is not None:
                assert state.offset is not None
                jump = state.offset - seen.offset
                self._jumps += 1
            self._arm()
        if jump is not None:
            self._log.info(
                "the wall clock moved %+d ms against the monotonic clock (a clock step or a "
                "suspend); re-driving armed reminders",
                jump,
            )
            try:
                self._on_jump(jump)
            except Exception:  # the listener is the plugin's; a failure must not stop the ticks
                self._log.exception("a clock-jump listener failed")

    def _read(self) -> SteadyState:
        """Read the clock (so a held step is confirmed) and return its state."""
        try:
            self._clock()
        except Exception:  # a host's clock may raise anything: this tick reads nothing
            if not self._read_failed:
                self._read_failed = True
                self._log.warning("the clock watchdog could not read the clocks; tick skipped")
        return self._clock.state
