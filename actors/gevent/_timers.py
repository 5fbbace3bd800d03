"""Timers on a gevent hub: libev/libuv timers whose callbacks run in the hub itself."""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any

from actors.gevent._hub import GeventHub, GeventRuntimeError, default_hub

__all__ = ["GeventTimerHandle", "GeventTimers"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


def _noop() -> None:
    """A callback that does nothing (what a cancelled timer's callback becomes)."""


class GeventTimerHandle:
    """A cancellable timer of :class:`GeventTimers`."""

    __slots__ = ("_callback", "_delay", "_timers", "_watcher", "cancelled", "fired")

    def __init__(self, timers: GeventTimers, delay: float, callback: Callable[[], None]) -> None:
        self._timers = timers
        self._delay = delay
        self._callback: Callable[[], None] = callback
        self._watcher: Any = None
        self.cancelled = False
        self.fired = False

    def cancel(self) -> None:
        """Stop the callback from running if it has not started; idempotent, thread-safe."""
        if self.cancelled or self.fired:
            return
        self.cancelled = True
        self._callback = _noop  # drop what the callback references at once
        self._timers._forget(self)
        runtime = self._timers.runtime
        if runtime.on_hub_thread():
            self._disarm()
        else:
            with contextlib.suppress(GeventRuntimeError):  # a closed runtime fires nothing
                runtime.call_soon(self._disarm)

    def _arm(self) -> None:
        if self.cancelled:
            return
        loop = self._timers.runtime._loop
        loop.update_now()
        self._watcher = loop.timer(self._delay)
        self._watcher.start(self._fire)

    def _disarm(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
            watcher.close()

    def _fire(self) -> None:
        self._disarm()
        if self.cancelled:
            return
        self.fired = True
        self._timers._forget(self)
        callback, self._callback = self._callback, _noop
        try:
            callback()
        except Exception:
            _log.exception("timer callback failed")


class GeventTimers:
    """A ``Timers`` service on a gevent hub (libev/libuv timers; no thread per timer).

    ``call_later`` and ``cancel`` are thread-safe: off the hub thread they hop
    to the hub with :meth:`actors.gevent._hub.GeventHub.call_soon`. Delays are measured on the
    loop's monotonic clock. Callbacks run in the hub itself: like those of
    :class:`actors._clock.ThreadTimers` they must be short and must not
    block (Schedule's only post a message to a mailbox); a callback that tries
    to wait gets :class:`actors._waiting.BlockingInHubError`.
    """

    def __init__(self, runtime: GeventHub | None = None) -> None:
        self.runtime = runtime if runtime is not None else default_hub()
        self._lock = threading.Lock()
        self._live: dict[int, GeventTimerHandle] = {}
        self._ids = itertools.count()
        self._closed = False

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> GeventTimerHandle:
        """Run ``callback`` once after ``delay_ms`` milliseconds (negative counts as 0)."""
        handle = GeventTimerHandle(self, max(0, delay_ms) / 1000.0, callback)
        with self._lock:
            if self._closed:
                raise RuntimeError("timer service is closed")
            self._live[id(handle)] = handle
        if self.runtime.on_hub_thread():
            handle._arm()
        else:
            self.runtime.call_soon(handle._arm)
        return handle

    def pending(self) -> int:
        """How many armed, uncancelled callbacks are waiting."""
        with self._lock:
            return len(self._live)

    def close(self) -> None:
        """Cancel every armed callback; later ``call_later`` raises ``RuntimeError``."""
        with self._lock:
            self._closed = True
            handles = list(self._live.values())
        for handle in handles:
            handle.cancel()

    def _forget(self, handle: GeventTimerHandle) -> None:
        with self._lock:
            self._live.pop(id(handle), None)
