"""Delivery lifecycle of SPEC §5, driven message by message."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import pytest
from pytest_mock import MockerFixture

from actors._runtime import Runtime
from actors._schedule_owner import BAD_CLOCK_RETRY_MS
from host_bridge.testing import PENDING, FakeHost
from messages._delivery import MAX_TIMER_DELAY_MS
from messages._instant import format_instant
from messages._presentation import REMINDER_SOURCE
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.owner.harness import DELIVERY_STEPS, Harness
from tests.owner.helpers import one_shot

MINUTE = 60_000


def test_due_reminder_runs_preflight_reserve_followup_dispatch_release_barrier(
    harness: Harness,
) -> None:
    start = harness.host.clock.now()
    harness.created("stretch", 60)
    assert harness.host.timers.armed() == [MINUTE]
    harness.journal.clear()

    harness.advance(MINUTE)

    # after a good barrier the owner drives again only when a record is left:
    # with none, a drive could deliver nothing and arm nothing
    assert harness.steps() == list(DELIVERY_STEPS)
    (message,) = harness.agent.received
    assert message.text == one_shot("schedule-1", format_instant(start + MINUTE), "stretch")
    assert dict(message.source) == dict(REMINDER_SOURCE)
    assert harness.changes() == [("create", "schedule-1"), ("dispatch", "schedule-1")]
    assert harness.host.timers.armed() == []
    assert harness.status.deliveries == 1


def test_a_good_dispatch_barrier_drives_again_when_records_are_left(harness: Harness) -> None:
    harness.created("first", 60)
    harness.created("second", 120)
    harness.journal.clear()
    harness.advance(MINUTE)
    steps = harness.steps()
    barrier = steps.index(("release",)) + 1
    assert steps[barrier:] == [
        ("flush",),
        ("flushed", True),
        ("flush",),  # the drive after the barrier: "second" is left, so it re-arms
        ("flushed", True),
    ]
    assert harness.host.timers.armed() == [MINUTE]


def test_a_good_barrier_with_the_next_record_due_waits_for_idle_before_driving(
    harness: Harness,
) -> None:
    harness.created("first", 60)
    harness.created("second", 60)
    harness.journal.clear()
    harness.advance(MINUTE)
    steps = harness.steps()
    # no preflight whose drive could only find the agent busy with the first turn
    assert steps[steps.index(("release",)) + 1 :] == [("flush",), ("flushed", True)]
    assert harness.agent.when_idle_calls == 1
    assert harness.status.waiting_for_idle
    assert len(harness.agent.received) == 1
    harness.journal.clear()
    harness.agent.run_queued_turns()
    harness.settle()
    assert harness.steps() == list(DELIVERY_STEPS)  # idle: the drive delivers the second
    assert harness.changes()[-1] == ("dispatch", "schedule-2")


def test_dispatch_is_durable_only_after_its_barrier(harness: Harness) -> None:
    harness.created("water the plants", 1)
    harness.host.sessions.script(True, PENDING)  # preflight ok, barrier held
    harness.advance(1000)
    dispatch_seq = len(harness.session.events) - 1
    assert harness.changes()[-1] == ("dispatch", "schedule-1")
    assert harness.host.sessions.durable_length(harness.session) <= dispatch_seq
    harness.host.sessions.release(True)
    harness.settle()
    assert harness.host.sessions.durable_length(harness.session) > dispatch_seq


def test_wait_longer_than_max_timer_delay_is_split(harness: Harness) -> None:
    days_40 = 40 * 24 * 3600
    harness.created("quarterly review", days_40)
    assert harness.host.timers.armed() == [MAX_TIMER_DELAY_MS]
    harness.advance(MAX_TIMER_DELAY_MS)
    assert harness.agent.received == []
    assert harness.host.timers.armed() == [days_40 * 1000 - MAX_TIMER_DELAY_MS]
    harness.advance(days_40 * 1000 - MAX_TIMER_DELAY_MS)
    assert len(harness.agent.received) == 1


def test_clock_rollback_never_fires_early(harness: Harness) -> None:
    harness.created("call back", 60)
    harness.host.clock.set(harness.host.clock.now() - 10 * MINUTE)  # wall clock jumps back
    harness.advance(MINUTE)  # the timer wakes after a minute of elapsed time
    assert harness.agent.received == []
    assert harness.host.timers.armed() == [10 * MINUTE]  # re-armed from the re-read clock
    harness.advance(10 * MINUTE)
    assert len(harness.agent.received) == 1


class GlitchingClock:
    """The fake wall clock, except that its next read after :meth:`glitch` returns ``bad``."""

    def __init__(self, host: FakeHost) -> None:
        self.clock = host.clock
        self.monotonic = host.clock.monotonic
        self.pending: list[Any] = []

    def glitch(self, bad: Any) -> None:
        self.pending.append(bad)

    def __call__(self) -> Any:
        return self.pending.pop() if self.pending else self.clock()


@pytest.mark.parametrize("bad", [None, 1.5, math.nan, True, "x"])
def test_a_decision_sample_that_is_not_an_int_decides_again_after_the_retry_delay(
    host: FakeHost, runtime: Runtime, bad: Any, caplog: pytest.LogCaptureFixture
) -> None:
    clock = GlitchingClock(host)
    harness = Harness(
        host, runtime=runtime, context=dataclasses.replace(host.context(), clock=clock)
    )
    start = host.clock.now()
    harness.created("stretch", 60)
    clock.glitch(bad)  # the decision at the due time reads it
    with caplog.at_level(logging.WARNING, logger="dsh_schedule"):
        harness.advance(MINUTE)
    assert harness.agent.received == []
    assert host.timers.armed() == [BAD_CLOCK_RETRY_MS]  # no other activity is needed
    assert f"the clock returned a {type(bad).__name__}, not epoch milliseconds" in caplog.text
    harness.advance(BAD_CLOCK_RETRY_MS)
    (message,) = harness.agent.received
    assert message.text == one_shot("schedule-1", format_instant(start + MINUTE), "stretch")


def test_clock_forward_jump_makes_the_record_overdue_at_once(harness: Harness) -> None:
    harness.created("later", 3600)
    harness.host.clock.set(harness.host.clock.now() + 2 * 3600_000)
    harness.drive()  # any wake re-reads the clock
    assert len(harness.agent.received) == 1
    assert harness.host.timers.armed() == []


def test_forward_jump_noticed_on_the_next_timer_wake(harness: Harness) -> None:
    harness.created("first", 60)
    harness.created("second", 3600)
    harness.host.clock.set(harness.host.clock.now() + 3600_000)
    harness.advance(MINUTE)
    assert [m.text.splitlines()[-1] for m in harness.agent.received] == [
        'reminder_prompt_json: "first"'
    ]
    harness.agent.run_queued_turns()
    harness.settle()
    assert len(harness.agent.received) == 2


def test_busy_agent_waits_for_idle_with_a_single_idle_wait(harness: Harness) -> None:
    harness.created("stand up", 1)
    harness.agent.begin_turn()
    harness.advance(1000)
    harness.drive()
    harness.drive()
    assert harness.agent.received == []
    assert harness.agent.when_idle_calls == 1
    assert harness.status.waiting_for_idle
    assert harness.host.timers.armed() == []  # no private retry timer
    harness.agent.end_turn()
    harness.settle()
    assert len(harness.agent.received) == 1
    assert harness.changes()[-1] == ("dispatch", "schedule-1")


def test_decision_time_rollback_after_reservation_arms_instead(
    harness: Harness, mocker: MockerFixture
) -> None:
    harness.created("tea", 60)
    harness.host.clock.advance(MINUTE)
    original = harness.agent.reserve_turn_admission

    def reserve_then_roll_back() -> Any:
        release = original()
        harness.host.clock.set(harness.host.clock.now() - 30_000)
        return release

    mocker.patch.object(harness.agent, "reserve_turn_admission", reserve_then_roll_back)
    harness.drive()
    assert harness.agent.received == []
    assert harness.agent.release_count == 1
    assert harness.host.timers.armed()[-1] == 30_000
    assert ("dispatch", "schedule-1") not in harness.changes()


def test_delete_landing_during_reservation_is_honoured(
    harness: Harness, mocker: MockerFixture
) -> None:
    harness.created("tea", 1)
    harness.host.clock.advance(1000)
    original = harness.agent.reserve_turn_admission

    def reserve_then_delete() -> Any:
        release = original()
        harness.session.append(
            SCHEDULE_CHANGE_TYPE, {"version": 1, "operation": "delete", "id": "schedule-1"}
        )
        return release

    mocker.patch.object(harness.agent, "reserve_turn_admission", reserve_then_delete)
    harness.drive()
    assert harness.agent.received == []
    assert harness.agent.release_count == 1
    assert harness.changes() == [("create", "schedule-1"), ("delete", "schedule-1")]


def test_equal_targets_dispatch_in_create_order_one_transaction_each(harness: Harness) -> None:
    for prompt in ("a", "b", "c"):
        harness.created(prompt, 30)
    harness.journal.clear()
    harness.advance(30_000)
    assert [m.text.splitlines()[-1] for m in harness.agent.received] == [
        'reminder_prompt_json: "a"'
    ]
    for expected in ("b", "c"):
        harness.agent.run_queued_turns()  # the agent was about to wake: the next waits for idle
        harness.settle()
        assert harness.agent.received[-1].text.splitlines()[-1] == (
            f'reminder_prompt_json: "{expected}"'
        )
    assert [c for c in harness.changes() if c[0] == "dispatch"] == [
        ("dispatch", "schedule-1"),
        ("dispatch", "schedule-2"),
        ("dispatch", "schedule-3"),
    ]
    # every dispatch is followed by its own barrier before the next reservation
    steps = [s for s in harness.steps() if s[0] in {"append", "flush", "reserve"}]
    dispatch_positions = [i for i, s in enumerate(steps) if s == ("append", "dispatch")]
    for position in dispatch_positions:
        assert steps[position + 1] == ("flush",)


def test_followup_failure_writes_no_dispatch_and_still_releases(harness: Harness) -> None:
    harness.created("ping", 1)
    harness.agent.fail_followups(RuntimeError("queue full"), times=1)
    harness.advance(1000)
    assert harness.agent.received == []
    assert harness.agent.release_count == 1
    assert harness.changes() == [("create", "schedule-1")]
    assert harness.status.state == "running"
    harness.drive()  # activity-driven retry
    assert len(harness.agent.received) == 1
    assert harness.changes()[-1] == ("dispatch", "schedule-1")


def test_framing_failure_writes_no_dispatch(harness: Harness, mocker: MockerFixture) -> None:
    harness.created("ping", 1)
    mocker.patch("messages._delivery.render_reminder_framing", side_effect=ValueError("x"))
    harness.advance(1000)
    assert harness.agent.received == []
    assert harness.agent.release_count == 1
    assert harness.changes() == [("create", "schedule-1")]


def test_dispatch_append_failure_faults_the_owner_and_never_repeats(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.created("once", 1)
    harness.session.fail_appends(
        OSError("disk"), when=lambda type_, data: data.get("operation") == "dispatch"
    )
    with caplog.at_level(logging.ERROR, logger="dsh_schedule.owner"):
        harness.advance(1000)
    assert len(harness.agent.received) == 1
    assert harness.agent.release_count == 1
    assert harness.status.state == "faulted"
    assert "disk" not in caplog.text
    harness.session.clear_append_failures()
    harness.agent.run_queued_turns()
    for _ in range(3):
        harness.drive()
        harness.advance(MINUTE)
    assert len(harness.agent.received) == 1
    # management keeps answering while delivery is faulted
    listed = harness.value(harness.list_schedules(), "list")
    assert [v["id"] for v in listed["schedules"]] == ["schedule-1"]


def test_rejected_dispatch_barrier_is_not_retried_until_another_trigger(
    harness: Harness,
) -> None:
    harness.created("once", 1)
    harness.host.sessions.script(True, False)  # preflight ok, barrier rejected
    harness.journal.clear()
    harness.advance(1000)
    assert harness.steps()[-2:] == [("flush",), ("flushed", False)]
    flushes = harness.host.sessions.flush_count
    harness.advance(10 * MINUTE)
    assert harness.host.sessions.flush_count == flushes  # no private retry
    assert harness.host.timers.armed() == []
    harness.agent.run_queued_turns()
    harness.drive()  # a later ordinary preflight confirms the retained dispatch
    assert harness.host.sessions.durable_length(harness.session) == len(harness.session.events)
    assert len(harness.agent.received) == 1


def test_rejected_preflight_delivers_nothing_and_arms_nothing(harness: Harness) -> None:
    harness.created("later", 1)
    harness.host.sessions.script(False)
    harness.journal.clear()
    harness.advance(1000)
    assert harness.steps() == [("flush",), ("flushed", False)]
    assert harness.host.timers.armed() == []
    harness.drive()
    assert len(harness.agent.received) == 1


def test_failing_preflight_exception_counts_as_rejection(harness: Harness) -> None:
    harness.created("later", 1)
    harness.host.sessions.script(OSError("listener died"))
    harness.advance(1000)
    assert harness.agent.received == []
    assert harness.status.state == "running"


def test_agent_no_longer_live_during_preflight(harness: Harness) -> None:
    harness.created("later", 1)
    harness.host.sessions.script(PENDING)
    harness.advance(1000)
    harness.host.agents.forget(harness.agent)
    harness.host.sessions.release(True)
    harness.settle()
    assert harness.agent.reserve_calls == 0
    assert harness.agent.received == []


def test_agent_demoted_from_root_is_not_live(harness: Harness) -> None:
    harness.created("later", 1)
    harness.host.agents.demote(harness.agent)
    harness.advance(1000)
    assert harness.agent.received == []


def test_agent_no_longer_live_during_reservation(harness: Harness, mocker: MockerFixture) -> None:
    harness.created("later", 1)
    harness.host.clock.advance(1000)
    original = harness.agent.reserve_turn_admission

    def reserve_then_vanish() -> Any:
        release = original()
        harness.host.agents.forget(harness.agent)
        return release

    mocker.patch.object(harness.agent, "reserve_turn_admission", reserve_then_vanish)
    harness.drive()
    assert harness.agent.received == []
    assert harness.agent.release_count == 1
    assert harness.changes() == [("create", "schedule-1")]


def test_corrupt_log_faults_delivery_with_a_warning(
    host: FakeHost, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    bad = {"version": 2, "operation": "delete", "id": "x"}
    with caplog.at_level(logging.WARNING, logger="dsh_schedule.owner"):
        harness = Harness(host, seed_events=(("schedule/change", bad),), runtime=runtime)
    assert harness.status.state == "faulted"
    assert "corrupt" in caplog.text
    assert harness.host.timers.armed() == []
    value = harness.value(harness.list_schedules(), "list")
    assert value["code"] == "corrupt_schedule_log"


def test_fork_folds_only_its_own_suffix(host: FakeHost, runtime: Runtime) -> None:
    parent_create = {
        "version": 1,
        "operation": "create",
        "schedule": {
            "id": "schedule-1",
            "kind": "after",
            "prompt": "parent's",
            "afterSeconds": 1,
            "scheduledAt": "2020-01-01T00:00:00.000Z",
        },
    }
    harness = Harness(
        host, seed_events=(("schedule/change", parent_create),), seed_length=1, runtime=runtime
    )
    assert harness.agent.received == []  # the parent's overdue record is not inherited
    assert harness.value(harness.list_schedules(), "list") == {"schedules": []}
    created = harness.created("child's", 1)
    assert created["id"] == "schedule-1"  # ids restart in the child's suffix


def test_overdue_record_on_start_is_delivered_once(host: FakeHost, runtime: Runtime) -> None:
    overdue = {
        "version": 1,
        "operation": "create",
        "schedule": {
            "id": "schedule-1",
            "kind": "after",
            "prompt": "missed while offline",
            "afterSeconds": 60,
            "scheduledAt": "2020-01-01T00:00:00.000Z",
        },
    }
    harness = Harness(
        host,
        seed_events=(("message", {"role": "user"}), ("schedule/change", overdue)),
        runtime=runtime,
    )
    assert len(harness.agent.received) == 1
    harness.agent.run_queued_turns()
    harness.drive()
    assert len(harness.agent.received) == 1


def test_a_drive_asked_for_during_a_delivery_preflight_is_covered_by_it(
    harness: Harness,
) -> None:
    harness.created("tea", 1)
    harness.host.clock.advance(1000)
    harness.host.sessions.script(PENDING)  # the preflight waits
    harness.drive()
    harness.drive()  # covered: the delivery decides only after this
    harness.journal.clear()
    harness.host.sessions.release(True)
    harness.settle()
    assert harness.steps() == list(DELIVERY_STEPS)[1:]  # no second preflight follows
    assert harness.changes()[-1] == ("dispatch", "schedule-1")


def test_a_covered_drive_still_runs_when_the_delivery_preflight_fails(harness: Harness) -> None:
    harness.created("tea", 1)
    harness.host.clock.advance(1000)
    harness.host.sessions.script(PENDING)
    harness.drive()
    harness.drive()  # covered by the delivery waiting for its preflight
    harness.host.sessions.release(False)
    harness.settle()
    assert harness.changes()[-1] == ("dispatch", "schedule-1")  # the covered drive delivered
    assert len(harness.agent.received) == 1


def test_a_covered_drive_still_runs_when_the_delivery_fails_after_its_preflight(
    harness: Harness,
) -> None:
    harness.created("tea", 1)
    harness.host.clock.advance(1000)
    harness.host.sessions.script(PENDING)
    harness.drive()
    harness.drive()  # covered by the delivery waiting for its preflight
    harness.agent.fail_followups(RuntimeError("transient"), times=1)
    harness.host.sessions.release(True)  # the preflight settles; the follow-up fails once
    harness.settle()
    assert harness.changes()[-1] == ("dispatch", "schedule-1")  # the covered drive delivered
    assert len(harness.agent.received) == 1
