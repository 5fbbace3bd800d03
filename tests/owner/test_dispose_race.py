"""A dispose racing tool calls and deliveries (SPEC §5, dispose): each call's answer, no append.

Teardown begins when ``plugin.dispose()`` (or the agent's disposal) is called, not
when the owner's mailbox reaches its ``DisposeOwner``. Each test begins it at one
exact point of a transaction: from a host call the owner makes (the next flush or
clock sample, on the owner's own thread or greenlet), or from the test while a
flush is pending. So every interleaving is deterministic, on both runtimes.

Where the call was when dispose began, and what it answers:

* still in the mailbox: ``internal_error`` ``shutting_down``, without a flush;
* during its preflight flush: ``shutting_down``, or ``persistence_uncertain``
  (not appended) when that flush failed;
* between its preflight and its append: ``shutting_down`` (``not_live`` when
  the agent was disposed);
* between its append and its barrier: as the barrier decides (its own change
  stays, nothing follows it);
* not yet made: ``shutting_down``, from the disposing owner or, once it is gone,
  from the tool itself.

Only the last-but-one appends anything, and it appended before dispose began.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, cast

import pykka
import pytest

from actors._runtime import Runtime
from actors._teardown import TeardownCause, TeardownGate
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge._tools import schedule_tools
from host_bridge.protocols import Session, ToolCall, ToolDefinition, ToolResult
from host_bridge.testing import PENDING, FakeAgent, FakeHost, FakeSession, settle
from messages._tool_values import Operation, persistence_uncertain
from tests.changes import schedule_changes
from tests.schema_check import checked

SHUTTING_DOWN = {
    "code": "internal_error",
    "message": "Schedule is shutting down, so the operation did not run; nothing was changed.",
}
NOT_LIVE = {
    "code": "internal_error",
    "message": "The agent that owns these schedules is no longer live.",
}
CREATE = {"prompt": "stretch", "after_seconds": 60}


class Hooks:
    """The fake host's sessions and clock, running an action at the next flush or sample.

    The action runs on the caller's thread or greenlet (the owner's), before the
    flush is made or the clock read, so it lands between two steps of the owner.
    """

    def __init__(self, host: FakeHost) -> None:
        self.host = host
        self._flush: Callable[[], None] | None = None
        self._sample: Callable[[], None] | None = None

    def at_next_flush(self, action: Callable[[], None]) -> None:
        self._flush = action

    def at_next_sample(self, action: Callable[[], None]) -> None:
        self._sample = action

    def flush(self, session: Session) -> Future[bool]:
        action, self._flush = self._flush, None
        if action is not None:
            action()
        return self.host.sessions.flush(session)

    def get(self, session_id: str) -> Session | None:
        return self.host.sessions.get(session_id)

    def list(self) -> list[FakeSession]:
        return self.host.sessions.list()

    def clock(self) -> int:
        action, self._sample = self._sample, None
        if action is not None:
            action()
        return self.host.clock()


@dataclasses.dataclass
class Rig:
    """Schedule on a fake host whose flushes and clock can begin a dispose."""

    host: FakeHost
    hooks: Hooks
    plugin: SchedulePlugin
    agent: FakeAgent
    owner: pykka.ActorRef[Any]
    tools: dict[str, ToolDefinition]
    disposed: list[Future[None]] = dataclasses.field(default_factory=list)

    def begin_dispose(self) -> None:
        self.disposed.append(self.plugin.dispose())

    def dispose_agent(self) -> None:
        self.host.agents.dispose(self.agent)

    def execute(self, name: str, arguments: Any) -> Future[ToolResult]:
        """Call a tool as a host that holds its definition does (also after dispose)."""
        return self.tools[name].execute(arguments, ToolCall(f"call-{name}", self.agent))

    def settle(self) -> None:
        settle(self.owner)

    def answer(self, reply: Future[ToolResult], tool: str) -> Any:
        assert reply.done(), "the tool has not answered"
        return checked(tool, reply.result(timeout=0).value)

    def changes(self) -> list[tuple[str, str]]:
        return schedule_changes(self.agent.session.events)

    def finished(self) -> None:
        """Every dispose begun has finished."""
        assert self.disposed
        for future in self.disposed:
            assert future.result(timeout=5) is None


@pytest.fixture
def rig(runtime: Runtime) -> Iterator[Rig]:
    host = FakeHost()
    hooks = Hooks(host)
    context = dataclasses.replace(host.context(), sessions=hooks, clock=hooks.clock)
    plugin = install_schedule(context, runtime=runtime)
    agent = host.spawn_root("agent-1")
    tools = {}
    for name in ("schedule_create", "schedule_list", "schedule_delete"):
        tool = host.tools.get(name, agent=agent)
        assert tool is not None
        tools[name] = tool
    owner = plugin.owner_of(agent)
    assert owner is not None
    rig = Rig(host, hooks, plugin, agent, owner, tools)
    rig.settle()  # the start-up drive
    yield rig
    plugin.dispose().result(timeout=5)


def test_a_call_still_in_the_mailbox_when_dispose_begins_never_flushes(rig: Rig) -> None:
    late: list[Future[ToolResult]] = []

    def call_then_dispose() -> None:  # the create lands in the mailbox ahead of DisposeOwner
        late.append(rig.execute("schedule_create", CREATE))
        rig.begin_dispose()

    rig.hooks.at_next_flush(call_then_dispose)
    flushes = rig.host.sessions.flush_count
    listed = rig.execute("schedule_list", {})
    rig.settle()
    rig.finished()
    assert rig.answer(late[0], "create") == SHUTTING_DOWN
    assert rig.host.sessions.flush_count == flushes + 1  # the list's preflight only
    assert rig.answer(listed, "list") == SHUTTING_DOWN  # its preflight was under way
    assert rig.changes() == []


@pytest.mark.parametrize("begun", ["as_the_flush_is_asked", "while_it_is_pending"])
@pytest.mark.parametrize("flushed", [True, False])
@pytest.mark.parametrize("tool", ["create", "delete"])
def test_a_preflight_under_way_when_dispose_begins_settles_and_nothing_is_appended(
    rig: Rig, tool: str, flushed: bool, begun: str
) -> None:
    before: list[tuple[str, str]] = []
    arguments: dict[str, Any] = CREATE
    if tool == "delete":
        rig.execute("schedule_create", CREATE)
        rig.settle()
        before = [("create", "schedule-1")]
        arguments = {"id": "schedule-1"}
    if begun == "as_the_flush_is_asked":
        rig.host.sessions.script(flushed)
        rig.hooks.at_next_flush(rig.begin_dispose)
        reply = rig.execute(f"schedule_{tool}", arguments)
        rig.settle()
    else:
        rig.host.sessions.script(PENDING)
        reply = rig.execute(f"schedule_{tool}", arguments)
        rig.settle()
        rig.begin_dispose()
        rig.settle()
        assert not rig.disposed[0].done()  # waits for the preflight to settle
        rig.host.sessions.release(flushed)
    rig.finished()
    expected = (
        SHUTTING_DOWN
        if flushed
        else persistence_uncertain(
            "create" if tool == "create" else "delete",
            appended=False,
            id=None if tool == "create" else "schedule-1",
        ).to_json()
    )
    assert rig.answer(reply, tool) == expected
    assert rig.changes() == before


def test_dispose_beginning_between_a_preflight_and_its_append_appends_nothing(rig: Rig) -> None:
    rig.hooks.at_next_sample(rig.begin_dispose)  # a create reads the clock once, before appending
    created = rig.execute("schedule_create", CREATE)
    rig.settle()
    rig.finished()
    assert rig.answer(created, "create") == SHUTTING_DOWN
    assert rig.changes() == []


def test_an_agent_disposed_between_a_preflight_and_its_append_gets_no_append(rig: Rig) -> None:
    rig.hooks.at_next_sample(rig.dispose_agent)
    created = rig.execute("schedule_create", CREATE)
    rig.settle()
    assert rig.answer(created, "create") == NOT_LIVE
    assert rig.changes() == []
    after = rig.execute("schedule_list", {})  # the owner is stopping or gone
    rig.settle()
    assert rig.answer(after, "list") == NOT_LIVE


@pytest.mark.parametrize("flushed", [True, False])
@pytest.mark.parametrize("tool", ["create", "delete"])
def test_a_change_appended_before_dispose_began_answers_as_its_barrier_decides(
    rig: Rig, tool: str, flushed: bool
) -> None:
    arguments: dict[str, Any] = CREATE
    if tool == "delete":
        rig.execute("schedule_create", CREATE)
        rig.settle()
        arguments = {"id": "schedule-1"}
    rig.host.sessions.script(True, PENDING)  # the preflight passes, the barrier waits
    reply = rig.execute(f"schedule_{tool}", arguments)
    rig.settle()
    changes = rig.changes()
    assert changes[-1] == (tool, "schedule-1")
    rig.begin_dispose()
    rig.settle()
    assert not rig.disposed[0].done()  # waits for the barrier
    flushes = rig.host.sessions.flush_count
    rig.host.sessions.release(flushed)
    rig.finished()
    value = rig.answer(reply, tool)
    if not flushed:
        operation: Operation = "create" if tool == "create" else "delete"
        assert value == persistence_uncertain(operation, appended=True, id="schedule-1").to_json()
    elif tool == "create":
        assert (value["id"], value["state"]) == ("schedule-1", "scheduled")
    else:
        assert value == {"id": "schedule-1", "deleted": True}
    assert rig.changes() == changes  # nothing after the barrier
    assert rig.host.sessions.flush_count == flushes  # and no drive
    assert rig.host.timers.armed() == []


def test_a_call_arriving_after_dispose_began_answers_shutting_down(rig: Rig) -> None:
    rig.host.sessions.script(PENDING)
    first = rig.execute("schedule_list", {})
    rig.settle()
    rig.begin_dispose()
    flushes = rig.host.sessions.flush_count
    during = rig.execute("schedule_create", CREATE)  # the owner waits for the list's preflight
    rig.settle()
    assert rig.answer(during, "create") == SHUTTING_DOWN
    rig.host.sessions.release(True)
    rig.finished()
    after = rig.execute("schedule_create", CREATE)  # the owner is gone
    assert rig.answer(after, "create") == SHUTTING_DOWN
    assert rig.answer(first, "list") == SHUTTING_DOWN
    assert rig.host.sessions.flush_count == flushes
    assert rig.changes() == []


def test_dispose_beginning_after_a_delivery_preflight_delivers_nothing(rig: Rig) -> None:
    rig.execute("schedule_create", {"prompt": "due", "after_seconds": 1})
    rig.settle()
    rig.hooks.at_next_sample(rig.begin_dispose)  # the delivery's first decision
    rig.host.timers.advance(1000)
    rig.settle()
    rig.finished()
    assert rig.host.journal.of("reserve") == []
    assert rig.agent.received == []
    assert rig.changes() == [("create", "schedule-1")]


def test_dispose_begun_by_the_host_inside_an_append_lets_that_append_finish(rig: Rig) -> None:
    session = rig.agent.session
    assert isinstance(session, FakeSession)
    remove = session.add_append_guard(lambda *_: rig.begin_dispose())  # the owner's own call
    created = rig.execute("schedule_create", CREATE)
    rig.settle()
    remove()
    rig.finished()
    assert rig.answer(created, "create")["id"] == "schedule-1"  # its barrier succeeded
    assert rig.changes() == [("create", "schedule-1")]


class _StoppedWhileTold:
    """An owner ref whose actor stops between ``tell``'s liveness check and the put."""

    def __init__(self) -> None:
        self.told: list[Any] = []

    def tell(self, message: Any) -> None:
        self.told.append(message)  # put in an inbox nobody reads any more

    def is_alive(self) -> bool:
        return False


@pytest.mark.parametrize(
    ("cause", "expected"),
    [("shutting_down", SHUTTING_DOWN), ("not_live", NOT_LIVE), (None, NOT_LIVE)],
)
def test_a_call_told_to_an_owner_that_stopped_meanwhile_is_still_answered(
    host: FakeHost, cause: TeardownCause | None, expected: dict[str, str]
) -> None:
    agent = host.spawn_root("agent-1")
    gate = TeardownGate()
    if cause is not None:
        gate.close(cause)
    owner = _StoppedWhileTold()
    tool = schedule_tools(agent, cast("pykka.ActorRef[Any]", owner), gate)[1]
    assert tool.name == "schedule_list"
    reply = tool.execute({}, ToolCall("call-1", agent))
    assert len(owner.told) == 1
    assert reply.done()
    assert checked("list", reply.result(timeout=0).value) == expected
