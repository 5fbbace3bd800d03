"""Checks of ``Session`` and ``SessionStore``: the log, its snapshots and the flush barrier."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from actors._contract import Session, SessionEvent
from host_bridge.testing.conformance._base import ConformanceBase, expect, fail

__all__ = ["SessionChecks"]

APPEND = "Session.append"
SNAPSHOT = "Session.events"
FLUSH = "SessionStore.flush"
STORE = "SessionStore.get/list"
DETACHED = "detached session"

PROBE = "conformance/probe"


def _payload(n: int) -> dict[str, Any]:
    return {"n": n, "text": f"probe {n}", "list": [n, None, True]}


class SessionChecks(ConformanceBase):
    """The session log and the durability barrier."""

    def session(self) -> Session:
        agent, _ = self.spawn()
        return agent.session

    def flush(self, session: Session) -> Future[bool]:
        """``sessions.flush(session)``, checked to be a ``concurrent.futures.Future``."""
        sessions = self.ctx.sessions
        assert sessions is not None
        future = sessions.flush(session)
        expect(
            isinstance(future, Future),
            FLUSH,
            f"flush must return a concurrent.futures.Future, not {type(future).__name__}",
        )
        return future

    def test_append_returns_the_event_with_seq_equal_to_its_index(self) -> None:
        """``append`` is synchronous: it returns the committed event, whose ``seq`` is its
        index in ``events`` (``events[i].seq == i``), with the type and data given and an
        integer ``time``; the event is in ``events`` as soon as ``append`` returned."""
        session = self.session()
        for n in range(3):
            index = len(session.events)
            event = session.append(PROBE, _payload(n))
            expect(
                isinstance(event, SessionEvent),
                APPEND,
                f"append must return a SessionEvent, not {type(event).__name__}",
            )
            expect(event.seq == index, APPEND, f"returned seq {event.seq} for index {index}")
            expect(
                event.type == PROBE and event.data == _payload(n),
                APPEND,
                f"returned {event.type!r} {event.data!r}, not what was appended",
            )
            expect(type(event.time) is int, APPEND, f"event time {event.time!r} is not an int")
            events = session.events
            expect(
                len(events) == index + 1 and events[index] == event,
                APPEND,
                "the appended event is not the last of events once append returned",
            )
        bad = [(i, e.seq) for i, e in enumerate(session.events) if e.seq != i]
        expect(not bad, SNAPSHOT, f"events[i].seq != i at (index, seq) {bad[:5]}")

    def test_events_snapshot_never_changes(self) -> None:
        """A snapshot returned by ``events`` never changes afterwards: later appends show
        only in later snapshots."""
        session = self.session()
        session.append(PROBE, _payload(0))
        before = session.events
        frozen = list(before)
        session.append(PROBE, _payload(1))
        session.append(PROBE, _payload(2))
        expect(
            len(before) == len(frozen) and list(before) == frozen,
            SNAPSHOT,
            f"a snapshot of {len(frozen)} events changed to {len(before)} after later appends",
        )
        expect(len(session.events) == len(frozen) + 2, SNAPSHOT, "later snapshot misses appends")

    def test_rejected_append_raises_and_appends_nothing(self) -> None:
        """An ``append`` the host rejects (here: a payload it cannot store) raises, and
        nothing was appended: the log and later seqs are as if it never happened."""
        session = self.session()
        session.append(PROBE, _payload(0))
        length = len(session.events)
        try:
            session.append(PROBE, {"bad": self.host.rejected_payload})
        except Exception:
            pass
        else:
            fail(APPEND, f"append of an unstorable payload {self.host.rejected_payload!r} returned")
        expect(
            len(session.events) == length,
            APPEND,
            f"a rejected append left {len(session.events) - length} event(s) in the log",
        )
        event = session.append(PROBE, _payload(1))
        expect(event.seq == length, APPEND, f"after a rejection the next seq is {event.seq}")

    def test_concurrent_appends_are_serialised(self) -> None:
        """Appends from several threads are serialised: every one lands exactly once and
        ``events[i].seq == i`` still holds."""
        session = self.session()
        start = len(session.events)
        barrier = threading.Barrier(4)
        errors: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                barrier.wait(self.timeout)
                for n in range(10):
                    session.append(PROBE, {"writer": w, "n": n})
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(self.timeout)
        expect(not errors, APPEND, f"concurrent appends raised {errors[:1]!r}")
        events = session.events
        mine = [(e.data["writer"], e.data["n"]) for e in events[start:] if e.type == PROBE]
        expect(len(mine) == 40 and len(set(mine)) == 40, APPEND, f"{len(mine)} of 40 landed")
        bad = [(i, e.seq) for i, e in enumerate(events) if e.seq != i]
        expect(not bad, APPEND, f"concurrent appends broke events[i].seq == i at {bad[:5]}")

    def test_store_gets_and_lists_live_sessions(self) -> None:
        """``sessions.get(id)`` returns the live session object itself, ``list()`` contains
        it, and an unknown id gives ``None``."""
        sessions = self.ctx.sessions
        assert sessions is not None
        session = self.session()
        expect(sessions.get(session.id) is session, STORE, "get(id) is not the live session")
        expect(any(s is session for s in sessions.list()), STORE, "list() misses a live session")
        expect(sessions.get("conformance-no-such-session") is None, STORE, "unknown id not None")

    def test_flush_returns_a_future_resolving_true_after_earlier_appends(self) -> None:
        """``flush`` returns a ``concurrent.futures.Future`` that resolves to a ``bool``;
        on a healthy host ``True`` (else every Schedule tool answers
        ``persistence_uncertain``). Events appended before it are in ``events``."""
        session = self.session()
        appended = [session.append(PROBE, _payload(n)) for n in range(3)]
        outcome = self.wait(self.flush(session), FLUSH, "the flush resolving")
        expect(type(outcome) is bool, FLUSH, f"flush resolved {outcome!r}, not a bool")
        expect(outcome is True, FLUSH, "flush of a healthy session resolved False")
        events = session.events
        expect(all(events[e.seq] == e for e in appended), FLUSH, "flushed events not in events")

    def test_flush_true_means_every_earlier_append_is_durable(self) -> None:
        """When ``flush`` resolves ``True``, every event appended before the call is
        durable: already when the future resolves, reading the stored log back (the
        ``durable_events`` hook) gives them with their seq, type and data."""
        self.need(self.host.durable_events, "durable_events")
        read_back = self.host.durable_events
        assert read_back is not None
        session = self.session()
        appended = [session.append(PROBE, _payload(n)) for n in range(3)]
        at_resolve: Future[Sequence[SessionEvent]] = Future()

        def on_done(_: Future[bool]) -> None:
            try:
                at_resolve.set_result(tuple(read_back(session.id)))
            except BaseException as error:
                at_resolve.set_exception(error)

        future = self.flush(session)
        future.add_done_callback(on_done)
        expect(self.wait(future, FLUSH, "the flush resolving") is True, FLUSH, "resolved False")
        try:
            stored = self.wait(at_resolve, FLUSH, "reading the stored log back")
        except AssertionError:
            raise
        except Exception as error:
            fail(FLUSH, f"reading the stored log back raised {error!r}")
        for event in appended:
            found = stored[event.seq] if event.seq < len(stored) else None
            expect(
                found is not None and (found.type, found.data) == (event.type, event.data),
                FLUSH,
                f"flush resolved True but event seq {event.seq} was not durable then "
                f"({len(stored)} events readable back)",
            )

    def test_detached_session_is_gone_and_refuses_appends_and_flushes(self) -> None:
        """A detached session is no longer live: ``sessions.get(id)`` returns ``None``,
        ``list()`` leaves it out, ``append`` raises (appending nothing) and ``flush``
        returns a future that fails."""
        self.need(self.host.detach, "detach")
        sessions = self.ctx.sessions
        assert sessions is not None and self.host.detach is not None
        agent, _ = self.spawn()
        session = agent.session
        session.append(PROBE, _payload(0))
        if self.host.dispose is not None:
            self.host.dispose(agent)
        self.host.detach(session)
        expect(sessions.get(session.id) is None, DETACHED, "sessions.get(id) is not None")
        expect(all(s is not session for s in sessions.list()), DETACHED, "still in list()")
        length = len(session.events)
        try:
            session.append(PROBE, _payload(1))
        except Exception:
            pass
        else:
            fail(DETACHED, "append on a detached session returned instead of raising")
        expect(len(session.events) == length, DETACHED, "a refused append changed events")
        future = self.flush(session)
        try:
            outcome = future.result(timeout=self.timeout)
        except FutureTimeout:
            fail(DETACHED, f"flush of a detached session did not settle within {self.timeout} s")
        except Exception:
            return
        fail(DETACHED, f"flush of a detached session resolved {outcome!r} instead of failing")
