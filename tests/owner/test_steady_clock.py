"""The steady clock: a forward wall-clock step is taken only once it held; a step back at once.

The state machine is tested on plain numbers (table-driven, and a property:
never a reading above the wall clock's), the clock object on a ``FakeClock``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors._clock import DEFAULT_CLOCK_JUMP_TOLERANCE_MS
from host_bridge._steady_clock import SteadyClock, SteadyState, steady_reading, upper_reading
from host_bridge.testing import FakeClock

SECOND = 1000
HOUR = 3_600_000
DAY = 24 * HOUR
TOL = DEFAULT_CLOCK_JUMP_TOLERANCE_MS
CONFIRM = 5 * SECOND
B = 1_767_225_600_000  # the confirmed offset (wall − monotonic) of the table
M = 40 * SECOND  # monotonic time of a reading
P = 30 * SECOND  # when the pending step of the table was first seen


@pytest.mark.parametrize(
    ("state", "wall", "mono", "after", "reading"),
    [
        pytest.param(SteadyState(), B + M, M, SteadyState(B), B + M, id="first reading"),
        pytest.param(
            SteadyState(B), B + M + TOL, M, SteadyState(B), B + M + TOL, id="in tolerance"
        ),
        pytest.param(
            SteadyState(B, B + DAY, P, 2),
            B + M,
            M,
            SteadyState(B, steps=2),
            B + M,
            id="a glitch corrected: pending dropped",
        ),
        pytest.param(
            SteadyState(B),
            B + M - HOUR,
            M,
            SteadyState(B - HOUR, steps=1, before_back=B, back_at=M),
            B + M - HOUR,
            id="back: taken at once",
        ),
        pytest.param(
            SteadyState(B, B + DAY, P),
            B + M - HOUR,
            M,
            SteadyState(B - HOUR, steps=1, before_back=B, back_at=M),
            B + M - HOUR,
            id="back while a step is pending",
        ),
        pytest.param(
            SteadyState(B),
            B + M + DAY,
            M,
            SteadyState(B, B + DAY, M),
            B + M,
            id="forward: held, the old timeline",
        ),
        pytest.param(
            SteadyState(B),
            B + M + TOL + 1,
            M,
            SteadyState(B, B + TOL + 1, M),
            B + M,
            id="forward just past the tolerance",
        ),
        pytest.param(
            SteadyState(B, B + DAY, P),
            B + P + CONFIRM - 1 + DAY,
            P + CONFIRM - 1,
            SteadyState(B, B + DAY, P),
            B + P + CONFIRM - 1,
            id="forward: still holding",
        ),
        pytest.param(
            SteadyState(B, B + DAY, P),
            B + P + CONFIRM + DAY,
            P + CONFIRM,
            SteadyState(B + DAY, steps=1),
            B + P + CONFIRM + DAY,
            id="forward: held, taken",
        ),
        pytest.param(
            SteadyState(B, B + DAY, P),
            B + P + CONFIRM + DAY + TOL,
            P + CONFIRM,
            SteadyState(B + DAY + TOL, steps=1),
            B + P + CONFIRM + DAY + TOL,
            id="forward: drifting within the tolerance of the step still holds",
        ),
        pytest.param(
            SteadyState(B, B + DAY, P),
            B + P + CONFIRM + HOUR,
            P + CONFIRM,
            SteadyState(B, B + HOUR, P + CONFIRM),
            B + P + CONFIRM,
            id="another forward step starts holding anew",
        ),
    ],
)
def test_steady_reading(
    state: SteadyState, wall: int, mono: int, after: SteadyState, reading: int
) -> None:
    assert steady_reading(state, wall, mono, tolerance_ms=TOL, confirm_ms=CONFIRM) == (
        after,
        reading,
    )


def test_a_zero_confirmation_takes_a_forward_step_at_once() -> None:
    state = SteadyState(B, steps=3)
    assert steady_reading(state, B + M + DAY, M, tolerance_ms=TOL, confirm_ms=0) == (
        SteadyState(B + DAY, steps=4),
        B + M + DAY,
    )


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10 * SECOND),  # monotonic time passing
            st.sampled_from([0, 0, 1, -1, TOL, TOL + 1, -TOL - 1, HOUR, -HOUR, DAY, -DAY]),
        ),
        max_size=40,
    )
)
def test_a_reading_is_never_above_the_wall_clock_and_below_it_only_while_a_step_holds(
    moves: list[tuple[int, int]],
) -> None:
    state, wall, mono = SteadyState(), B, 0
    for passed, step in moves:
        mono += passed
        wall += passed + step
        state, reading = steady_reading(state, wall, mono, tolerance_ms=TOL, confirm_ms=CONFIRM)
        assert reading <= wall
        if reading < wall:
            assert state.pending is not None and state.offset is not None
            assert reading == state.offset + mono


# --- the clock object ------------------------------------------------------------------------


def steady(fake: FakeClock, confirm_ms: int = CONFIRM) -> SteadyClock:
    return SteadyClock(fake, fake.monotonic, confirm_ms)


def test_a_glitch_ahead_corrected_within_the_interval_is_never_seen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeClock()
    clock = steady(fake)
    start = clock()
    fake.set(start + DAY)
    assert clock() == start  # the timeline from before the glitch
    fake.advance(3 * SECOND)
    assert clock() == start + 3 * SECOND
    fake.set(fake.now() - DAY)
    with caplog.at_level(logging.INFO, logger="dsh_schedule"):
        assert clock() == start + 3 * SECOND
    assert clock.state == SteadyState(start, steps=0)
    assert "ahead and back within 3000 ms; the step was ignored" in caplog.text


def test_a_step_that_holds_is_taken_after_the_interval() -> None:
    fake = FakeClock()
    clock = steady(fake)
    start = clock()
    fake.suspend(8 * HOUR)  # a resume: the wall clock moved, monotonic time did not
    assert clock() == start
    fake.advance(CONFIRM - 1)
    assert clock() == start + CONFIRM - 1
    fake.advance(1)
    assert clock() == fake.now() == start + 8 * HOUR + CONFIRM
    assert clock.state.steps == 1


def test_a_step_back_is_taken_at_once() -> None:
    fake = FakeClock()
    clock = steady(fake)
    start = clock()
    fake.set(start - HOUR)
    assert clock() == start - HOUR
    assert clock.state.steps == 1


@pytest.mark.parametrize("bad", [None, 1.5, math.nan, True, "x"])
def test_a_reading_that_is_not_an_int_is_passed_on_and_changes_nothing(bad: Any) -> None:
    fake = FakeClock()
    readings = [fake(), bad, fake() + DAY]
    clock = SteadyClock(lambda: readings.pop(0), fake.monotonic, CONFIRM)
    first = clock()
    assert clock() is bad
    assert clock.state == SteadyState(first)
    assert clock() == first  # the step after it is held as usual


def test_a_raising_clock_raises_and_changes_nothing() -> None:
    fake = FakeClock()
    calls = [0]

    def flaky() -> int:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError("no clock")
        return fake()

    clock = SteadyClock(flaky, fake.monotonic, CONFIRM)
    first = clock()
    with pytest.raises(OSError, match="no clock"):
        clock()
    assert clock.state == SteadyState(first)
    assert clock() == first


def test_a_monotonic_clock_that_is_not_an_int_makes_the_reading_raise() -> None:
    fake = FakeClock()
    clock = SteadyClock(fake, lambda: 1.5, CONFIRM)  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="monotonic clock returned a float"):
        clock()


@pytest.mark.parametrize(
    ("state", "wall", "mono", "upper"),
    [
        pytest.param(SteadyState(B), B + M, M, B + M, id="steady: the wall reading"),
        pytest.param(
            SteadyState(B, B + DAY, P), B + M + DAY, M, B + M + DAY, id="forward held: the wall"
        ),
        pytest.param(
            SteadyState(B - HOUR, steps=1, before_back=B, back_at=M - SECOND),
            B + M - HOUR,
            M,
            B + M,
            id="just after a step back: the timeline before it",
        ),
        pytest.param(
            SteadyState(B - HOUR, steps=1, before_back=B, back_at=M - CONFIRM),
            B + M - HOUR,
            M,
            B + M - HOUR,
            id="a step back that held: the wall",
        ),
    ],
)
def test_the_upper_reading_is_the_higher_timeline_in_doubt(
    state: SteadyState, wall: int, mono: int, upper: int
) -> None:
    assert upper_reading(state, wall, mono, confirm_ms=CONFIRM) == upper


@given(
    st.lists(st.tuples(st.integers(-DAY, DAY), st.integers(0, 10 * SECOND)), max_size=30),
)
def test_the_upper_reading_is_never_below_the_wall_or_the_lower_reading(
    steps: list[tuple[int, int]],
) -> None:
    state, mono, offset = SteadyState(), 0, B
    for jump, elapsed in steps:
        mono += elapsed
        offset += jump
        state, lower = steady_reading(
            state, offset + mono, mono, tolerance_ms=TOL, confirm_ms=CONFIRM
        )
        upper = upper_reading(state, offset + mono, mono, confirm_ms=CONFIRM)
        assert upper >= offset + mono and upper >= lower
