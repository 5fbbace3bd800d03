"""Checks of ``AgentRegistry`` and ``Agent``: creation, roots, admission, idleness, order."""

from __future__ import annotations

import threading
from collections.abc import Callable

from actors._contract import Agent
from host_bridge.testing.conformance._base import ConformanceBase, expect
from host_bridge.testing.conformance._probes import StatusLog

__all__ = ["AgentChecks"]

CREATED = "AgentRegistry.on_created"
REGISTRY = "AgentRegistry.roots/get"
DISPOSED = "AgentRegistry.on_disposed"
ADMISSION = "Agent.reserve_turn_admission"
IDLE = "Agent.when_idle"
STATUS = "AgentRegistry.on_status"
FOLLOWUP = "Agent.followup"


class AgentChecks(ConformanceBase):
    """Agents, their registry, turn admission and follow-up turns."""

    def reserve(self, agent: Agent, why: str) -> Callable[[], None]:
        release = agent.reserve_turn_admission()
        expect(release is not None, ADMISSION, f"refused an agent that is {why}")
        assert release is not None
        expect(callable(release), ADMISSION, f"returned {release!r}, not a release callable")
        return release

    def refused(self, agent: Agent, why: str) -> None:
        release = agent.reserve_turn_admission()
        if release is not None:
            release()
        expect(release is None, ADMISSION, f"granted a reservation while the agent is {why}")

    # --- the registry ---------------------------------------------------------------

    def test_on_created_fires_synchronously_for_a_new_root(self) -> None:
        """``on_created`` listeners run for a new root agent before the call creating it
        returns (so before its first turn), once, with the agent already in ``roots()``
        and ``get()``."""
        agents = self.ctx.agents
        assert agents is not None
        calls: list[tuple[Agent, bool, bool]] = []
        lock = threading.Lock()

        def listener(agent: Agent) -> None:
            with lock:
                calls.append((agent, agent in agents.roots(), agents.get(agent.id) is agent))

        unsubscribe = agents.on_created(listener)
        try:
            agent, model = self.spawn()
            with lock:
                mine = [call for call in calls if call[0] is agent]
            expect(
                mine,
                CREATED,
                "on_created did not fire before the call creating the root returned "
                "(Schedule would miss the agent or install after its first turn)",
            )
            expect(len(mine) == 1, CREATED, f"on_created fired {len(mine)} times for one agent")
            expect(mine[0][1], CREATED, "the agent was not in roots() when on_created fired")
            expect(mine[0][2], CREATED, "get(agent.id) was not the agent when on_created fired")
            expect(not model.messages, CREATED, "a turn ran before on_created listeners ran")
        finally:
            unsubscribe()

    def test_roots_and_get_know_live_root_agents(self) -> None:
        """``roots()`` contains every live root agent and ``get(id)`` returns it; an
        unknown id gives ``None``."""
        agents = self.ctx.agents
        assert agents is not None
        first, _ = self.spawn()
        second, _ = self.spawn()
        expect(first.id != second.id, REGISTRY, "two agents share an id")
        for agent in (first, second):
            expect(agent in agents.roots(), REGISTRY, f"{agent.id!r} is not in roots()")
            expect(agents.get(agent.id) is agent, REGISTRY, f"get({agent.id!r}) is not it")
        expect(agents.get("conformance-no-such-agent") is None, REGISTRY, "unknown id not None")

    def test_children_are_not_roots(self) -> None:
        """A child agent is announced through ``on_created`` and found by ``get``, but it
        is not in ``roots()`` (Schedule never installs on it)."""
        self.need(self.host.spawn_child, "spawn_child")
        agents = self.ctx.agents
        assert agents is not None and self.host.spawn_child is not None
        parent, _ = self.spawn()
        created: list[Agent] = []
        unsubscribe = agents.on_created(created.append)
        try:
            child = self.host.spawn_child(parent, self.model())
        finally:
            unsubscribe()
        expect(any(a is child for a in created), CREATED, "on_created did not fire for a child")
        expect(child not in agents.roots(), REGISTRY, "a child agent is in roots()")
        expect(agents.get(child.id) is child, REGISTRY, "get(child.id) is not the child")
        expect(parent in agents.roots(), REGISTRY, "the parent left roots()")

    def test_on_disposed_fires_after_the_agent_left_the_registry(self) -> None:
        """Disposing an agent runs ``on_disposed`` once, when the agent is no longer in
        ``roots()`` nor ``get()``."""
        self.need(self.host.dispose, "dispose")
        agents = self.ctx.agents
        assert agents is not None and self.host.dispose is not None
        agent, _ = self.spawn()
        calls: list[tuple[bool, bool]] = []

        def listener(gone: Agent) -> None:
            if gone is agent:
                calls.append((gone in agents.roots(), agents.get(gone.id) is gone))

        unsubscribe = agents.on_disposed(listener)
        try:
            self.host.dispose(agent)
        finally:
            unsubscribe()
        expect(len(calls) == 1, DISPOSED, f"on_disposed fired {len(calls)} times")
        expect(calls[0] == (False, False), DISPOSED, "the agent was still live when it fired")

    def test_unsubscribed_listeners_hear_nothing(self) -> None:
        """The callable ``on_created`` returns unsubscribes: later creations are not
        reported to that listener."""
        agents = self.ctx.agents
        assert agents is not None
        heard: list[Agent] = []
        agents.on_created(heard.append)()
        self.spawn()
        expect(not heard, CREATED, "a listener heard a creation after unsubscribing")

    # --- turn admission -------------------------------------------------------------------

    def test_reserve_grants_an_idle_agent_and_release_is_idempotent(self) -> None:
        """An idle agent with nothing queued grants ``reserve_turn_admission()``; while
        reserved a second reservation is refused (``None``); ``release()`` may be called
        again harmlessly, and afterwards the agent can be reserved again."""
        agent, _ = self.spawn()
        self.wait_idle(agent, IDLE)
        release = self.reserve(agent, "idle with nothing queued")
        self.refused(agent, "reserved already")
        release()
        release()  # idempotent
        again = self.reserve(agent, "idle again after release()")
        self.refused(agent, "reserved again")
        release()  # a stale release must not end the newer reservation
        self.refused(agent, "reserved (an old release() must not end a newer reservation)")
        again()

    def test_reserve_is_refused_while_a_turn_runs(self) -> None:
        """While a turn runs, ``reserve_turn_admission()`` returns ``None`` and
        ``when_idle()`` stays pending; both change once the turn ended."""
        agent, model = self.spawn()
        model.hold()
        self.followup(agent)
        self.wait(model.entered(0), FOLLOWUP, "the follow-up turn starting")
        self.refused(agent, "running a turn")
        idle = agent.when_idle()
        expect(not idle.done(), IDLE, "when_idle() resolved while a turn was running")
        model.open()
        self.wait(idle, IDLE, "when_idle() resolving after the turn ended")
        self.reserve(agent, "idle after its turn")()

    def test_reserved_agent_starts_no_queued_turn_until_release(self) -> None:
        """A follow-up queued while the agent is reserved does not start its turn until
        ``release()``; right after ``release()`` the agent is about to wake (or runs),
        so a new reservation is refused; then the turn runs."""
        agent, model = self.spawn()
        self.wait_idle(agent, IDLE)
        release = self.reserve(agent, "idle")
        model.hold()
        self.followup(agent)
        self.refused(agent, "reserved with a queued follow-up")
        self.pass_time(self.time_window_ms)
        expect(
            not model.messages,
            ADMISSION,
            "a follow-up queued while reserved started its turn before release()",
        )
        self.release(agent, release)
        self.refused(agent, "about to start a queued follow-up (released, turn held open)")
        self.wait(model.entered(0), ADMISSION, "the queued turn starting after release()")
        model.open()
        self.wait_idle(agent, IDLE)

    def test_when_idle_resolves_for_an_idle_agent(self) -> None:
        """``when_idle()`` of an idle agent with nothing queued resolves (at once)."""
        agent, _ = self.spawn()
        self.wait_idle(agent, IDLE)
        self.wait_idle(agent, IDLE)

    def test_status_reports_running_then_idle_for_every_turn(self) -> None:
        """``on_status`` reports ``"running"`` when a turn starts and ``"idle"`` after it
        ended, in that order, for every turn."""
        agents = self.ctx.agents
        assert agents is not None
        log = StatusLog()
        unsubscribe = agents.on_status(log)
        try:
            agent, model = self.spawn()
            log.watch(agent.id)
            for turn in range(1, 3):
                model.hold()
                self.followup(agent)
                self.wait(model.entered(turn - 1), FOLLOWUP, f"turn {turn} starting")
                self.wait(log.reached("running", turn), STATUS, f'"running" for turn {turn}')
                model.open()
                self.wait(log.reached("idle", turn), STATUS, f'"idle" after turn {turn}')
                self.wait_idle(agent, IDLE)
            expect(
                log.seen == ["running", "idle", "running", "idle"],
                STATUS,
                f"two turns reported {log.seen}",
            )
        finally:
            unsubscribe()

    def test_status_order_holds_for_quick_turns(self) -> None:
        """Also for turns that end at once, ``"running"`` is reported before the
        ``"idle"`` of the same turn: notifications are never reordered (a host that
        reports ``"running"`` from the caller's thread and ``"idle"`` from the turn's
        thread can deliver them the wrong way round)."""
        agents = self.ctx.agents
        assert agents is not None
        log = StatusLog()
        unsubscribe = agents.on_status(log)
        try:
            agent, model = self.spawn()
            log.watch(agent.id)
            for turn in range(1, self.quick_turns + 1):
                self.followup(agent)
                self.wait(model.entered(turn - 1), FOLLOWUP, f"quick turn {turn} running")
                self.wait(log.reached("idle", turn), STATUS, f'"idle" after quick turn {turn}')
                self.wait_idle(agent, IDLE)
            expect(
                log.seen == ["running", "idle"] * self.quick_turns,
                STATUS,
                f"{self.quick_turns} quick turns reported {log.seen}",
            )
        finally:
            unsubscribe()

    def test_followups_run_as_turns_in_the_order_queued(self) -> None:
        """Follow-ups queued while a turn runs are all run later, in the order queued,
        and the agent reports ``"idle"`` last."""
        agents = self.ctx.agents
        assert agents is not None
        log = StatusLog()
        unsubscribe = agents.on_status(log)
        try:
            agent, model = self.spawn()
            log.watch(agent.id)
            model.hold()
            first = self.followup(agent)
            self.wait(model.entered(0), FOLLOWUP, "the first follow-up turn starting")
            later = [self.followup(agent) for _ in range(3)]
            model.open()
            self.wait(model.entered(3), FOLLOWUP, "every queued follow-up running")
            self.wait_idle(agent, IDLE)
            seen = [m.text for m in model.messages]
            expect(
                seen == [m.text for m in (first, *later)],
                FOLLOWUP,
                f"follow-ups ran as {seen}, not in the order queued",
            )
            runs = max(1, log.seen.count("running"))
            self.wait(log.reached("idle", runs), STATUS, '"idle" after the last turn')
            statuses = log.seen
            alternating = all(
                s == ("running" if i % 2 == 0 else "idle") for i, s in enumerate(statuses)
            )
            expect(
                alternating and statuses[-1] == "idle",
                STATUS,
                f"statuses {statuses} do not alternate running/idle ending idle",
            )
        finally:
            unsubscribe()
