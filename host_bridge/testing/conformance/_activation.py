"""Checks of the optional ``SessionActivation`` and ``SessionPassivation`` of a host."""

from __future__ import annotations

import threading

from actors._contract import Agent, Session, SessionActivation
from host_bridge.testing.conformance._base import ConformanceBase, expect, fail
from messages import SCHEDULE_CHANGE_TYPE, AfterRecord, CreateChange
from messages._instant import format_instant

__all__ = ["ActivationChecks"]

ACTIVATE = "SessionActivation.activate"
INDEX = "SessionActivation.next_due/due_sessions"
PASSIVATE = "SessionPassivation.passivate"


class ActivationChecks(ConformanceBase):
    """Waking a cold session whose reminder is due, and letting it go again."""

    def cold_due_session(self) -> tuple[SessionActivation, str, int]:
        """A stored, cold session holding one reminder due a second ago: its id and due time."""
        activation = self.ctx.activation
        self.need(activation, "HostContext.activation")
        self.need(self.host.dispose, "dispose")
        self.need(self.host.detach, "detach")
        assert activation is not None and self.host.dispose and self.host.detach
        sessions = self.ctx.sessions
        assert sessions is not None
        agent, _ = self.spawn()
        session = agent.session
        due = self.ctx.clock() - 1000
        record = AfterRecord("schedule-1", "conformance wake-up", 1, format_instant(due))
        session.append(SCHEDULE_CHANGE_TYPE, CreateChange(record).to_json())
        flushed = self.wait(sessions.flush(session), "SessionStore.flush", "the flush resolving")
        expect(flushed is True, "SessionStore.flush", "flush of a healthy session resolved False")
        self.host.dispose(agent)
        self.host.detach(session)
        return activation, session.id, due

    def test_activation_wakes_a_due_cold_session_with_a_new_root_agent(self) -> None:
        """A stored session that is not live and holds a due reminder is in the due index
        (``next_due``, ``due_sessions``); ``activate(id)`` makes it live again with its whole
        log and a root agent created through the registry: ``on_created`` ran before the
        future resolved, and the agent is in ``roots()``. Activating it again while it is
        live creates no second agent."""
        activation, session_id, due = self.cold_due_session()
        agents, sessions = self.ctx.agents, self.ctx.sessions
        assert agents is not None and sessions is not None
        next_due = activation.next_due()
        expect(
            type(next_due) is int and next_due <= due,
            INDEX,
            f"next_due() is {next_due!r} with a reminder due at {due} in a cold session",
        )
        listed = {d.session_id: d.due_ms for d in activation.due_sessions(self.ctx.clock(), 100)}
        expect(session_id in listed, INDEX, f"due_sessions() misses the due cold session: {listed}")
        created: list[Agent] = []
        lock = threading.Lock()

        def listener(agent: Agent) -> None:
            with lock:
                created.append(agent)

        unsubscribe = agents.on_created(listener)
        try:
            agent = self.wait(activation.activate(session_id), ACTIVATE, "the activation")
        finally:
            unsubscribe()
        if agent is None:
            fail(ACTIVATE, "activate() declined a due cold session that no one holds")
        with lock:
            expect(any(a is agent for a in created), ACTIVATE, "on_created did not fire first")
        expect(agent in agents.roots(), ACTIVATE, "the activated agent is not in roots()")
        expect(agents.get(agent.id) is agent, ACTIVATE, "get(id) is not the activated agent")
        live: Session | None = sessions.get(session_id)
        expect(live is agent.session, ACTIVATE, "the session is not live with the agent on it")
        expect(
            any(e.type == SCHEDULE_CHANGE_TYPE for e in agent.session.events),
            ACTIVATE,
            "the activated session lost its stored log",
        )
        again = self.wait(activation.activate(session_id), ACTIVATE, "a second activation")
        expect(
            again is None or again is agent,
            ACTIVATE,
            "activating a live session created a second agent (a reminder could repeat)",
        )

    def test_passivation_lets_an_activated_session_go(self) -> None:
        """``passivate(agent)`` of an activated agent resolves ``True`` once the agent is
        disposed and the session is no longer live; its reminder is due again in the index."""
        activation, session_id, _ = self.cold_due_session()
        passivate = getattr(activation, "passivate", None)
        self.need(passivate if callable(passivate) else None, "SessionPassivation.passivate")
        assert passivate is not None
        agents, sessions = self.ctx.agents, self.ctx.sessions
        assert agents is not None and sessions is not None
        agent = self.wait(activation.activate(session_id), ACTIVATE, "the activation")
        if agent is None:
            fail(ACTIVATE, "activate() declined a due cold session that no one holds")
        self.wait_idle(agent, "Agent.when_idle")
        let_go = self.wait(passivate(agent), PASSIVATE, "the passivation")
        expect(let_go is True, PASSIVATE, f"passivate() of a quiet activated agent gave {let_go!r}")
        expect(agents.get(agent.id) is None, PASSIVATE, "the agent is still live")
        expect(agent not in agents.roots(), PASSIVATE, "the agent is still in roots()")
        expect(sessions.get(session_id) is None, PASSIVATE, "the session is still live")
        listed = [d.session_id for d in activation.due_sessions(self.ctx.clock(), 100)]
        expect(session_id in listed, PASSIVATE, "the let-go session's due reminder left the index")
