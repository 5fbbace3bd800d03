"""The embedded host on the gevent runtime: nothing a turn does may block or deadlock the hub."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from actors._contract import SessionDetachedError
from actors._runtime import wait_for
from host_bridge._plugin import install_schedule
from host_bridge.embedded.agents import EmbeddedAgent, RootAgents, Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import UserMessage
from host_bridge.testing import FakeClock, FakeTimers


def test_a_turn_forks_spawns_and_calls_tools_on_the_hub(tmp_path: Path) -> None:
    host = EmbeddedHost(tmp_path, runtime="gevent")
    plugin = install_schedule(host.context(), runtime="gevent")
    children: list[EmbeddedAgent] = []
    seen: dict[str, object] = {}
    done = threading.Event()

    def model(turn: Turn) -> str:
        seen["thread"] = threading.current_thread().name
        # a fork writes its session row through SQLite: off the hub, only this greenlet waits
        children.append(host.spawn_child(turn.agent))
        # the tool's owner runs on the same hub; the turn waits for it without blocking it
        created = turn.call_tool("schedule_create", {"prompt": "p", "after_seconds": 600})
        listed = turn.call_tool("schedule_list", {})
        seen["created"] = created.value
        seen["listed"] = listed.value
        done.set()
        return "ok"

    agent = host.spawn_root(model=model, session_id="root")
    agent.prompt("go")
    assert done.wait(10)
    plugin.wait_quiet(agent)
    assert agent.when_idle().result(timeout=10) is None
    assert seen["thread"] == "dsh-gevent-hub"
    assert seen["created"]["id"] == "schedule-1"  # type: ignore[index]
    assert [v["id"] for v in seen["listed"]["schedules"]] == ["schedule-1"]  # type: ignore[index]
    (child,) = children
    assert child.session.header.parent_session == "root"
    assert child not in host.agents.roots() and agent in host.agents.roots()
    assert plugin.agents() == (agent,)  # children never get Schedule
    plugin.dispose().result(timeout=10)
    host.close()


def test_root_agents_is_a_snapshot_with_constant_time_membership(tmp_path: Path) -> None:
    host = EmbeddedHost(tmp_path, durable=False)
    try:
        first = host.spawn_root(agent_id="a")
        before = host.agents.roots()
        assert isinstance(before, RootAgents)
        assert before is host.agents.roots()  # cached until the roots change
        second = host.spawn_root(agent_id="b")
        child = host.spawn_child(first)
        after = host.agents.roots()
        assert list(before) == [first] and before == (first,)
        assert after == (first, second) and len(after) == 2 and after[1] is second
        assert second in after and second not in before and child not in after
        assert "b" not in after  # type: ignore[comparison-overlap]  # by identity, not id
        host.agents.dispose(first)
        assert host.agents.roots() == (second,)
    finally:
        host.close()


def test_appends_run_in_the_caller_on_the_hub_and_on_foreign_threads(
    tmp_path: Path,
) -> None:
    """An idle session actor lets a greenlet of its hub and a foreign thread alike run an
    append in its critical section, without a mailbox hop."""
    host = EmbeddedHost(tmp_path, runtime="gevent")
    try:
        session = host.sessions.create("s")
        inbox = session.actor_ref.actor_inbox
        puts = inbox.unfinished_tasks  # type: ignore[attr-defined]
        runtime = host.runtime
        appended: list[int] = []
        done = threading.Event()

        def on_hub() -> None:
            for n in range(3):
                appended.append(session.append("note", {"n": n}).seq)
            assert wait_for(session.request_flush(), timeout=5) is True
            done.set()

        runtime.spawn(on_hub)  # type: ignore[attr-defined]
        assert done.wait(5)
        assert inbox.unfinished_tasks == puts  # type: ignore[attr-defined]  # no mailbox hop
        assert session.append("note", {"n": 3}).seq == 3  # from this thread: in the caller too
        assert inbox.unfinished_tasks == puts  # type: ignore[attr-defined]
        assert appended == [0, 1, 2]
        assert [e.data["n"] for e in session.events] == [0, 1, 2, 3]
        assert wait_for(host.sessions.flush(session), timeout=5) is True
        host.sessions.detach(session)
        with pytest.raises(SessionDetachedError):
            session.append("note", {"n": 4})
    finally:
        host.close()


@pytest.mark.parametrize(
    ("host_runtime", "owner_runtime"), [("threading", "gevent"), ("gevent", "threading")]
)
def test_host_and_owners_may_run_on_different_runtimes(
    tmp_path: Path, host_runtime: str, owner_runtime: str
) -> None:
    clock = FakeClock()
    timers = FakeTimers(clock)
    host = EmbeddedHost(tmp_path, clock=clock, timers=timers, runtime=host_runtime)
    plugin = install_schedule(host.context(), runtime=owner_runtime)
    agent = host.spawn_root(session_id="mixed")
    result = host.tools.execute(
        "schedule_create", {"prompt": "mixed", "after_seconds": 5}, agent=agent, timeout=5
    )
    assert result.value["id"] == "schedule-1"
    plugin.wait_quiet(agent)
    reminded = threading.Event()
    original = agent.followup

    def followup(message: UserMessage) -> None:
        original(message)
        reminded.set()

    agent.followup = followup  # type: ignore[method-assign]
    timers.advance(5_000)
    assert reminded.wait(5)
    plugin.wait_quiet(agent)
    assert [e.data["operation"] for e in agent.session.events if e.type == "schedule/change"] == [
        "create",
        "dispatch",
    ]
    wait_for(plugin.dispose(), timeout=5)
    host.close()
