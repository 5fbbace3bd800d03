"""The wake-up actor at mailbox level: cold sessions woken through a fake activation.

Every test runs on both actor runtimes (the ``runtime`` fixture) with fake time:
the actor's single timer, index changes, clock jumps, bounded concurrency,
back-off of declined activations, passivation after a quiet period, supervision
and dispose. Delivery after activation is the ordinary owner path, checked in
the journal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pykka
import pytest

from actors._contract import DEFAULT_CLOCK_STEP_CONFIRM_MS
from actors._runtime import Runtime
from host_bridge._plugin import RestartPolicy, SchedulePlugin, WakePolicy, install_schedule
from host_bridge.protocols import Agent, HostContext
from host_bridge.testing import FakeActivation, FakeAgent, FakeHost
from host_bridge.testing._clock import DEFAULT_START_MS
from host_bridge.testing._settle import settle_all
from messages._instant import format_instant
from messages._records import SCHEDULE_CHANGE_TYPE

START = DEFAULT_START_MS


def reminder(schedule_id: str, due_ms: int, prompt: str = "stretch") -> tuple[str, Any]:
    """A stored ``create`` of an ``at`` reminder due at ``due_ms``."""
    schedule = {
        "id": schedule_id,
        "kind": "at",
        "prompt": prompt,
        "scheduledAt": format_instant(due_ms),
    }
    return SCHEDULE_CHANGE_TYPE, {"version": 1, "operation": "create", "schedule": schedule}


class Waker:
    """A FakeHost with a FakeActivation, Schedule installed, settled message by message."""

    def __init__(
        self,
        runtime: Runtime,
        policy: WakePolicy | None = None,
        *,
        hold: bool = False,
        clock_watch_ms: int | None = None,
        context: HostContext | None = None,
        stored: dict[str, list[tuple[str, Any]]] | None = None,
        activation: Callable[[FakeHost], FakeActivation] | None = None,
    ) -> None:
        self.host = FakeHost(clock_watch_ms=clock_watch_ms)
        self.activation = (
            FakeActivation(self.host, hold=hold) if activation is None else activation(self.host)
        )
        for session_id, events in (stored or {}).items():
            self.activation.store(session_id, events)
        base = context if context is not None else self.host.context()
        self.context = dataclasses.replace(base, activation=self.activation)
        self.plugin: SchedulePlugin = install_schedule(
            self.context,
            runtime=runtime,
            wake_policy=policy or WakePolicy(rescan_ms=60_000),
            restart_policy=RestartPolicy(first_delay_ms=1_000),
        )
        self.settle()

    def settle(self) -> None:
        """Settle the wake-up actor and every owner, until no new owner appeared."""
        for _ in range(100):
            refs: list[pykka.ActorRef[Any]] = []
            if self.plugin.wake_up is not None:
                refs.append(self.plugin.wake_up)
            owners = [self.plugin.owner_of(agent) for agent in self.plugin.agents()]
            refs += [owner for owner in owners if owner is not None]
            settle_all(*refs)
            again = [self.plugin.owner_of(agent) for agent in self.plugin.agents()]
            if len(again) == len(owners):
                return
        raise AssertionError("owners kept appearing")

    def advance(self, ms: int) -> None:
        """Let ``ms`` pass timer by timer, settling the actors after each one fired."""
        clock, timers = self.host.clock, self.host.timers
        target = clock.monotonic() + ms
        for _ in range(10_000):
            armed = timers.armed()
            if not armed or clock.monotonic() + armed[0] > target:
                break
            timers.advance(armed[0])
            self.settle()
        else:
            raise AssertionError("timers kept firing")
        timers.advance(target - clock.monotonic())
        self.settle()

    def kinds(self, *wanted: str) -> list[tuple[Any, ...]]:
        return [e for e in self.host.journal.entries() if e[0] in wanted]

    def activated(self) -> list[str]:
        return [e[1] for e in self.host.journal.of("activate")]

    def woken(self, index: int = 0) -> FakeAgent:
        agent = self.activation.activated[index]
        assert isinstance(agent, FakeAgent)
        return agent

    def dispatched(self, agent: Agent) -> list[str]:
        return [
            e.data["id"]
            for e in agent.session.events
            if e.type == SCHEDULE_CHANGE_TYPE and e.data.get("operation") == "dispatch"
        ]


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


def test_without_activation_no_wake_up_actor_runs(runtime: Runtime) -> None:
    host = FakeHost()
    plugin = install_schedule(host.context(), runtime=runtime)
    assert plugin.wake_up is None
    assert plugin.status().wake_up is None
    assert host.timers.armed() == []


def test_a_cold_session_is_woken_at_its_due_time_and_its_owner_delivers(runtime: Runtime) -> None:
    w = Waker(runtime, stored={"s1": [reminder("schedule-1", START + 60_000)]})
    assert w.activated() == []
    assert w.host.timers.armed() == [60_000]  # one timer, at the due time
    w.advance(59_999)
    assert w.activated() == []
    w.advance(1)
    assert w.activated() == ["s1"]
    agent = w.woken()
    assert agent in w.plugin.agents()  # on_created installed its owner
    assert [m.text.splitlines()[0] for m in agent.received] == ["[SCHEDULE REMINDER]"]
    assert w.dispatched(agent) == ["schedule-1"]
    steps = [e[0] for e in w.kinds("activate", "agent-created", "reserve", "followup", "append")]
    assert steps == ["activate", "agent-created", "reserve", "followup", "append"]
    status = w.plugin.status().wake_up
    assert status is not None and status.activations == 1 and status.in_flight == 0


def test_overdue_sessions_are_activated_in_due_order_a_bounded_number_at_a_time(
    runtime: Runtime,
) -> None:
    stored = {f"s{i}": [reminder("schedule-1", START - 1000 * (5 - i))] for i in range(1, 5)}
    w = Waker(runtime, WakePolicy(max_concurrent=2, rescan_ms=60_000), hold=True, stored=stored)
    assert w.activated() == ["s1", "s2"]  # the earliest two
    assert sorted(w.activation.held) == ["s1", "s2"]
    status = w.plugin.status().wake_up
    assert status is not None and status.in_flight == 2
    w.activation.complete("s2")
    w.settle()
    assert w.activated() == ["s1", "s2", "s3"]
    w.activation.complete("s1")
    w.activation.complete("s3")
    w.settle()
    assert w.activated() == ["s1", "s2", "s3", "s4"]
    w.activation.complete("s4")
    w.settle()
    assert sorted(w.dispatched(a)[0] for a in w.activation.activated) == ["schedule-1"] * 4


def test_a_session_live_elsewhere_is_left_alone(runtime: Runtime) -> None:
    w = Waker(runtime, stored={"s1": [reminder("schedule-1", START + 1000)]})
    w.activation.live_elsewhere("s1")
    w.advance(120_000)
    assert w.activated() == []


def test_a_declined_activation_is_retried_only_after_its_back_off(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=1_000, retry_ms=5_000)
    w = Waker(runtime, policy, hold=True, stored={"s1": [reminder("schedule-1", START)]})
    assert w.activated() == ["s1"]
    w.activation.live_elsewhere("s1")  # taken by another host meanwhile
    assert w.activation.complete("s1") is None
    w.settle()
    w.activation.live_elsewhere("s1", False)  # ... which let it go again
    w.activation.hold = False
    w.advance(4_999)
    assert w.activated() == ["s1"]  # backing off
    status = w.plugin.status().wake_up
    assert status is not None and status.declined == 1 and status.backing_off == 1
    w.advance(1)
    assert w.activated() == ["s1", "s1"]
    assert w.dispatched(w.woken()) == ["schedule-1"]


def test_an_index_change_re_times_the_wake_up_before_its_timer(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=3_600_000)
    w = Waker(runtime, policy, stored={"late": [reminder("schedule-1", START + 3_000_000)]})
    assert w.host.timers.armed() == [3_000_000]
    w.activation.store("soon", [reminder("schedule-1", START + 10_000)])
    w.activation.moved()  # e.g. a commit that made a session cold with an earlier reminder
    w.settle()
    assert w.host.timers.armed() == [10_000]
    w.advance(10_000)
    assert w.activated() == ["soon"]


def test_a_forward_clock_jump_wakes_what_became_due(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=3_600_000)
    w = Waker(
        runtime,
        policy,
        clock_watch_ms=1_000,
        stored={"s1": [reminder("schedule-1", START + 3_000_000)]},
    )
    w.host.clock.set(START + 3_000_000)  # the wall clock jumps; the timer still sleeps
    w.advance(1_000)  # one watchdog tick sees the step: held until it is confirmed
    assert w.activated() == []
    w.advance(DEFAULT_CLOCK_STEP_CONFIRM_MS)  # it held: taken at the tick that confirms it
    assert w.activated() == ["s1"]
    assert w.plugin.status().clock_jumps == 1


def test_a_clock_glitch_ahead_wakes_nothing(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=1_000)  # a pass (and a clock reading) every second
    w = Waker(
        runtime,
        policy,
        clock_watch_ms=1_000,
        stored={"s1": [reminder("schedule-1", START + 3_000_000)]},
    )
    w.host.clock.set(START + 3_000_000)  # a glitch past the due time ...
    w.advance(3_000)
    w.host.clock.set(w.host.clock.now() - 3_000_000)  # ... corrected after 3 s
    w.advance(DEFAULT_CLOCK_STEP_CONFIRM_MS + 1_000)
    assert w.activated() == []
    assert w.plugin.status().clock_jumps == 0


def test_a_quiet_activated_session_is_let_go_and_woken_again_when_due(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=60_000, quiet_period_ms=30_000)
    events = [reminder("schedule-1", START), reminder("schedule-2", START + 3_600_000)]
    w = Waker(runtime, policy, stored={"s1": events})
    agent = w.woken()
    assert w.dispatched(agent) == ["schedule-1"]
    agent.run_queued_turns()  # the reminder turn ran; the agent is idle
    w.settle()
    w.advance(29_999)
    assert w.host.journal.of("passivate") == []
    w.advance(1)
    assert w.host.journal.of("passivated") == [("passivated", agent.id, True)]
    assert agent not in w.plugin.agents()  # its owner was retired
    assert w.activation.due_of("s1") == START + 3_600_000  # cold again, due later
    status = w.plugin.status().wake_up
    assert status is not None and status.passivations == 1 and status.activated == 0
    w.advance(3_600_000 - 30_000)
    assert w.activated() == ["s1", "s1"]
    assert w.dispatched(w.woken(1)) == ["schedule-1", "schedule-2"]


def test_a_session_with_a_reminder_due_within_the_quiet_period_is_kept(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=60_000, quiet_period_ms=30_000)
    events = [reminder("schedule-1", START), reminder("schedule-2", START + 45_000)]
    w = Waker(runtime, policy, stored={"s1": events})
    agent = w.woken()
    agent.run_queued_turns()
    w.settle()
    w.advance(44_999)
    assert w.host.journal.of("passivate") == []  # schedule-2 is due within the quiet period
    w.advance(1)
    assert w.dispatched(agent) == ["schedule-1", "schedule-2"]
    agent.run_queued_turns()
    w.settle()
    w.advance(30_000)
    assert [e[1] for e in w.host.journal.of("passivate")] == [agent.id]


def test_a_busy_agent_is_not_let_go(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=60_000, quiet_period_ms=30_000)
    w = Waker(runtime, policy, stored={"s1": [reminder("schedule-1", START)]})
    agent = w.woken()
    w.advance(120_000)  # its reminder turn never ran: the agent is not idle
    assert w.host.journal.of("passivate") == []
    agent.run_queued_turns()
    w.settle()
    w.advance(30_000)
    assert [e[1] for e in w.host.journal.of("passivate")] == [agent.id]


def test_an_agent_a_person_keeps_open_stays_live_and_unmanaged(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=60_000, quiet_period_ms=1_000)
    w = Waker(runtime, policy, stored={"s1": [reminder("schedule-1", START)]})
    agent = w.woken()
    w.activation.keep_open(agent.id)
    agent.run_queued_turns()
    w.settle()
    w.advance(5_000)
    assert w.host.journal.of("passivated") == [("passivated", agent.id, False)]
    assert agent in w.plugin.agents()
    status = w.plugin.status().wake_up
    assert status is not None and status.activated == 0 and status.passivations == 0


def test_an_unreadable_index_is_read_again_later(runtime: Runtime) -> None:
    host_policy = WakePolicy(rescan_ms=1_000)
    w = Waker(runtime, host_policy)
    w.activation.fail_next = 2  # the next pass cannot read the index at all
    w.activation.store("s1", [reminder("schedule-1", START)])
    w.activation.moved()
    w.settle()
    assert w.activated() == []
    status = w.plugin.status().wake_up
    assert status is not None and status.state == "running"
    w.advance(1_000)
    assert w.activated() == ["s1"]


def test_an_unexpected_error_restarts_the_wake_up_actor_after_a_back_off(
    runtime: Runtime,
) -> None:
    host = FakeHost()
    calls = {"n": 0}

    def flaky_clock() -> int:
        calls["n"] += 1
        if calls["n"] == 2:  # the first pass (install samples the clock once before)
            raise RuntimeError("clock broke")
        return host.clock()

    base = dataclasses.replace(host.context(), clock=flaky_clock)
    w = Waker.__new__(Waker)
    w.host = host
    w.activation = FakeActivation(host)
    w.activation.store("s1", [reminder("schedule-1", START)])
    w.context = dataclasses.replace(base, activation=w.activation)
    w.plugin = install_schedule(
        w.context,
        runtime=runtime,
        wake_policy=WakePolicy(rescan_ms=60_000),
        restart_policy=RestartPolicy(first_delay_ms=1_000),
    )
    w.settle()
    status = w.plugin.status().wake_up
    assert status is not None and status.state == "restarting"
    assert w.activated() == []
    w.advance(1_000)
    status = w.plugin.status().wake_up
    assert status is not None and status.state == "running" and status.restarts == 1
    assert w.activated() == ["s1"]


def test_dispose_waits_for_an_activation_in_flight(runtime: Runtime) -> None:
    w = Waker(runtime, hold=True, stored={"s1": [reminder("schedule-1", START)]})
    assert w.activation.held == ["s1"]
    wake = w.plugin.wake_up
    assert wake is not None
    disposed: Future[None] = w.plugin.dispose()
    settle_all(wake)
    assert not disposed.done()
    assert w.activation.listeners == 0  # it stopped listening at once
    w.activation.complete("s1")
    disposed.result(timeout=5)
    assert w.plugin.agents() == ()  # the late agent got no owner


def test_an_index_due_before_its_log_costs_one_declined_activation(runtime: Runtime) -> None:
    """A host whose index says due while the log does not: woken once, then on the log's time."""
    policy = WakePolicy(rescan_ms=1_000, quiet_period_ms=500)
    w = Waker(runtime, policy)
    due = w.activation.store("s1", [reminder("schedule-1", START + 60_000)], index_ms=0)
    w.activation.moved()
    w.settle()
    w.advance(8_000)
    assert w.host.journal.of("activated") == [("activated", "s1", None)]  # declined: not due
    assert w.activation.due_of("s1") == due == START + 60_000  # the index took the log's time
    status = w.plugin.status().wake_up
    assert status is not None and (status.activations, status.declined) == (0, 1)
    w.advance(60_000 - 8_000 - 1)
    assert w.activated() == ["s1"]  # nothing more, and never early
    w.advance(1)
    assert w.activated() == ["s1", "s1"]
    assert w.dispatched(w.woken()) == ["schedule-1"]
