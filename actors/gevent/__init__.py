"""A gevent runtime for pykka: actors are greenlets on one gevent hub, not OS threads.

Pykka 4 ships only a threading runtime. This package provides the hooks pykka
needs for another one — an inbox (:class:`GeventInbox`), a future type
(:class:`GeventFuture`) and an actor loop (a greenlet) — as :class:`GeventActor`,
plus gevent timers (:class:`GeventTimers`) and helpers to wait or run blocking
calls without stalling a hub. Importing it imports gevent (the ``gevent`` extra:
``pip install 'dsh-tool-schedule[gevent]'``; without it the import raises
:class:`ModuleNotFoundError` saying so); it never imports ``gevent.monkey`` and
never patches anything.

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
refused, with :class:`actors._waiting.BlockingInHubError`, in the hub greenlet
itself (a loop callback), and with :class:`GeventRuntimeError` when a foreign
thread would wait on actors whose hub is not running (a closed runtime, an
attached hub whose thread never entered or already left its hub): an error,
never a hang.

Blocking I/O does not belong on the hub: :func:`actors._waiting.run_blocking`
moves a call to an offload thread (:func:`offload`) when it is made on a hub
thread.
:class:`GeventTimers` are libev/libuv timers of the hub; their callbacks run in
the hub itself and, like those of :class:`actors._clock.ThreadTimers`, must
only post a message.

Modules
-------
Split the way pykka is, each importing only the ones above it:

* :mod:`actors.gevent._hub` — :class:`GeventHub`: one hub, the thread-safe
  hand-off, the worker greenlets, failing fast, and the process-wide default;
* :mod:`actors.gevent._future` — :class:`GeventFuture`;
* :mod:`actors.gevent._inbox` — :class:`GeventInbox` and the actor's stop flag;
* :mod:`actors.gevent._timers` — :class:`GeventTimers`;
* :mod:`actors.gevent._actor` — :class:`GeventActor`, the actor loop;
* :mod:`actors.gevent._runtime` — :class:`GeventRuntime`, the ``Runtime``
  protocol on a hub (``bind``, ``timers``, ``wait``), and :func:`default_runtime`.
"""

from __future__ import annotations

try:
    import gevent  # noqa: F401  (the runtime's own dependency: the `gevent` extra)
except ModuleNotFoundError as _missing:
    if _missing.name != "gevent":
        raise
    raise ModuleNotFoundError(
        "the gevent actor runtime needs gevent, which is not installed: "
        "pip install 'dsh-tool-schedule[gevent]' (or keep the default runtime, 'threading')",
        name="gevent",
    ) from None

from actors.gevent._actor import GeventActor
from actors.gevent._future import GeventFuture
from actors.gevent._hub import GeventHub, GeventRuntimeError
from actors.gevent._inbox import GeventInbox
from actors.gevent._runtime import GeventRuntime, default_runtime
from actors.gevent._timers import GeventTimerHandle, GeventTimers

__all__ = [
    "GeventActor",
    "GeventFuture",
    "GeventHub",
    "GeventInbox",
    "GeventRuntime",
    "GeventRuntimeError",
    "GeventTimerHandle",
    "GeventTimers",
    "default_runtime",
]
