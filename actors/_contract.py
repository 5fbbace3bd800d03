"""The host contract: what an agent host adapts its own objects to.

A host embeds Schedule by handing :func:`host_bridge.install_schedule` a
:class:`HostContext` whose parts satisfy the protocols below. Everything is
structural (``typing.Protocol``): no base class needs to be inherited.

This module is the floor both sides stand on: it imports nothing of this
project, the actors code against it, and :mod:`host_bridge.protocols`
re-exports it for hosts.

Futures are :class:`concurrent.futures.Future` everywhere, because they are
thread-safe, accept done-callbacks and do not tie the host to a runtime. A
pykka future can be adapted with :func:`host_bridge._futures.from_pykka`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence, Set
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:  # for the annotation only: this module imports nothing of the project
    from messages._fold import FoldedSchedules

__all__ = [
    "DEFAULT_CLOCK_STEP_CONFIRM_MS",
    "DEFAULT_CLOCK_WATCH_MS",
    "DEFAULT_FLUSH_TIMEOUT_MS",
    "MAX_CALL_ID_LENGTH",
    "Agent",
    "AgentRegistry",
    "AgentStatus",
    "AppendGuard",
    "Cancellable",
    "ColdDelivery",
    "ColdPass",
    "DueSession",
    "HostContext",
    "Session",
    "SessionActivation",
    "SessionDemand",
    "SessionDetachedError",
    "SessionEvent",
    "SessionHeader",
    "SessionPassivation",
    "SessionStore",
    "SessionWithCheckpoint",
    "TextBlock",
    "Timers",
    "ToolCall",
    "ToolDefinition",
    "ToolRegistry",
    "ToolResult",
    "UserMessage",
    "model_call_id",
    "monotonic_ms",
    "tool_call",
    "wall_clock_ms",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

DEFAULT_FLUSH_TIMEOUT_MS = 30_000
"""How long Schedule waits for a flush barrier before treating it as failed (30 s)."""

DEFAULT_CLOCK_WATCH_MS = 1000
"""How often Schedule's clock watchdog compares the wall clock with the monotonic clock (1 s)."""

DEFAULT_CLOCK_STEP_CONFIRM_MS = 5000
"""How long a forward step of the wall clock must hold before Schedule acts on it (5 s)."""


def wall_clock_ms() -> int:
    """The wall clock in integer epoch milliseconds (``HostContext.clock``'s default)."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """The process monotonic clock in integer milliseconds (``HostContext.monotonic``'s default).

    It is the clock :class:`actors._clock.ThreadTimers` measures delays on.
    """
    return time.monotonic_ns() // 1_000_000


class SessionDetachedError(RuntimeError):
    """The session was detached: it accepts no more appends or flushes."""


AgentStatus: TypeAlias = Literal["running", "idle"]
"""An agent status reported to ``AgentRegistry.on_status``: ``"running"`` or ``"idle"``."""


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One committed entry of a session's append-only log.

    ``seq`` is the event's index in ``Session.events`` (``events[i].seq == i``),
    ``time`` the append time in epoch milliseconds, ``type`` a host-chosen event
    type (Schedule owns ``"schedule/change"``) and ``data`` its JSON-like payload.
    """

    type: str
    seq: int
    time: int
    data: Any


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """Identity of a session's log.

    ``seed_length`` is set on a fork: the first ``seed_length`` events were copied
    from ``parent_session`` and belong to the parent's history, not the child's.
    ``None`` means the session is not a fork (equivalent to ``0``).
    """

    id: str
    seed_length: int | None = None
    parent_session: str | None = None


AppendGuard = Callable[[SessionHeader, Sequence[SessionEvent], str, Any], None]
"""Called before an append with (header, current events, type, data); raising rejects it."""


@runtime_checkable
class Session(Protocol):
    """A live session: an append-only event log.

    ``events`` returns an immutable snapshot (a sequence that never changes after
    it was taken) in which ``events[i].seq == i``. ``append`` commits one event
    synchronously to the live log and returns it; it raises when the host rejects
    the event (for example an invariant refuses it), in which case nothing was appended.
    Durability is *not* implied by ``append``: see :meth:`SessionStore.flush`.
    The snapshot's items need not be in memory: a host may read durable ones on
    demand (see :class:`SessionWithCheckpoint`), as long as every index reads the
    same event every time.
    """

    @property
    def id(self) -> str:
        """The session id (equal to ``header.id``)."""
        ...

    @property
    def header(self) -> SessionHeader:
        """The session header."""
        ...

    @property
    def events(self) -> Sequence[SessionEvent]:
        """An immutable snapshot of the log."""
        ...

    def append(self, type: str, data: Any) -> SessionEvent:
        """Append one event and return it; raises if the host rejects it."""
        ...


@runtime_checkable
class SessionWithCheckpoint(Session, Protocol):
    """A session that offers a schedule checkpoint (optional), so Schedule folds only its tail.

    ``schedule_checkpoint`` is ``None`` or a :class:`messages.FoldedSchedules`
    equal to ``fold_schedule_events(events[:end], seed)`` of the session's own
    log, where ``end`` is the checkpoint's ``end`` and ``seed`` the header's
    ``seed_length`` (``0`` when unset; the checkpoint's ``seed_length`` is that
    too) and ``seed <= end <= len(events)``. The owner reads it when it starts
    (and when it restarts after a contained failure) and folds only
    ``events[end:]`` onto it (:func:`messages._fold.continue_fold`), so a host
    whose store keeps such a fold resumes a long session without the whole
    log: ``events[i]`` is read only for ``i >= end`` on the delivery and tool
    paths, and ``events[i].seq == i`` must hold for every index read. The
    earlier events must stay readable (history readers, forks, verification)
    but need not be held in memory.

    Offer ``None`` when the log up to the checkpoint is corrupt or unknown: the
    owner then folds the whole log as it does for a session without the
    attribute. A checkpoint the owner cannot use (not a ``FoldedSchedules``,
    another ``seed_length``, an ``end`` beyond the log, a property that raises)
    is logged and ignored the same way. Hosts that do not offer it need
    nothing: Schedule reads the attribute with ``getattr``.
    """

    @property
    def schedule_checkpoint(self) -> FoldedSchedules | None:
        """The fold of ``events[:end]`` (``end``: its own), or ``None`` (fold the whole log)."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """The host's session service and its durability barrier."""

    def flush(self, session: Session) -> Future[bool]:
        """Make every event appended to ``session`` before this call durable.

        The future resolves ``True`` when a persistence listener made every such
        event durable, ``False`` when no listener acknowledged durability, and
        fails with an exception when a listener failed or the session is detached
        or unknown. Only ``True`` counts as a successful checkpoint.
        """
        ...

    def get(self, session_id: str) -> Session | None:
        """The live session with this id, or ``None``."""
        ...

    def list(self) -> Sequence[Session]:
        """Every live session."""
        ...


@dataclass(frozen=True, slots=True)
class TextBlock:
    """A block of plain text inside a message."""

    text: str


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A user-role message queued to an agent.

    ``source`` says who produced it; Schedule reminders carry
    ``{"kind": "plugin", "plugin": "tool-schedule"}``.
    """

    content: tuple[TextBlock, ...]
    source: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text blocks joined with newlines."""
        return "\n".join(block.text for block in self.content)


@runtime_checkable
class Agent(Protocol):
    """A live agent running turns in one session."""

    @property
    def id(self) -> str:
        """The agent id, unique in its registry."""
        ...

    @property
    def session(self) -> Session:
        """The session the agent's turns are recorded in."""
        ...

    def followup(self, message: UserMessage) -> None:
        """Synchronously enqueue ``message`` as a later turn. May raise; then nothing was queued."""
        ...

    def reserve_turn_admission(self) -> Callable[[], None] | None:
        """Hold the agent idle for durable work, without blocking.

        Returns an idempotent ``release`` callable, or ``None`` when the agent is
        running, already reserved, or about to start a queued turn. A follow-up
        queued while reserved starts its turn only after ``release()``.
        """
        ...

    def when_idle(self) -> Future[None]:
        """A future that resolves once the agent is idle (at once if it already is)."""
        ...


@runtime_checkable
class AgentRegistry(Protocol):
    """The host's live agents and their lifecycle notifications.

    Every ``on_*`` method subscribes a listener and returns an ``unsubscribe``
    callable. Status values are ``"running"`` and ``"idle"``.
    """

    def roots(self) -> Sequence[Agent]:
        """The live root agents (agents that were not spawned by another agent)."""
        ...

    def get(self, agent_id: str) -> Agent | None:
        """The live agent with this id, or ``None``."""
        ...

    def on_created(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        """Call ``listener`` for every agent created from now on."""
        ...

    def on_status(self, listener: Callable[[Agent, AgentStatus], None]) -> Callable[[], None]:
        """Call ``listener`` whenever an agent becomes ``"running"`` or ``"idle"``."""
        ...

    def on_disposed(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        """Call ``listener`` for every agent disposed from now on."""
        ...


MAX_CALL_ID_LENGTH = 256
"""The longest tool-call id taken as the model's; a longer one gives way to a synthetic id."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The context of one tool execution: the call id and the calling agent.

    ``call_id`` is the model's tool-call id when the host has one (the
    ``gen_ai.tool.call.id`` of the call's span). A host that has none makes
    one up and says so with ``synthetic=True``: the id then only tells calls
    apart, and no span reports it as the model's.
    """

    call_id: str
    agent: Agent
    synthetic: bool = field(default=False, kw_only=True)


def model_call_id(value: object) -> str | None:
    """``value`` as a model's tool-call id, or ``None`` if it cannot be one.

    One is a non-empty string of at most :data:`MAX_CALL_ID_LENGTH` characters.
    """
    if not isinstance(value, str):
        return None
    text = str.__str__(value)  # a plain copy of a str subclass, whatever it overrides
    return text if 0 < len(text) <= MAX_CALL_ID_LENGTH else None


def tool_call(agent: Agent, call_id: object, invent: Callable[[], str]) -> ToolCall:
    """The :class:`ToolCall` of ``agent`` with the model's ``call_id``, else a synthetic one.

    ``call_id`` is what the host was given (``None``: nothing); one that
    :func:`model_call_id` refuses is logged and replaced, like a missing one,
    by ``invent()`` with ``synthetic=True``.
    """
    given = model_call_id(call_id)
    if given is not None:
        return ToolCall(given, agent)
    if call_id is not None:
        _log.warning(
            "a tool-call id that is not a string of 1 to %d characters was replaced",
            MAX_CALL_ID_LENGTH,
        )
    return ToolCall(invent(), agent, synthetic=True)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of a tool execution.

    ``value`` is the canonical JSON value, ``content`` its model-visible rendering.
    ``is_error`` marks host-level failures (unknown tool, crashed tool); Schedule's
    domain errors are ordinary values with ``is_error=False``.
    """

    is_error: bool
    value: Any
    content: str


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool offered to the model.

    ``parameters`` and ``output_schema`` are JSON Schemas (draft 2020-12).
    ``execute(arguments, call)`` returns a future of the :class:`ToolResult` and
    never raises; ``render(value)`` is the model-visible content of a value and
    ``present(value)`` a one-line human summary for transcripts and UIs.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    output_schema: Mapping[str, Any]
    execute: Callable[[Any, ToolCall], Future[ToolResult]]
    render: Callable[[Any], str]
    present: Callable[[Any], str]


@runtime_checkable
class ToolRegistry(Protocol):
    """The host's tool table, scoped per agent."""

    def register(self, tool: ToolDefinition, *, agent: Agent) -> Callable[[], None]:
        """Offer ``tool`` to ``agent`` only; returns ``unregister``. Raises on a name conflict."""
        ...

    def get(self, name: str, *, agent: Agent | None = None) -> ToolDefinition | None:
        """The tool called ``name`` visible to ``agent`` (or globally when ``agent`` is None)."""
        ...

    def execute(self, name: str, arguments: Any, *, agent: Agent) -> ToolResult:
        """Run a tool for ``agent`` and wait for its result."""
        ...


@runtime_checkable
class Cancellable(Protocol):
    """A handle to an armed timer."""

    def cancel(self) -> None:
        """Stop the callback from running if it has not run yet; idempotent."""
        ...


@runtime_checkable
class Timers(Protocol):
    """A timer service: run a callback once after a delay."""

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback`` once, ``delay_ms`` milliseconds from now (``0`` means soon)."""
        ...


@dataclass(frozen=True, slots=True)
class DueSession:
    """A stored session with something due: its id and when (epoch milliseconds)."""

    session_id: str
    due_ms: int


@runtime_checkable
class SessionActivation(Protocol):
    """How Schedule brings a cold session back to deliver what came due in it (optional).

    A host without it keeps session-local delivery: a reminder fires only while
    its session is live. With it, the plugin runs one wake-up actor that sleeps
    until the earliest due target among sessions that are *not live in this
    host*, then calls :meth:`activate` for them in due order (a bounded number at
    a time). Delivery itself stays the ordinary owner path: the activated root
    agent is announced through ``AgentRegistry.on_created``, Schedule installs
    its owner, and the owner's first drive delivers what is due.

    The wake-up actor calls these methods on its own thread (or greenlet). The
    reads may block briefly (a database query); on the gevent runtime run them
    with :func:`actors._runtime.run_blocking`. They may raise: the actor logs it
    and tries again later.
    """

    def next_due(self) -> int | None:
        """The earliest due time (epoch ms) among stored sessions not live here, or None.

        It may lie in the past. Skip sessions that are evidently live elsewhere
        (their owner there delivers), or the actor wakes for them in vain.
        """
        ...

    def due_sessions(self, now_ms: int, limit: int) -> Sequence[DueSession]:
        """Up to ``limit`` sessions due at ``now_ms``, earliest first, not live in this host."""
        ...

    def activate(self, session_id: str) -> Future[Agent | None]:
        """Bring ``session_id`` back and spawn its root agent; never raises (fail the future).

        Resolves with the live root agent once ``on_created`` listeners ran, or
        ``None`` when the host declines: the session is live elsewhere, or
        nothing is due in it any more. The host must make sure that two hosts
        never have one session live at once (a lock or a lease): that, not this
        call, is what keeps a reminder from being delivered twice.
        """
        ...

    def on_due_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` when the due time of a session not live here may have moved.

        For example after a commit that moved the due index of such a session,
        or when a live session went cold. Returns ``unsubscribe``. The listener
        only posts a message; it may be called from any thread.
        """
        ...


@runtime_checkable
class SessionPassivation(Protocol):
    """How Schedule lets an activated session go again once it is quiet (optional).

    Implemented by the same object as :class:`SessionActivation`. Schedule calls
    it only for agents that :meth:`SessionActivation.activate` produced, once the
    agent and its owner have been quiet for the plugin's quiet period and no
    reminder of the session is due within it.
    """

    def passivate(self, agent: Agent) -> Future[bool]:
        """Dispose ``agent``, detach its session and release it; never raises.

        Resolves ``True`` when the session went cold, ``False`` when the host
        keeps it live (say a person opened it meanwhile).
        """
        ...


@runtime_checkable
class SessionDemand(Protocol):
    """How Schedule hears that another process wants an activated session (optional).

    Implemented by the same object as :class:`SessionPassivation`. While the
    wake-up actor manages activated agents, it asks every
    ``WakePolicy.demand_poll_ms`` which of their sessions are wanted (say a
    person is opening one in another process) and lets such a session go as
    soon as it is idle (agent idle, owner quiet, nothing due within
    ``HANDOVER_MARGIN_MS`` or the quiet period, whichever is shorter) instead of
    after its quiet period, through the same :meth:`SessionPassivation.passivate`.
    """

    def wanted(self, session_ids: Collection[str]) -> Set[str]:
        """Those of ``session_ids`` that another process asks for now; may raise (none then).

        A snapshot that may block briefly (one query); a session wrongly
        reported only goes cold early, so an approximate answer is safe.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ColdPass:
    """What one :meth:`ColdDelivery.deliver_due` pass did (fields by keyword only).

    ``claimed``: sessions it took; ``delivered``: reminder messages it
    delivered (their dispatches and inbox entries durable); ``needs_agent``:
    sessions it took, found something it does not deliver cold (an unfinished
    turn, a person's queued message) and gave back, for the wake-up actor to
    activate; ``waiting``: sessions still held because a commit failed (an
    inbox entry, or the rows written before giving one back), which the next
    pass tries again (so one should follow soon even if nothing else is due);
    ``stuck``: sessions it took and gave back undelivered although they looked
    due (a log it cannot decide, a reminder it cannot render or queue), for the
    wake-up actor to back off from, so they do not fill every later batch.
    """

    claimed: int = 0
    delivered: int = 0
    needs_agent: tuple[str, ...] = ()
    waiting: int = 0
    stuck: tuple[str, ...] = ()


@runtime_checkable
class ColdDelivery(Protocol):
    """Delivery to many cold sessions at once, without an agent per session (optional).

    Implemented by the same object as :class:`SessionActivation`. When the host
    offers it, the wake-up actor does not activate due sessions one by one: it
    asks for passes, one at a time, and activates only the sessions a pass hands
    back in :attr:`ColdPass.needs_agent`. A pass takes due sessions in a batch
    (the host's lock or lease, as for an activation), decides each from its
    durable schedule state with the owner's rules (one-shots first, then one
    batch of ``every`` and ``cron`` records; nothing early), writes each
    delivery's inbox entry and dispatches durably together (many sessions in
    one commit), runs the reminder turns and gives the sessions back.
    """

    def deliver_due(self, now_ms: int, limit: int, skip: frozenset[str]) -> Future[ColdPass]:
        """Deliver what is due at ``now_ms`` in up to ``limit`` sessions not in ``skip``.

        Never raises (fail the future). ``skip`` names the sessions the wake-up
        actor is activating or manages live.
        """
        ...


@dataclass
class HostContext:
    """Everything Schedule needs from its host.

    ``session_persistence`` is the host's durability service: the object that
    makes session appends durable (the embedded host passes its event store, the
    test kit a marker). Schedule never calls it: it reaches durability only
    through ``SessionStore.flush``. The field states that the host persists its
    sessions, so it must be present: Schedule refuses to install without it,
    because on a host that keeps sessions only in memory a confirmed reminder
    could not survive a restart. Its type is ``object`` because no method of it
    is used. ``clock`` returns wall-clock epoch
    milliseconds. ``timers`` left ``None`` is supplied by the runtime Schedule
    runs on (:meth:`actors._runtime.Runtime.timers`: one timer thread per plugin
    on the threading runtime, hub timers on gevent).

    ``monotonic`` returns milliseconds of a clock that never jumps: the clock
    ``timers`` measure delays on (the default is the process's monotonic clock,
    which :class:`actors._clock.ThreadTimers` uses). Left at its default, it
    is taken from ``clock.monotonic`` when the clock has one (as
    :class:`host_bridge.testing.FakeClock` does), so a fake wall clock is never
    compared with the real monotonic clock.

    ``clock_watch_ms`` is the tick of the plugin's clock watchdog: while at least
    one owner is installed, it compares ``clock()`` with ``monotonic()`` every
    ``clock_watch_ms`` (on ``timers``) and makes owners whose timer is armed
    drive again when the wall clock jumped or the machine was suspended, so a
    forward step delivers what became due within ``clock_step_confirm_ms``
    plus about one tick. ``None`` turns the watchdog off.

    ``clock_step_confirm_ms`` is how long (on ``monotonic``) a forward step of
    the wall clock, or a resume from a suspend, must hold before Schedule acts
    on it; until then it decides on the timeline from before the step, so a
    clock that glitches ahead and is corrected within it delivers nothing early.
    A step back is taken at once. ``None`` takes every step at once.

    ``flush_timeout_ms`` bounds every flush barrier Schedule waits for: a flush
    that has not settled after that long (measured on ``timers``) counts as
    failed, so a hung persistence listener yields ``persistence_uncertain``
    instead of a tool that never answers and an owner that cannot be disposed.
    ``None`` waits forever.

    ``activation`` (optional) tells Schedule how to wake cold sessions whose
    reminders came due (see :class:`SessionActivation`, and
    :class:`SessionPassivation` for letting them go again); ``None`` keeps
    session-local delivery.
    """

    sessions: SessionStore | None
    agents: AgentRegistry | None
    tools: ToolRegistry | None
    session_persistence: object | None
    clock: Callable[[], int] = wall_clock_ms
    timers: Timers | None = None
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("dsh_schedule"))
    flush_timeout_ms: int | None = DEFAULT_FLUSH_TIMEOUT_MS
    monotonic: Callable[[], int] = monotonic_ms
    clock_watch_ms: int | None = DEFAULT_CLOCK_WATCH_MS
    activation: SessionActivation | None = None
    clock_step_confirm_ms: int | None = DEFAULT_CLOCK_STEP_CONFIRM_MS

    def __post_init__(self) -> None:
        if self.monotonic is monotonic_ms:
            paired = getattr(self.clock, "monotonic", None)
            if callable(paired):
                self.monotonic = paired
