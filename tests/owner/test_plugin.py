"""install_schedule and the plugin lifecycle (SPEC §4)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pykka
import pytest

from actors._runtime import Runtime
from host_bridge._plugin import CompositionError, install_schedule
from host_bridge.embedded.tools import ToolConflictError
from host_bridge.protocols import HostContext, ToolDefinition, ToolResult
from host_bridge.testing import PENDING, FakeHost, settle

TOOL_NAMES = ["schedule_create", "schedule_delete", "schedule_list"]


def names(host: FakeHost, agent: object) -> list[str]:
    return [tool.name for tool in host.tools.tools_for(agent)]  # type: ignore[arg-type]


@pytest.mark.parametrize("missing", ["sessions", "agents", "tools", "session_persistence"])
def test_missing_host_part_is_a_composition_error(
    host: FakeHost, missing: str, runtime: Runtime
) -> None:
    context = host.context()
    setattr(context, missing, None)
    with pytest.raises(CompositionError, match=missing):
        install_schedule(context, runtime=runtime)
    assert host.agents.listener_counts() == {"created": 0, "status": 0, "disposed": 0}


def test_composition_error_names_every_missing_part(host: FakeHost, runtime: Runtime) -> None:
    context = HostContext(sessions=None, agents=None, tools=host.tools, session_persistence=None)
    with pytest.raises(CompositionError) as raised:
        install_schedule(context, runtime=runtime)
    assert "sessions" in str(raised.value)
    assert "agents" in str(raised.value)
    assert "session_persistence" in str(raised.value)


def test_only_roots_created_after_install_get_schedule(host: FakeHost, runtime: Runtime) -> None:
    before = host.spawn_root("early")
    plugin = install_schedule(host.context(), runtime=runtime)
    after = host.spawn_root("late")
    child = host.spawn_child("child")
    assert names(host, before) == []
    assert names(host, child) == []
    assert names(host, after) == TOOL_NAMES
    assert [a.id for a in plugin.agents()] == ["late"]
    owner = plugin.owner_of(after)
    assert owner is not None
    settle(owner)
    assert plugin.status().owners[0].state == "running"


def test_never_installs_twice_on_one_agent(host: FakeHost, runtime: Runtime) -> None:
    plugin = install_schedule(host.context(), runtime=runtime)
    agent = host.spawn_root("a")
    plugin._on_created(agent)  # a host that announces twice
    assert [a.id for a in plugin.agents()] == ["a"]
    assert names(host, agent) == TOOL_NAMES


def _dummy(name: str) -> ToolDefinition:
    def execute(arguments: object, call: object) -> Future[ToolResult]:
        raise AssertionError("not called")

    return ToolDefinition(name, "", {}, {}, execute, str, str)


def test_registration_conflict_rolls_back_and_reraises(host: FakeHost, runtime: Runtime) -> None:
    plugin = install_schedule(host.context(), runtime=runtime)
    session = host.new_session("s")
    from host_bridge.testing import FakeAgent

    agent = FakeAgent("a", session, journal=host.journal)
    host.tools.register(_dummy("schedule_delete"), agent=agent)  # the third tool will conflict
    with pytest.raises(ToolConflictError):
        host.agents.create_root(agent)
    assert names(host, agent) == ["schedule_delete"]  # ours were unregistered again
    assert plugin.agents() == ()
    assert [r for r in pykka.ActorRegistry.get_all() if r.is_alive()] == []


def test_idle_status_requests_a_drive(host: FakeHost, runtime: Runtime) -> None:
    plugin = install_schedule(host.context(), runtime=runtime)
    agent = host.spawn_root("a")
    owner = plugin.owner_of(agent)
    assert owner is not None
    settle(owner)
    host.tools.execute("schedule_create", {"prompt": "x", "after_seconds": 1}, agent=agent)
    settle(owner)
    agent.begin_turn()
    host.timers.advance(1000)
    settle(owner)
    assert agent.received == []
    host.agents.notify_status(agent, "idle")  # the host reports idle (without resolving waiters)
    agent.end_turn()
    settle(owner)
    assert len(agent.received) == 1


def test_agent_disposal_unregisters_tools_and_disposes_the_owner(
    host: FakeHost, runtime: Runtime
) -> None:
    plugin = install_schedule(host.context(), runtime=runtime)
    agent = host.spawn_root("a")
    owner = plugin.owner_of(agent)
    assert owner is not None
    host.tools.execute("schedule_create", {"prompt": "x", "after_seconds": 60}, agent=agent)
    before = len(agent.session.events)
    host.agents.dispose(agent)
    assert names(host, agent) == []
    owner.actor_stopped.wait(5)
    assert not owner.is_alive()
    assert host.timers.armed() == []
    assert len(agent.session.events) == before  # disposal appends nothing
    assert plugin.agents() == ()


def test_plugin_dispose_waits_for_every_owner(host: FakeHost, runtime: Runtime) -> None:
    plugin = host.install_schedule(runtime=runtime)
    first = host.spawn_root("a")  # returns once the owner's start-up flush is done
    second = host.spawn_root("b")
    host.sessions.script(PENDING)
    host.tools.submit("schedule_list", {}, agent=first)
    owner = plugin.owner_of(first)
    assert owner is not None
    settle(owner)
    lengths = [len(a.session.events) for a in (first, second)]
    disposed = plugin.dispose()
    assert not disposed.done()  # the first owner's preflight is still in flight
    host.sessions.release(True)
    assert disposed.result(timeout=5) is None
    assert [len(a.session.events) for a in (first, second)] == lengths
    assert host.agents.listener_counts() == {"created": 0, "status": 0, "disposed": 0}
    assert names(host, first) == []
    late = host.spawn_root("late")
    assert names(host, late) == []
    assert plugin.dispose() is disposed  # idempotent


def test_dispose_with_no_owners_resolves_at_once(host: FakeHost, runtime: Runtime) -> None:
    plugin = install_schedule(host.context(), runtime=runtime)
    assert plugin.dispose().result(timeout=1) is None
    assert plugin.status().disposed


def test_status_shows_a_faulted_owner(host: FakeHost, runtime: Runtime) -> None:
    plugin = install_schedule(host.context(), runtime=runtime)
    agent = host.spawn_root("a")
    host.tools.execute("schedule_create", {"prompt": "x", "after_seconds": 1}, agent=agent)
    session = agent.session
    assert hasattr(session, "fail_appends")
    session.fail_appends(OSError("disk"), when=lambda t, d: d.get("operation") == "dispatch")
    host.timers.advance(1000)
    owner = plugin.owner_of(agent)
    assert owner is not None
    settle(owner)
    (faulted,) = plugin.status().faulted
    assert faulted.agent_id == "a"
    assert faulted.fault == "dispatch append failed"


class _RecordingTimers:
    """Timers that remember the delays armed on them and whether they were closed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.delays: list[int] = []
        self.closed = False

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Any:
        self.delays.append(delay_ms)
        return self.inner.call_later(delay_ms, callback)

    def close(self) -> None:
        self.closed = True
        self.inner.close()


class _RecordingRuntime:
    """A runtime that hands out :class:`_RecordingTimers` and counts them."""

    def __init__(self, inner: Runtime) -> None:
        self.inner = inner
        self.name = inner.name
        self.made: list[_RecordingTimers] = []

    def bind(self, actor_class: Any) -> Any:
        return self.inner.bind(actor_class)

    def timers(self) -> _RecordingTimers:
        made = _RecordingTimers(self.inner.timers())
        self.made.append(made)
        return made

    def run_blocking(self, function: Callable[..., Any], *args: Any) -> Any:
        return self.inner.run_blocking(function, *args)

    def wait(self, future: Future[Any], timeout: float | None = None) -> Any:
        return self.inner.wait(future, timeout)

    def on_hub_thread(self) -> bool:
        return self.inner.on_hub_thread()


def test_without_host_timers_the_runtime_supplies_them_and_they_close_with_the_plugin(
    host: FakeHost, runtime: Runtime
) -> None:
    recording = _RecordingRuntime(runtime)
    context = host.context()
    context.timers = None
    plugin = install_schedule(context, runtime=recording)
    assert context.timers is None  # the host's context is not changed
    agent = host.spawn_root("a")
    result = host.tools.execute(
        "schedule_create", {"prompt": "stretch", "after_seconds": 60}, agent=agent, timeout=5
    )
    assert isinstance(result, ToolResult) and not result.is_error, result
    owner = plugin.owner_of(agent)
    assert owner is not None
    settle(owner)
    (timers,) = recording.made
    assert 60_000 in timers.delays  # the owner armed its reminder on the runtime's timers
    assert not timers.closed
    plugin.dispose().result(timeout=5)
    assert timers.closed


def test_host_timers_are_used_as_given_and_left_open(host: FakeHost, runtime: Runtime) -> None:
    recording = _RecordingRuntime(runtime)
    plugin = install_schedule(host.context(), runtime=recording)
    agent = host.spawn_root("a")
    host.tools.execute(
        "schedule_create", {"prompt": "stretch", "after_seconds": 60}, agent=agent, timeout=5
    )
    owner = plugin.owner_of(agent)
    assert owner is not None
    settle(owner)
    assert recording.made == []
    assert host.timers.armed() == [60_000]
    plugin.dispose().result(timeout=5)
