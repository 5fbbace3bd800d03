"""Live sessions of the embedded host: one SessionActor each, backed by the session store.

The store is SQLite by default or PostgreSQL. Either way a session is owned by
one store at a time: creating, resuming, opening or forking a session takes it
in the store first (:meth:`EventStore.acquire_session`), and a session
held elsewhere is refused with :class:`SessionLeaseRefusedError` naming the
holder. A live session whose ownership the store lost reports it through
:attr:`EmbeddedSession.lease_lost`; its appends are refused from then on.

A resumed session is bounded: when the store has the session's schedule state
(its checkpoint and the rows after it, :meth:`EventStore.schedule_state`), the
resume reads only the log from that state's ``next_seq`` on and the inbox
entries it must queue again; ``events`` is still the whole log, its earlier
events read from the store on demand, a page at a time, and not kept. The
session offers that state to Schedule as its ``schedule_checkpoint``
(:class:`~actors._contract.SessionWithCheckpoint`), so neither the resume nor
the owner's first fold walks the log.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeAlias

import pykka

from actors._contract import AppendGuard, SessionDetachedError, wall_clock_ms
from actors._runtime import RuntimeSpec, get_runtime, run_blocking, wait_for
from actors._session_actor import SessionActor, SessionCore
from host_bridge._eventlog import EventLog, LogBackedSession, PagedHistory
from host_bridge._futures import failed, resolved
from host_bridge.embedded.codec import decode_payload, encode_payload, encode_payload_copy
from host_bridge.embedded.inbox import INBOX_EVENT, InboxEntry, message_of, pending_after
from host_bridge.embedded.stores import (
    EventStore,
    SessionLeaseError,
    StoreCorruptError,
    StoreError,
)
from host_bridge.protocols import Session, SessionEvent, SessionHeader
from messages._fold import FoldedSchedules
from messages._mailbox import AppendEvent, DetachSession, FlushSession

__all__ = [
    "CreationGuard",
    "EmbeddedSession",
    "EmbeddedSessionStore",
    "SessionError",
    "SessionHistoryError",
    "SessionLeaseRefusedError",
    "new_session_id",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


CreationGuard: TypeAlias = Callable[[SessionHeader, Sequence[SessionEvent]], None]
"""Judges a new session's header and seed events before it goes live; raises to refuse."""


class SessionError(RuntimeError):
    """A session cannot be created, resumed or forked as asked."""


class SessionHistoryError(SessionError):
    """An early event of a bounded session could not be read from the store."""


@dataclass(frozen=True, slots=True)
class _Resumed:
    """What a resume read: the header, the log from ``base`` on, and what stands for the rest.

    ``history`` reads the events before ``base`` (``None`` when ``base`` is 0),
    ``checkpoint`` is the fold of the log up to ``base`` and ``inbox`` the
    entries before ``base`` whose turns never completed (both only with a base).
    """

    header: SessionHeader
    events: Sequence[SessionEvent]
    base: int = 0
    history: PagedHistory | None = None
    checkpoint: FoldedSchedules | None = None
    inbox: tuple[InboxEntry, ...] = ()


class SessionLeaseRefusedError(SessionLeaseError, SessionError):
    """The session is live in another process or store, so it cannot go live here.

    Both a :class:`SessionError` and the store's :class:`SessionLeaseError`
    (so a :class:`StoreError`); ``holder`` names the owner when it is known.
    """


class EmbeddedSession(LogBackedSession):
    """A live session of the embedded host (implements the ``Session`` protocol).

    Appends and flushes are ordered by the session's :class:`SessionActor`.
    When the actor has nothing unhandled, the caller runs the append or flush
    in the actor's critical section itself (:meth:`SessionCore.enter_if_idle`),
    on any thread or greenlet and on either runtime; otherwise it sends the
    actor a message behind the queued ones and waits for the reply. Either way
    the section orders it, and no call overtakes one queued before it.
    """

    def __init__(
        self,
        header: SessionHeader,
        log: EventLog,
        actor: pykka.ActorRef[SessionActor],
        *,
        core: SessionCore | None = None,
        store: EventStore | None = None,
        checkpoint: FoldedSchedules | None = None,
        inbox: Sequence[InboxEntry] = (),
    ) -> None:
        self._header = header
        self._log = log
        self._actor = actor
        self._core = core
        self._detached = False
        self._store = store
        self._checkpoint = checkpoint
        self._inbox = tuple(inbox)  # unfinished entries before the log's base
        self._inbox_claimed = False
        self._claim_lock = threading.Lock()

    @property
    def schedule_checkpoint(self) -> FoldedSchedules | None:
        """The fold of the log up to where the resume read it from (``None``: not bounded).

        See :class:`~actors._contract.SessionWithCheckpoint`: Schedule folds
        only the events after it.
        """
        return self._checkpoint

    @property
    def bounded(self) -> bool:
        """Whether the early events are read from the store on demand, not held."""
        return self._log.base > 0

    @property
    def actor_ref(self) -> pykka.ActorRef[SessionActor]:
        """The session's actor (for tests and diagnostics)."""
        return self._actor

    @property
    def lease_lost(self) -> bool:
        """Whether the store lost this session since it went live.

        Then another process may own it: flushes resolve ``False`` (or fail),
        every append is refused with :class:`SessionLeaseError`, and the
        session must be detached and resumed to be taken again.
        """
        store = self._store
        return store is not None and store.lease_lost(self.id)

    @property
    def persistent(self) -> bool:
        """Whether appends can become durable (False on a host without persistence)."""
        return self._core is not None and self._core.persistent

    def append(self, type: str, data: Any) -> SessionEvent:
        """Append one event in the session actor's critical section; return it once committed.

        Runs in the caller when the actor is idle. Otherwise it goes through the
        mailbox and the wait follows the caller (:func:`actors._runtime.wait_for`):
        an actor greenlet on the gevent runtime is suspended while the session
        actor (on the same hub or elsewhere) commits, instead of blocking the hub.
        """
        return self._append(type, data, staged=False)

    def append_staged(self, type: str, data: Any) -> SessionEvent:
        """Append one event and open a stage: it reaches the store only at the next flush.

        The event is in the live log at once; every later append of the
        session joins the stage, and the next flush hands the whole stage to
        the store as one unit, durable in one commit (see :class:`SessionCore`).
        """
        return self._append(type, data, staged=True)

    def submit_append(self, type: str, data: Any, *, staged: bool = False) -> Future[SessionEvent]:
        """Append one event like :meth:`append` (``staged``: :meth:`append_staged`), never waiting.

        For callers that must not block (an asyncio loop): when the session
        actor is busy the append goes through its mailbox and the future
        resolves once it is committed; it fails with what ``append`` would
        raise (a payload the log cannot store, a detached session).
        """
        core = self._core
        if core is not None and core.enter_if_idle():
            try:
                return resolved(core.append(type, data, staged=staged))
            except Exception as error:
                return failed(error)
            finally:
                core.leave()
        reply: Future[SessionEvent] = Future()
        try:
            self._actor.tell(AppendEvent(type, data, reply, staged))
        except pykka.ActorDeadError:
            return failed(SessionDetachedError(f"session {self.id!r} is detached"))
        return reply

    def _append(self, type_: str, data: Any, *, staged: bool) -> SessionEvent:
        core = self._core
        if core is not None and core.enter_if_idle():
            try:
                return core.append(type_, data, staged=staged)
            finally:
                core.leave()
        reply: Future[SessionEvent] = Future()
        try:
            self._actor.tell(AppendEvent(type_, data, reply, staged))
        except pykka.ActorDeadError:
            raise SessionDetachedError(f"session {self.id!r} is detached") from None
        return wait_for(reply)

    @property
    def durable_length(self) -> int:
        """How many leading events are known durable (read from the store or covered by a flush)."""
        return 0 if self._core is None else self._core.durable_length

    def on_durable(self, listener: Callable[[int], None]) -> Callable[[], None]:
        """Hear of each flush that makes more of the log durable (``SessionCore.on_durable``)."""
        if self._core is None:
            return lambda: None
        return self._core.on_durable(listener)

    def claim_inbox(self) -> list[InboxEntry]:
        """The first call: inbox entries of the log whose turns never completed; later: ``[]``.

        The first agent that takes over the session re-queues them (see
        :mod:`host_bridge.embedded.inbox`); a fork's inherited events are not
        its own queue.
        """
        with self._claim_lock:
            if self._inbox_claimed:
                return []
            self._inbox_claimed = True
        start = max(self._header.seed_length or 0, self._log.base)  # read at resume before it
        return pending_after(self._inbox, self.events, start)

    def request_flush(self) -> Future[bool]:
        """Queue a flush barrier behind every append made so far."""
        core = self._core
        if core is not None and core.enter_if_idle():
            try:
                future, covered = core.start_flush()
            finally:
                core.leave()
            core.track_progress(future, covered)
            return future
        reply: Future[bool] = Future()
        try:
            self._actor.tell(FlushSession(reply))
        except pykka.ActorDeadError:
            return failed(SessionDetachedError(f"session {self.id!r} is detached"))
        return reply

    def _detach(self) -> None:
        if self._detached:
            return
        self._detached = True
        reply: Future[None] = Future()
        try:
            self._actor.tell(DetachSession(reply))
            wait_for(reply)
            self._actor.stop()
        except (pykka.ActorDeadError, SessionDetachedError):
            pass  # the actor already stopped: nothing more can reach the log

    def __repr__(self) -> str:
        return f"EmbeddedSession({self.id!r}, events={len(self._log)})"


class EmbeddedSessionStore:
    """The embedded host's session service (implements ``SessionStore``).

    Sessions are created, resumed from SQLite or forked into live
    :class:`EmbeddedSession` objects. ``persistence=None`` gives a store whose
    flushes resolve ``False`` (nothing is durable), useful to exercise
    ``persistence_uncertain``. ``runtime`` is where the session actors run
    (see :func:`actors._runtime.get_runtime`); reads and writes of SQLite made
    here run off the hub when called from a gevent hub thread.
    """

    def __init__(
        self,
        persistence: EventStore | None,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        runtime: RuntimeSpec = "threading",
    ) -> None:
        self._persistence = persistence
        self._clock = clock
        self._runtime = get_runtime(runtime)
        self._session_actor = self._runtime.bind(SessionActor)
        self._live: dict[str, EmbeddedSession] = {}
        self._opening: set[str] = set()
        self._guards: list[AppendGuard] = []
        self._creation_guards: list[CreationGuard] = []
        self._lock = threading.Lock()

    @property
    def persistence(self) -> EventStore | None:
        """The persistence listener, if any."""
        return self._persistence

    # --- SessionStore protocol -------------------------------------------------

    def flush(self, session: Session) -> Future[bool]:
        """Durability barrier for ``session``; fails for a detached or unknown session."""
        live = self._live.get(session.id)
        if live is None or live is not session or live.detached:
            return failed(SessionDetachedError(f"session {session.id!r} is not live in this store"))
        return live.request_flush()

    def get(self, session_id: str) -> EmbeddedSession | None:
        """The live session with this id."""
        return self._live.get(session_id)

    def list(self) -> Sequence[EmbeddedSession]:
        """Every live session."""
        with self._lock:
            return tuple(self._live.values())

    # --- lifecycle ---------------------------------------------------------------

    def create(self, session_id: str | None = None) -> EmbeddedSession:
        """Create a new empty session (a fresh id when none is given)."""
        header = SessionHeader(session_id if session_id is not None else new_session_id())
        return self._go_live(header, (), seed_payloads=())

    def resume(self, session_id: str) -> EmbeddedSession:
        """Bring a stored session back to life with its durable log (bounded: see the module)."""
        if self._persistence is None:
            raise SessionError("this store has no persistence to resume from")
        with self._lock:
            if session_id in self._live:
                raise SessionError(f"session {session_id!r} is already live")
        self._acquire(session_id)  # own the session before reading it (another host may write)
        try:
            self._write_queued(session_id)
            return self._go_live_resumed(self._read_stored(session_id))
        except BaseException:
            self._release(session_id)
            raise

    def resume_claimed(self, session_id: str) -> EmbeddedSession:
        """Resume a stored session that the persistence store already holds for this host.

        For activation: the store took the session (``claim_due_session``)
        before it was read. On failure the session is given back.
        """
        if self._persistence is None:
            raise SessionError("this store has no persistence to resume from")
        with self._lock:
            if session_id in self._live:
                raise SessionError(f"session {session_id!r} is already live")
        try:
            self._write_queued(session_id)
            return self._go_live_resumed(self._read_stored(session_id))
        except BaseException:
            self._release(session_id)
            raise

    def open(self, session_id: str) -> EmbeddedSession:
        """The live session, else the stored one resumed, else a new one with that id."""
        live = self.get(session_id)
        if live is not None:
            return live
        if self._persistence is not None:
            self._write_queued(session_id)
            if run_blocking(self._persistence.load_header, session_id) is not None:
                return self.resume(session_id)
        return self.create(session_id)

    def fork(
        self, parent: Session, *, at: int | None = None, session_id: str | None = None
    ) -> EmbeddedSession:
        """A child session seeded with ``parent.events[:at]`` (the whole log by default)."""
        events = parent.events
        boundary = len(events) if at is None else at
        if isinstance(boundary, bool) or not 0 <= boundary <= len(events):
            raise SessionError(f"fork boundary {boundary!r} is outside 0..{len(events)}")
        header = SessionHeader(
            session_id if session_id is not None else new_session_id(),
            seed_length=boundary,
            parent_session=parent.id,
        )
        seed = tuple(events[:boundary])
        return self._go_live(
            header, seed, seed_payloads=tuple(encode_payload(e.data) for e in seed)
        )

    def detach(self, session: Session) -> None:
        """Take a session offline: later appends and flushes fail."""
        with self._lock:
            live = self._live.get(session.id)
            if live is None or live is not session:
                return  # not live here (a stale handle must not detach its successor)
            del self._live[session.id]
        live._detach()
        if self._persistence is not None:
            self._persistence.forget(session.id)  # its rows stay; the bookkeeping goes
            self._release(session.id)

    def add_append_guard(self, guard: AppendGuard) -> Callable[[], None]:
        """Judge every later append of every session; returns ``remove``."""
        with self._lock:
            self._guards.append(guard)

        def remove() -> None:
            with self._lock:
                if guard in self._guards:
                    self._guards.remove(guard)

        return remove

    def add_creation_guard(self, guard: CreationGuard) -> Callable[[], None]:
        """Judge every later new session (created or forked) before it is stored or live.

        ``guard(header, seed_events)`` raises to refuse it: the create or fork
        call raises that error and nothing of the session is stored. Resumed
        sessions are not judged (they were created before). Returns ``remove``.
        """
        with self._lock:
            self._creation_guards.append(guard)

        def remove() -> None:
            with self._lock:
                if guard in self._creation_guards:
                    self._creation_guards.remove(guard)

        return remove

    def close(self) -> None:
        """Detach every live session (the persistence store is closed by its owner)."""
        for session in self.list():
            self.detach(session)

    def _write_queued(self, session_id: str) -> None:
        """Make rows still queued for ``session_id`` (e.g. of a detached session) durable.

        Reads see durable state only; without this a resume after an unflushed
        detach would miss events the store is about to write.
        """
        assert self._persistence is not None
        try:
            wait_for(self._persistence.flush(session_id))
        except StoreError as error:
            raise SessionError(
                f"cannot read session {session_id!r}: its queued events are not durable ({error})"
            ) from None

    def _read_stored(self, session_id: str) -> _Resumed:
        """Read a stored session to resume: bounded when the store has its schedule state."""
        assert self._persistence is not None
        bounded = self._read_bounded(session_id)
        if bounded is not None:
            return bounded
        stored = run_blocking(self._persistence.load, session_id)
        if stored is None:
            raise SessionError(f"no stored session {session_id!r}")
        return _Resumed(stored.header, stored.events)

    def _read_bounded(self, session_id: str) -> _Resumed | None:
        """The session from its schedule state on, or ``None`` to read its whole log.

        The state (the store's checkpoint and the rows after it) is as of its
        ``next_seq``: the log is read from there, with the inbox entries before
        it that it names as unfinished. Anything that does not fit (a corrupt
        stream, a state that disagrees with the log) reads the whole log instead.
        """
        persistence = self._persistence
        assert persistence is not None
        state = run_blocking(persistence.schedule_state, session_id)
        if state is None or state.told or state.folded is None:
            return None  # not stored, or a corrupt stream: the whole log says how
        base = state.next_seq
        try:
            tail = run_blocking(persistence.load_tail, session_id, base)
        except StoreCorruptError:
            return None  # (a gap in its seqs, a damaged tail): the whole log's read says where
        if tail is None:
            return None
        seed = tail.header.seed_length or 0
        if state.seed_length != seed or not seed <= base <= tail.length:
            _log.warning("session %r: its schedule state does not fit its log", session_id)
            return None
        if base == 0:
            return _Resumed(tail.header, tail.events)
        seqs = sorted({*state.pending, *state.unfinished})
        found = run_blocking(persistence.load_events_at, session_id, seqs) if seqs else {}
        inbox: list[InboxEntry] = []
        for seq in seqs:
            event = found.get(seq)
            message = None if event is None or event.type != INBOX_EVENT else message_of(event.data)
            if message is None:
                _log.warning(
                    "session %r: its schedule state names no inbox entry at %d", session_id, seq
                )
                return None
            inbox.append(InboxEntry(seq, message))
        checkpoint = FoldedSchedules(state.folded.active, state.folded.seen_ids, seed, base)
        history = PagedHistory(self._history_reader(session_id), base)
        return _Resumed(tail.header, tail.events, base, history, checkpoint, tuple(inbox))

    def _history_reader(self, session_id: str) -> Callable[[int, int], Sequence[SessionEvent]]:
        """Reads events ``start … stop-1`` of a bounded session from the store (durable)."""
        persistence = self._persistence
        assert persistence is not None

        def read(start: int, stop: int) -> Sequence[SessionEvent]:
            try:
                return run_blocking(persistence.load_events, session_id, start, stop)
            except StoreError:
                raise SessionHistoryError(
                    f"cannot read events {start}..{stop - 1} of session {session_id!r}"
                ) from None

        return read

    def _go_live_resumed(self, resumed: _Resumed) -> EmbeddedSession:
        return self._go_live(
            resumed.header,
            resumed.events,
            seed_payloads=None,
            leased=True,
            base=resumed.base,
            history=resumed.history,
            checkpoint=resumed.checkpoint,
            inbox=resumed.inbox,
        )

    def _acquire(self, session_id: str) -> None:
        """Take the session in the persistence store; refused when it is held elsewhere."""
        if self._persistence is None:
            return
        try:
            run_blocking(self._persistence.acquire_session, session_id)
        except SessionLeaseError as error:
            raise SessionLeaseRefusedError(
                str(error), session_id=session_id, holder=error.holder
            ) from None
        except StoreError as error:
            raise SessionError(f"cannot take session {session_id!r}: {error}") from None

    def _release(self, session_id: str) -> None:
        if self._persistence is None:
            return
        try:
            run_blocking(self._persistence.release_session, session_id)
        except StoreError as error:
            _log.warning("releasing session %r failed: %s", session_id, error)

    def _current_guards(self) -> Sequence[AppendGuard]:
        return tuple(self._guards)

    def _go_live(
        self,
        header: SessionHeader,
        events: Sequence[SessionEvent],
        *,
        seed_payloads: Sequence[bytes] | None,
        leased: bool = False,
        base: int = 0,
        history: PagedHistory | None = None,
        checkpoint: FoldedSchedules | None = None,
        inbox: Sequence[InboxEntry] = (),
    ) -> EmbeddedSession:
        if not isinstance(header.id, str) or not header.id:
            raise SessionError("a session id must be a non-empty string")
        if seed_payloads is not None:  # a new session (created or forked), not a resumed one
            with self._lock:
                creation_guards = tuple(self._creation_guards)
            for guard in creation_guards:
                guard(header, events)
        with self._lock:  # reserve the id; the store write below may suspend this greenlet
            if header.id in self._live or header.id in self._opening:
                raise SessionError(f"session {header.id!r} is already live")
            self._opening.add(header.id)
        acquired = False
        try:
            if not leased:
                self._acquire(header.id)
                acquired = True
            if seed_payloads is not None and self._persistence is not None:
                try:
                    run_blocking(
                        self._persistence.create_session,
                        header,
                        tuple(zip(events, seed_payloads, strict=True)),
                    )
                except StoreError as error:
                    raise SessionError(f"cannot create session {header.id!r}: {error}") from None
            log = EventLog(events, base=base, history=history, checkpoint=checkpoint)
            core = SessionCore(
                header,
                log,
                listener=self._persistence,
                encode=encode_payload,
                decode=decode_payload,
                encode_copy=encode_payload_copy,
                clock=self._clock,
                guards=self._current_guards,
                durable_length=len(log) if seed_payloads is None else 0,  # resumed: all durable
            )
            actor = self._session_actor.start(core)
            session = EmbeddedSession(
                header,
                log,
                actor,
                core=core,
                store=self._persistence,
                checkpoint=checkpoint,
                inbox=inbox,
            )
            with self._lock:
                self._live[header.id] = session
        except BaseException:
            if acquired:
                self._release(header.id)
            raise
        finally:
            with self._lock:
                self._opening.discard(header.id)
        _log.debug("session %r is live with %d events (%d held)", header.id, len(log), len(events))
        return session


def new_session_id() -> str:
    """A fresh session id (``session-`` and 12 hex digits)."""
    return f"session-{uuid.uuid4().hex[:12]}"
