"""FakeSession and FakeSessionStore."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from actors._contract import SessionDetachedError
from host_bridge._eventlog import LogSnapshot
from host_bridge.protocols import Session, SessionEvent, SessionStore
from host_bridge.testing import PENDING, FakeClock, FakeSession, FakeSessionStore, Journal


def make(**kwargs: Any) -> tuple[FakeSession, FakeSessionStore, Journal]:
    journal = Journal()
    session = FakeSession("s1", clock=FakeClock(42), journal=journal, **kwargs)
    store = FakeSessionStore(journal)
    store.add(session)
    return session, store, journal


def test_protocols_are_satisfied() -> None:
    session, store, _ = make()
    assert isinstance(session, Session)
    assert isinstance(store, SessionStore)


def test_append_commits_synchronously_and_snapshots_do_not_change() -> None:
    session, _, journal = make()
    before = session.events
    event = session.append("note", {"n": 1})
    assert event == SessionEvent("note", 0, 42, {"n": 1})
    assert len(before) == 0
    after = session.events
    assert isinstance(after, LogSnapshot)
    assert list(after) == [event]
    session.append("note", {"n": 2})
    assert len(after) == 1
    assert [e.seq for e in session.events] == [0, 1]
    assert journal.entries() == [
        ("append", "s1", "note", {"n": 1}),
        ("append", "s1", "note", {"n": 2}),
    ]


def test_seed_events_and_header() -> None:
    seeded: list[SessionEvent | tuple[str, Any]] = [SessionEvent("a", 7, 1, None), ("b", {"x": 1})]
    session = FakeSession("child", seed_events=seeded, seed_length=2, parent_session="p")
    assert [(e.type, e.seq) for e in session.events] == [("a", 0), ("b", 1)]
    assert session.header.seed_length == 2
    assert session.header.parent_session == "p"
    assert session.header.id == session.id == "child"
    assert session.append("c", None).seq == 2


def test_fail_appends_only_where_the_predicate_matches() -> None:
    session, _, journal = make()
    session.fail_appends(
        OSError("disk full"), when=lambda type_, data: data.get("operation") == "dispatch"
    )
    session.append("schedule/change", {"operation": "create"})
    with pytest.raises(OSError):
        session.append("schedule/change", {"operation": "dispatch"})
    assert [e.data["operation"] for e in session.events] == ["create"]
    assert journal.kinds() == ["append", "append-failed"]


def test_fail_appends_times_and_factories() -> None:
    session, _, _ = make()
    session.fail_appends(ValueError, times=2)
    for _ in range(2):
        with pytest.raises(ValueError):
            session.append("t", 1)
    session.append("t", 2)
    session.fail_appends(lambda: KeyError("made"), times=1)
    with pytest.raises(KeyError):
        session.append("t", 3)
    session.append("t", 4)
    assert [e.data for e in session.events] == [2, 4]
    session.fail_appends(RuntimeError)
    session.clear_append_failures()
    session.append("t", 5)
    with pytest.raises(ValueError):
        session.fail_appends(RuntimeError, times=0)


def test_append_guards_reject_and_can_be_removed() -> None:
    session, _, _ = make()
    seen: list[tuple[str, Any]] = []

    def guard(target: FakeSession, type_: str, data: Any) -> None:
        assert target is session
        seen.append((type_, data))
        if data == "bad":
            raise ValueError("rejected")

    remove = session.add_append_guard(guard)
    session.append("t", "good")
    with pytest.raises(ValueError):
        session.append("t", "bad")
    remove()
    remove()
    session.append("t", "bad")
    assert seen == [("t", "good"), ("t", "bad")]
    assert [e.data for e in session.events] == ["good", "bad"]


def test_store_guards_judge_creation_and_every_sessions_appends() -> None:
    store = FakeSessionStore()
    created: list[tuple[str, int]] = []
    appended: list[tuple[str, int, Any]] = []

    def on_create(header: Any, events: Any) -> None:
        created.append((header.id, len(events)))
        if header.id == "refused":
            raise ValueError("no")

    def on_append(header: Any, events: Any, type_: str, data: Any) -> None:
        appended.append((header.id, len(events), data))
        if data == "bad":
            raise ValueError("rejected")

    early = store.add(FakeSession("early"))
    remove_create = store.add_creation_guard(on_create)
    remove_append = store.add_append_guard(on_append)
    with pytest.raises(ValueError, match="no"):
        store.add(FakeSession("refused", seed_events=(("t", 1),)))
    late = store.add(FakeSession("late", seed_events=(("t", 1),)))
    assert created == [("refused", 1), ("late", 1)]
    assert store.get("refused") is None
    early.append("t", "ok")
    late.append("t", "ok")
    with pytest.raises(ValueError, match="rejected"):
        late.append("t", "bad")
    assert appended == [("early", 0, "ok"), ("late", 1, "ok"), ("late", 2, "bad")]
    assert len(late.events) == 2
    remove_create()
    remove_append()
    remove_append()
    store.add(FakeSession("refused"))
    late.append("t", "bad")
    assert len(created) == 2 and len(appended) == 3


def test_detached_session_rejects_appends() -> None:
    session, _, _ = make()
    session.detach()
    assert session.detached
    with pytest.raises(SessionDetachedError):
        session.append("t", 1)
    assert len(session.events) == 0


def test_store_get_list_and_duplicates() -> None:
    session, store, _ = make()
    assert store.get("s1") is session
    assert store.get("nope") is None
    assert store.list() == [session]
    with pytest.raises(ValueError):
        store.add(FakeSession("s1"))
    store.remove(session)
    assert store.list() == []


def test_flush_resolves_true_synchronously_and_tracks_durability() -> None:
    session, store, journal = make()
    session.append("t", 1)
    session.append("t", 2)
    calls: list[bool] = []
    future = store.flush(session)
    assert future.done()
    future.add_done_callback(lambda f: calls.append(f.result()))
    assert calls == [True]
    assert store.flush_count == 1
    assert store.flushed_lengths == [2]
    assert store.durable_length(session) == 2
    assert store.durable_length("s1") == 2
    assert journal.entries()[-2:] == [("flush", "s1"), ("flush-resolved", "s1", True)]


def test_callbacks_added_before_resolution_run_in_the_flushing_thread() -> None:
    session, store, _ = make()
    store.script(PENDING)
    future = store.flush(session)
    order: list[str] = []
    future.add_done_callback(lambda f: order.append("callback"))
    store.release(True)
    order.append("after release")
    assert order == ["callback", "after release"]


def test_script_is_consumed_fifo_then_default() -> None:
    session, store, journal = make()
    store.script(False, OSError("io"), ValueError)
    assert store.scripted()[0] is False
    results: list[Future[bool]] = [store.flush(session) for _ in range(4)]
    assert results[0].result() is False
    assert isinstance(results[1].exception(), OSError)
    assert isinstance(results[2].exception(), ValueError)
    assert results[3].result() is True
    store.default_outcome = False
    assert store.flush(session).result() is False
    assert store.durable_length(session) == 0
    resolved = journal.of("flush-resolved")
    assert [r[2] for r in resolved if isinstance(r[2], bool)] == [False, True, False]
    assert isinstance(resolved[1][2], OSError)


def test_only_true_flushes_count_as_durable() -> None:
    session, store, _ = make()
    session.append("t", 1)
    store.flush(session)
    session.append("t", 2)
    store.script(False)
    store.flush(session)
    assert store.durable_length(session) == 1
    session.append("t", 3)
    store.script(RuntimeError)
    store.flush(session)
    assert store.durable_length(session) == 1
    assert store.flushed_lengths == [1, 2, 3]


def test_pending_flush_waits_for_release() -> None:
    session, store, journal = make()
    session.append("t", 1)
    store.script(PENDING, PENDING)
    first = store.flush(session)
    session.append("t", 2)
    second = store.flush(session)
    assert not first.done() and not second.done()
    assert store.pending() == [first, second]
    assert store.durable_length(session) == 0
    assert journal.kinds() == ["append", "flush", "append", "flush"]
    assert store.release(True) is first
    assert first.result() is True
    assert store.durable_length(session) == 1  # length at call time, not now
    assert store.pending() == [second]
    store.release(OSError("late"))
    assert isinstance(second.exception(), OSError)
    assert store.durable_length(session) == 1
    with pytest.raises(LookupError):
        store.release()
    with pytest.raises(ValueError):
        store.release(PENDING)


def test_release_all() -> None:
    session, store, _ = make()
    store.default_outcome = PENDING
    futures = [store.flush(session) for _ in range(3)]
    assert store.release_all(False) == 3
    assert [f.result() for f in futures] == [False, False, False]
    assert store.pending() == []


def test_release_of_a_cancelled_future_is_harmless() -> None:
    session, store, _ = make()
    store.script(PENDING)
    future = store.flush(session)
    assert future.cancel()
    store.release(True)
    assert future.cancelled()


def test_detached_or_unknown_session_fails_without_consuming_the_script() -> None:
    session, store, _ = make()
    store.script(False)
    stranger = FakeSession("s1")  # same id, different object: unknown to the store
    assert isinstance(store.flush(stranger).exception(), SessionDetachedError)
    session.detach()
    assert isinstance(store.flush(session).exception(), SessionDetachedError)
    assert store.scripted() == [False]
    assert store.flush_count == 2
