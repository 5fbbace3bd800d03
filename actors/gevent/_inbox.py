"""The inbox of a gevent actor, and its stop flag: no greenlet while the actor is idle."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pykka

from actors._waiting import make_wake
from actors.gevent._hub import GeventHub, GeventRuntimeError

if TYPE_CHECKING:
    from pykka._envelope import Envelope

__all__ = ["GeventInbox", "StopFlag", "answer_dead"]


class GeventInbox:
    """An actor's mailbox: any thread may ``put``; only the actor's runner takes.

    An idle actor holds **no greenlet**: its runner greenlet ends when the inbox
    runs dry, and the next ``put`` starts a new one (through
    :meth:`actors.gevent._hub.GeventHub.spawn`). ``put`` never blocks or switches, so it is
    safe under a lock, from any thread, including the hub thread.
    :attr:`unfinished_tasks` counts every ``put`` ever made, like the counter of
    a ``queue.Queue`` whose ``task_done`` is never called, so
    :func:`host_bridge.testing._settle` is exact for this inbox too. After the
    actor stopped, a late ``ask`` is answered with ``pykka.ActorDeadError``.
    """

    __slots__ = ("_in", "_lock", "_out", "_runner", "_runtime", "_state", "unfinished_tasks")

    def __init__(self, runtime: GeventHub) -> None:
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
            answer_dead(envelope, "it has stopped")
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


def answer_dead(envelope: Envelope[Any], why: str) -> None:
    """Answer the caller of ``envelope`` that its actor is gone (a stop is simply done)."""
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
