"""The future of gevent actors: settled from any thread, awaited in the caller's style."""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

import pykka

from actors._waiting import make_wake
from actors.gevent._hub import GeventHub, GeventRuntimeError, default_hub

__all__ = ["ExcInfo", "GeventFuture"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

T = TypeVar("T")

ExcInfo = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]


class GeventFuture(pykka.Future[T], Generic[T]):
    """A pykka future for greenlet actors; usable from any thread.

    ``get`` waits in the caller's style (see :mod:`actors.gevent`) and honours
    ``timeout`` (raising :class:`pykka.Timeout`); ``map``, ``join``, ``filter``,
    ``reduce`` and ``pykka.get_all`` work through pykka's get hooks. ``set`` and
    ``set_exception`` may be called from any thread and raise ``queue.Full``
    when the future is already settled. :meth:`add_done_callback` runs callbacks
    in a greenlet of the runtime's hub.
    """

    def __init__(self, runtime: GeventHub | None = None) -> None:
        super().__init__()
        self._runtime = runtime
        self._lock = threading.Lock()
        self._result: tuple[Any, ExcInfo | None] | None = None
        self._wakes: list[Any] = []
        self._callbacks: list[Callable[[GeventFuture[T]], None]] = []

    def __repr__(self) -> str:
        state = "pending" if self._result is None else "done"
        return f"<GeventFuture {state}>"

    def done(self) -> bool:
        """Whether a value or an exception was set."""
        return self._result is not None

    def get(self, *, timeout: float | None = None) -> T:
        """The value (or raise the exception); waits at most ``timeout`` seconds."""
        try:
            return super().get(timeout=timeout)
        except NotImplementedError:
            pass
        result = self._result
        if result is None:
            result = self._wait(timeout)
        value, exc_info = result
        if exc_info is not None:
            exc_type, exc_value, exc_traceback = exc_info
            assert exc_type is not None
            if exc_value is None:
                exc_value = exc_type()
            if exc_value.__traceback__ is not exc_traceback:
                raise exc_value.with_traceback(exc_traceback)
            raise exc_value
        return cast("T", value)

    def set(self, value: Any | None = None) -> None:
        """Settle with ``value``; wakes every waiter and schedules the callbacks."""
        self._settle((value, None))

    def set_exception(self, exc_info: ExcInfo | None = None) -> None:
        """Settle with an exception (``sys.exc_info()`` when not given)."""
        assert exc_info is None or len(exc_info) == 3
        self._settle((None, exc_info if exc_info is not None else sys.exc_info()))

    def set_get_hook(self, func: Callable[[float | None], T]) -> None:
        """Let ``get`` compute the value (used by ``map``, ``join``, ``filter``, ``reduce``)."""
        with self._lock:
            if self._result is not None:
                raise queue.Full
            super().set_get_hook(func)

    def add_done_callback(self, callback: Callable[[GeventFuture[T]], None]) -> None:
        """Call ``callback(self)`` once settled, in a greenlet of the runtime's hub."""
        runtime = self._runtime if self._runtime is not None else default_hub()
        if self._get_hook is not None:
            runtime.spawn(self._call_after_hook, callback)
            return
        with self._lock:
            if self._result is None:
                self._callbacks.append(callback)
                return
        runtime.spawn(callback, self)

    def _call_after_hook(self, callback: Callable[[GeventFuture[T]], None]) -> None:
        with contextlib.suppress(Exception):
            self.get()
        callback(self)

    def _settle(self, result: tuple[Any, ExcInfo | None]) -> None:
        with self._lock:
            if self._result is not None or self._get_hook is not None:
                raise queue.Full
            self._result = result
            wakes, self._wakes = self._wakes, []
            callbacks, self._callbacks = self._callbacks, []
        for wake in wakes:
            wake.wake()
        if callbacks:
            runtime = self._runtime if self._runtime is not None else default_hub()
            for callback in callbacks:
                try:
                    runtime.spawn(callback, self)
                except GeventRuntimeError:
                    _log.warning("a future callback was dropped: the gevent runtime is closed")

    def _wait(self, timeout: float | None) -> tuple[Any, ExcInfo | None]:
        runtime = self._runtime
        if runtime is not None:
            runtime.check_can_wait()
            if runtime.on_hub_thread():
                runtime = None  # a greenlet of the hub: it cannot outlive its hub anyway
        wake = make_wake()
        with self._lock:
            if self._result is None:
                self._wakes.append(wake)
            else:
                wake.wake()
        try:
            woken = wake.wait(timeout) if runtime is None else runtime._wait_watched(wake, timeout)
        finally:
            with self._lock:
                result = self._result
                if result is None:
                    with contextlib.suppress(ValueError):
                        self._wakes.remove(wake)
        if result is not None:
            return result
        if woken and runtime is not None:  # woken by the runtime: closed, or its hub stopped
            raise runtime._unusable_error()
        raise pykka.Timeout(f"{timeout} seconds")
