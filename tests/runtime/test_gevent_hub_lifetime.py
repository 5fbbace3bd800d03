"""The hub of a gevent runtime lives until close, and a hub that stops anyway fails fast.

The hub once died with ``LoopExit`` under load: foreign threads handed work over
with ``loop.run_callback_threadsafe``, which changes the libev loop's count of
active watchers while the hub thread changes it too, without the GIL. A lost
update left the loop one watcher short, so it returned once the work drained.
These tests pin the fix (foreign threads only ring the runtime's async
doorbell) and the fail-fast path for a hub that stops anyway. They force the
interleavings through seams: the hub is parked inside one of its callbacks,
and a "lost update" is one ``loop.unref()``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event
import gevent.exceptions
import pykka
import pytest

from actors._base import MailboxActor
from actors._runtime import run_blocking
from actors.gevent import GeventFuture, GeventRuntime, GeventRuntimeError
from actors.gevent import _hub as gevent_hub

HANG_GUARD_S = 5.0
"""How long a test waits for something that must happen (a guard against hangs only)."""


@dataclass(frozen=True)
class Where:
    pass


@dataclass(frozen=True)
class Hang:
    """Handled by waiting in a greenlet for an event nobody sets (no watcher to wake it)."""

    entered: threading.Event


@dataclass(frozen=True)
class Compute:
    function: Any


class Worker(MailboxActor):
    def handle_Where(self, message: Where) -> str:
        return threading.current_thread().name

    def handle_Hang(self, message: Hang) -> None:
        message.entered.set()
        gevent.event.Event().wait()

    def handle_Compute(self, message: Compute) -> Any:
        return message.function()


@pytest.fixture
def hub_runtime(request: pytest.FixtureRequest) -> Iterator[GeventRuntime]:
    hub_runtime = GeventRuntime(thread_name=f"dsh-test-{request.node.name[:40]}")
    yield hub_runtime
    hub_runtime.close(timeout=HANG_GUARD_S)


@contextmanager
def parked_hub(hub_runtime: GeventRuntime) -> Iterator[None]:
    """Hold the hub thread inside one of its callbacks until the block ends."""
    parked, release = threading.Event(), threading.Event()

    def park() -> None:
        parked.set()
        release.wait(HANG_GUARD_S)

    hub_runtime.call_soon(park)
    assert parked.wait(HANG_GUARD_S)
    try:
        yield
    finally:
        release.set()


def active_watchers(hub_runtime: GeventRuntime) -> int:
    """The libev loop's count of referenced active watchers (its reason to keep running)."""
    count = getattr(hub_runtime.hub.loop, "activecnt", None)
    if not isinstance(count, int):
        pytest.skip("this gevent loop does not expose activecnt")
    return count


def test_hand_offs_from_other_threads_leave_the_loop_watcher_count_alone(
    hub_runtime: GeventRuntime,
) -> None:
    """The count is plain C state the hub thread changes without the GIL: no one else may."""
    ref = hub_runtime.bind(Worker).start()
    assert ref.ask(Where(), timeout=HANG_GUARD_S) == hub_runtime.thread.name  # type: ignore[union-attr]
    timers = hub_runtime.timers()
    fired: Future[bool] = Future()
    ran: Future[bool] = Future()
    called_back: Future[Any] = Future()
    try:
        with parked_hub(hub_runtime):
            before = active_watchers(hub_runtime)
            pending = ref.ask(Where(), block=False)  # the idle actor's runner is handed over
            timers.call_later(0, lambda: fired.set_result(True))
            timers.call_later(60_000, lambda: None).cancel()
            hub_runtime.call_soon(ran.set_result, True)
            settled: GeventFuture[str] = GeventFuture(hub_runtime)
            settled.add_done_callback(lambda future: called_back.set_result(future.get()))
            settled.set("value")  # its callback is handed over too
            assert active_watchers(hub_runtime) == before
        # and everything handed over while the hub was parked did run
        assert pending.get(timeout=HANG_GUARD_S) == hub_runtime.thread.name  # type: ignore[union-attr]
        assert fired.result(HANG_GUARD_S) is True
        assert ran.result(HANG_GUARD_S) is True
        assert called_back.result(HANG_GUARD_S) == "value"
    finally:
        timers.close()


def test_a_burst_of_hand_offs_lets_due_timers_run_and_keeps_its_order(
    hub_runtime: GeventRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gevent_hub, "HANDOFF_BUDGET_S", 0.0)  # one hand-off per turn
    timers = hub_runtime.timers()
    ran: list[int] = []
    seen_by_timer: Future[int] = Future()
    all_ran: Future[list[int]] = Future()
    try:
        with parked_hub(hub_runtime):
            timers.call_later(0, lambda: seen_by_timer.set_result(len(ran)))  # due at once
            for number in range(100):
                hub_runtime.call_soon(ran.append, number)
            hub_runtime.call_soon(lambda: all_ran.set_result(list(ran)))
        assert all_ran.result(HANG_GUARD_S) == list(range(100))
        assert seen_by_timer.result(HANG_GUARD_S) < 100  # it did not wait for the burst
    finally:
        timers.close()


def test_a_hub_that_stops_unexpectedly_fails_fast_and_closes_cleanly(
    hub_runtime: GeventRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="dsh_schedule.actors.gevent")
    ref = hub_runtime.bind(Worker).start()
    entered = threading.Event()
    in_flight = ref.ask(Hang(entered), block=False)
    assert entered.wait(HANG_GUARD_S)  # its greenlet now waits with nothing to wake it
    thread = hub_runtime.thread
    assert thread is not None

    # The lost update, forced: the loop counts one referenced watcher fewer than it
    # has, so with the doorbell as its only one it returns and the hub gets LoopExit.
    hub_runtime.call_soon(hub_runtime.hub.loop.unref)

    with pytest.raises(GeventRuntimeError, match="stopped unexpectedly"):
        in_flight.get(timeout=HANG_GUARD_S)  # an error, not a wait for an answer never sent
    assert isinstance(hub_runtime.failure, gevent.exceptions.LoopExit)
    assert any(
        record.levelno == logging.CRITICAL and "stopped unexpectedly" in record.getMessage()
        for record in caplog.records
    )
    with pytest.raises(GeventRuntimeError, match="stopped unexpectedly"):
        hub_runtime.call_soon(lambda: None)
    late: GeventFuture[str] = GeventFuture(hub_runtime)
    with pytest.raises(GeventRuntimeError, match="stopped unexpectedly"):
        late.get(timeout=HANG_GUARD_S)

    hub_runtime.close()  # neither "operation on destroyed loop" nor a hang
    with pytest.raises(pykka.ActorDeadError):
        ref.tell(Where())
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive()


def test_close_wakes_a_thread_waiting_on_an_ask_in_flight(hub_runtime: GeventRuntime) -> None:
    ref = hub_runtime.bind(Worker).start()
    entered = threading.Event()
    in_flight = ref.ask(Hang(entered), block=False)
    assert entered.wait(HANG_GUARD_S)  # the runner took it: close has nothing queued to answer
    outcome: Future[Any] = Future()

    def waiter() -> None:
        try:
            outcome.set_result(in_flight.get())  # no timeout: only close can end this wait
        except BaseException as error:
            outcome.set_exception(error)

    thread = threading.Thread(target=waiter, name="ask-waiter", daemon=True)
    thread.start()
    hub_runtime.close()
    with pytest.raises(GeventRuntimeError, match="closed"):
        outcome.result(HANG_GUARD_S)
    thread.join(HANG_GUARD_S)


def test_runtime_wait_fails_fast_once_the_runtime_is_closed(hub_runtime: GeventRuntime) -> None:
    never: Future[int] = Future()
    hub_runtime.close()
    with pytest.raises(GeventRuntimeError, match="closed"):
        hub_runtime.wait(never, timeout=HANG_GUARD_S)
    done: Future[int] = Future()
    done.set_result(7)
    assert hub_runtime.wait(done) == 7  # a settled future needs no hub


def test_close_is_bounded_and_reports_a_hub_that_does_not_stop(
    hub_runtime: GeventRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="dsh_schedule.actors.gevent")
    ref = hub_runtime.bind(Worker).start()
    assert ref.ask(Where(), timeout=HANG_GUARD_S)
    thread = hub_runtime.thread
    assert thread is not None
    with parked_hub(hub_runtime):  # the hub is stuck in a callback
        queued = ref.ask(Where(), block=False)
        hub_runtime.close(timeout=0)  # returns at once instead of waiting for the stuck hub
        assert any("did not stop" in record.getMessage() for record in caplog.records)
        with pytest.raises(pykka.ActorDeadError):
            queued.get(timeout=HANG_GUARD_S)
        assert thread.is_alive()
    thread.join(HANG_GUARD_S)  # released, the hub sees the stop it was sent and exits
    assert not thread.is_alive()


def test_blocking_calls_run_off_the_hub_and_their_errors_reach_the_caller(
    hub_runtime: GeventRuntime,
) -> None:
    ref = hub_runtime.bind(Worker).start()

    def where() -> str:
        return threading.current_thread().name

    thread_name = ref.ask(Compute(lambda: run_blocking(where)), timeout=HANG_GUARD_S)
    assert str(thread_name).startswith("dsh-gevent-offload-")
    with pytest.raises(ValueError, match="invalid literal"):
        ref.ask(Compute(lambda: run_blocking(int, "not a number")), timeout=HANG_GUARD_S)
