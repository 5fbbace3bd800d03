"""GeventFuture (get, join, map, timeouts, callbacks), waiting helpers and GeventTimers."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

import pykka
import pytest

from actors._runtime import BlockingInHubError, run_blocking, wait_for
from actors.gevent import GeventFuture, GeventRuntime, GeventTimers, default_runtime


@pytest.fixture
def hub_runtime() -> GeventRuntime:
    return default_runtime()


def on_hub(hub_runtime: GeventRuntime, function: Any) -> Any:
    """Run ``function`` in a greenlet of the hub and return what it returned (or raise)."""
    outcome: Future[Any] = Future()

    def run() -> None:
        try:
            outcome.set_result(function())
        except BaseException as error:
            outcome.set_exception(error)

    hub_runtime.spawn(run)
    return outcome.result(timeout=5)


def in_hub_callback(hub_runtime: GeventRuntime, function: Any) -> Any:
    """Run ``function`` in the hub greenlet itself (a loop callback)."""
    outcome: Future[Any] = Future()

    def run() -> None:
        try:
            outcome.set_result(function())
        except BaseException as error:
            outcome.set_exception(error)

    hub_runtime.call_soon(run)
    return outcome.result(timeout=5)


# --- the future --------------------------------------------------------------------------


def test_get_value_exception_and_timeout() -> None:
    future: GeventFuture[int] = GeventFuture()
    with pytest.raises(pykka.Timeout):
        future.get(timeout=0.01)
    future.set(3)
    assert future.done() and future.get() == 3 and future.get(timeout=0) == 3
    with pytest.raises(queue.Full):
        future.set(4)
    failing: GeventFuture[int] = GeventFuture()
    try:
        raise KeyError("k")
    except KeyError:
        failing.set_exception()
    with pytest.raises(KeyError):
        failing.get()
    with pytest.raises(queue.Full):
        failing.set_get_hook(lambda timeout: 1)


def test_map_join_filter_reduce_and_get_all() -> None:
    first: GeventFuture[int] = GeventFuture()
    second: GeventFuture[int] = GeventFuture()
    items: pykka.Future[Iterable[int]] = GeventFuture()
    mapped = first.map(lambda v: v * 10)
    joined = first.join(second)
    filtered = items.filter(lambda v: v > 1)
    reduced = items.reduce(lambda a, b: a + b)
    with pytest.raises(pykka.Timeout):
        joined.get(timeout=0.01)
    first.set(1)
    second.set(2)
    items.set([1, 2, 3])
    assert mapped.get(timeout=1) == 10
    assert list(joined.get(timeout=1)) == [1, 2]
    assert list(filtered.get(timeout=1)) == [2, 3]
    assert reduced.get(timeout=1) == 6
    assert list(pykka.get_all([first, second], timeout=1)) == [1, 2]


def test_set_from_another_thread_wakes_thread_and_greenlet_waiters(
    hub_runtime: GeventRuntime,
) -> None:
    future: GeventFuture[str] = GeventFuture(hub_runtime)
    in_greenlet: Future[str] = Future()

    def greenlet_waiter() -> None:
        in_greenlet.set_result(future.get(timeout=5))

    hub_runtime.spawn(greenlet_waiter)
    setter = threading.Thread(target=future.set, args=("v",))
    setter.start()
    assert future.get(timeout=5) == "v"
    assert in_greenlet.result(timeout=5) == "v"
    setter.join()


def test_done_callbacks_run_in_a_greenlet_of_the_hub(hub_runtime: GeventRuntime) -> None:
    future: GeventFuture[int] = GeventFuture(hub_runtime)
    seen: queue.Queue[tuple[str, int]] = queue.Queue()

    def callback(done: GeventFuture[int]) -> None:
        seen.put((threading.current_thread().name, done.get()))

    future.add_done_callback(callback)  # before it is set
    future.set(7)
    future.add_done_callback(callback)  # after
    mapped = future.map(lambda v: v + 1)
    assert isinstance(mapped, GeventFuture)
    mapped.add_done_callback(lambda done: seen.put(("mapped", done.get())))  # a hooked future
    got = sorted(seen.get(timeout=5) for _ in range(3))
    assert got == [("dsh-gevent-hub", 7), ("dsh-gevent-hub", 7), ("mapped", 8)]


def test_waiting_inside_the_hub_greenlet_is_an_error_not_a_hang(hub_runtime: GeventRuntime) -> None:
    future: GeventFuture[int] = GeventFuture(hub_runtime)
    pending: Future[int] = Future()
    with pytest.raises(BlockingInHubError):
        in_hub_callback(hub_runtime, lambda: future.get(timeout=5))
    with pytest.raises(BlockingInHubError):
        in_hub_callback(hub_runtime, lambda: wait_for(pending, timeout=5))
    with pytest.raises(BlockingInHubError):
        in_hub_callback(hub_runtime, lambda: run_blocking(int))
    done: Future[int] = Future()
    done.set_result(1)
    assert in_hub_callback(hub_runtime, lambda: wait_for(done)) == 1  # nothing to wait for


def test_wait_for_in_a_greenlet_times_out_and_resolves_across_threads(
    hub_runtime: GeventRuntime,
) -> None:
    never: Future[int] = Future()
    with pytest.raises(TimeoutError):
        on_hub(hub_runtime, lambda: wait_for(never, timeout=0.01))
    later: Future[int] = Future()
    result: Future[int] = Future()
    hub_runtime.spawn(lambda: result.set_result(wait_for(later, timeout=5)))
    later.set_result(5)  # from this thread
    assert result.result(timeout=5) == 5


# --- timers ------------------------------------------------------------------------------


def test_timers_fire_once_in_due_order_on_the_hub(hub_runtime: GeventRuntime) -> None:
    timers = GeventTimers(hub_runtime)
    fired: queue.Queue[tuple[str, str]] = queue.Queue()

    def fire(name: str) -> None:
        fired.put((name, threading.current_thread().name))

    timers.call_later(30, lambda: fire("late"))
    timers.call_later(-5, lambda: fire("now"))
    timers.call_later(10, lambda: fire("soon"))
    assert [fired.get(timeout=5)[0] for _ in range(3)] == ["now", "soon", "late"]
    assert timers.pending() == 0
    timers.close()


def test_cancel_from_a_foreign_thread_and_close(hub_runtime: GeventRuntime) -> None:
    timers = GeventTimers(hub_runtime)
    fired: queue.Queue[str] = queue.Queue()
    cancelled = timers.call_later(5, lambda: fired.put("cancelled"))
    cancelled.cancel()
    cancelled.cancel()  # idempotent
    timers.call_later(20, lambda: fired.put("sentinel"))
    assert fired.get(timeout=5) == "sentinel"  # a later timer fired; the cancelled one never
    assert fired.empty()
    far = timers.call_later(60_000, lambda: fired.put("far"))
    assert timers.pending() == 1
    timers.close()
    assert far.cancelled and timers.pending() == 0
    with pytest.raises(RuntimeError):
        timers.call_later(1, lambda: None)


def test_arming_and_cancelling_on_the_hub_thread(hub_runtime: GeventRuntime) -> None:
    timers = GeventTimers(hub_runtime)
    fired: queue.Queue[str] = queue.Queue()

    def arm() -> None:
        handle = timers.call_later(1, lambda: fired.put("x"))
        handle.cancel()
        timers.call_later(2, lambda: fired.put("y"))

    on_hub(hub_runtime, arm)
    assert fired.get(timeout=5) == "y"
    assert fired.empty()
    timers.close()


def test_a_failing_callback_is_logged_and_the_hub_goes_on(
    hub_runtime: GeventRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    timers = GeventTimers(hub_runtime)
    fired: queue.Queue[str] = queue.Queue()

    def fail() -> None:
        raise RuntimeError("callback failed")

    with caplog.at_level(logging.ERROR, logger="dsh_schedule.actors.gevent"):
        timers.call_later(0, fail)
        timers.call_later(5, lambda: fired.put("after"))
        assert fired.get(timeout=5) == "after"
    assert "timer callback failed" in caplog.text
    timers.close()
