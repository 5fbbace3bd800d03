"""FakeAgent and FakeAgentRegistry: their journal, counters, scripting and manual turns.

The rules every host shares are checked on FakeHost by the conformance kit
(``tests/conformance``); here what tests of Schedule rely on the fake for.
"""

from __future__ import annotations

import pytest

from host_bridge.protocols import Agent, AgentRegistry, TextBlock, UserMessage
from host_bridge.testing import FakeAgent, FakeSession, Journal
from host_bridge.testing._registry import FakeAgentRegistry


def msg(text: str) -> UserMessage:
    return UserMessage((TextBlock(text),), {"kind": "test"})


def make() -> tuple[FakeAgent, FakeAgentRegistry, Journal]:
    journal = Journal()
    registry = FakeAgentRegistry(journal)
    agent = registry.create_root("a1", FakeSession("s1"))
    return agent, registry, journal


def test_protocols_are_satisfied() -> None:
    agent, registry, _ = make()
    assert isinstance(agent, Agent)
    assert isinstance(registry, AgentRegistry)
    assert agent.registry is registry


def test_admission_granted_when_idle_and_release_is_idempotent() -> None:
    agent, _, journal = make()
    release = agent.reserve_turn_admission()
    assert release is not None
    assert agent.reserved
    assert agent.reserve_turn_admission() is None  # already reserved
    release()
    release()
    assert not agent.reserved
    assert agent.release_count == 1
    assert journal.of("release") == [("release", "a1")]
    assert journal.of("reserve") == [("reserve", "a1", True), ("reserve", "a1", False)]


def test_admission_refused_while_running_or_queued() -> None:
    agent, _, _ = make()
    agent.begin_turn()
    assert agent.reserve_turn_admission() is None
    agent.end_turn()
    agent.followup(msg("wake"))
    assert agent.reserve_turn_admission() is None  # about to wake
    agent.run_queued_turns()
    assert agent.reserve_turn_admission() is not None
    assert agent.reserve_calls == 3


def test_followup_while_reserved_starts_only_after_release() -> None:
    agent, _, journal = make()
    release = agent.reserve_turn_admission()
    assert release is not None
    agent.followup(msg("reminder"))
    assert agent.run_queued_turns() == 0
    assert agent.status == "idle"
    with pytest.raises(RuntimeError):
        agent.begin_turn()
    release()
    assert agent.run_queued_turns() == 1
    assert agent.turns == [(msg("reminder"),)]
    assert agent.queued == []
    assert journal.kinds() == [
        "agent-created",
        "reserve",
        "followup",
        "release",
        "turn-begin",
        "turn-end",
    ]


def test_followup_records_and_failure_injection() -> None:
    agent, _, journal = make()
    agent.fail_followups(RuntimeError("queue full"), times=1)
    with pytest.raises(RuntimeError):
        agent.followup(msg("one"))
    assert agent.queued == [] and agent.received == []
    agent.followup(msg("two"))
    assert agent.received == [msg("two")]
    agent.fail_followups(ValueError)
    for _ in range(3):
        with pytest.raises(ValueError):
            agent.followup(msg("x"))
    agent.clear_followup_failures()
    agent.followup(msg("three"))
    assert agent.queued == [msg("two"), msg("three")]
    assert journal.of("followup") == [("followup", "a1", "two"), ("followup", "a1", "three")]
    assert journal.of("followup-failed")[0] == ("followup-failed", "a1", "one")


def test_when_idle_resolves_at_once_when_settled() -> None:
    agent, _, journal = make()
    assert agent.when_idle().done()
    assert agent.when_idle_calls == 1
    assert journal.of("when_idle") == [("when_idle", "a1")]


def test_when_idle_waits_for_the_end_of_the_turn() -> None:
    agent, _, _ = make()
    agent.begin_turn()
    future = agent.when_idle()
    assert not future.done()
    assert agent.idle_waiters() == [future]
    agent.end_turn()
    assert future.done()
    assert agent.idle_waiters() == []


def test_when_idle_waits_for_queued_turns_and_for_release() -> None:
    agent, _, _ = make()
    agent.followup(msg("q"))
    queued_wait = agent.when_idle()
    assert not queued_wait.done()
    agent.run_queued_turns()
    assert queued_wait.done()

    release = agent.reserve_turn_admission()
    assert release is not None
    reserved_wait = agent.when_idle()
    assert not reserved_wait.done()
    release()
    assert reserved_wait.done()


def test_release_with_a_queued_followup_does_not_resolve_idle_waiters() -> None:
    agent, _, _ = make()
    release = agent.reserve_turn_admission()
    assert release is not None
    future = agent.when_idle()
    agent.followup(msg("reminder"))
    release()
    assert not future.done()
    agent.run_queued_turns()
    assert future.done()


def test_end_turn_with_messages_queued_during_the_turn_keeps_waiting() -> None:
    agent, _, _ = make()
    agent.begin_turn()
    future = agent.when_idle()
    agent.followup(msg("during"))
    agent.end_turn()
    assert not future.done()
    assert agent.run_queued_turns() == 1
    assert future.done()


def test_hold_idle_forever() -> None:
    agent, _, _ = make()
    agent.hold_idle_forever()
    future = agent.when_idle()
    agent.begin_turn()
    agent.end_turn()
    assert not future.done()
    agent.hold_idle_forever(False)
    assert future.done()


def test_cancelled_idle_waiters_are_skipped() -> None:
    agent, _, _ = make()
    agent.begin_turn()
    cancelled = agent.when_idle()
    kept = agent.when_idle()
    assert cancelled.cancel()
    agent.end_turn()
    assert cancelled.cancelled()
    assert kept.done() and kept.result() is None


def test_turn_misuse_raises() -> None:
    agent, _, _ = make()
    with pytest.raises(RuntimeError):
        agent.end_turn()
    agent.begin_turn()
    with pytest.raises(RuntimeError):
        agent.begin_turn()


def test_status_notifications_reach_registry_listeners_in_order() -> None:
    agent, registry, _ = make()
    seen: list[tuple[str, str, str]] = []
    registry.on_status(lambda a, status: seen.append(("first", a.id, status)))
    registry.on_status(lambda a, status: seen.append(("second", a.id, status)))
    agent.followup(msg("m"))
    agent.run_queued_turns()
    assert seen == [
        ("first", "a1", "running"),
        ("second", "a1", "running"),
        ("first", "a1", "idle"),
        ("second", "a1", "idle"),
    ]


def test_idle_listeners_see_resolved_idle_futures() -> None:
    agent, registry, _ = make()
    agent.begin_turn()
    future = agent.when_idle()
    states: list[bool] = []
    registry.on_status(lambda a, status: states.append(future.done()))
    agent.end_turn()
    assert states == [True]


def test_registry_roots_children_get_and_created_listeners() -> None:
    journal = Journal()
    registry = FakeAgentRegistry(journal)
    created: list[str] = []
    unsubscribe = registry.on_created(lambda a: created.append(a.id))
    root = registry.create_root("r", FakeSession("s-r"))
    child = registry.create_child("c", FakeSession("s-c"))
    existing = FakeAgent("x", FakeSession("s-x"))
    assert registry.create_root(existing) is existing
    assert existing.registry is registry
    assert registry.roots() == [root, existing]
    assert child not in registry.roots()
    assert registry.get("c") is child
    assert registry.get("missing") is None
    assert created == ["r", "c", "x"]
    unsubscribe()
    unsubscribe()
    registry.create_root("later", FakeSession("s-l"))
    assert created == ["r", "c", "x"]
    assert journal.of("agent-created")[1] == ("agent-created", "c", False)
    with pytest.raises(ValueError):
        registry.create_root("r", FakeSession("dup"))
    with pytest.raises(TypeError):
        registry.create_root("no-session")  # type: ignore[call-overload]


def test_same_listener_subscribed_twice_unsubscribes_separately() -> None:
    registry = FakeAgentRegistry()
    seen: list[str] = []

    def listener(agent: Agent) -> None:
        seen.append(agent.id)

    first = registry.on_created(listener)
    registry.on_created(listener)
    first()
    registry.create_root("a", FakeSession("s"))
    assert seen == ["a"]
    assert registry.listener_counts()["created"] == 1


def test_listener_may_unsubscribe_while_being_called() -> None:
    registry = FakeAgentRegistry()
    seen: list[str] = []

    def once(agent: Agent) -> None:
        seen.append(agent.id)
        stop()

    stop = registry.on_created(once)
    registry.create_root("a", FakeSession("s1"))
    registry.create_root("b", FakeSession("s2"))
    assert seen == ["a"]


def test_dispose_announces_once_and_marks_the_agent() -> None:
    agent, registry, journal = make()
    disposed: list[str] = []
    registry.on_disposed(lambda a: disposed.append(a.id))
    agent.begin_turn()
    waiter = agent.when_idle()
    assert registry.dispose(agent)
    assert not registry.dispose(agent)
    assert disposed == ["a1"]
    assert agent.disposed
    assert registry.get("a1") is None and registry.roots() == []
    assert not waiter.done()  # a disposed agent's idle wait never resolves by itself
    assert agent.reserve_turn_admission() is None
    with pytest.raises(RuntimeError):
        agent.followup(msg("late"))
    assert journal.of("agent-disposed") == [("agent-disposed", "a1")]


def test_forget_and_demote_change_liveness_silently() -> None:
    agent, registry, _ = make()
    disposed: list[str] = []
    registry.on_disposed(lambda a: disposed.append(a.id))
    registry.demote(agent)
    assert registry.get("a1") is agent and agent not in registry.roots()
    assert registry.forget(agent)
    assert registry.get("a1") is None
    assert disposed == []
    replacement = registry.create_root("a1", FakeSession("s2"))
    assert registry.get("a1") is replacement
    assert not registry.forget(agent)  # the old object is not the live one
