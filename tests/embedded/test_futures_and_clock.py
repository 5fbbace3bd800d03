"""Future helpers (resolved/failed/chain/from_pykka) and the clock and timer service."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, Future
from typing import Any

import pykka
import pytest

from actors._clock import default_timers
from host_bridge import ThreadTimers
from host_bridge._futures import chain, failed, from_pykka, resolved
from host_bridge.protocols import Cancellable, Timers, wall_clock_ms

TIMEOUT = 5.0


@pytest.fixture
def timers() -> Iterator[ThreadTimers]:
    service = ThreadTimers(name="test-timers")
    yield service
    service.close()


# --- futures --------------------------------------------------------------------------------


def test_resolved_and_failed() -> None:
    assert resolved(3).result(0) == 3
    error = ValueError("x")
    future = failed(error)
    assert future.done()
    assert future.exception(0) is error


def test_chain_copies_success_and_failure() -> None:
    source: Future[int] = Future()
    target: Future[int] = Future()
    chain(source, target)
    assert not target.done()
    source.set_result(7)
    assert target.result(0) == 7
    bad_source: Future[int] = Future()
    bad_target: Future[int] = Future()
    chain(bad_source, bad_target)
    error = KeyError("k")
    bad_source.set_exception(error)
    assert bad_target.exception(0) is error


def test_chain_leaves_a_settled_target_alone() -> None:
    source: Future[int] = Future()
    target: Future[int] = Future()
    target.set_result(1)
    chain(source, target)
    source.set_result(2)
    assert target.result(0) == 1


def test_chain_propagates_cancellation() -> None:
    source: Future[int] = Future()
    target: Future[int] = Future()
    chain(source, target)
    assert source.cancel()
    with pytest.raises(CancelledError):
        target.result(TIMEOUT)


class Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Exception):
            raise message
        return message


def test_from_pykka_adapts_an_actor_reply() -> None:
    ref = Echo.start()
    adapted = from_pykka(ref.ask("hello", block=False))
    assert isinstance(adapted, Future)
    assert adapted.result(TIMEOUT) == "hello"


def test_from_pykka_adapts_a_failure() -> None:
    ref = Echo.start()
    adapted = from_pykka(ref.ask(LookupError("nope"), block=False))
    error = adapted.exception(TIMEOUT)
    assert isinstance(error, LookupError)
    assert str(error) == "nope"


def test_from_pykka_waits_for_a_later_value() -> None:
    pending: pykka.ThreadingFuture[int] = pykka.ThreadingFuture()
    adapted = from_pykka(pending)
    seen: list[int] = []
    settled = threading.Event()

    def on_done(done: Future[Any]) -> None:
        seen.append(done.result())
        settled.set()

    adapted.add_done_callback(on_done)
    assert not adapted.done()
    pending.set(42)
    assert settled.wait(TIMEOUT)
    assert seen == [42]


def test_from_pykka_can_wait_on_a_caller_supplied_thread() -> None:
    ran: list[Callable[[], None]] = []
    pending: pykka.ThreadingFuture[str] = pykka.ThreadingFuture()
    adapted = from_pykka(pending, on_thread=ran.append)
    assert len(ran) == 1
    assert not adapted.done()
    pending.set("v")
    ran[0]()  # the caller's "pool" runs the wait
    assert adapted.result(0) == "v"


def test_from_pykka_survives_a_cancelled_adapter() -> None:
    pending: pykka.ThreadingFuture[str] = pykka.ThreadingFuture()
    ran: list[Callable[[], None]] = []
    adapted = from_pykka(pending, on_thread=ran.append)
    assert adapted.cancel()
    pending.set("late")
    ran[0]()  # must not raise InvalidStateError
    assert adapted.cancelled()


# --- clock ----------------------------------------------------------------------------------


def test_wall_clock_is_integer_epoch_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    now = wall_clock_ms()
    after = time.time_ns() // 1_000_000
    assert isinstance(now, int)
    assert before <= now <= after


def test_default_timers_is_one_shared_service() -> None:
    assert default_timers() is default_timers()
    assert isinstance(default_timers(), Timers)


# --- ThreadTimers ---------------------------------------------------------------------------


def test_callbacks_run_in_due_order_on_one_thread(timers: ThreadTimers) -> None:
    order: list[str] = []
    threads: set[threading.Thread] = set()
    done = threading.Event()

    def record(label: str) -> Callable[[], None]:
        def callback() -> None:
            threads.add(threading.current_thread())
            order.append(label)
            if label == "last":
                done.set()

        return callback

    timers.call_later(60, record("last"))
    timers.call_later(40, record("c"))
    timers.call_later(0, record("a"))
    timers.call_later(20, record("b1"))
    timers.call_later(20, record("b2"))  # equal delays: in arming order
    timers.call_later(-5, record("a2"))  # negative counts as 0
    assert done.wait(TIMEOUT)
    assert order == ["a", "a2", "b1", "b2", "c", "last"]
    assert len(threads) == 1
    (thread,) = threads
    assert thread.name == "test-timers"
    assert thread.daemon


def test_cancel_stops_a_callback_and_is_idempotent(timers: ThreadTimers) -> None:
    order: list[str] = []
    done = threading.Event()
    cancelled = timers.call_later(10, lambda: order.append("cancelled"))
    assert isinstance(cancelled, Cancellable)
    timers.call_later(5, lambda: order.append("kept"))
    timers.call_later(30, done.set)
    assert timers.pending() == 3
    cancelled.cancel()
    cancelled.cancel()
    assert timers.pending() == 2
    assert done.wait(TIMEOUT)
    assert order == ["kept"]
    assert timers.pending() == 0


def test_cancel_after_firing_is_harmless(timers: ThreadTimers) -> None:
    fired = threading.Event()
    handle = timers.call_later(0, fired.set)
    assert fired.wait(TIMEOUT)
    handle.cancel()
    again = threading.Event()
    timers.call_later(0, again.set)
    assert again.wait(TIMEOUT)


def test_a_failing_callback_does_not_stop_the_service(timers: ThreadTimers) -> None:
    def boom() -> None:
        raise RuntimeError("callback bug")

    after = threading.Event()
    timers.call_later(0, boom)
    timers.call_later(1, after.set)
    assert after.wait(TIMEOUT)


def test_an_earlier_timer_armed_later_still_fires_first(timers: ThreadTimers) -> None:
    fired = threading.Event()
    late = timers.call_later(60_000, lambda: None)  # the thread now waits ~a minute
    timers.call_later(0, fired.set)
    assert fired.wait(TIMEOUT)  # the new head woke it
    late.cancel()


def test_close_stops_the_thread_and_drops_armed_callbacks() -> None:
    service = ThreadTimers(name="test-timers-close")
    ran: list[str] = []
    warmed = threading.Event()
    service.call_later(0, warmed.set)
    assert warmed.wait(TIMEOUT)
    service.call_later(60_000, lambda: ran.append("never"))
    service.close()
    assert not [t for t in threading.enumerate() if t.name == "test-timers-close"]
    assert service.pending() == 0
    with pytest.raises(RuntimeError, match="closed"):
        service.call_later(0, lambda: ran.append("after close"))
    service.close()  # idempotent
    assert ran == []


def test_close_from_inside_a_callback_does_not_deadlock() -> None:
    service = ThreadTimers(name="test-timers-self-close")
    closed = threading.Event()

    def close_self() -> None:
        service.close()
        closed.set()

    service.call_later(0, close_self)
    assert closed.wait(TIMEOUT)
    with pytest.raises(RuntimeError):
        service.call_later(0, lambda: None)


def test_close_before_any_timer_is_fine() -> None:
    service = ThreadTimers(name="test-timers-unused")
    service.close()
    assert not [t for t in threading.enumerate() if t.name == "test-timers-unused"]


def test_a_cancelled_timer_does_not_keep_its_callback_alive(timers: ThreadTimers) -> None:
    """Owners re-arm far-future timers on every drive; cancelled ones must not pile up."""

    class Callback:
        def __call__(self) -> None:
            raise AssertionError("cancelled callback ran")

    callback = Callback()
    ref = weakref.ref(callback)
    handle = timers.call_later(2**31 - 1, callback)
    handle.cancel()
    del callback
    gc.collect()
    assert ref() is None
    for _ in range(5_000):
        timers.call_later(2**31 - 1, lambda: None).cancel()
    assert timers.pending() == 0
    fired = threading.Event()
    timers.call_later(0, fired.set)
    assert fired.wait(TIMEOUT)
