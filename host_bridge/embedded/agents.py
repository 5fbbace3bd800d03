"""Agents of the embedded host: a durable inbox, turn admission, idle futures, a model callable.

Each agent runs its turns on its own :class:`TurnActor`. A turn records the
user message, every tool call and the model's reply in the session log as
ordinary ``message`` events, so logs look like a real host's: mostly
non-schedule events.

**The inbox.** Every message an agent accepts (a plugin's follow-up, a
person's prompt) is first appended to the session log as an ``inbox/queued``
event (see :mod:`host_bridge.embedded.inbox`); ``followup`` raises, and queues
nothing, when that append fails. A follow-up made while a turn-admission
reservation holds the agent is *staged*: it and every append the reserver makes
after it (Schedule's ``dispatch``, one per member of a batch) reach the store
together, in one commit, with the flush the agent requests when the
reservation is released. A turn
starts only once a flush covering its inbox entry succeeded; until then the
message waits (the agent is not idle), retried whenever the session's durable
progress advances and on a back-off timer (0.5 s doubling to 30 s). The turn's
``message`` event names the inbox entry, and a ``turn/completed`` event is
appended when the model returns. The first agent spawned on a session resumed
from the store queues the entries whose turns never completed again, in log
order, before anything else.

**Admission.** The queue, reservations, idle futures and status reports are a
:class:`~host_bridge._admission.TurnAdmission`; the inbox is its ``ready`` gate
(an entry may start once it is known durable and the agent was announced).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, overload

import pykka

from actors._base import MailboxActor
from actors._contract import (
    Agent,
    AgentStatus,
    Cancellable,
    SessionDetachedError,
    SessionEvent,
    TextBlock,
    Timers,
    ToolResult,
    UserMessage,
)
from actors._runtime import RuntimeSpec, get_runtime
from host_bridge._admission import TurnAdmission
from host_bridge.embedded.codec import PayloadError
from host_bridge.embedded.inbox import (
    INBOX_EVENT,
    TURN_COMPLETED_EVENT,
    InboxEntry,
    completed_data,
    completed_entry,
    queued_data,
)
from host_bridge.embedded.sessions import EmbeddedSession
from host_bridge.embedded.tools import ScopedToolRegistry
from messages._mailbox import RunTurn

__all__ = [
    "AgentDisposedError",
    "EmbeddedAgent",
    "EmbeddedAgentRegistry",
    "Model",
    "RootAgents",
    "Turn",
    "TurnInterrupted",
    "TurnRecord",
    "completed_runs",
    "tool_call_data",
    "tool_result_data",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

MESSAGE_EVENT = "message"

RETRY_FIRST_MS = 500
"""First back-off before a failed flush of a waiting message is tried again."""

RETRY_MAX_MS = 30_000
"""The back-off doubles up to this."""


class AgentDisposedError(RuntimeError):
    """The agent was disposed and accepts no more work."""


class TurnInterrupted(Exception):  # noqa: N818 (it says what happened, not that it failed)
    """Raised by a model when its turn was cut short before it finished (a host stopping).

    Unlike any other exception, which ends the turn as failed and records its
    completion, an interrupted turn records no ``turn/completed`` event: its
    inbox entry stays unfinished, so the next resume of the session runs the
    turn again (a reminder is presented again rather than lost).
    """


@dataclass
class Turn:
    """What a model callable sees during one turn.

    ``inbox_seq`` is the seq of the ``inbox/queued`` event that queued ``message``,
    ``started_seq`` that of the ``message`` event that started this run of the
    turn (a turn cut by a crash or a stop runs again from the same entry).
    """

    agent: EmbeddedAgent
    message: UserMessage
    tools: ScopedToolRegistry | None
    inbox_seq: int | None = None
    started_seq: int | None = None

    def call_tool(self, name: str, arguments: Any, *, call_id: str | None = None) -> ToolResult:
        """Run a tool for this agent, record the call and result in the log, return the result.

        ``call_id`` is the model's tool-call id, if it gave one (a synthetic
        id otherwise, as with :meth:`ScopedToolRegistry.execute`).
        """
        if self.tools is None:
            raise RuntimeError("this agent has no tool registry")
        try:
            self.agent.session.append(MESSAGE_EVENT, tool_call_data(name, arguments))
        except PayloadError:
            self.agent.session.append(MESSAGE_EVENT, tool_call_data(name, None, stored=False))
        result = self.tools.execute(name, arguments, agent=self.agent, call_id=call_id)
        self.agent.session.append(MESSAGE_EVENT, tool_result_data(name, result))
        return result

    def tool_names(self) -> list[str]:
        """The names of the tools offered to this agent."""
        if self.tools is None:
            return []
        return [tool.name for tool in self.tools.tools_for(self.agent)]


def tool_call_data(name: str, arguments: Any, *, stored: bool = True) -> dict[str, Any]:
    """The ``message`` event data recording a tool call (``stored=False``: without arguments).

    Arguments the log cannot store (a lone surrogate, an integer beyond 64 bits,
    deep nesting) are still the tool's to judge: the call is recorded without them.
    """
    call: dict[str, Any] = {"name": name}
    if stored:
        call["arguments"] = arguments
    else:
        call["argumentsNotStored"] = True
    return {"role": "assistant", "toolCall": call}


def tool_result_data(name: str, result: ToolResult) -> dict[str, Any]:
    """The ``message`` event data recording a tool's result."""
    return {"role": "tool", "name": name, "isError": result.is_error, "content": result.content}


def completed_runs(events: Iterable[SessionEvent]) -> set[int]:
    """The seqs of the ``message`` events that started turn runs which then completed.

    A run completes when a ``turn/completed`` event names its inbox entry after
    it; of the runs of one entry (a cut run, then its re-run) only the last can.
    """
    latest: dict[int, int] = {}  # inbox seq -> the seq that started its latest run
    done: set[int] = set()
    for event in events:
        if event.type == MESSAGE_EVENT:
            data = event.data
            entry = data.get("inbox") if isinstance(data, Mapping) else None
            if isinstance(entry, int) and data.get("role") == "user":
                latest[entry] = event.seq
        elif event.type == TURN_COMPLETED_EVENT:
            completed = completed_entry(event.data)
            if completed is not None and completed in latest:
                done.add(latest[completed])
    return done


Model = Callable[[Turn], "str | None"]
"""A model: receives each turn, may call tools, returns the assistant's reply text (or None)."""


@dataclass(frozen=True)
class TurnRecord:
    """A finished turn: the message that started it and the model's reply.

    ``error`` is what the model raised when the turn ``failed`` (not compared).
    """

    message: UserMessage
    reply: str | None
    failed: bool = False
    error: BaseException | None = field(default=None, compare=False, repr=False)


def _silent_model(turn: Turn) -> str | None:
    return None


class TurnActor(MailboxActor):
    """Runs an agent's turns one at a time (on its own thread, or greenlet on gevent)."""

    def __init__(self, agent: EmbeddedAgent) -> None:
        super().__init__()
        self._agent = agent

    def handle_RunTurn(self, message: RunTurn) -> None:
        """Run the model for one queued inbox entry, then let the agent pick its next state."""
        self._agent._run_turn(message.message)


class EmbeddedAgent:
    """A live agent of the embedded host (implements the ``Agent`` protocol).

    Queueing, turn admission, idle futures and status reports are a
    :class:`~host_bridge._admission.TurnAdmission` whose gate is the durable
    inbox: a queued message is ready once a flush covering its inbox entry
    succeeded (see the module docstring). Its turns run on the agent's
    :class:`TurnActor`; status notifications reach the registry's listeners in
    order, one at a time (``"running"`` before the turn starts, ``"idle"`` after
    the last queued turn), on the thread that caused them.
    """

    def __init__(
        self,
        agent_id: str,
        session: EmbeddedSession,
        *,
        registry: EmbeddedAgentRegistry,
        model: Model | None = None,
        parent: EmbeddedAgent | None = None,
        pending: Sequence[InboxEntry] = (),
    ) -> None:
        self._id = agent_id
        self._session = session
        self._registry = registry
        self._parent = parent
        self.model: Model = model if model is not None else _silent_model
        self._gated = session.persistent  # without persistence nothing can wait for durability
        self._lock = threading.Lock()  # guards the fields below; never held calling the admission
        self._live = False  # set once spawn() has announced the agent: turns may start
        self._disposed = False
        self._staged = False  # a follow-up was staged during the current reservation
        self._durable_length = session.durable_length  # leading session events known durable
        self._flushing = False  # a flush requested by the agent is in flight
        self._retry: Cancellable | None = None  # the back-off timer, while armed
        self._backoff_ms = RETRY_FIRST_MS
        self._turns: list[TurnRecord] = []
        self._results: dict[int, Future[TurnRecord]] = {}  # inbox seq -> the handle send() gave
        self._actor: pykka.ActorRef[TurnActor] = registry._turn_actor.start(self)
        self._admission: TurnAdmission[InboxEntry] = TurnAdmission(
            self._start_turn, self._report_status, ready=self._ready
        )
        for entry in pending:
            self._admission.followup(entry, order=entry.seq)
        self._unsubscribe_durable = session.on_durable(self._on_durable)

    # --- Agent protocol -------------------------------------------------------------

    @property
    def id(self) -> str:
        """The agent id."""
        return self._id

    @property
    def session(self) -> EmbeddedSession:
        """The agent's session."""
        return self._session

    def followup(self, message: UserMessage) -> None:
        """Record ``message`` in the session's inbox and queue it as a later turn.

        Returns once the ``inbox/queued`` event is in the session log; raises
        (queuing nothing) when that append fails. While a reservation holds
        the agent the event is staged, so it becomes durable in one commit
        with the reserver's appends. The turn starts when the agent is idle and
        unreserved and a flush covering the entry succeeded.
        """
        self._queue(message, None)

    def _queue(self, message: UserMessage, result: Future[TurnRecord] | None) -> None:
        """Append ``message``'s inbox entry, then queue it (``result``: its turn's handle)."""
        staged = self._may_queue(message)
        data = queued_data(message)
        if staged:
            event = self._session.append_staged(INBOX_EVENT, data)
        else:
            event = self._session.append(INBOX_EVENT, data)
        self._queued(InboxEntry(event.seq, message), staged, result)

    def _may_queue(self, message: UserMessage) -> bool:
        """Raise unless ``message`` may be queued; whether its inbox entry joins a stage."""
        if not isinstance(message, UserMessage):
            raise TypeError("followup expects a UserMessage")
        if self._disposed:
            raise self._disposed_error()
        return self._gated and self._admission.reserved

    def _queued(self, entry: InboxEntry, staged: bool, result: Future[TurnRecord] | None) -> None:
        """``entry`` is in the log: hand it to admission, start or flush what may go on."""
        if staged:
            with self._lock:
                self._staged = True
        if result is not None:
            with self._lock:
                self._results[entry.seq] = result
        try:
            self._admission.followup(entry, order=entry.seq)
        except AgentDisposedError as error:
            # In the log already: the next resume of the session queues it again.
            _log.debug("agent %r was disposed while queuing entry %d", self._id, entry.seq)
            self._settle_result(entry.seq, error=error)
            return
        if staged and self._admission.reserved:
            return  # nothing starts or flushes while reserved; the release flushes the stage
        self._advance()

    def send(self, message: UserMessage) -> Future[TurnRecord]:
        """Queue ``message`` like :meth:`followup`; a future of the turn it starts.

        The handle from a message to its turn: the future resolves with the
        :class:`TurnRecord` once that turn finished (``failed`` and ``error``
        when the model raised). It fails with :class:`TurnInterrupted` when the
        turn was cut short and :class:`AgentDisposedError` when the agent was
        disposed before the turn ran (the entry stays in the log either way,
        and the next resume of the session runs it). Raises, queuing nothing,
        when the inbox append fails.
        """
        result: Future[TurnRecord] = Future()
        self._queue(message, result)
        return result

    def submit(self, message: UserMessage) -> Future[TurnRecord]:
        """:meth:`send` that never waits, for callers on an event loop.

        The inbox append goes through the session actor when it is busy; a
        failed append (or a disposed agent) fails the returned future instead
        of raising, and nothing is queued.
        """
        result: Future[TurnRecord] = Future()
        try:
            staged = self._may_queue(message)
        except Exception as error:
            result.set_exception(error)
            return result
        appended = self._session.submit_append(INBOX_EVENT, queued_data(message), staged=staged)

        def queue(done: Future[Any]) -> None:
            error = done.exception()
            if error is not None:
                result.set_exception(error)
                return
            try:
                self._queued(InboxEntry(done.result().seq, message), staged, result)
            except Exception as failure:  # the admission refused it: the entry waits for a resume
                if not result.done():
                    result.set_exception(failure)

        appended.add_done_callback(queue)
        return result

    def reserve_turn_admission(self) -> Callable[[], None] | None:
        """Hold the agent idle; ``None`` when running, reserved, or about to wake."""
        release = self._admission.reserve(on_release=self._released)
        if release is not None:
            with self._lock:
                self._staged = False
        return release

    def when_idle(self) -> Future[None]:
        """Resolves once the agent is idle, unreserved, with nothing queued (at once if it is now).

        A reservation holds the agent idle for someone else's durable work, so a
        waiter (typically one whose own reservation was refused) resolves only
        once it is released. A message waiting for its inbox entry to become
        durable counts as queued.
        """
        return self._admission.when_idle()

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
        return "running" if self._admission.running else "idle"

    @property
    def reserved(self) -> bool:
        """Whether a turn-admission reservation holds the agent idle."""
        return self._admission.reserved

    @property
    def queued(self) -> tuple[InboxEntry, ...]:
        """The inbox entries waiting for their turns, oldest first."""
        return self._admission.queued

    @property
    def turns(self) -> Sequence[TurnRecord]:
        """Every finished turn, oldest first."""
        with self._lock:
            return tuple(self._turns)

    def prompt(self, text: str) -> Future[TurnRecord]:
        """Queue a person's prompt through the inbox (see :meth:`send`); a future of its turn."""
        return self.send(UserMessage((TextBlock(text),), {"kind": "user"}))

    # --- internals: the inbox gate ------------------------------------------------------

    def _ready(self, entry: InboxEntry) -> bool:
        """May the turn of ``entry`` start: the agent is announced and the entry is durable."""
        return self._live and (not self._gated or entry.seq < self._durable_length)

    def _activate(self) -> None:
        """Called by ``spawn`` once the creation listeners ran: taken-over entries may start."""
        self._live = True
        self._advance()

    def _released(self) -> None:
        """A reservation was released: flush what it staged (the stage may be left open)."""
        with self._lock:
            staged, self._staged = self._staged, False
        self._advance(flush=staged)

    def _needs_flush(self) -> bool:
        """Unreserved, with a queued entry not known durable (a reservation keeps its stage)."""
        if not self._gated or self._disposed or self._admission.reserved:
            return False
        queued = self._admission.queued
        return bool(queued) and queued[-1].seq >= self._durable_length

    def _advance(self, *, flush: bool = False) -> None:
        """Start the next turn if allowed; else request the flush its message waits for.

        Never called with the lock held: the flush may settle (and call back) inline.
        """
        self._admission.recheck()
        needed = flush or self._needs_flush()
        with self._lock:
            request = needed and not self._flushing and not self._disposed
            retry = None
            if request or not needed:
                self._flushing = self._flushing or request
                retry, self._retry = self._retry, None  # retrying now, or nothing to retry
        if retry is not None:
            retry.cancel()
        if request:
            self._request_flush()

    def _request_flush(self) -> None:
        try:
            future = self._session.request_flush()
        except Exception as error:  # a session never raises here; stay safe if one does
            future = Future()
            future.set_exception(error)
        future.add_done_callback(self._flush_settled)

    def _flush_settled(self, done: Future[bool]) -> None:
        error = None if done.cancelled() else done.exception()
        ok = not done.cancelled() and error is None and done.result() is True
        with self._lock:
            self._flushing = False
            if self._disposed:
                return
        if not ok and self._needs_flush():
            if isinstance(error, SessionDetachedError):
                _log.warning(
                    "session of agent %r is detached; %d queued messages wait for a resume",
                    self._id,
                    len(self._admission.queued),
                )
                return
            self._arm_retry()
            return
        if ok and self._needs_flush():
            self._advance()  # a message queued while this flush was in flight

    def _arm_retry(self) -> None:
        timers = self._registry.timers
        with self._lock:
            if timers is None or self._retry is not None or self._disposed:
                return
            delay = self._backoff_ms
            self._backoff_ms = min(delay * 2, RETRY_MAX_MS)
            _log.info(
                "inbox of agent %r is not durable yet; trying again in %d ms", self._id, delay
            )
            try:
                self._retry = timers.call_later(delay, self._retry_due)
            except Exception:
                _log.warning("the inbox retry timer of agent %r could not be armed", self._id)

    def _retry_due(self) -> None:
        with self._lock:
            self._retry = None
        self._advance()

    def _on_durable(self, length: int) -> None:
        """The session's durable progress advanced (any flush, by anyone)."""
        with self._lock:
            if length <= self._durable_length:
                return
            self._durable_length = length
            self._backoff_ms = RETRY_FIRST_MS  # the store works again
        self._advance()

    # --- internals: turns ---------------------------------------------------------------

    def _start_turn(self, entry: InboxEntry) -> None:
        """The admission's ``start_turn``: the turn actor runs it."""
        self._actor.tell(RunTurn(entry))

    def _report_status(self, status: AgentStatus) -> None:
        self._registry._notify_status(self, status)

    def _run_turn(self, entry: InboxEntry) -> None:
        if self._disposed:
            return  # queued before the agent was disposed: no work after dispose
        message = entry.message
        reply: str | None = None
        failed = False
        started = False
        interrupted = False
        error: BaseException | None = None
        try:
            start = self._session.append(
                MESSAGE_EVENT,
                {
                    "role": "user",
                    "content": message.text,
                    "source": dict(message.source),
                    "inbox": entry.seq,
                },
            )
            started = True
            turn = Turn(self, message, self._registry.tools, entry.seq, start.seq)
            reply = self.model(turn)
            if reply is not None:
                self._session.append(MESSAGE_EVENT, {"role": "assistant", "content": reply})
        except TurnInterrupted as cut:
            failed = interrupted = True
            error = cut
            _log.info(
                "turn of agent %r for inbox entry %d was interrupted; a resume runs it again",
                self._id,
                entry.seq,
            )
        except Exception as raised:
            failed = True
            error = raised
            _log.exception("turn of agent %r failed", self._id)
        if started and not interrupted:
            self._complete(entry, failed)
        record = TurnRecord(message, reply, failed, error)
        with self._lock:
            self._turns.append(record)
        self._admission.turn_finished()  # the next turn, or "idle" and the idle waiters
        if interrupted:  # after turn_finished: the handle's holder sees the agent past the turn
            self._settle_result(entry.seq, error=error)
        else:
            self._settle_result(entry.seq, record=record)
        self._advance()  # asks for the flush the next message needs, if any

    def _complete(self, entry: InboxEntry, failed: bool) -> None:
        """Record that the turn of ``entry`` returned; ask (without waiting) for a flush."""
        try:
            self._session.append(TURN_COMPLETED_EVENT, completed_data(entry.seq, failed=failed))
        except Exception:
            _log.warning(
                "completion of inbox entry %d of agent %r was not recorded; "
                "a resume of the session runs its turn again",
                entry.seq,
                self._id,
            )
            return
        if self._gated:
            self._session.request_flush()

    def _settle_result(
        self, seq: int, *, record: TurnRecord | None = None, error: BaseException | None = None
    ) -> None:
        """Resolve the handle :meth:`send` gave for entry ``seq``, if any."""
        with self._lock:
            result = self._results.pop(seq, None)
        if result is None or result.done():
            return
        if error is not None:
            result.set_exception(error)
        else:
            result.set_result(record)  # type: ignore[arg-type]

    def _disposed_error(self) -> AgentDisposedError:
        return AgentDisposedError(f"agent {self._id!r} is disposed")

    def _dispose(self) -> None:
        with self._lock:
            if self._disposed:
                return
            self._disposed = True
            retry, self._retry = self._retry, None
        # the queued entries stay in the log for the next resume
        self._admission.close(self._disposed_error)
        with self._lock:
            waiting = list(self._results)
        for seq in waiting:
            self._settle_result(seq, error=self._disposed_error())
        if retry is not None:
            retry.cancel()
        self._unsubscribe_durable()
        self._actor.stop(block=False)  # may be called from inside a turn

    def __repr__(self) -> str:
        kind = "child" if self._parent is not None else "root"
        return f"EmbeddedAgent({self._id!r}, {kind}, {self.status})"


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
    :func:`actors._runtime.get_runtime`). ``timers`` (the host's) arm the
    back-off retries of messages whose inbox entries could not be made durable
    yet; without timers such a message is retried only when the session's
    durable progress advances.
    """

    def __init__(
        self,
        tools: ScopedToolRegistry | None = None,
        *,
        runtime: RuntimeSpec = "threading",
        timers: Timers | None = None,
    ) -> None:
        self.tools = tools
        self.timers = timers
        self._turn_actor = get_runtime(runtime).bind(TurnActor)
        self._agents: dict[str, EmbeddedAgent] = {}
        self._roots: dict[str, EmbeddedAgent] = {}
        self._roots_snapshot: RootAgents | None = None
        self._lock = threading.RLock()
        self._created: list[Callable[[Agent], None]] = []
        self._status: list[Callable[[Agent, AgentStatus], None]] = []
        self._disposed: list[Callable[[Agent], None]] = []
        self._ids = itertools.count(1)

    def spawn(
        self,
        session: EmbeddedSession,
        *,
        model: Model | None = None,
        agent_id: str | None = None,
        parent: EmbeddedAgent | None = None,
    ) -> EmbeddedAgent:
        """Create a live agent (a root unless ``parent`` is given) and announce it.

        The first agent spawned on a session takes over its unfinished inbox
        entries (:meth:`EmbeddedSession.claim_inbox`): their turns run first,
        once the creation listeners have run. When starting them raises, the
        agent is disposed again before the error propagates (the session stays
        the caller's).
        """
        if not isinstance(session, EmbeddedSession):
            raise TypeError("an embedded agent needs an EmbeddedSession")
        with self._lock:
            new_id = agent_id if agent_id is not None else f"agent-{next(self._ids)}"
            if new_id in self._agents:
                raise ValueError(f"agent {new_id!r} already exists")
            pending = session.claim_inbox()
            if pending:
                _log.info(
                    "agent %r takes over %d unfinished inbox entries of session %r",
                    new_id,
                    len(pending),
                    session.id,
                )
            agent = EmbeddedAgent(
                new_id, session, registry=self, model=model, parent=parent, pending=pending
            )
            self._agents[new_id] = agent
            if parent is None:
                self._roots[new_id] = agent
                self._roots_snapshot = None
            listeners = tuple(self._created)
        for listener in listeners:
            _call_listener(listener, agent)
        try:
            agent._activate()  # taken-over entries: their turns start now (tools are registered)
        except BaseException:
            self.dispose(agent)  # no half-started agent stays registered on the session
            raise
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

    def on_status(self, listener: Callable[[Agent, AgentStatus], None]) -> Callable[[], None]:
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

    def _notify_status(self, agent: EmbeddedAgent, status: AgentStatus) -> None:
        with self._lock:
            listeners = tuple(self._status)
        for listener in listeners:
            _call_listener(listener, agent, status)


def _call_listener(listener: Callable[..., None], *args: Any) -> None:
    try:
        listener(*args)
    except Exception:
        _log.exception("agent registry listener failed")
