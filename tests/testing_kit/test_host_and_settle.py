"""FakeHost wiring, and settle / settle_all with real mailbox actors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pykka
import pytest

from actors._base import MailboxActor
from actors._runtime import Runtime
from host_bridge.protocols import Agent, HostContext, TextBlock, UserMessage
from host_bridge.testing import PENDING, FakeHost, settle
from host_bridge.testing._settle import settle_all

# -- FakeHost -------------------------------------------------------------------------


def test_context_wires_every_fake() -> None:
    host = FakeHost(start_ms=10)
    context = host.context()
    assert isinstance(context, HostContext)
    assert context.sessions is host.sessions
    assert context.agents is host.agents
    assert context.tools is host.tools
    assert context.timers is host.timers
    assert context.session_persistence is host.persistence is not None
    assert context.clock() == 10
    host.clock.advance(7)
    assert context.monotonic() == 7  # the fake clock's elapsed time, what FakeTimers measure
    assert context.clock_watch_ms is None  # the clock watchdog is off unless asked


def test_the_clock_watchdog_is_switched_on_by_asking() -> None:
    assert FakeHost(clock_watch_ms=500).context().clock_watch_ms == 500


def test_spawn_root_creates_a_session_and_announces_the_agent() -> None:
    host = FakeHost()
    seen: list[tuple[str, bool]] = []

    def on_created(agent: Agent) -> None:
        seen.append((agent.id, agent in host.agents.roots()))

    host.agents.on_created(on_created)
    agent = host.spawn_root()
    assert agent.id == "agent-1"
    assert seen == [("agent-1", True)]
    assert host.sessions.get(agent.session.id) is agent.session
    assert agent.registry is host.agents
    child = host.spawn_child("helper")
    assert seen[-1] == ("helper", False)
    assert child not in host.agents.roots()
    fork = host.spawn_root(
        "agent-2", "fork", seed_events=[("x", 1)], seed_length=1, parent_session="p"
    )
    assert fork.session.header.seed_length == 1
    assert len(fork.session.events) == 1


def test_appended_events_use_the_host_clock() -> None:
    host = FakeHost(start_ms=500)
    agent = host.spawn_root()
    host.timers.advance(25)
    assert agent.session.append("t", None).time == 525


def test_one_journal_orders_a_whole_transaction() -> None:
    """The kind of assertion an owner test makes, performed here by hand."""
    host = FakeHost()
    agent = host.spawn_root()
    host.journal.clear()
    host.sessions.script(True, PENDING)
    assert host.sessions.flush(agent.session).result() is True
    release = agent.reserve_turn_admission()
    assert release is not None
    try:
        agent.followup(UserMessage((TextBlock("due"),), {"kind": "plugin"}))
        agent.session.append("schedule/change", {"operation": "dispatch"})
    finally:
        release()
    barrier = host.sessions.flush(agent.session)
    assert host.journal.kinds() == [
        "flush",
        "flush-resolved",
        "reserve",
        "followup",
        "append",
        "release",
        "flush",
    ]
    host.sessions.release(True)
    assert barrier.result() is True
    assert host.sessions.durable_length(agent.session) == 1
    host.timers.call_later(5, lambda: None)
    host.timers.advance(5)
    assert host.journal.kinds()[-3:] == ["flush-resolved", "timer-armed", "timer-fired"]


# -- settle ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Countdown:
    n: int


@dataclass(frozen=True)
class Pass:
    n: int


@dataclass(frozen=True)
class Forever:
    pass


class Counter(MailboxActor):
    """Handles Countdown(n) by posting itself Countdown(n - 1) until 0."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []
        self.partner: pykka.ActorRef[Any] | None = None

    def handle_Countdown(self, message: Countdown) -> None:
        self.seen.append(message.n)
        if message.n > 0:
            self.actor_ref.tell(Countdown(message.n - 1))

    def handle_Pass(self, message: Pass) -> None:
        self.seen.append(message.n)
        if message.n > 0 and self.partner is not None:
            self.partner.tell(Pass(message.n - 1))

    def handle_Forever(self, message: Forever) -> None:
        self.actor_ref.tell(message)

    def handle_Seen(self, message: Seen) -> list[int]:
        return list(self.seen)


@dataclass(frozen=True)
class Seen:
    pass


class Counters(list[pykka.ActorRef[Counter]]):
    """The counters a test started, on one actor runtime."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__()
        self.runtime = runtime


@pytest.fixture
def counters(runtime: Runtime) -> Iterator[Counters]:
    refs = Counters(runtime)
    yield refs
    for ref in refs:
        ref.stop()


def start(refs: Counters) -> pykka.ActorRef[Counter]:
    ref = refs.runtime.bind(Counter).start()
    refs.append(ref)
    return ref


def seen(ref: pykka.ActorRef[Counter]) -> list[int]:
    result = ref.ask(Seen(), timeout=5)
    assert isinstance(result, list)
    return result


def test_settle_drains_messages_an_actor_posts_to_itself(counters: Counters) -> None:
    ref = start(counters)
    assert isinstance(ref.actor_inbox.unfinished_tasks, int)  # type: ignore[attr-defined]
    ref.tell(Countdown(500))
    settle(ref)
    assert ref.actor_inbox.empty()
    assert seen(ref) == list(range(500, -1, -1))


def test_settle_gives_up_after_max_rounds(counters: Counters) -> None:
    ref = start(counters)
    ref.tell(Forever())
    with pytest.raises(RuntimeError):
        settle(ref, max_rounds=5)


def test_settle_accepts_a_stopped_actor(runtime: Runtime) -> None:
    ref = runtime.bind(Counter).start()
    ref.stop()
    settle(ref)
    settle_all(ref)


def test_settle_all_follows_work_across_actors(counters: Counters) -> None:
    first, second = start(counters), start(counters)
    first.proxy().partner = second
    second.proxy().partner = first
    settle_all(first, second)
    second.tell(Pass(301))  # the ball ends on `first` with 0
    settle_all(first, second)
    assert first.actor_inbox.empty() and second.actor_inbox.empty()
    assert seen(second) == list(range(301, -1, -2))
    assert seen(first) == list(range(300, -1, -2))


def test_settle_all_gives_up_after_max_rounds(counters: Counters) -> None:
    first, second = start(counters), start(counters)
    second.tell(Forever())
    with pytest.raises(RuntimeError):
        settle_all(first, second, max_rounds=3)
