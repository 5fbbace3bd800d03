"""Actor runtimes: where pykka actors run (OS threads or gevent greenlets).

A :class:`Runtime` binds an actor class to its execution model and gives the
host parts that go with it::

    runtime = get_runtime("gevent")          # or "threading" (the default)
    owner = runtime.bind(ScheduleOwner).start(agent, host, status)
    timers = runtime.timers()                # a Timers service of that runtime
    rows = runtime.run_blocking(store.load, session_id)   # blocking I/O off the hub

``bind`` returns the class itself on the threading runtime. On the gevent
runtime it returns a cached subclass that mixes the runtime's pykka hooks
(inbox, future type, actor loop) in ahead of the class's own base, so the
actor's code is shared by both runtimes. See :mod:`actors.gevent_runtime` for
the gevent model (one hub thread per runtime, thread-safe hand-off from any
other thread).

The module-level helpers :func:`wait_for` and :func:`run_blocking` wait "in the
caller's style": on a thread that runs a gevent hub they suspend only the
calling greenlet (the hub keeps running other actors), anywhere else they block
the calling thread. They never import gevent unless gevent is already loaded,
so the threading path stays free of it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Literal, Protocol, TypeAlias, TypeVar

import pykka

from host_bridge.protocols import Timers

__all__ = [
    "BlockingInHubError",
    "Runtime",
    "RuntimeName",
    "RuntimeSpec",
    "ThreadingRuntime",
    "Wake",
    "current_hub",
    "get_runtime",
    "make_wake",
    "run_blocking",
    "wait_for",
]

T = TypeVar("T")
A = TypeVar("A", bound=pykka.Actor)

RuntimeName: TypeAlias = Literal["threading", "gevent"]


class BlockingInHubError(RuntimeError):
    """A blocking wait was attempted in a gevent hub greenlet (a loop callback).

    The hub cannot suspend itself: waiting there would stop every greenlet of
    the thread, so it is refused with this error instead of hanging.
    """


class Runtime(Protocol):
    """An actor runtime: actor classes, a timer service and off-hub blocking calls."""

    @property
    def name(self) -> RuntimeName:
        """``"threading"`` or ``"gevent"``."""
        ...

    def bind(self, actor_class: type[A]) -> type[A]:
        """``actor_class`` running on this runtime (a cached subclass, or the class itself)."""
        ...

    def timers(self) -> Timers:
        """A new timer service whose callbacks run on this runtime. Close it when done."""
        ...

    def run_blocking(self, function: Callable[..., T], *args: Any) -> T:
        """Call ``function(*args)`` without stalling a gevent hub (see :func:`run_blocking`)."""
        ...

    def wait(self, future: Future[T], timeout: float | None = None) -> T:
        """Wait for ``future`` in the caller's style (see :func:`wait_for`)."""
        ...

    def on_hub_thread(self) -> bool:
        """Whether the caller runs where this runtime's actors run (one hub thread).

        Then work that never blocks may run inline instead of through a mailbox
        hop. Always False for the threading runtime (every actor has its thread).
        """
        ...


RuntimeSpec: TypeAlias = "RuntimeName | str | Runtime"
"""What a host passes to choose a runtime: a name (``"threading"`` or ``"gevent"``;
any other string is refused by :func:`get_runtime` with ``ValueError``) or a runtime object."""


class ThreadingRuntime:
    """pykka's own runtime: one OS thread per actor (:class:`pykka.ThreadingActor`)."""

    @property
    def name(self) -> RuntimeName:
        """Always ``"threading"``."""
        return "threading"

    def bind(self, actor_class: type[A]) -> type[A]:
        """The class itself: this package's actors are threading actors by default."""
        if not issubclass(actor_class, pykka.ThreadingActor):
            raise TypeError(f"{actor_class.__name__} is not a pykka.ThreadingActor")
        return actor_class

    def timers(self) -> Timers:
        """A new :class:`host_bridge.clock.ThreadTimers` (one scheduler thread)."""
        from host_bridge.clock import ThreadTimers

        return ThreadTimers(name="dsh-threading-timers")

    def run_blocking(self, function: Callable[..., T], *args: Any) -> T:
        """See :func:`run_blocking`."""
        return run_blocking(function, *args)

    def wait(self, future: Future[T], timeout: float | None = None) -> T:
        """See :func:`wait_for`."""
        return wait_for(future, timeout)

    def on_hub_thread(self) -> bool:
        """Always False: each threading actor has a thread of its own."""
        return False

    def __repr__(self) -> str:
        return "ThreadingRuntime()"


_THREADING = ThreadingRuntime()


def get_runtime(spec: RuntimeSpec = "threading") -> Runtime:
    """The runtime named by ``spec`` (``"threading"`` or ``"gevent"``), or ``spec`` itself.

    ``"gevent"`` is the process-wide default :class:`actors.gevent_runtime.GeventRuntime`
    (imported on first use, so the threading path never loads gevent).
    """
    if spec == "threading":
        return _THREADING
    if spec == "gevent":
        from actors.gevent_runtime import default_runtime

        return default_runtime()
    if isinstance(spec, str):
        raise ValueError(f"unknown actor runtime {spec!r}; use 'threading' or 'gevent'")
    for attribute in ("bind", "timers", "run_blocking", "wait", "on_hub_thread"):
        if not callable(getattr(spec, attribute, None)):
            raise TypeError(f"{spec!r} is not an actor runtime (it has no {attribute}())")
    return spec


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
    from actors.gevent_runtime import greenlet_wake

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
    from actors.gevent_runtime import offload

    return offload(hub, function, *args)
