"""Cold delivery for the embedded host: due reminders of many stored sessions, no agent each.

:class:`ColdActivation` is an :class:`~host_bridge.embedded.activation.EmbeddedActivation`
that also offers :class:`~host_bridge.protocols.ColdDelivery`: the wake-up actor
asks it for *passes* instead of activating due sessions one by one. A pass:

1. **claims** up to ``limit`` due sessions in one batch (the store's
   ``claim_due_sessions``: SQLite takes each session's lock, PostgreSQL locks the
   index rows ``FOR UPDATE SKIP LOCKED`` and takes the leases in one transaction);
2. **reads** each one's durable schedule state (``schedule_states``: its
   checkpoint and the tail of its log after it, not the whole log);
3. **decides** each at one fresh clock sample with the owner's rules
   (:func:`messages._delivery.plan_delivery`: a due one-shot alone, else one
   batch of due ``every`` and ``cron`` records; nothing early). A session with
   an unfinished turn or a person's queued message is handed back for a live
   agent (:attr:`ColdPass.needs_agent`), since those come first and may need tools;
4. **writes the inbox**: each delivery's ``inbox/queued`` entry and its
   ``dispatch`` changes are queued together and one flush covers every session
   of the pass, so they are durable together, many sessions in one commit;
5. **gives back** every session it has no turn to run for, after one flush
   covering them all;
6. **runs the turns** once that commit is durable, on a bounded pool
   (``turns``, say ``serve``'s notifier); each turn's start, reply and
   ``turn/completed`` are appended as an embedded agent writes them, and the
   sessions whose turns have ended are given back together after one flush,
   so a slow turn holds only its own session (the next pass, though, starts
   once every turn of this one has ended). Without ``turns`` the delivered
   sessions are handed back for a live agent, which runs the owed turn as
   after any restart.

A session is marked busy before it is taken, so a host that opens it here
(:meth:`~host_bridge.embedded.activation.EmbeddedActivation.opening`) waits
until the pass gives it back, never meets it half-delivered. A session the pass
took, found due and could not deliver (a log it cannot decide, a reminder it
cannot render or queue) is reported in :attr:`ColdPass.stuck` for the wake-up
actor to back off from.

What a crash can repeat is what it repeats on the live path: a turn killed
while it ran (its inbox entry has no completion) runs again at the next start.
A kill before the inbox commit loses the pass's decisions, so they are made
again; a kill after it leaves owed turns that the next start runs.
An inbox commit that fails keeps its sessions held, and each later pass tries
that flush again before it takes new work; their turns run once it succeeds.
Sessions whose rows could not be written when they were to be given back are
likewise kept and given back by a later pass. Between passes such a session is
not busy: a host opening it here is refused (the store holds it), not kept
waiting through a long outage.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import queue
import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from actors._contract import ColdPass, SessionEvent, TextBlock, UserMessage
from host_bridge.embedded.activation import INDEX_AUDIT_MS, ActivatedHost, EmbeddedActivation
from host_bridge.embedded.agents import MESSAGE_EVENT, Model, TurnInterrupted
from host_bridge.embedded.codec import PayloadError, encode_payload
from host_bridge.embedded.inbox import (
    INBOX_EVENT,
    TURN_COMPLETED_EVENT,
    completed_data,
    queued_data,
)
from host_bridge.embedded.stores import (
    SessionLeaseError,
    StoreError,
    index_problem,
    show_id,
)
from host_bridge.embedded.stores._due import SessionProjection
from messages._delivery import (
    DeliverBatch,
    DeliveredReminder,
    DeliverNow,
    ReminderDelivery,
    Undecidable,
    plan_delivery,
    reminder_delivery,
)
from messages._presentation import REMINDER_SOURCE
from messages._records import SCHEDULE_CHANGE_TYPE

__all__ = ["COLD_FLUSH_TIMEOUT_S", "ColdActivation", "ColdTurn", "ColdTurns"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

COLD_FLUSH_TIMEOUT_S = 30.0
"""How long a pass waits for its inbox commit before trying it again on the next pass."""


@dataclass(frozen=True, slots=True)
class ColdTurn:
    """One reminder turn of a cold delivery: what a :data:`ColdTurns` callable receives.

    ``message`` is the reminder message (its text is the framing the model reads),
    ``reminders`` the receipts of the reminders it presents, in dispatch order,
    ``inbox_seq`` the seq of its ``inbox/queued`` entry.
    """

    session_id: str
    message: UserMessage
    reminders: tuple[DeliveredReminder, ...]
    inbox_seq: int


ColdTurns = Callable[[ColdTurn], "str | None"]
"""Runs one cold reminder turn; returns the assistant reply to record (``None``: none).

Raising :class:`~host_bridge.embedded.agents.TurnInterrupted` cuts the turn: no
completion is recorded, so the next start runs it again. Any other exception
records the turn as failed (it is not run again), as for an embedded agent.
"""


@dataclass(frozen=True, slots=True)
class _Request:
    """The wake-up actor's ask: deliver what is due at ``now_ms`` in up to ``limit`` sessions."""

    now_ms: int
    limit: int
    skip: frozenset[str]


@dataclass(slots=True)
class _Delivery:
    """One session's delivery in a pass: its rows are queued, its turn not run yet."""

    session_id: str
    delivery: ReminderDelivery
    message: UserMessage
    inbox_seq: int
    next_seq: int  # the seq after the dispatches


@dataclass(slots=True)
class _Pass:
    """What a pass collected; every session in ``held`` is given back by its end."""

    held: dict[str, None] = field(default_factory=dict)  # an ordered set
    needs_agent: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    delivered: int = 0


class ColdActivation(EmbeddedActivation):
    """Activation plus cold delivery (see the module docstring).

    ``turns`` runs the reminder turns of cold deliveries (``None``: they are
    left to a live agent); ``turn_workers`` bounds the turns running at once.
    The other options are :class:`EmbeddedActivation`'s (``model`` runs the
    turns of the sessions that still get a live agent).
    """

    def __init__(
        self,
        host: ActivatedHost,
        *,
        turns: ColdTurns | None = None,
        turn_workers: int = 8,
        model: Model | None = None,
        workers: int = 8,
        accept: Callable[[str], bool] | None = None,
        audit_ms: int = INDEX_AUDIT_MS,
    ) -> None:
        super().__init__(host, model=model, workers=workers, accept=accept, audit_ms=audit_ms)
        self._turns = turns
        self._passes = ThreadPoolExecutor(1, thread_name_prefix="dsh-cold-pass")
        self._turn_pool = ThreadPoolExecutor(max(1, turn_workers), thread_name_prefix="dsh-turn")
        self._waiting: dict[str, _Delivery] = {}  # inbox commit failed: held, retried
        self._unreleased: dict[str, None] = {}  # rows not durable at give-back: held
        self._pass_lock = threading.Lock()  # one pass at a time (the wake-up actor's rule too)

    # --- ColdDelivery -------------------------------------------------------------------

    def deliver_due(self, now_ms: int, limit: int, skip: frozenset[str]) -> Future[ColdPass]:
        """Run one pass on the pass thread; see the module docstring."""
        future: Future[ColdPass] = Future()
        try:
            self._submit(self._pass, _Request(now_ms, limit, skip), future, self._passes)
        except RuntimeError as error:  # closed
            future.set_exception(error)
        return future

    def close(self) -> None:
        """Wait for the pass running, then close like :class:`EmbeddedActivation`.

        Sessions still held for a retry are left to the store's close (which writes
        what it can before its deadline).
        """
        self._passes.shutdown(wait=True)
        self._turn_pool.shutdown(wait=True)
        super().close()

    # --- a pass -------------------------------------------------------------------------

    def _pass(self, request: _Request) -> ColdPass:
        now_ms, limit, skip = request.now_ms, request.limit, request.skip
        with self._pass_lock:
            work = _Pass()
            claimed: list[str] = []
            try:
                self._retry_release()
                unsound = [s for s in self._audit(now_ms) if s not in skip]
                work.needs_agent += unsound
                retried = self._retry_waiting(work)
                claimed = self._claim(now_ms, limit, skip | set(unsound), work)
                deliveries = retried + self._decide(claimed, now_ms, work)
                turning = {d.session_id for d in deliveries} if self._turns else set()
                self._give_back(work, [s for s in work.held if s not in turning])
                self._run_turns(deliveries, work)
            finally:
                self._give_back(work, list(work.held))
            return ColdPass(
                claimed=len(claimed),
                delivered=work.delivered,
                # (one still held is not: once a later pass lets it go, it is due and
                # a claim hands it back)
                needs_agent=tuple(
                    s for s in dict.fromkeys(work.needs_agent) if s not in self._unreleased
                ),
                waiting=len(self._waiting) + len(self._unreleased),
                stuck=tuple(dict.fromkeys(work.stuck)),
            )

    def _claim(self, now_ms: int, limit: int, skip: Collection[str], work: _Pass) -> list[str]:
        """Take up to ``limit`` due sessions, each marked busy before it is taken."""
        if limit <= 0:
            return []
        marked: set[str] = set()

        def accept(session_id: str) -> bool:  # asked before taking: busy first, then locked
            if session_id in marked:
                return True
            if self._accept is not None and not self._accept(session_id):
                return False
            mine, _ = self._mark_busy([session_id])  # not one a host is opening here
            marked.update(mine)
            return bool(mine)

        taken: list[str] = []
        try:
            taken = self._store.claim_due_sessions(now_ms, limit, accept=accept, skip=skip)
        except BaseException:  # any the store could not give back are kept for a later pass
            self._unreleased.update(dict.fromkeys(s for s in marked if self._store.holds_lease(s)))
            raise
        finally:
            self._unmark_busy([s for s in marked if s not in set(taken)])
        work.held.update(dict.fromkeys(taken))
        for session_id in taken:
            _log.info("woke session %r (cold delivery)", session_id)
        return taken

    def _decide(self, claimed: Sequence[str], claimed_at: int, work: _Pass) -> list[_Delivery]:
        """Decide each claimed session at one fresh clock sample; queue the inbox rows."""
        if not claimed:
            return []
        states = self._store.schedule_states(claimed)
        now = self._host.clock()
        if isinstance(now, bool) or not isinstance(now, int):
            _log.warning("the clock gave a %s, not epoch ms; deciding nothing", type(now).__name__)
            return []
        queued: list[_Delivery] = []
        for session_id in claimed:
            state = states.get(session_id)
            if state is None or state.unfinished or state.pending:
                if state is None:
                    self._mend(
                        session_id, "the due index has a row for this session, which is not stored"
                    )
                else:  # a turn is owed or a person's message waits: a live agent comes first
                    work.needs_agent.append(session_id)
                continue
            delivery = self._delivery(session_id, state, now)
            if delivery is None:
                self._check_row(session_id, state, claimed_at)
                continue
            if delivery is _STUCK:
                work.stuck.append(session_id)
                continue
            try:
                queued.append(self._queue_inbox(session_id, state, delivery, now))
            except (StoreError, PayloadError) as error:
                _log.warning(
                    "session %s: the reminder's inbox entry could not be queued (%s); "
                    "it stays active",
                    show_id(session_id),
                    error,
                )
                work.stuck.append(session_id)
        return self._commit_inbox(queued)

    def _delivery(
        self, session_id: str, state: SessionProjection, now: int
    ) -> ReminderDelivery | _Stuck | None:
        """What is due in the session at ``now``; ``None``: nothing; ``_STUCK``: undecidable."""
        folded = state.folded
        if folded is None:
            return None  # a corrupt log: delivery is stopped in it, as an owner would
        plan = plan_delivery(folded, now)
        if isinstance(plan, Undecidable):
            _log.warning("session %s: %s", show_id(session_id), plan.reason)
            return _STUCK
        if not isinstance(plan, DeliverNow | DeliverBatch):
            return None
        try:
            return reminder_delivery(plan)
        except ValueError:
            _log.warning(
                "session %s: the reminder could not be rendered; it stays active",
                show_id(session_id),
            )
            return _STUCK

    def _queue_inbox(
        self, session_id: str, state: SessionProjection, delivery: ReminderDelivery, now: int
    ) -> _Delivery:
        """Queue the inbox entry and its dispatches as one unit (nothing queued on a refusal)."""
        message = UserMessage((TextBlock(delivery.framing),), dict(REMINDER_SOURCE))
        seq = state.next_seq
        data: list[tuple[str, Any]] = [(INBOX_EVENT, queued_data(message))]
        data += [(SCHEDULE_CHANGE_TYPE, change.to_json()) for change in delivery.dispatches]
        rows = _rows(seq, now, data)
        self._store.record_appends(session_id, rows)
        return _Delivery(session_id, delivery, message, seq, seq + len(rows))

    def _commit_inbox(self, queued: list[_Delivery]) -> list[_Delivery]:
        """One flush for every queued delivery (one commit); the ones now durable."""
        futures = [(d, self._store.flush(d.session_id)) for d in queued]
        wait([future for _, future in futures], COLD_FLUSH_TIMEOUT_S)  # one deadline for all
        durable: list[_Delivery] = []
        for delivery, future in futures:
            session_id = delivery.session_id
            try:
                ok = future.result(0)
            except SessionLeaseError:
                ok = False
            except (StoreError, TimeoutError) as error:
                _log.warning(
                    "session %s: the reminder's inbox commit failed (%s); trying again on the "
                    "next pass",
                    show_id(session_id),
                    error if isinstance(error, StoreError) else "timed out",
                )
                self._waiting[session_id] = delivery
                continue
            if ok:
                durable.append(delivery)
            else:
                _log.warning(
                    "session %s was lost to another host before its reminder was durable; "
                    "that host delivers it",
                    show_id(session_id),
                )
        return durable

    def _retry_waiting(self, work: _Pass) -> list[_Delivery]:
        """Flush again the deliveries whose inbox commit failed; the ones now durable.

        They are still held; each is marked busy and is the pass's again (one that a
        host is opening here stays waiting: the host is refused, as the store holds it).
        """
        if not self._waiting:
            return []
        mine, _ = self._mark_busy(list(self._waiting))
        retried = [self._waiting.pop(session_id) for session_id in mine]
        work.held.update(dict.fromkeys(mine))
        return self._commit_inbox(retried)

    def _retry_release(self) -> None:
        """Give back the sessions a failed write kept held at an earlier give-back.

        Each is marked busy first (one a host is opening here waits for a later pass).
        """
        if self._unreleased:
            mine, _ = self._mark_busy(list(self._unreleased))
            for session_id in mine:
                del self._unreleased[session_id]
            try:
                self._release(mine)
            finally:
                self._unmark_busy(mine)

    def _run_turns(self, deliveries: list[_Delivery], work: _Pass) -> None:
        """Run the delivered turns on the pool and queue their rows (or leave them owed)."""
        if not deliveries:
            return
        work.delivered += len(deliveries)
        turns = self._turns
        if turns is None:
            work.needs_agent += [d.session_id for d in deliveries]
            return
        ended: queue.SimpleQueue[tuple[_Delivery, Future[Any], bool]] = queue.SimpleQueue()

        def on_end(delivery: _Delivery, future: Future[Any], durable: bool = False) -> None:
            future.add_done_callback(lambda done: ended.put((delivery, done, durable)))

        submitted: list[tuple[_Delivery, Future[Any]]] = []
        recorded: set[str] = set()
        outstanding = 2 * len(deliveries)  # each turn ends, then its rows' flush does
        try:
            for delivery in deliveries:
                submitted.append((delivery, self._turn_pool.submit(self._turn, turns, delivery)))
                on_end(*submitted[-1])
            while outstanding:  # a turn ended: queue its rows; they are durable: give it back
                settled = [ended.get()]
                with contextlib.suppress(queue.Empty):
                    while True:
                        settled.append(ended.get_nowait())
                outstanding -= len(settled)
                durable: list[str] = []
                for delivery, future, flushed in settled:
                    if flushed:
                        durable.append(delivery.session_id)  # (or failed: kept at give-back)
                    else:
                        recorded.add(delivery.session_id)
                        self._record_turn(delivery, future.result())
                        on_end(delivery, self._store.flush(delivery.session_id), True)
                self._give_back(work, durable)  # those one commit covered, together
        except BaseException:  # no session goes back while its turn runs, or unrecorded
            wait([future for _, future in submitted])
            for delivery, future in submitted:
                done = not future.cancelled() and future.exception() is None
                if done and delivery.session_id not in recorded:
                    with contextlib.suppress(Exception):
                        self._record_turn(delivery, future.result())
            raise

    def _record_turn(self, delivery: _Delivery, rows: list[tuple[str, Any]]) -> None:
        """Queue a finished turn's rows (on a refusal the next start runs the turn again)."""
        try:
            self._store.record_appends(
                delivery.session_id, _rows(delivery.next_seq, self._host.clock(), rows)
            )
        except (StoreError, PayloadError) as error:
            _log.warning(
                "session %s: the reminder turn could not be recorded (%s); the next start "
                "runs it again",
                show_id(delivery.session_id),
                error,
            )

    def _turn(self, turns: ColdTurns, delivery: _Delivery) -> list[tuple[str, Any]]:
        """Run one turn; the ``(type, data)`` of the rows it records, as an embedded agent."""
        message = delivery.message
        start = {
            "role": "user",
            "content": message.text,
            "source": dict(message.source),
            "inbox": delivery.inbox_seq,
        }
        rows: list[tuple[str, Any]] = [(MESSAGE_EVENT, start)]
        turn = ColdTurn(
            delivery.session_id, message, delivery.delivery.reminders, delivery.inbox_seq
        )
        failed = False
        try:
            reply = turns(turn)
        except TurnInterrupted:
            _log.info(
                "the reminder turn of session %s was cut; the next start runs it again",
                show_id(delivery.session_id),
            )
            return rows
        except Exception:
            _log.exception("the reminder turn of session %s failed", show_id(delivery.session_id))
            failed = True
            reply = None
        if reply is not None:
            rows.append((MESSAGE_EVENT, {"role": "assistant", "content": reply}))
        rows.append((TURN_COMPLETED_EVENT, completed_data(delivery.inbox_seq, failed=failed)))
        return rows

    def _give_back(self, work: _Pass, session_ids: Sequence[str]) -> None:
        """Let ``session_ids`` go after one flush covering them; none is the pass's any more.

        Those left waiting for their inbox commit stay held (not busy) for the next pass.
        """
        ids = list(dict.fromkeys(session_ids))
        try:
            self._release([s for s in ids if s not in self._waiting])
        finally:
            for session_id in ids:
                work.held.pop(session_id, None)
            self._unmark_busy(ids)

    def _release(self, session_ids: list[str]) -> None:
        """Release held sessions; one whose rows are not durable stays held for a later pass."""
        if not session_ids:
            return
        try:
            kept = set(self._store.release_sessions(session_ids))
        except Exception as error:  # (the store closed under the pass)
            why = error if isinstance(error, StoreError) else type(error).__name__
            _log.warning("%d sessions are kept until a later pass: %s", len(session_ids), why)
            kept = set(session_ids)
        self._unreleased.update(dict.fromkeys(s for s in session_ids if s in kept))
        given = [s for s in session_ids if s not in kept]
        for session_id in given:
            self._store.forget(session_id)  # another host may write it next: reread its length
            _log.info("letting session %r go (cold delivery done)", session_id)

    # --- index rows ---------------------------------------------------------------------

    def _check_row(self, session_id: str, state: SessionProjection, claimed_at: int) -> None:
        """Nothing was due after all: mend the session's index row if it said otherwise."""
        truth = state.entry()
        if truth is not None and truth.due_ms <= claimed_at:
            return  # due by the claim's clock, not by the decision's: the row is right
        try:
            problem = index_problem(self._store.due_row(session_id), truth)
        except StoreError as error:
            _log.warning("session %s: %s", show_id(session_id), error)
            return
        if problem is not None:
            self._mend(session_id, problem)


class _Stuck(enum.Enum):
    """What :meth:`ColdActivation._delivery` returns for a session due but not deliverable."""

    STUCK = "stuck"


_STUCK = _Stuck.STUCK


def _rows(seq: int, now: int, data: Sequence[tuple[str, Any]]) -> list[tuple[SessionEvent, bytes]]:
    """Events ``seq, seq+1 …`` at ``now`` with their payload bytes (:class:`PayloadError`)."""
    return [
        (SessionEvent(type_, seq + index, now, value), encode_payload(value))
        for index, (type_, value) in enumerate(data)
    ]
