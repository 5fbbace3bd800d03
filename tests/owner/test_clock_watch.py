"""The clock watchdog: wall-clock jumps and suspends re-time armed reminders.

The arithmetic is tested on plain numbers, the ticking part on ``FakeTimers``,
and the plugin's use of it at mailbox level on both runtimes. A forward step is
acted on only once it held for the confirmation interval
(``HostContext.clock_step_confirm_ms``, see ``test_steady_clock.py``); a
glitch ahead corrected within it delivers nothing early.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from typing import Any

import pytest

from actors._clock import DEFAULT_CLOCK_JUMP_TOLERANCE_MS, clock_jump_ms, clock_offset_ms
from actors._contract import DEFAULT_CLOCK_STEP_CONFIRM_MS
from actors._runtime import Runtime
from host_bridge._plugin import CompositionError, SchedulePlugin, install_schedule
from host_bridge._steady_clock import SteadyClock
from host_bridge._watchdog import ClockWatchdog
from host_bridge.protocols import HostContext
from host_bridge.testing import FakeAgent, FakeClock, FakeHost, FakeTimers, settle
from messages._instant import format_instant, parse_instant
from messages._mailbox import CreateSchedule, ListSchedules, RequestDrive
from messages._records import SCHEDULE_CHANGE_TYPE
from messages._tool_values import AfterSelector, EverySelector
from tests.schema_check import checked

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
TOLERANCE = DEFAULT_CLOCK_JUMP_TOLERANCE_MS
CONFIRM = DEFAULT_CLOCK_STEP_CONFIRM_MS

# --- arithmetic ----------------------------------------------------------------------------


def test_running_clocks_keep_their_offset() -> None:
    before = clock_offset_ms(1_000_000, 5_000)
    after = clock_offset_ms(1_000_000 + 3_600_000, 5_000 + 3_600_000)
    assert clock_jump_ms(before, after, TOLERANCE) == 0


@pytest.mark.parametrize(
    ("wall_moved", "monotonic_moved", "jump"),
    [
        (1000 + 2 * HOUR, 1000, 2 * HOUR),  # the wall clock was set forward
        (1000 - 2 * HOUR, 1000, -2 * HOUR),  # ... or back
        (8 * HOUR, 0, 8 * HOUR),  # a suspend: the monotonic clock stood still
        (1000 + TOLERANCE, 1000, 0),  # within the tolerance
        (1000 + TOLERANCE + 1, 1000, TOLERANCE + 1),
        (1000 - TOLERANCE - 1, 1000, -TOLERANCE - 1),
    ],
)
def test_a_change_of_wall_minus_monotonic_is_a_jump(
    wall_moved: int, monotonic_moved: int, jump: int
) -> None:
    baseline = clock_offset_ms(1_700_000_000_000, 42)
    offset = clock_offset_ms(1_700_000_000_000 + wall_moved, 42 + monotonic_moved)
    assert clock_jump_ms(baseline, offset, TOLERANCE) == jump


def test_the_default_monotonic_clock_pairs_with_a_fake_clock() -> None:
    host = FakeHost()
    context = HostContext(host.sessions, host.agents, host.tools, object(), clock=host.clock)
    host.clock.advance(5 * SECOND)
    assert context.monotonic() == 5 * SECOND  # the fake clock's elapsed time, not the process's
    real = HostContext(host.sessions, host.agents, host.tools, object())
    assert real.monotonic is not host.clock.monotonic
    assert real.clock_watch_ms == 1000
    assert real.clock_step_confirm_ms == CONFIRM == 5000


# --- the ticking part ----------------------------------------------------------------------


class Watched:
    """A ClockWatchdog on a SteadyClock over a FakeClock and FakeTimers, recording its reports."""

    def __init__(self, tick_ms: int = SECOND) -> None:
        self.clock = FakeClock()
        self.timers = FakeTimers(self.clock)
        self.jumps: list[int] = []
        self.steady = SteadyClock(self.clock, self.clock.monotonic, CONFIRM)
        self.watchdog = ClockWatchdog(self.steady, self.timers, tick_ms, self.jumps.append)


def test_watchdog_reports_a_step_back_on_its_next_tick() -> None:
    w = Watched()
    w.watchdog.start()
    assert w.timers.armed() == [SECOND]
    w.timers.advance(10 * MINUTE)  # time passes normally: no jump
    assert w.jumps == []
    w.clock.set(w.clock.now() - 2 * HOUR)
    assert w.jumps == []
    w.timers.advance(SECOND)
    assert w.jumps == [-2 * HOUR]
    w.timers.advance(MINUTE)  # the new offset is the baseline now
    assert w.jumps == [-2 * HOUR]
    assert w.watchdog.jumps == 1


def test_watchdog_reports_a_forward_step_once_it_held_for_the_interval() -> None:
    w = Watched()
    w.watchdog.start()
    w.clock.set(w.clock.now() + 2 * HOUR)
    w.timers.advance(SECOND)  # the tick sees it: held
    w.timers.advance(CONFIRM - SECOND)
    assert w.jumps == []
    w.timers.advance(SECOND)  # it has held for the interval at this tick
    assert w.jumps == [2 * HOUR]
    w.clock.set(w.clock.now() - HOUR)
    w.clock.suspend(3 * HOUR)  # a jump back, then a sleep, between two ticks: one step ahead
    w.timers.advance(CONFIRM + SECOND)
    assert w.jumps == [2 * HOUR, 2 * HOUR]
    assert w.watchdog.jumps == 2


def test_a_glitch_ahead_corrected_within_the_interval_is_not_reported() -> None:
    w = Watched()
    w.watchdog.start()
    w.clock.set(w.clock.now() + DAY)
    w.timers.advance(3 * SECOND)
    w.clock.set(w.clock.now() - DAY)
    w.timers.advance(HOUR)
    assert w.jumps == []


def test_slow_drift_is_reported_once_it_adds_up() -> None:
    w = Watched()
    w.watchdog.start()
    for _ in range(TOLERANCE + 1):  # 1 ms of drift per tick, each far below the tolerance
        w.clock.set(w.clock.now() + 1)
        w.timers.advance(SECOND)
    w.timers.advance(CONFIRM)
    assert w.jumps == [TOLERANCE + 1]
    for _ in range(TOLERANCE + 1):  # and back: a step back is reported at once
        w.clock.set(w.clock.now() - 1)
        w.timers.advance(SECOND)
    assert w.jumps == [TOLERANCE + 1, -TOLERANCE - 1]


def test_a_clock_that_raises_skips_a_tick_and_the_watchdog_goes_on() -> None:
    w = Watched()
    failures = [1]

    def clock() -> int:
        if failures[0]:
            failures[0] -= 1
            raise OSError("no clock")
        return w.clock()

    watchdog = ClockWatchdog(
        SteadyClock(clock, w.clock.monotonic, CONFIRM), w.timers, SECOND, w.jumps.append
    )
    watchdog.start()  # the first reading fails: the next tick takes the baseline
    w.timers.advance(SECOND)
    w.clock.set(w.clock.now() - HOUR)
    w.timers.advance(SECOND)
    assert w.jumps == [-HOUR]
    assert watchdog.running


def test_watchdog_stop_cancels_its_tick_and_start_is_idempotent() -> None:
    w = Watched()
    w.watchdog.start()
    w.watchdog.start()
    assert w.timers.armed() == [SECOND]
    w.watchdog.stop()
    assert not w.watchdog.running
    assert w.timers.armed() == []
    w.clock.set(w.clock.now() + HOUR)
    assert w.timers.advance(HOUR) == 0
    assert w.jumps == []


@pytest.mark.parametrize("tick", [0, -1, True, 1.5])
def test_watchdog_needs_a_positive_integer_tick(tick: Any) -> None:
    with pytest.raises(ValueError, match="tick"):
        Watched(tick)


# --- the plugin --------------------------------------------------------------------------


class Watching:
    """Schedule installed on a FakeHost with the watchdog on; one root agent."""

    def __init__(self, runtime: Runtime, *, clock_watch_ms: int | None = SECOND) -> None:
        self.host = FakeHost(clock_watch_ms=clock_watch_ms)
        self.plugin: SchedulePlugin = install_schedule(self.host.context(), runtime=runtime)
        self.agent = self.spawn("agent-1")

    def spawn(self, agent_id: str) -> FakeAgent:
        agent = self.host.spawn_root(agent_id)
        self.settle(agent)
        return agent

    def settle(self, agent: FakeAgent | None = None) -> None:
        owner = self.plugin.owner_of(agent if agent is not None else self.agent)
        assert owner is not None
        settle(owner)

    def create(
        self, prompt: str, seconds: int, agent: FakeAgent | None = None, *, every: bool = False
    ) -> Any:
        owner = self.plugin.owner_of(agent if agent is not None else self.agent)
        assert owner is not None
        reply: Future[Any] = Future()
        when = EverySelector(seconds) if every else AfterSelector(seconds)
        owner.tell(CreateSchedule(prompt, when, reply))
        settle(owner)
        return checked("create", reply.result(timeout=0))

    def listed(self) -> Any:
        owner = self.plugin.owner_of(self.agent)
        assert owner is not None
        reply: Future[Any] = Future()
        owner.tell(ListSchedules(reply))
        settle(owner)
        return checked("list", reply.result(timeout=0))

    def drive(self) -> None:
        owner = self.plugin.owner_of(self.agent)
        assert owner is not None
        owner.tell(RequestDrive("test"))
        settle(owner)

    def dispatches(self) -> list[dict[str, Any]]:
        return [
            e.data
            for e in self.agent.session.events
            if e.type == SCHEDULE_CHANGE_TYPE and e.data["operation"] == "dispatch"
        ]

    def advance(self, ms: int) -> None:
        self.host.timers.advance(ms)
        self.settle()

    def flushes_of(self, agent: FakeAgent) -> int:
        return sum(1 for f in self.host.sessions.flushes if f.session_id == agent.session.id)


@pytest.fixture
def watching(runtime: Runtime) -> Watching:
    return Watching(runtime)


def test_a_forward_step_that_holds_is_delivered_within_the_interval_plus_one_tick(
    watching: Watching,
) -> None:
    created = watching.create("in an hour", 3600)
    watching.host.clock.set(watching.host.clock.now() + 2 * HOUR)
    watching.settle()
    assert watching.agent.received == []
    watching.advance(CONFIRM)  # the next tick saw the step; it has not held long enough yet
    assert watching.agent.received == []
    assert watching.plugin.status().clock_jumps == 0
    watching.advance(SECOND)  # within the interval plus one tick of the step
    (message,) = watching.agent.received
    assert f"occurrence_at: {created['scheduledAt']}" in message.text
    assert watching.plugin.status().clock_jumps == 1


def test_a_day_ahead_glitch_corrected_after_3_s_delivers_nothing_early(
    watching: Watching,
) -> None:
    start = watching.host.clock.now()
    one_shot = watching.create("in an hour", 3600)
    every = watching.create("every five minutes", 300, every=True)
    watching.advance(5 * MINUTE - 2 * SECOND)
    watching.host.clock.set(watching.host.clock.now() + DAY)  # the glitch ...
    watching.advance(SECOND)
    watching.drive()  # owners read the clock during the glitch: a drive, a list, a create
    assert [view["state"] for view in watching.listed()["schedules"]] == ["scheduled"] * 2
    later = watching.create("two hours after the glitch began", 7200)
    # a target made while the step is in doubt comes from the higher timeline: late, never early
    assert later["scheduledAt"] == format_instant(start + 5 * MINUTE - SECOND + DAY + 2 * HOUR)
    watching.advance(SECOND)  # the every record's timer fires inside the glitch, on time
    watching.advance(SECOND)
    watching.host.clock.set(watching.host.clock.now() - DAY)  # ... corrected after 3 s
    watching.advance(CONFIRM + SECOND)
    assert watching.plugin.status().clock_jumps == 0
    (message,) = watching.agent.received  # the every record, on time; nothing else
    assert f'"occurrence_at":"{every["scheduledAt"]}"' in message.text
    assert watching.dispatches() == [
        {
            "version": 1,
            "operation": "dispatch",
            "id": every["id"],
            "acceptedAt": format_instant(start + 5 * MINUTE),  # not a day ahead
        }
    ]
    watching.agent.run_queued_turns()
    watching.advance(5 * MINUTE - CONFIRM - 2 * SECOND)  # the next occurrence, on time
    assert len(watching.agent.received) == 2
    assert f'"occurrence_at":"{format_instant(start + 10 * MINUTE)}"' in (
        watching.agent.received[-1].text
    )
    target = parse_instant(one_shot["scheduledAt"])
    watching.advance(target - watching.host.clock.now() - 1)
    assert one_shot["id"] not in [d["id"] for d in watching.dispatches()]
    watching.advance(1)
    watching.agent.run_queued_turns()  # the every record's turns: the one-shot comes next
    watching.settle()
    assert one_shot["id"] in [d["id"] for d in watching.dispatches()]


def test_without_the_watchdog_a_forward_jump_waits_for_the_old_timer(runtime: Runtime) -> None:
    off = Watching(runtime, clock_watch_ms=None)
    off.create("in an hour", 3600)
    off.host.clock.set(off.host.clock.now() + 2 * HOUR)
    off.advance(MINUTE)
    assert off.agent.received == []  # the timer still sleeps on the monotonic clock
    assert not off.plugin.status().clock_watch


def test_suspend_is_delivered_once_the_resume_is_confirmed(watching: Watching) -> None:
    watching.create("in an hour", 3600)
    watching.advance(10 * MINUTE)
    watching.host.clock.suspend(3 * HOUR)  # wall clock moves, monotonic time does not
    watching.settle()
    assert watching.agent.received == []
    watching.advance(SECOND)  # the first tick after resume sees it: held
    assert watching.agent.received == []
    watching.advance(CONFIRM)  # it held: confirmed and delivered
    assert len(watching.agent.received) == 1


def test_backward_jump_re_arms_and_never_fires_early(watching: Watching) -> None:
    created = watching.create("in an hour", 3600)
    target = parse_instant(created["scheduledAt"])
    watching.advance(30 * MINUTE)
    watching.host.clock.set(watching.host.clock.now() - 2 * HOUR)
    watching.advance(SECOND)  # the tick notices and the owner re-arms from the new reading
    status = watching.plugin.status().owners[0]
    assert status.timer_delay_ms == target - watching.host.clock.now()
    assert status.timer_delay_ms > 2 * HOUR
    watching.advance(target - watching.host.clock.now() - 1)
    assert watching.agent.received == []
    assert watching.host.clock.now() == target - 1
    watching.advance(1)
    (message,) = watching.agent.received
    assert f"occurrence_at: {format_instant(target)}" in message.text


def test_a_jump_drives_only_owners_whose_timer_is_armed(watching: Watching) -> None:
    idle = watching.spawn("agent-2")  # no reminders: no timer
    watching.create("in an hour", 3600)
    armed_before = watching.flushes_of(watching.agent)
    idle_before = watching.flushes_of(idle)
    watching.host.clock.set(watching.host.clock.now() + 10 * MINUTE)
    watching.advance(SECOND + CONFIRM)  # seen at the next tick, confirmed once it held
    watching.settle(idle)
    assert watching.flushes_of(watching.agent) == armed_before + 1  # one re-drive, re-armed
    assert watching.flushes_of(idle) == idle_before  # a no-op message, no flush
    status = watching.plugin.status().owners[0]
    assert status.timer_delay_ms == 50 * MINUTE - SECOND - CONFIRM


def test_the_watchdog_runs_only_while_owners_are_installed(runtime: Runtime) -> None:
    host = FakeHost(clock_watch_ms=SECOND)
    plugin = install_schedule(host.context(), runtime=runtime)
    assert not plugin.status().clock_watch
    assert host.timers.armed() == []
    first = host.spawn_root("a")
    second = host.spawn_root("b")
    assert plugin.status().clock_watch
    assert host.timers.armed() == [SECOND]  # one watchdog per plugin, not per owner
    host.agents.dispose(first)
    assert host.timers.armed() == [SECOND]
    host.agents.dispose(second)
    assert not plugin.status().clock_watch
    assert host.timers.armed() == []
    host.spawn_root("c")
    assert host.timers.armed() == [SECOND]
    plugin.dispose().result(timeout=5)
    assert not plugin.status().clock_watch
    assert host.timers.armed() == []
    assert host.timers.advance(HOUR) == 0


def test_a_bad_clock_watch_tick_is_refused_at_install(runtime: Runtime) -> None:
    host = FakeHost()
    context = dataclasses.replace(host.context(), clock_watch_ms=0)
    with pytest.raises(CompositionError, match=r"clock_watch_ms must be a positive int .*tick"):
        install_schedule(context, runtime=runtime)
    assert host.agents.listener_counts() == {"created": 0, "status": 0, "disposed": 0}


@pytest.mark.parametrize("confirm", [0, -1, 1.5, True, "5000"])
def test_a_bad_step_confirmation_is_refused_at_install(runtime: Runtime, confirm: Any) -> None:
    host = FakeHost()
    context = dataclasses.replace(host.context(), clock_step_confirm_ms=confirm)
    with pytest.raises(
        CompositionError, match=r"clock_step_confirm_ms must be a positive int .*must hold"
    ):
        install_schedule(context, runtime=runtime)
    assert host.agents.listener_counts() == {"created": 0, "status": 0, "disposed": 0}


def test_without_step_confirmation_a_forward_step_is_taken_at_the_next_tick(
    runtime: Runtime,
) -> None:
    host = FakeHost(clock_watch_ms=SECOND)
    context = dataclasses.replace(host.context(), clock_step_confirm_ms=None)
    plugin = install_schedule(context, runtime=runtime)
    agent = host.spawn_root("agent-1")
    owner = plugin.owner_of(agent)
    assert owner is not None
    settle(owner)
    reply: Future[Any] = Future()
    owner.tell(CreateSchedule("in an hour", AfterSelector(3600), reply))
    settle(owner)
    host.clock.set(host.clock.now() + 2 * HOUR)
    host.timers.advance(SECOND)
    settle(owner)
    assert len(agent.received) == 1


def test_a_reminder_created_while_a_forward_step_is_in_doubt_is_not_early(
    watching: Watching,
) -> None:
    watching.host.clock.set(watching.host.clock.now() + 2 * HOUR)  # a real step, not held yet
    created = watching.create("in a minute", 60)
    assert created["scheduledAt"] == format_instant(watching.host.clock.now() + MINUTE)
    watching.advance(CONFIRM + SECOND)  # the step is taken: nothing became due with it
    assert watching.agent.received == []
    watching.advance(MINUTE - CONFIRM - 2 * SECOND)
    assert watching.agent.received == []
    watching.advance(SECOND)
    assert len(watching.agent.received) == 1


def test_a_reminder_created_while_the_clock_glitches_behind_is_not_early(
    watching: Watching,
) -> None:
    due = watching.host.clock.now() + HOUR
    watching.host.clock.set(watching.host.clock.now() - DAY)  # the glitch: taken at once ...
    watching.advance(SECOND)
    created = watching.create("in an hour", 3600)
    assert parse_instant(created["scheduledAt"]) >= due  # ... but not for new targets
    watching.advance(2 * SECOND)
    watching.host.clock.set(watching.host.clock.now() + DAY)  # ... corrected after 3 s
    watching.advance(CONFIRM + 2 * SECOND)
    assert watching.agent.received == []  # before: delivered 8 s after it was created
