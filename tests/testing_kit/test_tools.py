"""ScopedToolRegistry."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from host_bridge.embedded.tools import ScopedToolRegistry, ToolConflictError
from host_bridge.protocols import ToolCall, ToolDefinition, ToolRegistry, ToolResult
from host_bridge.testing import FakeAgent, FakeSession

SECRET = "s3cret backend detail"


def tool(
    name: str, execute: Callable[[Any, ToolCall], Future[ToolResult]] | None = None
) -> ToolDefinition:
    def echo(arguments: Any, call: ToolCall) -> Future[ToolResult]:
        future: Future[ToolResult] = Future()
        future.set_result(ToolResult(False, {"args": arguments, "call": call.call_id}, name))
        return future

    return ToolDefinition(
        name=name,
        description=f"{name} tool",
        parameters={"type": "object"},
        output_schema={},
        execute=execute or echo,
        render=str,
        present=str,
    )


def agent(agent_id: str) -> FakeAgent:
    return FakeAgent(agent_id, FakeSession(f"{agent_id}-s"))


def test_protocol_is_satisfied() -> None:
    assert isinstance(ScopedToolRegistry(), ToolRegistry)


def test_tools_are_scoped_per_agent() -> None:
    registry = ScopedToolRegistry()
    a, b = agent("a"), agent("b")
    t = tool("schedule_list")
    registry.register(t, agent=a)
    assert registry.get("schedule_list", agent=a) is t
    assert registry.get("schedule_list", agent=b) is None
    assert registry.get("schedule_list") is None
    assert registry.tools_for(b) == []
    other = tool("schedule_list")
    registry.register(other, agent=b)  # same name in another scope is fine
    assert registry.get("schedule_list", agent=b) is other
    result = registry.execute("schedule_list", {}, agent=b)
    assert result.content == "schedule_list" and not result.is_error


def test_scope_is_keyed_by_agent_id() -> None:
    registry = ScopedToolRegistry()
    t = tool("x")
    registry.register(t, agent=agent("a"))
    assert registry.get("x", agent=agent("a")) is t


def test_duplicate_name_in_one_scope_conflicts() -> None:
    registry = ScopedToolRegistry()
    a = agent("a")
    registry.register(tool("x"), agent=a)
    with pytest.raises(ToolConflictError):
        registry.register(tool("x"), agent=a)


def test_unregister_is_idempotent_and_does_not_remove_a_successor() -> None:
    registry = ScopedToolRegistry()
    a = agent("a")
    unregister = registry.register(tool("x"), agent=a)
    unregister()
    unregister()
    assert registry.get("x", agent=a) is None
    successor = tool("x")
    registry.register(successor, agent=a)
    unregister()
    assert registry.get("x", agent=a) is successor


def test_global_tools_are_visible_to_all_and_conflict_with_scoped_names() -> None:
    registry = ScopedToolRegistry()
    a, b = agent("a"), agent("b")
    g = tool("shared")
    unregister = registry.register_global(g)
    assert registry.get("shared") is g
    assert registry.get("shared", agent=a) is g
    with pytest.raises(ToolConflictError):
        registry.register(tool("shared"), agent=a)
    with pytest.raises(ToolConflictError):
        registry.register_global(tool("shared"))
    registry.register(tool("mine"), agent=b)
    with pytest.raises(ToolConflictError):
        registry.register_global(tool("mine"))
    assert [t.name for t in registry.tools_for(b)] == ["mine", "shared"]
    unregister()
    unregister()
    assert registry.get("shared", agent=a) is None


def test_tools_for_is_sorted_by_name() -> None:
    registry = ScopedToolRegistry()
    a = agent("a")
    for name in ["schedule_list", "schedule_create", "schedule_delete"]:
        registry.register(tool(name), agent=a)
    assert [t.name for t in registry.tools_for(a)] == [
        "schedule_create",
        "schedule_delete",
        "schedule_list",
    ]


def recording_registry() -> tuple[ScopedToolRegistry, FakeAgent, list[ToolCall]]:
    """Tool ``t`` for agent ``a``: it answers its arguments and records each call."""
    registry = ScopedToolRegistry()
    a = agent("a")
    calls: list[ToolCall] = []

    def record(arguments: Any, call: ToolCall) -> Future[ToolResult]:
        calls.append(call)
        future: Future[ToolResult] = Future()
        future.set_result(ToolResult(False, arguments, "ok"))
        return future

    registry.register(tool("t", record), agent=a)
    return registry, a, calls


def test_execute_passes_arguments_and_unique_call_ids() -> None:
    registry, a, calls = recording_registry()
    assert registry.execute("t", {"k": 1}, agent=a).value == {"k": 1}
    registry.execute("t", None, agent=a)
    assert all(call.agent is a for call in calls)
    assert len({call.call_id for call in calls}) == 2
    assert all(call.call_id.startswith("call-") for call in calls)
    assert all(call.synthetic for call in calls)  # made up here: no model gave them


def test_the_models_call_id_reaches_the_tool_and_an_unusable_one_is_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry, a, calls = recording_registry()
    assert not registry.execute("t", {}, agent=a, call_id="call_MODEL_1").is_error
    assert not registry.submit("t", {}, agent=a, call_id="call_MODEL_2").result().is_error
    with caplog.at_level(logging.WARNING, logger="dsh_schedule"):
        for odd in ("x" * 257, "", 12, b"call"):
            assert not registry.execute("t", {}, agent=a, call_id=odd).is_error  # type: ignore[arg-type]
    assert calls[:2] == [ToolCall("call_MODEL_1", a), ToolCall("call_MODEL_2", a)]
    assert not any(call.synthetic for call in calls[:2])
    replaced = calls[2:]
    assert all(call.synthetic and call.call_id.startswith("call-") for call in replaced)
    assert len({call.call_id for call in replaced}) == 4
    assert sum("tool-call id" in r.getMessage() for r in caplog.records) == 4


def test_unknown_tool_is_an_error_result() -> None:
    registry = ScopedToolRegistry()
    result = registry.execute("nope", {}, agent=agent("a"))
    assert result.is_error
    assert result.value["code"] == "unknown_tool"
    assert json.loads(result.content) == result.value


@pytest.mark.parametrize("mode", ["raises", "future-fails", "not-a-result", "cancelled"])
def test_failures_never_leak_exception_text(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    def broken(arguments: Any, call: ToolCall) -> Future[ToolResult]:
        future: Future[ToolResult] = Future()
        if mode == "raises":
            raise RuntimeError(SECRET)
        if mode == "future-fails":
            future.set_exception(RuntimeError(SECRET))
        elif mode == "cancelled":
            future.cancel()
        else:
            future.set_result(SECRET)  # type: ignore[arg-type]
        return future

    registry = ScopedToolRegistry()
    a = agent("a")
    registry.register(tool("t", broken), agent=a)
    with caplog.at_level(logging.WARNING, logger="dsh_schedule.host_bridge.embedded.tools"):
        result = registry.execute("t", {}, agent=a)
    assert result.is_error
    assert result.value["code"] == "tool_failed"
    assert SECRET not in result.content and SECRET not in repr(result.value)
    assert caplog.records and caplog.records[0].name == "dsh_schedule.host_bridge.embedded.tools"


def test_submit_does_not_wait_and_execute_times_out() -> None:
    registry = ScopedToolRegistry()
    a = agent("a")
    inner: Future[ToolResult] = Future()
    registry.register(tool("slow", lambda arguments, call: inner), agent=a)
    outer = registry.submit("slow", {}, agent=a)
    assert not outer.done()
    inner.set_result(ToolResult(False, 1, "1"))
    assert outer.result().value == 1

    stuck: Future[ToolResult] = Future()
    registry.register(tool("stuck", lambda arguments, call: stuck), agent=a)
    result = registry.execute("stuck", {}, agent=a, timeout=0)
    assert result.is_error and result.value["code"] == "tool_timeout"


def test_concurrent_registration_allows_exactly_one_winner_per_name() -> None:
    registry = ScopedToolRegistry()
    a = agent("a")
    barrier = threading.Barrier(8)
    wins: list[int] = []
    conflicts: list[int] = []
    lock = threading.Lock()

    def contend(n: int) -> None:
        barrier.wait()
        for i in range(50):
            try:
                registry.register(tool(f"t{i}"), agent=a)
            except ToolConflictError:
                with lock:
                    conflicts.append(n)
            else:
                with lock:
                    wins.append(n)

    threads = [threading.Thread(target=contend, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 50
    assert len(conflicts) == 7 * 50
    assert len(registry.tools_for(a)) == 50
