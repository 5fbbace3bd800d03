"""call_tool / call_tool_json: a tool run for an agent as a host runs it."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from host_bridge.protocols import ToolCall, ToolDefinition, ToolResult
from host_bridge.testing import FakeAgent, FakeHost, call_tool, call_tool_json


def tool(name: str, execute: Any) -> ToolDefinition:
    return ToolDefinition(name, "a test tool", {}, {}, execute, str, str)


def answered(result: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(result)
    return future


def test_schedule_tools_answer_through_the_agent_id(fake_host: FakeHost) -> None:
    agent = fake_host.spawn_root("agent-1")
    result = call_tool(
        fake_host, "agent-1", "schedule_create", {"prompt": "tea", "after_seconds": 60}
    )
    assert not result.is_error
    assert result.value["id"] == "schedule-1"
    listed = call_tool_json(fake_host, agent, "schedule_list", {})
    assert [view["id"] for view in listed["schedules"]] == ["schedule-1"]
    error = call_tool_json(fake_host, agent, "schedule_delete", {"id": " x"})
    assert error["code"] == "invalid_rule"  # a domain error is an ordinary JSON value


def test_each_call_gets_a_fresh_id_and_the_calling_agent() -> None:
    host = FakeHost()
    agent = host.spawn_root()
    calls: list[ToolCall] = []

    def execute(arguments: Any, call: ToolCall) -> Future[ToolResult]:
        calls.append(call)
        return answered(ToolResult(False, arguments, '{"echo":1}'))

    host.tools.register(tool("echo", execute), agent=agent)
    first = call_tool(host.tools, agent, "echo", {"a": 1})  # a registry works too
    call_tool(host.context(), agent.id, "echo", {"a": 2})  # and a HostContext
    assert first == ToolResult(False, {"a": 1}, '{"echo":1}')
    assert [c.agent for c in calls] == [agent, agent]
    assert calls[0].call_id != calls[1].call_id
    assert calls[0].synthetic and calls[1].synthetic
    call_tool_json(host, agent, "echo", {}, call_id="call_MODEL_abc")  # the model's id, passed on
    assert calls[2] == ToolCall("call_MODEL_abc", agent)
    assert not calls[2].synthetic


def test_failures_are_loud_not_error_values() -> None:
    host = FakeHost()
    agent = host.spawn_root()
    other: FakeAgent = host.spawn_root("agent-2")
    never: Future[ToolResult] = Future()

    def boom(arguments: Any, call: ToolCall) -> Future[ToolResult]:
        raise RuntimeError("tool crashed")

    host.tools.register(tool("boom", boom), agent=agent)
    host.tools.register(tool("odd", lambda a, c: answered({"not": "a result"})), agent=agent)
    host.tools.register(tool("never", lambda a, c: never), agent=agent)
    host.tools.register(
        tool("text", lambda a, c: answered(ToolResult(False, 1, "[1]"))), agent=agent
    )
    with pytest.raises(LookupError, match="no tool 'boom' is visible to agent 'agent-2'"):
        call_tool(host, other, "boom", {})
    with pytest.raises(LookupError, match="no live agent 'ghost'"):
        call_tool(host, "ghost", "boom", {})
    with pytest.raises(TypeError, match=r"needs a host with \.agents"):
        call_tool(host.tools, "agent-1", "boom", {})
    with pytest.raises(TypeError, match="neither a ToolRegistry"):
        call_tool(object(), agent, "boom", {})  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="tool crashed"):
        call_tool(host, agent, "boom", {})
    with pytest.raises(TypeError, match="returned dict, not a ToolResult"):
        call_tool(host, agent, "odd", {})
    with pytest.raises(TimeoutError, match="'never' did not answer agent 'agent-1'"):
        call_tool(host, agent, "never", {}, timeout=0.01)
    with pytest.raises(ValueError, match="not a JSON object"):
        call_tool_json(host, agent, "text", {})
