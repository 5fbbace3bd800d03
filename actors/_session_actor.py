"""SessionActor: owns one session's live log, serialises appends, mediates flush barriers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future
from types import TracebackType
from typing import Any, Protocol, cast

from actors._base import MailboxActor
from actors._contract import AppendGuard, SessionDetachedError, SessionEvent, SessionHeader
from actors._futures import failed, resolved, resolved_true, settle, settle_exception
from messages._mailbox import AppendEvent, DetachSession, FlushSession

__all__ = [
    "AppendGuard",
    "PersistenceListener",
    "SessionActor",
    "SessionCore",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


class PersistenceListener(Protocol):
    """Where a SessionActor writes its events behind and asks for durability."""

    def record_append(self, session_id: str, event: SessionEvent, payload: bytes) -> None:
        """Queue one committed event for the next durable commit (never blocks on disk)."""
        ...

    def record_appends(self, session_id: str, rows: Sequence[tuple[SessionEvent, bytes]]) -> None:
        """Queue consecutive committed events as one unit: durable in the same commit or not at all.

        Used to hand over a stage (see :class:`SessionCore`). Raising queues none of them.
        """
        ...

    def flush(self, session_id: str) -> Future[bool]:
        """Resolve True once everything queued for the session before this call is durable."""
        ...


class _Counted(Protocol):
    """An actor inbox that counts every ``put`` (``queue.Queue`` and the gevent inbox do)."""

    unfinished_tasks: int


class EventSink(Protocol):
    """The log a SessionActor appends to (an :class:`host_bridge._eventlog.EventLog`)."""

    def __len__(self) -> int: ...

    def snapshot(self) -> Sequence[SessionEvent]: ...

    def append(self, type_: str, time_ms: int, data: object) -> SessionEvent: ...


class SessionCore:
    """One live session's state and its append/flush logic: the SessionActor's critical section.

    Every append and flush runs inside :meth:`section`, a lock the session's
    :class:`SessionActor` takes for each message it handles. A caller may
    also run an append or flush itself, on its own thread (or greenlet),
    when the actor has nothing unhandled: :meth:`enter_if_idle` takes the
    section only if every message ever put into the actor's inbox was
    handled already, so such a call never overtakes a queued one, and the
    actor (which takes the same section) never runs beside it. The section
    is therefore still the single point that orders a session's appends and
    flushes, and a flush still goes to the persistence listener (group
    commit happens there); it just saves the two thread hand-offs of a
    mailbox round trip. Nothing inside the section waits for another
    thread or switches greenlets, and no callback runs in it (durable
    progress is tracked after leaving, see :meth:`track_progress`).

    **Staged appends.** ``append(..., staged=True)`` opens a *stage*: the event
    is in the live log at once (its seq is assigned, snapshots show it) but is
    kept from the persistence listener, and so is every later append of the
    session, until a flush or :meth:`commit_staged` hands the whole stage over
    in one :meth:`PersistenceListener.record_appends` call, so it reaches the
    store in one commit or not at all. A host uses this to make an agent's
    queued follow-up and the plugin appends that follow it while the agent is
    reserved (Schedule's ``dispatch``, one per member of a batch) durable
    together, committing the stage when the reservation is released. A stage
    still open when the session detaches is never handed over.

    **Encoding.** An append keeps in the live log exactly what a resume would
    read: ``decode(encode(data))``, or ``encode_copy(data)``'s copy when given
    (the bytes and that value from one walk, without decoding).

    **Durable progress.** Every flush that resolves ``True`` covers the first
    :attr:`durable_length` events; :meth:`on_durable` listeners hear of each
    advance (on the thread that settled the flush: keep them short).
    """

    def __init__(
        self,
        header: SessionHeader,
        log: EventSink,
        *,
        listener: PersistenceListener | None,
        encode: Callable[[object], bytes],
        decode: Callable[[bytes], object],
        clock: Callable[[], int],
        guards: Callable[[], Sequence[AppendGuard]] = tuple,
        durable_length: int = 0,
        encode_copy: Callable[[object], tuple[bytes, object]] | None = None,
    ) -> None:
        self.header = header
        self._log = log
        self._listener = listener
        self._encode = encode
        self._decode = decode
        self._encode_copy = encode_copy
        self._clock = clock
        self._guards = guards
        self.detached = False
        self._staged: list[tuple[SessionEvent, bytes]] = []
        self._progress_lock = threading.Lock()  # durable progress settles on the store's thread
        self._durable_length = durable_length  # e.g. the events a resume read from the store
        self._durable_listeners: list[Callable[[int], None]] = []
        self.section = threading.Lock()
        """The critical section: held by the actor per message and by an inline caller."""
        self._inbox: _Counted | None = None  # the serving actor's inbox, once it serves
        self.handled = 0
        """Messages the serving actor finished (written by its thread only)."""

    def serve(self, inbox: _Counted) -> None:
        """Called by the :class:`SessionActor` that serialises this core, with its inbox."""
        self._inbox = inbox

    def enter_if_idle(self) -> bool:
        """Take :attr:`section` when the actor has nothing unhandled; else ``False``.

        The inbox counts every ``put`` (``unfinished_tasks``) before the sender's
        ``tell`` returns, and the actor counts a message in :attr:`handled` only
        after handling it; so equality means no message is queued or being
        handled, and a message put from now on is concurrent with this caller.
        On ``True`` the caller must :meth:`leave`.
        """
        inbox = self._inbox
        if inbox is None:
            return False
        self.section.acquire()
        if inbox.unfinished_tasks == self.handled:
            return True
        self.section.release()
        return False

    def leave(self) -> None:
        """Release :attr:`section` after :meth:`enter_if_idle` returned ``True``."""
        self.section.release()

    @property
    def persistent(self) -> bool:
        """Whether a persistence listener can make appends durable (else every flush is False)."""
        return self._listener is not None

    @property
    def staged(self) -> int:
        """How many staged appends wait to be handed to the persistence listener."""
        return len(self._staged)

    @property
    def durable_length(self) -> int:
        """How many leading events a successful flush of this core has covered so far."""
        with self._progress_lock:
            return self._durable_length

    def append(self, type_: str, data: Any, *, staged: bool = False) -> SessionEvent:
        """Judge, encode, write behind and commit one event to the live log.

        ``staged``: open a stage (see the class docstring). While a stage is
        open every append joins it, staged or not; a flush or
        :meth:`commit_staged` hands it over.
        """
        if self.detached:
            raise self.detached_error()
        if not isinstance(type_, str) or not type_:
            raise ValueError("event type must be a non-empty string")
        for guard in self._guards():
            guard(self.header, self._log.snapshot(), type_, data)
        encode_copy = self._encode_copy
        if encode_copy is not None:  # one walk gives both
            payload, stored = encode_copy(data)
        else:
            payload = self._encode(data)
            stored = self._decode(payload)  # the live log holds exactly what a resume reads
        time_ms = self._clock()
        seq = len(self._log)
        listener = self._listener
        if listener is None:
            return self._log.append(type_, time_ms, stored)
        if staged or self._staged:
            appended = self._log.append(type_, time_ms, stored)
            self._staged.append((appended, payload))
            return appended
        listener.record_append(self.header.id, SessionEvent(type_, seq, time_ms, stored), payload)
        return self._log.append(type_, time_ms, stored)

    def commit_staged(self) -> None:
        """Hand every staged event to the persistence listener now, as one unit.

        Raises what the listener raises (the events then stay staged), or
        :class:`SessionDetachedError` after detaching.
        """
        if not self._staged:
            return
        if self.detached:
            raise self.detached_error()
        assert self._listener is not None  # nothing is staged without a listener
        self._listener.record_appends(self.header.id, list(self._staged))
        self._staged.clear()

    def flush(self) -> Future[bool]:
        """A barrier covering every append so far, staged ones included (failed when detached).

        :meth:`start_flush` followed by :meth:`track_progress`; inside the
        section, call those two apart (the second after leaving it).
        """
        future, covered = self.start_flush()
        self.track_progress(future, covered)
        return future

    def start_flush(self) -> tuple[Future[bool], int]:
        """Request a barrier covering every append so far; returns it and the length it covers.

        Runs no callback: pass both to :meth:`track_progress` (outside the
        section) so durable-progress listeners hear of it.
        """
        if self.detached:
            return failed(self.detached_error()), 0
        if self._listener is None:
            return resolved(False), 0
        try:
            self.commit_staged()
            covered = len(self._log)
            future = self._listener.flush(self.header.id)
        except Exception as error:
            _log.warning("persistence listener refused a flush of session %r", self.header.id)
            return failed(error), 0
        return future, covered

    def track_progress(self, future: Future[bool], covered: int) -> None:
        """Advance :attr:`durable_length` to ``covered`` when ``future`` resolves ``True``.

        A flush covering no more than is durable already (a preflight with
        nothing new) is not watched: it could advance nothing.
        """
        if covered > self._durable_length:  # (only grows: a stale read just watches)
            future.add_done_callback(lambda done: self._settled(done, covered))

    def on_durable(self, listener: Callable[[int], None]) -> Callable[[], None]:
        """Call ``listener(durable_length)`` whenever a flush makes more events durable.

        Returns ``unsubscribe``. A listener runs where the flush settles (the
        store's writer thread, or inline when the flush was already settled)
        and must not wait for a flush; exceptions it raises are logged.
        """
        with self._progress_lock:
            self._durable_listeners.append(listener)

        def unsubscribe() -> None:
            with self._progress_lock:
                if listener in self._durable_listeners:
                    self._durable_listeners.remove(listener)

        return unsubscribe

    def detached_error(self) -> SessionDetachedError:
        """The error of every append or flush after detaching."""
        return SessionDetachedError(f"session {self.header.id!r} is detached")

    def _settled(self, done: Future[bool], covered: int) -> None:
        if not resolved_true(done):
            return
        with self._progress_lock:
            if covered <= self._durable_length:
                return
            self._durable_length = covered
            listeners = tuple(self._durable_listeners)
        for listener in listeners:
            try:
                listener(covered)
            except Exception:
                _log.exception("durable-progress listener of session %r failed", self.header.id)


class SessionActor(MailboxActor):
    """One live session. It orders the session's appends and flush barriers.

    A :class:`~messages._mailbox.FlushSession` handled after an append covers
    that append, because every append was handed to the persistence listener
    before the actor took the next message. Coalescing of concurrent barriers
    into one durable commit happens in the listener (group commit). The host
    keeps a reference to the same :class:`SessionCore`.

    The order is kept by the core's critical section (:attr:`SessionCore.section`),
    which this actor holds while it handles a message. A caller that finds
    the actor with nothing unhandled runs its append or flush in the same
    section itself (:meth:`SessionCore.enter_if_idle`) instead of sending a
    message and waiting for the reply: the same order, without the two
    thread hand-offs. A busy actor is never overtaken: the caller then sends
    its message behind the others.
    """

    def __init__(self, core: SessionCore) -> None:
        super().__init__()
        self._core = core
        core.serve(cast(_Counted, self.actor_inbox))  # queue.Queue or GeventInbox

    def on_receive(self, message: Any) -> Any:
        """Handle one message, then count it handled (see :meth:`SessionCore.enter_if_idle`)."""
        try:
            return super().on_receive(message)
        finally:
            self._core.handled += 1

    @property
    def core(self) -> SessionCore:
        """The session state this actor serialises."""
        return self._core

    def handle_AppendEvent(self, message: AppendEvent) -> None:
        """Judge, encode, write behind and commit one event to the live log."""
        core = self._core
        try:
            with core.section:
                event = core.append(message.type, message.data, staged=message.staged)
        except BaseException as error:
            settle_exception(message.reply, error)
        else:
            settle(message.reply, event)

    def handle_FlushSession(self, message: FlushSession) -> None:
        """Start a flush barrier covering every append handled so far."""
        core = self._core
        with core.section:
            future, covered = core.start_flush()
        core.track_progress(future, covered)
        _forward(future, message.reply)

    def handle_DetachSession(self, message: DetachSession) -> None:
        """Detach: every later append or flush is rejected."""
        with self._core.section:
            self._core.detached = True
        settle(message.reply, None)

    def on_stop(self) -> None:
        """Fail the replies of messages still queued: pykka drops unanswered ``tell``s."""
        self._reject_leftovers()

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Like :meth:`on_stop`: nobody may wait forever on a dead session."""
        self._reject_leftovers()

    def _reject_leftovers(self) -> None:
        with self._core.section:
            self._core.detached = True
        kept: list[Any] = []
        while not self.actor_inbox.empty():  # only this thread takes from the inbox
            envelope = self.actor_inbox.get()
            message = envelope.message
            if isinstance(message, AppendEvent | FlushSession | DetachSession):
                settle_exception(message.reply, self._core.detached_error())
            else:
                kept.append(envelope)  # asks: pykka answers them with ActorDeadError
        for envelope in kept:
            self.actor_inbox.put(envelope)


def _forward(source: Future[bool], target: Future[bool]) -> None:
    def _copy(done: Future[bool]) -> None:
        try:
            value = done.result(timeout=0)
        except CancelledError:
            settle_exception(target, CancelledError())
        except BaseException as error:  # the flush's own failure, copied as it is
            settle_exception(target, error)
        else:
            settle(target, value is True)

    source.add_done_callback(_copy)
