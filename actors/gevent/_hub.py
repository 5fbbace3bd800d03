"""The hub of a gevent runtime: one gevent hub, reached thread-safely from any thread.

:class:`GeventHub` owns the hub (a dedicated thread's, or an attached one), the
*doorbell* through which foreign threads hand work over, the pool of worker
greenlets that run actors, and failing fast when the hub stops. It knows
nothing of actors or timers; :class:`actors.gevent._runtime.GeventRuntime` adds
those. See :mod:`actors.gevent` for the model.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Self

import gevent
import gevent.event
import gevent.hub

from actors._waiting import Wake

__all__ = [
    "HANDOFF_BUDGET_S",
    "WORKER_POOL_SIZE",
    "GeventHub",
    "GeventRuntimeError",
    "default_hub",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

RawGreenlet: Any = gevent.hub.RawGreenlet
getcurrent: Callable[[], Any] = gevent.getcurrent

HANDOFF_BUDGET_S: float | None = None
"""How long the hub runs hand-offs in a row before timers and I/O get a turn
(None: the interpreter's switch interval, as gevent's own callback queue)."""

WORKER_POOL_SIZE = 64
"""How many finished worker greenlets a runtime keeps parked for reuse."""


class GeventRuntimeError(RuntimeError):
    """The gevent runtime cannot do what was asked (closed, or its hub is not running)."""


class GeventHub:
    """One gevent hub that runs greenlets handed to it from any thread.

    The base of :class:`actors.gevent._runtime.GeventRuntime`; futures, inboxes
    and timers need only this much of a runtime.
    """

    def __init_subclass__(cls, *, default: bool = False, **kwargs: Any) -> None:
        """``default=True`` makes the subclass the class of :func:`default_hub`."""
        super().__init_subclass__(**kwargs)
        if default:
            global _default_class  # noqa: PLW0603 - the one class the default is made of
            _default_class = cls

    def __init__(self, *, thread_name: str = "dsh-gevent-hub") -> None:
        self._thread_name = thread_name
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._ident: int | None = None
        self._hub: Any = None
        self._loop: Any = None
        # The doorbell: a referenced async watcher that keeps the loop alive while the
        # runtime is open and carries every hand-off from a foreign thread (see _post_locked).
        self._doorbell: Any = None
        self._handoffs: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []  # under _lock
        self._stopping: Any = None
        self._attached = False
        self._closed = False
        self._hub_gone = False  # the hub will never run this runtime's work again
        self._failure: BaseException | None = None
        self._start_error: BaseException | None = None
        self._waits: set[Any] = set()  # wakes of foreign threads waiting on this runtime
        self._workers: list[Any] = []  # parked worker greenlets (hub thread only)

    @classmethod
    def attach(cls) -> Self:
        """A runtime on the calling thread's hub (created if needed); that thread must run it."""
        runtime = cls()
        runtime._attached = True
        runtime._thread = threading.current_thread()
        runtime._install(gevent.get_hub())
        runtime._ready.set()
        return runtime

    # --- hub access ------------------------------------------------------------------------

    @property
    def hub(self) -> Any:
        """The runtime's hub (starting the runtime thread if needed)."""
        self._ensure_started()
        return self._hub

    @property
    def thread(self) -> threading.Thread | None:
        """The thread that runs the hub (None before first use of a dedicated runtime)."""
        return self._thread

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def failure(self) -> BaseException | None:
        """Why the dedicated hub stopped without :meth:`close` (None while it runs as it should)."""
        return self._failure

    def on_hub_thread(self) -> bool:
        """Whether the caller runs on the runtime's hub thread."""
        return self._ident is not None and threading.get_ident() == self._ident

    def call_soon(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function(*args)`` in the hub greenlet soon; thread-safe, never blocks.

        The callback runs in the hub itself, so it must not block; callbacks
        scheduled from one thread run in the order they were scheduled. Raises
        :class:`GeventRuntimeError` when the hub will not run it (the runtime is
        closed, or its hub stopped).
        """
        if self.on_hub_thread():
            if self._hub_gone:
                raise self._unusable_error()
            self._loop.run_callback(function, *args)
            return
        self._ensure_started()
        with self._lock:
            if self._closed or self._hub_gone or not self._post_locked(function, args):
                raise self._unusable_error()

    def spawn(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function(*args)`` in a new greenlet of the hub; thread-safe, never blocks.

        An exception it raises is logged.
        """
        self.call_soon(self._start_greenlet, function, args)

    def check_can_wait(self) -> None:
        """Raise :class:`GeventRuntimeError` if waiting on this runtime here would hang.

        The hub thread itself may always wait (greenlet waits drive the hub). A
        foreign thread may wait only while the hub runs in its own thread.
        """
        if self.on_hub_thread():
            return
        self._ensure_started()
        if self._closed or self._failure is not None or self._hub_gone:
            raise self._unusable_error()
        thread = self._thread
        if thread is None or not thread.is_alive():
            raise GeventRuntimeError(
                f"the gevent hub of this runtime is not running: its thread "
                f"{getattr(thread, 'name', None)!r} has exited"
            )
        if self._attached and not self._hub:
            raise GeventRuntimeError(
                f"the gevent hub of thread {thread.name!r} is not running, so waiting here "
                "would hang: that thread must run its hub (e.g. be blocked in a gevent wait) "
                "before other threads wait on its actors"
            )

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop the hub; idempotent; never raises. Stop the runtime's actors first.

        A dedicated runtime thread exits and its hub is destroyed; an attached
        hub only loses the runtime's keep-alive watcher. Actors of this runtime
        still alive are marked stopped and leave the registry, the asks queued
        to them fail with ``pykka.ActorDeadError``, and threads still waiting on
        the runtime's futures get :class:`GeventRuntimeError`. Later use raises
        :class:`GeventRuntimeError`. Waits at most ``timeout`` seconds for the
        runtime thread to exit and logs an error if it did not; closing a
        runtime whose hub already stopped (see :attr:`failure`) only logs that.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            started = self._ready.is_set() and self._start_error is None
            failure = self._failure
        if failure is not None:
            _log.warning(
                "closing gevent runtime %r, whose hub had stopped unexpectedly: %r",
                self._thread_name,
                failure,
            )
        elif started and self._attached:
            if self.on_hub_thread():
                self._release_doorbell()
            else:
                with self._lock:
                    self._post_locked(self._release_doorbell, ())
        elif started:
            if self.on_hub_thread():
                self._loop.run_callback(self._stopping.set)
            else:
                with self._lock:
                    self._post_locked(self._stopping.set, ())
                thread = self._thread
                if thread is not None:
                    thread.join(timeout)
                    if thread.is_alive():
                        _log.error(
                            "the gevent runtime thread %r did not stop within %s s of close(); "
                            "its hub is left to finish on its own",
                            thread.name,
                            timeout,
                        )
        self._retire_actors()
        self._wake_waiters()

    def __repr__(self) -> str:
        kind = "attached" if self._attached else "dedicated"
        if self._closed:
            state = "closed"
        elif self._failure is not None:
            state = "failed"
        else:
            state = "running" if self._ready.is_set() else "idle"
        return f"{type(self).__name__}({kind}, {state})"

    # --- internals -------------------------------------------------------------------------

    def _unusable_error(self) -> GeventRuntimeError:
        """The error for work or waits the hub will never serve."""
        failure = self._failure
        if failure is not None:
            error = GeventRuntimeError(
                f"the gevent hub of this runtime stopped unexpectedly ({failure!r}); "
                "nothing will answer"
            )
            error.__cause__ = failure
            return error
        return GeventRuntimeError("the gevent runtime is closed; nothing will answer")

    def _post_locked(self, function: Callable[..., Any], args: tuple[Any, ...]) -> bool:
        """``_lock`` held, any thread: queue ``function(*args)`` for the hub and ring the doorbell.

        This is the only way a foreign thread reaches the hub. It must not call
        ``loop.run_callback_threadsafe``: that changes the libev loop's count of
        active watchers, a plain C integer the hub thread changes at the same
        time without holding the GIL (when a timer expires, for instance), so an
        update can be lost; with one too few the loop believes it has nothing
        left and returns, and the hub dies with ``LoopExit`` while work is
        pending. Ringing an async watcher (``ev_async_send``) is the loop's one
        thread-safe operation. Returns False when the doorbell is gone.
        """
        doorbell = self._doorbell
        if doorbell is None:
            return False
        self._handoffs.append((function, args))
        doorbell.send()
        return True

    def _answer_doorbell(self) -> None:
        """In the hub: run what foreign threads handed over, in the order they did.

        Like gevent's own callback queue it stops after a switch interval, so a
        burst of hand-offs does not hold up due timers or I/O: the rest goes
        back to the front of the queue and the doorbell rings again.
        """
        with self._lock:
            batch, self._handoffs = self._handoffs, []
        budget = HANDOFF_BUDGET_S
        deadline = time.perf_counter() + (sys.getswitchinterval() if budget is None else budget)
        for index, (function, args) in enumerate(batch):
            if index and time.perf_counter() >= deadline:
                with self._lock:
                    doorbell = self._doorbell
                    if doorbell is not None:  # else the hub is stopping: drop the rest
                        self._handoffs[:0] = batch[index:]
                        doorbell.send()
                return
            try:
                function(*args)
            except BaseException:
                _log.exception("a callback handed to the gevent hub failed")

    def _wait_watched(self, wake: Wake, timeout: float | None) -> bool:
        """Off the hub: ``wake.wait(timeout)``, also woken when the runtime closes or fails.

        Raises :class:`GeventRuntimeError` if that already happened. Returns what
        ``wake.wait`` returned; the caller tells a real wake-up from a stop.
        """
        with self._lock:
            if self._closed or self._failure is not None or self._hub_gone:
                raise self._unusable_error()
            self._waits.add(wake)
        try:
            return wake.wait(timeout)
        finally:
            with self._lock:
                self._waits.discard(wake)

    def _wake_waiters(self) -> None:
        """Wake every foreign waiter: the runtime is closed or its hub stopped."""
        with self._lock:
            waits = list(self._waits)
        for wake in waits:
            wake.wake()

    def _retire_actors(self) -> None:
        """After close, or once the hub stopped: tell the callers of this hub's actors.

        The base has no actors; :class:`actors.gevent._runtime.GeventRuntime` does.
        """

    def _is_default(self) -> bool:
        """Whether this is the process-wide hub of :func:`default_hub`."""
        return _default is self

    def _install(self, hub: Any) -> None:
        """On the hub thread: remember the hub and keep its loop alive."""
        self._hub = hub
        self._loop = hub.loop
        self._ident = threading.get_ident()
        doorbell = hub.loop.async_()
        doorbell.start(self._answer_doorbell)
        self._doorbell = doorbell

    def _release_doorbell(self) -> None:
        """On the hub thread: stop keeping the loop alive and taking hand-offs."""
        with self._lock:
            doorbell, self._doorbell = self._doorbell, None
            self._handoffs = []
        if doorbell is not None:
            doorbell.stop()
            doorbell.close()

    def _ensure_started(self) -> None:
        if not self._ready.is_set():
            with self._lock:
                if self._closed:
                    raise GeventRuntimeError("the gevent runtime is closed")
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name=self._thread_name, daemon=True
                    )
                    self._thread.start()
            self._ready.wait()
        if self._start_error is not None:
            raise GeventRuntimeError("the gevent runtime thread failed to start") from (
                self._start_error
            )

    def _run(self) -> None:
        """The dedicated runtime thread: run the hub until :meth:`close`."""
        try:
            hub = gevent.get_hub()
            self._install(hub)
            stopping = self._stopping = gevent.event.Event()
        except BaseException as error:
            self._start_error = error
            self._ready.set()
            return
        self._ready.set()
        failure: BaseException | None = None
        try:
            stopping.wait()  # the hub runs until close() sets it
        except BaseException as error:  # LoopExit: the loop ran out of referenced watchers
            failure = error
        self._stop_hub(hub, failure)

    def _stop_hub(self, hub: Any, failure: BaseException | None) -> None:
        """On the runtime thread, once its hub returned: refuse new work, then destroy the hub.

        When the hub stopped although the runtime was not closed (``failure``),
        the runtime fails fast: it logs why, its actors are retired and every
        waiting thread gets :class:`GeventRuntimeError`, before the hub is
        destroyed.
        """
        if failure is not None:
            _log.critical(
                "the gevent hub of runtime thread %r stopped unexpectedly; its actors are "
                "retired and waits on it fail with GeventRuntimeError",
                self._thread_name,
                exc_info=failure,
            )
        with self._lock:
            self._hub_gone = True
            if failure is not None:
                self._failure = failure
        self._release_doorbell()
        if failure is not None:
            self._retire_actors()
            self._wake_waiters()
        try:
            hub.destroy(destroy_loop=True)
        except BaseException:
            _log.exception("destroying the hub of gevent thread %r failed", self._thread_name)

    def _start_greenlet(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """In the hub: run ``function`` in a worker greenlet right away.

        Finished workers park in a small pool and are reused: creating a
        greenlet costs several times more than switching to a parked one.
        """
        pool = self._workers
        if pool:
            pool.pop().switch(function, args)
        else:
            RawGreenlet(self._worker, self._hub).switch(function, args)

    def _worker(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """A worker greenlet: run a function, then park in the pool for the next one."""
        hub = self._hub
        pool = self._workers
        while True:
            _logged(function, args)
            if len(pool) >= WORKER_POOL_SIZE:
                return
            me = getcurrent()
            pool.append(me)
            try:
                work = hub.switch()  # resumed by _start_greenlet with the next function
            except BaseException:  # thrown into a parked worker: retire it
                with contextlib.suppress(ValueError):
                    pool.remove(me)
                return
            if not (isinstance(work, tuple) and len(work) == 2 and callable(work[0])):
                with contextlib.suppress(ValueError):
                    pool.remove(me)
                _log.warning("a parked worker greenlet was resumed without work; retired")
                return
            function, args = work


def _noop() -> None:
    """A callback that does nothing (what a cancelled timer's callback becomes)."""


def _logged(function: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        function(*args)
    except BaseException:
        _log.exception("a greenlet of the gevent runtime failed")


_default_class: type[GeventHub] = GeventHub
_default: GeventHub | None = None
_default_lock = threading.Lock()


def default_hub() -> GeventHub:
    """The process-wide hub with a dedicated thread (never closed).

    It is a :class:`actors.gevent._runtime.GeventRuntime` (that class declares
    itself the default's); :func:`actors.gevent.default_runtime` returns it typed so.
    """
    global _default  # noqa: PLW0603 - a process-wide singleton by design
    with _default_lock:
        if _default is None:
            _default = _default_class()
        return _default
