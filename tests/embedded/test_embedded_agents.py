"""Embedded agents: the durable inbox's hold on admission, notifications, model, tools, disposal.

The rules every host shares (turn admission, ``when_idle``, status order, follow-up
order) are checked on this host by the conformance kit (``tests/conformance``) and,
for the ``TurnAdmission`` these agents delegate to, by ``test_admission.py``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from host_bridge._futures import resolved
from host_bridge.embedded.agents import (
    AgentDisposedError,
    EmbeddedAgent,
    Turn,
    TurnRecord,
)
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import (
    Agent,
    TextBlock,
    ToolCall,
    ToolDefinition,
    ToolResult,
    UserMessage,
)
from host_bridge.testing import FakeClock, settle

TIMEOUT = 5.0


@pytest.fixture
def host(tmp_path: Path) -> Iterator[EmbeddedHost]:
    with EmbeddedHost(tmp_path / "data", clock=FakeClock(7_000)) as embedded:
        yield embedded


def message(text: str) -> UserMessage:
    return UserMessage((TextBlock(text),), {"kind": "plugin", "plugin": "test"})


class BlockingModel:
    """A model whose turns wait until the test opens the gate; records every turn."""

    def __init__(self, reply: str | None = "ok") -> None:
        self.turns: list[Turn] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.reply = reply

    def __call__(self, turn: Turn) -> str | None:
        self.turns.append(turn)
        self.entered.set()
        assert self.gate.wait(TIMEOUT)
        return self.reply


class Statuses:
    """Records status notifications per agent id."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, agent: Agent, status: str) -> None:
        with self._lock:
            self.seen.append((agent.id, status))

    def of(self, agent: Agent) -> list[str]:
        with self._lock:
            return [status for agent_id, status in self.seen if agent_id == agent.id]


def wait_idle(agent: EmbeddedAgent) -> None:
    agent.when_idle().result(timeout=TIMEOUT)
    settle(agent.actor_ref)  # the turn actor also finished notifying


def message_events(agent: EmbeddedAgent) -> list[Any]:
    return [e.data for e in agent.session.events if e.type == "message"]


# --- turn admission ---------------------------------------------------------------------


def test_admission_is_refused_while_running(host: EmbeddedHost) -> None:
    model = BlockingModel()
    agent = host.spawn_root(model=model)
    agent.prompt("work")
    assert agent.reserve_turn_admission() is None  # queued (until its inbox entry is durable)
    assert model.entered.wait(TIMEOUT)
    assert agent.status == "running"
    assert agent.reserve_turn_admission() is None
    model.gate.set()
    wait_idle(agent)
    release = agent.reserve_turn_admission()
    assert release is not None
    release()


# --- notifications -----------------------------------------------------------------------


def test_idle_is_never_reported_before_the_running_it_ends(host: EmbeddedHost) -> None:
    """A slow "running" listener must not let the "idle" of the same turn overtake it."""
    order: list[str] = []
    in_running = threading.Event()
    let_running_finish = threading.Event()

    def listener(agent: Agent, status: str) -> None:
        if status == "running":
            in_running.set()
            assert let_running_finish.wait(TIMEOUT)
        order.append(status)

    host.agents.on_status(listener)
    agent = host.spawn_root()
    prompter = threading.Thread(target=agent.prompt, args=("go",))
    prompter.start()
    assert in_running.wait(TIMEOUT)
    idle = agent.when_idle()
    # while "running" is still being delivered, the turn cannot have finished
    with pytest.raises(TimeoutError):
        idle.result(timeout=0.2)
    assert order == []
    let_running_finish.set()
    idle.result(TIMEOUT)
    prompter.join(TIMEOUT)
    settle(agent.actor_ref)
    assert order == ["running", "idle"]


def test_created_and_disposed_notifications(host: EmbeddedHost) -> None:
    created: list[tuple[str, bool]] = []
    disposed: list[str] = []

    def on_created(agent: Agent) -> None:
        created.append((agent.id, agent in host.agents.roots()))

    stop_created = host.agents.on_created(on_created)
    stop_disposed = host.agents.on_disposed(lambda agent: disposed.append(agent.id))
    root = host.spawn_root(agent_id="root")
    child = host.spawn_child(root)
    assert created == [("root", True), (child.id, False)]
    host.agents.dispose(child)
    host.agents.dispose(child)  # once only
    assert disposed == [child.id]
    stop_created()
    stop_disposed()
    stop_created()
    host.spawn_root(agent_id="later")
    host.agents.dispose(root)
    assert created == [("root", True), (child.id, False)]
    assert disposed == [child.id]


def test_a_failing_listener_does_not_break_the_registry(host: EmbeddedHost) -> None:
    def bad(agent: Agent) -> None:
        raise RuntimeError("listener bug")

    seen: list[str] = []
    host.agents.on_created(bad)
    host.agents.on_created(lambda agent: seen.append(agent.id))
    agent = host.spawn_root(agent_id="a")
    assert seen == ["a"]
    assert host.agents.get("a") is agent


# --- the model and tools ------------------------------------------------------------------


def echo_tool(calls: list[tuple[Any, ToolCall]]) -> ToolDefinition:
    def execute(arguments: Any, call: ToolCall) -> Future[ToolResult]:
        calls.append((arguments, call))
        value = {"echo": arguments}
        return resolved(ToolResult(False, value, json.dumps(value)))

    return ToolDefinition(
        name="echo",
        description="Echo the arguments.",
        parameters={"type": "object"},
        output_schema={"type": "object"},
        execute=execute,
        render=json.dumps,
        present=str,
    )


def test_the_model_sees_the_message_and_calls_tools_through_the_turn(host: EmbeddedHost) -> None:
    tool_calls: list[tuple[Any, ToolCall]] = []
    seen: list[tuple[str, Any, list[str]]] = []
    results: list[ToolResult] = []

    def model(turn: Turn) -> str:
        seen.append((turn.message.text, dict(turn.message.source), turn.tool_names()))
        results.append(turn.call_tool("echo", {"x": 1}, call_id="call_MODEL_1"))
        results.append(turn.call_tool("missing", {}))
        return "done"

    agent = host.spawn_root(model=model)
    other = host.spawn_root()
    host.tools.register(echo_tool(tool_calls), agent=agent)
    agent.followup(message("hello\nworld"))
    wait_idle(agent)
    assert seen == [("hello\nworld", {"kind": "plugin", "plugin": "test"}, ["echo"])]
    assert len(tool_calls) == 1
    arguments, call = tool_calls[0]
    assert arguments == {"x": 1}
    assert call.agent is agent
    assert (call.call_id, call.synthetic) == ("call_MODEL_1", False)  # the model's id, passed on
    assert results[0] == ToolResult(False, {"echo": {"x": 1}}, '{"echo": {"x": 1}}')
    assert results[1].is_error
    assert message_events(agent) == [
        {
            "role": "user",
            "content": "hello\nworld",
            "source": {"kind": "plugin", "plugin": "test"},
            "inbox": 0,
        },
        {"role": "assistant", "toolCall": {"name": "echo", "arguments": {"x": 1}}},
        {"role": "tool", "name": "echo", "isError": False, "content": '{"echo": {"x": 1}}'},
        {"role": "assistant", "toolCall": {"name": "missing", "arguments": {}}},
        {"role": "tool", "name": "missing", "isError": True, "content": results[1].content},
        {"role": "assistant", "content": "done"},
    ]
    assert agent.turns[0].reply == "done"
    assert not agent.turns[0].failed
    # scoped: the other agent does not see the tool
    assert host.tools.get("echo", agent=other) is None


def test_a_silent_model_records_only_the_user_message(host: EmbeddedHost) -> None:
    agent = host.spawn_root()
    agent.prompt("hi")
    wait_idle(agent)
    assert message_events(agent) == [
        {"role": "user", "content": "hi", "source": {"kind": "user"}, "inbox": 0}
    ]
    assert agent.turns[0].reply is None


def test_model_exceptions_are_contained(host: EmbeddedHost) -> None:
    statuses = Statuses()
    host.agents.on_status(statuses)
    calls: list[str] = []

    def model(turn: Turn) -> str:
        calls.append(turn.message.text)
        if len(calls) == 1:
            raise RuntimeError("model crashed")
        return "recovered"

    agent = host.spawn_root(model=model)
    agent.prompt("first")
    wait_idle(agent)
    assert agent.status == "idle"
    assert agent.turns[0].failed
    assert agent.turns[0].reply is None
    assert statuses.of(agent) == ["running", "idle"]
    agent.prompt("second")
    wait_idle(agent)
    assert agent.turns[1] == TurnRecord(agent.turns[1].message, "recovered", failed=False)
    assert agent.actor_ref.is_alive()


def test_followup_rejects_non_messages(host: EmbeddedHost) -> None:
    agent = host.spawn_root()
    with pytest.raises(TypeError):
        agent.followup("plain text")  # type: ignore[arg-type]
    assert agent.status == "idle"


# --- disposal ------------------------------------------------------------------------------


def test_a_disposed_agent_refuses_work_and_fails_idle_waiters(host: EmbeddedHost) -> None:
    statuses = Statuses()
    host.agents.on_status(statuses)
    model = BlockingModel()
    agent = host.spawn_root(model=model)
    agent.prompt("work")
    agent.followup(message("never runs"))
    pending = agent.when_idle()
    assert model.entered.wait(TIMEOUT)
    host.agents.dispose(agent)
    assert isinstance(pending.exception(TIMEOUT), AgentDisposedError)
    with pytest.raises(AgentDisposedError):
        agent.followup(message("late"))
    assert isinstance(agent.when_idle().exception(0), AgentDisposedError)
    assert agent.reserve_turn_admission() is None
    assert host.agents.get(agent.id) is None
    assert agent not in host.agents.roots()
    model.gate.set()
    assert agent.actor_ref.actor_stopped.wait(TIMEOUT)
    assert [t.message.text for t in model.turns] == ["work"]  # the queued turn never ran
    assert statuses.of(agent) == ["running"]  # no "idle" from a disposed agent


def test_close_disposes_every_agent(tmp_path: Path) -> None:
    host = EmbeddedHost(tmp_path / "data")
    agents = [host.spawn_root() for _ in range(3)]
    host.close()
    host.close()
    for agent in agents:
        assert agent.actor_ref.actor_stopped.wait(TIMEOUT)
        with pytest.raises(AgentDisposedError):
            agent.prompt("late")
    assert host.agents.roots() == ()


# --- roots and children -------------------------------------------------------------------


def test_children_are_not_roots_and_run_on_a_fork(host: EmbeddedHost) -> None:
    parent = host.spawn_root(agent_id="parent")
    parent.prompt("before the child")
    wait_idle(parent)
    child = host.spawn_child(parent)
    assert child.parent is parent
    assert parent.parent is None
    assert host.agents.roots() == (parent,)
    assert host.agents.get(child.id) is child
    header = child.session.header
    assert header.parent_session == parent.session.id
    # inbox entry, user message, turn completion
    assert header.seed_length == len(parent.session.events) == 3
    assert child.session is not parent.session
    assert child.queued == ()  # a fork does not inherit its parent's inbox
    child.prompt("child work")
    wait_idle(child)
    assert len(parent.session.events) == 3
    assert len(child.session.events) == 6


def test_spawn_uses_unique_ids_and_sessions(host: EmbeddedHost) -> None:
    first = host.spawn_root()
    second = host.spawn_root(session_id="named")
    assert first.id != second.id
    assert second.session.id == "named"
    with pytest.raises(ValueError, match="already exists"):
        host.spawn_root(agent_id=first.id)
    session = host.sessions.get("named")
    assert session is second.session
    sharing = host.spawn_root(session=session)
    assert sharing.session is session


# --- the handle from a message to its turn ----------------------------------------------------


def test_send_and_submit_resolve_with_the_record_of_the_turn_they_started(
    host: EmbeddedHost,
) -> None:
    replies = iter(["first", "second"])
    agent = host.spawn_root(model=lambda turn: next(replies))
    sent = agent.send(message("a"))
    submitted = agent.submit(message("b"))
    assert sent.result(timeout=TIMEOUT) == TurnRecord(message("a"), "first")
    assert submitted.result(timeout=TIMEOUT) == TurnRecord(message("b"), "second")


def test_a_failed_turn_hands_its_error_to_the_handle_and_is_recorded_complete(
    host: EmbeddedHost,
) -> None:
    def broken(turn: Turn) -> str | None:
        raise KeyError("model down")

    agent = host.spawn_root(model=broken)
    record = agent.prompt("hi").result(timeout=TIMEOUT)
    assert record.failed and isinstance(record.error, KeyError)
    completed = [e.data for e in agent.session.events if e.type == "turn/completed"]
    assert [data["failed"] for data in completed] == [True]


def test_a_handle_fails_when_the_agent_is_disposed_before_the_turn_ran(
    host: EmbeddedHost,
) -> None:
    model = BlockingModel()
    agent = host.spawn_root(model=model)
    running = agent.send(message("holds the agent"))
    assert model.entered.wait(TIMEOUT)
    waiting = agent.send(message("waits"))
    host.agents.dispose(agent)
    model.gate.set()
    with pytest.raises(AgentDisposedError):
        waiting.result(timeout=TIMEOUT)
    assert running.done()
    late = agent.submit(message("after dispose"))
    with pytest.raises(AgentDisposedError):  # submit fails its future instead of raising
        late.result(timeout=TIMEOUT)
    queued = [e for e in agent.session.events if e.type == "inbox/queued"]
    assert len(queued) == 2  # the waiting entry stays in the log for the next resume


def test_submit_of_a_detached_session_fails_its_future_and_queues_nothing(
    host: EmbeddedHost,
) -> None:
    agent = host.spawn_root(model=lambda turn: "never")
    host.sessions.detach(agent.session)
    with pytest.raises(Exception, match="detached"):
        agent.submit(message("lost")).result(timeout=TIMEOUT)
    assert agent.queued == ()
