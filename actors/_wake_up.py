"""WakeUpActor: wakes cold sessions whose reminders came due, and lets them go again.

One per installed plugin whose host offers
:class:`~actors._contract.SessionActivation`. It knows nothing about stores:
it asks the host when the next cold session is due, sleeps until then on one
timer, and asks the host to activate the due sessions in due order, at most
:attr:`WakePolicy.max_concurrent` at a time. An activated session's root agent
is announced to the plugin like any other, so its owner delivers through the
ordinary transaction (preflight → reservation → follow-up → dispatch →
barrier). Which host may activate a session is the host's business (a lock or
a lease); a declined activation is retried only after a back-off.

Every step is a mailbox message (:mod:`messages._mailbox`). A *pass* (on start,
on the timer once a rescan, a due time or a back-off's end has come, when the
host says the index moved, on a clock jump, after an activation or a
passivation settled) does three things:

1. starts activations of due sessions while fewer than ``max_concurrent`` are
   in flight, skipping sessions in flight or backing off;
2. lets go of activated agents that stayed quiet for ``quiet_period_ms`` (agent
   idle, owner quiet, no reminder due within the quiet period) through
   :class:`~actors._contract.SessionPassivation`, when the host offers it; a
   session that another process wants (:class:`~actors._contract.SessionDemand`,
   asked at most every ``demand_poll_ms``) is let go the same way as soon as it
   is idle with nothing due within ``HANDOVER_MARGIN_MS`` (or the quiet period,
   when that is shorter), as if its quiet period had ended: a hand-over; a
   session that was not quiet is looked at again after its quiet period, but
   not sooner than ``QUIET_RECHECK_MS``;
3. arms the one timer for the earliest of: the next due target, the end of a
   back-off, the end of a quiet period, the next demand poll (while agents are
   managed), and ``rescan_ms`` (the index is re-read at least that often, so
   changes made by other processes are seen).

When the timer fires for a managed session only (a demand poll, the end of a
quiet period) before the next pass is due, step 2 runs alone and the timer is
armed again: the store is not scanned for it, and ``status().passes`` does not
count it.

A host that also offers :class:`~actors._contract.ColdDelivery` gets *cold
passes* instead of step 1: one pass at a time takes up to
:attr:`WakePolicy.cold_batch` due sessions and delivers to them without an
agent each (:class:`~messages._mailbox.ColdPassSettled` when it is done); only
the sessions a pass hands back (an owed turn, a person's queued message) are
activated, at most ``max_concurrent`` at a time. A session a pass could not
deliver (:attr:`~actors._contract.ColdPass.stuck`) is backed off like a failed
activation and skipped until then. A pass that delivered, handed back or
backed off anything is followed by another at once; one that did none of these
waits for the timer, an index change or a clock jump. A pass that holds
sessions whose commit failed (:attr:`~actors._contract.ColdPass.waiting`) is
followed by another on the timer (``rescan_ms`` at the latest) even when
nothing else is due.

An unexpected exception is contained like an owner's: the plugin supervises the
actor and restarts it in place after a back-off (:class:`~messages._mailbox.RestartWakeUp`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from actors._checkpoint import fold_session
from actors._contract import (
    Agent,
    ColdDelivery,
    ColdPass,
    HostContext,
    SessionActivation,
    SessionDemand,
    SessionPassivation,
)
from actors._supervised import OwnerSupervisor, SupervisedActor
from actors._wake_policy import (
    HANDOVER_MARGIN_MS,
    QUIET_RECHECK_MS,
    WakePolicy,
    WakeState,
    WakeUpBoard,
    WakeUpStatus,
)
from messages._delivery import MAX_TIMER_DELAY_MS
from messages._mailbox import (
    ActivationSettled,
    AgentActivity,
    AgentGone,
    ClockJumped,
    ColdPassSettled,
    DisposeWakeUp,
    DueIndexMoved,
    PassivationSettled,
    RestartWakeUp,
    StartWakeUp,
    WakeUpTimerFired,
)

__all__ = ["WakePolicy", "WakeUpActor", "WakeUpBoard", "WakeUpStatus"]


@dataclass(slots=True)
class _Activated:
    agent: Agent
    session_id: str
    quiet_until: int  # monotonic ms
    passivating: bool = False
    wanted: bool = False  # another process asked for the session at the last demand poll


@dataclass(slots=True)
class _Backoff:
    until: int  # monotonic ms
    failures: int = 1


@dataclass(slots=True)
class _Counters:
    activations: int = 0
    declined: int = 0
    failures: int = 0
    passivations: int = 0
    passes: int = 0
    contained: int = 0
    restarts: int = 0
    cold_passes: int = 0
    cold_deliveries: int = 0
    handovers: int = 0


class WakeUpActor(SupervisedActor):
    """Wakes cold sessions through the host's activation. See the module docstring.

    ``owner_quiet(agent)`` (from the plugin) tells whether the agent's owner has
    nothing in flight, queued or waiting for idleness. ``board`` is shared with
    the plugin: the agents this actor manages and its status.
    """

    def __init__(
        self,
        activation: SessionActivation,
        host: HostContext,
        policy: WakePolicy,
        owner_quiet: Callable[[Agent], bool],
        board: WakeUpBoard,
        *,
        supervisor: OwnerSupervisor | None = None,
    ) -> None:
        super().__init__()
        self._activation = activation
        self._passivation = activation if isinstance(activation, SessionPassivation) else None
        self._cold = activation if isinstance(activation, ColdDelivery) else None
        self._demand = activation if isinstance(activation, SessionDemand) else None
        self._demand_at: int | None = None  # monotonic ms of the next demand poll
        self._scan_at: int | None = None  # monotonic ms by which the next full pass is due
        self._demand_failing = False  # the last poll raised (warned once until one works)
        if host.timers is None:
            raise ValueError("HostContext.timers must be set (install_schedule supplies them)")
        self._host = host
        self._timers = host.timers
        self._policy = policy
        self._owner_quiet = owner_quiet
        self._board = board
        self._supervisor = supervisor
        self._log = host.logger.getChild("wake_up")
        self._counters = _Counters()
        self._in_flight: set[str] = set()
        self._passivating: set[str] = set()
        self._activated: dict[str, _Activated] = {}
        self._backoff: dict[str, _Backoff] = {}  # skipped until their back-off ends
        self._failed: dict[str, _Backoff] = {}  # failure counts, kept past a back-off's end
        self._moved_posted = False
        self._unsubscribe: Callable[[], None] | None = None
        self._disposing = False
        self._dispose_replies: list[Future[None]] = []
        self._restart_pending = False
        self._faulted = False
        self._cold_running = False
        self._cold_rested = False  # the last pass took nothing: wait for a reason to look again
        self._cold_waiting = False  # a pass holds deliveries whose commit failed: retry them
        self._needs_agent: deque[str] = deque()  # handed back by cold passes, to activate

    # --- mailbox -------------------------------------------------------------------------

    def on_stop(self) -> None:
        """Cancel the timer, stop listening, resolve every dispose request."""
        self._cancel_timer()
        self._stop_listening()
        self._disposing = True
        self._publish("disposed")
        for reply in self._dispose_replies:
            if not reply.done():
                reply.set_result(None)

    def handle_StartWakeUp(self, message: StartWakeUp) -> None:
        """Listen for index changes, then run the first pass."""
        if self._unsubscribe is None and not self._disposing:
            try:
                self._unsubscribe = self._activation.on_due_changed(self._due_changed)
            except Exception:
                self._log.warning("the host's due-change notifications could not be subscribed")
        self._pass()

    def handle_WakeUpTimerFired(self, message: WakeUpTimerFired) -> None:
        """The timer woke: run a pass, or only look at the managed sessions.

        Before the next full pass is due (the rescan, a due time, a back-off),
        the timer fired for a managed session (a demand poll, a quiet period
        ending): the store is not scanned for that.
        """
        if not self._timer_fired(message.generation):
            return
        scan_at = self._scan_at
        if scan_at is not None and self._host.monotonic() < scan_at:
            self._look_at_managed()
            return
        self._cold_rested = False
        self._pass()

    def handle_DueIndexMoved(self, message: DueIndexMoved) -> None:
        """A cold session's due time may have moved: run a pass."""
        self._moved_posted = False
        self._cold_rested = False
        self._pass()

    def handle_ClockJumped(self, message: ClockJumped) -> None:
        """The wall clock jumped: the timer was armed from a reading that no longer holds."""
        self._cold_rested = False
        self._pass()

    def handle_ActivationSettled(self, message: ActivationSettled) -> None:
        """An activation finished: manage its agent, or back off from the session."""
        self._in_flight.discard(message.session_id)
        now = self._host.monotonic()
        agent = message.agent
        if message.failed or agent is None:
            if message.failed:
                self._counters.failures += 1
            else:
                self._counters.declined += 1
            self._back_off(message.session_id, now)
        else:
            self._counters.activations += 1
            self._backoff.pop(message.session_id, None)
            self._failed.pop(message.session_id, None)
            if self._disposing or self._passivation is None:
                pass  # nobody will let it go: it stays live like any resumed session
            elif agent.id not in self._activated:
                self._activated[agent.id] = _Activated(
                    agent, message.session_id, now + self._quiet_ms()
                )
                self._board.add(agent.id)
        if self._finish_if_disposed():
            return
        self._pass()

    def handle_ColdPassSettled(self, message: ColdPassSettled) -> None:
        """A cold pass finished: queue what it handed back, then look again."""
        self._cold_running = False
        result = message.result
        if message.failed or not isinstance(result, ColdPass):
            self._counters.failures += 1
            self._cold_rested = True  # the timer tries again (rescan_ms at the latest)
            self._cold_waiting = True  # even if nothing is due: it may hold sessions
        else:
            self._counters.cold_passes += 1
            self._counters.cold_deliveries += result.delivered
            queued = set(self._needs_agent)
            for session_id in result.needs_agent:
                if session_id not in queued:
                    self._needs_agent.append(session_id)
                    queued.add(session_id)
            mono = self._host.monotonic()
            for session_id in result.stuck:  # skipped until its back-off ends
                self._back_off(session_id, mono)
            # took nothing it could deliver, hand back or newly skip: the timer looks
            # again (no loop over a session that keeps failing)
            self._cold_rested = (
                result.delivered == 0 and not result.needs_agent and not result.stuck
            )
            self._cold_waiting = result.waiting > 0
        if self._finish_if_disposed():
            return
        self._pass()

    def handle_AgentActivity(self, message: AgentActivity) -> None:
        """An activated agent reported a status: its quiet period starts again."""
        entry = self._activated.get(message.agent_id)
        if entry is not None and not entry.passivating:
            entry.quiet_until = self._host.monotonic() + self._quiet_ms()
            if self._timer is None and not self._disposing:
                self._pass()

    def handle_AgentGone(self, message: AgentGone) -> None:
        """An activated agent was disposed by someone else: forget it."""
        entry = self._activated.get(message.agent_id)
        if entry is not None and not entry.passivating:
            self._forget(message.agent_id)

    def handle_PassivationSettled(self, message: PassivationSettled) -> None:
        """The host let an agent go (or kept it): it is no longer managed here."""
        self._passivating.discard(message.agent_id)
        entry = self._activated.get(message.agent_id)
        self._forget(message.agent_id)
        if message.released:
            self._counters.passivations += 1
            if entry is not None and entry.wanted:
                self._counters.handovers += 1
        elif message.failed:
            self._counters.failures += 1
        if self._finish_if_disposed():
            return
        self._pass()

    def handle_RestartWakeUp(self, message: RestartWakeUp) -> None:
        """The supervisor's back-off ended: run again (what is in flight was kept)."""
        if self._disposing or not self._restart_pending:
            return
        self._restart_pending = False
        self._faulted = False
        self._counters.restarts += 1
        self._log.warning("the wake-up actor restarted after a contained failure")
        self._pass()

    def handle_DisposeWakeUp(self, message: DisposeWakeUp) -> None:
        """Stop waking sessions; finish once activations and passivations in flight settled."""
        self._dispose_replies.append(message.reply)
        if self._disposing:
            return
        self._disposing = True
        self._cancel_timer()
        self._stop_listening()
        self._finish_if_disposed()

    # --- the pass --------------------------------------------------------------------------

    def _pass(self) -> None:
        if self._disposing or self._restart_pending or self._faulted:
            return
        self._counters.passes += 1
        now = self._host.clock()
        mono = self._host.monotonic()
        for session_id in [s for s, b in self._backoff.items() if b.until <= mono]:
            del self._backoff[session_id]
        forget = self._policy.max_retry_ms  # a session failing again soon backs off longer
        for session_id in [s for s, b in self._failed.items() if b.until + forget <= mono]:
            del self._failed[session_id]
        if self._cold is None:
            self._start_activations(now)
        else:
            self._start_cold_pass(now)
            self._activate_handed_back()
        self._let_go_of_quiet(now, mono)
        self._arm_next(now, mono)

    def _look_at_managed(self) -> None:
        """Let quiet or wanted managed sessions go, and arm the timer; no scan of the store."""
        if self._disposing or self._restart_pending or self._faulted:
            return
        now = self._host.clock()
        mono = self._host.monotonic()
        self._let_go_of_quiet(now, mono)
        self._arm_next(now, mono, scan=False)

    def _start_activations(self, now: int) -> None:
        free = self._policy.max_concurrent - len(self._in_flight)
        if free <= 0:
            return  # the next settled activation runs a pass
        skipped = len(self._in_flight) + len(self._backoff)
        try:
            due = self._activation.due_sessions(now, free + min(skipped, 1024))
        except Exception:
            self._log.warning("the host could not list due sessions; trying again later")
            self._log.debug("due_sessions failure", exc_info=True)
            return
        for item in due:
            session_id = item.session_id
            if session_id in self._in_flight or session_id in self._backoff:
                continue
            self._activate(session_id)
            if len(self._in_flight) >= self._policy.max_concurrent:
                break

    def _start_cold_pass(self, now: int) -> None:
        """Ask for one cold pass unless one runs, the last found nothing, or nothing is due."""
        cold = self._cold
        if cold is None or self._cold_running or self._cold_rested:
            return
        try:
            due = self._activation.next_due()
        except Exception:
            self._log.warning("the host could not tell the next due session; trying again later")
            self._log.debug("next_due failure", exc_info=True)
            return
        if (due is None or due > now) and not self._cold_waiting:
            return
        skip = (
            self._in_flight
            | self._backoff.keys()
            | set(self._needs_agent)
            | {entry.session_id for entry in self._activated.values()}
        )
        self._cold_running = True
        post = self._post
        try:
            future = cold.deliver_due(now, self._policy.cold_batch, frozenset(skip))
        except Exception:
            self._log.warning("a cold-delivery pass could not be started", exc_info=True)
            post(ColdPassSettled(None, failed=True))
            return

        def settled(done: Future[ColdPass]) -> None:
            if done.cancelled() or done.exception() is not None:
                if not done.cancelled():
                    self._log.warning(
                        "a cold-delivery pass failed (%s); trying again later",
                        type(done.exception()).__name__,
                    )
                post(ColdPassSettled(None, failed=True))
            else:
                post(ColdPassSettled(done.result()))

        future.add_done_callback(settled)

    def _activate_handed_back(self) -> None:
        """Activate sessions cold passes handed back, while fewer than ``max_concurrent`` run."""
        while self._needs_agent and len(self._in_flight) < self._policy.max_concurrent:
            session_id = self._needs_agent.popleft()
            if session_id in self._in_flight or session_id in self._backoff:
                continue
            self._activate(session_id)

    def _activate(self, session_id: str) -> None:
        self._in_flight.add(session_id)
        post = self._post
        try:
            future = self._activation.activate(session_id)
        except Exception:
            self._log.warning("activating session %r raised", session_id, exc_info=True)
            post(ActivationSettled(session_id, None, failed=True))
            return

        def settled(done: Future[Agent | None]) -> None:
            if done.cancelled() or done.exception() is not None:
                post(ActivationSettled(session_id, None, failed=True))
            else:
                post(ActivationSettled(session_id, done.result()))

        future.add_done_callback(settled)
        self._log.debug("activating session %r", session_id)

    def _let_go_of_quiet(self, now: int, mono: int) -> None:
        passivation = self._passivation
        quiet = self._policy.quiet_period_ms
        if passivation is None or quiet is None:
            return
        self._poll_demand(mono)
        for agent_id, entry in list(self._activated.items()):
            if entry.passivating:
                continue
            if entry.wanted:  # handed over once idle, the quiet period aside
                if not self._is_quiet(entry.agent, now, min(quiet, HANDOVER_MARGIN_MS)):
                    if entry.quiet_until <= mono:  # the polls look again, not a timer at once
                        entry.quiet_until = mono + self._recheck_ms()
                    continue  # a turn in flight or something due soon
            elif entry.quiet_until > mono:
                continue
            elif not self._is_quiet(entry.agent, now, quiet):
                entry.quiet_until = mono + self._recheck_ms()
                continue
            entry.passivating = True
            self._passivating.add(agent_id)
            if entry.wanted:
                self._log.info("handing session %r over: it is wanted elsewhere", entry.session_id)
            self._passivate(passivation, entry.agent)

    def _poll_demand(self, mono: int) -> None:
        """Once ``demand_poll_ms`` passed, mark the managed sessions another process wants."""
        demand, poll = self._demand, self._policy.demand_poll_ms
        entries = [e for e in self._activated.values() if not e.passivating]
        if demand is None or poll is None or not entries:
            self._demand_at = None
            return
        if self._demand_at is not None and self._demand_at > mono:
            return
        self._demand_at = mono + poll
        try:
            wanted = demand.wanted({entry.session_id for entry in entries})
            wanted_ids = {session_id for session_id in wanted if isinstance(session_id, str)}
        except Exception:
            if not self._demand_failing:
                self._log.warning("the host could not tell which sessions are wanted elsewhere")
            self._log.debug("wanted failure", exc_info=True)
            self._demand_failing = True
            return
        self._demand_failing = False
        for entry in entries:
            entry.wanted = entry.session_id in wanted_ids

    def _is_quiet(self, agent: Agent, now: int, quiet: int) -> bool:
        """Agent idle, owner quiet, and no reminder of its session due within ``quiet``."""
        try:
            if not self._owner_quiet(agent):
                return False
            idle = agent.when_idle()
            settled = idle.done() and not idle.cancelled() and idle.exception() is None
            if not idle.done():
                idle.cancel()
            if not settled:
                return False
            folded = fold_session(agent.session)  # from its checkpoint, when it offers one
        except Exception:
            return False  # unreadable or corrupt: whoever owns it decides; ask again later
        earliest = folded.earliest()
        return earliest is None or earliest.target_ms - now > quiet

    def _passivate(self, passivation: SessionPassivation, agent: Agent) -> None:
        agent_id = agent.id
        post = self._post
        try:
            future = passivation.passivate(agent)
        except Exception:
            self._log.warning("letting agent %r go raised", agent_id, exc_info=True)
            post(PassivationSettled(agent_id, False, failed=True))
            return

        def settled(done: Future[bool]) -> None:
            failed = done.cancelled() or done.exception() is not None
            post(PassivationSettled(agent_id, not failed and done.result() is True, failed))

        future.add_done_callback(settled)
        self._log.debug("letting agent %r go", agent_id)

    def _arm_next(self, now: int, mono: int, *, scan: bool = True) -> None:
        """Arm the timer for the next full pass or managed session's moment, whichever is first.

        ``scan``: this pass scanned, so the next full pass's moment (the rescan,
        the next due time, a back-off's end) is computed afresh; otherwise the
        one computed at the last full pass stands.
        """
        if scan or self._scan_at is None:
            scans = [self._policy.rescan_ms]
            try:
                due = self._activation.next_due()
            except Exception:
                self._log.warning(
                    "the host could not tell the next due session; trying again later"
                )
                self._log.debug("next_due failure", exc_info=True)
                due = None
            if due is not None and due > now:
                scans.append(due - now)
            scans += [b.until - mono for b in self._backoff.values()]
            self._scan_at = mono + max(0, min(*scans, MAX_TIMER_DELAY_MS))
            self._log.debug("next due %s", due)
        delays = [self._scan_at - mono]
        delays += [e.quiet_until - mono for e in self._activated.values() if not e.passivating]
        if self._demand_at is not None:
            delays.append(self._demand_at - mono)
        delay = max(0, min(*delays, MAX_TIMER_DELAY_MS))
        self._log.debug("waking again in %d ms", delay)
        self._arm_timer(delay, WakeUpTimerFired)

    # --- helpers ------------------------------------------------------------------------------

    def _quiet_ms(self) -> int:
        quiet = self._policy.quiet_period_ms
        return quiet if quiet is not None else MAX_TIMER_DELAY_MS

    def _recheck_ms(self) -> int:
        """How long a managed session that was not quiet is left before it is looked at again.

        The quiet period, but at least :data:`QUIET_RECHECK_MS`: with a quiet
        period of 0, a session whose turn runs would otherwise be looked at on a
        timer of 0 ms, over and over, until the turn ends.
        """
        return max(self._quiet_ms(), QUIET_RECHECK_MS)

    def _back_off(self, session_id: str, mono: int) -> None:
        previous = self._failed.get(session_id)
        failures = 1 if previous is None else previous.failures + 1
        delay = min(self._policy.retry_ms << min(failures - 1, 30), self._policy.max_retry_ms)
        self._backoff[session_id] = self._failed[session_id] = _Backoff(mono + delay, failures)

    def _forget(self, agent_id: str) -> None:
        self._activated.pop(agent_id, None)
        self._board.discard(agent_id)

    def _due_changed(self) -> None:
        """The host's listener (any thread): post one coalesced :class:`DueIndexMoved`."""
        if self._moved_posted:
            return
        self._moved_posted = True
        self._post(DueIndexMoved())

    def _stop_listening(self) -> None:
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            try:
                unsubscribe()
            except Exception:
                self._log.warning("unsubscribing from due-change notifications failed")

    def _finish_if_disposed(self) -> bool:
        if (
            self._disposing
            and not self._in_flight
            and not self._passivating
            and not self._cold_running
        ):
            self.stop()
            return True
        return False

    def _contain(self, message: Any, error: Exception) -> None:
        """An unexpected exception escaped a handler: pause, and ask the supervisor."""
        self._counters.contained += 1
        self._cancel_timer()
        kind = type(message).__name__
        if self._disposing or self._restart_pending or self._faulted:
            self._log.debug("the wake-up actor failed again on %s", kind, exc_info=True)
            return
        delay = self._ask_supervisor()
        if delay is None:
            self._faulted = True
            self._log.error(
                "the wake-up actor failed on %s; cold sessions are no longer woken",
                kind,
                exc_info=True,
            )
        else:
            self._restart_pending = True
            self._log.warning(
                "the wake-up actor failed on %s; restart in %d ms", kind, delay, exc_info=True
            )

    def _publish(self, state: WakeState | None = None) -> None:
        if state is None:
            if self._disposing:
                state = "disposing"
            elif self._restart_pending:
                state = "restarting"
            elif self._faulted:
                state = "faulted"
            else:
                state = "running"
        c = self._counters
        status = WakeUpStatus(
            state=state,
            in_flight=len(self._in_flight),
            activated=len(self._activated),
            backing_off=len(self._backoff),
            next_wake_ms=self._timer_delay,
            activations=c.activations,
            declined=c.declined,
            failures=c.failures,
            passivations=c.passivations,
            passes=c.passes,
            contained_failures=c.contained,
            restarts=c.restarts,
            cold_passes=c.cold_passes,
            cold_deliveries=c.cold_deliveries,
            handovers=c.handovers,
        )
        self._board.publish(status)
