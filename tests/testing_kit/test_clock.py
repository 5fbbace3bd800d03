"""FakeClock, FakeTimers and Journal."""

from __future__ import annotations

import threading

import pytest

from host_bridge.protocols import Timers
from host_bridge.testing import FakeClock, FakeTimers, Journal
from host_bridge.testing._clock import DEFAULT_START_MS


def make() -> tuple[FakeClock, FakeTimers, Journal, list[str]]:
    clock = FakeClock(1_000)
    journal = Journal()
    return clock, FakeTimers(clock, journal), journal, []


def test_journal_records_in_order_and_filters() -> None:
    journal = Journal()
    journal.record("flush", "s1")
    journal.record("append", "s1", "t", {"x": 1})
    journal.record("flush", "s2")
    assert journal.kinds() == ["flush", "append", "flush"]
    assert journal.of("flush") == [("flush", "s1"), ("flush", "s2")]
    assert journal.entries()[1] == ("append", "s1", "t", {"x": 1})
    assert len(journal) == 3
    journal.clear()
    assert journal.entries() == []


def test_journal_is_thread_safe() -> None:
    journal = Journal()

    def work(n: int) -> None:
        for i in range(500):
            journal.record("k", n, i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(journal) == 2000
    for n in range(4):
        assert [e[2] for e in journal.entries() if e[1] == n] == list(range(500))


def test_clock_defaults_to_2026_and_moves_only_when_told() -> None:
    clock = FakeClock()
    assert clock() == clock.now() == DEFAULT_START_MS == 1_767_225_600_000
    clock.advance(250)
    assert clock() == DEFAULT_START_MS + 250
    assert clock.monotonic() == 250
    clock.set(5)
    assert clock() == 5
    assert clock.monotonic() == 250
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_suspend_moves_the_wall_clock_only_and_fires_nothing() -> None:
    clock, timers, _, fired = make()
    timers.call_later(10, lambda: fired.append("t"))
    clock.suspend(3_600_000)
    assert clock() == 1_000 + 3_600_000
    assert clock.monotonic() == 0
    assert timers.fire_due() == 0
    assert fired == []
    assert timers.armed() == [10]  # as late after "resume" as the sleep was long
    with pytest.raises(ValueError):
        clock.suspend(-1)


def test_fake_timers_satisfy_the_protocol() -> None:
    _, timers, _, _ = make()
    assert isinstance(timers, Timers)


def test_advance_fires_in_due_order_with_ties_in_arm_order() -> None:
    clock, timers, _, fired = make()
    timers.call_later(30, lambda: fired.append(f"c@{clock()}"))
    timers.call_later(10, lambda: fired.append(f"a@{clock()}"))
    timers.call_later(10, lambda: fired.append(f"b@{clock()}"))
    timers.call_later(31, lambda: fired.append("late"))
    assert timers.armed() == [10, 10, 30, 31]
    assert timers.advance(30) == 3
    assert fired == ["a@1010", "b@1010", "c@1030"]
    assert clock() == 1030
    assert timers.armed() == [1]
    assert timers.pending_count() == 1


def test_advance_stops_short_of_timers_due_later() -> None:
    clock, timers, _, fired = make()
    timers.call_later(100, lambda: fired.append("x"))
    assert timers.advance(99) == 0
    assert fired == []
    assert clock() == 1099
    assert timers.armed() == [1]
    timers.advance(1)
    assert fired == ["x"]


def test_cancel_is_idempotent_and_prevents_firing() -> None:
    _, timers, journal, fired = make()
    handle = timers.call_later(5, lambda: fired.append("x"))
    handle.cancel()
    handle.cancel()
    assert timers.advance(10) == 0
    assert fired == []
    assert timers.pending_count() == 0
    assert journal.entries() == [("timer-armed", 5), ("timer-cancelled",)]


def test_cancel_after_firing_records_nothing() -> None:
    _, timers, journal, _ = make()
    handle = timers.call_later(0, lambda: None)
    timers.fire_due()
    handle.cancel()
    assert journal.kinds() == ["timer-armed", "timer-fired"]
    assert handle.fired and not handle.cancelled


def test_wall_clock_rollback_neither_fires_nor_moves_timers() -> None:
    clock, timers, _, fired = make()
    timers.call_later(100, lambda: fired.append(f"x@{clock()}"))
    clock.set(-50_000)
    assert timers.fire_due() == 0
    assert timers.armed() == [100]
    clock.set(10**12)
    assert timers.fire_due() == 0
    assert fired == []
    timers.advance(100)
    assert fired == [f"x@{10**12 + 100}"]


def test_advance_fires_timers_armed_by_callbacks_within_the_window() -> None:
    clock, timers, _, fired = make()

    def chain(step: int) -> None:
        fired.append(f"{step}@{clock()}")
        if step < 5:
            timers.call_later(20, lambda: chain(step + 1))

    timers.call_later(20, lambda: chain(1))
    assert timers.advance(70) == 3
    assert fired == ["1@1020", "2@1040", "3@1060"]
    assert clock() == 1070
    assert timers.armed() == [10]


def test_zero_delay_timer_armed_by_a_callback_fires_in_the_same_advance() -> None:
    _, timers, _, fired = make()

    def arm_zero() -> None:
        timers.call_later(0, lambda: fired.append("zero"))

    timers.call_later(5, arm_zero)
    timers.advance(5)
    assert fired == ["zero"]


def test_clock_advance_then_fire_due() -> None:
    clock, timers, _, fired = make()
    timers.call_later(10, lambda: fired.append("a"))
    timers.call_later(20, lambda: fired.append("b"))
    clock.advance(15)
    assert fired == []
    assert timers.fire_due() == 1
    assert fired == ["a"]


def test_run_next_fires_the_earliest_and_moves_the_clock() -> None:
    clock, timers, journal, fired = make()
    timers.call_later(2**31 - 1, lambda: fired.append("far"))
    timers.call_later(500, lambda: fired.append("near"))
    assert timers.run_next()
    assert fired == ["near"]
    assert clock() == 1500
    assert timers.run_next()
    assert clock() == 1000 + 2**31 - 1
    assert not timers.run_next()
    assert journal.kinds() == ["timer-armed", "timer-armed", "timer-fired", "timer-fired"]


def test_negative_delay_counts_as_zero() -> None:
    _, timers, journal, fired = make()
    timers.call_later(-5, lambda: fired.append("x"))
    assert timers.armed() == [0]
    assert timers.fire_due() == 1
    assert journal.of("timer-armed") == [("timer-armed", -5)]


def test_callback_errors_propagate_and_leave_later_timers_armed() -> None:
    clock, timers, _, fired = make()

    def boom() -> None:
        raise RuntimeError("boom")

    timers.call_later(1, boom)
    timers.call_later(2, lambda: fired.append("next"))
    with pytest.raises(RuntimeError):
        timers.advance(5)
    assert clock() == 1001  # stopped at the failed timer's due point
    assert timers.armed() == [1]
    timers.advance(1)
    assert fired == ["next"]


def test_endless_rearming_is_reported() -> None:
    _, timers, _, _ = make()

    def again() -> None:
        timers.call_later(0, again)

    timers.call_later(0, again)
    with pytest.raises(RuntimeError):
        timers.fire_due()


def test_arming_from_other_threads() -> None:
    _, timers, _, fired = make()
    lock = threading.Lock()

    def arm(n: int) -> None:
        for i in range(100):
            timers.call_later(i, lambda: _append(lock, fired, "x"))

    threads = [threading.Thread(target=arm, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert timers.pending_count() == 400
    assert timers.advance(99) == 400
    assert len(fired) == 400


def _append(lock: threading.Lock, items: list[str], item: str) -> None:
    with lock:
        items.append(item)
