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
actor's code is shared by both runtimes. See :mod:`actors.gevent` for
the gevent model (one hub thread per runtime, thread-safe hand-off from any
other thread).

The helpers :func:`wait_for` and :func:`run_blocking` wait "in the caller's
style" (they live in the leaf module :mod:`actors._waiting` and are re-exported
here): on a thread that runs a gevent hub they suspend only the calling
greenlet, anywhere else they block the calling thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Literal, Protocol, TypeAlias, TypeVar

import pykka

from actors._contract import Timers
from actors._waiting import (
    BlockingInHubError,
    Wake,
    current_hub,
    make_wake,
    run_blocking,
    wait_for,
)

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
        """A new :class:`actors._clock.ThreadTimers` (one scheduler thread)."""
        from actors._clock import ThreadTimers

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

    ``"gevent"`` is the process-wide default :class:`actors.gevent.GeventRuntime`
    (imported on first use, so the threading path never loads gevent). gevent is
    the ``gevent`` extra: without it, asking for that runtime raises
    :class:`ModuleNotFoundError` naming ``dsh-tool-schedule[gevent]``.
    """
    if spec == "threading":
        return _THREADING
    if spec == "gevent":
        from actors.gevent import default_runtime

        return default_runtime()
    if isinstance(spec, str):
        raise ValueError(f"unknown actor runtime {spec!r}; use 'threading' or 'gevent'")
    for attribute in ("bind", "timers", "run_blocking", "wait", "on_hub_thread"):
        if not callable(getattr(spec, attribute, None)):
            raise TypeError(f"{spec!r} is not an actor runtime (it has no {attribute}())")
    return spec
