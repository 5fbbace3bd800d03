"""The durable store's public face: validate a write once, check ownership, queue it.

:class:`EventStore` composes a backend's recorder, the write-behind writer, the due
projection and the shared reads; the backends' stores only build those parts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, replace
from typing import Any, Self

from actors._futures import failed
from host_bridge.embedded.stores._due import DueEntry, DueProjection, SessionProjection
from host_bridge.embedded.stores._errors import SessionLeaseError, StoreError
from host_bridge.embedded.stores._reads import SessionReads
from host_bridge.embedded.stores._recorder import Recorder, SideWrite
from host_bridge.embedded.stores._rows import (
    INT64_MAX,
    UNTOLD,
    SessionRow,
    Untold,
    check_id,
    event_row,
    is_storable_id,
    is_whole,
    show_id,
)
from host_bridge.embedded.stores._writer import CLOSE_TIMEOUT, WriteBehind
from host_bridge.protocols import SessionEvent, SessionHeader

__all__ = [
    "DEFAULT_PROGRAM",
    "EventStore",
    "Holder",
    "new_owner",
    "parse_holder",
    "refuses_claim_clock",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


DEFAULT_PROGRAM = "library"
"""The program a store's holder record names when its opener names none (a library host)."""

_PROGRAM = re.compile(r"[a-z][a-z0-9_]{0,15}")


def new_owner(program: str | None = None) -> str:
    """How a new store names itself as a session's holder: ``host:pid:PROGRAM-random``.

    ``program`` (lowercase letters, digits and ``_``, at most 16) says which
    program opened the store (``serve``, ``chat``…); default :data:`DEFAULT_PROGRAM`.
    Releases before it wrote ``host:pid:random``; both read as ``host:pid:tag``.
    """
    name = DEFAULT_PROGRAM if program is None else program
    if not _PROGRAM.fullmatch(name):
        raise ValueError(f"a program name is 1-16 of a-z, 0-9 and _, not {name!r}")
    return f"{socket.gethostname()}:{os.getpid()}:{name}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Holder:
    """A session's holder as its record names it: host name, process id and program.

    ``program`` is ``None`` for a record that names none (written by an earlier
    release, or cut short: PostgreSQL keeps 63 bytes of a connection's name).
    """

    host: str
    pid: int
    program: str | None


def parse_holder(owner: str) -> Holder | None:
    """The :class:`Holder` an owner string (``host:pid:tag``) names; ``None`` if it names none."""
    host, _, rest = owner.rpartition(":")
    host, _, pid = host.rpartition(":")
    if not host or not pid.isdigit() or len(pid) > 10:
        return None
    program, dash, _ = rest.rpartition("-")
    return Holder(host, int(pid), program if dash and _PROGRAM.fullmatch(program) else None)


class EventStore(SessionReads[Any]):
    """Durable session logs behind a write-behind queue; the embedded host's persistence listener.

    A session is owned by one store at a time (:meth:`acquire_session`). Callbacks of
    :meth:`flush` futures run on the writer thread: short, and never waiting for a flush.
    """

    def __init__(
        self,
        recorder: Recorder,
        owner: str,
        due_cache_sessions: int,
        fault_hook: Callable[[], None] | None,
        thread_name: str,
    ) -> None:
        """Compose ``recorder`` with a writer over a new due projection, and start the writer."""
        self._recorder = recorder
        self._owner = owner
        self._projection = DueProjection(due_cache_sessions)
        self._writer = WriteBehind(
            recorder, self._projection, fault_hook=fault_hook, thread_name=thread_name
        )
        self._ownership = threading.Lock()  # serialises taking and giving back sessions
        self._wanting_lock = threading.Lock()
        self._wanting: dict[str, int] = {}  # sessions this store wants: open want blocks
        super().__init__(
            recorder.label,
            recorder.queries,
            recorder.read,
            lambda: True,  # a writable store migrates to the schema with the due index
            self._writer.note_length,
            checkpoints=lambda: True,  # and with the schedule checkpoints
            warnings=self._projection.warnings,
        )
        self._writer.start()
        _log.debug("session store open at %s", recorder.label)

    # --- properties ------------------------------------------------------------------

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
        """The test seam called just before each ``COMMIT`` of session rows (a raise fails it)."""
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

        ``seed`` pairs each event with its ``encode_payload`` bytes. Raises
        :class:`StoreError` for an invalid, stored or queued id or an invalid seed row, and
        :class:`SessionLeaseError` when another store holds the session. Durable once a
        :meth:`flush` of the session resolves ``True``.
        """
        if not isinstance(header, SessionHeader):
            raise StoreError(f"create_session needs a SessionHeader, not {type(header).__name__}")
        session_id = header.id
        check_id(session_id, "session id")
        if header.parent_session is not None:
            check_id(header.parent_session, "parent_session")
        seed_length = header.seed_length
        if not (seed_length is None or (is_whole(seed_length) and 0 <= seed_length <= INT64_MAX)):
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
        """Queue one committed event (the session's next seq); never waits for disk.

        ``payload`` is ``encode_payload(event.data)``; ``schedule_due_ms``, when told, is
        the session's earliest schedule target after it (``None``: none active). Raises
        :class:`StoreError` for an unknown session, a wrong seq or an invalid row, and
        :class:`SessionLeaseError` when another store holds the session or this one lost it.
        """
        if schedule_due_ms is UNTOLD:
            self.record_appends(session_id, ((event, payload),))
        else:
            self.record_appends(session_id, ((event, payload),), schedule_due_ms=schedule_due_ms)

    def record_appends(
        self,
        session_id: str,
        rows: Sequence[tuple[SessionEvent, bytes]],
        *,
        schedule_due_ms: int | Untold | None = UNTOLD,
    ) -> None:
        """Like :meth:`record_append` for consecutive events, durable in one commit or not at
        all; nothing is queued when one is refused. ``schedule_due_ms``: after the last."""
        checked = [event_row(session_id, event, payload) for event, payload in rows]
        if not checked:
            return
        if schedule_due_ms is not UNTOLD:
            if schedule_due_ms is not None and not is_whole(schedule_due_ms):
                raise StoreError("schedule_due_ms must be None or whole epoch milliseconds")
            checked[-1] = replace(checked[-1], schedule_due_ms=schedule_due_ms)
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

        Fails with :class:`StoreWriteError` when that write failed (the rows stay queued)
        and :class:`StoreClosedError` after :meth:`close`. A lost session resolves
        ``False`` (its lease went elsewhere) or fails with :class:`SessionLeaseError`
        (its rows can never be written). Not cancellable. See docs/storage.md.
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
        """Drop the in-memory bookkeeping of a session that went offline (queued rows are
        still written; a later append reads its stored length again)."""
        self._writer.forget(session_id)
        self._projection.forget(session_id)

    # --- ownership -------------------------------------------------------------------

    def acquire_session(self, session_id: str) -> int:
        """Take ``session_id`` for this store before it goes live; returns its fencing epoch.

        Raises :class:`SessionLeaseError` (naming a known holder) when it is held here or
        elsewhere, :class:`StoreError` for an unstorable id or an unreachable store.
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
        """Give up ``session_id`` once its queued rows are written (until a close deadline);
        when they cannot be, it stays held and the error is logged."""
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

    @contextlib.contextmanager
    def want(self, session_id: str) -> Iterator[bool]:
        """Tell the store that holds ``session_id`` that this one wants it, while the block runs.

        For a process waiting to open a session that another holds (a person's
        chat beside ``serve``): the holder sees it with :meth:`wanted` and may
        let the session go early. It is only a request, never a lock: taking
        the session is still :meth:`acquire_session`. The value tells whether
        the request is visible (``False``: the backend cannot signal here, say
        SQLite on a file system without OFD locks; then the holder lets go at
        its own pace). Other processes see it until the block ends or this
        process ends (on SQLite a read lock in ``<store>.wants``, on PostgreSQL
        a shared advisory lock of the lease connection; see docs/storage.md).
        """
        check_id(session_id, "session id")
        with self._wanting_lock:
            count = self._wanting.get(session_id, 0)
            signalled = count > 0 or self._recorder.want(session_id)
            if signalled:
                self._wanting[session_id] = count + 1
        try:
            yield signalled
        finally:
            if signalled:
                with self._wanting_lock:
                    left = self._wanting[session_id] - 1
                    if left:
                        self._wanting[session_id] = left
                    else:
                        del self._wanting[session_id]
                        self._recorder.unwant(session_id)

    def wanted(self, session_ids: Collection[str]) -> set[str]:
        """Those of ``session_ids`` that another store wants now (see :meth:`want`).

        A snapshot, for a holder that polls: a store never sees its own
        requests, and a look that fails finds none. Two sessions that share a
        lock key may both read as wanted (a holder then lets one go early,
        never anything worse).
        """
        ids = [s for s in session_ids if is_storable_id(s)]
        return self._recorder.wanted(ids) if ids else set()

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store holds ``session_id`` and has not lost it."""
        return self._writer.holds(session_id)

    def lease_lost(self, session_id: str) -> bool:
        """Whether this store lost ``session_id`` since it took it (its writes are refused)."""
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

    # --- due index -------------------------------------------------------------------

    def add_due_listener(
        self, listener: Callable[[dict[str, int | None]], None]
    ) -> Callable[[], None]:
        """Hear of every commit of this store that moved the due index; returns ``remove``.

        ``listener({session_id: due_ms or None})`` runs on the writer thread after the
        commit: short, never waiting for the store. Other processes' commits are not heard.
        """
        return self._projection.add_listener(listener)

    def next_due(self) -> int | None:
        """The earliest ``due_ms`` among sessions nobody holds (see ``due_sessions``)."""
        first = self.due_sessions(None, 1)
        return first[0][1] if first else None

    def due_sessions(self, until_ms: int | None, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` ``(session_id, due_ms)`` of sessions nobody holds, due at or before
        ``until_ms`` (``None``: any time), earliest first."""
        return self._recorder.due_sessions(until_ms, limit, self.holds_lease)

    def claim_due_session(self, session_id: str, now_ms: int) -> bool:
        """Take ``session_id`` to deliver what is due in it; False when that is not for us.

        True: it is held here now and due at ``now_ms`` or its row is unsound (its log
        decides). False, with nothing kept, when it is held elsewhere, not due, or
        ``now_ms`` is no ``int``; on any exception the session is given back.
        """
        if refuses_claim_clock(session_id, now_ms):
            return False
        held = self._writer.held(session_id)
        claimed = False
        try:
            claimed = self._recorder.claim(session_id, now_ms, self.acquire_session)
            return claimed
        finally:  # unless claimed, whatever happened, a session taken by this claim goes back
            if not (claimed or held) and self._writer.held(session_id):
                self.release_session(session_id)

    def _read_states(self, states: dict[str, SessionProjection], unusable: set[str]) -> None:
        """Prime the writer's projection with the durable states just read: the next write
        of such a session reads nothing in its transaction (and rewrites an unusable
        checkpoint)."""
        self._projection.prime(states, unusable)

    def claim_due_sessions(
        self,
        now_ms: int,
        limit: int,
        accept: Callable[[str], bool] | None = None,
        skip: Collection[str] = (),
    ) -> list[str]:
        """Take up to ``limit`` sessions due at ``now_ms`` that nobody holds; the ones taken.

        Earliest first: sessions whose index row is due at ``now_ms`` or unsound (their log
        decides), held neither here nor elsewhere, not in ``skip``, and that ``accept``
        (asked before taking, on the caller's thread) accepts. Each is held here afterwards,
        as after :meth:`claim_due_session`. Nothing is taken when ``now_ms`` is no ``int``;
        on any exception every session taken by this call is given back. See docs/storage.md.
        """
        if _refuses_batch_clock(now_ms):
            return []
        if not is_whole(limit) or limit < 0:
            raise StoreError("limit must be a non-negative integer")
        self._writer.check_open()
        if limit == 0:
            return []
        skipped = frozenset(skip)

        def wanted(session_id: str) -> bool:
            return (
                session_id not in skipped
                and is_storable_id(session_id)
                and not self._writer.held(session_id)
                and (accept is None or accept(session_id))
            )

        taken: list[str] = []
        claimed: list[str] = []
        try:
            claimed = self._recorder.claim_due(
                now_ms, limit, wanted, lambda ids: self._take_many(ids, taken)
            )
        finally:  # what was taken and not kept goes back, whatever happened
            kept = set(claimed)
            back = [session_id for session_id in taken if session_id not in kept]
            if back:
                self.release_sessions(back)
        return claimed

    def release_sessions(self, session_ids: Iterable[str]) -> list[str]:
        """Like :meth:`release_session` for each session, waiting for one flush of them all.

        The flushes are requested together (one commit covers their rows), then each
        session whose rows are durable is given back; the others stay held and are logged.
        Returns the sessions kept (still held here: call again to retry them).
        """
        held = [
            session_id
            for session_id in dict.fromkeys(session_ids)
            if isinstance(session_id, str) and self._writer.held(session_id)
        ]
        if not held:
            return []
        flushes = {session_id: self._writer.request_flush(session_id) for session_id in held}
        wait(flushes.values(), self._writer.time_left())
        free: list[str] = []
        kept: dict[str, list[str]] = {}  # why -> the sessions kept for that reason
        for session_id, flush in flushes.items():
            if not flush.done():
                why = "were not written before the store's close deadline"
                kept.setdefault(why, []).append(session_id)
                continue
            error = flush.exception()
            if error is None or isinstance(error, SessionLeaseError):
                free.append(session_id)  # (lost: nothing of it will be written any more)
            elif isinstance(error, StoreError):
                kept.setdefault(f"are not durable ({error})", []).append(session_id)
            else:  # pragma: no cover - the writer only fails flushes with store errors
                raise error
        for why, sessions in kept.items():
            whose = "its" if len(sessions) == 1 else "their"
            _log.error("keeping %s: %s rows %s", _some_sessions(sessions), whose, why)
        if free:
            self._give_back_many(free)
        return [session_id for sessions in kept.values() for session_id in sessions]

    def _give_back_many(self, free: Sequence[str]) -> None:
        """Give back ``free`` (their rows are durable, or they were lost) in one unlock."""
        with self._ownership:
            given = [session_id for session_id in free if self._writer.give_back(session_id)]
            lost: set[str] = set()
            for session_id in given:
                loss = self._writer.loss(session_id)
                if loss is not None and loss.kind == "lease":
                    lost.add(session_id)
            self._writer.queue_side(self._recorder.unlock_many(given, lost))

    def _take_many(self, session_ids: Sequence[str], into: list[str]) -> list[str]:
        """Take those of ``session_ids`` nobody holds, never waiting; the ones taken (also
        added to ``into`` as each is booked, so a caller can give them back)."""
        got: list[str] = []
        with self._ownership:
            self._writer.check_open()
            fresh = [s for s in dict.fromkeys(session_ids) if not self._writer.held(s)]
            if not fresh:
                return got
            epochs = self._recorder.lock_many(fresh, self._writer.lose_held)
            side: list[SideWrite] = []
            try:
                for session_id in fresh:
                    epoch = epochs.get(session_id)
                    if epoch is None:
                        continue
                    self._writer.take(session_id, epoch)
                    into.append(session_id)
                    got.append(session_id)
                    side.extend(self._recorder.took(session_id))
            except BaseException:  # the writer refused (closed): unbooked locks go back now
                booked = set(got)
                side.extend(self._recorder.unlock_many([s for s in epochs if s not in booked], ()))
                raise
            finally:
                self._writer.queue_side(side)
        for session_id in got:
            _log.debug("took session %r (epoch %d)", session_id, epochs[session_id])
        return got

    def reindex(self) -> int:
        """Rebuild the due index and the schedule checkpoints from the stored logs in one
        transaction (safe while hosts write); the index rows written."""
        self._writer.check_open()
        count = self._recorder.rebuild_index()
        self._projection.clear()
        _log.info("rebuilt the due index of %s: %d sessions", self.label, count)
        return count

    def reindex_session(self, session_id: str) -> DueEntry | None:
        """Rewrite one session's due index row and schedule checkpoint from its log in one
        transaction; the row written (``None``: deleted, nothing due or no such session)."""
        check_id(session_id, "session id")
        self._writer.check_open()
        entry = self._recorder.rebuild_session_index(session_id)
        self._projection.forget(session_id)
        return entry

    # --- closing ---------------------------------------------------------------------

    def start_closing(self, timeout: float | None) -> None:
        """Bound the waits of a shutdown that starts now to ``timeout`` seconds (``None``: none).

        :meth:`release_session` and :meth:`close` then wait at most until that deadline
        (an earlier one stays), so a writer stuck in a commit cannot hold the shutdown.
        """
        self._writer.start_closing(timeout)

    def close(self, timeout: float | None = CLOSE_TIMEOUT) -> None:
        """Write what is queued, stop the writer, give back every session, close; idempotent.

        Raises :class:`StoreWriteError` when that last write failed (its rows were never
        acknowledged); later calls fail with :class:`StoreClosedError`. Waits at most
        ``timeout`` seconds (or an earlier :meth:`start_closing` deadline): a writer not
        done by then runs on as a daemon, pending flushes fail, and its sessions stay
        locked until it finishes or the process exits.
        """
        self._writer.close(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _refuses_batch_clock(now_ms: object) -> bool:
    """:func:`refuses_claim_clock` for a batch claim (no session named)."""
    if is_whole(now_ms):
        return False
    _log.warning(
        "not claiming due sessions: the clock reading is a %s, not whole epoch milliseconds",
        type(now_ms).__name__,
    )
    return True


def _some_sessions(session_ids: Sequence[str]) -> str:
    """``session 'a'``, or ``3 sessions ('a', 'b', 'c')`` (the first five) for a log line."""
    if len(session_ids) == 1:
        return f"session {show_id(session_ids[0])}"
    shown = ", ".join(show_id(s) for s in session_ids[:5])
    return f"{len(session_ids)} sessions ({shown}{', …' if len(session_ids) > 5 else ''})"


def refuses_claim_clock(session_id: str, now_ms: object) -> bool:
    """Whether ``now_ms`` is no clock reading (an ``int``, not a ``bool``); then logs why."""
    if is_whole(now_ms):
        return False
    _log.warning(
        "not claiming session %s: the clock reading is a %s, not whole epoch milliseconds",
        show_id(session_id),
        type(now_ms).__name__,
    )
    return True
