"""Supervised owners: a contained failure is restarted in place after a back-off.

Mailbox level on both runtimes: the plugin (the supervisor) runs on a FakeHost,
time moves only with ``FakeTimers``, and the owner is settled through its mailbox.
"""

from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import Future
from typing import Any

import pytest
from pytest_mock import MockerFixture

from actors._runtime import Runtime
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge._supervision import RestartPolicy
from host_bridge.protocols import SessionEvent
from host_bridge.testing import PENDING, FakeAgent, FakeClock, FakeHost, FakeSession, settle
from messages._mailbox import CreateSchedule, ListSchedules, RequestDrive, RestartOwner
from messages._records import SCHEDULE_CHANGE_TYPE
from messages._status import OwnerStatus
from messages._tool_values import AfterSelector
from tests.schema_check import checked

SECOND = 1000
MINUTE = 60 * SECOND


class FlakyClock:
    """The host's fake wall clock, raising on as many calls as a test arms."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.failures = 0

    def fail(self, times: int = 1) -> None:
        self.failures = times

    def __call__(self) -> int:
        if self.failures > 0:
            self.failures -= 1
            raise OSError("clock unavailable")
        return self.clock()


class AnswerLog(Future[Any]):
    """A reply future that records every answer and never hides a second one.

    ``done()`` stays False, so the owner's "already answered" guard cannot mask
    a double answer: every ``set_result`` lands in :attr:`answers`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[Any] = []

    def done(self) -> bool:
        return False

    def set_result(self, result: Any) -> None:
        self.answers.append(result)


class Supervised:
    """A FakeHost with a flaky wall clock, Schedule installed, and one root agent."""

    def __init__(
        self,
        host: FakeHost,
        runtime: Runtime,
        policy: RestartPolicy | None = None,
        seed_events: tuple[SessionEvent | tuple[str, Any], ...] = (),
    ) -> None:
        self.host = host
        self.flaky = FlakyClock(host.clock)
        context = dataclasses.replace(host.context(), clock=self.flaky)
        self.plugin: SchedulePlugin = install_schedule(
            context, runtime=runtime, restart_policy=policy
        )
        self.agent: FakeAgent = host.spawn_root("agent-1", seed_events=seed_events)
        owner = self.plugin.owner_of(self.agent)
        assert owner is not None
        self.owner = owner
        session = self.agent.session
        assert isinstance(session, FakeSession)
        self.session = session
        self.settle()

    def settle(self) -> None:
        settle(self.owner)

    def send(self, message: Any) -> None:
        self.owner.tell(message)
        self.settle()

    @property
    def status(self) -> OwnerStatus:
        (status,) = self.plugin.status().owners
        return status

    def state(self) -> str:
        """The owner's state now (a call, so a type checker does not narrow it across steps)."""
        return self.status.state

    def advance(self, ms: int) -> None:
        self.host.timers.advance(ms)
        self.settle()

    def create(self, prompt: str = "stretch", after_seconds: int = 1) -> Any:
        reply: Future[Any] = Future()
        self.send(CreateSchedule(prompt, AfterSelector(after_seconds), reply))
        return checked("create", reply.result(timeout=0))

    def listed(self) -> Any:
        reply: Future[Any] = Future()
        self.send(ListSchedules(reply))
        return checked("list", reply.result(timeout=0))

    def dispatches(self) -> list[str]:
        return [
            e.data["id"]
            for e in self.session.events
            if e.type == SCHEDULE_CHANGE_TYPE and e.data["operation"] == "dispatch"
        ]


@pytest.fixture
def rig(host: FakeHost, runtime: Runtime) -> Supervised:
    return Supervised(host, runtime)


def test_a_clock_that_raises_once_restarts_after_the_back_off_and_delivers(
    rig: Supervised, caplog: pytest.LogCaptureFixture
) -> None:
    rig.create("stretch", 1)
    rig.flaky.fail(1)
    with caplog.at_level(logging.DEBUG, logger="dsh_schedule"):
        rig.advance(SECOND)  # the timer wakes; the decision's clock sample raises
        assert rig.state() == "restarting"
        assert rig.status.contained_failures == 1
        assert rig.agent.received == []
        assert rig.host.timers.armed() == [SECOND]  # the first back-off, nothing else
        rig.advance(SECOND - 1)
        assert rig.agent.received == []
        assert rig.status.restarts == 0
        rig.advance(1)  # the back-off ends: restarted in place, refolded, delivered
    assert len(rig.agent.received) == 1
    assert rig.dispatches() == ["schedule-1"]
    assert rig.state() == "running"
    assert rig.status.restarts == 1
    assert rig.owner.is_alive()
    restarts = [r for r in caplog.records if "restarted" in r.getMessage()]
    assert [r.levelno for r in restarts] == [logging.WARNING]
    assert "'agent-1'" in restarts[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_the_tool_in_flight_at_a_contained_failure_gets_internal_error_then_restarts(
    rig: Supervised,
) -> None:
    rig.flaky.fail(1)  # the create's record needs the clock
    value = rig.create("x", 60)
    assert value == {
        "code": "internal_error",
        "message": "An internal error stopped the schedule operation.",
    }
    assert rig.state() == "restarting"
    assert rig.create("y", 60)["id"] == "schedule-1"  # tools keep answering meanwhile
    rig.advance(SECOND)
    assert rig.state() == "running"
    assert rig.status.restarts == 1
    assert rig.host.timers.armed() == [59 * SECOND]  # the refolded record's timer


def test_back_off_doubles_and_an_exhausted_budget_stays_faulted(
    host: FakeHost, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    policy = RestartPolicy(first_delay_ms=SECOND, max_restarts=2, window_ms=10 * MINUTE)
    rig = Supervised(host, runtime, policy)
    rig.create("never", 1)
    rig.flaky.fail(1_000)
    with caplog.at_level(logging.DEBUG, logger="dsh_schedule"):
        rig.advance(SECOND)
        assert rig.host.timers.armed() == [SECOND]
        rig.advance(SECOND)  # restart 1 fails again
        assert rig.status.restarts == 1
        assert rig.host.timers.armed() == [2 * SECOND]
        rig.advance(2 * SECOND)  # restart 2 fails again: the budget is spent
    status = rig.status
    assert status.state == "faulted"
    assert status.restarts == 2
    assert status.contained_failures == 3
    assert status.fault == "unexpected error; not restarted"
    assert rig.plugin.status().faulted == (status,)
    assert rig.host.timers.armed() == []
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "restart budget" in errors[0].getMessage()
    assert "'agent-1'" in errors[0].getMessage()
    rig.flaky.fail(0)
    rig.advance(30 * MINUTE)  # the window passes: still no restart
    rig.send(RequestDrive("test"))
    rig.send(RestartOwner())  # a stray restart is ignored too
    assert rig.status.restarts == 2
    assert rig.state() == "faulted"
    assert rig.agent.received == []
    assert [v["id"] for v in rig.listed()["schedules"]] == ["schedule-1"]


def test_restarts_outside_the_window_do_not_count(host: FakeHost, runtime: Runtime) -> None:
    policy = RestartPolicy(first_delay_ms=SECOND, max_restarts=1, window_ms=MINUTE)
    rig = Supervised(host, runtime, policy)
    for expected in (1, 2):
        rig.flaky.fail(1)
        assert rig.create("x", 60)["code"] == "internal_error"
        assert rig.host.timers.armed() == [SECOND]  # no doubling: the last restart aged out
        rig.advance(SECOND)
        assert rig.status.restarts == expected
        rig.advance(MINUTE)
    assert rig.state() == "running"


CORRUPT = (("schedule/change", {"version": 2, "operation": "delete", "id": "x"}),)


def test_a_corrupt_log_is_never_restarted(host: FakeHost, runtime: Runtime) -> None:
    rig = Supervised(host, runtime, seed_events=CORRUPT)
    assert rig.state() == "faulted"
    assert rig.status.fault == "corrupt schedule log"
    rig.flaky.fail(1)
    rig.send(RequestDrive("test"))
    rig.send(RestartOwner())
    rig.advance(10 * MINUTE)
    assert rig.host.timers.armed() == []
    assert rig.state() == "faulted"
    assert rig.status.fault == "corrupt schedule log"
    assert rig.status.restarts == 0


def test_a_failed_dispatch_append_is_never_restarted(host: FakeHost, runtime: Runtime) -> None:
    rig = Supervised(host, runtime)
    rig.create("once", 1)
    rig.session.fail_appends(
        OSError("disk"), when=lambda type_, data: data.get("operation") == "dispatch"
    )
    rig.advance(SECOND)
    assert len(rig.agent.received) == 1  # queued, but its dispatch is not in the log
    assert rig.status.fault == "dispatch append failed"
    rig.session.clear_append_failures()
    rig.agent.run_queued_turns()
    rig.flaky.fail(1)  # an unexpected error on top of the permanent fault
    assert rig.create("x", 60)["code"] == "internal_error"
    assert rig.status.contained_failures == 1
    rig.send(RestartOwner())
    rig.advance(10 * MINUTE)
    rig.send(RequestDrive("test"))
    assert rig.state() == "faulted"
    assert rig.status.fault == "dispatch append failed"
    assert rig.status.restarts == 0
    assert len(rig.agent.received) == 1  # never repeated


def test_a_tool_call_queued_while_a_restart_is_pending_is_answered_exactly_once(
    rig: Supervised,
) -> None:
    rig.create("due soon", 1)
    rig.flaky.fail(1)
    rig.advance(SECOND)
    assert rig.state() == "restarting"
    rig.host.sessions.script(PENDING)  # the next preflight waits
    create = AnswerLog()
    listing = AnswerLog()
    rig.send(CreateSchedule("queued", AfterSelector(60), create))
    rig.send(ListSchedules(listing))  # waits behind the create
    rig.advance(SECOND)  # the restart arrives while the create is in flight
    assert rig.status.restarts == 1
    assert rig.state() == "running"
    assert create.answers == [] and listing.answers == []
    rig.host.sessions.release(True)
    rig.settle()
    assert len(create.answers) == 1
    assert checked("create", create.answers[0])["id"] == "schedule-2"
    assert len(listing.answers) == 1
    assert [v["id"] for v in checked("list", listing.answers[0])["schedules"]] == [
        "schedule-1",
        "schedule-2",
    ]
    assert rig.dispatches() == ["schedule-1"]  # the drive ran behind them
    assert len(rig.agent.received) == 1


@pytest.mark.parametrize("disposal", ["agent", "plugin"])
def test_disposal_during_the_back_off_cancels_the_restart(rig: Supervised, disposal: str) -> None:
    rig.create("never", 1)
    rig.flaky.fail(1)
    rig.advance(SECOND)
    assert rig.host.timers.armed() == [SECOND]
    if disposal == "agent":
        rig.host.agents.dispose(rig.agent)
    else:
        rig.plugin.dispose().result(timeout=5)
    assert rig.owner.actor_stopped.wait(5)
    assert rig.host.timers.armed() == []  # the pending restart was cancelled
    assert rig.host.timers.advance(10 * MINUTE) == 0
    assert rig.agent.received == []


def test_an_owner_without_a_supervisor_stays_faulted(
    host: FakeHost, runtime: Runtime, mocker: MockerFixture
) -> None:
    from tests.owner.harness import Harness

    harness = Harness(host, runtime=runtime)
    harness.created("x", 1)
    mocker.patch("actors._schedule_owner.continue_fold", side_effect=KeyError("boom"))
    harness.advance(SECOND)
    mocker.stopall()
    assert harness.status.state == "faulted"
    harness.send(RestartOwner())
    harness.advance(MINUTE)
    assert harness.status.state == "faulted"
    assert harness.status.restarts == 0
    assert harness.agent.received == []


# --- the policy's arithmetic -------------------------------------------------------------


def test_policy_doubles_up_to_the_cap_within_the_budget() -> None:
    policy = RestartPolicy(first_delay_ms=1000, max_delay_ms=5000, max_restarts=5, window_ms=60_000)
    history: list[int] = []
    delays = []
    for now in range(0, 5000, 1000):
        delay = policy.next_delay(history, now)
        assert delay is not None
        delays.append(delay)
        history.append(now)
    assert delays == [1000, 2000, 4000, 5000, 5000]
    assert policy.next_delay(history, 5000) is None
    # only restarts within the window count: at 61 s the first two have aged out
    assert policy.next_delay(history, 61_000) == 5000
    assert policy.next_delay(history, 120_000) == 1000


def test_the_default_policy_is_five_restarts_per_ten_minutes_from_one_second() -> None:
    policy = RestartPolicy()
    history: list[int] = []
    delays = []
    while (delay := policy.next_delay(history, 0)) is not None:
        delays.append(delay)
        history.append(0)
    assert delays == [1000, 2000, 4000, 8000, 16000]
    assert policy.max_delay_ms == 60_000
    assert policy.next_delay(history, 600_000) == 1000


@pytest.mark.parametrize(
    "fields",
    [
        {"first_delay_ms": -1},
        {"max_restarts": True},
        {"window_ms": 1.5},
        {"first_delay_ms": 2000, "max_delay_ms": 1000},
    ],
)
def test_policy_rejects_bad_values(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="RestartPolicy"):
        RestartPolicy(**fields)
