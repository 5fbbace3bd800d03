"""Turn admission for a host's agent adapter: the queue, reservations, idle futures, statuses.

:class:`TurnAdmission` implements the turn-taking half of the ``Agent``
protocol, so an adapter only says how a turn starts and reports when it ended::

    class MyAgent:
        def __init__(self, agent_id, session, registry):
            self.id, self.session = agent_id, session
            self._actor = TurnActor.start(self)  # the host's own turn runner
            self._admission = TurnAdmission(
                self._actor.tell,  # start_turn(message): hand the turn over, don't run it
                lambda status: registry.notify_status(self, status),
            )

        def followup(self, message):
            self._admission.followup(message)

        def reserve_turn_admission(self):
            return self._admission.reserve()

        def when_idle(self):
            return self._admission.when_idle()

        def run_turn(self, message):  # on the TurnActor
            try:
                ...  # run the model
            finally:
                self._admission.turn_finished()

**The rules.** One turn at a time; queued messages start in order (see
``order`` in :meth:`~TurnAdmission.followup`). :meth:`~TurnAdmission.reserve`
succeeds only when the agent is *idle*: no turn running, nothing queued (a
queued message means a start is imminent) and no reservation held; while a
reservation is held no queued message starts, and its release is idempotent.
:meth:`~TurnAdmission.when_idle` resolves when the agent is idle (at once if
it is). Statuses are reported as transitions: ``"running"`` when a turn
starts after the agent was idle, ``"idle"`` when a turn ends and nothing is
queued (a turn followed at once by the next reports nothing in between), so
every ``"idle"`` follows its ``"running"``.

**The gate.** ``ready(message)`` (optional) says whether a queued message may
start yet, e.g. only once a flush covering its durable inbox entry succeeded.
A message that is not ready stays queued, blocks the messages behind it and
keeps the agent non-idle; call :meth:`~TurnAdmission.recheck` whenever
something ``ready`` reads has changed.

**Threading.** Every method may be called from any thread (or greenlet) and
never blocks. The lock is never held while host code runs: ``ready`` is
called outside it (the state is checked again afterwards), and the
call-outs — ``start_turn``, the status listener, a reservation's
``on_release``, resolving idle futures — are queued under the lock and
delivered after it is released, one at a time and in the order the state
changed, by the thread whose call changed it. If another thread is already
delivering call-outs of this admission, that thread delivers the new ones
too and the call returns at once; so a call-out may re-enter the admission
(its effects are delivered right after it returns), and ``"running"`` is
always delivered before the ``start_turn`` of the turn and before the
``"idle"`` that ends it. ``start_turn`` must only hand the turn to the
host's own runner (an actor's ``tell``) and return; the turn itself runs
there and ends with :meth:`~TurnAdmission.turn_finished`.

**Failures.** An exception from the status listener, ``on_release`` or
``ready`` (then: not ready) is logged and otherwise ignored. If
``start_turn`` raises, the turn did not start: the message is dropped with
a logged error and the turn counts as finished at once (the next message
starts, or the agent reports ``"idle"``), so a broken runner never wedges the
agent — retrying would only fail again. ``start_turn`` must therefore raise
only when it scheduled nothing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, Generic, TypeVar

from actors._contract import AgentStatus

__all__ = ["AdmissionClosedError", "AgentStatus", "TurnAdmission"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

M = TypeVar("M")

# kinds of call-outs waiting for delivery
_STATUS, _START, _RESOLVE, _CALL = range(4)


class AdmissionClosedError(RuntimeError):
    """The admission was closed (its agent disposed): it takes no more work."""


def _closed_error() -> BaseException:
    return AdmissionClosedError("the agent is disposed")


class TurnAdmission(Generic[M]):
    """The queue, reservation, idle futures and status reports of one agent.

    ``start_turn(message)`` hands a turn over to the host's runner; the host
    calls :meth:`turn_finished` when it ends. ``on_status(status)`` hears
    ``"running"``/``"idle"``. ``ready(message)`` gates queued messages (see the
    docstring of :mod:`host_bridge._admission` for the rules and the threading model).
    """

    def __init__(
        self,
        start_turn: Callable[[M], None],
        on_status: Callable[[AgentStatus], None] | None = None,
        *,
        ready: Callable[[M], bool] | None = None,
    ) -> None:
        self._start_turn = start_turn
        self._on_status = on_status
        self._ready = ready
        self._lock = threading.Lock()
        self._queue: deque[tuple[int | None, M]] = deque()
        self._running = False
        self._announced = False  # "running" reported and its "idle" not yet
        self._reservation: object | None = None
        self._waiters: list[Future[None]] = []
        self._closed: Callable[[], BaseException] | None = None
        self._version = 0  # bumped on every change that may affect a start
        self._outbox: deque[tuple[int, Any]] = deque()
        self._delivering = False

    # --- the Agent protocol's half --------------------------------------------------

    def followup(self, message: M, *, order: int | None = None) -> None:
        """Queue ``message`` for a later turn; it starts when the agent is free and it is ready.

        It goes behind every queued message; with ``order``, ahead of queued
        messages of a higher ``order`` instead (for a host that numbers its
        messages before it gets here, e.g. by log position, while another
        thread may queue one concurrently). Raises the close error when closed.
        """
        with self._lock:
            closed = self._closed
            if closed is None:
                queue = self._queue
                index = len(queue)
                if order is not None:
                    while index and (before := queue[index - 1][0]) is not None and before > order:
                        index -= 1
                queue.insert(index, (order, message))
                self._version += 1
        if closed is not None:
            raise closed()
        self._pump()
        self._deliver_all()

    def reserve(self, on_release: Callable[[], None] | None = None) -> Callable[[], None] | None:
        """Hold the idle agent idle: an idempotent ``release``, or ``None`` when not idle.

        ``None`` when a turn runs, a message is queued (a start is imminent),
        a reservation is held or the admission is closed. Messages queued
        while reserved start only after ``release()``. ``on_release`` is
        delivered once, after the first ``release()``, before any turn it lets
        start.
        """
        with self._lock:
            if not self._idle_locked():
                return None
            token = self._reservation = object()
            self._version += 1

        def release() -> None:
            with self._lock:
                if self._reservation is not token:
                    return  # released already, or closed
                self._reservation = None
                self._version += 1
                if on_release is not None:
                    self._outbox.append((_CALL, on_release))
                self._wake_waiters_locked()
            self._pump()
            self._deliver_all()

        return release

    def when_idle(self) -> Future[None]:
        """A future resolved once the agent is idle (at once if it is); fails when closed."""
        future: Future[None] = Future()
        with self._lock:
            closed = self._closed
            idle = closed is None and self._idle_locked()
            if closed is None and not idle:
                self._waiters.append(future)
        if closed is not None:
            future.set_exception(closed())
        elif idle:
            future.set_result(None)
        return future

    # --- the host's side ------------------------------------------------------------

    def turn_finished(self) -> None:
        """The turn ``start_turn`` handed over has ended: start the next one, or go idle.

        Raises ``RuntimeError`` when no turn is running (ignored once closed).
        """
        with self._lock:
            if self._closed is not None:
                return
            if not self._running:
                raise RuntimeError("turn_finished() without a running turn")
            self._finish_locked()
        self._pump()
        self._deliver_all()

    def recheck(self) -> None:
        """Something ``ready`` reads has changed: start the next message if it is ready now."""
        self._pump()
        self._deliver_all()

    def close(self, error: Callable[[], BaseException] | None = None) -> None:
        """Take no more work: drop the queue and any reservation, fail the idle futures.

        ``error()`` makes the exception the idle futures fail with and later
        calls raise (default :class:`AdmissionClosedError`). Turn starts and
        statuses not delivered yet are dropped (idle futures that were due
        still resolve). Idempotent.
        """
        with self._lock:
            if self._closed is not None:
                return
            self._closed = make = error if error is not None else _closed_error
            self._queue.clear()
            self._reservation = None
            waiters, self._waiters = self._waiters, []
            self._version += 1
        for waiter in waiters:
            with contextlib.suppress(InvalidStateError):  # cancelled by its waiter
                waiter.set_exception(make())

    # --- inspection -------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """A turn was started (or is being handed over) and has not finished."""
        return self._running

    @property
    def reserved(self) -> bool:
        """A reservation holds the agent idle."""
        return self._reservation is not None

    @property
    def idle(self) -> bool:
        """Not closed, no turn running, nothing queued, no reservation (``when_idle``)."""
        with self._lock:
            return self._idle_locked()

    @property
    def closed(self) -> bool:
        """:meth:`close` was called."""
        return self._closed is not None

    @property
    def queued(self) -> tuple[M, ...]:
        """The messages waiting for their turns, next first."""
        with self._lock:
            return tuple(message for _, message in self._queue)

    # --- internals ----------------------------------------------------------------------

    def _idle_locked(self) -> bool:
        return (
            self._closed is None
            and not self._running
            and self._reservation is None
            and not self._queue
        )

    def _startable_locked(self) -> bool:
        return (
            self._closed is None
            and not self._running
            and self._reservation is None
            and bool(self._queue)
        )

    def _start_locked(self) -> None:
        _, message = self._queue.popleft()
        self._running = True
        self._version += 1
        if not self._announced:
            self._announced = True
            self._outbox.append((_STATUS, "running"))
        self._outbox.append((_START, message))

    def _finish_locked(self) -> None:
        self._running = False
        self._version += 1
        if not self._queue:
            if self._announced:
                self._announced = False
                self._outbox.append((_STATUS, "idle"))
            self._wake_waiters_locked()

    def _wake_waiters_locked(self) -> None:
        if self._waiters and self._idle_locked():
            self._outbox.append((_RESOLVE, self._waiters))
            self._waiters = []

    def _pump(self) -> None:
        """Start the next queued message if the agent is free and the message is ready."""
        ready = self._ready
        while True:
            with self._lock:
                if not self._startable_locked():
                    return
                if ready is None:
                    self._start_locked()
                    return
                head = self._queue[0][1]
                version = self._version
            try:
                go = ready(head)
            except Exception:
                _log.exception("the ready check of a queued message failed; it waits")
                return
            if not go:
                return
            with self._lock:
                if self._version == version:
                    self._start_locked()
                    return
            # the state changed while ready() ran: look again

    def _deliver_all(self) -> None:
        """Deliver queued call-outs in order, unless another thread is delivering them."""
        if not self._outbox:
            return  # this thread queued nothing; another thread delivers what it queued
        with self._lock:
            if self._delivering or not self._outbox:
                return
            self._delivering = True
        try:
            while True:
                with self._lock:
                    if not self._outbox:
                        self._delivering = False
                        return
                    kind, payload = self._outbox.popleft()
                    closed = self._closed is not None
                self._deliver(kind, payload, closed)
        except BaseException:
            with self._lock:
                self._delivering = False
            raise

    def _deliver(self, kind: int, payload: Any, closed: bool) -> None:
        if kind == _RESOLVE:
            for waiter in payload:
                with contextlib.suppress(InvalidStateError):  # cancelled by its waiter
                    waiter.set_result(None)
        elif closed:
            return  # a closed agent starts and reports nothing more
        elif kind == _START:
            try:
                self._start_turn(payload)
            except Exception:
                _log.exception("a turn could not be started; its message is dropped")
                with self._lock:
                    if self._closed is None and self._running:
                        self._finish_locked()
                self._pump()
        elif kind == _STATUS:
            if self._on_status is not None:
                try:
                    self._on_status(payload)
                except Exception:
                    _log.exception("the status listener failed")
        else:
            try:
                payload()
            except Exception:
                _log.exception("the on_release call-back of a reservation failed")
