"""A gevent runtime for pykka: actors are greenlets on one gevent hub, not OS threads.

Pykka 4 ships only a threading runtime. This module provides the hooks pykka
needs for another one — an inbox (:class:`GeventInbox`), a future type
(:class:`GeventFuture`) and an actor loop (a greenlet) — as :class:`GeventActor`,
plus gevent timers (:class:`GeventTimers`) and helpers to wait or run blocking
calls without stalling a hub. Importing it imports gevent; it never imports
``gevent.monkey`` and never patches anything.

The model
---------
A :class:`GeventRuntime` owns **one hub**, and every actor bound to it
(:meth:`GeventRuntime.bind`) is a greenlet of that hub:

* By default (``GeventRuntime()``, and :func:`default_runtime`, which
  ``get_runtime("gevent")`` returns) the runtime starts one dedicated daemon OS
  thread, the *gevent runtime thread* (``dsh-gevent-hub``), on first use. It
  runs the hub forever (a referenced async watcher keeps its loop alive) until
  :meth:`GeventRuntime.close`.
* ``GeventRuntime.attach()`` binds the runtime to the calling thread's hub
  instead, for hosts that already run on gevent. That thread must keep running
  its hub (as any gevent program does whenever it waits).

Actors are greenlets only while they have work: an idle actor holds no
greenlet at all (just its inbox). A ``put`` to an idle actor starts a *runner*
in a worker greenlet (reused from a small pool of parked workers); the runner
handles messages exactly as pykka's actor loop does and ends when the inbox is
empty, yielding to the hub every :data:`YIELD_EVERY` messages on the way so a
busy actor cannot starve the others. This is what keeps 10,000 agents (three
actors each) small.

Any thread other than the hub's is a *foreign thread*. Foreign threads hand work to the hub
thread-safely: ``tell`` appends to the inbox under a lock and, if the actor is
idle, queues its runner for the hub and rings the runtime's *doorbell*, an
async watcher of the hub (``ev_async_send``, the one loop operation that is
safe from another thread); starting an actor and arming or cancelling a timer
hop to the hub the same way. A foreign thread never calls any other loop
operation, ``loop.run_callback_threadsafe`` included: that one changes the
loop's count of active watchers, which the hub thread changes at the same
time without holding the GIL, and a lost update makes the loop believe it has
nothing left to do, so the hub would die with ``LoopExit``. Nothing in the
hand-off ever blocks or switches, so it is safe while holding a lock, from any
thread, including the hub thread.

The doorbell is referenced, so it also keeps a dedicated hub running until
:meth:`GeventRuntime.close`. Should the hub stop anyway (a timer callback
that raises ``SystemExit``, say), the runtime fails fast: it logs the cause,
retires its actors, and every wait of another thread on the runtime's
futures raises :class:`GeventRuntimeError`; ``close`` then only reports what
happened.

Waiting follows the caller: a greenlet on a hub thread waits by switching to
its hub (other actors keep running; a cross-thread wake-up arrives through an
async watcher); a plain thread blocks on a ``threading.Event``. Waiting is
refused, with :class:`actors.waiting.BlockingInHubError`, in the hub greenlet
itself (a loop callback), and with :class:`GeventRuntimeError` when a foreign
thread would wait on actors whose hub is not running (a closed runtime, an
attached hub whose thread never entered or already left its hub): an error,
never a hang.

Blocking I/O does not belong on the hub: :func:`actors.waiting.run_blocking`
moves a call to an offload thread (:func:`offload`) when it is made on a hub
thread.
:class:`GeventTimers` are libev/libuv timers of the hub; their callbacks run in
the hub itself and, like those of :class:`actors.clock.ThreadTimers`, must
only post a message.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, cast

import gevent
import gevent.event
import gevent.hub
import pykka

from actors.waiting import (
    Wake,
    current_hub,
    make_wake,
    run_blocking,
    wait_for,
)

if TYPE_CHECKING:
    from concurrent.futures import Future as ConcurrentFuture

    from pykka._envelope import Envelope

__all__ = [
    "GeventActor",
    "GeventFuture",
    "GeventInbox",
    "GeventRuntime",
    "GeventRuntimeError",
    "GeventTimerHandle",
    "GeventTimers",
    "default_runtime",
]

_log = logging.getLogger("dsh_schedule.gevent")

RawGreenlet: Any = gevent.hub.RawGreenlet
getcurrent: Callable[[], Any] = gevent.getcurrent

T = TypeVar("T")
A = TypeVar("A", bound=pykka.Actor)

ExcInfo = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]


class GeventRuntimeError(RuntimeError):
    """The gevent runtime cannot do what was asked (closed, or its hub is not running)."""


# --- the runtime ----------------------------------------------------------------------------


class GeventRuntime:
    """One gevent hub that runs greenlet actors; see the module docstring for the model."""

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
        self._bound: dict[type[Any], type[Any]] = {}
        self._workers: list[Any] = []  # parked worker greenlets (hub thread only)

    @classmethod
    def attach(cls) -> GeventRuntime:
        """A runtime on the calling thread's hub (created if needed); that thread must run it."""
        runtime = cls()
        runtime._attached = True
        runtime._thread = threading.current_thread()
        runtime._install(gevent.get_hub())
        runtime._ready.set()
        return runtime

    # --- Runtime protocol ----------------------------------------------------------------

    @property
    def name(self) -> Literal["gevent"]:
        """Always ``"gevent"``."""
        return "gevent"

    def bind(self, actor_class: type[A]) -> type[A]:
        """``actor_class`` as a greenlet actor of this runtime (a cached subclass).

        The subclass puts :class:`GeventActor`'s hooks ahead of the class's own
        base, so all of the class's code is shared with the threading runtime.
        """
        if not (isinstance(actor_class, type) and issubclass(actor_class, pykka.Actor)):
            raise TypeError(f"{actor_class!r} is not a pykka actor class")
        if issubclass(actor_class, GeventActor) and actor_class.gevent_runtime() is self:
            return actor_class
        with self._lock:
            bound = self._bound.get(actor_class)
            if bound is None:
                bases = (
                    (actor_class,)
                    if issubclass(actor_class, GeventActor)
                    else (GeventActor, actor_class)
                )
                bound = type(
                    actor_class.__name__,
                    bases,
                    {
                        "__module__": actor_class.__module__,
                        "__qualname__": actor_class.__qualname__,
                        "__doc__": actor_class.__doc__,
                        "_gevent_runtime": self,
                    },
                )
                self._bound[actor_class] = bound
        return cast("type[A]", bound)

    def timers(self) -> GeventTimers:
        """A new :class:`GeventTimers` on this runtime's hub."""
        return GeventTimers(self)

    def run_blocking(self, function: Callable[..., T], *args: Any) -> T:
        """See :func:`actors.waiting.run_blocking`."""
        return run_blocking(function, *args)

    def wait(self, future: ConcurrentFuture[T], timeout: float | None = None) -> T:
        """See :func:`actors.waiting.wait_for`.

        A plain thread's wait ends with :class:`GeventRuntimeError` when this
        runtime closes or its hub stops before ``future`` resolves.
        """
        if future.done() or self.on_hub_thread() or current_hub() is not None:
            return wait_for(future, timeout)
        wake = make_wake()
        future.add_done_callback(lambda _: wake.wake())
        if not self._wait_watched(wake, timeout):
            raise TimeoutError(f"the future did not resolve within {timeout} seconds")
        if not future.done():
            raise self._unusable_error()
        return future.result(0)

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
        return f"GeventRuntime({kind}, {state})"

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
        """After close: nothing will run this runtime's actors again; say so to their callers."""
        for ref in pykka.ActorRegistry.get_all():
            actor_class = ref.actor_class
            if not issubclass(actor_class, GeventActor):
                continue
            runtime = actor_class._gevent_runtime
            if runtime is not self and not (runtime is None and _default is self):
                continue
            pykka.ActorRegistry.unregister(ref)
            ref.actor_stopped.set()
            inbox = ref.actor_inbox
            leftovers = inbox.close() if isinstance(inbox, GeventInbox) else []
            for envelope in leftovers:
                _answer_dead(envelope, "its gevent runtime was closed")

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


HANDOFF_BUDGET_S: float | None = None
"""How long the hub runs hand-offs in a row before timers and I/O get a turn
(None: the interpreter's switch interval, as gevent's own callback queue)."""

WORKER_POOL_SIZE = 64
"""How many finished worker greenlets a runtime keeps parked for reuse."""

_default: GeventRuntime | None = None
_default_lock = threading.Lock()


def default_runtime() -> GeventRuntime:
    """The process-wide :class:`GeventRuntime` with a dedicated hub thread (never closed)."""
    global _default  # noqa: PLW0603 - a process-wide singleton by design
    with _default_lock:
        if _default is None:
            _default = GeventRuntime()
        return _default


# --- the future ----------------------------------------------------------------------------


class GeventFuture(pykka.Future[T], Generic[T]):
    """A pykka future for greenlet actors; usable from any thread.

    ``get`` waits in the caller's style (see the module docstring) and honours
    ``timeout`` (raising :class:`pykka.Timeout`); ``map``, ``join``, ``filter``,
    ``reduce`` and ``pykka.get_all`` work through pykka's get hooks. ``set`` and
    ``set_exception`` may be called from any thread and raise ``queue.Full``
    when the future is already settled. :meth:`add_done_callback` runs callbacks
    in a greenlet of the runtime's hub.
    """

    def __init__(self, runtime: GeventRuntime | None = None) -> None:
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
        runtime = self._runtime if self._runtime is not None else default_runtime()
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
            runtime = self._runtime if self._runtime is not None else default_runtime()
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


# --- the inbox -----------------------------------------------------------------------------

YIELD_EVERY = 64
"""How many messages an actor handles in a row before it lets its hub run."""


class GeventInbox:
    """An actor's mailbox: any thread may ``put``; only the actor's runner takes.

    An idle actor holds **no greenlet**: its runner greenlet ends when the inbox
    runs dry, and the next ``put`` starts a new one (through
    :meth:`GeventRuntime.spawn`). ``put`` never blocks or switches, so it is
    safe under a lock, from any thread, including the hub thread.
    :attr:`unfinished_tasks` counts every ``put`` ever made, like the counter of
    a ``queue.Queue`` whose ``task_done`` is never called, so
    :func:`host_bridge.testing.settle` is exact for this inbox too. After the
    actor stopped, a late ``ask`` is answered with ``pykka.ActorDeadError``.
    """

    __slots__ = ("_in", "_lock", "_out", "_runner", "_runtime", "_state", "unfinished_tasks")

    def __init__(self, runtime: GeventRuntime) -> None:
        self._runtime = runtime
        self._lock = threading.Lock()
        self._in: list[Envelope[Any]] = []  # newest last
        self._out: list[Envelope[Any]] = []  # oldest last (reversed batch)
        self._runner: Callable[[], None] | None = None
        self._state = _RUNNING  # the first runner is started by the actor itself
        self.unfinished_tasks = 0

    def put(self, envelope: Envelope[Any], /) -> None:
        """Queue ``envelope``; start a runner if the actor is idle."""
        with self._lock:
            self.unfinished_tasks += 1
            state = self._state
            if state is _STOPPED:
                dead = True
            else:
                dead = False
                self._in.append(envelope)
                if state is _IDLE:
                    self._state = _RUNNING
        if dead:
            _answer_dead(envelope, "it has stopped")
        elif state is _IDLE:
            runner = self._runner
            assert runner is not None
            self._runtime.spawn(runner)

    def take(self) -> Envelope[Any] | None:
        """The next envelope; None (and the actor goes idle) when there is none."""
        with self._lock:
            out = self._out
            if not out:
                if not self._in:
                    if self._state is _RUNNING:
                        self._state = _IDLE
                    return None
                out = self._in
                out.reverse()
                self._in, self._out = self._out, out  # swap: no allocation per batch
            return out.pop()

    def get(self) -> Envelope[Any]:
        """The next envelope; call only when not :meth:`empty` (drains in ``on_stop``)."""
        with self._lock:
            out = self._out
            if not out:
                if not self._in:
                    raise GeventRuntimeError("the inbox of a gevent actor is empty")
                out = self._in
                out.reverse()
                self._in, self._out = self._out, out
            return out.pop()

    def close(self) -> list[Envelope[Any]]:
        """Mark the actor stopped; returns what is still queued (later puts are refused)."""
        with self._lock:
            self._state = _STOPPED
            leftovers = self._drain_locked()
        return leftovers

    def drain(self) -> list[Envelope[Any]]:
        """Take everything queued at once, oldest first."""
        with self._lock:
            return self._drain_locked()

    def _drain_locked(self) -> list[Envelope[Any]]:
        """Lock held: take everything queued, oldest first."""
        items = self._out[::-1] + self._in
        self._out, self._in = [], []
        return items

    def empty(self) -> bool:
        """Whether nothing is queued."""
        with self._lock:
            return not self._in and not self._out

    def qsize(self) -> int:
        """How many envelopes are queued."""
        with self._lock:
            return len(self._in) + len(self._out)


_RUNNING = "running"
_IDLE = "idle"
_STOPPED = "stopped"

_pykka_log = logging.getLogger("pykka")


def _answer_dead(envelope: Envelope[Any], why: str) -> None:
    reply = envelope.reply_to
    if reply is None:
        return
    if isinstance(envelope.message, pykka.messages._ActorStop):
        with contextlib.suppress(queue.Full):
            reply.set(None)
        return
    error = pykka.ActorDeadError(f"the actor stopped before handling the message: {why}")
    with contextlib.suppress(queue.Full):
        reply.set_exception((pykka.ActorDeadError, error, None))


class StopFlag:
    """A light ``threading.Event`` stand-in for ``actor_stopped`` (set once, waitable anywhere).

    A real ``Event`` costs a Condition, a lock and a deque per actor; this costs
    two slots until someone waits. ``wait`` follows the caller's style.
    """

    __slots__ = ("_set", "_wakes")

    def __init__(self) -> None:
        self._set = False
        self._wakes: list[Any] | None = None

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Set the flag and wake every waiter."""
        with _FLAG_LOCK:
            self._set = True
            wakes, self._wakes = self._wakes, None
        for wake in wakes or ():
            wake.wake()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until set (at most ``timeout`` seconds); returns whether it is set."""
        with _FLAG_LOCK:
            if self._set:
                return True
            wake = make_wake()
            if self._wakes is None:
                self._wakes = []
            self._wakes.append(wake)
        if not wake.wait(timeout):
            with _FLAG_LOCK:
                if self._wakes is not None and wake in self._wakes:
                    self._wakes.remove(wake)
        return self._set


_FLAG_LOCK = threading.Lock()


# --- the actor -----------------------------------------------------------------------------


class GeventActor(pykka.Actor):
    """A pykka actor that runs as a greenlet of a :class:`GeventRuntime`'s hub.

    Subclass it directly to use :func:`default_runtime`, or let
    :meth:`GeventRuntime.bind` mix it into an existing actor class. ``start``,
    ``tell``, ``ask`` and ``stop`` work from any thread. The actor loop follows
    pykka's (same failure and stop semantics), but an idle actor parks no
    greenlet: a runner greenlet handles what is queued and ends when the inbox
    is empty; the next message starts another. A long run of messages yields
    to the hub every :data:`YIELD_EVERY` messages, so a busy actor cannot
    starve its neighbours.
    """

    _gevent_runtime: ClassVar[GeventRuntime | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stopped = StopFlag()
        self.actor_stopped = stopped  # type: ignore[assignment]
        self._actor_ref.actor_stopped = stopped  # type: ignore[assignment]
        inbox = self.actor_inbox
        assert isinstance(inbox, GeventInbox)
        inbox._runner = self._gevent_run

    @classmethod
    def gevent_runtime(cls) -> GeventRuntime:
        """The runtime this actor class runs on."""
        runtime = cls._gevent_runtime
        return runtime if runtime is not None else default_runtime()

    @classmethod
    def _create_actor_inbox(cls) -> GeventInbox:
        return GeventInbox(cls.gevent_runtime())

    @classmethod
    def _create_future(cls) -> GeventFuture[Any]:
        return GeventFuture(cls.gevent_runtime())

    def _start_actor_loop(self) -> None:
        try:
            self.gevent_runtime().spawn(self._gevent_first_run)
        except BaseException:
            pykka.ActorRegistry.unregister(self.actor_ref)  # registered by start() already
            self.actor_stopped.set()
            raise

    def _actor_loop(self) -> None:
        raise GeventRuntimeError("a gevent actor runs through its runtime, not _actor_loop")

    def _gevent_first_run(self) -> None:
        self._actor_loop_setup()
        self._gevent_run()

    def _gevent_run(self) -> None:
        """Handle queued messages until the inbox is empty (idle) or the actor stopped."""
        inbox = self.actor_inbox
        assert isinstance(inbox, GeventInbox)
        handled = 0
        while not self.actor_stopped.is_set():
            envelope = inbox.take()
            if envelope is None:
                return  # idle: the next put starts a new runner
            self._gevent_handle(envelope)
            handled += 1
            if handled % YIELD_EVERY == 0:
                gevent.sleep(0)
        self._actor_loop_teardown()
        for envelope in inbox.close():
            _answer_dead(envelope, "it has stopped")

    def _gevent_handle(self, envelope: Envelope[Any]) -> None:
        """One message, exactly as pykka's own actor loop handles it."""
        try:
            response = self._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            if envelope.reply_to is not None:
                _pykka_log.info(f"Exception returned from {self} to caller:", exc_info=True)
                envelope.reply_to.set_exception()
            else:
                self._handle_failure(*sys.exc_info())
                try:
                    self.on_failure(*sys.exc_info())
                except Exception:
                    self._handle_failure(*sys.exc_info())
        except BaseException:
            _pykka_log.debug(f"{sys.exc_info()[1]!r} in {self}. Stopping all actors.")
            self._stop()
            pykka.ActorRegistry.stop_all()


# --- timers --------------------------------------------------------------------------------


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
    to the hub with :meth:`GeventRuntime.call_soon`. Delays are measured on the
    loop's monotonic clock. Callbacks run in the hub itself: like those of
    :class:`actors.clock.ThreadTimers` they must be short and must not
    block (Schedule's only post a message to a mailbox); a callback that tries
    to wait gets :class:`actors.waiting.BlockingInHubError`.
    """

    def __init__(self, runtime: GeventRuntime | None = None) -> None:
        self.runtime = runtime if runtime is not None else default_runtime()
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
