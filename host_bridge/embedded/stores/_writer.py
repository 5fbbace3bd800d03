"""The write-behind component: one queue, one writer thread, group commit, fencing.

Each round the writer takes everything queued, for all sessions, has the
:class:`~host_bridge.embedded.stores._recorder.Recorder` write it in one
transaction and resolves every flush the commit covers. A whole-store failure
keeps every row queued and fails that round's flushes (:class:`StoreWriteError`);
rows that can never be written make the round bisect by session, and the
session at fault is fenced (:class:`SessionLeaseError`); a session whose
ownership the recorder finds gone is lost (its flushes resolve ``False``).
The projection (the due index) is handed in and told after ``COMMIT``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any, Literal

from actors._futures import failed, resolved, settling_many
from host_bridge.embedded.stores._due import ReadSession
from host_bridge.embedded.stores._errors import (
    SessionLeaseError,
    StoreClosedError,
    StoreError,
    StoreWriteError,
)
from host_bridge.embedded.stores._recorder import Plan, Projection, Recorder, SideWrite
from host_bridge.embedded.stores._rows import (
    EventRow,
    Loss,
    Op,
    Outcome,
    Waiter,
    WriteRound,
    by_session,
    settle_all,
    show_id,
)

__all__ = ["AUTO_WRITE_BYTES", "AUTO_WRITE_ROWS", "CLOSE_TIMEOUT", "WriteBehind", "commit_failed"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

CLOSE_TIMEOUT = 30.0
"""Seconds a store's ``close`` waits for its last write by default."""

AUTO_WRITE_ROWS = 4096
"""Queued rows that make the writer commit even when no flush is waiting."""

AUTO_WRITE_BYTES = 32 * 1024 * 1024
"""Queued payload bytes that make the writer commit even when no flush is waiting."""

_Attempt = Literal["ok", "conflict", "failed"]


class WriteBehind:
    """The queue, writer thread, flush futures and ownership bookkeeping of one store.

    ``fault_hook`` is a test seam called inside every write transaction of
    session rows just before ``COMMIT``; what it raises fails the attempt like
    a failed commit. Done-callbacks of flush futures run on the writer thread:
    they may append or request a flush but must not wait for one. While a
    round settles more than one flush, :func:`actors._futures.settles_many`
    is true there, so callbacks hand longer work to their own threads.
    """

    def __init__(
        self,
        recorder: Recorder,
        projection: Projection[Any],
        *,
        fault_hook: Callable[[], None] | None = None,
        thread_name: str = "dsh-store-writer",
    ) -> None:
        """Own ``recorder`` and tell ``projection``; call :meth:`start` once it can write."""
        self._recorder = recorder
        self._projection = projection
        self._fault_hook = fault_hook
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: list[Op] = []
        self._queued_bytes = 0
        self._unsynced: Counter[str] = Counter()
        self._next_seq: dict[str, int] = {}
        self._forget_when_synced: set[str] = set()
        self._waiters: dict[str | None, Waiter] = {}  # one per session: later requests share it
        self._side: list[SideWrite] = []
        self._side_blocked = False  # the last side write failed: wait for the next round
        self._side_unsynced = 0
        self._closed = False
        self._close_deadline: float | None = None  # monotonic; set by start_closing()
        self._close_wait = 0.0
        self._in_flight: list[Waiter] = []
        self._writer_stopped = False
        self._auto_write_blocked = False
        self._final_error: StoreWriteError | None = None
        self._commit_count = 0
        self._flush_requests = 0
        self._leases: dict[str, int] = {}  # session -> fencing epoch (0 on SQLite)
        self._lost: dict[str, Loss] = {}
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    # --- counters --------------------------------------------------------------------

    @property
    def commit_count(self) -> int:
        """How many durable write transactions were committed so far."""
        with self._lock:
            return self._commit_count

    @property
    def flush_requests(self) -> int:
        """How many flush requests were accepted so far."""
        with self._lock:
            return self._flush_requests

    @property
    def pending_rows(self) -> int:
        """Rows queued or being written that are not committed yet."""
        with self._lock:
            return sum(self._unsynced.values())

    @property
    def tracked_sessions(self) -> int:
        """Sessions whose next ``seq`` is kept in memory."""
        with self._lock:
            return len(self._next_seq)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        with self._lock:
            return self._closed

    @property
    def fault_hook(self) -> Callable[[], None] | None:
        """The test seam called just before each ``COMMIT`` of session rows (None: none)."""
        return self._fault_hook

    @fault_hook.setter
    def fault_hook(self, hook: Callable[[], None] | None) -> None:
        self._fault_hook = hook

    # --- ownership bookkeeping -------------------------------------------------------

    def held(self, session_id: str) -> bool:
        """Whether the session was taken here and not given back (lost or not)."""
        with self._lock:
            return session_id in self._leases

    def holds(self, session_id: str) -> bool:
        """Whether the session is held here and not lost."""
        with self._lock:
            return session_id in self._leases and session_id not in self._lost

    def loss(self, session_id: str) -> Loss | None:
        """Why the session was lost here, or None."""
        with self._lock:
            return self._lost.get(session_id)

    def check_not_lost(self, session_id: str) -> None:
        """Raise the refusal of a session this store lost."""
        with self._lock:
            self._raise_if_lost(session_id)

    def take(self, session_id: str, epoch: int) -> None:
        """Note that the session is now held here with ``epoch``; refuse a closed store."""
        with self._lock:
            self._check_open()
            self._leases[session_id] = epoch
            self._lost.pop(session_id, None)

    def check_can_take(self, session_id: str, owner: str) -> None:
        """Raise when the store is closed or already holds ``session_id``."""
        with self._lock:
            self._check_open()
            if session_id in self._leases:
                raise SessionLeaseError(
                    f"session {show_id(session_id)} is already held by this store",
                    session_id=session_id,
                    holder=owner,
                )

    def give_back(self, session_id: str) -> bool:
        """Stop holding the session; False when it was not held."""
        with self._lock:
            return self._leases.pop(session_id, None) is not None

    def lose_held(self, loss_of: Callable[[str], Loss]) -> None:
        """Lose every session held and not lost yet (``loss_of`` says why); logs each."""
        dropped: list[tuple[Loss, int]] = []
        outcomes: list[Outcome] = []
        with self._lock:
            for session_id in [s for s in self._leases if s not in self._lost]:
                loss = loss_of(session_id)
                dropped.append((loss, self._lose(loss, outcomes) or 0))
        settle_all(outcomes)
        for loss, rows in dropped:
            _log.error("%s (%d rows dropped)", loss.message, rows)

    def epochs(self, sessions: Iterable[str]) -> dict[str, int]:
        """The epochs of those ``sessions`` that are held."""
        with self._lock:
            return {s: self._leases[s] for s in sessions if s in self._leases}

    # --- queue -----------------------------------------------------------------------

    def append_state(self, session_id: str) -> tuple[int | None, bool]:
        """The session's next seq if known here, and whether it is held here.

        Raises for a closed store or a lost session.
        """
        with self._lock:
            self._check_open()
            self._raise_if_lost(session_id)
            return self._next_seq.get(session_id), session_id in self._leases

    def note_length(self, session_id: str, length: int) -> None:
        """A read found ``length`` stored events: the next seq, unless one is known."""
        with self._lock:
            self._next_seq.setdefault(session_id, length)

    def queue_new(self, session_id: str, ops: list[Op], next_seq: int) -> None:
        """Queue a new session's rows; refuse a session already known here."""
        with self._lock:
            self._check_open()
            if session_id in self._next_seq:
                raise StoreError(f"session {show_id(session_id)} already exists in the store")
            self._next_seq[session_id] = next_seq
            self._enqueue(ops)

    def queue_appends(self, session_id: str, stored: int, rows: list[EventRow]) -> None:
        """Queue consecutive rows of one session under one lock hold; check their seqs.

        ``stored`` is the session's stored length, used when no next seq is known here.
        """
        with self._lock:
            self._check_open()
            self._raise_if_lost(session_id)
            # (a concurrent forget() only drops an entry that equals the stored length)
            expected = self._next_seq.setdefault(session_id, stored)
            for offset, row in enumerate(rows):
                if row.seq != expected + offset:
                    raise StoreError(
                        f"event for session {show_id(session_id)} has seq {row.seq}, "
                        f"expected {expected + offset}"
                    )
            self._next_seq[session_id] = expected + len(rows)
            self._enqueue(list(rows))

    def queue_side(self, writes: list[SideWrite]) -> None:
        """Hand statements to the writer; it commits them soon, without waiting for a flush."""
        if not writes:
            return
        with self._wake:
            self._side.extend(writes)
            self._side_unsynced += len(writes)
            self._wake.notify()

    def forget(self, session_id: str) -> None:
        """Drop the session's next seq once its queued rows are committed."""
        with self._lock:
            if session_id in self._unsynced:
                self._forget_when_synced.add(session_id)
            else:
                self._next_seq.pop(session_id, None)

    def request_flush(self, session_id: str | None) -> Future[bool]:
        """A future resolved once the rows of ``session_id`` (None: all) queued now are durable.

        Requests for one session that the writer has not taken yet share one
        future: the round that takes it covers every row queued before either.
        """
        with self._lock:
            if self._closed or self._writer_stopped:
                return failed(self._closed_error())
            self._flush_requests += 1
            loss = None if session_id is None else self._lost.get(session_id)
            if loss is not None:
                outcome = loss.flush_outcome()
                return failed(outcome) if isinstance(outcome, BaseException) else resolved(outcome)
            if self._is_synced(session_id) and not self._needs_round(session_id):
                return resolved(True)
            waiting = self._waiters.get(session_id)
            if waiting is not None:
                return waiting.future
            future: Future[bool] = Future()
            future.set_running_or_notify_cancel()  # not cancellable: the writer owns its outcome
            self._waiters[session_id] = Waiter(session_id, future)
            self._wake.notify()
        return future

    # --- closing ---------------------------------------------------------------------

    def start_closing(self, timeout: float | None) -> None:
        """Bound the waits of a shutdown: they end ``timeout`` seconds from now (None: none)."""
        if timeout is None:
            return
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            if self._close_deadline is None or deadline < self._close_deadline:
                self._close_deadline = deadline
                self._close_wait = max(0.0, timeout)

    def time_left(self) -> float | None:
        """Seconds until the close deadline (0 once it passed); None without one."""
        with self._lock:
            deadline = self._close_deadline
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def close(self, timeout: float | None) -> None:
        """Write what is queued, stop the writer, close the recorder; raise what failed.

        Waits at most ``timeout`` seconds or until an earlier deadline; a
        writer still busy then is left running (see the stores' ``close``).
        """
        self.start_closing(timeout)
        with self._wake:
            first = not self._closed
            if first:
                final = self._recorder.closing(bool(self._leases))
                self._side.extend(final)
                self._side_unsynced += len(final)
            self._closed = True
            self._wake.notify_all()
        abandoned: StoreWriteError | None = None
        try:
            if threading.current_thread() is not self._thread:
                self._thread.join(self.time_left())
                if self._thread.is_alive() and first:
                    abandoned = self._stop_waiting()
        finally:
            self._recorder.close(not self._thread.is_alive())
        if first and abandoned is not None:
            raise abandoned
        if first and self._final_error is not None:
            raise self._final_error

    def check_open(self) -> None:
        """Raise :class:`StoreClosedError` once the store is closed."""
        with self._lock:
            self._check_open()

    # --- internals: queue ------------------------------------------------------------

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError(f"the session store {self._recorder.label} is closed")

    def _check_open(self) -> None:
        if self._closed or self._writer_stopped:
            raise self._closed_error()

    def _raise_if_lost(self, session_id: str) -> None:
        loss = self._lost.get(session_id)
        if loss is not None:
            raise loss.error()

    def _enqueue(self, ops: list[Op]) -> None:
        """Queue ops (lock held) and wake the writer when the queue is large."""
        self._queue.extend(ops)
        for op in ops:
            self._unsynced[op.session_id] += 1
            if isinstance(op, EventRow):
                self._queued_bytes += len(op.payload)
        if self._auto_write_due():
            self._wake.notify()

    def _auto_write_due(self) -> bool:
        return not self._auto_write_blocked and (
            len(self._queue) >= AUTO_WRITE_ROWS or self._queued_bytes >= AUTO_WRITE_BYTES
        )

    def _needs_round(self, session_id: str | None) -> bool:
        """Lock held: whether a flush must confirm ownership in a write round."""
        return (
            self._recorder.confirms_on_flush
            and session_id is not None
            and session_id in self._leases
        )

    def _is_synced(self, session_id: str | None) -> bool:
        """Lock held: nothing of ``session_id`` (or of anything, for None) is uncommitted."""
        if session_id is None:
            return not self._unsynced and not self._side_unsynced
        return session_id not in self._unsynced

    # --- internals: writer thread ----------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._wake:
                    while not (
                        self._closed
                        or self._waiters
                        or self._auto_write_due()
                        or (self._side and not self._side_blocked)
                    ):
                        self._wake.wait()
                    final = self._closed
                    batch: list[Op] = []
                    if final or self._waiters or self._auto_write_due():
                        batch, self._queue, self._queued_bytes = self._queue, [], 0
                    # (else only side writes are due: queued session rows wait for a flush)
                    waiters, self._waiters = list(self._waiters.values()), {}
                    side, self._side = self._side, []
                    self._in_flight = waiters
                    check = self._checks(waiters)
                result = self._write_round(batch, side, check)
                outcomes = self._settle(result, waiters)
                with settling_many(len(outcomes) > 1):  # callbacks then hand their work on
                    settle_all(outcomes)
                if final:
                    error = result.error
                    if error is not None:
                        self._final_error = StoreWriteError(
                            f"closing the session store could not write {len(result.retry)} "
                            f"unflushed rows ({error.category}); they are not durable",
                            category=error.category,
                        )
                    break
        except BaseException:  # pragma: no cover - a bug in the writer itself: log, then stop
            _log.exception("the session store writer stopped unexpectedly")
        finally:
            with self._lock:
                self._writer_stopped = True
                leftover, self._waiters = list(self._waiters.values()), {}
                self._leases.clear()
            settle_all(
                [(w.future, StoreClosedError("the session store writer stopped")) for w in leftover]
            )
            self._recorder.writer_stopped()

    def _checks(self, waiters: list[Waiter]) -> set[str]:
        """Lock held: the sessions whose ownership this round must confirm (leases only)."""
        if not self._recorder.confirms_on_flush:
            return set()
        return self._leases.keys() & ({w.session_id for w in waiters} - self._lost.keys())

    def _write_round(self, batch: list[Op], side: list[SideWrite], check: set[str]) -> WriteRound:
        """Write everything taken for this round; group commit, isolation on a row conflict."""
        result = WriteRound()
        if not (batch or check or side):
            return result
        outcome, groups = self._attempt(by_session(batch), check, result, side)
        if outcome == "conflict":
            # (a conflict comes from an INSERT, after the ownership check ran: its answers stand)
            self._isolate(groups, result)
        return result

    def _attempt(
        self,
        groups: list[list[Op]],
        check: set[str],
        result: WriteRound,
        writes: list[SideWrite] | None = None,
    ) -> tuple[_Attempt, list[list[Op]]]:
        """Commit ``groups`` (rows by session) and ``writes`` in one transaction; book it."""
        rows = [op for group in groups for op in group]
        writes = writes or []
        plans: list[Any] = []

        def stage(written: Sequence[Op], read: ReadSession) -> Plan:
            plan: Plan = self._projection.plan(written, read)
            if self._fault_hook is not None and written:
                self._fault_hook()
            plans.append(plan)
            return plan

        error, lost = self._recorder.write(rows, writes, check, stage, self.epochs)
        if writes or self._side_blocked:
            with self._lock:
                if error is None:
                    self._side_unsynced -= len(writes)
                    self._side_blocked = False
                elif writes:
                    self._side[:0] = writes
                    self._side_blocked = True
        if error is None and plans:
            self._projection.committed(plans[-1])
        result.lost.update(lost)
        groups = [group for group in groups if group[0].session_id not in result.lost]
        if error is None:
            result.committed.extend(op for group in groups for op in group)
            result.commits += 1 if groups else 0
            return "ok", groups
        if groups and self._recorder.is_row_conflict(error):
            result.conflict_category = self._recorder.category(error)
            return "conflict", groups
        rows = [op for group in groups for op in group]
        unconfirmed = check - result.lost.keys()
        if rows or unconfirmed:
            result.retry.extend(rows)
            result.unconfirmed |= unconfirmed
            result.error = commit_failed(error, len(rows), self._recorder.category(error))
        return "failed", groups

    def _isolate(self, groups: list[list[Op]], result: WriteRound) -> None:
        """Bisect ``groups`` (a set known to hold a conflict) until each conflict is one session.

        Healthy halves commit as they are found; a single session that still
        conflicts is lost. A whole-store failure on the way stops the search
        and keeps everything not yet committed queued.
        """
        suspects = [groups]
        while suspects:
            part = suspects.pop()
            if result.error is not None:
                result.retry.extend(op for group in part for op in group)
                continue
            if len(part) == 1:
                session_id = part[0][0].session_id
                result.lost[session_id] = Loss(
                    session_id,
                    "conflict",
                    f"session {show_id(session_id)} was fenced out: another writer stored rows "
                    f"this store was about to write ({result.conflict_category}); its unwritten "
                    "events were discarded and it accepts no more writes here",
                )
                continue
            middle = len(part) // 2
            first, second = part[:middle], part[middle:]
            outcome, first = self._attempt(first, set(), result, self._take_side())
            if outcome == "conflict":
                suspects.append(first)
            if result.error is not None:
                result.retry.extend(op for group in second for op in group)
            elif outcome == "ok":
                suspects.append(second)  # the conflict is in the other half
            else:
                outcome, second = self._attempt(second, set(), result, self._take_side())
                if outcome == "conflict":
                    suspects.append(second)

    def _take_side(self) -> list[SideWrite]:
        """The side writes put back by a failed attempt, for the next attempt of the round."""
        with self._lock:
            side, self._side = self._side, []
        return side

    def _settle(self, result: WriteRound, waiters: list[Waiter]) -> list[Outcome]:
        """Book one write round; returns the futures to settle (outside the lock)."""
        outcomes: list[Outcome] = []
        newly_lost: list[tuple[Loss, int]] = []
        with self._lock:
            for loss in result.lost.values():
                dropped = self._lose(loss, outcomes)
                if dropped is not None:
                    newly_lost.append((loss, dropped))
            self._commit_count += result.commits
            for op in result.committed:
                self._unsynced[op.session_id] -= 1
                if self._unsynced[op.session_id] <= 0:
                    del self._unsynced[op.session_id]
                    if op.session_id in self._forget_when_synced:
                        self._forget_when_synced.discard(op.session_id)
                        self._next_seq.pop(op.session_id, None)
            if result.retry:
                self._queue[:0] = result.retry
                self._queued_bytes += sum(
                    len(op.payload) for op in result.retry if isinstance(op, EventRow)
                )
                self._auto_write_blocked = True  # retry on the next flush, not in a loop
            else:
                self._auto_write_blocked = False
            failed = {op.session_id for op in result.retry}
            for waiter in waiters:
                outcomes.append((waiter.future, self._outcome(waiter.session_id, result, failed)))
            # Requests made during the write are covered too if their session is now clean
            # (unless its ownership must be confirmed by a round of its own).
            still_waiting: dict[str | None, Waiter] = {}
            for waiter in self._waiters.values():
                lost = None if waiter.session_id is None else self._lost.get(waiter.session_id)
                if lost is not None:
                    outcomes.append((waiter.future, lost.flush_outcome()))
                elif self._is_synced(waiter.session_id) and not self._needs_round(
                    waiter.session_id
                ):
                    outcomes.append((waiter.future, True))
                else:
                    still_waiting[waiter.session_id] = waiter
            self._waiters = still_waiting
        for loss, dropped in newly_lost:
            _log.error("%s (%d rows dropped)", loss.message, dropped)
        return outcomes

    def _outcome(
        self, session_id: str | None, result: WriteRound, failed: set[str]
    ) -> bool | BaseException:
        """Lock held: what a flush request that took part in ``result`` resolves to."""
        error = result.error
        if session_id is None:
            if error is not None and failed:
                return StoreWriteError(str(error), category=error.category)
            conflicts = sorted(s for s, loss in result.lost.items() if loss.kind == "conflict")
            if conflicts:
                return SessionLeaseError(
                    f"sessions {', '.join(show_id(s) for s in conflicts)} were fenced out; "
                    "their unwritten events were discarded"
                )
            return not result.lost
        loss = self._lost.get(session_id)
        if loss is not None:
            return loss.flush_outcome()
        if error is not None and (session_id in failed or session_id in result.unconfirmed):
            return StoreWriteError(str(error), category=error.category)
        return True

    def _lose(self, loss: Loss, outcomes: list[Outcome]) -> int | None:
        """Lock held: discard everything queued of a lost session; None if it was lost already.

        The flush waiting for its dropped rows joins ``outcomes`` (settle them after
        the lock) with the loss's outcome: should the session be taken again before
        the next round, that round must not answer for rows it never wrote.
        """
        session_id = loss.session_id
        if session_id in self._lost:
            return None
        self._lost[session_id] = loss
        waiter = self._waiters.pop(session_id, None)
        if waiter is not None:
            outcomes.append((waiter.future, loss.flush_outcome()))
        dropped = self._unsynced.pop(session_id, 0)
        kept = [op for op in self._queue if op.session_id != session_id]
        if len(kept) != len(self._queue):
            self._queued_bytes -= sum(
                len(op.payload)
                for op in self._queue
                if op.session_id == session_id and isinstance(op, EventRow)
            )
            self._queue = kept
        self._next_seq.pop(session_id, None)
        self._forget_when_synced.discard(session_id)
        return dropped

    def _stop_waiting(self) -> StoreWriteError:
        """The writer missed the close deadline: refuse all work, fail every pending flush."""
        with self._lock:
            self._writer_stopped = True
            rows = sum(self._unsynced.values())
            sessions = sorted(self._unsynced)
            futures = [w.future for w in (*self._in_flight, *self._waiters.values())]
            self._waiters = {}
            waited = self._close_wait
        which = ", ".join(show_id(s) for s in sessions[:5]) + (" …" if len(sessions) > 5 else "")
        error = StoreWriteError(
            f"closing the session store timed out after {waited:.3g} s: its writer did not "
            f"finish the last write (a stuck disk or database?); {rows} unflushed rows"
            + (f" of sessions {which}" if sessions else "")
            + " are not confirmed durable",
            category="CLOSE_TIMEOUT",
        )
        settle_all([(future, error) for future in futures if not future.done()])
        _log.error(
            "session store %s: %s; the writer thread is left running", self._recorder.label, error
        )
        return error


def commit_failed(error: BaseException, rows: int, category: str) -> StoreWriteError:
    """Log a failed write round (detail at debug level) and describe it without backend text."""
    if rows == 0:  # only ownership checks were in that round
        _log.error("session store lease check failed (%s)", category)
        _log.debug("lease check failure detail", exc_info=error)
        return StoreWriteError(
            f"could not confirm the session's lease in the session store ({category}); "
            "flush again to retry",
            category=category,
        )
    _log.error(
        "session store commit failed (%s); %d rows stay queued for the next attempt",
        category,
        rows,
    )
    _log.debug("commit failure detail", exc_info=error)
    return StoreWriteError(
        f"could not commit {rows} queued rows to the session store ({category}); "
        "they stay queued and the next flush retries",
        category=category,
    )
