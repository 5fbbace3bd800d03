"""Delivery of ``at`` and ``every`` reminders, message by message, on both runtimes.

One-shots (``after``/``at``) first, one per transaction; then one batch of every
due ``every`` record: one follow-up with the batch framing, then one dispatch per
member in batch order, all with the same ``acceptedAt``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pytest_mock import MockerFixture

from actors._runtime import Runtime
from host_bridge._plugin import install_schedule
from host_bridge.testing import FakeHost, FakeSession, settle
from messages._instant import MAX_INSTANT_MS, format_instant, parse_instant
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.owner.harness import DELIVERY_STEPS, Harness
from tests.owner.helpers import Tools, batch, one_shot

NOW = parse_instant("2026-08-05T12:00:00.000Z")
SECOND = 1000
MINUTE = 60 * SECOND


def t(clock: str) -> str:
    """The canonical instant of ``clock`` (``HH:MM:SS``) on the example day."""
    return f"2026-08-05T{clock}.000Z"


def dispatches(harness: Harness) -> list[dict[str, Any]]:
    return [
        event.data
        for event in harness.session.events
        if event.type == SCHEDULE_CHANGE_TYPE and event.data["operation"] == "dispatch"
    ]


def listed(harness: Harness) -> list[tuple[str, str]]:
    value = harness.value(harness.list_schedules(), "list")
    return [(view["id"], view["scheduledAt"]) for view in value["schedules"]]


@pytest.fixture
def at_noon(harness: Harness) -> Harness:
    """The harness with the wall clock at 2026-08-05T12:00:00.000Z."""
    harness.host.clock.set(NOW)
    return harness


@pytest.fixture
def tools_at_noon(host: FakeHost, runtime: Runtime) -> Tools:
    """Schedule installed with the wall clock at noon; one root agent whose owner has started."""
    host.clock.set(NOW)
    plugin = install_schedule(host.context(), runtime=runtime)
    tools = Tools(host, plugin, host.spawn_root("agent-1"))
    tools.settle()
    return tools


def test_an_at_reminder_arrives_at_its_instant_with_the_one_shot_framing(at_noon: Harness) -> None:
    at_noon.created_at(
        "call mom", {"date": "2026-08-05", "time": "20:30:00", "time_zone": "Asia/Shanghai"}
    )
    assert at_noon.host.timers.armed() == [30 * MINUTE]
    at_noon.advance(30 * MINUTE - 1)
    assert at_noon.agent.received == []
    at_noon.advance(1)
    (message,) = at_noon.agent.received
    assert message.text == one_shot("schedule-1", t("12:30:00"), "call mom")
    assert dispatches(at_noon) == [{"version": 1, "operation": "dispatch", "id": "schedule-1"}]
    assert at_noon.host.timers.armed() == []


def test_an_every_reminder_is_a_batch_of_one_then_advances_in_place(at_noon: Harness) -> None:
    at_noon.created("first", 3600)
    at_noon.created_every("stretch", 300)
    at_noon.created("last", 7200)
    assert at_noon.host.timers.armed() == [5 * MINUTE]
    at_noon.journal.clear()

    at_noon.advance(5 * MINUTE)

    assert at_noon.steps() == [
        *DELIVERY_STEPS,
        ("flush",),  # the drive after a good barrier: nothing due, the timer is armed
        ("flushed", True),
    ]
    (message,) = at_noon.agent.received
    assert message.text == batch(("schedule-2", t("12:05:00"), "stretch"))
    assert dispatches(at_noon) == [
        {"version": 1, "operation": "dispatch", "id": "schedule-2", "acceptedAt": t("12:05:00")}
    ]
    assert listed(at_noon) == [  # same position, next target
        ("schedule-1", t("13:00:00")),
        ("schedule-2", t("12:10:00")),
        ("schedule-3", t("14:00:00")),
    ]
    assert at_noon.host.timers.armed() == [5 * MINUTE]
    at_noon.agent.run_queued_turns()
    at_noon.advance(5 * MINUTE)
    assert at_noon.agent.received[-1].text == batch(("schedule-2", t("12:10:00"), "stretch"))
    assert at_noon.status.deliveries == 2


def test_a_due_one_shot_goes_before_a_due_batch(at_noon: Harness) -> None:
    at_noon.created_every("every five", 300)
    at_noon.created("after five", 300)
    at_noon.created_at("at five", "2026-08-05T12:05:00Z")
    at_noon.advance(5 * MINUTE)
    assert [m.text for m in at_noon.agent.received] == [
        one_shot("schedule-2", t("12:05:00"), "after five")
    ]
    for expected in (
        one_shot("schedule-3", t("12:05:00"), "at five"),
        batch(("schedule-1", t("12:05:00"), "every five")),
    ):
        at_noon.agent.run_queued_turns()  # the agent was about to wake: the next waits for idle
        at_noon.settle()
        assert at_noon.agent.received[-1].text == expected
    assert [d["id"] for d in dispatches(at_noon)] == ["schedule-2", "schedule-3", "schedule-1"]


def test_batch_order_is_stored_target_then_create_order_with_one_accepted_at(
    at_noon: Harness,
) -> None:
    at_noon.created_every("B", 600)  # schedule-1, target 12:10
    at_noon.created_every("A", 300)  # schedule-2, target 12:05
    at_noon.created_every("C", 600)  # schedule-3, target 12:10 (ties keep create order)
    at_noon.agent.begin_turn()  # busy: the reminders wait
    at_noon.advance(17 * MINUTE + 34 * SECOND)
    assert at_noon.agent.received == []
    assert at_noon.status.waiting_for_idle
    at_noon.journal.clear()

    at_noon.agent.end_turn()
    at_noon.settle()

    (message,) = at_noon.agent.received
    assert message.text == batch(
        ("schedule-2", t("12:15:00"), "A"),  # ordered by stored target, not by occurrence
        ("schedule-1", t("12:10:00"), "B"),
        ("schedule-3", t("12:10:00"), "C"),
    )
    assert dispatches(at_noon) == [
        {"version": 1, "operation": "dispatch", "id": sid, "acceptedAt": t("12:17:34")}
        for sid in ("schedule-2", "schedule-1", "schedule-3")
    ]
    assert [s for s in at_noon.steps() if s[0] != "flushed"][:7] == [
        ("flush",),
        ("reserve", True),
        ("followup",),  # one follow-up for the whole batch
        ("append", "dispatch"),
        ("append", "dispatch"),
        ("append", "dispatch"),
        ("release",),
    ]
    assert listed(at_noon) == [
        ("schedule-1", t("12:20:00")),
        ("schedule-2", t("12:20:00")),
        ("schedule-3", t("12:20:00")),
    ]
    assert at_noon.host.timers.armed() == [2 * MINUTE + 26 * SECOND]
    assert at_noon.status.deliveries == 3


def test_latest_only_catch_up_after_a_long_outage(at_noon: Harness) -> None:
    at_noon.created_every("check metrics", 300)
    at_noon.host.clock.suspend(3 * 3600 * SECOND + 7 * SECOND)  # asleep for three hours
    at_noon.drive()
    (message,) = at_noon.agent.received  # one occurrence, no backlog of 36
    assert message.text == batch(("schedule-1", t("15:00:00"), "check metrics"))
    assert dispatches(at_noon) == [
        {"version": 1, "operation": "dispatch", "id": "schedule-1", "acceptedAt": t("15:00:07")}
    ]
    assert listed(at_noon) == [("schedule-1", t("15:05:00"))]
    assert at_noon.host.timers.armed() == [4 * MINUTE + 53 * SECOND]


def test_batch_membership_is_decided_inside_the_reservation(
    at_noon: Harness, mocker: MockerFixture
) -> None:
    at_noon.created_every("early", 300)  # due 12:05:00
    at_noon.host.clock.advance(SECOND)
    at_noon.created_every("late", 300)  # due 12:05:01
    original = at_noon.agent.reserve_turn_admission

    def reserve_a_second_later() -> Any:
        release = original()
        at_noon.host.clock.advance(SECOND)  # the second record comes due meanwhile
        return release

    mocker.patch.object(at_noon.agent, "reserve_turn_admission", reserve_a_second_later)
    at_noon.advance(5 * MINUTE - SECOND)  # the wake at 12:05:00 sees only "early" due
    (message,) = at_noon.agent.received
    assert message.text == batch(
        ("schedule-1", t("12:05:00"), "early"), ("schedule-2", t("12:05:01"), "late")
    )
    assert {d["acceptedAt"] for d in dispatches(at_noon)} == {t("12:05:01")}


def test_the_timer_is_armed_at_the_earliest_next_target_of_any_kind(at_noon: Harness) -> None:
    at_noon.created_every("every", 300)
    at_noon.created_at("at", "2026-08-05T12:07:00Z")
    at_noon.created("after", 3600)
    at_noon.advance(5 * MINUTE)
    assert at_noon.host.timers.armed() == [2 * MINUTE]  # the at record, before 12:10
    at_noon.agent.run_queued_turns()
    at_noon.advance(2 * MINUTE)
    assert at_noon.agent.received[-1].text == one_shot("schedule-2", t("12:07:00"), "at")
    assert at_noon.host.timers.armed() == [3 * MINUTE]  # the every record's next target


def test_a_failed_batch_follow_up_dispatches_nothing(at_noon: Harness) -> None:
    at_noon.created_every("a", 300)
    at_noon.created_every("b", 300)
    at_noon.agent.fail_followups(RuntimeError("queue full"), times=1)
    at_noon.advance(5 * MINUTE)
    assert at_noon.agent.received == []
    assert dispatches(at_noon) == []
    assert at_noon.status.state == "running"
    at_noon.drive()
    assert len(at_noon.agent.received) == 1
    assert [d["id"] for d in dispatches(at_noon)] == ["schedule-1", "schedule-2"]


def _fail_dispatch_of(harness: Harness, schedule_id: str) -> None:
    harness.session.fail_appends(
        OSError("disk full"),
        when=lambda _type, data: data.get("operation") == "dispatch" and data["id"] == schedule_id,
    )


def test_a_failed_kth_batch_dispatch_faults_for_good_and_keeps_the_first(
    at_noon: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    for prompt in ("a", "b", "c"):
        at_noon.created_every(prompt, 300)
    _fail_dispatch_of(at_noon, "schedule-2")
    at_noon.journal.clear()
    with caplog.at_level(logging.ERROR, logger="dsh_schedule.owner"):
        at_noon.advance(5 * MINUTE)
    (message,) = at_noon.agent.received  # the message was queued once
    assert message.text == batch(
        ("schedule-1", t("12:05:00"), "a"),
        ("schedule-2", t("12:05:00"), "b"),
        ("schedule-3", t("12:05:00"), "c"),
    )
    assert [d["id"] for d in dispatches(at_noon)] == ["schedule-1"]  # the first stands
    assert at_noon.status.state == "faulted"
    assert at_noon.status.fault == "dispatch append failed"
    assert at_noon.status.deliveries == 1
    assert len([r for r in caplog.records if "dispatch 2 of 3" in r.getMessage()]) == 1
    assert at_noon.host.timers.armed() == []

    at_noon.session.clear_append_failures()
    at_noon.agent.run_queued_turns()
    at_noon.advance(60 * MINUTE)
    at_noon.drive()
    assert len(at_noon.agent.received) == 1  # never repeated by this owner
    assert [d["id"] for d in dispatches(at_noon)] == ["schedule-1"]
    listed_ids = [view_id for view_id, _ in listed(at_noon)]  # the tools keep answering
    assert listed_ids == ["schedule-1", "schedule-2", "schedule-3"]


def test_a_failed_batch_dispatch_is_not_restarted_by_the_supervisor(
    host: FakeHost, tools_at_noon: Tools
) -> None:
    tools, plugin, agent = tools_at_noon, tools_at_noon.plugin, tools_at_noon.agent
    tools.call("schedule_create", {"prompt": "a", "every_seconds": 300})
    tools.call("schedule_create", {"prompt": "b", "every_seconds": 300})
    session = agent.session
    assert isinstance(session, FakeSession)
    session.fail_appends(
        OSError("disk full"),
        when=lambda _type, data: data.get("operation") == "dispatch" and data["id"] == "schedule-2",
    )
    host.timers.advance(5 * MINUTE)
    tools.settle()
    (status,) = plugin.status().faulted
    assert status.fault == "dispatch append failed"
    session.clear_append_failures()
    agent.run_queued_turns()
    host.timers.advance(60 * MINUTE)  # long past any restart back-off
    tools.settle()
    (status,) = plugin.status().owners
    assert (status.state, status.restarts) == ("faulted", 0)
    assert len(agent.received) == 1


def test_a_decision_that_raises_is_no_decision_without_a_fault(
    at_noon: Harness, mocker: MockerFixture, caplog: pytest.LogCaptureFixture
) -> None:
    mocker.patch("actors._schedule_owner.plan_delivery", side_effect=KeyError("boom"))
    with caplog.at_level(logging.WARNING, logger="dsh_schedule.owner"):
        at_noon.created_every("x", 300)  # its recompute drive cannot decide
        at_noon.drive()
    assert at_noon.status.state == "running"
    assert at_noon.status.contained_failures == 0
    assert at_noon.host.timers.armed() == []  # arms nothing
    assert "taken as no decision" in caplog.text
    mocker.stopall()
    at_noon.drive()
    assert at_noon.host.timers.armed() == [5 * MINUTE]


def test_an_undecidable_batch_is_no_decision_without_a_fault(
    at_noon: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    at_noon.created_every("x", 300)
    at_noon.host.clock.set(MAX_INSTANT_MS + 1)  # a clock past year 9999 on the every path
    with caplog.at_level(logging.WARNING, logger="dsh_schedule.owner"):
        at_noon.drive()
    assert at_noon.agent.received == []
    assert dispatches(at_noon) == []
    assert at_noon.status.state == "running"
    assert at_noon.status.contained_failures == 0
    assert "no delivery decision" in caplog.text
    at_noon.host.clock.set(NOW + 7 * MINUTE)
    at_noon.drive()
    assert at_noon.agent.received[-1].text == batch(("schedule-1", t("12:05:00"), "x"))


def test_a_one_shot_is_delivered_even_when_the_clock_is_past_the_calendar(
    at_noon: Harness,
) -> None:
    at_noon.created("after", 60)
    at_noon.created_every("every", 300)
    at_noon.host.clock.set(MAX_INSTANT_MS + 1)
    at_noon.drive()
    assert [m.text for m in at_noon.agent.received] == [
        one_shot("schedule-1", format_instant(NOW + MINUTE), "after")
    ]
    assert at_noon.status.state == "running"


def test_the_idle_filter_does_not_stop_an_owner_waiting_for_idle(
    host: FakeHost, tools_at_noon: Tools
) -> None:
    tools, plugin, agent = tools_at_noon, tools_at_noon.plugin, tools_at_noon.agent
    tools.call("schedule_create", {"prompt": "x", "every_seconds": 300})
    agent.begin_turn()
    host.timers.advance(5 * MINUTE)
    tools.settle()
    assert agent.received == []
    agent.end_turn()
    owner = plugin.owner_of(agent)
    assert owner is not None
    settle(owner)
    assert len(agent.received) == 1
