"""ScheduleOwner: one actor per live root agent; its mailbox is the agent's Schedule queue.

Every admitted management transaction and every delivery transaction runs
here from preflight through its last barrier, one at a time. Steps that wait
(a preflight flush, a post-append barrier, an idle wait, a timer) are separate
mailbox messages posted by future callbacks and timers, so the actor never
blocks on a future and stays responsive to :class:`DisposeOwner`.

Transaction shapes (see :mod:`messages._mailbox`)::

    create   CreateSchedule -> flush -> PreflightSettled -> append create -> flush -> BarrierSettled
    list     ListSchedules  -> flush -> PreflightSettled
    delete   DeleteSchedule -> flush -> PreflightSettled -> append delete -> flush -> BarrierSettled
    deliver  drive          -> flush -> PreflightSettled -> reserve, follow-up, append dispatch(es),
                                                           release -> flush -> BarrierSettled

A flush already settled when the owner asks for it (typically a preflight
with nothing left to write) is not posted: its ``PreflightSettled`` or
``BarrierSettled`` is handled right after the current handler, by the same
``handle_`` method (see :meth:`ScheduleOwner.on_receive`).

Inline barrier. A create's or delete's ``BarrierSettled`` is handled where
its flush settles (typically the store's writer thread) when the owner is
idle (:meth:`ScheduleOwner.offer`), saving the hand-off to the actor and
back; otherwise it is posted, and so it is when that thread is settling a
group of flushes (:func:`actors._futures.settles_many`: a commit covering
many sessions), so that each owner answers on its own thread while the
writer commits the next round. The owner's order is kept exactly: every
message the actor handles, and an inline step, runs holding the owner's
section (a lock), so two never run at once; the step enters only when the
inbox has counted no more ``put`` than the actor has handled (pykka counts a
message before ``tell`` returns), so it never overtakes a message sent before
it, and a message sent meanwhile waits for the section as it would wait
behind the step's message. It enters only when its own transaction is in
flight and nothing is queued, so it never runs queued work, and a drive it
asks for is posted (:class:`RequestDrive`) for the actor to run: no delivery
and no new transaction runs off the actor. The step never waits for anything
(the answer, the fold of the log, the status) and takes the section only if
it is free, so the actor waiting for the section (a thread, or a greenlet
blocking its hub for that while) waits for work that cannot wait for it.
Timer and idle wake-ups, other flush outcomes and dispose requests arrive by
mail as before.

After a delivery whose barrier succeeded the owner drives again at once (the
next record may be due already), unless the log holds no active record; when
the next record is due already, it waits for the agent to be idle first (the
turn just delivered holds it), and the drive follows.

Recompute after management. Every successful management preflight asks for a
drive (queued behind the transaction). A create asks when it finishes and
leaves it out only when the drive could do nothing but re-arm the timer that
is armed: the create's barrier succeeded, the records at its start are
exactly those the timer was decided from, and the new record is not due
before the armed target (see ``_drive_needless``). Anything else (no timer, a
change since the decision, an earlier record, a failed barrier) drives.

A delivery decides twice from one clock sample each (:func:`messages._delivery.plan_delivery`):
after the preflight (is anything due?) and again inside the turn reservation,
which is what it acts on. A due one-shot (``after``/``at``) goes first, one per
transaction, with its own follow-up and dispatch. Otherwise every due
repeating record (``every`` or ``cron``) joins one batch: one follow-up carrying
the batch framing, then one dispatch per member in batch order, all with the
same ``acceptedAt``. A decision that raises or is undecidable (a clock outside
years 0001–9999 on the repeating path) is logged and taken as no decision: no
fault, nothing armed.
A clock sample that is not an ``int`` decides nothing either, but arms a
retry in :data:`BAD_CLOCK_RETRY_MS`, so delivery goes on once the clock is good.

Teardown. Disposal begins when the :class:`~actors._teardown.TeardownGate` closes
(the plugin closes it before it posts :class:`DisposeOwner`, which closes it too),
not when ``DisposeOwner`` reaches the front of the mailbox. From then on no
transaction starts, nothing is reserved, followed up or appended: a tool call
that has not appended answers ``internal_error`` (``shutting_down``, or
``not_live`` when its agent was disposed; ``persistence_uncertain`` when its
preflight failed), and one whose append happened answers as its barrier
decides. The owner stops once the step in flight has settled.

Cancellation. A tool call the host cancelled (its reply future) is skipped when
its transaction would start (no flush) and checked again just before its
append (no append).

Faults. An unexpected exception in a handler is contained: the tool in flight
answers ``internal_error`` and delivery stops. With a supervisor (the plugin),
the owner reports it and shows ``restarting`` until the supervisor's
:class:`RestartOwner` arrives after a back-off; the owner then rebuilds its
delivery state in place, as a fresh owner would, and drives. Restarting in
place (not a second actor) keeps one mailbox per session, so two owners never
run transactions on one session, and no admitted tool call is lost or answered
twice. A corrupt log and a failed dispatch append are permanent faults: a
corrupt log cannot heal by refolding, and after a failed dispatch append the
reminder may already be queued to the agent, so this owner must never repeat it.

Observation. The owner reports what it does to an
:class:`~actors._observer.OwnerObserver` (none by default): every transaction
from its start (a tool call's admission, a delivery's preflight) to its finish,
whatever ends it (an answer, a cancellation, a contained failure, disposal or a
stop), each delivery with the clock sample it was decided at, each failed flush
and each contained failure. :mod:`host_bridge._telemetry` turns the reports into
OpenTelemetry metrics and spans; this package never imports OpenTelemetry.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

from actors._checkpoint import offered_checkpoint
from actors._contract import Agent, Cancellable, HostContext, TextBlock, UserMessage
from actors._futures import resolved_true, settle, settles_many
from actors._observer import (
    NO_OBSERVER,
    DeliveryOutcome,
    OwnerObserver,
    ToolOutcome,
    TxnKind,
    guarded,
)
from actors._status_box import OwnerStatusBox
from actors._supervised import OwnerSupervisor, SupervisedActor
from actors._teardown import TeardownGate
from messages._delivery import (
    DeliverBatch,
    DeliverNow,
    Undecidable,
    WaitFor,
    plan_delivery,
    reminder_delivery,
)
from messages._errors import ScheduleInputError, ScheduleLogError
from messages._fold import (
    FoldedSchedules,
    allocate_schedule_id,
    apply_schedule_change,
    continue_fold,
    fold_schedule_events,
)
from messages._mailbox import (
    AgentIdle,
    BarrierSettled,
    ClockJumped,
    CreateSchedule,
    DeleteSchedule,
    DisposeOwner,
    FlushPhase,
    FlushTimedOut,
    ListSchedules,
    PreflightSettled,
    RequestDrive,
    RestartOwner,
    StartOwner,
    TimerFired,
    ToolRequest,
)
from messages._presentation import REMINDER_SOURCE
from messages._records import (
    SCHEDULE_CHANGE_TYPE,
    CreateChange,
    DeleteChange,
    ScheduleRecord,
)
from messages._status import OwnerState, OwnerStatus
from messages._tool_values import (
    MAX_ACTIVE_SCHEDULES,
    Operation,
    ToolError,
    active_limit_error,
    corrupt_log_error,
    delete_value,
    input_error,
    internal_error,
    list_value,
    not_found_value,
    persistence_uncertain,
)
from messages._views import schedule_view

__all__ = ["OwnerStatusBox", "ScheduleOwner"]


@dataclass
class _Txn:
    """A transaction admitted or in flight: which step it waits for and what it carries."""

    id: int
    kind: TxnKind
    request: ToolRequest | None
    phase: FlushPhase = "preflight"
    record: ScheduleRecord | None = None
    schedule_id: str | None = None
    dispatched: tuple[str, ...] = ()  # a delivery's dispatched ids, in append order
    deadline_ms: int | None = None  # when the flush of the step in flight times out (monotonic)
    recompute: bool = False  # ask for a drive when the transaction finishes
    unchanged: FoldedSchedules | None = None  # a create's fold, when it equals the decided one
    timer_generation: int = 0  # the armed timer when ``unchanged`` was taken
    token: object = None  # the observer's token for this transaction
    outcome: DeliveryOutcome | ToolOutcome | None = None  # reported when it finishes
    answer: ToolError | dict[str, object] | None = None  # the tool value it answered
    sample_ms: int = 0  # a create's clock sample, the fallback of its answer's view


class UnreadableLogError(RuntimeError):
    """The host could not produce the session's events."""


class _Drive:
    """The single coalesced drive request in the owner's queue."""

    __slots__ = ()


_DRIVE = _Drive()


class _NoDecision:
    """What :meth:`ScheduleOwner._plan` returns when there is nothing to act on (logged)."""

    __slots__ = ()


_NO_DECISION = _NoDecision()

BAD_CLOCK_RETRY_MS = 1_000
"""How soon an owner decides again after a clock sample that was not an ``int``."""

_Plan = DeliverNow | DeliverBatch | WaitFor | _NoDecision | None


class ScheduleOwner(SupervisedActor):
    """The Schedule state machine of one root agent. See the module docstring."""

    def __init__(
        self,
        agent: Agent,
        host: HostContext,
        status: OwnerStatusBox | None = None,
        supervisor: OwnerSupervisor | None = None,
        observer: OwnerObserver = NO_OBSERVER,
        *,
        gate: TeardownGate | None = None,
    ) -> None:
        super().__init__()
        if host.sessions is None or host.agents is None:
            raise ValueError("ScheduleOwner needs a host with sessions and agents")
        # Identity and lifetime: kept across restarts.
        self._agent = agent
        if host.timers is None:
            raise ValueError("HostContext.timers must be set (install_schedule supplies them)")
        self._host = host
        self._timers = host.timers
        self._log = host.logger.getChild("owner")
        self._sessions = host.sessions
        self._agents = host.agents
        self._session = agent.session
        header = self._session.header
        self._seed = header.seed_length or 0
        self._status = status if status is not None else OwnerStatusBox(agent.id)
        self._status.watch_inbox(self.actor_inbox.empty)
        self._supervisor = supervisor
        self._observer = guarded(observer, self._log)
        self._gate = gate if gate is not None else TeardownGate(host.flush_timeout_ms)
        self._queue: deque[_Txn | _Drive] = deque()  # admitted work survives a restart
        self._steps: deque[PreflightSettled | BarrierSettled] = deque()  # settled at once
        self._answers: deque[tuple[Future[Any], ToolError | dict[str, object]]] = deque()
        self._txn: _Txn | None = None
        self._txn_ids = itertools.count(1)
        self._idle_generation = 0
        self._disposing = False
        self._dispose_replies: list[Future[None]] = []
        self._deliveries = 0
        self._contained = 0
        self._restarts = 0
        self._section = threading.Lock()  # held per message by the actor and by an inline caller
        self._handled = 0  # messages on_receive finished (see offer)
        self._inline = False  # a step runs off the actor, in the section (see offer)
        self._deadline_timer: Cancellable | None = None  # see _arm_deadline
        self._fresh_delivery_state()

    def _fresh_delivery_state(self) -> None:
        """The delivery state a new owner starts with; a restart returns to it.

        Cancel the timer and abandon the idle wait before calling this on a
        running owner (their generations must move on).
        """
        self._fold: FoldedSchedules | None = None
        self._timer_target: int | None = None  # the target the armed timer waits for
        self._decided: FoldedSchedules | None = None  # the fold the armed timer was decided from
        self._decision_ms = 0  # the clock sample of the latest delivery decision
        self._bad_clock = False  # the latest decision sample was no reading (logged once)
        self._waiting_for_idle = False
        self._drive_covered = False  # a drive request was left to the delivery in preflight
        self._faulted: str | None = None
        self._restart_pending = False

    # --- mailbox ----------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        """Handle one mailbox message in the section (see :meth:`offer`); count it."""
        with self._section:
            try:
                return self._receive(message)
            finally:
                self._handled += 1

    def offer(self, message: BarrierSettled) -> bool:
        """Handle ``message`` on the calling thread if the owner is idle, else ``False``.

        ``True``: it was handled here exactly as the actor would have handled
        it by mail. Only the barrier of the tool transaction in flight, only
        with nothing queued and no unhandled message, and only if the section
        is free now (never waits). See "Inline barrier" in the module docstring.
        """
        if settles_many():
            return False  # the thread settles other flushes too: the owner's own thread answers
        txn = self._txn  # (a first look without the section, to leave it alone for deliveries)
        if txn is None or txn.kind == "deliver" or txn.id != message.txn:
            return False
        if not self._section.acquire(blocking=False):
            return False  # the actor is handling something
        try:
            txn = self._txn
            if (
                txn is None
                or txn.id != message.txn
                or txn.kind == "deliver"
                or self._queue
                or self._steps
                or self.actor_inbox.unfinished_tasks != self._handled  # type: ignore[attr-defined]
            ):
                return False
            self._inline = True
            try:
                self._receive(message)
            finally:
                self._inline = False
            return True
        finally:
            self._section.release()

    def _receive(self, message: Any) -> Any:
        """Handle one message, then the steps it settled at once; exceptions are contained.

        A flush that is already settled when the owner asks for it (say, a
        preflight with nothing left to write) needs no trip through the
        mailbox: its :class:`PreflightSettled` or :class:`BarrierSettled` is
        queued in :attr:`_steps` and handled right after the current handler,
        by its ``handle_`` method as if it had arrived by mail.

        Tool answers are sent last, after the status is published: a caller
        woken by its answer then finds the owner done with the message (and
        the status showing it), not still holding the interpreter.
        """
        try:
            result = self._handle_contained(message)
            steps = self._steps
            while steps:
                self._handle_contained(steps.popleft())
            return result
        finally:
            try:
                self._publish()
            finally:
                self._send_answers()

    def on_stop(self) -> None:
        """Cancel the timer, answer what is still queued, resolve every dispose request.

        A disposed owner gets here with nothing in flight or queued; an owner
        stopped otherwise answers its transaction in flight and its queued tool
        calls here (see :meth:`_abandon`). Runs in the section, after any inline
        step (none can start: the stop request is an unhandled message).
        """
        with self._section:
            self._stopping()

    def _stopping(self) -> None:
        self._cancel_timer()
        deadline, self._deadline_timer = self._deadline_timer, None
        if deadline is not None:
            with contextlib.suppress(Exception):  # a host's timer may fail any way
                deadline.cancel()
        self._disposing = True
        txn, self._txn = self._txn, None
        if txn is not None:
            _cancel_deadline(txn)
            self._abandon(txn)
        while self._queue:
            work = self._queue.popleft()
            if not isinstance(work, _Drive):
                self._abandon(work)
        others = []
        while not self.actor_inbox.empty():
            envelope = self.actor_inbox.get()
            leftover = envelope.message
            if isinstance(leftover, CreateSchedule | ListSchedules | DeleteSchedule):
                _reply(leftover.reply, self._refusal())
            elif isinstance(leftover, DisposeOwner):
                self._dispose_replies.append(leftover.reply)
            else:
                others.append(envelope)
        for envelope in others:  # pykka's teardown answers these (asks, stop requests)
            self.actor_inbox.put(envelope)
        self._publish("disposed")
        self._send_answers()
        for reply in self._dispose_replies:
            if not reply.done():
                reply.set_result(None)

    # --- admission -----------------------------------------------------------------------

    def handle_StartOwner(self, message: StartOwner) -> None:
        """First drive after installation."""
        self._request_drive()

    def handle_RequestDrive(self, message: RequestDrive) -> None:
        """A drive was asked for (agent idle, recompute, plugin)."""
        self._request_drive()

    def handle_CreateSchedule(self, message: CreateSchedule) -> None:
        """Admit a create transaction."""
        self._admit(message, "create")

    def handle_ListSchedules(self, message: ListSchedules) -> None:
        """Admit a list transaction."""
        self._admit(message, "list")

    def handle_DeleteSchedule(self, message: DeleteSchedule) -> None:
        """Admit a delete transaction."""
        self._admit(message, "delete", message.id)

    def handle_TimerFired(self, message: TimerFired) -> None:
        """The armed timer woke: re-read the clock through a fresh drive."""
        if not self._timer_fired(message.generation):
            return
        self._timer_target = None
        self._decided = None
        self._request_drive()

    def handle_AgentIdle(self, message: AgentIdle) -> None:
        """The agent became idle after a refused reservation: drive again."""
        if message.generation != self._idle_generation or not self._waiting_for_idle:
            return
        self._waiting_for_idle = False
        self._request_drive()

    def handle_RestartOwner(self, message: RestartOwner) -> None:
        """The supervisor's back-off ended: rebuild delivery state as a fresh owner and drive.

        The mailbox, the admitted tool requests and a transaction in flight are
        kept: the transaction finishes as it would have, the drive waits behind it.
        """
        if self._gate.closed or not self._restart_pending:
            return
        self._restarts += 1
        self._log.warning(
            "schedule owner of agent %r restarted after a contained failure (restart %d)",
            self._agent.id,
            self._restarts,
        )
        self._cancel_timer()
        self._abandon_idle_wait()
        self._fresh_delivery_state()
        self._request_drive()

    def handle_ClockJumped(self, message: ClockJumped) -> None:
        """The wall clock jumped (or the machine slept): an armed timer is re-derived at once.

        Only an armed timer was computed from a wall-clock reading that no longer
        holds; an owner without one has nothing due to re-time (no records, a
        due record waiting for idle, a fault, or a transaction in flight whose
        decision reads the clock after this).
        """
        if self._timer is not None:
            self._request_drive()

    def handle_DisposeOwner(self, message: DisposeOwner) -> None:
        """Stop new work; finish once the step in flight settles."""
        self._dispose_replies.append(message.reply)
        if self._disposing:
            return
        self._disposing = True
        self._gate.close()  # closed already when the plugin sent this
        self._cancel_timer()
        self._abandon_idle_wait()
        self._refuse_queued()
        if self._txn is None:
            self.stop()

    # --- steps ---------------------------------------------------------------------------

    def handle_PreflightSettled(self, message: PreflightSettled) -> None:
        """Continue the transaction whose preflight resolved."""
        txn = self._txn
        if txn is None or txn.id != message.txn or txn.phase != "preflight":
            return
        _cancel_deadline(txn)
        if not message.ok:
            self._observer.persistence_uncertain(txn.token, _OPERATIONS[txn.kind], "preflight")
        if self._gate.closed:  # never start an append during teardown
            if message.ok or txn.kind == "deliver":
                self._answer(txn, self._refusal())
            else:
                self._answer(
                    txn, persistence_uncertain(txn.kind, appended=False, id=txn.schedule_id)
                )
            return self._finish()
        if txn.kind == "deliver":
            return self._deliver_after_preflight(txn, message.ok)
        request = txn.request
        assert request is not None
        if not message.ok:
            self._answer(txn, persistence_uncertain(txn.kind, appended=False, id=txn.schedule_id))
            return self._finish()
        # Every successful management preflight asks for a recompute. A create asks
        # when it finishes, unless it proves the drive would only re-arm the armed
        # timer (see _drive_needless); every other transaction asks now.
        if isinstance(request, CreateSchedule):
            txn.recompute = True
        else:
            self._request_drive()
        if request.reply.cancelled():
            self._log.debug("a %s cancelled by its caller stops after its preflight", txn.kind)
            txn.outcome = "cancelled"
            return self._finish()
        if isinstance(request, CreateSchedule):
            self._create_after_preflight(txn, request)
        elif isinstance(request, DeleteSchedule):
            self._delete_after_preflight(txn, request)
        else:
            self._list_after_preflight(txn)

    def handle_BarrierSettled(self, message: BarrierSettled) -> None:
        """Finish the transaction whose post-append barrier resolved."""
        txn = self._txn
        if txn is None or txn.id != message.txn or txn.phase != "barrier":
            return
        _cancel_deadline(txn)
        if not message.ok:
            self._observer.persistence_uncertain(txn.token, _OPERATIONS[txn.kind], "barrier")
        if txn.kind == "deliver":
            if message.ok and not self._gate.closed:
                txn.recompute = False  # the drive a covered request asked for comes from here
                self._after_delivery()
            elif not message.ok:
                self._log.info(
                    "dispatch of %s is not yet durable; left for a later preflight",
                    ", ".join(repr(schedule_id) for schedule_id in txn.dispatched),
                )
            return self._finish()
        if not message.ok:
            operation: Literal["create", "delete"] = "create" if txn.kind == "create" else "delete"
            self._answer(txn, persistence_uncertain(operation, appended=True, id=txn.schedule_id))
            return self._finish()
        if txn.kind == "create":
            assert txn.record is not None
            if self._drive_needless(txn, txn.record):
                txn.recompute = False
            self._answer(txn, schedule_view(txn.record, self._view_clock(txn.sample_ms)))
        else:
            self._request_drive()
            assert txn.schedule_id is not None
            self._answer(txn, delete_value(txn.schedule_id))
        self._finish()

    def handle_FlushTimedOut(self, message: FlushTimedOut) -> None:
        """The deadline timer fired: a flush past ``flush_timeout_ms`` fails as if it had.

        The timer was armed for the step ``message`` names; the step in flight
        now may be a later one (see :meth:`_arm_deadline`): it fails only once
        its own deadline passed, else the timer is armed for the rest of it.
        """
        self._deadline_timer = None
        txn = self._txn
        if txn is None or txn.deadline_ms is None:
            return  # no flush in flight
        left = txn.deadline_ms - self._host.monotonic()
        if left > 0:
            self._start_deadline_timer(txn, left)
            return
        self._log.warning(
            "%s flush of session %r did not settle within %s ms; treated as failed",
            txn.phase,
            self._session.id,
            self._host.flush_timeout_ms,
        )
        if txn.phase == "preflight":
            self.handle_PreflightSettled(PreflightSettled(txn.id, False))
        else:
            self.handle_BarrierSettled(BarrierSettled(txn.id, False))

    # --- management ----------------------------------------------------------------------

    def _create_after_preflight(self, txn: _Txn, request: CreateSchedule) -> None:
        folded = self._fold_or_answer(txn)
        if folded is None:
            return self._finish()
        decided = self._decided
        if self._timer is not None and decided is not None and _same_schedules(folded, decided):
            txn.unchanged = folded
            txn.timer_generation = self._timer_generation
        if len(folded.active) >= MAX_ACTIVE_SCHEDULES:
            self._answer(txn, active_limit_error())
            return self._finish()
        schedule_id = allocate_schedule_id(folded)
        when = request.when
        sample = self._target_clock()
        try:  # one clock sample; every at error and the range errors are answered here
            record = when.record(schedule_id, request.prompt, sample)
        except ScheduleInputError as error:
            self._answer(txn, input_error(error.code, when.key))
            return self._finish()
        change = CreateChange(record)
        if not self._append_or_answer(txn, change, folded):
            return self._finish()
        txn.record = record
        txn.schedule_id = schedule_id
        txn.sample_ms = sample  # an int: when.record refuses any other sample
        self._barrier(txn)

    def _target_clock(self) -> int:
        """The clock sample a new record's target is computed from.

        A clock that offers ``upper()`` (the plugin's
        :class:`~host_bridge._steady_clock.SteadyClock`) gives the higher of the
        timelines a clock step left in doubt, so a target is never too early;
        decisions use the lower one. Any other clock is sampled as it is.
        """
        clock = self._host.clock
        upper: Callable[[], int] | None = getattr(clock, "upper", None)
        return upper() if callable(upper) else clock()

    def _view_clock(self, fallback_ms: int) -> int:
        """A clock sample for a view's ``state``; ``fallback_ms`` when it is no reading.

        An answer whose change is durable must not fail on a bad clock sample.
        """
        now = self._host.clock()
        return now if isinstance(now, int) and not isinstance(now, bool) else fallback_ms

    def _delete_after_preflight(self, txn: _Txn, request: DeleteSchedule) -> None:
        folded = self._fold_or_answer(txn)
        if folded is None:
            return self._finish()
        if folded.get(request.id) is None:
            self._answer(txn, not_found_value(request.id))
            return self._finish()
        if not self._append_or_answer(txn, DeleteChange(request.id), folded):
            return self._finish()
        self._barrier(txn)

    def _drive_needless(self, txn: _Txn, record: ScheduleRecord) -> bool:
        """After a successful create barrier: would the drive it asks for only re-arm the timer?

        Yes when a timer is armed, is the one armed when the create started,
        the fold at the create's start held exactly the records that timer was
        decided from, the log now holds those plus the new record, and the new
        record is not due before the armed target: a drive would then find the
        same earliest target and arm the same timer. The fold with the new
        record becomes the decided one, so consecutive creates chain. Anything
        else (no timer, a change meanwhile, an earlier record, a failed barrier,
        which never gets here) leaves the drive to run as usual.
        """
        before = txn.unchanged
        target = self._timer_target
        if (
            before is None
            or self._timer is None
            or target is None
            or txn.timer_generation != self._timer_generation
            or record.target_ms < target
        ):
            return False
        try:
            folded = self._refold()
        except (ScheduleLogError, UnreadableLogError):
            return False  # the drive will say so
        active = folded.active
        if (
            len(folded.seen_ids) != len(before.seen_ids) + 1
            or not active
            or active[-1].id != record.id
            or active[-1].target_ms != record.target_ms
            or active[:-1] != before.active
        ):
            return False
        self._decided = folded
        return True

    def _after_delivery(self) -> None:
        """After a successful dispatch barrier: drive again, wait for idle, or do nothing.

        Only this owner appends schedule changes, and none is in flight, so an
        empty fold (confirmed or not) leaves a drive nothing to deliver or arm:
        it is left out. When the earliest record was due already at the clock
        sample this delivery was decided at, the drive could only find the
        agent busy with the turn just delivered (its message is queued or
        running): the owner waits for idle at once, and the drive follows
        :class:`AgentIdle` (it drives now if the agent is idle already); that
        drive samples the clock again, so nothing is delivered early. Anything else (a record
        not due yet, a log that cannot be folded) drives now.
        """
        try:
            earliest = self._refold().earliest()
        except (ScheduleLogError, UnreadableLogError):
            return self._request_drive()
        if earliest is None:
            return None
        if earliest.target_ms <= self._decision_ms:
            if self._waiting_for_idle:
                return None  # its AgentIdle drives
            idle = self._agent.when_idle()
            if not idle.done():
                return self._await_idle(idle)
        return self._request_drive()

    def _list_after_preflight(self, txn: _Txn) -> None:
        folded = self._fold_or_answer(txn)
        if folded is not None:
            now = self._view_clock(self._decision_ms)
            self._answer(txn, list_value([schedule_view(r, now) for r in folded.active]))
        self._finish()

    def _fold_or_answer(self, txn: _Txn) -> FoldedSchedules | None:
        try:
            return self._refold()
        except ScheduleLogError:
            self._log.warning("schedule log of session %r is corrupt", self._session.id)
            self._answer(txn, corrupt_log_error())
        except UnreadableLogError:
            self._log.warning("schedule log of session %r could not be read", self._session.id)
            self._answer(txn, internal_error())
        return None

    def _append_or_answer(
        self, txn: _Txn, change: CreateChange | DeleteChange, folded: FoldedSchedules
    ) -> bool:
        """Append a management change; ``False`` (answered, or cancelled) when it did not.

        Not once teardown began or the agent is no longer live (checked in the
        gate's passage, so a dispose beginning meanwhile waits for the append).
        The fold ``folded`` the change was decided on takes it in at once
        (:meth:`_fold_own`).
        """
        if txn.request is not None and not _claim(txn.request.reply):
            self._log.debug("a %s cancelled by its caller stops before its append", txn.kind)
            txn.outcome = "cancelled"
            return False
        with self._gate.passage() as admitted:
            if not admitted or not self._is_live():
                self._log.debug("a %s stops before its append (%s)", txn.kind, self._gate.cause)
                self._answer(txn, self._refusal())
                return False
            try:
                event = self._session.append(SCHEDULE_CHANGE_TYPE, change.to_json())
            except Exception:
                self._log.warning("append of a %s to session %r failed", txn.kind, self._session.id)
                self._answer(txn, internal_error())
                return False
        self._fold_own(folded, change, event)
        return True

    def _fold_own(
        self, folded: FoldedSchedules, change: CreateChange | DeleteChange, event: object
    ) -> None:
        """Fold the change this owner just appended as ``event`` without decoding it again.

        Only when ``event`` is the very object that follows ``folded`` in the log
        (nothing else was appended in between); otherwise the next
        :meth:`_refold` reads it from the log as usual. Either way the result
        equals a full fold: the change is the one the event's payload encodes.
        """
        if self._fold is not folded:
            return
        try:
            events = self._session.events
            if len(events) != folded.end + 1 or events[folded.end] is not event:
                return
            self._fold = apply_schedule_change(folded, change)
        except Exception:  # any doubt leaves the fold to the next refold
            self._log.debug("own change not folded directly", exc_info=True)

    # --- delivery ------------------------------------------------------------------------

    def _deliver_after_preflight(self, txn: _Txn, ok: bool) -> None:
        covered, self._drive_covered = self._drive_covered, False
        if covered:  # a drive asked for meanwhile still runs after this one, however it ends
            txn.recompute = True
        if not ok:
            self._log.info(
                "delivery preflight for agent %r failed; waiting for activity", self._agent.id
            )
            txn.outcome = "preflight_failed"
            return self._finish()
        if self._faulted is not None or not self._is_live():
            return self._finish()
        if self._nothing_to_deliver(txn, self._plan()):
            return self._finish()
        self._cancel_timer()
        release: Callable[[], None] | None = None
        dispatched = False
        with self._gate.passage() as admitted:  # teardown waits for a delivery under way
            if admitted:
                release = self._agent.reserve_turn_admission()
                if release is not None:
                    dispatched = self._dispatch_reserved(txn, release)
        if admitted and release is None:
            self._await_idle()
            txn.outcome = "agent_busy"
        if dispatched:
            self._barrier(txn)
        else:
            self._finish()

    def _plan(self) -> _Plan:
        """Refold and decide at one fresh clock sample.

        A corrupt log faults the owner; an unreadable log, a decision that
        raises and an :class:`Undecidable` one are logged. All three return
        :data:`_NO_DECISION`, which arms nothing. A clock sample that is not an
        ``int`` arms a retry (:data:`BAD_CLOCK_RETRY_MS`). A clock that raises is
        not caught here: it is an unexpected error, contained by ``on_receive``.
        """
        try:
            folded = self._refold()
        except ScheduleLogError:
            self._fault("corrupt schedule log")
            self._log.warning(
                "schedule log of session %r is corrupt; delivery stopped", self._session.id
            )
            return _NO_DECISION
        except UnreadableLogError:
            self._log.warning(
                "schedule log of session %r could not be read; waiting for activity",
                self._session.id,
            )
            return _NO_DECISION
        now = self._host.clock()
        if isinstance(now, bool) or not isinstance(now, int):
            return self._retry_after_bad_clock(folded, now)
        self._bad_clock = False
        self._decision_ms = now
        try:
            plan = plan_delivery(folded, now)
        except Exception:
            self._log.warning(
                "the delivery decision for agent %r raised; taken as no decision",
                self._agent.id,
                exc_info=True,
            )
            return _NO_DECISION
        if isinstance(plan, Undecidable):
            self._log.warning(
                "no delivery decision for agent %r: %s; taken as no decision",
                self._agent.id,
                plan.reason,
            )
            return _NO_DECISION
        return plan

    def _retry_after_bad_clock(self, folded: FoldedSchedules, now: object) -> _Plan:
        """A clock sample that is no reading: decide nothing now, again in a second.

        Nothing can be due or not due at it; the retry keeps delivery going
        once the clock is good again, with no other activity needed. Logged
        once until a good sample.
        """
        earliest = folded.earliest()
        if earliest is None:
            return None  # nothing active, whatever the time
        if not self._bad_clock:
            self._bad_clock = True
            self._log.warning(
                "the clock returned a %s, not epoch milliseconds; agent %r decides again in %d ms",
                type(now).__name__,
                self._agent.id,
                BAD_CLOCK_RETRY_MS,
            )
        return WaitFor(earliest, BAD_CLOCK_RETRY_MS)

    def _nothing_to_deliver(self, txn: _Txn, plan: _Plan) -> bool:
        """Act on a ``plan`` that delivers nothing; ``False`` when it delivers.

        Nothing active cancels the timer, nothing due yet arms it, no decision
        leaves it alone (:meth:`_plan` logged why).
        """
        if plan is None:
            self._cancel_timer()
            txn.outcome = "nothing_active"
        elif isinstance(plan, WaitFor):
            self._arm(plan)
            txn.outcome = "not_due"
        elif not isinstance(plan, _NoDecision):
            return False
        return True

    def _dispatch_reserved(self, txn: _Txn, release: Callable[[], None]) -> bool:
        """Inside the reservation: re-check, decide again, follow up, append the dispatch(es).

        ``True`` when at least one dispatch was appended (a barrier follows).
        """
        try:
            if self._gate.closed or not self._is_live():  # a host callback may have disposed
                return False
            plan = self._plan()  # batch membership is decided here, inside the reservation
            if self._nothing_to_deliver(txn, plan):
                return False
            assert isinstance(plan, DeliverNow | DeliverBatch)
            if isinstance(plan, DeliverNow):
                return self._deliver_one(txn, plan)
            return self._deliver_batch(txn, plan)
        finally:
            try:
                release()
            except Exception:
                self._log.warning("turn-admission release of agent %r failed", self._agent.id)

    def _deliver_one(self, txn: _Txn, plan: DeliverNow) -> bool:
        """One due one-shot: its follow-up, then its dispatch."""
        record = plan.record
        try:
            delivery = reminder_delivery(plan)
            self._agent.followup(UserMessage((TextBlock(delivery.framing),), dict(REMINDER_SOURCE)))
        except Exception:
            self._log.warning(
                "follow-up of %r to agent %r failed; it stays active", record.id, self._agent.id
            )
            txn.outcome = "followup_failed"
            return False
        try:
            self._session.append(SCHEDULE_CHANGE_TYPE, delivery.dispatches[0].to_json())
        except Exception:
            self._fault("dispatch append failed")
            self._log.error(
                "dispatch of %r could not be appended after its follow-up; delivery stopped "
                "for agent %r so the reminder is never repeated",
                record.id,
                self._agent.id,
            )
            txn.outcome = "dispatch_failed"
            self._observer.delivered(txn.token, plan, self._decision_ms, 0)
            return False
        txn.dispatched = (record.id,)
        txn.outcome = "delivered"
        self._deliveries += 1
        self._observer.delivered(txn.token, plan, self._decision_ms, 1)
        return True

    def _deliver_batch(self, txn: _Txn, plan: DeliverBatch) -> bool:
        """Every due repeating record: one follow-up for the batch, then a dispatch per member.

        A dispatch append that raises faults the owner for good: the message is
        queued and the dispatches before it stand, so nothing is repeated here.
        """
        ids = tuple(member.record.id for member in plan.members)
        try:
            delivery = reminder_delivery(plan)
            self._agent.followup(UserMessage((TextBlock(delivery.framing),), dict(REMINDER_SOURCE)))
        except Exception:
            self._log.warning(
                "follow-up of the batch %s to agent %r failed; they stay active",
                ", ".join(repr(schedule_id) for schedule_id in ids),
                self._agent.id,
            )
            txn.outcome = "followup_failed"
            return False
        appended = 0
        for schedule_id, dispatch in zip(ids, delivery.dispatches, strict=True):
            try:
                self._session.append(SCHEDULE_CHANGE_TYPE, dispatch.to_json())
            except Exception:
                self._fault("dispatch append failed")
                self._log.error(
                    "dispatch %d of %d in a batch (%r) could not be appended after its "
                    "follow-up; the %d before it stand; delivery stopped for agent %r so the "
                    "batch is never repeated",
                    appended + 1,
                    len(ids),
                    schedule_id,
                    appended,
                    self._agent.id,
                )
                break
            appended += 1
            self._deliveries += 1
        txn.dispatched = ids[:appended]
        txn.outcome = "delivered" if appended == len(ids) else "dispatch_failed"
        self._observer.delivered(txn.token, plan, self._decision_ms, appended)
        return appended > 0

    # --- queue and transactions ------------------------------------------------------------

    def _admit(self, request: ToolRequest, kind: TxnKind, schedule_id: str | None = None) -> None:
        token = self._observer.transaction_started(
            kind, self._agent.id, self._session.id, request.reply
        )
        txn = _Txn(next(self._txn_ids), kind, request, schedule_id=schedule_id, token=token)
        if self._gate.closed or not self._is_live():
            self._answer(txn, self._refusal())
            self._observe_end(txn)
            return
        self._queue.append(txn)
        self._pump()

    def _request_drive(self) -> None:
        """Queue the one drive, unless a delivery still waiting for its preflight covers it.

        Such a delivery reads the log and the clock only once its preflight
        settled, after this request, so a second drive behind it could decide
        nothing the first does not. Should the delivery end without its
        dispatch barrier settling (a failed preflight, follow-up or barrier, or
        nothing decided), the covered request drives once it finished
        (:meth:`_deliver_after_preflight`).
        """
        if self._inline:  # a delivery never runs off the actor: the actor drives
            self._post(RequestDrive("recompute"))
            return
        if self._gate.closed or self._faulted is not None:
            return
        txn = self._txn
        if txn is not None and txn.kind == "deliver" and txn.phase == "preflight":
            self._drive_covered = True
            return
        if not any(isinstance(work, _Drive) for work in self._queue):
            self._queue.append(_DRIVE)
        self._pump()

    def _pump(self) -> None:
        if self._gate.closed:
            self._refuse_queued()
            return
        while self._txn is None and self._queue:
            work = self._queue.popleft()
            if isinstance(work, _Drive):
                if self._faulted is not None or not self._is_live():
                    continue
                token = self._observer.transaction_started(
                    "deliver", self._agent.id, self._session.id, None
                )
                txn = _Txn(next(self._txn_ids), "deliver", None, token=token)
            elif work.request is not None and work.request.reply.cancelled():
                work.outcome = "cancelled"  # its caller gave up before it started: no flush
                self._observe_end(work)
                continue
            else:
                txn = work
            self._txn = txn
            self._flush(txn, PreflightSettled)

    def _barrier(self, txn: _Txn) -> None:
        txn.phase = "barrier"
        self._flush(txn, BarrierSettled)

    def _flush(self, txn: _Txn, settled: type[PreflightSettled] | type[BarrierSettled]) -> None:
        """Ask the host for a durability barrier; its outcome arrives as a message.

        A flush settled already is handled as a step of the current message
        (see :meth:`on_receive`), not posted.
        """
        try:
            future = self._sessions.flush(self._session)
        except Exception:
            self._log.warning("flush of session %r raised", self._session.id)
            self._steps.append(settled(txn.id, False))
            return
        if future.done():
            self._steps.append(settled(txn.id, resolved_true(future)))
            return
        post = self._post
        txn_id = txn.id
        inline = settled is BarrierSettled and txn.kind != "deliver"  # see "Inline barrier"
        offer = self.offer if inline else None

        def on_done(done: Future[bool]) -> None:
            step = settled(txn_id, resolved_true(done))
            if offer is None or not offer(step):  # type: ignore[arg-type]
                post(step)

        future.add_done_callback(on_done)
        if not future.done():  # a settled flush has posted its outcome already
            self._arm_deadline(txn)

    def _arm_deadline(self, txn: _Txn) -> None:
        """Bound the flush just requested: after ``flush_timeout_ms`` it counts as failed.

        The step records its deadline on the monotonic clock the timers run on.
        One timer serves every step: it is armed when none is, never cancelled
        when a step settles, and when it fires (:meth:`handle_FlushTimedOut`)
        it fails the step in flight if that step's deadline passed, else
        re-arms for what is left of it. So a step that settles costs no timer.
        """
        timeout = self._host.flush_timeout_ms
        if timeout is None:
            return
        txn.deadline_ms = self._host.monotonic() + timeout
        if self._deadline_timer is None:
            self._start_deadline_timer(txn, timeout)

    def _start_deadline_timer(self, txn: _Txn, delay_ms: int) -> None:
        timed_out = FlushTimedOut(txn.id, txn.phase)
        post = self._post
        try:
            self._deadline_timer = self._timers.call_later(delay_ms, lambda: post(timed_out))
        except Exception:
            self._log.warning(
                "the flush timeout of session %r could not be armed", self._session.id
            )

    def _finish(self) -> None:
        txn = self._txn
        self._txn = None
        if txn is not None:
            _cancel_deadline(txn)
            self._observe_end(txn)
        if self._disposing:
            self.stop()
        elif txn is not None and txn.recompute:
            self._request_drive()  # pumps
        else:
            self._pump()

    def _answer(self, txn: _Txn, value: ToolError | dict[str, object]) -> None:
        if txn.request is not None:
            if txn.answer is None:  # the first answer is the one the caller got
                txn.answer = value
            self._answers.append((txn.request.reply, value))

    def _send_answers(self) -> None:
        """Send the answers of the message just handled, in the order they were given."""
        answers = self._answers
        while answers:
            reply, value = answers.popleft()
            _reply(reply, value)

    def _observe_end(self, txn: _Txn) -> None:
        """Report that ``txn`` finished (once: its token is dropped)."""
        token, txn.token = txn.token, None
        self._observer.transaction_finished(
            token, txn.outcome, txn.answer, txn.schedule_id, txn.dispatched
        )

    def _abandon(self, txn: _Txn) -> None:
        """Answer a transaction the stopping owner will not finish, and report it finished.

        A create or delete waiting for its barrier has appended: it answers
        ``persistence_uncertain`` with its id; any other tool call is refused
        (:meth:`_refusal`).
        """
        if txn.phase == "barrier" and txn.kind in ("create", "delete"):
            operation: Literal["create", "delete"] = "create" if txn.kind == "create" else "delete"
            self._answer(txn, persistence_uncertain(operation, appended=True, id=txn.schedule_id))
        else:
            self._answer(txn, self._refusal())
        self._observe_end(txn)

    def _refusal(self) -> ToolError:
        """``internal_error`` for a call refused by teardown or liveness: it appended nothing.

        Its message names the first cause: ``shutting_down`` (Schedule is being
        disposed) or ``not_live`` (the agent was disposed or is no longer a live root).
        """
        cause = self._gate.cause
        return internal_error(cause if cause is not None else "not_live")

    def _refuse_queued(self) -> None:
        """Answer every queued tool call with :meth:`_refusal` (teardown began)."""
        while self._queue:
            work = self._queue.popleft()
            if not isinstance(work, _Drive):
                self._answer(work, self._refusal())
                self._observe_end(work)

    # --- fold, timer, idle wait ------------------------------------------------------------

    def _refold(self) -> FoldedSchedules:
        """Fold only what the log gained since the last fold (results equal a full refold).

        The first fold (and the first after a restart) starts from the session's
        schedule checkpoint when it offers a usable one (see
        :class:`~actors._contract.SessionWithCheckpoint`), else from the start
        of its own stream.
        """
        try:
            events = self._session.events
            length = len(events)
        except Exception:
            raise UnreadableLogError from None
        previous = self._fold
        if previous is None or previous.end > length:
            previous = offered_checkpoint(self._session, length, self._log)
        if previous is not None:
            folded = continue_fold(previous, events)
        else:
            folded = fold_schedule_events(events, self._seed)
        self._fold = folded
        return folded

    def _arm(self, plan: WaitFor) -> None:
        """Arm the one timer for ``plan``, decided from the current fold."""
        self._arm_timer(plan.delay_ms, TimerFired)
        self._timer_target = plan.record.target_ms
        self._decided = self._fold

    def _cancel_timer(self) -> None:
        """Cancel the armed timer and forget what it was decided from."""
        super()._cancel_timer()
        self._timer_target = None
        self._decided = None

    def _await_idle(self, idle: Future[None] | None = None) -> None:
        """Drive again (:class:`AgentIdle`) once idle; ``idle`` is the agent's future, if taken."""
        if self._waiting_for_idle:
            return
        self._waiting_for_idle = True
        self._idle_generation += 1
        generation = self._idle_generation
        post = self._post
        if idle is None:
            idle = self._agent.when_idle()
        idle.add_done_callback(lambda _: post(AgentIdle(generation)))

    def _abandon_idle_wait(self) -> None:
        self._waiting_for_idle = False
        self._idle_generation += 1

    # --- liveness, faults, status ----------------------------------------------------------

    def _is_live(self) -> bool:
        agent = self._agent
        # ``in`` (not a scan): a host's roots() may answer membership in O(1).
        return self._agents.get(agent.id) is agent and agent in self._agents.roots()

    def _fault(self, reason: str) -> None:
        if self._faulted is None:
            self._faulted = reason
        self._cancel_timer()
        self._abandon_idle_wait()

    def _contain(self, message: Any, error: Exception) -> None:
        """An unexpected exception escaped a handler: stop delivery, answer the tool in flight.

        Only a running owner is handed to its supervisor: a permanent fault
        stays, and a restart already pending is not asked for twice.
        """
        self._contained += 1
        kind = type(message).__name__
        agent_id = self._agent.id
        txn = self._txn
        self._observer.contained_failure(txn.token if txn is not None else None, kind, error)
        if self._faulted is not None or self._gate.closed:
            self._log.debug("schedule owner of agent %r failed again", agent_id, exc_info=True)
        elif self._supervisor is None:
            self._log.exception(
                "schedule owner of agent %r failed on %s; delivery stopped, tools keep answering",
                agent_id,
                kind,
            )
            self._fault("unexpected error")
        else:
            self._fault("unexpected error")
            delay = self._ask_supervisor()
            if delay is not None:
                self._restart_pending = True
                self._log.warning(
                    "schedule owner of agent %r failed on %s; delivery paused, restart in %d ms",
                    agent_id,
                    kind,
                    delay,
                    exc_info=True,
                )
            else:
                self._faulted = "unexpected error; not restarted"
                self._log.warning(
                    "schedule owner of agent %r failed on %s; delivery stopped, no restart",
                    agent_id,
                    kind,
                    exc_info=True,
                )
        txn = self._txn
        if txn is not None:
            txn.outcome = "failed"
            self._answer(txn, internal_error())
            self._finish()
        elif self._disposing:
            self.stop()

    def _publish(self, state: OwnerState | None = None) -> None:
        if state is None:
            if self._disposing or self._gate.closed:
                state = "disposing"
            elif self._restart_pending:
                state = "restarting"
            elif self._faulted is not None:
                state = "faulted"
            else:
                state = "running"
        queue = self._queue
        self._status.publish(
            OwnerStatus(
                agent_id=self._agent.id,
                state=state,
                fault=self._faulted,
                active=len(self._fold.active) if self._fold is not None else None,
                timer_delay_ms=self._timer_delay,
                waiting_for_idle=self._waiting_for_idle,
                queued=sum(1 for work in queue if not isinstance(work, _Drive)) if queue else 0,
                deliveries=self._deliveries,
                contained_failures=self._contained,
                restarts=self._restarts,
                busy=self._txn is not None or bool(queue),
            )
        )


_OPERATIONS: dict[TxnKind, Operation] = {
    "create": "create",
    "list": "list",
    "delete": "delete",
    "deliver": "dispatch",
}
"""The operation a failed flush of each transaction kind is reported under."""


def _same_schedules(folded: FoldedSchedules, decided: FoldedSchedules) -> bool:
    """Whether two folds of one log hold the same records (no change folded in between)."""
    return folded is decided or (
        len(folded.seen_ids) == len(decided.seen_ids) and folded.active == decided.active
    )


def _cancel_deadline(txn: _Txn) -> None:
    """The step in flight settled: its flush no longer times out (the timer stays armed)."""
    txn.deadline_ms = None


def _reply(reply: Future[Any], value: ToolError | dict[str, object]) -> None:
    if not reply.done():  # else answered before, or cancelled by its caller
        settle(reply, value.to_json() if isinstance(value, ToolError) else value)


def _claim(reply: Future[Any]) -> bool:
    """Mark a tool call's reply running before its append: False if its caller cancelled it.

    From here on the caller's ``cancel()`` fails and the answer reaches it, so a
    change that is appended is never answered into a cancelled future.
    """
    try:
        return reply.set_running_or_notify_cancel()
    except RuntimeError:  # answered already (a refusal): the append goes on as before
        return True
