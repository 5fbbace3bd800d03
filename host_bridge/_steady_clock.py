"""SteadyClock: the host's wall clock as Schedule decides on it, forward steps confirmed first.

A wall clock steps when an operator or NTP sets it, when the machine resumes
from a suspend, or when a faulty time source reports a day ahead for a few
seconds and is corrected. Each shows as a change of ``wall − monotonic`` (the
*offset*, :func:`actors._clock.clock_offset_ms`). Acting on a glitch ahead at
once would deliver one-shots early and advance repeating reminders by the
glitch, so the plugin gives its owners, its wake-up actor and its clock
watchdog a :class:`SteadyClock` instead of the raw clock. Each reading goes
through :func:`steady_reading`:

* an offset within the tolerance of the confirmed one: the wall reading;
* a step **back**: taken at once (a lower reading can only delay);
* a step **forward** (or a resume): *pending*. Until the same new offset has
  held for ``confirm_ms`` of monotonic time the clock reads ``confirmed offset
  + monotonic``, the timeline from before the step (below the wall reading, so
  never early); then the step is taken. A pending step that goes away (the
  glitch was corrected) is dropped and changes nothing.

The lower reading is right for deciding what is due, and wrong for computing
a new reminder's target ("in an hour" from a timeline that is behind would
fall due early). :meth:`SteadyClock.upper` gives the higher one
(:func:`upper_reading`): the wall reading, or, within ``confirm_ms`` of a step
back, the timeline from before it. Owners compute targets from it, so a
target made while a step is in doubt is late rather than early.

A wall reading that is not an ``int`` (or a clock that raises) is passed on
unchanged and changes nothing, so the callers' handling of a bad clock applies.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from actors._clock import DEFAULT_CLOCK_JUMP_TOLERANCE_MS, clock_jump_ms, clock_offset_ms

__all__ = ["SteadyClock", "SteadyState", "steady_reading", "upper_reading"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


@dataclass(frozen=True, slots=True)
class SteadyState:
    """What a :class:`SteadyClock` knows between readings.

    ``offset`` is the confirmed ``wall − monotonic`` (``None`` before the first
    reading); ``pending`` the offset of a forward step first seen at monotonic
    time ``pending_since`` and not confirmed yet; ``steps`` counts the steps
    taken (back, or forward once confirmed); ``before_back`` the offset before
    the latest step back, taken at monotonic time ``back_at``.
    """

    offset: int | None = None
    pending: int | None = None
    pending_since: int = 0
    steps: int = 0
    before_back: int | None = None
    back_at: int = 0


def steady_reading(
    state: SteadyState, wall_ms: int, mono_ms: int, *, tolerance_ms: int, confirm_ms: int
) -> tuple[SteadyState, int]:
    """The next state and the reading to use, for one sample of both clocks.

    Pure: see the module docstring for the rules. ``confirm_ms`` ``0`` takes
    every step at once.
    """
    offset = clock_offset_ms(wall_ms, mono_ms)
    settled = replace(state, pending=None, pending_since=0)
    if state.offset is None:
        return replace(settled, offset=offset), wall_ms
    jump = clock_jump_ms(state.offset, offset, tolerance_ms)
    if jump == 0:  # the confirmed timeline; a pending step, if any, was corrected
        return settled, wall_ms
    if jump < 0:
        taken = replace(settled, offset=offset, steps=state.steps + 1)
        return replace(taken, before_back=state.offset, back_at=mono_ms), wall_ms
    pending, since = state.pending, state.pending_since
    if pending is None or clock_jump_ms(pending, offset, tolerance_ms):
        pending, since = offset, mono_ms  # a new forward step: it starts holding now
    if mono_ms - since >= confirm_ms:
        return replace(settled, offset=offset, steps=state.steps + 1), wall_ms
    return replace(state, pending=pending, pending_since=since), state.offset + mono_ms


def upper_reading(state: SteadyState, wall_ms: int, mono_ms: int, *, confirm_ms: int) -> int:
    """The higher timeline in doubt after the reading that gave ``state``: for new targets.

    The wall reading, or, within ``confirm_ms`` of a step back, the timeline
    from before that step if it is higher (a step back may be a glitch that is
    corrected in a moment). Pure; never below the wall reading.
    """
    if state.before_back is None or mono_ms - state.back_at >= confirm_ms:
        return wall_ms
    return max(wall_ms, state.before_back + mono_ms)


def _is_ms(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class SteadyClock:
    """``clock`` read through :func:`steady_reading` against ``monotonic``; call it for epoch ms.

    Thread-safe: every reading (from any thread) samples ``monotonic`` then
    ``clock`` and advances the state under one lock. A preempted sample can
    only look like a forward step, which is never taken unless it holds. A
    ``monotonic`` that is not an ``int`` makes the reading raise ``TypeError``.
    Steps are logged on ``log``.
    """

    def __init__(
        self,
        clock: Callable[[], int],
        monotonic: Callable[[], int],
        confirm_ms: int,
        *,
        tolerance_ms: int = DEFAULT_CLOCK_JUMP_TOLERANCE_MS,
        log: logging.Logger = _log,
    ) -> None:
        self._clock = clock
        self._monotonic = monotonic
        self._confirm_ms = confirm_ms
        self._tolerance_ms = tolerance_ms
        self._log = log
        self._lock = threading.Lock()
        self._state = SteadyState()

    @property
    def confirm_ms(self) -> int:
        """How long a forward step must hold before it is taken (monotonic ms)."""
        return self._confirm_ms

    @property
    def state(self) -> SteadyState:
        """The state after the latest reading."""
        with self._lock:
            return self._state

    def __call__(self) -> int:
        """The wall clock in epoch ms, a forward step held back until it is confirmed."""
        with self._lock:
            mono = self._monotonic()
            wall = self._clock()
            if not _is_ms(wall):
                return wall  # not a reading: the caller's handling of a bad clock applies
            if not _is_ms(mono):
                raise TypeError(f"the monotonic clock returned a {type(mono).__name__}")
            before = self._state
            self._state, reading = steady_reading(
                before, wall, mono, tolerance_ms=self._tolerance_ms, confirm_ms=self._confirm_ms
            )
            after = self._state
        if after.pending != before.pending or after.steps != before.steps:
            self._report(before, after, mono)
        return reading

    def upper(self) -> int:
        """A reading to compute new targets from: never below a timeline still in doubt.

        Advances the state like a call does; see :func:`upper_reading`.
        """
        with self._lock:
            mono = self._monotonic()
            wall = self._clock()
            if not _is_ms(wall):
                return wall
            if not _is_ms(mono):
                raise TypeError(f"the monotonic clock returned a {type(mono).__name__}")
            before = self._state
            self._state, _ = steady_reading(
                before, wall, mono, tolerance_ms=self._tolerance_ms, confirm_ms=self._confirm_ms
            )
            after = self._state
            reading = upper_reading(after, wall, mono, confirm_ms=self._confirm_ms)
        if after.pending != before.pending or after.steps != before.steps:
            self._report(before, after, mono)
        return reading

    def _report(self, before: SteadyState, after: SteadyState, mono: int) -> None:
        if after.steps != before.steps:
            assert before.offset is not None and after.offset is not None
            self._log.info(
                "the wall clock stepped %+d ms against the monotonic clock; taken",
                after.offset - before.offset,
            )
        elif after.pending is not None:
            assert before.offset is not None
            self._log.info(
                "the wall clock stepped %+d ms ahead; held back until it has held for %d ms",
                after.pending - before.offset,
                self._confirm_ms,
            )
        elif before.pending is not None:
            assert before.offset is not None
            self._log.warning(
                "the wall clock stepped %+d ms ahead and back within %d ms; the step was ignored",
                before.pending - before.offset,
                mono - before.pending_since,
            )
