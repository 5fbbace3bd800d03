"""The gevent ``Runtime``: greenlet actors, hub timers and waits on one :class:`GeventHub`.

:class:`GeventRuntime` is what ``get_runtime("gevent")`` returns
(:func:`default_runtime`): a :class:`actors.gevent._hub.GeventHub` that binds
actor classes to itself, makes timers on its hub and retires its actors when it
closes. See :mod:`actors.gevent` for the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import pykka

from actors._waiting import current_hub, make_wake, run_blocking, wait_for
from actors.gevent._actor import GeventActor
from actors.gevent._hub import GeventHub, default_hub
from actors.gevent._inbox import GeventInbox, answer_dead
from actors.gevent._timers import GeventTimers

if TYPE_CHECKING:
    from concurrent.futures import Future as ConcurrentFuture

__all__ = ["GeventRuntime", "default_runtime"]

T = TypeVar("T")
A = TypeVar("A", bound=pykka.Actor)


class GeventRuntime(GeventHub, default=True):
    """One gevent hub that runs greenlet actors; see :mod:`actors.gevent` for the model."""

    def __init__(self, *, thread_name: str = "dsh-gevent-hub") -> None:
        super().__init__(thread_name=thread_name)
        self._bound: dict[type[Any], type[Any]] = {}

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
        """See :func:`actors._waiting.run_blocking`."""
        return run_blocking(function, *args)

    def wait(self, future: ConcurrentFuture[T], timeout: float | None = None) -> T:
        """See :func:`actors._waiting.wait_for`.

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

    def _retire_actors(self) -> None:
        """After close: nothing will run this runtime's actors again; say so to their callers."""
        for ref in pykka.ActorRegistry.get_all():
            actor_class = ref.actor_class
            if not issubclass(actor_class, GeventActor):
                continue
            runtime = actor_class._gevent_runtime
            if runtime is not self and not (runtime is None and self._is_default()):
                continue
            pykka.ActorRegistry.unregister(ref)
            ref.actor_stopped.set()
            inbox = ref.actor_inbox
            leftovers = inbox.close() if isinstance(inbox, GeventInbox) else []
            for envelope in leftovers:
                answer_dead(envelope, "its gevent runtime was closed")


def default_runtime() -> GeventRuntime:
    """The process-wide :class:`GeventRuntime` with a dedicated hub thread (never closed)."""
    runtime = default_hub()
    assert isinstance(runtime, GeventRuntime)
    return runtime
