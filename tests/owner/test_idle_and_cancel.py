"""The idle filter and tool-call cancellation, through the plugin and the real tools.

An ``"idle"`` status drives an owner only when its session holds a
``schedule/change`` event (inherited ones count; an unreadable log counts); the
status listener never raises. A tool call's future cancelled before its
transaction starts flushes and appends nothing; cancelled after its preflight
but before its append, it appends nothing.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from pytest_mock import MockerFixture

from actors._runtime import Runtime
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.protocols import ToolCall, ToolResult
from host_bridge.testing import PENDING, FakeAgent, FakeHost
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.owner.helpers import Tools

CREATE = {"version": 1, "operation": "create"}


def installed(host: FakeHost, runtime: Runtime, **spawn: Any) -> Tools:
    plugin: SchedulePlugin = install_schedule(host.context(), runtime=runtime)
    agent = host.spawn_root("agent-1", **spawn)
    tools = Tools(host, plugin, agent)
    tools.settle()
    return tools


def idle_flushes(tools: Tools) -> int:
    """How many flushes one turn (running, then idle) of the agent causes."""
    before = tools.host.sessions.flush_count
    tools.agent.begin_turn()
    tools.agent.end_turn()  # the host reports "idle"
    tools.settle()
    return tools.host.sessions.flush_count - before


def record(schedule_id: str) -> dict[str, Any]:
    return {
        **CREATE,
        "schedule": {
            "id": schedule_id,
            "kind": "at",
            "prompt": "inherited",
            "scheduledAt": "2099-01-01T00:00:00.000Z",
        },
    }


# --- idle ---------------------------------------------------------------------------------


def test_idle_never_checkpoints_an_agent_that_never_used_schedule(
    host: FakeHost, runtime: Runtime
) -> None:
    tools = installed(host, runtime, seed_events=(("message", {"text": "hello"}),))
    assert idle_flushes(tools) == 0
    assert idle_flushes(tools) == 0
    tools.call("schedule_list", {})  # a read appends nothing: still no schedule event
    assert idle_flushes(tools) == 0


def test_idle_drives_once_the_session_holds_a_schedule_event(
    host: FakeHost, runtime: Runtime
) -> None:
    tools = installed(host, runtime)
    tools.call("schedule_create", {"prompt": "x", "every_seconds": 600})
    tools.call("schedule_delete", {"id": "schedule-1"})  # none active: still drives
    assert idle_flushes(tools) == 1
    assert idle_flushes(tools) == 1


def test_an_inherited_schedule_event_counts(host: FakeHost, runtime: Runtime) -> None:
    tools = installed(
        host,
        runtime,
        seed_events=((SCHEDULE_CHANGE_TYPE, record("schedule-1")), ("message", "fork point")),
        seed_length=2,
        parent_session="parent",
    )
    assert tools.call("schedule_list", {}) == {"schedules": []}  # not inherited as a reminder
    assert idle_flushes(tools) == 1


def test_an_unreadable_log_drives_and_the_listener_never_raises(
    host: FakeHost, runtime: Runtime, mocker: MockerFixture
) -> None:
    tools = installed(host, runtime)
    session = tools.agent.session
    real = type(session).events
    reads: list[int] = []

    def unreadable_once(self: Any) -> Any:
        reads.append(1)
        if len(reads) == 1:  # the idle check's read fails; later reads work
            raise OSError("log unreadable")
        return real.__get__(self)

    mocker.patch.object(type(session), "events", property(unreadable_once))
    before = host.sessions.flush_count
    host.agents.notify_status(tools.agent, "idle")  # does not raise
    tools.settle()
    mocker.stopall()
    assert len(reads) > 1
    assert host.sessions.flush_count == before + 1  # it drove (the drive reads the log again)


def test_a_failing_status_listener_is_contained(
    host: FakeHost, runtime: Runtime, mocker: MockerFixture
) -> None:
    tools = installed(host, runtime)
    tools.call("schedule_create", {"prompt": "x", "after_seconds": 60})
    mocker.patch("host_bridge._plugin._tell", side_effect=RuntimeError("mailbox gone"))
    host.agents.notify_status(tools.agent, "idle")  # does not raise
    host.agents.notify_status(tools.agent, "running")


# --- cancellation ---------------------------------------------------------------------------


def execute(tools: Tools, name: str, arguments: Any) -> Future[ToolResult]:
    """Call the tool's own ``execute``, as a host does, and return its future."""
    tool = tools.host.tools.get(name, agent=tools.agent)
    assert tool is not None
    return tool.execute(arguments, ToolCall("call-1", tools.agent))


def appended(agent: FakeAgent) -> list[str]:
    return [e.data["operation"] for e in agent.session.events if e.type == SCHEDULE_CHANGE_TYPE]


CALLS = [
    ("schedule_create", {"prompt": "x", "after_seconds": 60}),
    ("schedule_create", {"prompt": "x", "at": "2099-01-01T00:00:00Z"}),
    ("schedule_create", {"prompt": "x", "every_seconds": 300}),
    ("schedule_delete", {"id": "schedule-1"}),
    ("schedule_list", {}),
]


@pytest.mark.parametrize(("name", "arguments"), CALLS)
def test_cancelled_before_its_transaction_starts_no_flush_no_append(
    host: FakeHost, runtime: Runtime, name: str, arguments: Any
) -> None:
    tools = installed(host, runtime)
    tools.call("schedule_create", {"prompt": "keep", "after_seconds": 3600})
    tools.settle()  # the drive it asked for runs after its answer (posted by an inline step)
    before = appended(tools.agent)
    host.sessions.script(PENDING)  # a list holds the queue at its preflight
    holder = tools.host.tools.submit("schedule_list", {}, agent=tools.agent)
    tools.settle()
    future = execute(tools, name, arguments)
    tools.settle()
    assert not future.done()  # execute never blocks
    assert future.cancel()
    flushes = host.sessions.flush_count

    host.sessions.release(True)
    tools.settle()

    assert holder.result(timeout=5).value["schedules"][0]["prompt"] == "keep"
    assert host.sessions.flush_count == flushes + 1  # only the recompute drive: no preflight
    assert appended(tools.agent) == before
    assert tools.plugin.status().owners[0].state == "running"


@pytest.mark.parametrize(("name", "arguments"), CALLS[:4])
def test_cancelled_after_the_preflight_before_the_append_appends_nothing(
    host: FakeHost, runtime: Runtime, name: str, arguments: Any
) -> None:
    tools = installed(host, runtime)
    tools.call("schedule_create", {"prompt": "keep", "after_seconds": 3600})
    before = appended(tools.agent)
    host.sessions.script(PENDING)  # this call's preflight is in flight
    future = execute(tools, name, arguments)
    tools.settle()
    assert not future.done()
    assert future.cancel()
    host.sessions.release(True)  # the preflight succeeds after the cancel
    tools.settle()
    assert appended(tools.agent) == before
    assert [v["id"] for v in tools.call("schedule_list", {})["schedules"]] == ["schedule-1"]
    assert tools.plugin.status().owners[0].state == "running"


def test_cancelling_after_the_answer_changes_nothing(host: FakeHost, runtime: Runtime) -> None:
    tools = installed(host, runtime)
    future = execute(tools, "schedule_create", {"prompt": "x", "every_seconds": 300})
    value = future.result(timeout=5).value
    assert value["id"] == "schedule-1"
    assert not future.cancel()
    assert appended(tools.agent) == ["create"]


def test_a_cancel_after_the_append_fails_and_the_caller_gets_the_answer(
    host: FakeHost, runtime: Runtime
) -> None:
    tools = installed(host, runtime)
    host.sessions.script(True, PENDING)  # the create's barrier is in flight
    future = execute(tools, "schedule_create", {"prompt": "x", "after_seconds": 60})
    tools.settle()
    assert appended(tools.agent) == ["create"]
    assert not future.cancel()  # too late: the change is in the log, so its answer must come
    host.sessions.release(True)
    tools.settle()
    assert future.result(timeout=5).value["id"] == "schedule-1"
    assert tools.plugin.status().owners[0].contained_failures == 0
    assert [v["id"] for v in tools.call("schedule_list", {})["schedules"]] == ["schedule-1"]
