"""A fake of the optional activation contract: cold sessions a test can wake and let go.

:class:`FakeActivation` implements :class:`~host_bridge.SessionActivation`
and :class:`~host_bridge.SessionPassivation` over a
:class:`~host_bridge.testing.FakeHost`. A test *stores* cold sessions (their
events); their due time is the fold's earliest target, as a real host's due
index says (or a wrong one the test gives, as a damaged index would say).
Activating one decides from its log, as a real host does: nothing due at the
clock's time → the index takes the log's due time and the activation is
declined; else it becomes a live :class:`FakeSession` of the host with
a new root agent (``on_created`` runs, so an installed plugin gives it an owner);
passivating disposes the agent and takes the session cold again with whatever
its log gained. Sessions can be marked live elsewhere (activation declines
them), activations can be held pending, and every call is journaled::

    ("activate", session_id)  ("activated", session_id, agent_id | None)
    ("passivate", agent_id)   ("passivated", agent_id, released)

:class:`FakeColdActivation` also implements :class:`~host_bridge.ColdDelivery`:
a pass takes due cold sessions (not live elsewhere, not skipped) up to its
limit, decides each from its log at the host clock's time with the owner's
rules, appends the ``dispatch`` changes to the stored log (the reminder
message is kept in :attr:`FakeColdActivation.delivered`) and hands back the
sessions a test marked as owing a turn, and reports stuck the ones it marked
stuck (:meth:`FakeColdActivation.stick`). Passes can be held pending or made to
fail, and are journaled::

    ("cold-pass", limit, skipped_ids)  ("cold-delivered", session_id, schedule_ids)
    ("cold-handed-back", session_id)   ("cold-stuck", session_id)
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any

from actors._contract import Agent, ColdPass, DueSession, SessionEvent
from host_bridge.testing._host import FakeHost
from host_bridge.testing._sessions import FakeSession
from messages._delivery import (
    DeliverBatch,
    DeliverNow,
    ReminderDelivery,
    plan_delivery,
    reminder_delivery,
)
from messages._errors import ScheduleLogError
from messages._fold import fold_schedule_events
from messages._records import SCHEDULE_CHANGE_TYPE

__all__ = ["FakeActivation", "FakeColdActivation"]


class FakeActivation:
    """Cold sessions of a :class:`FakeHost` that Schedule's wake-up actor can activate.

    ``hold``: activations stay pending until :meth:`complete` (to test bounded
    concurrency and dispose). ``fail_next``: the next ``due_sessions`` /
    ``next_due`` call raises (a store outage).
    """

    def __init__(self, host: FakeHost, *, hold: bool = False) -> None:
        self.host = host
        self.hold = hold
        self.fail_next = 0
        self._lock = threading.Lock()
        self._cold: dict[str, tuple[tuple[SessionEvent, ...], int | None, int | None]] = {}
        self._elsewhere: set[str] = set()
        self._kept: set[str] = set()
        self._held: dict[str, Future[Agent | None]] = {}
        self._listeners: list[Callable[[], None]] = []
        self._ids = itertools.count(1)
        self.activated: list[Agent] = []

    # --- scripting --------------------------------------------------------------------------

    def store(
        self,
        session_id: str,
        events: Iterable[SessionEvent | tuple[str, Any]],
        *,
        seed_length: int | None = None,
        index_ms: int | None = None,
    ) -> int | None:
        """Keep a cold session with these events; returns its due time (None: nothing active).

        ``index_ms``: the due time the index says instead of the log's (a damaged row).
        """
        built = FakeSession(session_id, seed_events=events, seed_length=seed_length).events
        due = _due(built, seed_length)
        with self._lock:
            indexed = due if index_ms is None else index_ms
            self._cold[session_id] = (tuple(built), indexed, seed_length)
        return due

    def due_of(self, session_id: str) -> int | None:
        """The due time of a cold session (None: none, or not cold)."""
        with self._lock:
            cold = self._cold.get(session_id)
        return None if cold is None else cold[1]

    def is_cold(self, session_id: str) -> bool:
        """Whether the session is stored and not live here."""
        with self._lock:
            return session_id in self._cold

    def live_elsewhere(self, session_id: str, live: bool = True) -> None:
        """Mark a session as live in another host: listed no more, activation declines it."""
        with self._lock:
            if live:
                self._elsewhere.add(session_id)
            else:
                self._elsewhere.discard(session_id)

    def keep_open(self, agent_id: str) -> None:
        """A person has this agent's session open: passivation answers False."""
        with self._lock:
            self._kept.add(agent_id)

    def moved(self) -> None:
        """Tell the listeners that the due index moved."""
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def complete(self, session_id: str) -> Agent | None:
        """Finish a held activation now (as it would have finished at once)."""
        with self._lock:
            future = self._held.pop(session_id)
        agent = self._bring_back(session_id)
        future.set_result(agent)
        return agent

    @property
    def held(self) -> list[str]:
        """Sessions whose activation is pending (``hold``)."""
        with self._lock:
            return list(self._held)

    @property
    def listeners(self) -> int:
        """How many due-change listeners are subscribed."""
        with self._lock:
            return len(self._listeners)

    # --- SessionActivation ------------------------------------------------------------------

    def next_due(self) -> int | None:
        """The earliest due time among cold sessions not live elsewhere."""
        self._maybe_fail()
        with self._lock:
            dues = [
                c[1] for s, c in self._cold.items() if c[1] is not None and s not in self._elsewhere
            ]
        return min(dues, default=None)

    def due_sessions(self, now_ms: int, limit: int) -> Sequence[DueSession]:
        """Cold sessions due at ``now_ms`` (not live elsewhere), earliest first."""
        self._maybe_fail()
        with self._lock:
            due = sorted(
                (c[1], s)
                for s, c in self._cold.items()
                if c[1] is not None and c[1] <= now_ms and s not in self._elsewhere
            )
        return [DueSession(s, d) for d, s in due[:limit]]

    def activate(self, session_id: str) -> Future[Agent | None]:
        """Bring the session back with a new root agent (at once unless ``hold``)."""
        self._record("activate", session_id)
        future: Future[Agent | None] = Future()
        if self.hold:
            with self._lock:
                self._held[session_id] = future
            return future
        future.set_result(self._bring_back(session_id))
        return future

    def on_due_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Subscribe to :meth:`moved`."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    # --- SessionPassivation -----------------------------------------------------------------

    def passivate(self, agent: Agent) -> Future[bool]:
        """Dispose the agent and take its session cold again (False when kept open)."""
        self._record("passivate", agent.id)
        future: Future[bool] = Future()
        with self._lock:
            kept = agent.id in self._kept
        if kept:
            self._record("passivated", agent.id, False)
            future.set_result(False)
            return future
        session = agent.session
        self.host.agents.dispose(agent)
        if isinstance(session, FakeSession):
            self.host.sessions.remove(session)
            session.detach()
        events = tuple(session.events)
        seed = session.header.seed_length
        with self._lock:
            self._cold[session.id] = (events, _due(events, seed), seed)
        self._record("passivated", agent.id, True)
        future.set_result(True)
        self.moved()
        return future

    # --- internals ----------------------------------------------------------------------------

    def _bring_back(self, session_id: str) -> Agent | None:
        now = self.host.clock()
        with self._lock:
            cold = self._cold.get(session_id)
            truth = None if cold is None else _due(cold[0], cold[2])
            if cold is None or session_id in self._elsewhere:
                agent_id = None
            elif truth is None or truth > now:  # nothing due after all: the log corrects the index
                self._cold[session_id] = (cold[0], truth, cold[2])
                agent_id = None
            else:
                del self._cold[session_id]
                agent_id = f"woken-{next(self._ids)}"
        if agent_id is None or cold is None:
            self._record("activated", session_id, None)
            return None
        agent = self.host.spawn_root(agent_id, session_id, seed_events=cold[0], seed_length=cold[2])
        with self._lock:
            self.activated.append(agent)
        self._record("activated", session_id, agent.id)
        return agent

    def _maybe_fail(self) -> None:
        with self._lock:
            if self.fail_next <= 0:
                return
            self.fail_next -= 1
        raise RuntimeError("the due index cannot be read (injected)")

    def _record(self, kind: str, *fields: Any) -> None:
        self.host.journal.record(kind, *fields)


class FakeColdActivation(FakeActivation):
    """A :class:`FakeActivation` that also delivers cold (see the module docstring).

    ``hold_passes``: passes stay pending until :meth:`finish_pass`.
    ``fail_passes``: that many next passes fail (their future raises).
    """

    def __init__(self, host: FakeHost, *, hold: bool = False, hold_passes: bool = False) -> None:
        super().__init__(host, hold=hold)
        self.hold_passes = hold_passes
        self.fail_passes = 0
        self.delivered: list[tuple[str, ReminderDelivery]] = []
        self._owing: set[str] = set()
        self._stuck: set[str] = set()
        self._waiting = 0
        self._pending: list[tuple[Future[ColdPass], int, frozenset[str]]] = []

    # --- scripting --------------------------------------------------------------------------

    def owe_turn(self, session_id: str, owed: bool = True) -> None:
        """Mark a stored session as owing a turn: a pass hands it back instead of delivering."""
        with self._lock:
            if owed:
                self._owing.add(session_id)
            else:
                self._owing.discard(session_id)

    def stick(self, session_id: str, stuck: bool = True) -> None:
        """Make passes report a stored session stuck (due, not deliverable), not deliver it."""
        with self._lock:
            if stuck:
                self._stuck.add(session_id)
            else:
                self._stuck.discard(session_id)

    def report_waiting(self, count: int) -> None:
        """Make the next passes report ``count`` deliveries whose commit failed."""
        with self._lock:
            self._waiting = count

    @property
    def pending_passes(self) -> int:
        """How many passes are held (``hold_passes``)."""
        with self._lock:
            return len(self._pending)

    def finish_pass(self) -> ColdPass:
        """Run the oldest held pass now and settle its future with the result."""
        with self._lock:
            future, limit, skip = self._pending.pop(0)
        result = self._run_pass(limit, skip)
        future.set_result(result)
        return result

    # --- ColdDelivery -----------------------------------------------------------------------

    def deliver_due(self, now_ms: int, limit: int, skip: frozenset[str]) -> Future[ColdPass]:
        """One pass (at once unless ``hold_passes``); ``now_ms`` only picks the due sessions."""
        self._record("cold-pass", limit, tuple(sorted(skip)))
        future: Future[ColdPass] = Future()
        with self._lock:
            failing = self.fail_passes > 0
            if failing:
                self.fail_passes -= 1
        if failing:
            future.set_exception(RuntimeError("the store cannot be written (injected)"))
        elif self.hold_passes:
            with self._lock:
                self._pending.append((future, limit, skip))
        else:
            future.set_result(self._run_pass(limit, skip))
        return future

    def _run_pass(self, limit: int, skip: frozenset[str]) -> ColdPass:
        now = self.host.clock()
        due = [d.session_id for d in self.due_sessions(now, 1_000_000) if d.session_id not in skip]
        taken = due[:limit]
        handed_back: list[str] = []
        stuck: list[str] = []
        delivered = 0
        for session_id in taken:
            with self._lock:
                owing = session_id in self._owing
                sticks = session_id in self._stuck
            if owing:
                handed_back.append(session_id)
                self._record("cold-handed-back", session_id)
            elif sticks:
                stuck.append(session_id)
                self._record("cold-stuck", session_id)
            elif self._deliver(session_id, now):
                delivered += 1
        with self._lock:
            waiting = self._waiting
        return ColdPass(
            claimed=len(taken),
            delivered=delivered,
            needs_agent=tuple(handed_back),
            waiting=waiting,
            stuck=tuple(stuck),
        )

    def _deliver(self, session_id: str, now: int) -> bool:
        with self._lock:
            events, _, seed = self._cold[session_id]
        try:
            plan = plan_delivery(fold_schedule_events(events, seed or 0), now)
        except ScheduleLogError:
            plan = None
        if not isinstance(plan, DeliverNow | DeliverBatch):
            with self._lock:  # nothing due after all: the log corrects the index
                self._cold[session_id] = (events, _due(events, seed), seed)
            return False
        delivery = reminder_delivery(plan)
        grown = list(events)
        for change in delivery.dispatches:
            grown.append(SessionEvent(SCHEDULE_CHANGE_TYPE, len(grown), now, change.to_json()))
        with self._lock:
            self._cold[session_id] = (tuple(grown), _due(grown, seed), seed)
            self.delivered.append((session_id, delivery))
        self._record("cold-delivered", session_id, tuple(c.id for c in delivery.dispatches))
        return True


def _due(events: Sequence[SessionEvent], seed_length: int | None) -> int | None:
    try:
        earliest = fold_schedule_events(events, seed_length or 0).earliest()
    except ScheduleLogError:
        return None
    return None if earliest is None else earliest.target_ms
