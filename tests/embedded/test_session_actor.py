"""SessionActor at mailbox level: ordering, write-behind, flush barriers, rejection."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import CancelledError, Future
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors._contract import AppendGuard, SessionDetachedError
from host_bridge._eventlog import EventLog
from host_bridge.embedded.codec import (
    PayloadError,
    decode_payload,
    encode_payload,
    encode_payload_copy,
)
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import SessionEvent, SessionHeader
from host_bridge.testing import FakeClock, settle
from host_bridge.testing._settle import settle_all
from messages._mailbox import DetachSession
from tests.embedded.helpers import (
    TIMEOUT,
    ActorRef,
    FakeListener,
    Gate,
    append,
    make_core,
    send_append,
    send_flush,
    send_staged,
    start,
)


def test_append_commits_and_writes_behind_before_replying() -> None:
    clock = FakeClock(1234)
    listener = FakeListener()
    ref, log = start(listener, clock=clock)
    event = append(ref, "note", {"text": "hi"})
    assert event == SessionEvent("note", 0, 1234, {"text": "hi"})
    assert list(log.snapshot()) == [event]
    assert listener.calls == [("append", "s-1", event, encode_payload({"text": "hi"}))]
    clock.advance(5)
    assert append(ref, "note", None) == SessionEvent("note", 1, 1239, None)


def test_seed_events_continue_their_seq() -> None:
    listener = FakeListener()
    seed = [SessionEvent("old", 0, 1, "a"), SessionEvent("old", 1, 2, "b")]
    ref, log = start(listener, log=EventLog(seed))
    assert append(ref, "new", 1).seq == 2
    assert [e.seq for e in listener.appended()] == [2]
    assert len(log) == 3


def test_concurrent_callers_get_contiguous_seqs_and_their_own_events() -> None:
    listener = FakeListener()
    ref, log = start(listener)
    threads, per_thread = 8, 40
    barrier = threading.Barrier(threads)
    mine: list[list[SessionEvent]] = [[] for _ in range(threads)]

    def caller(index: int) -> None:
        barrier.wait(TIMEOUT)
        for n in range(per_thread):
            mine[index].append(append(ref, "t", {"caller": index, "n": n}))

    workers = [threading.Thread(target=caller, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(TIMEOUT * 2)
    total = threads * per_thread
    events = list(log.snapshot())
    assert [e.seq for e in events] == list(range(total))
    for index, got in enumerate(mine):
        assert [e.data for e in got] == [{"caller": index, "n": n} for n in range(per_thread)]
        assert [e.seq for e in got] == sorted(e.seq for e in got)
        assert all(events[e.seq] == e for e in got)
    # written behind in commit order, with the payload of exactly that event
    assert listener.appended() == events
    assert all(
        call[3] == encode_payload(call[2].data) for call in listener.calls if call[0] == "append"
    )


def test_a_flush_covers_exactly_the_appends_handled_before_it() -> None:
    listener = FakeListener()
    ref, _ = start(listener)
    send_append(ref, "t", 0)
    send_append(ref, "t", 1)
    first = send_flush(ref)
    last_append = send_append(ref, "t", 2)
    second = send_flush(ref)
    settle(ref)
    assert last_append.result(TIMEOUT).seq == 2
    assert listener.kinds() == ["append0", "append1", "flush", "append2", "flush"]
    assert listener.calls[2] == ("flush", "s-1")
    # the replies mirror the listener's futures, each on its own
    assert not first.done()
    assert not second.done()
    listener.flushes[1].set_result(True)
    assert second.result(TIMEOUT) is True
    assert not first.done()
    listener.flushes[0].set_result(False)
    assert first.result(TIMEOUT) is False


def test_only_a_true_acknowledgement_counts() -> None:
    listener = FakeListener()
    ref, _ = start(listener)
    reply = send_flush(ref)
    settle(ref)
    listener.flushes[0].set_result(1)  # type: ignore[arg-type]  # a sloppy listener
    assert reply.result(TIMEOUT) is False


def test_an_already_resolved_listener_future_answers_at_once() -> None:
    class Instant(FakeListener):
        def flush(self, session_id: str) -> Future[bool]:
            future = super().flush(session_id)
            future.set_result(True)
            return future

    ref, _ = start(Instant())
    assert send_flush(ref).result(TIMEOUT) is True


def test_no_listener_means_false_but_appends_still_commit() -> None:
    ref, log = start(None)
    assert append(ref, "t", "x").seq == 0
    assert send_flush(ref).result(TIMEOUT) is False
    assert len(log) == 1


def test_listener_failure_fails_the_flush_with_that_exception() -> None:
    listener = FakeListener()
    ref, _ = start(listener)
    reply = send_flush(ref)
    settle(ref)
    boom = OSError("disk on fire")
    listener.flushes[0].set_exception(boom)
    assert reply.exception(TIMEOUT) is boom


def test_listener_refusing_a_flush_fails_it_and_the_actor_survives() -> None:
    listener = FakeListener()
    listener.flush_error = RuntimeError("refused")
    ref, _ = start(listener)
    assert isinstance(send_flush(ref).exception(TIMEOUT), RuntimeError)
    listener.flush_error = None
    assert append(ref, "t", 1).seq == 0


def test_a_cancelled_listener_future_fails_the_flush_instead_of_hanging() -> None:
    listener = FakeListener()
    ref, _ = start(listener)
    reply = send_flush(ref)
    settle(ref)
    assert listener.flushes[0].cancel()
    assert isinstance(reply.exception(TIMEOUT), CancelledError)


def test_detached_session_rejects_appends_and_flushes() -> None:
    listener = FakeListener()
    ref, log = start(listener)
    append(ref, "t", 1)
    detached: Future[None] = Future()
    ref.tell(DetachSession(detached))
    assert detached.result(TIMEOUT) is None
    with pytest.raises(SessionDetachedError, match="s-1"):
        append(ref, "t", 2)
    assert isinstance(send_flush(ref).exception(TIMEOUT), SessionDetachedError)
    assert len(log) == 1
    assert listener.kinds() == ["append0"]


def test_a_raising_guard_rejects_the_append_and_nothing_is_written() -> None:
    listener = FakeListener()
    seen: list[tuple[SessionHeader, list[SessionEvent], str, Any]] = []
    guards: list[AppendGuard] = []

    def judge(header: SessionHeader, events: Sequence[SessionEvent], type_: str, data: Any) -> None:
        seen.append((header, list(events), type_, data))
        if data == "bad":
            raise ValueError("refused by guard")

    header = SessionHeader("s-1", seed_length=0, parent_session="p")
    ref, log = start(listener, header=header, guards=lambda: tuple(guards))
    first = append(ref, "t", "ok")  # no guard yet
    guards.append(judge)
    with pytest.raises(ValueError, match="refused by guard"):
        append(ref, "t", "bad")
    assert list(log.snapshot()) == [first]
    assert listener.appended() == [first]
    assert seen == [(header, [first], "t", "bad")]
    second = append(ref, "t", "fine")
    assert second.seq == 1
    assert seen[-1] == (header, [first], "t", "fine")


@pytest.mark.parametrize(
    ("type_", "data", "error"),
    [
        ("t", {1, 2}, PayloadError),
        ("t", "lone \ud800 surrogate", PayloadError),
        ("t", {"k": b"bytes"}, PayloadError),
        ("t", {1: "non-str key"}, PayloadError),
        ("t", 2**64, PayloadError),
        ("", "x", ValueError),
    ],
)
def test_unacceptable_appends_are_rejected_and_nothing_is_appended(
    type_: str, data: Any, error: type[Exception]
) -> None:
    listener = FakeListener()
    ref, log = start(listener)
    with pytest.raises(error):
        append(ref, type_, data)
    assert len(log) == 0
    assert listener.calls == []
    assert append(ref, "t", "after").seq == 0


def test_listener_refusing_a_row_rejects_the_append() -> None:
    listener = FakeListener()
    ref, log = start(listener)
    listener.append_error = RuntimeError("unknown session")
    with pytest.raises(RuntimeError, match="unknown session"):
        append(ref, "t", 1)
    assert len(log) == 0
    listener.append_error = None
    assert append(ref, "t", 2).seq == 0


@pytest.mark.parametrize("one_walk", [False, True], ids=["decode", "encode_copy"])
def test_live_data_is_what_a_resume_reads_back(tmp_path: Path, one_walk: bool) -> None:
    store = SqliteEventStore(tmp_path / "s.sqlite3")
    try:
        header = SessionHeader("s-1")
        store.create_session(header)
        ref, log = start(
            store, header=header, encode_copy=encode_payload_copy if one_walk else None
        )
        values: list[Any] = [
            ("a", 1, [2.5, None]),
            {"nested": ("x", {"y": True})},
            "plain é ✓",
            -(2**63),
            2**64 - 1,
        ]
        events = [append(ref, "t", value) for value in values]
        for event, value in zip(events, values, strict=True):
            assert event.data == decode_payload(encode_payload(value))
        assert events[0].data == ["a", 1, [2.5, None]]  # tuples become lists
        assert send_flush(ref).result(TIMEOUT) is True
        stored = store.load("s-1")
        assert stored is not None
        assert list(stored.events) == list(log.snapshot())
    finally:
        pykka.ActorRegistry.stop_all()
        store.close()


def test_concurrent_flushes_from_many_sessions_coalesce_into_few_commits(tmp_path: Path) -> None:
    entered = threading.Event()
    resume = threading.Event()
    hook_calls = 0

    def hook() -> None:
        nonlocal hook_calls
        hook_calls += 1
        if hook_calls == 1:  # hold the first commit open
            entered.set()
            assert resume.wait(TIMEOUT)

    store = SqliteEventStore(tmp_path / "s.sqlite3", fault_hook=hook)
    try:
        sessions = 12
        refs: list[ActorRef] = []
        for index in range(sessions):
            header = SessionHeader(f"s-{index}")
            store.create_session(header)
            refs.append(start(store, header=header)[0])
        append(refs[0], "t", "first")
        held = send_flush(refs[0])
        assert entered.wait(TIMEOUT)  # the writer is inside its first commit
        assert store.commit_count == 0
        # while that commit is blocked, every session appends and asks for a barrier
        barrier = threading.Barrier(sessions)
        replies: list[Future[bool]] = [Future() for _ in range(sessions)]

        def session_worker(index: int) -> None:
            barrier.wait(TIMEOUT)
            for n in range(3):
                send_append(refs[index], "t", n)
            replies[index].set_result(True)

        workers = [threading.Thread(target=session_worker, args=(i,)) for i in range(sessions)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(TIMEOUT)
        flushes = [send_flush(ref) for ref in refs]
        settle_all(*refs)  # every FlushSession reached the listener
        assert store.flush_requests == 1 + sessions
        assert not held.done()
        assert not any(f.done() for f in flushes)
        resume.set()
        assert held.result(TIMEOUT) is True
        assert all(f.result(TIMEOUT) is True for f in flushes)
        assert store.commit_count == 2  # one held commit, then one for all twelve barriers
        assert store.commit_count < store.flush_requests
        for index in range(sessions):
            stored = store.load(f"s-{index}")
            assert stored is not None
            expected = (["first"] if index == 0 else []) + [0, 1, 2]
            assert [e.data for e in stored.events] == expected
        # without holding the writer, coalescing never costs more commits than flushes
        more = [send_flush(ref) for ref in refs for _ in range(3)]
        for ref in refs:
            send_append(ref, "t", "more")
            more.append(send_flush(ref))
        assert all(f.result(TIMEOUT) is True for f in more)
        assert store.commit_count <= store.flush_requests
    finally:
        resume.set()
        pykka.ActorRegistry.stop_all()
        store.close()


def test_a_cancelled_reply_does_not_kill_the_actor() -> None:
    gate = Gate()
    ref, log = start(None, guards=lambda: (gate,))
    blocked = send_append(ref, "t", "block")
    assert gate.entered.wait(TIMEOUT)
    flush = send_flush(ref)
    append_reply = send_append(ref, "t", "x")
    assert flush.cancel()
    assert append_reply.cancel()
    gate.release.set()
    assert blocked.result(TIMEOUT).seq == 0
    settle(ref)
    assert ref.is_alive()
    assert append(ref, "t", "still working").seq == 2  # the cancelled append still committed
    assert len(log) == 3


def test_messages_queued_behind_a_stop_are_failed_not_dropped() -> None:
    gate = Gate()
    listener = FakeListener()
    ref, log = start(listener, guards=lambda: (gate,))
    blocked = send_append(ref, "t", "block")
    assert gate.entered.wait(TIMEOUT)
    stopped = ref.stop(block=False)
    late_append = send_append(ref, "t", "late")
    late_flush = send_flush(ref)
    late_detach: Future[None] = Future()
    ref.tell(DetachSession(late_detach))
    gate.release.set()
    assert blocked.result(TIMEOUT).seq == 0
    stopped.get(timeout=TIMEOUT)
    assert isinstance(late_append.exception(TIMEOUT), SessionDetachedError)
    assert isinstance(late_flush.exception(TIMEOUT), SessionDetachedError)
    assert isinstance(late_detach.exception(TIMEOUT), SessionDetachedError)
    assert len(log) == 1
    assert listener.kinds() == ["append0"]


# --- staged appends ---------------------------------------------------------------------------


def test_a_stage_collects_every_later_append_until_a_flush_hands_it_over() -> None:
    listener = FakeListener()
    ref, log = start(listener)
    before = append(ref, "t", "before")
    staged = send_staged(ref, "inbox", {"text": "queued"})
    assert staged.seq == 1
    assert list(log.snapshot()) == [before, staged]  # in the live log, seq assigned
    assert listener.kinds() == ["append0"]  # but not handed to the listener
    first = append(ref, "t", "dispatch-1")
    second = append(ref, "t", "dispatch-2")  # a batch: every member joins the open stage
    assert listener.kinds() == ["append0"]
    reply = send_flush(ref)
    settle(ref)
    assert listener.kinds() == ["append0", "appends1+2+3", "flush"]  # one unit, then the barrier
    assert listener.calls[1] == (
        "appends",
        "s-1",
        (
            (staged, encode_payload({"text": "queued"})),
            (first, encode_payload("dispatch-1")),
            (second, encode_payload("dispatch-2")),
        ),
    )
    listener.flushes[0].set_result(True)
    assert reply.result(TIMEOUT) is True
    append(ref, "t", "later")
    assert listener.kinds()[-1] == "append4"  # the stage is closed: single hand-overs again


def test_a_flush_hands_staged_appends_over_first_so_it_covers_them() -> None:
    listener = FakeListener()
    ref, _ = start(listener)
    send_staged(ref, "inbox", 1)
    send_staged(ref, "inbox", 2)
    reply = send_flush(ref)
    settle(ref)
    assert listener.kinds() == ["appends0+1", "flush"]
    listener.flushes[0].set_result(True)
    assert reply.result(TIMEOUT) is True
    append(ref, "t", 3)
    assert listener.kinds()[-1] == "append2"


def test_commit_staged_hands_the_stage_over_and_is_a_no_op_when_empty() -> None:
    listener = FakeListener()
    core = make_core(listener)
    core.commit_staged()
    assert listener.calls == []
    core.append("inbox", "x", staged=True)
    assert core.staged == 1
    core.commit_staged()
    assert core.staged == 0
    assert listener.kinds() == ["appends0"]
    core.commit_staged()
    assert listener.kinds() == ["appends0"]


def test_a_refused_hand_over_keeps_the_stage_and_fails_the_flush() -> None:
    listener = FakeListener()
    log = EventLog()
    core = make_core(listener, log)
    staged = core.append("inbox", "x", staged=True)
    dispatch = core.append("t", "dispatch")  # joins the stage: nothing reaches the listener yet
    assert list(log.snapshot()) == [staged, dispatch]
    listener.append_error = RuntimeError("store closed")
    assert isinstance(core.flush().exception(TIMEOUT), RuntimeError)  # a flush cannot cover it
    assert core.staged == 2
    listener.append_error = None
    flushed = core.flush()
    assert listener.appended() == [staged, dispatch]
    listener.flushes[0].set_result(True)
    assert flushed.result(TIMEOUT) is True
    assert core.staged == 0


def test_without_a_listener_staging_is_a_plain_append() -> None:
    core = make_core(None)
    assert core.append("inbox", "x", staged=True).seq == 0
    assert core.staged == 0
    assert not core.persistent
    assert core.flush().result(TIMEOUT) is False


def test_a_detached_core_refuses_to_commit_a_stage() -> None:
    listener = FakeListener()
    ref, _ = start(listener)
    send_staged(ref, "inbox", "x")
    detached: Future[None] = Future()
    ref.tell(DetachSession(detached))
    detached.result(TIMEOUT)
    assert isinstance(send_flush(ref).exception(TIMEOUT), SessionDetachedError)
    assert listener.calls == []  # a stage open at detach never reaches the store


def test_a_stage_reaches_sqlite_in_one_commit(tmp_path: Path) -> None:
    commits: list[list[Any]] = []
    store = SqliteEventStore(tmp_path / "s.sqlite3")
    try:
        header = SessionHeader("s-1")
        store.create_session(header)
        ref, _ = start(store, header=header)
        assert send_flush(ref).result(TIMEOUT) is True
        store.fault_hook = lambda: commits.append(
            list(store._writer._queue)
        )  # empty: round taken whole
        before = store.commit_count
        send_staged(ref, "inbox", "queued")
        assert store.pending_rows == 0  # staged: not queued in the store yet
        append(ref, "schedule/change", "dispatch")
        assert store.pending_rows == 0  # joined the stage
        assert send_flush(ref).result(TIMEOUT) is True
        assert store.commit_count == before + 1
        assert commits == [[]]  # the writer took both rows into that one round
        stored = store.load("s-1")
        assert stored is not None
        assert [e.data for e in stored.events] == ["queued", "dispatch"]
    finally:
        pykka.ActorRegistry.stop_all()
        store.close()


# --- durable progress -------------------------------------------------------------------------


def test_durable_progress_follows_successful_flushes_only() -> None:
    listener = FakeListener()
    core = make_core(listener)
    heard: list[int] = []
    unsubscribe = core.on_durable(heard.append)
    core.append("t", 0)
    core.append("t", 1)
    failed = core.flush()
    core.append("t", 2)
    succeeded = core.flush()
    listener.flushes[0].set_result(False)
    assert failed.result(TIMEOUT) is False
    assert heard == [] and core.durable_length == 0
    listener.flushes[1].set_result(True)
    assert succeeded.result(TIMEOUT) is True
    assert heard == [3] and core.durable_length == 3
    late = core.flush()  # covers nothing new
    listener.flushes[2].set_result(True)
    assert late.result(TIMEOUT) is True
    assert heard == [3]
    unsubscribe()
    core.append("t", 3)
    after = core.flush()
    listener.flushes[3].set_result(True)
    assert after.result(TIMEOUT) is True
    assert heard == [3] and core.durable_length == 4


def test_a_failing_durable_listener_does_not_fail_the_flush() -> None:
    listener = FakeListener()
    core = make_core(listener)

    def broken(length: int) -> None:
        raise RuntimeError("listener bug")

    heard: list[int] = []
    core.on_durable(broken)
    core.on_durable(heard.append)
    core.append("t", 0)
    flushed = core.flush()
    listener.flushes[0].set_result(True)
    assert flushed.result(TIMEOUT) is True
    assert heard == [1]
