"""A minimal pykka agent host that embeds Schedule — the example of docs/host-integration.md.

The host has its own objects: a pykka actor per session that owns the log and a
JSON-lines file, a pykka actor per agent that runs its turns, and a plain tool
table. Thin adapters give Schedule the shapes of the host contract (``host_bridge``):

=====================  ================================================
protocol               adapter here
=====================  ================================================
``Session``            :class:`PykkaSession` (wraps a :class:`SessionLogActor`)
``SessionStore``       :class:`PykkaSessionStore` (``flush`` = fsync in the actor)
``Agent``              :class:`PykkaAgent` (turns run on a :class:`TurnActor`)
``AgentRegistry``      :class:`PykkaAgentRegistry`
``ToolRegistry``       :class:`PykkaToolRegistry`
``Timers``             ``host_bridge.ThreadTimers``
=====================  ================================================

Run it::

    python docs/examples/pykka_host.py            # in a temporary directory
    python docs/examples/pykka_host.py --data DIR # keep the session files

It spawns a root agent whose (scripted) model asks for a reminder in one second,
waits for the ``[SCHEDULE REMINDER]`` follow-up turn, prints the session's
``schedule/change`` records and shuts down. Exit status 0 means it all happened.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import queue
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TextIO

import pykka

from dsh_schedule import ThreadTimers, TurnAdmission, failed, from_pykka, install_schedule
from host_bridge.protocols import (
    Agent,
    AgentStatus,
    HostContext,
    Session,
    SessionEvent,
    SessionHeader,
    TextBlock,
    ToolCall,
    ToolDefinition,
    ToolResult,
    UserMessage,
    wall_clock_ms,
)

# --- sessions ----------------------------------------------------------------------------------


class SessionLogActor(pykka.ThreadingActor):
    """Owns one session's append-only log and its JSON-lines file; appends are serialised."""

    def __init__(self, path: Path, events: list[SessionEvent]) -> None:
        super().__init__()
        self._events = events
        self._file: TextIO = path.open("a", encoding="utf-8")

    def append(
        self, type_: str, data: Any, time_ms: int
    ) -> tuple[SessionEvent, tuple[SessionEvent, ...]]:
        """Commit one event to the live log (buffered in the file); returns it and a snapshot."""
        text = json.dumps(data, allow_nan=False)  # raises: a non-JSON payload is rejected
        event = SessionEvent(type_, len(self._events), time_ms, json.loads(text))
        self._file.write(
            json.dumps({"type": type_, "seq": event.seq, "time": time_ms, "data": event.data})
            + "\n"
        )
        self._events.append(event)
        return event, tuple(self._events)

    def flush(self) -> bool:
        """Make every event appended before this message durable (fsync), then say so."""
        self._file.flush()
        os.fsync(self._file.fileno())
        return True

    def on_stop(self) -> None:
        """Close the file (pykka calls this when the actor stops)."""
        self._file.close()


class PykkaSession:
    """``Session``: id, header, an immutable snapshot of the events, synchronous append."""

    def __init__(
        self,
        header: SessionHeader,
        events: Sequence[SessionEvent],
        actor: pykka.ActorRef[SessionLogActor],
    ) -> None:
        self._header = header
        self._snapshot: tuple[SessionEvent, ...] = tuple(events)
        self._actor = actor
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        """The session id."""
        return self._header.id

    @property
    def header(self) -> SessionHeader:
        """The header (no forks in this host, so ``seed_length`` stays ``None``)."""
        return self._header

    @property
    def events(self) -> tuple[SessionEvent, ...]:
        """An immutable snapshot: a tuple never changes after it was taken."""
        return self._snapshot

    def append(self, type: str, data: Any) -> SessionEvent:
        """Append through the actor and wait for the commit; raises if the actor rejects it."""
        event, snapshot = self._actor.proxy().append(type, data, wall_clock_ms()).get()
        with self._lock:
            if len(snapshot) > len(self._snapshot):  # replies may race; keep the newest
                self._snapshot = snapshot
        assert isinstance(event, SessionEvent)
        return event

    def request_flush(self) -> Future[bool]:
        """The pykka future of a flush message, adapted to ``concurrent.futures``."""
        return from_pykka(self._actor.proxy().flush())


class PykkaSessionStore:
    """``SessionStore`` plus the host's own ``open``/``close``. One file per session."""

    def __init__(self, data_dir: Path) -> None:
        self._dir = data_dir
        self._live: dict[str, PykkaSession] = {}
        self._lock = threading.Lock()
        data_dir.mkdir(parents=True, exist_ok=True)

    def open(self, session_id: str) -> PykkaSession:
        """The live session, else the stored one resumed, else a new one."""
        with self._lock:
            live = self._live.get(session_id)
            if live is not None:
                return live
            path = self._dir / f"{session_id}.jsonl"
            events: list[SessionEvent] = []
            if path.exists():
                with path.open(encoding="utf-8") as stored:
                    for line in stored:
                        row = json.loads(line)
                        events.append(
                            SessionEvent(row["type"], row["seq"], row["time"], row["data"])
                        )
            actor = SessionLogActor.start(path, list(events))
            session = PykkaSession(SessionHeader(session_id), events, actor)
            self._live[session_id] = session
            return session

    def flush(self, session: Session) -> Future[bool]:
        """``True`` once the session's earlier appends are fsync'ed; fails for unknown sessions."""
        live = self._live.get(session.id)
        if live is None or live is not session:
            return failed(LookupError(f"session {session.id!r} is not live"))
        return live.request_flush()

    def get(self, session_id: str) -> PykkaSession | None:
        """The live session with this id."""
        return self._live.get(session_id)

    def list(self) -> Sequence[PykkaSession]:
        """Every live session."""
        with self._lock:
            return tuple(self._live.values())

    def close(self) -> None:
        """Stop every session actor (which closes its file)."""
        with self._lock:
            live, self._live = list(self._live.values()), {}
        for session in live:
            session._actor.stop()


# --- agents -----------------------------------------------------------------------------------

Model = Callable[["PykkaAgent", UserMessage], "str | None"]
"""The host's model: sees the agent and the message that started the turn."""


class TurnActor(pykka.ThreadingActor):
    """Runs one agent's turns, one message at a time."""

    def __init__(self, agent: PykkaAgent) -> None:
        super().__init__()
        self._agent = agent

    def on_receive(self, message: Any) -> None:
        """Each message is a ``UserMessage`` to run as a turn."""
        self._agent._run_turn(message)


class PykkaAgent:
    """``Agent``: a :class:`~host_bridge.TurnAdmission` does the queueing, the actor the turns."""

    def __init__(
        self, agent_id: str, session: PykkaSession, model: Model, registry: PykkaAgentRegistry
    ) -> None:
        self._id = agent_id
        self._session = session
        self._model = model
        self._actor = TurnActor.start(self)
        self._admission: TurnAdmission[UserMessage] = TurnAdmission(
            self._actor.tell,  # start a turn: hand the message to the TurnActor
            lambda status: registry.notify_status(self, status),  # Schedule drives on "idle"
        )

    @property
    def id(self) -> str:
        """The agent id."""
        return self._id

    @property
    def session(self) -> PykkaSession:
        """The agent's session."""
        return self._session

    def followup(self, message: UserMessage) -> None:
        """Queue a later turn synchronously; it starts when the agent is idle and unreserved."""
        self._admission.followup(message)

    def reserve_turn_admission(self) -> Callable[[], None] | None:
        """Hold the agent idle for Schedule's durable work; ``None`` if it is busy or waking."""
        return self._admission.reserve()

    def when_idle(self) -> Future[None]:
        """Resolves once the agent is idle, unreserved, with nothing queued."""
        return self._admission.when_idle()

    def prompt(self, text: str) -> None:
        """A turn started by the person (not part of the protocol)."""
        self.followup(UserMessage((TextBlock(text),), {"kind": "user"}))

    def _run_turn(self, message: UserMessage) -> None:
        """On the TurnActor: run the model, then let the admission start the next turn."""
        try:
            self._session.append("message", {"role": "user", "content": message.text})
            reply = self._model(self, message)
            if reply is not None:
                self._session.append("message", {"role": "assistant", "content": reply})
        except Exception as error:  # a failing model must not wedge the agent
            print(f"turn failed: {error!r}", file=sys.stderr)
        finally:
            self._admission.turn_finished()

    def _dispose(self) -> None:
        self._admission.close()  # idle futures fail; later follow-ups raise
        self._actor.stop(block=False)


class PykkaAgentRegistry:
    """``AgentRegistry``: live agents, roots, and created/status/disposed listeners."""

    def __init__(self) -> None:
        self._agents: dict[str, PykkaAgent] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._listeners: dict[str, list[Callable[..., None]]] = {
            "created": [],
            "status": [],
            "disposed": [],
        }

    def spawn(self, session: PykkaSession, model: Model) -> PykkaAgent:
        """Start a root agent; listeners (Schedule among them) hear about it."""
        with self._lock:
            agent = PykkaAgent(f"agent-{next(self._ids)}", session, model, self)
            self._agents[agent.id] = agent
        self._emit("created", agent)
        return agent

    def dispose(self, agent: PykkaAgent) -> None:
        """Take an agent out; Schedule unregisters its tools and stops its owner."""
        with self._lock:
            if self._agents.pop(agent.id, None) is None:
                return
        agent._dispose()
        self._emit("disposed", agent)

    def roots(self) -> Sequence[PykkaAgent]:
        """Every live agent (this host has no child agents)."""
        with self._lock:
            return tuple(self._agents.values())

    def get(self, agent_id: str) -> PykkaAgent | None:
        """The live agent with this id."""
        return self._agents.get(agent_id)

    def on_created(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        """Subscribe to agent creation."""
        return self._subscribe("created", listener)

    def on_status(self, listener: Callable[[Agent, AgentStatus], None]) -> Callable[[], None]:
        """Subscribe to ``"running"``/``"idle"``."""
        return self._subscribe("status", listener)

    def on_disposed(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        """Subscribe to agent disposal."""
        return self._subscribe("disposed", listener)

    def notify_status(self, agent: PykkaAgent, status: AgentStatus) -> None:
        """Tell status listeners (called by agents)."""
        self._emit("status", agent, status)

    def _subscribe(self, kind: str, listener: Callable[..., None]) -> Callable[[], None]:
        with self._lock:
            self._listeners[kind].append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners[kind]:
                    self._listeners[kind].remove(listener)

        return unsubscribe

    def _emit(self, kind: str, *args: Any) -> None:
        with self._lock:
            listeners = list(self._listeners[kind])
        for listener in listeners:
            listener(*args)


# --- tools ------------------------------------------------------------------------------------


class PykkaToolRegistry:
    """``ToolRegistry``: tools registered per agent; ``execute`` waits for the result."""

    def __init__(self) -> None:
        self._scoped: dict[str, dict[str, ToolDefinition]] = {}
        self._calls = itertools.count(1)
        self._lock = threading.Lock()

    def register(self, tool: ToolDefinition, *, agent: Agent) -> Callable[[], None]:
        """Offer ``tool`` to ``agent`` only; a name conflict raises."""
        with self._lock:
            scope = self._scoped.setdefault(agent.id, {})
            if tool.name in scope:
                raise ValueError(f"{agent.id} already has a tool named {tool.name}")
            scope[tool.name] = tool

        def unregister() -> None:
            with self._lock:
                if self._scoped.get(agent.id, {}).get(tool.name) is tool:
                    del self._scoped[agent.id][tool.name]

        return unregister

    def get(self, name: str, *, agent: Agent | None = None) -> ToolDefinition | None:
        """The tool visible to ``agent`` (this host has no global tools)."""
        if agent is None:
            return None
        return self._scoped.get(agent.id, {}).get(name)

    def names(self, agent: Agent) -> list[str]:
        """What ``agent`` is offered (a real host sends these schemas to its model)."""
        return sorted(self._scoped.get(agent.id, {}))

    def execute(self, name: str, arguments: Any, *, agent: Agent) -> ToolResult:
        """Run the tool for ``agent`` and wait for its result."""
        tool = self.get(name, agent=agent)
        if tool is None:
            return ToolResult(True, None, f"no tool {name}")
        call = ToolCall(f"call-{next(self._calls)}", agent, synthetic=True)  # no model id here
        return tool.execute(arguments, call).result(timeout=30)


# --- the host -----------------------------------------------------------------------------------


class PykkaHost:
    """The host: its services, and the ``HostContext`` Schedule is installed with."""

    def __init__(self, data_dir: Path) -> None:
        self.sessions = PykkaSessionStore(data_dir)
        self.agents = PykkaAgentRegistry()
        self.tools = PykkaToolRegistry()
        self.timers = ThreadTimers(name="pykka-host-timers")

    def context(self) -> HostContext:
        """What ``install_schedule`` needs. The session store is also the durability service."""
        return HostContext(
            sessions=self.sessions,
            agents=self.agents,
            tools=self.tools,
            session_persistence=self.sessions,
            clock=wall_clock_ms,
            timers=self.timers,
        )

    def close(self) -> None:
        """Dispose every agent, stop the session actors and the timers."""
        for agent in self.agents.roots():
            self.agents.dispose(agent)
        self.sessions.close()
        self.timers.close()


# --- the run ------------------------------------------------------------------------------------


def run(data_dir: Path) -> int:
    """Install Schedule, let a scripted model ask for a reminder, receive it, shut down."""
    host = PykkaHost(data_dir)
    plugin = install_schedule(host.context())  # before any agent: only later agents get tools
    reminders: queue.Queue[str] = queue.Queue()

    def model(agent: PykkaAgent, message: UserMessage) -> str | None:
        if message.text.startswith("[SCHEDULE REMINDER]"):
            reminders.put(message.text)
            return "Time to stand up and stretch!"
        result = host.tools.execute(
            "schedule_create",
            {"prompt": "stand up and stretch", "after_seconds": 1},
            agent=agent,
        )
        print(f"model called schedule_create -> {result.content}")
        return "I will remind you in a second."

    try:
        session = host.sessions.open(f"example-{uuid.uuid4().hex[:8]}")
        agent = host.agents.spawn(session, model)
        print(f"{agent.id} on {session.id} has tools: {', '.join(host.tools.names(agent))}")
        agent.prompt("Remind me in a second to stand up.")
        try:
            framing = reminders.get(timeout=30)
        except queue.Empty:
            print("no reminder arrived within 30 s", file=sys.stderr)
            return 1
        print("follow-up turn:")
        print("  " + framing.replace("\n", "\n  "))
        plugin.wait_quiet(agent)  # the dispatch record and its flush barrier are done
        agent.when_idle().result(timeout=10)
        print(f"schedule/change records in {data_dir / (session.id + '.jsonl')}:")
        for event in session.events:
            if event.type == "schedule/change":
                print(f"  #{event.seq} {json.dumps(event.data)}")
        return 0
    finally:
        plugin.dispose().result(timeout=10)
        host.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``--data`` and run (in a temporary directory by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, help="directory for the session files")
    args = parser.parse_args(argv)
    if args.data is not None:
        return run(args.data)
    with tempfile.TemporaryDirectory(prefix="pykka-host-") as tmp:
        return run(Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
