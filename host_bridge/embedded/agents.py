"""Agents of the embedded host: follow-up queues, turn admission, idle futures, a model callable.

Each agent runs its turns on its own :class:`TurnActor`. A turn records the
user message, every tool call and the model's reply in the session log as
ordinary ``message`` events, so logs look like a real host's: mostly
non-schedule events.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, overload

import pykka

from actors.base import MailboxActor
from actors.runtime import RuntimeSpec, get_runtime
from host_bridge.embedded.codec import PayloadError
from host_bridge.embedded.tools import ScopedToolRegistry
from host_bridge.protocols import Agent, Session, TextBlock, ToolResult, UserMessage
from messages.mailbox import RunTurn

__all__ = [
    "AgentDisposedError",
    "EmbeddedAgent",
    "EmbeddedAgentRegistry",
    "Model",
    "RootAgents",
    "Turn",
    "TurnRecord",
]

_log = logging.getLogger("dsh_schedule.agents")

MESSAGE_EVENT = "message"


class AgentDisposedError(RuntimeError):
    """The agent was disposed and accepts no more work."""


@dataclass
class Turn:
    """What a model callable sees during one turn."""

    agent: EmbeddedAgent
    message: UserMessage
    tools: ScopedToolRegistry | None

    def call_tool(self, name: str, arguments: Any) -> ToolResult:
        """Run a tool for this agent, record the call and result in the log, return the result."""
        if self.tools is None:
            raise RuntimeError("this agent has no tool registry")
        try:
            self.agent.session.append(
                MESSAGE_EVENT,
                {"role": "assistant", "toolCall": {"name": name, "arguments": arguments}},
            )
        except PayloadError:
            # Arguments the log cannot store (a lone surrogate, an integer beyond 64 bits,
            # deep nesting) are still the tool's to judge: record the call without them.
            self.agent.session.append(
                MESSAGE_EVENT,
                {"role": "assistant", "toolCall": {"name": name, "argumentsNotStored": True}},
            )
        result = self.tools.execute(name, arguments, agent=self.agent)
        self.agent.session.append(
            MESSAGE_EVENT,
            {"role": "tool", "name": name, "isError": result.is_error, "content": result.content},
        )
        return result

    def tool_names(self) -> list[str]:
        """The names of the tools offered to this agent."""
        if self.tools is None:
            return []
        return [tool.name for tool in self.tools.tools_for(self.agent)]


Model = Callable[[Turn], "str | None"]
"""A model: receives each turn, may call tools, returns the assistant's reply text (or None)."""


@dataclass(frozen=True)
class TurnRecord:
    """A finished turn: the message that started it and the model's reply."""

    message: UserMessage
    reply: str | None
    failed: bool = False


def _silent_model(turn: Turn) -> str | None:
    return None


class TurnActor(MailboxActor):
    """Runs an agent's turns one at a time (on its own thread, or greenlet on gevent)."""

    def __init__(self, agent: EmbeddedAgent) -> None:
        super().__init__()
        self._agent = agent

    def handle_RunTurn(self, message: RunTurn) -> None:
        """Run the model for one queued message, then let the agent pick its next state."""
        self._agent._run_turn(message.message)


@dataclass
class _State:
    status: str = "idle"
    reserved: bool = False
    disposed: bool = False
    queue: deque[UserMessage] = field(default_factory=deque)
    idle_waiters: list[Future[None]] = field(default_factory=list)
    reservation: int = 0
    announced_running: bool = False  # touched only on the turn thread

    def settled(self) -> bool:
        """Idle, unreserved and with nothing queued: ``when_idle`` may resolve."""
        return not self.disposed and self.status == "idle" and not self.reserved and not self.queue


class EmbeddedAgent:
    """A live agent of the embedded host (implements the ``Agent`` protocol).

    Status notifications are delivered from the agent's turn thread only, so a
    listener always sees ``"running"`` before the matching ``"idle"``.
    """

    def __init__(
        self,
        agent_id: str,
        session: Session,
        *,
        registry: EmbeddedAgentRegistry,
        model: Model | None = None,
        parent: EmbeddedAgent | None = None,
    ) -> None:
        self._id = agent_id
        self._session = session
        self._registry = registry
        self._parent = parent
        self.model: Model = model if model is not None else _silent_model
        self._state = _State()
        self._lock = threading.Lock()
        self._turns: list[TurnRecord] = []
        self._actor: pykka.ActorRef[TurnActor] = registry._turn_actor.start(self)

    # --- Agent protocol -------------------------------------------------------------

    @property
    def id(self) -> str:
        """The agent id."""
        return self._id

    @property
    def session(self) -> Session:
        """The agent's session."""
        return self._session

    def followup(self, message: UserMessage) -> None:
        """Queue ``message`` as a later turn; it starts when the agent is idle and unreserved."""
        if not isinstance(message, UserMessage):
            raise TypeError("followup expects a UserMessage")
        with self._lock:
            if self._state.disposed:
                raise AgentDisposedError(f"agent {self._id!r} is disposed")
            self._state.queue.append(message)
            self._start_next_locked()

    def reserve_turn_admission(self) -> Callable[[], None] | None:
        """Hold the agent idle; ``None`` when running, reserved, or about to wake."""
        with self._lock:
            state = self._state
            if state.disposed or state.status != "idle" or state.reserved or state.queue:
                return None
            state.reserved = True
            state.reservation += 1
            token = state.reservation

        def release() -> None:
            with self._lock:
                if self._state.reservation != token or not self._state.reserved:
                    return  # released already (idempotent), or superseded
                self._state.reserved = False
                if self._start_next_locked() or not self._state.settled():
                    return
                waiters = self._state.idle_waiters
                self._state.idle_waiters = []
            _resolve(waiters)

        return release

    def when_idle(self) -> Future[None]:
        """Resolves once the agent is idle, unreserved, with nothing queued (at once if it is now).

        A reservation holds the agent idle for someone else's durable work, so a
        waiter (typically one whose own reservation was refused) resolves only
        once it is released.
        """
        future: Future[None] = Future()
        with self._lock:
            state = self._state
            if state.disposed:
                future.set_exception(AgentDisposedError(f"agent {self._id!r} is disposed"))
            elif state.settled():
                future.set_result(None)
            else:
                state.idle_waiters.append(future)
        return future

    # --- host-side API ----------------------------------------------------------------

    @property
    def actor_ref(self) -> pykka.ActorRef[TurnActor]:
        """The actor that runs this agent's turns (for tests and diagnostics)."""
        return self._actor

    @property
    def parent(self) -> EmbeddedAgent | None:
        """The spawning agent of a child agent; ``None`` for a root."""
        return self._parent

    @property
    def status(self) -> str:
        """``"running"`` or ``"idle"``."""
        return self._state.status

    @property
    def reserved(self) -> bool:
        """Whether a turn-admission reservation holds the agent idle."""
        return self._state.reserved

    @property
    def turns(self) -> Sequence[TurnRecord]:
        """Every finished turn, oldest first."""
        with self._lock:
            return tuple(self._turns)

    def prompt(self, text: str) -> None:
        """Queue a user prompt (a turn started by the person, not a plugin)."""
        self.followup(UserMessage((TextBlock(text),), {"kind": "user"}))

    def _start_next_locked(self) -> bool:
        state = self._state
        if state.disposed or state.status != "idle" or state.reserved or not state.queue:
            return False
        state.status = "running"
        message = state.queue.popleft()
        self._actor.tell(RunTurn(message))
        return True

    def _run_turn(self, message: UserMessage) -> None:
        with self._lock:
            if self._state.disposed:
                return  # queued before the agent was disposed: no work after dispose
            announce = not self._state.announced_running
            self._state.announced_running = True
        if announce:
            self._registry._notify_status(self, "running")
        reply: str | None = None
        failed = False
        try:
            self._session.append(
                MESSAGE_EVENT,
                {"role": "user", "content": message.text, "source": dict(message.source)},
            )
            reply = self.model(Turn(self, message, self._registry.tools))
            if reply is not None:
                self._session.append(MESSAGE_EVENT, {"role": "assistant", "content": reply})
        except Exception:
            failed = True
            _log.exception("turn of agent %r failed", self._id)
        with self._lock:
            self._turns.append(TurnRecord(message, reply, failed))
            self._state.status = "idle"
            if self._start_next_locked():
                return  # the next queued turn follows at once: still "running"
            self._state.announced_running = False
            if self._state.disposed:
                return  # disposal failed the waiters; a disposed agent reports nothing
            waiters = self._state.idle_waiters  # no reservation can be taken while running
            self._state.idle_waiters = []
        self._registry._notify_status(self, "idle")
        _resolve(waiters)

    def _dispose(self) -> None:
        with self._lock:
            if self._state.disposed:
                return
            self._state.disposed = True
            self._state.queue.clear()
            waiters = self._state.idle_waiters
            self._state.idle_waiters = []
        for waiter in waiters:
            with contextlib.suppress(InvalidStateError):  # cancelled by its waiter
                waiter.set_exception(AgentDisposedError(f"agent {self._id!r} is disposed"))
        self._actor.stop(block=False)  # may be called from inside a turn

    def __repr__(self) -> str:
        kind = "child" if self._parent is not None else "root"
        return f"EmbeddedAgent({self._id!r}, {kind}, {self._state.status})"


class RootAgents(Sequence[EmbeddedAgent]):
    """An immutable snapshot of the live root agents, in creation order.

    Membership (``agent in roots``) is an O(1) identity check, so liveness checks
    stay cheap with thousands of agents.
    """

    __slots__ = ("_by_id", "_items")

    def __init__(self, by_id: Mapping[str, EmbeddedAgent]) -> None:
        self._by_id = dict(by_id)
        self._items: tuple[EmbeddedAgent, ...] | None = None

    def _tuple(self) -> tuple[EmbeddedAgent, ...]:
        if self._items is None:
            self._items = tuple(self._by_id.values())
        return self._items

    def __contains__(self, value: object) -> bool:
        agent_id = getattr(value, "id", None)
        return isinstance(agent_id, str) and self._by_id.get(agent_id) is value

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[EmbeddedAgent]:
        return iter(self._tuple())

    @overload
    def __getitem__(self, index: int) -> EmbeddedAgent: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[EmbeddedAgent, ...]: ...

    def __getitem__(self, index: int | slice) -> EmbeddedAgent | tuple[EmbeddedAgent, ...]:
        return self._tuple()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RootAgents):
            return self._tuple() == other._tuple()
        if isinstance(other, tuple | list):
            return list(self._tuple()) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __repr__(self) -> str:
        return f"RootAgents({list(self._by_id)!r})"


class EmbeddedAgentRegistry:
    """The embedded host's agents (implements ``AgentRegistry``).

    ``runtime`` is where the agents' turn actors run (see
    :func:`actors.runtime.get_runtime`).
    """

    def __init__(
        self, tools: ScopedToolRegistry | None = None, *, runtime: RuntimeSpec = "threading"
    ) -> None:
        self.tools = tools
        self._turn_actor = get_runtime(runtime).bind(TurnActor)
        self._agents: dict[str, EmbeddedAgent] = {}
        self._roots: dict[str, EmbeddedAgent] = {}
        self._roots_snapshot: RootAgents | None = None
        self._lock = threading.RLock()
        self._created: list[Callable[[Agent], None]] = []
        self._status: list[Callable[[Agent, str], None]] = []
        self._disposed: list[Callable[[Agent], None]] = []
        self._ids = itertools.count(1)

    def spawn(
        self,
        session: Session,
        *,
        model: Model | None = None,
        agent_id: str | None = None,
        parent: EmbeddedAgent | None = None,
    ) -> EmbeddedAgent:
        """Create a live agent (a root unless ``parent`` is given) and announce it."""
        with self._lock:
            new_id = agent_id if agent_id is not None else f"agent-{next(self._ids)}"
            if new_id in self._agents:
                raise ValueError(f"agent {new_id!r} already exists")
            agent = EmbeddedAgent(new_id, session, registry=self, model=model, parent=parent)
            self._agents[new_id] = agent
            if parent is None:
                self._roots[new_id] = agent
                self._roots_snapshot = None
            listeners = tuple(self._created)
        for listener in listeners:
            _call_listener(listener, agent)
        return agent

    def dispose(self, agent: EmbeddedAgent) -> None:
        """Dispose an agent: it leaves the registry, then disposal listeners run."""
        with self._lock:
            if self._agents.get(agent.id) is not agent:
                return
            del self._agents[agent.id]
            if self._roots.get(agent.id) is agent:
                del self._roots[agent.id]
                self._roots_snapshot = None
            listeners = tuple(self._disposed)
        agent._dispose()
        for listener in listeners:
            _call_listener(listener, agent)

    def dispose_all(self) -> None:
        """Dispose every live agent."""
        for agent in list(self._agents.values()):
            self.dispose(agent)

    def roots(self) -> RootAgents:
        """Live agents without a parent (a snapshot; ``agent in roots()`` is O(1))."""
        with self._lock:
            snapshot = self._roots_snapshot
            if snapshot is None:
                snapshot = self._roots_snapshot = RootAgents(self._roots)
            return snapshot

    def get(self, agent_id: str) -> EmbeddedAgent | None:
        """The live agent with this id."""
        return self._agents.get(agent_id)

    def on_created(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        """Subscribe to agent creation."""
        return self._subscribe(self._created, listener)

    def on_status(self, listener: Callable[[Agent, str], None]) -> Callable[[], None]:
        """Subscribe to ``"running"``/``"idle"`` changes."""
        return self._subscribe(self._status, listener)

    def on_disposed(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        """Subscribe to agent disposal."""
        return self._subscribe(self._disposed, listener)

    def _subscribe(self, listeners: list[Any], listener: Any) -> Callable[[], None]:
        with self._lock:
            listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in listeners:
                    listeners.remove(listener)

        return unsubscribe

    def _notify_status(self, agent: EmbeddedAgent, status: str) -> None:
        with self._lock:
            listeners = tuple(self._status)
        for listener in listeners:
            _call_listener(listener, agent, status)


def _resolve(waiters: list[Future[None]]) -> None:
    for waiter in waiters:
        with contextlib.suppress(InvalidStateError):  # cancelled by its waiter
            waiter.set_result(None)


def _call_listener(listener: Callable[..., None], *args: Any) -> None:
    try:
        listener(*args)
    except Exception:
        _log.exception("agent registry listener failed")
