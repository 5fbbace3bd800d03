"""A session resumed from its schedule state holds only its tail and reads the rest on demand."""

from __future__ import annotations

import gc
import itertools
import sqlite3
import threading
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors._runtime import Runtime
from host_bridge._eventlog import PagedHistory
from host_bridge.embedded.agents import Turn
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.inbox import (
    INBOX_EVENT,
    TURN_COMPLETED_EVENT,
    completed_data,
    pending_entries,
    queued_data,
)
from host_bridge.embedded.sessions import (
    EmbeddedSession,
    EmbeddedSessionStore,
    SessionHistoryError,
)
from host_bridge.embedded.stores import SqliteEventStore, StoreCorruptError
from host_bridge.protocols import (
    SessionEvent,
    SessionHeader,
    SessionWithCheckpoint,
    TextBlock,
    UserMessage,
)
from messages import SCHEDULE_CHANGE_TYPE
from messages._errors import ScheduleLogError
from messages._fold import FoldedSchedules, fold_schedule_events
from messages._presentation import REMINDER_SOURCE
from tests.messages.helpers import AT, create, delete, dispatch

TIMEOUT = 5.0
T0 = 1_767_225_600_000


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEventStore]:
    with SqliteEventStore(tmp_path / "sessions.sqlite3") as opened:
        yield opened


@pytest.fixture
def sessions(store: SqliteEventStore, runtime: Runtime) -> Iterator[EmbeddedSessionStore]:
    service = EmbeddedSessionStore(store, runtime=runtime)
    yield service
    service.close()


def history(session: EmbeddedSession) -> PagedHistory:
    """The history a bounded session reads its early events from."""
    return cast(PagedHistory, session._log._history)


def write(
    store: SqliteEventStore, header: SessionHeader, items: Sequence[tuple[str, Any]]
) -> tuple[SessionEvent, ...]:
    """Store a session whose log is ``items``; the events as stored."""
    events = tuple(SessionEvent(t, seq, T0 + seq, data) for seq, (t, data) in enumerate(items))
    store.create_session(header, [(event, encode_payload(event.data)) for event in events])
    assert store.flush(header.id).result(TIMEOUT) is True
    store.forget(header.id)
    store.release_session(header.id)  # as a host that went away: free to resume
    return events


def prompt(text: str, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """The data of an ``inbox/queued`` event of a message ``text``."""
    user = {"kind": "user"} if source is None else source
    return queued_data(UserMessage((TextBlock(text),), user))


@st.composite
def logs(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A log of messages, inbox entries (some completed, some malformed) and a valid stream."""
    items: list[tuple[str, Any]] = []
    inbox: list[int] = []
    active: list[str] = []
    created = 0
    for _ in range(draw(st.integers(0, 60))):
        kind = draw(
            st.sampled_from(["message", "prompt", "reminder", "complete", "schedule", "bad"])
        )
        if kind == "prompt":
            inbox.append(len(items))
            items.append((INBOX_EVENT, prompt(f"p{len(items)}")))
        elif kind == "reminder":
            inbox.append(len(items))
            items.append((INBOX_EVENT, prompt(f"r{len(items)}", dict(REMINDER_SOURCE))))
        elif kind == "complete" and inbox:
            done = draw(st.sampled_from(inbox))
            items.append((TURN_COMPLETED_EVENT, completed_data(done, failed=draw(st.booleans()))))
        elif kind == "schedule":
            remove = draw(st.booleans())
            if active and remove:
                gone = active.pop(draw(st.integers(0, len(active) - 1)))
                change = delete(gone) if draw(st.booleans()) else dispatch(gone)
            else:
                created += 1
                active.append(f"schedule-{created}")
                change = create(active[-1], f"prompt {created}", 60, AT)
            items.append((SCHEDULE_CHANGE_TYPE, change))
        elif kind == "bad":
            items.append((INBOX_EVENT, {"content": "not a list"}))
        else:
            items.append(("message", {"n": len(items), "text": "x" * draw(st.integers(0, 40))}))
    return items


_ids = itertools.count()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(items=logs(), fork=st.integers(0, 100), data=st.data())
def test_a_bounded_session_reads_as_the_full_load(
    store: SqliteEventStore,
    sessions: EmbeddedSessionStore,
    items: list[tuple[str, Any]],
    fork: int,
    data: st.DataObject,
) -> None:
    seed = fork if fork < len(items) and fork % 3 == 0 else None  # some are forks
    header = SessionHeader(f"s{next(_ids)}", seed, "parent" if seed is not None else None)
    write(store, header, items)
    full = store.load(header.id)
    assert full is not None
    try:
        expected: FoldedSchedules | None = fold_schedule_events(full.events, seed or 0)
    except ScheduleLogError:  # (a fork's stream may name its parent's records: corrupt)
        expected = None
    resumed = sessions.resume(header.id)
    try:
        events = resumed.events
        assert resumed.bounded == (bool(items) and expected is not None)
        assert len(events) == len(full.events)
        assert resumed.header == full.header
        if resumed.bounded:
            assert history(resumed).reads == 0  # nothing read yet
        for index in data.draw(st.lists(st.integers(0, max(0, len(items) - 1)), max_size=10)):
            if items:
                assert events[index] == full.events[index]
                assert events[index - len(items)] == full.events[index]
        start, stop = sorted(data.draw(st.tuples(st.integers(0, 70), st.integers(0, 70))))
        assert list(events[start:stop]) == list(full.events[start:stop])
        assert list(events[::-3]) == list(full.events[::-3])
        assert list(events) == list(full.events)
        assert all(event.seq == i for i, event in enumerate(events))
        assert isinstance(resumed, SessionWithCheckpoint)
        assert resumed.schedule_checkpoint == (expected if resumed.bounded else None)
        assert resumed.claim_inbox() == pending_entries(full.events, seed or 0)
        appended = resumed.append("message", {"after": True})
        assert appended.seq == len(items)
        assert resumed.events[-1] is appended
    finally:
        sessions.detach(resumed)


def test_unfinished_entries_before_the_resume_point_are_read_by_seq(
    store: SqliteEventStore, sessions: EmbeddedSessionStore
) -> None:
    items: list[tuple[str, Any]] = [
        (INBOX_EVENT, prompt("done")),
        (INBOX_EVENT, prompt("cut")),
        (TURN_COMPLETED_EVENT, completed_data(0, failed=False)),
        (INBOX_EVENT, prompt("owed", dict(REMINDER_SOURCE))),
    ]
    items += [("message", {"n": n}) for n in range(2000)]
    write(store, SessionHeader("s"), items)
    resumed = sessions.resume("s")
    entries = resumed.claim_inbox()
    assert [(entry.seq, entry.message.text) for entry in entries] == [(1, "cut"), (3, "owed")]
    assert history(resumed).reads == 0  # the two entries were read by seq, no page of history
    assert resumed.claim_inbox() == []


def test_a_resumed_host_queues_the_unfinished_entries_of_a_long_log_first(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with EmbeddedHost(data, durable=True) as first:
        session = first.sessions.create("s")
        session.append(INBOX_EVENT, prompt("done"))
        session.append(TURN_COMPLETED_EVENT, completed_data(0, failed=False))
        session.append(INBOX_EVENT, prompt("started"))
        for n in range(1500):
            session.append("message", {"n": n})
        assert first.sessions.flush(session).result(TIMEOUT) is True

    texts: list[str] = []
    done = threading.Event()

    def model(turn: Turn) -> str | None:
        texts.append(turn.message.text)
        if turn.message.text == "new":
            done.set()
        return None

    with EmbeddedHost(data) as second:
        agent = second.spawn_root(session_id="s", model=model)
        assert isinstance(agent.session, EmbeddedSession)
        assert agent.session.bounded
        agent.prompt("new")
        assert done.wait(TIMEOUT)
        assert texts == ["started", "new"]


def test_a_fork_of_a_bounded_session_copies_its_whole_log(
    store: SqliteEventStore, sessions: EmbeddedSessionStore
) -> None:
    items: list[tuple[str, Any]] = [(SCHEDULE_CHANGE_TYPE, create("schedule-1", "p", 60, AT))]
    items += [("message", {"n": n}) for n in range(700)]
    stored = write(store, SessionHeader("parent"), items)
    parent = sessions.resume("parent")
    assert parent.bounded
    child = sessions.fork(parent, at=600, session_id="child")
    assert list(child.events) == list(stored[:600])
    assert child.header.seed_length == 600
    assert sessions.flush(child).result(TIMEOUT) is True
    sessions.detach(child)
    again = sessions.resume("child")
    assert again.bounded
    assert list(again.events) == list(stored[:600])
    checkpoint = again.schedule_checkpoint
    assert checkpoint is not None
    assert checkpoint.seed_length == 600
    assert checkpoint.active == ()  # the parent's reminder is not the child's


def _held_by_resume(sessions: EmbeddedSessionStore, session_id: str) -> tuple[int, Any]:
    """Bytes a resume of ``session_id`` allocated and still holds, and the live session."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        live = sessions.resume(session_id)
        len(live.events)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return held, live


def test_a_bounded_session_holds_memory_independent_of_its_length(
    store: SqliteEventStore, sessions: EmbeddedSessionStore
) -> None:
    def message(n: int) -> tuple[str, Any]:
        return ("message", {"role": "assistant", "content": f"reply {n} " + "text " * 20})

    for length in (1000, 10_000):
        items = [(SCHEDULE_CHANGE_TYPE, create("schedule-1", "p", 60, AT))]
        items += [message(n) for n in range(length - 1)]
        write(store, SessionHeader(f"log-{length}"), items)
    held: dict[int, int] = {}
    for length in (1000, 10_000):
        held[length], live = _held_by_resume(sessions, f"log-{length}")
        assert live.bounded
        sessions.detach(live)
        del live
    full = store.load("log-10000")
    assert full is not None
    loaded_bytes = len(full.events) * 300  # a loaded event holds far more than this
    assert held[10_000] < 3 * held[1000] + 256 * 1024, held
    assert held[10_000] < loaded_bytes / 10, held


def _damage(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(sql)
    finally:
        conn.close()


def test_a_gap_in_the_history_is_found_when_it_is_read(tmp_path: Path, runtime: Runtime) -> None:
    path = tmp_path / "sessions.sqlite3"
    with SqliteEventStore(path) as store:
        write(store, SessionHeader("s"), [("message", {"n": n}) for n in range(600)])
    _damage(path, "DELETE FROM events WHERE session_id = 's' AND seq = 7")
    with SqliteEventStore(path) as store:
        service = EmbeddedSessionStore(store, runtime=runtime)
        live = service.resume("s")  # the resume reads nothing before its schedule state
        assert len(live.events) == 600
        assert live.events[300].data == {"n": 300}  # another page
        with pytest.raises(SessionHistoryError, match=r"cannot read events 0\.\.255"):
            live.events[3]
        service.close()
        with pytest.raises(StoreCorruptError, match="no event with seq 7"):
            store.load("s")


def test_a_damaged_early_payload_is_found_when_it_is_read(tmp_path: Path, runtime: Runtime) -> None:
    path = tmp_path / "sessions.sqlite3"
    with SqliteEventStore(path) as store:
        write(store, SessionHeader("s"), [("message", {"n": n}) for n in range(600)])
    _damage(path, "UPDATE events SET data = x'c1ff' WHERE session_id = 's' AND seq = 300")
    with SqliteEventStore(path) as store:
        service = EmbeddedSessionStore(store, runtime=runtime)
        live = service.resume("s")  # the resume reads nothing before its schedule state
        assert live.bounded
        assert live.events[100].data == {"n": 100}  # another page
        with pytest.raises(SessionHistoryError, match="cannot read events"):
            live.events[300]
        with pytest.raises(SessionHistoryError):
            list(live.events)
        service.close()


def test_the_invariant_judges_a_bounded_session_from_its_checkpoint(
    store: SqliteEventStore, sessions: EmbeddedSessionStore
) -> None:
    from host_bridge.invariant import ScheduleInvariantError, install_schedule_invariant

    items = [(SCHEDULE_CHANGE_TYPE, create("schedule-1", "p", 60, AT))]
    items += [("message", {"n": n}) for n in range(2_000)]
    write(store, SessionHeader("long"), items)
    invariant = install_schedule_invariant(sessions)
    try:
        live = sessions.resume("long")  # resumed after the install: judged at its first append
        assert live.bounded
        live.append(SCHEDULE_CHANGE_TYPE, create("schedule-2", "q", 60, AT))
        with pytest.raises(ScheduleInvariantError, match="schedule-1"):
            live.append(SCHEDULE_CHANGE_TYPE, create("schedule-1", "again", 60, AT))
        invariant.check_session(live)
        assert history(live).reads == 0  # judged from the checkpoint: no page of history read
        assert len(live.events) == 2_002
    finally:
        invariant.uninstall()
