"""Dispose and supervision of a ScheduleOwner (SPEC §5, dispose; issue: supervision)."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

import pytest
from pytest_mock import MockerFixture

from host_bridge.testing import PENDING
from messages._mailbox import ListSchedules, RequestDrive
from tests.owner.harness import Harness


def test_dispose_cancels_the_timer_and_finishes(harness: Harness) -> None:
    harness.created("later", 60)
    assert harness.host.timers.armed() == [60_000]
    reply = harness.dispose()
    assert reply.result(timeout=5) is None
    assert harness.host.timers.armed() == []
    assert not harness.owner.is_alive()
    assert harness.status.state == "disposed"


def test_pending_preflight_during_dispose_is_awaited_and_appends_nothing(
    harness: Harness,
) -> None:
    harness.host.sessions.script(PENDING)
    reply_to_create = harness.create("never", 60)
    disposed = harness.dispose()
    assert not disposed.done()  # waits for the in-flight preflight to settle
    assert harness.owner.is_alive()
    harness.host.sessions.release(True)
    assert disposed.result(timeout=5) is None
    assert harness.changes() == []  # never appends during teardown
    assert harness.value(reply_to_create, "create")["code"] == "internal_error"


def test_dispose_during_an_idle_wait_that_never_resolves(harness: Harness) -> None:
    harness.created("x", 1)
    harness.agent.begin_turn()
    harness.agent.hold_idle_forever()
    harness.advance(1000)
    assert harness.status.waiting_for_idle
    disposed = harness.dispose()
    assert disposed.result(timeout=5) is None  # never waits for the agent to become idle
    harness.agent.end_turn()
    harness.agent.hold_idle_forever(False)
    assert harness.agent.received == []


def test_dispose_during_the_dispatch_barrier_does_not_re_arm(harness: Harness) -> None:
    harness.created("first", 1)
    harness.created("second", 120)
    harness.host.sessions.script(True, PENDING)
    harness.advance(1000)
    assert harness.changes()[-1] == ("dispatch", "schedule-1")
    disposed = harness.dispose()
    assert not disposed.done()
    flushes = harness.host.sessions.flush_count
    harness.host.sessions.release(True)
    assert disposed.result(timeout=5) is None
    assert harness.host.sessions.flush_count == flushes  # no drive after the barrier
    assert harness.host.timers.armed() == []


def test_requests_after_dispose_get_internal_error(harness: Harness) -> None:
    harness.dispose().result(timeout=5)
    reply: Future[Any] = Future()
    try:
        harness.owner.tell(ListSchedules(reply))
    except Exception:
        return  # the actor is gone: the tool layer answers internal_error itself
    assert reply.result(timeout=5)["code"] == "internal_error"


def test_queued_requests_at_dispose_are_answered(harness: Harness) -> None:
    harness.host.sessions.script(PENDING)
    first = harness.create("a", 60)
    second = harness.list_schedules()  # waits behind the first transaction
    assert not second.done()
    disposed = harness.dispose()
    assert harness.value(second, "list")["code"] == "internal_error"
    harness.host.sessions.release(False)
    disposed.result(timeout=5)
    assert harness.value(first, "create")["code"] == "persistence_uncertain"


def test_unexpected_exception_is_contained_logged_once_and_visible(
    harness: Harness, mocker: MockerFixture, caplog: pytest.LogCaptureFixture
) -> None:
    harness.created("x", 60)
    mocker.patch("actors._schedule_owner.continue_fold", side_effect=KeyError("boom"))
    with caplog.at_level(logging.DEBUG, logger="dsh_schedule.owner"):
        harness.drive()
        harness.send(RequestDrive("again"))
    assert harness.owner.is_alive()
    assert harness.status.state == "faulted"
    assert harness.status.contained_failures == 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    mocker.stopall()
    # management keeps answering
    listed = harness.value(harness.list_schedules(), "list")
    assert [v["id"] for v in listed["schedules"]] == ["schedule-1"]


def test_contained_failure_inside_a_tool_transaction_answers_internal_error(
    harness: Harness, mocker: MockerFixture
) -> None:
    mocker.patch("actors._schedule_owner.allocate_schedule_id", side_effect=RuntimeError("x"))
    value = harness.value(harness.create("x", 60), "create")
    assert value == {
        "code": "internal_error",
        "message": "An internal error stopped the schedule operation.",
    }
    mocker.stopall()
    assert harness.created("y", 60)["id"] == "schedule-1"
