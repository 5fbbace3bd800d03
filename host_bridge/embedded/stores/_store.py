"""The durable store's public face, composed of a recorder, a writer, a projection and reads.

:class:`EventStore` is what a host holds: it validates a write once, checks
ownership, and hands rows to the :class:`~host_bridge.embedded.stores._writer.WriteBehind`;
reads go through :class:`~host_bridge.embedded.stores._reads.SessionReads`
over the backend's :class:`~host_bridge.embedded.stores._recorder.Recorder`.
The backends' stores only build those parts and add their own ownership reads.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Self

from actors._futures import failed
from host_bridge.embedded.stores._due import DueEntry, DueProjection
from host_bridge.embedded.stores._errors import SessionLeaseError, StoreError
from host_bridge.embedded.stores._reads import SessionReads
from host_bridge.embedded.stores._recorder import Recorder
from host_bridge.embedded.stores._rows import (
    INT64_MAX,
    UNTOLD,
    EventRow,
    SessionRow,
    Untold,
    check_id,
    event_row,
    show_id,
)
from host_bridge.embedded.stores._writer import CLOSE_TIMEOUT, WriteBehind
from host_bridge.protocols import SessionEvent, SessionHeader

__all__ = ["EventStore", "new_owner", "refuses_claim_clock"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


def new_owner() -> str:
    """How a new store names itself as a session's holder (``host:pid:random``)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class EventStore(SessionReads[Any]):
    """Durable session logs behind a write-behind queue; the embedded host's persistence listener.

    Sessions are owned by one store at a time: :meth:`acquire_session` takes
    one, :meth:`release_session` and :meth:`close` give it back. Done-callbacks
    of the futures :meth:`flush` returns run on the writer thread and should be
    short; they may append or flush but must not *wait* for a flush.
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        owner: str,
        projection: DueProjection,
        fault_hook: Callable[[], None] | None,
        thread_name: str,
    ) -> None:
        """Compose ``recorder`` with a writer over ``projection``, and start the writer."""
        self._recorder = recorder
        self._owner = owner
        self._projection = projection
        self._writer = WriteBehind(
            recorder, projection, fault_hook=fault_hook, thread_name=thread_name
        )
        self._ownership = threading.Lock()  # serialises taking and giving back sessions
        super().__init__(
            recorder.label,
            recorder.queries,
            recorder.read,
            lambda: True,
            self._writer.note_length,
        )
        self._writer.start()

    # --- properties ------------------------------------------------------------------

    @property
    def label(self) -> str:
        """How messages name the store: the file path (a URL without password on PostgreSQL)."""
        return self._recorder.label

    @property
    def owner(self) -> str:
        """How this store names itself as a session's holder (``host:pid:random``)."""
        return self._owner

    @property
    def commit_count(self) -> int:
        """How many durable write transactions were committed so far."""
        return self._writer.commit_count

    @property
    def flush_requests(self) -> int:
        """How many flush requests (:meth:`flush` and :meth:`flush_all`) were accepted so far."""
        return self._writer.flush_requests

    @property
    def pending_rows(self) -> int:
        """Rows queued or being written that are not committed yet (sessions and events)."""
        return self._writer.pending_rows

    @property
    def tracked_sessions(self) -> int:
        """Sessions whose next ``seq`` the store keeps in memory (live or with rows queued)."""
        return self._writer.tracked_sessions

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._writer.closed

    @property
    def fault_hook(self) -> Callable[[], None] | None:
        """The test seam the writer calls just before each ``COMMIT`` of session rows.

        Set it (or give it to the constructor) to fail or pause commits; what
        it raises fails that attempt like a failed commit.
        """
        return self._writer.fault_hook

    @fault_hook.setter
    def fault_hook(self, hook: Callable[[], None] | None) -> None:
        self._writer.fault_hook = hook

    @property
    def due_projector(self) -> DueProjection:
        """The writer's due index state (for diagnostics and benchmarks)."""
        return self._projection

    # --- writes ----------------------------------------------------------------------

    def create_session(
        self, header: SessionHeader, seed: Sequence[tuple[SessionEvent, bytes]] = ()
    ) -> None:
        """Queue a new session row and the fork's copied ``seed`` events (seq ``0 … len(seed)-1``).

        ``seed`` pairs each event with its payload encoded by
        :func:`host_bridge.embedded.codec.encode_payload`. Raises
        :class:`StoreError` at once when the id is invalid (empty, NUL, lone
        surrogate), already stored or already queued, or when a seed row is invalid,
        and :class:`SessionLeaseError` when another store holds the session (a
        session not yet held here is taken on the way where the backend allows).
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
        if self.stored_length(session_id) is not None:
            raise StoreError(f"session {show_id(session_id)} already exists in the store")
        session_row = SessionRow(
            session_id, seed_length, header.parent_session, time.time_ns() // 1_000_000
        )
        self._writer.queue_new(session_id, [session_row, *rows], len(rows))

    def record_append(
        self,
        session_id: str,
        event: SessionEvent,
        payload: bytes,
        *,
        schedule_due_ms: int | Untold | None = UNTOLD,
    ) -> None:
        """Queue one committed event; never waits for disk.

        ``payload`` is ``encode_payload(event.data)`` and ``event.seq`` must be
        the session's next seq. ``schedule_due_ms``, when given, is the
        session's earliest schedule target after this event (``None``: none
        active): the due index takes it instead of folding the schedule.
        Raises :class:`StoreError` for an unknown session, a wrong seq or an
        invalid row, and :class:`SessionLeaseError` when the session is held by
        another store or was lost by this one; nothing is queued then.
        """
        self.record_appends(session_id, ((event, payload),), schedule_due_ms=schedule_due_ms)

    def record_appends(
        self,
        session_id: str,
        rows: Sequence[tuple[SessionEvent, bytes]],
        *,
        schedule_due_ms: int | Untold | None = UNTOLD,
    ) -> None:
        """Queue consecutive committed events of one session as a unit; never waits for disk.

        Like :meth:`record_append` for each ``(event, payload)`` pair, with the
        seqs following each other; they become durable in one commit or not at
        all, and nothing is queued when any row is refused. ``schedule_due_ms``
        tells the schedule target after the last of them.
        """
        checked = [event_row(session_id, event, payload) for event, payload in rows]
        if not checked:
            return
        if schedule_due_ms is not UNTOLD:
            if schedule_due_ms is not None and (
                isinstance(schedule_due_ms, bool) or not isinstance(schedule_due_ms, int)
            ):
                raise StoreError("schedule_due_ms must be None or whole epoch milliseconds")
            last = checked[-1]
            checked[-1] = EventRow(
                last.session_id,
                last.seq,
                last.type,
                last.time,
                last.payload,
                last.data,
                schedule_due_ms,
            )
        stored, held = self._writer.append_state(session_id)
        if stored is None:
            stored = self.stored_length(session_id)
            if stored is None:
                raise StoreError(
                    f"session {show_id(session_id)} is unknown to the store; create it first"
                )
        if not held:
            self._ensure_lease(session_id)
        self._writer.queue_appends(session_id, stored, checked)

    def flush(self, session_id: str) -> Future[bool]:
        """Resolve ``True`` once the rows of ``session_id`` queued before the call are durable.

        It resolves at once when nothing of that session is uncommitted and the
        backend's ownership cannot be lost while the store is open (SQLite). It
        fails with :class:`StoreWriteError` when the write attempt made for it
        failed (the rows stay queued; flush again to retry) and with
        :class:`StoreClosedError` after :meth:`close`. When the session was lost
        (see :meth:`lease_lost`) it resolves ``False`` if its lease went
        elsewhere and fails with :class:`SessionLeaseError` if its rows could
        never be written. The future cannot be cancelled.
        """
        if not isinstance(session_id, str):
            return failed(
                StoreError(f"flush needs a session id string, not {type(session_id).__name__}")
            )
        return self._writer.request_flush(session_id)

    def flush_all(self) -> Future[bool]:
        """Like :meth:`flush`, for every row of every session (and holder record) queued before."""
        return self._writer.request_flush(None)

    def forget(self, session_id: str) -> None:
        """Drop the in-memory bookkeeping of a session that went offline; its rows stay stored.

        Rows still queued for the session are written first; a later append
        reads its stored length again.
        """
        self._writer.forget(session_id)
        self._projection.forget(session_id)

    # --- ownership -------------------------------------------------------------------

    def acquire_session(self, session_id: str) -> int:
        """Take ``session_id`` for this store before it goes live; returns its fencing epoch.

        Raises :class:`SessionLeaseError`, naming the holder when it is known,
        when another process or store holds the session or this store already
        does, and :class:`StoreError` for an unstorable id or an unreachable store.
        """
        check_id(session_id, "session id")
        with self._ownership:
            self._writer.check_can_take(session_id, self._owner)
            epoch = self._recorder.lock(session_id, self._writer.lose_held)
            self._writer.take(session_id, epoch)
            self._writer.queue_side(self._recorder.took(session_id))
        _log.debug("took session %r (epoch %d)", session_id, epoch)
        return epoch

    def release_session(self, session_id: str) -> None:
        """Give up ``session_id`` after its queued rows are written; nothing if not held here.

        When those rows cannot be written the session stays held (the next
        flush retries them) and the error is logged. After :meth:`start_closing`
        it waits for them only until the close deadline.
        """
        if not self._writer.held(session_id):
            return
        try:
            self._writer.request_flush(session_id).result(self._writer.time_left())
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
        with self._ownership:
            if not self._writer.give_back(session_id):
                return
            loss = self._writer.loss(session_id)
            lost = loss is not None and loss.kind == "lease"
            self._writer.queue_side(self._recorder.unlock(session_id, lost))

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store holds ``session_id`` and has not lost it."""
        return self._writer.holds(session_id)

    def lease_lost(self, session_id: str) -> bool:
        """Whether this store lost ``session_id`` since it took it.

        A lost session's queued rows were discarded and every later write of it
        is refused with :class:`SessionLeaseError` until it is taken again.
        """
        return self._writer.loss(session_id) is not None

    def _ensure_lease(self, session_id: str) -> None:
        """Raise unless this store may write ``session_id``; a local lock is taken here."""
        self._writer.check_not_lost(session_id)
        if self._writer.held(session_id):
            return
        if not self._recorder.takes_free_sessions:
            raise SessionLeaseError(
                f"this process does not hold the lease of session {show_id(str(session_id))}; "
                "acquire it before writing",
                session_id=session_id,
            )
        try:
            self.acquire_session(session_id)
        except SessionLeaseError:
            if not self.holds_lease(session_id):  # (another thread took it for us meanwhile)
                raise

    def _check_open(self) -> None:
        """Raise :class:`StoreClosedError` once the store is closed or its writer stopped."""
        self._writer.check_open()

    # --- due index -------------------------------------------------------------------

    def add_due_listener(
        self, listener: Callable[[dict[str, int | None]], None]
    ) -> Callable[[], None]:
        """Hear of every commit of this store that moved the due index; returns ``remove``.

        ``listener({session_id: due_ms or None, ...})`` runs on the writer
        thread right after the commit: it must be short and must not wait for
        the store (post a message). Commits of other processes are not heard.
        """
        return self._projection.add_listener(listener)

    @property
    def has_due_index(self) -> bool:
        """Always True: a writable store migrates to the schema with the due index."""
        return True

    def next_due(self) -> int | None:
        """The earliest ``due_ms`` among sessions nobody holds (see ``due_sessions``)."""
        first = self.due_sessions(None, 1)
        return first[0][1] if first else None

    def due_sessions(self, until_ms: int | None, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` ``(session_id, due_ms)`` of sessions nobody holds, earliest first.

        Only sessions due at or before ``until_ms`` (any time when ``None``);
        sessions held here or (as far as the backend can tell) elsewhere are skipped.
        """
        return self._recorder.due_sessions(until_ms, limit, self.holds_lease)

    def claim_due_session(self, session_id: str, now_ms: int) -> bool:
        """Take ``session_id`` to deliver what is due in it; False when that is not for us.

        False when another process or store holds the session, or when its
        index row says nothing is due at ``now_ms`` (then it is not kept).
        True: this store holds the session (:meth:`acquire_session`) and it is
        due, or its row is unsound (:attr:`IndexRow.wake_ms`): its log decides.
        False, with nothing taken, for a ``now_ms`` that is not an ``int``; on
        any exception the session is given back.
        """
        if refuses_claim_clock(session_id, now_ms):
            return False
        held = self._writer.held(session_id)
        try:
            if self._recorder.claim(session_id, now_ms, self.acquire_session):
                return True
        except BaseException:  # whatever failed, a session taken by this claim goes back
            if not held and self._writer.held(session_id):
                self.release_session(session_id)
            raise
        if not held and self._writer.held(session_id):
            self.release_session(session_id)
        return False

    def reindex(self) -> int:
        """Rebuild the due index from the stored logs in one transaction; the rows written.

        Safe while hosts write: no commit can fall between reading the logs and
        replacing the index.
        """
        self._check_open()
        count = self._recorder.rebuild_index()
        self._projection.clear()
        _log.info("rebuilt the due index of %s: %d sessions", self.label, count)
        return count

    def reindex_session(self, session_id: str) -> DueEntry | None:
        """Rewrite one session's due index row from its stored log, in one transaction.

        Returns the row written (``None``: the row was deleted, nothing is due
        or the session is not stored).
        """
        check_id(session_id, "session id")
        self._check_open()
        entry = self._recorder.rebuild_session_index(session_id)
        self._projection.forget(session_id)
        return entry

    # --- closing ---------------------------------------------------------------------

    def start_closing(self, timeout: float | None) -> None:
        """Bound the waits of a shutdown that starts now: they end ``timeout`` seconds from now.

        From this call on, :meth:`release_session` waits for a session's rows
        and :meth:`close` for its last write at most until that deadline (an
        earlier deadline stays); ``None`` sets none. A host calls it before it
        detaches its sessions, so a writer stuck in a commit cannot hold the shutdown.
        """
        self._writer.start_closing(timeout)

    def close(self, timeout: float | None = CLOSE_TIMEOUT) -> None:
        """Write what is queued, stop the writer, give back every session, close; idempotent.

        Raises :class:`StoreWriteError` when that last write failed (those rows
        were never acknowledged and are not durable). Every later call fails
        with :class:`StoreClosedError` (``flush`` returns a failed future).

        Waits for the last write at most ``timeout`` seconds (``None``: as long
        as it takes), or until an earlier :meth:`start_closing` deadline. A
        writer not finished by then is left running as a daemon thread: the
        store is closed at once, every pending flush fails with
        :class:`StoreWriteError`, and the sessions stay locked until the writer
        finishes or the process exits, so no other store can take a session
        whose rows may still be committed.
        """
        self._writer.close(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
