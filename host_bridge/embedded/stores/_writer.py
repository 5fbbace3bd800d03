"""The write-behind machinery both durable stores share: a queue, one writer, group commit.

Callers (one ``SessionActor`` per session) hand every committed event to
:meth:`EventStore.record_append`, which only queues it in memory.
:meth:`EventStore.flush` is the durability barrier: its future resolves
``True`` once every row queued for that session before the call is in a
committed transaction of the backend.

One writer thread owns the write connection. Each round it takes *everything*
queued, for all sessions, writes it in one transaction, commits once and then
resolves every flush request the commit covers, so many concurrent flushes cost
about one commit (group commit). It writes when a flush is waiting, when the
queue grows past :data:`AUTO_WRITE_ROWS` rows or :data:`AUTO_WRITE_BYTES`
bytes, and when the store closes.

A failed write is rolled back, so nothing is half-written. What happens next
depends on why it failed:

* a whole-store failure (disk full, database locked, I/O error, a lost
  connection): every row goes back to the front of the queue, nothing queued
  is dropped, the flush requests of that round fail with
  :class:`StoreWriteError` and the next flush retries;
* rows that can never be written (a key another writer already stored, e.g. a
  ``seq`` it took): the round is bisected by session, so every other session
  still commits (one transaction per healthy half), and the session whose rows
  conflict is *fenced*: its queued rows are discarded, its flushes fail with
  :class:`SessionLeaseError`, its later appends are refused, and this is
  logged once. A refused row never blocks the other sessions of the process.

A session whose ownership the backend finds gone is *lost*: its queued rows
are discarded and its flushes resolve ``False``.

A backend (:class:`~host_bridge.embedded.stores._sqlite.SqliteEventStore`,
:class:`~host_bridge.embedded.stores._postgres.PostgresEventStore`) supplies the
transaction (:meth:`EventStore._commit`), its error categories
(:meth:`EventStore._category`, :meth:`EventStore._is_row_conflict`: each
backend translates its driver's errors at this one point, so diagnostics name
the error's kind and never carry the driver's text), session ownership and the reads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any, Literal, Self

from host_bridge.embedded.stores._due import DueEntry, DueProjector, IndexPlan
from host_bridge.embedded.stores._errors import (
    SessionLeaseError,
    StoreClosedError,
    StoreError,
    StoreWriteError,
)
from host_bridge.embedded.stores._reads import SessionReads
from host_bridge.embedded.stores._rows import (
    INT64_MAX,
    CommitResult,
    EventRow,
    Loss,
    Op,
    Outcome,
    SessionRow,
    StoredSession,
    Waiter,
    WriteRound,
    by_session,
    check_id,
    decode_session,
    event_row,
    failed_future,
    settle_all,
    show_id,
)
from host_bridge.protocols import SessionEvent, SessionHeader

__all__ = [
    "AUTO_WRITE_BYTES",
    "AUTO_WRITE_ROWS",
    "CLOSE_TIMEOUT",
    "EventStore",
    "commit_failed",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

CLOSE_TIMEOUT = 30.0
"""Seconds :meth:`EventStore.close` waits for its last write by default."""

AUTO_WRITE_ROWS = 4096
"""Queued rows that make the writer commit even when no flush is waiting."""

AUTO_WRITE_BYTES = 32 * 1024 * 1024
"""Queued payload bytes that make the writer commit even when no flush is waiting."""


class EventStore(SessionReads[Any], ABC):
    """Durable session logs behind a write-behind queue; the embedded host's persistence listener.

    ``fault_hook`` is a test seam: when given, the writer thread calls it inside
    every write transaction of session rows, after the rows are written and
    just before ``COMMIT``. An exception it raises fails that attempt exactly
    like a failed commit (rolled back, rows kept queued); blocking in it pauses
    the writer.

    Sessions are owned by one store at a time: :meth:`acquire_session` takes
    one, :meth:`release_session` and :meth:`close` give it back.

    Done-callbacks of the futures returned by :meth:`flush` run on the writer
    thread and should be short. They may call back into the store (append,
    request a flush) but must not *wait* for a flush: that would block the writer.
    """

    def __init__(self, label: str, fault_hook: Callable[[], None] | None) -> None:
        """Set up the queue, waiters and counters; a backend opens its connections next.

        ``label`` names the store in messages; ``fault_hook`` is the test seam
        described in the class docstring. The backend starts the writer thread
        with :meth:`_start_writer` once it can write.
        """
        self._label = label  # how messages name the store
        self._fault_hook = fault_hook
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: list[Op] = []
        self._queued_bytes = 0
        self._unsynced: Counter[str] = Counter()
        self._next_seq: dict[str, int] = {}
        self._forget_when_synced: set[str] = set()
        self._waiters: list[Waiter] = []
        self._closed = False
        self._close_deadline: float | None = None  # monotonic; set by start_closing()
        self._close_wait = 0.0  # the seconds that deadline allowed
        self._in_flight: list[Waiter] = []  # the flush requests of the writer's current round
        self._writer_stopped = False
        self._auto_write_blocked = False
        self._final_error: StoreWriteError | None = None
        self._commit_count = 0
        self._flush_requests = 0
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lease_lock = threading.Lock()  # serialises taking and giving back leases
        self._leases: dict[str, int] = {}  # session -> fencing epoch (0 on SQLite)
        self._lost: dict[str, Loss] = {}
        self._due = DueProjector()  # the due index's per-session state (writer thread)
        self._due_listeners: list[Callable[[dict[str, int | None]], None]] = []
        self._thread = threading.Thread(target=self._run, name="dsh-store-writer", daemon=True)

    def _start_writer(self, name: str) -> None:
        """Start the writer thread (the last step of a backend's ``__init__``)."""
        self._thread.name = name
        self._thread.start()

    # --- properties ----------------------------------------------------------------

    @property
    def label(self) -> str:
        """How messages name the store: the file path (a URL without password on PostgreSQL)."""
        return self._label

    @property
    def owner(self) -> str:
        """How this store names itself as a session's holder (``host:pid:random``)."""
        return self._owner

    @property
    def commit_count(self) -> int:
        """How many durable write transactions were committed so far."""
        with self._lock:
            return self._commit_count

    @property
    def flush_requests(self) -> int:
        """How many flush requests (:meth:`flush` and :meth:`flush_all`) were accepted so far."""
        with self._lock:
            return self._flush_requests

    @property
    def pending_rows(self) -> int:
        """Rows queued or being written that are not committed yet (sessions and events)."""
        with self._lock:
            return sum(self._unsynced.values())

    @property
    def tracked_sessions(self) -> int:
        """Sessions whose next ``seq`` the store keeps in memory (live or with rows queued)."""
        with self._lock:
            return len(self._next_seq)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        with self._lock:
            return self._closed

    # --- writes --------------------------------------------------------------------

    def create_session(
        self, header: SessionHeader, seed: Sequence[tuple[SessionEvent, bytes]] = ()
    ) -> None:
        """Queue a new session row and the fork's copied ``seed`` events (seq ``0 … len(seed)-1``).

        ``seed`` pairs each event with its payload encoded by
        :func:`host_bridge.embedded.codec.encode_payload`. Raises
        :class:`StoreError` at once when the id is invalid (empty, NUL, lone
        surrogate), already stored or already queued, or when a seed row is invalid,
        and :class:`SessionLeaseError` when another store holds the session (a
        session not yet held here is taken on the way, see :meth:`acquire_session`).
        Durable only after a :meth:`flush` of the session resolves ``True``.
        """
        if not isinstance(header, SessionHeader):
            raise StoreError(f"create_session needs a SessionHeader, not {type(header).__name__}")
        session_id = header.id
        check_id(session_id, "session id")
        if header.parent_session is not None:
            check_id(header.parent_session, "parent_session")
        seed_length = header.seed_length
        if seed_length is not None and (
            isinstance(seed_length, bool)
            or not isinstance(seed_length, int)
            or not 0 <= seed_length <= INT64_MAX
        ):
            raise StoreError(
                f"seed_length of session {show_id(session_id)} "
                "must be None or a non-negative integer"
            )
        rows = [event_row(session_id, event, payload) for event, payload in seed]
        for index, row in enumerate(rows):
            if row.seq != index:
                raise StoreError(
                    f"seed event {index} of session {show_id(session_id)} has seq {row.seq}"
                )
        self._ensure_lease(session_id)
        if self._stored_length(session_id) is not None:
            raise StoreError(f"session {show_id(session_id)} already exists in the store")
        session_row = SessionRow(
            session_id, seed_length, header.parent_session, time.time_ns() // 1_000_000
        )
        with self._lock:
            self._check_open()
            if session_id in self._next_seq:
                raise StoreError(f"session {show_id(session_id)} already exists in the store")
            self._next_seq[session_id] = len(rows)
            self._enqueue([session_row, *rows])

    def record_append(self, session_id: str, event: SessionEvent, payload: bytes) -> None:
        """Queue one committed event; never waits for disk.

        ``payload`` is ``encode_payload(event.data)``.

        ``event.seq`` must be the session's next seq. Raises :class:`StoreError`
        for an unknown session, a wrong seq or an invalid row, and
        :class:`SessionLeaseError` when the session is held by another store or
        was lost by this one; nothing is queued then. The first append to a
        stored session that was not :meth:`load`-ed by this store reads its length once.
        """
        self.record_appends(session_id, ((event, payload),))

    def record_appends(self, session_id: str, rows: Sequence[tuple[SessionEvent, bytes]]) -> None:
        """Queue consecutive committed events of one session as a unit; never waits for disk.

        Like :meth:`record_append` for each ``(event, payload)`` pair, with the
        seqs following each other from the session's next seq. The rows are
        validated first and queued under one lock hold, so the writer takes
        all of them into the same write round: they become durable in one
        commit or not at all. Nothing is queued when any row is refused.
        """
        checked = [event_row(session_id, event, payload) for event, payload in rows]
        if not checked:
            return
        with self._lock:
            self._check_open()
            self._check_not_lost(session_id)
            expected = self._next_seq.get(session_id)
            held = session_id in self._leases
        if expected is None:
            stored = self._stored_length(session_id)
            if stored is None:
                raise StoreError(
                    f"session {show_id(session_id)} is unknown to the store; create it first"
                )
            expected = stored
        if not held:
            self._ensure_lease(session_id)
        with self._lock:
            self._check_open()
            self._check_not_lost(session_id)
            # (a concurrent forget() only drops an entry that equals the stored length)
            expected = self._next_seq.setdefault(session_id, expected)
            for offset, row in enumerate(checked):
                if row.seq != expected + offset:
                    raise StoreError(
                        f"event for session {show_id(session_id)} has seq {row.seq}, "
                        f"expected {expected + offset}"
                    )
            self._next_seq[session_id] = expected + len(checked)
            self._enqueue(list(checked))

    def flush(self, session_id: str) -> Future[bool]:
        """Resolve ``True`` once the rows of ``session_id`` queued before the call are durable.

        It resolves at once when nothing of that session is uncommitted (this
        includes unknown sessions): on SQLite the session's lock, held through
        an open file, cannot be lost while the store is open. It fails with
        :class:`StoreWriteError` when the write attempt made for it failed (the
        rows stay queued; flush again to retry) and with :class:`StoreClosedError`
        after :meth:`close`. When the session was lost (see :meth:`lease_lost`)
        it resolves ``False`` if its lease went elsewhere and fails with
        :class:`SessionLeaseError` if its rows could never be written.
        The future cannot be cancelled.
        """
        if not isinstance(session_id, str):
            return failed_future(
                StoreError(f"flush needs a session id string, not {type(session_id).__name__}")
            )
        return self._request_flush(session_id)

    def flush_all(self) -> Future[bool]:
        """Like :meth:`flush`, for every row of every session (and holder record) queued before."""
        return self._request_flush(None)

    def forget(self, session_id: str) -> None:
        """Drop the in-memory bookkeeping of a session that went offline; its rows stay stored.

        A host calls it when it detaches a session, so a long-running store does
        not keep an entry per session it ever saw. Rows still queued for the
        session are written first (the entry goes once they are committed); a
        later append to the session reads its stored length again.
        """
        with self._lock:
            if session_id in self._unsynced:
                self._forget_when_synced.add(session_id)
            else:
                self._next_seq.pop(session_id, None)
        self._due.forget(session_id)

    def release_session(self, session_id: str) -> None:
        """Give up ``session_id`` after its queued rows are written; nothing if not held here.

        When those rows cannot be written the session stays held (the next
        flush retries them) and the error is logged. After :meth:`start_closing`
        it waits for them only until the close deadline, then keeps the session
        the same way.
        """
        with self._lock:
            if session_id not in self._leases:
                return
        try:
            self._request_flush(session_id).result(self._time_left())
        except SessionLeaseError:
            pass  # lost: nothing of it will be written any more
        except StoreError as error:
            _log.error("keeping session %r: its rows are not durable (%s)", session_id, error)
            return
        except TimeoutError:
            _log.error(
                "keeping session %r: its rows were not written before the store's close deadline",
                session_id,
            )
            return
        with self._lease_lock:
            with self._lock:
                if self._leases.pop(session_id, None) is None:
                    return
            self._unlock_session(session_id)

    @contextlib.contextmanager
    def _claiming(self, session_id: str) -> Iterator[None]:
        """Around a claim: when the block raises, give back ``session_id`` if it took it."""
        with self._lock:
            held = session_id in self._leases
        try:
            yield
        except BaseException:
            with self._lock:
                taken = not held and session_id in self._leases
            if taken:
                self.release_session(session_id)
            raise

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store holds ``session_id`` and has not lost it."""
        with self._lock:
            return session_id in self._leases and session_id not in self._lost

    def lease_lost(self, session_id: str) -> bool:
        """Whether this store lost ``session_id`` since it took it.

        A lost session's queued rows were discarded and every later write of it
        is refused with :class:`SessionLeaseError` until it is taken again.
        """
        with self._lock:
            return session_id in self._lost

    def _check_not_lost(self, session_id: str) -> None:
        """Lock held: raise the refusal of a session this store lost."""
        loss = self._lost.get(session_id)
        if loss is not None:
            raise loss.error()

    # --- ownership and reads: the backend's ---------------------------------------------

    @abstractmethod
    def acquire_session(self, session_id: str) -> int:
        """Take ``session_id`` for this store before it goes live; returns its fencing epoch.

        Raises :class:`SessionLeaseError` when another store holds it (or this
        one already does) and :class:`StoreError` when it cannot be taken.
        """

    @abstractmethod
    def _ensure_lease(self, session_id: str) -> None:
        """Raise unless this store may write ``session_id`` (a backend may take a free one)."""

    @abstractmethod
    def _unlock_session(self, session_id: str) -> None:
        """Give the session's lock or lease back (``_lease_lock`` held)."""

    @abstractmethod
    def _stored_length(self, session_id: str) -> int | None:
        """The number of stored events of ``session_id``, or None when it is not stored."""

    @abstractmethod
    def due_sessions(self, until_ms: int | None, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` ``(session_id, due_ms)`` of sessions nobody holds, earliest first."""

    @abstractmethod
    def claim_due_session(self, session_id: str, now_ms: int) -> bool:
        """Take ``session_id`` to deliver what is due in it; False when that is not for us.

        A ``now_ms`` that is not an ``int`` (:func:`refuses_claim_clock`) is
        False, with nothing taken. A claim that raises has given the session back.
        """

    @abstractmethod
    def reindex(self) -> int:
        """Rebuild the due index from the stored logs in one transaction; the rows written."""

    @abstractmethod
    def reindex_session(self, session_id: str) -> DueEntry | None:
        """Rewrite one session's due index row from its stored log, in one transaction.

        Returns the row written (``None``: no row, nothing is due or the session is not stored).
        """

    def start_closing(self, timeout: float | None) -> None:
        """Bound the waits of a shutdown that starts now: they end ``timeout`` seconds from now.

        From this call on, :meth:`release_session` waits for a session's rows
        and :meth:`close` for its last write at most until that deadline (an
        earlier deadline set before stays); ``None`` sets none. The store keeps
        working meanwhile. A host calls it before it detaches its sessions, so
        that a writer stuck in a commit (a hung disk or database) cannot hold
        the whole shutdown.
        """
        if timeout is None:
            return
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            if self._close_deadline is None or deadline < self._close_deadline:
                self._close_deadline = deadline
                self._close_wait = max(0.0, timeout)

    def close(self, timeout: float | None = CLOSE_TIMEOUT) -> None:
        """Write what is queued, stop the writer, give back every session, close; idempotent.

        Raises :class:`StoreWriteError` when that last write failed (those rows
        were never acknowledged and are not durable). Every later call fails
        with :class:`StoreClosedError` (``flush`` returns a failed future).

        Waits for the last write at most ``timeout`` seconds (``None``: as long
        as it takes), or until an earlier :meth:`start_closing` deadline. When
        the writer has not finished by then (blocked inside SQLite or the
        database driver), the store stops waiting for it: it is closed at once,
        every flush still pending fails with :class:`StoreWriteError`, the
        error is logged, and the :class:`StoreWriteError` raised names the
        rows that are not confirmed durable. The writer is a daemon thread: if
        it finishes later it still commits what it holds and then gives back
        the sessions; until then (or until the process exits) they stay locked,
        so no other store can take a session whose rows may still be committed.
        """
        self.start_closing(timeout)
        with self._wake:
            first = not self._closed
            if first:
                self._closing()
            self._closed = True
            self._wake.notify_all()
        abandoned: StoreWriteError | None = None
        try:
            if threading.current_thread() is not self._thread:
                self._thread.join(self._time_left())
                if self._thread.is_alive() and first:
                    abandoned = self._stop_waiting_for_writer()
        finally:
            self._close_connections()
        if first and abandoned is not None:
            raise abandoned
        if first and self._final_error is not None:
            raise self._final_error

    def _time_left(self) -> float | None:
        """Seconds until the close deadline (0 once it passed); None without one."""
        with self._lock:
            deadline = self._close_deadline
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def _stop_waiting_for_writer(self) -> StoreWriteError:
        """The writer missed the close deadline: refuse all work, fail every pending flush."""
        with self._lock:
            self._writer_stopped = True
            rows = sum(self._unsynced.values())
            sessions = sorted(self._unsynced)
            futures = [w.future for w in (*self._in_flight, *self._waiters)]
            self._waiters = []
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
        _log.error("session store %s: %s; the writer thread is left running", self._label, error)
        return error

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _decoded(
        self, session_id: str, head: Sequence[Any] | None, rows: Sequence[Sequence[Any]]
    ) -> StoredSession | None:
        """Decode a header row and event rows read in one snapshot; note the next seq."""
        stored = decode_session(session_id, head, rows)
        if stored is not None:
            with self._lock:
                self._next_seq.setdefault(session_id, len(stored.events))
        return stored

    # --- due index ---------------------------------------------------------------------

    def add_due_listener(
        self, listener: Callable[[dict[str, int | None]], None]
    ) -> Callable[[], None]:
        """Hear of every commit of this store that moved the due index; returns ``remove``.

        ``listener({session_id: due_ms or None, ...})`` runs on the writer
        thread right after the commit: it must be short and must not wait for
        the store (post a message). Commits of other processes are not heard.
        """
        with self._lock:
            self._due_listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._due_listeners:
                    self._due_listeners.remove(listener)

        return remove

    @property
    def has_due_index(self) -> bool:
        """Always True: a writable store migrates to the schema with the due index."""
        return True

    def next_due(self) -> int | None:
        """The earliest ``due_ms`` among sessions nobody holds (see :meth:`due_sessions`)."""
        first = self.due_sessions(None, 1)
        return first[0][1] if first else None

    @property
    def due_projector(self) -> DueProjector:
        """The writer's due index state (for diagnostics and benchmarks)."""
        return self._due

    def _plan_due_index(self, batch: Sequence[Op], read: Callable[[str], Any]) -> IndexPlan:
        """The due index changes of ``batch`` (writer thread, inside its transaction)."""
        rows = [
            (op.session_id, op.seq, op.type, op.time, op.payload)
            for op in batch
            if isinstance(op, EventRow)
        ]
        created = {op.session_id: op.seed_length for op in batch if isinstance(op, SessionRow)}
        return self._due.plan(rows, created, read)

    def _due_committed(self, plan: IndexPlan) -> None:
        """After ``COMMIT``: keep the projection state and tell the listeners; never raises."""
        plan.adopt()
        if not plan.changes:
            return
        with self._lock:
            listeners = tuple(self._due_listeners)
        if not listeners:
            return
        moved = {sid: None if e is None else e.due_ms for sid, e in plan.changes.items()}
        for listener in listeners:
            try:
                listener(dict(moved))
            except Exception:
                _log.warning("a due index listener failed", exc_info=True)

    # --- internals: queue ------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed or self._writer_stopped:
            raise StoreClosedError(f"the session store {self._label} is closed")

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

    def _request_flush(self, session_id: str | None) -> Future[bool]:
        future: Future[bool] = Future()
        future.set_running_or_notify_cancel()  # not cancellable: the writer owns its outcome
        with self._lock:
            if self._closed or self._writer_stopped:
                future.set_exception(StoreClosedError(f"the session store {self._label} is closed"))
                return future
            self._flush_requests += 1
            loss = None if session_id is None else self._lost.get(session_id)
            if loss is not None:
                outcome = loss.flush_outcome()
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
                return future
            if self._is_synced(session_id) and not self._needs_round(session_id):
                future.set_result(True)  # no callbacks can be attached yet
                return future
            self._waiters.append(Waiter(session_id, future))
            self._wake.notify()
        return future

    def _needs_round(self, session_id: str | None) -> bool:
        """Lock held: whether a flush must confirm ownership in a write round (not on SQLite)."""
        return False

    def _is_synced(self, session_id: str | None) -> bool:
        """Lock held: nothing of ``session_id`` (or of anything, for None) is uncommitted."""
        if session_id is None:
            return not self._unsynced and self._side_writes_synced()
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
                        or self._side_writes_due()
                    ):
                        self._wake.wait()
                    final = self._closed
                    batch: list[Op] = []
                    if final or self._waiters or self._auto_write_due():
                        batch, self._queue, self._queued_bytes = self._queue, [], 0
                    # (else only holder rows are due: queued session rows wait for a flush)
                    waiters, self._waiters = self._waiters, []
                    self._in_flight = waiters
                result = self._write_round(batch, waiters)
                settle_all(self._settle(result, waiters))
                if final:
                    error = result.error
                    if error is not None:
                        self._final_error = StoreWriteError(
                            f"closing the session store could not write {len(result.retry)} "
                            f"unflushed rows ({error.category}); they are not durable",
                            category=error.category,
                        )
                    break
        except BaseException:  # pragma: no cover - a bug in the writer itself
            _log.exception("the session store writer stopped unexpectedly")
        finally:
            with self._lock:
                self._writer_stopped = True
                leftover, self._waiters = self._waiters, []
            settle_all(
                [(w.future, StoreClosedError("the session store writer stopped")) for w in leftover]
            )
            self._writer_done()

    def _write_round(self, batch: list[Op], waiters: list[Waiter]) -> WriteRound:
        """Write everything taken for this round; group commit, isolation on a row conflict.

        The healthy path is one transaction for every session's rows. When it
        fails on rows that can never be written (a key another writer already
        stored), the round is bisected by session so every other session still
        commits, and the sessions whose rows conflict are lost (``"conflict"``).
        Any other failure (disk full, locked, I/O) keeps all rows for a retry.
        """
        result = WriteRound()
        check = self._round_checks(waiters)
        if not (batch or check or self._side_writes_pending()):
            return result
        outcome, groups = self._attempt(by_session(batch), check, result)
        if outcome == "conflict":
            # (a conflict comes from an INSERT, after the ownership check ran: its answers stand)
            self._isolate(groups, result)
        return result

    def _attempt(
        self, groups: list[list[Op]], check: set[str], result: WriteRound
    ) -> tuple[Literal["ok", "conflict", "failed"], list[list[Op]]]:
        """Commit ``groups`` (rows by session) in one transaction and book it in ``result``.

        Returns ``"conflict"`` (nothing booked) when rows of some session can
        never be written, with the groups that are not lost.
        """
        error, lost = self._commit([op for group in groups for op in group], check)
        result.lost.update(lost)
        groups = [group for group in groups if group[0].session_id not in result.lost]
        if error is None:
            result.committed.extend(op for group in groups for op in group)
            result.commits += 1 if groups else 0
            return "ok", groups
        if groups and self._is_row_conflict(error):
            result.conflict_category = self._category(error)
            return "conflict", groups
        rows = [op for group in groups for op in group]
        unconfirmed = check - result.lost.keys()
        if rows or unconfirmed:
            result.retry.extend(rows)
            result.unconfirmed |= unconfirmed
            result.error = commit_failed(error, len(rows), self._category(error))
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
            outcome, first = self._attempt(first, set(), result)
            if outcome == "conflict":
                suspects.append(first)
            if result.error is not None:
                result.retry.extend(op for group in second for op in group)
            elif outcome == "ok":
                suspects.append(second)  # the conflict is in the other half
            else:
                outcome, second = self._attempt(second, set(), result)
                if outcome == "conflict":
                    suspects.append(second)

    def _side_writes_due(self) -> bool:
        """Lock held: whether writes besides session rows wait for the writer (none here)."""
        return False

    def _side_writes_pending(self) -> bool:
        """Whether writes besides session rows wait, even ones whose last attempt failed."""
        return False

    def _side_writes_synced(self) -> bool:
        """Lock held: whether every write besides session rows is committed."""
        return True

    def _round_checks(self, waiters: list[Waiter]) -> set[str]:
        """Sessions whose ownership this round must confirm (none by default: locks hold)."""
        return set()

    # --- backend hooks -----------------------------------------------------------------

    @abstractmethod
    def _commit(self, rows: list[Op], check: set[str]) -> CommitResult:
        """Write ``rows`` and confirm ``check`` in one transaction (writer thread).

        Returns the failure (the transaction rolled back, nothing written) and
        the sessions found lost; a lost session's rows are not written. Calls
        the fault hook just before ``COMMIT`` when ``rows`` is not empty, and
        :meth:`_due_committed` after a successful ``COMMIT``.
        """

    @abstractmethod
    def _is_row_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` means some rows can never be written (not a whole-store failure)."""

    @abstractmethod
    def _category(self, error: BaseException) -> str:
        """The backend's short name of ``error`` for messages: never the driver's text."""

    @abstractmethod
    def _writer_done(self) -> None:
        """On the writer thread, once it stopped: close its connection, give every session back."""

    @abstractmethod
    def _close_connections(self) -> None:
        """At :meth:`close`, after the writer stopped or was given up on: close the rest."""

    def _closing(self) -> None:
        """Lock held, at the first :meth:`close`: queue what the final round must also write."""

    def _settle(self, result: WriteRound, waiters: list[Waiter]) -> list[Outcome]:
        """Book one write round; returns the futures to settle (outside the lock)."""
        outcomes: list[Outcome] = []
        newly_lost: list[tuple[Loss, int]] = []
        with self._lock:
            for loss in result.lost.values():
                dropped = self._lose(loss)
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
            still_waiting: list[Waiter] = []
            for waiter in self._waiters:
                lost = None if waiter.session_id is None else self._lost.get(waiter.session_id)
                if lost is not None:
                    outcomes.append((waiter.future, lost.flush_outcome()))
                elif self._is_synced(waiter.session_id) and not self._needs_round(
                    waiter.session_id
                ):
                    outcomes.append((waiter.future, True))
                else:
                    still_waiting.append(waiter)
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

    def _lose(self, loss: Loss) -> int | None:
        """Lock held: discard everything queued of a lost session; None if it was lost already."""
        session_id = loss.session_id
        if session_id in self._lost:
            return None
        self._lost[session_id] = loss
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


# --- helpers -------------------------------------------------------------------------------


def refuses_claim_clock(session_id: str, now_ms: object) -> bool:
    """Whether ``now_ms`` is no clock reading to claim ``session_id`` at (then logs a warning).

    A reading is an ``int`` that is not a ``bool``; ``None``, a float (NaN
    too) or anything else cannot be compared with due times.
    """
    if isinstance(now_ms, int) and not isinstance(now_ms, bool):
        return False
    _log.warning(
        "not claiming session %s: the clock reading is a %s, not whole epoch milliseconds",
        show_id(session_id),
        type(now_ms).__name__,
    )
    return True


def commit_failed(error: BaseException, rows: int, category: str) -> StoreWriteError:
    """Log a failed write round (detail at debug level) and describe it without backend text.

    ``category`` is the backend's name of ``error`` (see :meth:`EventStore._category`).
    """
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
