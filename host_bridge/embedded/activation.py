"""Activation for the embedded host: wake cold sessions from the store's due index.

:class:`EmbeddedActivation` implements
:class:`~host_bridge.protocols.SessionActivation`,
:class:`~host_bridge.protocols.SessionPassivation` and
:class:`~host_bridge.protocols.SessionDemand` for
:class:`~host_bridge.embedded.host.EmbeddedHost` (see
:meth:`EmbeddedHost.enable_activation`). It reads the store's due index
(:mod:`host_bridge.embedded.stores`) and takes a session the way every host
does, so a session is live in one host at a time:

* on SQLite the session's lock decides (a session live in another process is
  skipped when listing and refused when claiming);
* on PostgreSQL the claim locks the session's index row ``FOR UPDATE SKIP
  LOCKED`` and takes its lease in the same short transaction, so many hosts
  share the due sessions and two never activate the same one.

An activation resumes the session (its whole log; unfinished inbox entries are
queued again first) and spawns a root agent with the activation's model, in a
worker thread; the plugin installs the owner on ``on_created`` and the owner
delivers what is due. Passivation disposes that agent, detaches the session
and gives it back to the store, unless another root agent (a person's) uses
the session too. A session another process waits to open (its store's
``want``, as ``dsh-schedule chat`` does) reads as wanted
(:meth:`host_bridge.embedded.stores.EventStore.wanted`), so
the wake-up actor hands it over as soon as it is idle.

The log decides, not the index. Once resumed, the session's log is projected
again: when its index row disagrees (damaged by hand, restored from an older
backup), the row is rewritten from the log, and when nothing is due after all
the session is let go at once (``None``: declined) instead of waking an agent,
so a wrong row costs one activation. Rows that are unsound in themselves (a
column that is not an integer, a ``due_ms`` that is not the earlier of the
other two) may never be listed as due, so every :data:`INDEX_AUDIT_MS` the
whole index is checked for them and they are woken at once. Each damaged row
is reported once, as one WARNING line naming the session.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol, TypeVar

from actors._contract import Agent, DueSession
from actors._runtime import run_blocking
from host_bridge._futures import chain
from host_bridge.embedded.agents import EmbeddedAgent, EmbeddedAgentRegistry, Model
from host_bridge.embedded.sessions import EmbeddedSession, EmbeddedSessionStore, SessionError
from host_bridge.embedded.stores import (
    EventStore,
    StoreError,
    index_problem,
    show_id,
)

__all__ = ["FILTER_WINDOW", "INDEX_AUDIT_MS", "ActivatedHost", "EmbeddedActivation"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

FILTER_WINDOW = 1024
"""How many due sessions an ``accept`` filter looks at (the earliest ones)."""

INDEX_AUDIT_MS = 60_000
"""How often (on the host's clock) the whole due index is checked for unsound rows."""

_A = TypeVar("_A")
_R = TypeVar("_R")


class ActivatedHost(Protocol):
    """The parts of :class:`~host_bridge.embedded.host.EmbeddedHost` that activation uses."""

    @property
    def clock(self) -> Callable[[], int]:
        """The host's wall clock (epoch ms)."""
        ...

    @property
    def persistence(self) -> EventStore | None:
        """The durable store (None once the host closed it)."""
        ...

    @property
    def sessions(self) -> EmbeddedSessionStore:
        """The host's live sessions."""
        ...

    @property
    def agents(self) -> EmbeddedAgentRegistry:
        """The host's agents."""
        ...


class EmbeddedActivation:
    """Wakes the embedded host's cold sessions; see the module docstring.

    ``model`` runs the turns of activated agents (default: a model that
    answers nothing). ``workers`` bounds the activations and passivations
    running at once (each resumes or detaches one session on a worker thread).
    ``accept`` limits which sessions are woken (say, the demo's own); it is
    applied to the first :data:`FILTER_WINDOW` due sessions of the index.
    ``audit_ms``: how often the index is checked for unsound rows.
    Close it with :meth:`close` (the host does) after the plugin was disposed.
    """

    def __init__(
        self,
        host: ActivatedHost,
        *,
        model: Model | None = None,
        workers: int = 8,
        accept: Callable[[str], bool] | None = None,
        audit_ms: int = INDEX_AUDIT_MS,
    ) -> None:
        store = host.persistence
        if store is None:
            raise ValueError("activation needs a host with a durable store")
        if isinstance(audit_ms, bool) or not isinstance(audit_ms, int) or audit_ms <= 0:
            raise ValueError("audit_ms must be a positive integer")
        self._host = host
        self._store: EventStore = store
        self._model = model
        self._accept = accept
        self._executor = ThreadPoolExecutor(max(1, workers), thread_name_prefix="dsh-activation")
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = 0  # activations and passivations submitted and not finished
        self._listeners: list[Callable[[], None]] = []
        self._mine: dict[str, EmbeddedAgent] = {}
        self._busy: set[str] = set()  # sessions being activated or passivated now
        self._opening: dict[str, int] = {}  # sessions a host is opening: not activated meanwhile
        self._closed = False
        self._audit_ms = audit_ms
        self._audited_at: int | None = None  # host clock of the last audit (wake-up actor)
        self._reported: set[str] = set()  # sessions whose damaged row was reported, not mended
        self._remove_store_listener = store.add_due_listener(self._on_commit)

    # --- SessionActivation -------------------------------------------------------------

    def next_due(self) -> int | None:
        """The earliest due time among stored sessions no process holds."""
        if self._accept is None:
            return self._store.next_due()
        found = self._filtered(None, 1)
        return found[0].due_ms if found else None

    def due_sessions(self, now_ms: int, limit: int) -> Sequence[DueSession]:
        """Sessions due at ``now_ms`` that no process holds, earliest first.

        When an audit is due (see :data:`INDEX_AUDIT_MS`), sessions whose
        index row is unsound come first, as due at ``now_ms``.
        """
        unsound = self._audit(now_ms)
        if self._accept is not None:
            listed = self._filtered(now_ms, limit)
        else:
            listed = [DueSession(s, d) for s, d in self._store.due_sessions(now_ms, limit)]
        if not unsound:
            return listed
        seen = {item.session_id for item in listed}
        first = [DueSession(s, now_ms) for s in unsound if s not in seen]
        return (first + listed)[:limit]

    def _audit(self, now_ms: int) -> list[str]:
        """Once per ``audit_ms``: the accepted sessions not held here whose row is unsound."""
        last = self._audited_at
        if last is not None and last <= now_ms < last + self._audit_ms:
            return []
        self._audited_at = now_ms
        try:
            found = run_blocking(self._store.unsound_due_rows)  # one scan: off a gevent hub
        except StoreError as error:
            _log.warning("could not check the due index for damaged rows (%s)", error)
            return []
        with self._lock:  # a row mended meanwhile (say, by reindex) is reported anew if it breaks
            self._reported &= {session_id for session_id, _ in found}
        accept = self._accept
        unsound = [
            session_id
            for session_id, _ in found
            if (accept is None or accept(session_id)) and not self._store.holds_lease(session_id)
        ]
        defects = dict(found)
        for session_id in unsound:
            self._report(
                session_id,
                f"the due index row is {defects[session_id]}; waking the session so that its "
                "log decides",
            )
        return unsound

    def _filtered(self, until_ms: int | None, limit: int) -> list[DueSession]:
        accept = self._accept
        assert accept is not None
        window = self._store.due_sessions(until_ms, FILTER_WINDOW)
        return [DueSession(s, d) for s, d in window if accept(s)][:limit]

    def activate(self, session_id: str) -> Future[Agent | None]:
        """Claim, resume and spawn a root agent on a worker thread; None when declined."""
        future: Future[Agent | None] = Future()
        try:
            self._submit(self._activate, session_id, future)
        except RuntimeError as error:  # closed
            future.set_exception(error)
        return future

    def on_due_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Hear of commits that moved the due time of a session not live in this host."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    # --- SessionPassivation ------------------------------------------------------------

    def passivate(self, agent: Agent) -> Future[bool]:
        """Dispose an activated agent and let its session go, on a worker thread."""
        future: Future[bool] = Future()
        try:
            self._submit(self._passivate, agent, future)
        except RuntimeError as error:
            future.set_exception(error)
        return future

    # --- SessionDemand ----------------------------------------------------------------

    def wanted(self, session_ids: Collection[str]) -> set[str]:
        """Those of ``session_ids`` another process waits to open (the store's signal)."""
        return self._store.wanted(session_ids)

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def activated(self) -> int:
        """How many agents this activation spawned that are still live here."""
        with self._lock:
            return len(self._mine)

    @contextlib.contextmanager
    def opening(self, session_id: str) -> Iterator[EmbeddedAgent | None]:
        """Open ``session_id`` in this host without racing its activation.

        For a host that opens a session (a person's chat) while this activation
        may be waking it. Inside the block the session is not activated or
        passivated: an activation or passivation of it that is running is
        waited for first. The value is the agent this activation woke on the
        session, now the caller's (its owner and queued turns go on; it is no
        longer passivated, the caller disposes it and detaches the session when
        done), or ``None``: then the caller spawns its own agent inside the block.
        """
        with self._idle:
            self._opening[session_id] = self._opening.get(session_id, 0) + 1
            self._idle.wait_for(lambda: session_id not in self._busy)
            woken = next((a for a in self._mine.values() if a.session.id == session_id), None)
            if woken is not None:
                del self._mine[woken.id]
        try:
            yield woken
        finally:
            with self._idle:
                left = self._opening[session_id] - 1
                if left:
                    self._opening[session_id] = left
                else:
                    del self._opening[session_id]

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until no activation or passivation runs (demos, tests, shutdown).

        Raises ``TimeoutError`` when work is still running after ``timeout`` seconds.
        """
        with self._idle:
            if not self._idle.wait_for(lambda: self._running == 0, timeout):
                raise TimeoutError("activations are still running")

    def close(self) -> None:
        """Stop listening and wait for the activations and passivations running; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._listeners.clear()
        self._remove_store_listener()
        self._executor.shutdown(wait=True)

    # --- internals ----------------------------------------------------------------------------

    def _submit(
        self,
        work: Callable[[_A], _R],
        argument: _A,
        target: Future[_R],
        executor: ThreadPoolExecutor | None = None,
    ) -> None:
        """Run ``work(argument)`` on a worker (of ``executor``) and settle ``target`` like it.

        Counted for :meth:`wait_idle` until ``target``'s callbacks (the wake-up
        actor's post) have run. Raises ``RuntimeError`` once closed.
        """
        with self._idle:
            self._running += 1
        try:
            running = (executor or self._executor).submit(work, argument)
        except BaseException:
            self._finished()
            raise
        chain(running, target)
        running.add_done_callback(lambda _: self._finished())

    def _finished(self, *_: object) -> None:
        with self._idle:
            self._running -= 1
            self._idle.notify_all()

    def _mark_busy(self, session_ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """Mark sessions busy for :meth:`opening`: ``(marked, left)``, left: a host opens them."""
        marked: list[str] = []
        left: list[str] = []
        with self._idle:
            for session_id in session_ids:
                if session_id in self._opening or session_id in self._busy:
                    left.append(session_id)
                else:
                    self._busy.add(session_id)
                    marked.append(session_id)
        return marked, left

    def _unmark_busy(self, session_ids: Sequence[str]) -> None:
        """Undo :meth:`_mark_busy` for ``session_ids``; a host waiting to open one goes on."""
        with self._idle:
            self._busy.difference_update(session_ids)
            self._idle.notify_all()

    @contextlib.contextmanager
    def _working_on(self, session_id: str) -> Iterator[bool]:
        """Mark ``session_id`` busy for :meth:`opening`; False (unmarked) while a host opens it."""
        with self._idle:
            if session_id in self._opening or session_id in self._busy:
                yield False
                return
            self._busy.add(session_id)
        try:
            yield True
        finally:
            with self._idle:
                self._busy.discard(session_id)
                self._idle.notify_all()

    def _activate(self, session_id: str) -> Agent | None:
        """Activate ``session_id`` unless a host is opening it here (then: declined)."""
        with self._working_on(session_id) as mine:
            return self._claim_and_spawn(session_id) if mine else None

    def _claim_and_spawn(self, session_id: str) -> Agent | None:
        """Claim, resume, spawn; every step that raises gives the session back first.

        The claim and ``resume_claimed`` give it back themselves; a spawn that
        raises is undone by detaching the session (which releases it).
        """
        host = self._host
        if host.sessions.get(session_id) is not None:
            return None  # live here: its owner delivers
        if not self._store.claim_due_session(session_id, host.clock()):
            _log.debug("session %r is held elsewhere or no longer due", session_id)
            return None
        try:
            session = host.sessions.resume_claimed(session_id)
        except SessionError:
            if self._store.load_header(session_id) is not None:
                raise
            self._mend(session_id, "the due index has a row for this session, which is not stored")
            return None
        try:
            due = self._due_after_all(session)
        except BaseException:  # a failed read or a bad clock: give it back, a later pass decides
            host.sessions.detach(session)
            raise
        if not due:
            _log.debug("session %r has nothing due after all; letting it go", session_id)
            host.sessions.detach(session)
            return None
        try:
            agent = host.agents.spawn(session, model=self._model)
        except BaseException:
            host.sessions.detach(session)
            raise
        with self._lock:
            self._mine[agent.id] = agent
        _log.info("woke session %r (agent %r)", session_id, agent.id)
        return agent

    def _due_after_all(self, session: EmbeddedSession) -> bool:
        """Whether the resumed session's log has something due now; a wrong index row is mended.

        The log's answer is its durable schedule state (checkpoint and tail): the
        session was just resumed, so nothing of it is only in memory yet.
        """
        state = self._store.schedule_state(session.id)
        truth = None if state is None else state.entry()
        problem = index_problem(self._store.due_row(session.id), truth)
        if problem is not None:
            self._mend(session.id, problem)
        else:
            with self._lock:
                self._reported.discard(session.id)
        return truth is not None and truth.due_ms <= self._host.clock()

    def _mend(self, session_id: str, problem: str) -> None:
        """Report a wrong index row and rewrite it from the session's stored log."""
        self._report(session_id, f"{problem}; rewriting the row from the log")
        try:
            self._store.reindex_session(session_id)
        except StoreError as error:
            _log.warning("session %s: %s", show_id(session_id), error)
            return
        with self._lock:
            self._reported.discard(session_id)

    def _report(self, session_id: str, text: str) -> None:
        """Log ``text`` about a session's index row: a WARNING the first time, then INFO."""
        with self._lock:
            first = session_id not in self._reported
            self._reported.add(session_id)
        level = logging.WARNING if first else logging.INFO
        _log.log(level, "session %s: %s", show_id(session_id), text)

    def _passivate(self, agent: Agent) -> bool:
        """Let an activated agent's session go, unless a host is opening it (then: declined)."""
        with self._working_on(agent.session.id) as mine:
            return self._let_go(agent) if mine else False

    def _let_go(self, agent: Agent) -> bool:
        host = self._host
        with self._lock:
            mine = self._mine.get(agent.id) is agent
        if not mine or not isinstance(agent, EmbeddedAgent):
            return False
        session = agent.session
        others = [a for a in host.agents.roots() if a is not agent and a.session is session]
        if others:
            with self._lock:
                self._mine.pop(agent.id, None)
            return False  # someone else uses the session: it stays live
        _log.info("letting session %r go (agent %r)", session.id, agent.id)
        host.agents.dispose(agent)
        host.sessions.detach(session)
        with self._lock:
            self._mine.pop(agent.id, None)
        self._notify()
        return True

    def _on_commit(self, moved: dict[str, int | None]) -> None:
        """The store's writer committed index changes (writer thread): tell the listeners."""
        sessions = self._host.sessions
        if any(sessions.get(session_id) is None for session_id in moved):
            self._notify()

    def _notify(self) -> None:
        with self._lock:
            listeners = tuple(self._listeners)
        for listener in listeners:
            try:
                listener()
            except Exception:
                _log.warning("a due-change listener failed", exc_info=True)
