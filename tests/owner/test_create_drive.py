"""The drive after a create: skipped only when it could do nothing but re-arm the same timer.

Every successful management preflight asks the owner to recompute. A create
whose barrier succeeded may leave that drive out when a timer is armed, the
records at the create's start are exactly those the timer was decided from,
and the new record is not due before the armed target. Every other case drives
as before, and a failed barrier keeps the recovery rule: a later successful
preflight recomputes, arms and delivers. Both runtimes (the ``harness`` fixture).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from host_bridge.testing import PENDING, FakeSessionStore
from messages._mailbox import CreateSchedule
from messages._records import SCHEDULE_CHANGE_TYPE
from messages._status import OwnerStatus
from messages._tool_values import AfterSelector
from tests.owner.harness import Harness

MINUTE = 60_000


def _store(harness: Harness) -> FakeSessionStore:
    store = harness.host.sessions
    assert isinstance(store, FakeSessionStore)
    return store


def _flushes_of(harness: Harness, action: Any) -> int:
    store = _store(harness)
    before = store.flush_count
    action()
    harness.settle()
    return store.flush_count - before


def _dispatched(harness: Harness) -> list[str]:
    return [
        event.data["id"]
        for event in harness.session.events
        if event.type == SCHEDULE_CHANGE_TYPE and event.data["operation"] == "dispatch"
    ]


def test_a_later_create_keeps_the_armed_timer_without_a_drive(harness: Harness) -> None:
    harness.created("first", 60)
    timer = harness.host.timers.handles()
    assert [handle.delay_ms for handle in timer] == [MINUTE]

    flushes = _flushes_of(harness, lambda: harness.created("second", 120))
    assert flushes == 2  # preflight and barrier; no drive
    assert harness.host.timers.handles() == timer  # the same timer, never re-armed
    flushes = _flushes_of(harness, lambda: harness.created("third", 60))  # an equal target
    assert flushes == 2
    assert harness.host.timers.handles() == timer

    harness.advance(MINUTE)
    assert _dispatched(harness) == ["schedule-1"]
    harness.agent.run_queued_turns()  # the next due one waits for the agent to be idle
    harness.settle()
    assert _dispatched(harness) == ["schedule-1", "schedule-3"]
    assert harness.host.timers.armed() == [MINUTE]
    harness.agent.run_queued_turns()
    harness.advance(MINUTE)
    assert _dispatched(harness) == ["schedule-1", "schedule-3", "schedule-2"]


def test_an_earlier_create_drives_and_re_arms(harness: Harness) -> None:
    harness.created("later", 120)
    assert harness.host.timers.armed() == [2 * MINUTE]

    flushes = _flushes_of(harness, lambda: harness.created("sooner", 60))
    assert flushes == 3  # preflight, barrier, and the drive's preflight
    assert harness.host.timers.armed() == [MINUTE]
    harness.advance(MINUTE)
    assert _dispatched(harness) == ["schedule-2"]


def test_the_first_create_drives_to_arm(harness: Harness) -> None:
    assert harness.host.timers.armed() == []
    flushes = _flushes_of(harness, lambda: harness.created("only", 60))
    assert flushes == 3
    assert harness.host.timers.armed() == [MINUTE]


def test_a_change_since_the_timer_was_decided_drives(harness: Harness) -> None:
    harness.created("first", 60)
    store = _store(harness)
    # A create whose barrier fails, then whose recompute's preflight fails too:
    # the record is in the log but no decision saw it; the old timer stays armed.
    store.script(True, False, False)
    value = harness.value(harness.create("unconfirmed", 30), "create")
    assert value["code"] == "persistence_uncertain"
    assert harness.host.timers.armed() == [MINUTE]

    # A later create not earlier than the armed target must still drive: the fold
    # at its start differs from the one the timer was decided from.
    flushes = _flushes_of(harness, lambda: harness.created("later", 120))
    assert flushes == 3
    assert harness.host.timers.armed() == [30_000]
    harness.advance(30_000)
    assert _dispatched(harness) == ["schedule-2"]


def test_a_failed_barrier_keeps_the_recovery_rule(harness: Harness) -> None:
    harness.created("first", 60)
    store = _store(harness)
    store.script(True, False)  # preflight ok, barrier fails
    flushes = _flushes_of(harness, lambda: harness.create("later", 120))
    assert flushes == 3  # the recompute still runs: its preflight succeeds and re-decides
    assert harness.host.timers.armed() == [MINUTE]

    store.script(True, False)
    flushes = _flushes_of(harness, lambda: harness.create("sooner", 30))
    assert flushes == 3
    assert harness.host.timers.armed() == [30_000]  # the recompute armed the unconfirmed one
    harness.advance(30_000)
    assert _dispatched(harness) == ["schedule-3"]


def test_a_timer_that_fired_during_the_create_still_drives(harness: Harness) -> None:
    harness.created("first", 10)  # due well within the flush timeout
    store = _store(harness)
    store.script(True, PENDING)  # hold the create's barrier
    reply = harness.create("later", 120)
    harness.advance(10_000)  # the timer fires while the create waits for its barrier
    assert _dispatched(harness) == []
    store.release(True)
    harness.settle()
    assert harness.value(reply, "create")["id"] == "schedule-2"
    assert _dispatched(harness) == ["schedule-1"]


def test_a_create_is_answered_after_the_owner_published_its_finished_state(
    harness: Harness,
) -> None:
    harness.created("first", 3600)
    seen: list[OwnerStatus] = []
    reply: Future[Any] = Future()
    reply.add_done_callback(lambda _: seen.append(harness.status_box.current))  # owner's thread
    harness.send(CreateSchedule("second", AfterSelector(7200), reply))
    assert harness.value(reply, "create")["id"] == "schedule-2"
    assert len(seen) == 1
    assert seen[0].active == 2
    assert seen[0].busy is False  # published before the answer, not after
