"""A tool transaction's barrier is handled where its flush settles, when that keeps the order.

An idle owner answers a create on the thread that settles its barrier flush
(no trip through the mailbox); a barrier behind queued work, one settled
among many flushes (a commit covering many sessions), or one that settles
while the owner is handling a message goes by mail and is handled in order.
A drive the inline step asks for runs on the owner, after it.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from actors._futures import settles_many, settling_many
from actors._runtime import Runtime
from actors._schedule_owner import ScheduleOwner
from host_bridge._plugin import install_schedule
from host_bridge.protocols import ToolCall, ToolResult
from host_bridge.testing import PENDING, FakeHost
from messages._mailbox import Ping
from tests.owner.helpers import Tools

CREATE = {"prompt": "stretch", "after_seconds": 60}


def installed(host: FakeHost, runtime: Runtime) -> Tools:
    plugin = install_schedule(host.context(), runtime=runtime)
    tools = Tools(host, plugin, host.spawn_root("agent-1"))
    tools.settle()
    return tools


def execute(tools: Tools, name: str, arguments: Any) -> Future[ToolResult]:
    tool = tools.host.tools.get(name, agent=tools.agent)
    assert tool is not None
    return tool.execute(arguments, ToolCall("call-1", tools.agent))


def answered_on(future: Future[ToolResult], order: list[str], name: str) -> list[threading.Thread]:
    """The thread that settles ``future`` (filled in then); ``name`` joins ``order``."""
    threads: list[threading.Thread] = []

    def seen(_: Future[ToolResult]) -> None:
        threads.append(threading.current_thread())
        order.append(name)

    future.add_done_callback(seen)
    return threads


def test_an_idle_owner_answers_on_the_thread_that_settles_the_barrier(
    host: FakeHost, runtime: Runtime
) -> None:
    tools = installed(host, runtime)
    host.sessions.script(True, PENDING)  # the preflight succeeds, the barrier waits
    order: list[str] = []
    future = execute(tools, "schedule_create", CREATE)
    threads = answered_on(future, order, "create")
    tools.settle()
    assert not future.done()

    host.sessions.release(True)

    assert threads == [threading.current_thread()]  # handled here, before release returned
    assert future.result().value["id"] == "schedule-1"
    tools.settle()
    assert tools.plugin.status().owners[0].timer_delay_ms is not None  # its drive ran after


def test_a_barrier_behind_queued_work_goes_by_mail_and_keeps_the_order(
    host: FakeHost, runtime: Runtime
) -> None:
    tools = installed(host, runtime)
    host.sessions.script(True, PENDING)
    order: list[str] = []
    create = execute(tools, "schedule_create", CREATE)
    create_threads = answered_on(create, order, "create")
    tools.settle()
    listing = execute(tools, "schedule_list", {})  # admitted, queued behind the create
    answered_on(listing, order, "list")
    tools.settle()

    host.sessions.release(True)
    tools.settle()

    assert create_threads and create_threads[0] is not threading.current_thread()
    assert order == ["create", "list"]
    assert [v["id"] for v in listing.result().value["schedules"]] == ["schedule-1"]


def test_a_barrier_settling_while_the_owner_handles_a_message_goes_by_mail(
    host: FakeHost, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = installed(host, runtime)
    host.sessions.script(True, PENDING)
    order: list[str] = []
    create = execute(tools, "schedule_create", CREATE)
    threads = answered_on(create, order, "create")
    tools.settle()
    inside, go = threading.Event(), threading.Event()
    publish = ScheduleOwner._publish

    def held_publish(self: ScheduleOwner, state: Any = None) -> None:
        if not go.is_set():  # the actor is inside a handler (its section held) until go
            inside.set()
            go.wait()
        publish(self, state)

    monkeypatch.setattr(ScheduleOwner, "_publish", held_publish)
    ref = tools.plugin.owner_of(tools.agent)
    assert ref is not None
    ref.tell(Ping())
    inside.wait()

    host.sessions.release(True)  # returns: the step does not wait for the section
    assert not create.done()
    go.set()
    tools.settle()

    assert threads and threads[0] is not threading.current_thread()
    assert create.result().value["id"] == "schedule-1"


def test_a_barrier_settled_among_many_goes_by_mail(host: FakeHost, runtime: Runtime) -> None:
    tools = installed(host, runtime)
    host.sessions.script(True, PENDING)
    order: list[str] = []
    create = execute(tools, "schedule_create", CREATE)
    threads = answered_on(create, order, "create")
    tools.settle()

    with settling_many():  # as a store's writer settling one commit's many flushes
        host.sessions.release(True)
        assert settles_many()
    assert not settles_many()
    tools.settle()

    assert threads and threads[0] is not threading.current_thread()
    assert create.result().value["id"] == "schedule-1"
