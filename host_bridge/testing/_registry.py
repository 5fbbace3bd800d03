"""A fake agent registry whose lifecycle a test drives."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

from actors._contract import Agent, AgentStatus, Session
from host_bridge.testing._agents import FakeAgent
from host_bridge.testing._journal import Journal

__all__ = ["FakeAgentRegistry"]

AgentT = TypeVar("AgentT", bound=Agent)
ListenerT = TypeVar("ListenerT", bound=Callable[..., None])


class _Listeners(Generic[ListenerT]):
    """Subscribed listeners; the same function may subscribe twice."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[tuple[object, ListenerT]] = []

    def subscribe(self, listener: ListenerT) -> Callable[[], None]:
        """Add ``listener``; returns an idempotent unsubscribe."""
        token = object()
        with self._lock:
            self._entries.append((token, listener))

        def unsubscribe() -> None:
            with self._lock:
                self._entries = [entry for entry in self._entries if entry[0] is not token]

        return unsubscribe

    def snapshot(self) -> list[ListenerT]:
        """The listeners now subscribed, in subscription order."""
        with self._lock:
            return [listener for _, listener in self._entries]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class FakeAgentRegistry:
    """An ``AgentRegistry`` whose lifecycle a test drives.

    Listeners run synchronously, in subscription order, in the calling thread;
    an exception from a listener propagates to the caller. Journal entries:
    ``("agent-created", id, is_root)`` and ``("agent-disposed", id)``.
    """

    def __init__(self, journal: Journal | None = None) -> None:
        self.journal = journal
        self._lock = threading.Lock()
        self._agents: dict[str, Agent] = {}
        self._roots: list[Agent] = []
        self._created: _Listeners[Callable[[Agent], None]] = _Listeners()
        self._status: _Listeners[Callable[[Agent, AgentStatus], None]] = _Listeners()
        self._disposed: _Listeners[Callable[[Agent], None]] = _Listeners()

    # -- the AgentRegistry protocol -------------------------------------------------------

    def roots(self) -> list[Agent]:
        """The live root agents, in creation order."""
        with self._lock:
            return list(self._roots)

    def get(self, agent_id: str) -> Agent | None:
        """The live agent with this id, or None."""
        with self._lock:
            return self._agents.get(agent_id)

    def on_created(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        """Subscribe to creations; returns an idempotent unsubscribe."""
        return self._created.subscribe(listener)

    def on_status(self, listener: Callable[[Agent, AgentStatus], None]) -> Callable[[], None]:
        """Subscribe to status changes; returns an idempotent unsubscribe."""
        return self._status.subscribe(listener)

    def on_disposed(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        """Subscribe to disposals; returns an idempotent unsubscribe."""
        return self._disposed.subscribe(listener)

    # -- lifecycle control for tests -------------------------------------------------------

    @overload
    def create_root(self, agent_or_id: str, session: Session) -> FakeAgent: ...

    @overload
    def create_root(self, agent_or_id: AgentT, session: None = None) -> AgentT: ...

    def create_root(self, agent_or_id: Agent | str, session: Session | None = None) -> Agent:
        """Add a live root agent (built as a :class:`FakeAgent` from an id) and announce it."""
        return self._create(agent_or_id, session, root=True)

    @overload
    def create_child(self, agent_or_id: str, session: Session) -> FakeAgent: ...

    @overload
    def create_child(self, agent_or_id: AgentT, session: None = None) -> AgentT: ...

    def create_child(self, agent_or_id: Agent | str, session: Session | None = None) -> Agent:
        """Add a live non-root agent and announce it."""
        return self._create(agent_or_id, session, root=False)

    def dispose(self, agent: Agent) -> bool:
        """Remove a live agent and announce it; False (no announcement) if it was not live."""
        if not self._remove(agent):
            return False
        if isinstance(agent, FakeAgent):
            agent.disposed = True
        self._record("agent-disposed", agent.id)
        for listener in self._disposed.snapshot():
            listener(agent)
        return True

    def forget(self, agent: Agent) -> bool:
        """Remove a live agent *without* announcing it (to test liveness checks)."""
        return self._remove(agent)

    def demote(self, agent: Agent) -> None:
        """Keep ``agent`` live but no longer a root (to test liveness checks)."""
        with self._lock:
            if agent in self._roots:
                self._roots.remove(agent)

    def notify_status(self, agent: Agent, status: AgentStatus) -> None:
        """Announce that ``agent`` became ``status`` (``"running"`` or ``"idle"``)."""
        for listener in self._status.snapshot():
            listener(agent, status)

    def listener_counts(self) -> dict[str, int]:
        """How many listeners are subscribed to ``created``, ``status`` and ``disposed``."""
        return {
            "created": len(self._created),
            "status": len(self._status),
            "disposed": len(self._disposed),
        }

    def agents(self) -> list[Agent]:
        """Every live agent, root or not."""
        with self._lock:
            return list(self._agents.values())

    # -- internals ------------------------------------------------------------------------

    def _create(self, agent_or_id: Agent | str, session: Session | None, *, root: bool) -> Agent:
        if isinstance(agent_or_id, str):
            if session is None:
                raise TypeError("a session is needed to create an agent from an id")
            agent: Agent = FakeAgent(agent_or_id, session, registry=self, journal=self.journal)
        else:
            agent = agent_or_id
            if isinstance(agent, FakeAgent) and agent.registry is None:
                agent.registry = self
        with self._lock:
            if agent.id in self._agents:
                raise ValueError(f"agent {agent.id!r} already exists")
            self._agents[agent.id] = agent
            if root:
                self._roots.append(agent)
        self._record("agent-created", agent.id, root)
        for listener in self._created.snapshot():
            listener(agent)
        return agent

    def _remove(self, agent: Agent) -> bool:
        with self._lock:
            if self._agents.get(agent.id) is not agent:
                return False
            del self._agents[agent.id]
            if agent in self._roots:
                self._roots.remove(agent)
            return True

    def _record(self, kind: str, *fields: Any) -> None:
        if self.journal is not None:
            self.journal.record(kind, *fields)
