"""Waiting in the caller's style: block a thread, or suspend only a greenlet.

A leaf of the actors package (it imports nothing of this project): both
runtimes and the actors wait through it. On a thread that runs a gevent hub,
:func:`make_wake`, :func:`wait_for` and :func:`run_blocking` suspend only the
calling greenlet (the hub keeps running other actors), and blocking calls run
in offload threads; anywhere else they block the calling thread. gevent is
imported only when a hub already exists, so the threading path stays free of
it; the hub greenlet itself may not wait (:class:`BlockingInHubError`).
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar, cast

__all__ = [
    "OFFLOAD_THREADS",
    "BlockingInHubError",
    "Wake",
    "current_hub",
    "greenlet_wake",
    "make_wake",
    "offload",
    "run_blocking",
    "wait_for",
]

T = TypeVar("T")


class BlockingInHubError(RuntimeError):
    """A blocking wait was attempted in a gevent hub greenlet (a loop callback).

    The hub cannot suspend itself: waiting there would stop every greenlet of
    the thread, so it is refused with this error instead of hanging.
    """


# --- waiting in the caller's style ------------------------------------------------------


def current_hub() -> Any | None:
    """The gevent hub of the calling thread, or None (also when gevent is not loaded).

    Never creates a hub and never imports gevent on its own.
    """
    if "gevent" not in sys.modules:
        return None
    from gevent._hub_local import get_hub_if_exists

    return get_hub_if_exists()


class Wake(Protocol):
    """A one-shot wake-up: :meth:`wait` in the caller's context, :meth:`wake` from anywhere."""

    def wake(self) -> None:
        """Wake the waiter (idempotent; thread-safe; fine before or after :meth:`wait`)."""
        ...

    def wait(self, timeout: float | None) -> bool:
        """Wait until woken; False on timeout. Call once, from the thread that made it."""
        ...


class _ThreadWake:
    """Blocks the calling OS thread."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def wake(self) -> None:
        self._event.set()

    def wait(self, timeout: float | None) -> bool:
        return self._event.wait(timeout)


def make_wake() -> Wake:
    """A :class:`Wake` for the calling context.

    On a thread that runs a gevent hub it suspends only the calling greenlet;
    raises :class:`BlockingInHubError` in the hub greenlet itself.
    """
    hub = current_hub()
    if hub is None:
        return _ThreadWake()
    return greenlet_wake(hub)


def wait_for(future: Future[T], timeout: float | None = None) -> T:
    """The result of a ``concurrent.futures.Future``, waited for in the caller's style.

    A done future returns at once (anywhere). Otherwise, on a gevent hub thread
    only the calling greenlet waits, so an actor on the same hub can resolve the
    future; elsewhere this is ``future.result(timeout)``. Raises ``TimeoutError``
    on timeout and :class:`BlockingInHubError` in a hub greenlet.
    """
    if future.done():
        return future.result()
    if current_hub() is None:
        return future.result(timeout)
    wake = make_wake()
    future.add_done_callback(lambda _: wake.wake())
    if not wake.wait(timeout):
        raise TimeoutError(f"the future did not resolve within {timeout} seconds")
    return future.result(0)


def run_blocking(function: Callable[..., T], *args: Any) -> T:
    """Call ``function(*args)``, off the hub when the caller runs on a gevent hub thread.

    On a hub thread the call runs in an offload thread while only the
    calling greenlet waits (so a SQLite commit or read never stalls the hub);
    anywhere else it runs directly. Raises :class:`BlockingInHubError` in a hub
    greenlet.
    """
    hub = current_hub()
    if hub is None:
        return function(*args)
    return offload(hub, function, *args)


# --- waiting in a greenlet ------------------------------------------------------------------


class _GreenletWake:
    """Suspends the calling greenlet; woken from any thread through an async watcher."""

    __slots__ = ("_closed", "_lock", "_waiter", "_watcher")

    def __init__(self, hub: Any) -> None:
        import gevent.hub

        self._waiter = gevent.hub.Waiter(hub)
        self._watcher = hub.loop.async_()
        self._watcher.start(self._waiter.switch, None)  # started now: no send can be lost
        self._lock = threading.Lock()
        self._closed = False

    def wake(self) -> None:
        with self._lock:
            if not self._closed:
                try:
                    self._watcher.send()
                except ValueError:  # its hub was destroyed with this greenlet still waiting
                    self._closed = True

    def wait(self, timeout: float | None) -> bool:
        import gevent

        timer = None
        if timeout is not None:
            timer = gevent.Timeout(max(0.0, timeout))
            timer.start()
        try:
            self._waiter.get()
            return True
        except gevent.Timeout as raised:
            if raised is not timer:
                raise
            return False
        finally:
            if timer is not None:
                timer.close()
            self.discard()

    def discard(self) -> None:
        """On the hub thread: release the watcher (later wakes do nothing); idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._watcher.stop()
                self._watcher.close()


def greenlet_wake(hub: Any) -> _GreenletWake:
    """A wake-up for the current greenlet of ``hub``'s thread (not the hub greenlet)."""
    if _getcurrent() is hub:
        raise BlockingInHubError(
            "cannot wait inside the gevent hub (a loop or timer callback): it would stop "
            "every greenlet of this thread; wait from a greenlet or another thread instead"
        )
    return _GreenletWake(hub)


def offload(hub: Any, function: Callable[..., T], *args: Any) -> T:
    """Run ``function(*args)`` in an offload thread; only the calling greenlet of ``hub`` waits.

    The offload threads are plain daemon threads shared by every hub (at most
    :data:`OFFLOAD_THREADS`; they start on demand and never retire). Unlike
    gevent's own thread pool, whose retiring workers reach the hub with
    ``run_callback_threadsafe`` (see :meth:`actors.gevent._hub.GeventHub._post_locked`), they
    reach the waiting greenlet only through its async watcher.
    """
    if _getcurrent() is hub:
        raise BlockingInHubError(
            "cannot run blocking work from inside the gevent hub (a loop or timer callback)"
        )
    wake = _GreenletWake(hub)
    outcome: list[tuple[bool, Any]] = []

    def task() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as error:
            outcome.append((False, error))
        finally:
            wake.wake()

    try:
        _offloader.submit(task)
    except BaseException:
        wake.discard()
        raise
    wake.wait(None)
    done, value = outcome.pop()
    if not done:
        raise value
    return cast("T", value)


OFFLOAD_THREADS = 10
"""How many offload threads run blocking calls for greenlets (:func:`offload`) at most."""


class _Offloader:
    """Daemon threads that run the blocking calls greenlets hand over; they never retire."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._threads = 0
        self._idle = 0  # threads free for a new task (each submit reserves one)

    def submit(self, task: Callable[[], None]) -> None:
        """Run ``task`` in an offload thread (starting one if none is free); never blocks long."""
        with self._lock:
            grow = self._idle == 0 and self._threads < self._size
            if grow:
                self._threads += 1
                number = self._threads
            elif self._idle > 0:
                self._idle -= 1
        if grow:
            try:
                threading.Thread(
                    target=self._serve, name=f"dsh-gevent-offload-{number}", daemon=True
                ).start()
            except BaseException:
                with self._lock:
                    self._threads -= 1
                raise
        self._tasks.put(task)

    def _serve(self) -> None:
        while True:
            task = self._tasks.get()
            task()  # never raises: offload's task keeps its outcome
            del task
            with self._lock:
                self._idle += 1


_offloader = _Offloader(OFFLOAD_THREADS)


def _getcurrent() -> Any:
    """The current greenlet (gevent is loaded whenever a hub exists)."""
    import gevent

    return gevent.getcurrent()
