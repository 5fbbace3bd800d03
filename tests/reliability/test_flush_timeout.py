"""The owner's flush timeout, mailbox by mailbox on the host test kit.

A flush that has not settled after ``HostContext.flush_timeout_ms`` counts as
failed (``FlushTimedOut``); a late outcome is ignored; one deadline timer
serves every step and times each out at its own deadline; ``None`` waits
forever.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from typing import Any

from actors._contract import DEFAULT_FLUSH_TIMEOUT_MS
from actors._schedule_owner import OwnerStatusBox, ScheduleOwner
from host_bridge.testing import PENDING, FakeHost, settle
from messages._mailbox import CreateSchedule, DisposeOwner, ListSchedules, StartOwner
from messages._records import SCHEDULE_CHANGE_TYPE
from messages._tool_values import AfterSelector
from tests.schema_check import checked

HOUR_S = 3600


class Owner:
    """One ScheduleOwner on a FakeHost, started and settled."""

    def __init__(self, *, timeout_ms: int | None = DEFAULT_FLUSH_TIMEOUT_MS) -> None:
        self.host = FakeHost()
        self.agent = self.host.spawn_root("agent-1")
        context = dataclasses.replace(self.host.context(), flush_timeout_ms=timeout_ms)
        self.status = OwnerStatusBox(self.agent.id)
        self.ref = ScheduleOwner.start(self.agent, context, self.status)
        self.send(StartOwner())

    def send(self, message: Any) -> None:
        self.ref.tell(message)
        settle(self.ref)

    def create(self, prompt: str = "p", seconds: int = HOUR_S) -> Future[Any]:
        reply: Future[Any] = Future()
        self.send(CreateSchedule(prompt, AfterSelector(seconds), reply))
        return reply

    def list(self) -> Future[Any]:
        reply: Future[Any] = Future()
        self.send(ListSchedules(reply))
        return reply

    def advance(self, ms: int) -> None:
        self.host.timers.advance(ms)
        settle(self.ref)

    def changes(self) -> int:
        return sum(1 for e in self.agent.session.events if e.type == SCHEDULE_CHANGE_TYPE)


def test_a_hung_preflight_fails_after_the_timeout_and_nothing_is_appended() -> None:
    owner = Owner()
    owner.host.sessions.script(PENDING)
    reply = owner.create()
    owner.advance(DEFAULT_FLUSH_TIMEOUT_MS - 1)
    assert not reply.done()
    owner.advance(1)
    value = checked("create", reply.result(timeout=0))
    assert value["code"] == "persistence_uncertain"
    assert value["operation"] == "create" and "id" not in value
    assert owner.changes() == 0
    owner.host.sessions.release(True)  # the late outcome changes nothing
    settle(owner.ref)
    assert owner.changes() == 0
    assert owner.status.current.busy is False


def test_a_hung_barrier_fails_with_the_id_and_the_record_is_retained() -> None:
    owner = Owner()
    owner.host.sessions.script(True, PENDING)
    reply = owner.create()
    owner.advance(DEFAULT_FLUSH_TIMEOUT_MS)
    value = checked("create", reply.result(timeout=0))
    assert value["code"] == "persistence_uncertain"
    assert value["id"] == "schedule-1"
    assert owner.changes() == 1  # appended; a later preflight confirms it
    listed = checked("list", owner.list().result(timeout=0))
    assert [view["id"] for view in listed["schedules"]] == ["schedule-1"]


def test_a_settled_flush_leaves_only_the_delivery_timer() -> None:
    owner = Owner()
    value = checked("create", owner.create(seconds=60).result(timeout=0))
    assert value["id"] == "schedule-1"
    assert owner.host.timers.armed() == [60_000]  # every flush deadline was cancelled


def test_a_later_step_times_out_at_its_own_deadline_not_the_first_timers() -> None:
    owner = Owner()
    owner.host.sessions.script(True, PENDING)
    first = owner.create()
    owner.advance(10_000)
    owner.host.sessions.release(True)  # settles; the deadline timer stays armed
    settle(owner.ref)
    assert checked("create", first.result(timeout=0))["id"] == "schedule-1"
    owner.host.sessions.script(True, PENDING)
    second = owner.create()  # its barrier is due to time out 30 s from now
    owner.advance(DEFAULT_FLUSH_TIMEOUT_MS - 10_000)  # the timer armed for the first fires
    assert not second.done()
    owner.advance(10_000 - 1)
    assert not second.done()
    owner.advance(1)
    value = checked("create", second.result(timeout=0))
    assert value["code"] == "persistence_uncertain" and value["id"] == "schedule-2"


def test_without_a_timeout_a_hung_flush_is_waited_for() -> None:
    owner = Owner(timeout_ms=None)
    owner.host.sessions.script(PENDING)
    reply = owner.create()
    owner.advance(10 * DEFAULT_FLUSH_TIMEOUT_MS)
    assert not reply.done()
    assert owner.host.timers.armed() == []
    owner.host.sessions.release(True)
    settle(owner.ref)
    assert checked("create", reply.result(timeout=0))["id"] == "schedule-1"


def test_dispose_with_a_hung_flush_finishes_after_one_timeout() -> None:
    owner = Owner()
    owner.host.sessions.default_outcome = PENDING
    reply = owner.list()
    queued = owner.create()
    disposed: Future[None] = Future()
    owner.send(DisposeOwner(disposed))
    assert checked("create", queued.result(timeout=0))["code"] == "internal_error"
    assert not disposed.done()
    owner.advance(DEFAULT_FLUSH_TIMEOUT_MS)
    disposed.result(timeout=5)
    assert checked("list", reply.result(timeout=0))["code"] == "persistence_uncertain"
    assert owner.changes() == 0
