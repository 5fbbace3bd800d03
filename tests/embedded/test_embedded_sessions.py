"""EmbeddedSessionStore on a real SQLite file: create, resume, fork, open, detach, restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from actors._contract import SessionDetachedError
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.sessions import EmbeddedSession, EmbeddedSessionStore, SessionError
from host_bridge.protocols import Session, SessionEvent, SessionHeader
from host_bridge.testing import FakeClock

TIMEOUT = 10.0


@pytest.fixture
def host(tmp_path: Path) -> Iterator[EmbeddedHost]:
    with EmbeddedHost(tmp_path / "data", clock=FakeClock(5_000)) as embedded:
        yield embedded


def reopen(tmp_path: Path) -> EmbeddedHost:
    return EmbeddedHost(tmp_path / "data", clock=FakeClock(9_000))


def flush(host: EmbeddedHost, session: Session) -> bool:
    result: bool = host.sessions.flush(session).result(TIMEOUT)
    return result


def data(events: Sequence[SessionEvent]) -> list[Any]:
    return [event.data for event in events]


def test_session_satisfies_the_protocol_and_reads_its_own_appends(host: EmbeddedHost) -> None:
    session = host.sessions.create("s-1")
    assert isinstance(session, Session)
    assert session.id == "s-1"
    assert session.header == SessionHeader("s-1")
    before = session.events
    event = session.append("message", {"text": "hi"})
    assert event == SessionEvent("message", 0, 5_000, {"text": "hi"})
    assert len(before) == 0  # a snapshot never changes
    assert list(session.events) == [event]
    assert host.sessions.get("s-1") is session
    assert list(host.sessions.list()) == [session]


def test_generated_ids_are_unique(host: EmbeddedHost) -> None:
    first = host.sessions.create()
    second = host.sessions.create()
    assert first.id != second.id
    assert first.id.startswith("session-")


def test_flushed_events_and_header_survive_a_new_host(tmp_path: Path, host: EmbeddedHost) -> None:
    session = host.sessions.create("s-1")
    session.append("message", ["a", ("b", 1)])
    session.append("schedule/change", {"version": 1, "operation": "dispatch", "id": "x"})
    assert flush(host, session) is True
    host.close()
    with reopen(tmp_path) as again:
        resumed = again.sessions.resume("s-1")
        assert resumed.header == SessionHeader("s-1")
        assert [(e.type, e.seq, e.time) for e in resumed.events] == [
            ("message", 0, 5_000),
            ("schedule/change", 1, 5_000),
        ]
        assert data(resumed.events) == [
            ["a", ["b", 1]],
            {"version": 1, "operation": "dispatch", "id": "x"},
        ]
        # the resumed session keeps appending where it left off, durably
        assert resumed.append("message", "later") == SessionEvent("message", 2, 9_000, "later")
        assert flush(again, resumed) is True
    with reopen(tmp_path) as third:
        assert data(third.sessions.resume("s-1").events)[-1] == "later"


RESTART_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from host_bridge.embedded.host import EmbeddedHost

    host = EmbeddedHost(sys.argv[1])
    parent = host.sessions.create("restart-parent")
    parent.append("message", {"role": "user", "content": "hello"})
    parent.append("message", {"n": [1, 2.5, None, True]})
    child = host.sessions.fork(parent, session_id="restart-child")
    child.append("message", "child only")
    parent.append("message", "parent after fork")
    results = [host.sessions.flush(s).result(10) for s in (parent, child)]
    print(json.dumps(results), flush=True)
    os._exit(0)  # no close: an acknowledged flush alone must make the events durable
    """
)


def test_a_new_process_sees_what_a_crashed_process_flushed(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-c", RESTART_SCRIPT, str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, True]
    with EmbeddedHost(data_dir) as host:
        assert host.persistence is not None
        assert host.persistence.session_ids() == ["restart-child", "restart-parent"]
        parent = host.sessions.resume("restart-parent")
        assert parent.header == SessionHeader("restart-parent")
        assert data(parent.events) == [
            {"role": "user", "content": "hello"},
            {"n": [1, 2.5, None, True]},
            "parent after fork",
        ]
        child = host.sessions.resume("restart-child")
        assert child.header == SessionHeader(
            "restart-child", seed_length=2, parent_session="restart-parent"
        )
        assert data(child.events) == [*data(parent.events)[:2], "child only"]
        assert [e.seq for e in child.events] == [0, 1, 2]
        assert [e.time for e in child.events[:2]] == [e.time for e in parent.events[:2]]


def test_fork_seeds_the_child_and_keeps_the_parent_untouched(
    tmp_path: Path, host: EmbeddedHost
) -> None:
    parent = host.sessions.create("parent")
    for n in range(3):
        parent.append("message", n)
    child = host.sessions.fork(parent, at=2, session_id="child")
    assert child.header == SessionHeader("child", seed_length=2, parent_session="parent")
    assert list(child.events) == list(parent.events[:2])
    child.append("message", "mine")
    assert data(child.events) == [0, 1, "mine"]
    assert data(parent.events) == [0, 1, 2]
    whole = host.sessions.fork(parent)
    assert whole.header.seed_length == 3
    assert whole.header.parent_session == "parent"
    empty = host.sessions.fork(parent, at=0, session_id="empty")
    assert empty.header.seed_length == 0
    assert list(empty.events) == []
    for session in (parent, child, whole, empty):
        assert flush(host, session) is True
    host.close()
    with reopen(tmp_path) as again:
        restored_child = again.sessions.resume("child")
        assert restored_child.header == child.header
        assert data(restored_child.events) == [0, 1, "mine"]
        assert data(again.sessions.resume("parent").events) == [0, 1, 2]
        assert again.sessions.resume("empty").header.seed_length == 0


@pytest.mark.parametrize("at", [-1, 4, True, False])
def test_fork_boundary_must_lie_inside_the_log(host: EmbeddedHost, at: Any) -> None:
    parent = host.sessions.create("parent")
    for n in range(3):
        parent.append("message", n)
    with pytest.raises(SessionError, match="boundary"):
        host.sessions.fork(parent, at=at, session_id="child")
    assert host.sessions.get("child") is None


def test_resume_refuses_live_unknown_and_storeless_sessions(host: EmbeddedHost) -> None:
    session = host.sessions.create("s-1")
    assert flush(host, session) is True
    with pytest.raises(SessionError, match="already live"):
        host.sessions.resume("s-1")
    assert host.sessions.get("s-1") is session
    with pytest.raises(SessionError, match="no stored session"):
        host.sessions.resume("nobody")
    storeless = EmbeddedSessionStore(None)
    with pytest.raises(SessionError, match="no persistence"):
        storeless.resume("s-1")


def test_create_refuses_live_stored_and_invalid_ids(host: EmbeddedHost) -> None:
    session = host.sessions.create("s-1")
    with pytest.raises(SessionError, match="already live"):
        host.sessions.create("s-1")
    assert flush(host, session) is True
    host.sessions.detach(session)
    with pytest.raises(SessionError, match="already exists"):
        host.sessions.create("s-1")  # stored, not live: resume it instead
    for bad in ("", "nul\x00inside", "lone \udc00 surrogate"):
        with pytest.raises(SessionError):
            host.sessions.create(bad)
        assert host.sessions.get(bad) is None


def test_open_returns_live_else_resumes_else_creates(tmp_path: Path, host: EmbeddedHost) -> None:
    live = host.sessions.create("live")
    assert host.sessions.open("live") is live
    stored = host.sessions.create("stored")
    stored.append("message", "kept")
    assert flush(host, stored) is True
    host.sessions.detach(stored)
    reopened = host.sessions.open("stored")
    assert reopened is not stored
    assert data(reopened.events) == ["kept"]
    fresh = host.sessions.open("fresh")
    assert list(fresh.events) == []
    assert fresh.header == SessionHeader("fresh")
    fresh.append("message", 1)
    assert flush(host, fresh) is True
    host.close()
    with reopen(tmp_path) as again:
        assert data(again.sessions.open("fresh").events) == [1]


HOSTILE_IDS = [
    'double"quote',
    "single'quote",
    "x'); DROP TABLE events; --",
    "../../../etc/passwd",
    "..",
    "/absolute/path",
    "日本語-セッション-🎉",
    "tab\there\nnewline\r",
    " padded ",
    "%s %d {} \\",
    "a" * 10_000,
]
FORK_ID = "fork' OR '1'='1 /../"


def test_hostile_session_ids_round_trip(tmp_path: Path, host: EmbeddedHost) -> None:
    for index, session_id in enumerate(HOSTILE_IDS):
        session = host.sessions.create(session_id)
        session.append("message", {"index": index, "id": session_id})
        assert flush(host, session) is True
    parent = host.sessions.get(HOSTILE_IDS[2])
    assert parent is not None
    child = host.sessions.fork(parent, session_id=FORK_ID)
    assert flush(host, child) is True
    host.close()
    with reopen(tmp_path) as again:
        assert again.persistence is not None
        assert sorted(again.persistence.session_ids()) == sorted([*HOSTILE_IDS, FORK_ID])
        for index, session_id in enumerate(HOSTILE_IDS):
            resumed = again.sessions.resume(session_id)
            assert resumed.id == session_id
            assert data(resumed.events) == [{"index": index, "id": session_id}]
        forked = again.sessions.resume(FORK_ID)
        assert forked.header == SessionHeader(FORK_ID, seed_length=1, parent_session=HOSTILE_IDS[2])
        assert data(forked.events) == [{"index": 2, "id": HOSTILE_IDS[2]}]
    # ids are data, never paths: nothing but the store was written
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == sorted(
        p.name for p in (tmp_path / "data").iterdir() if p.name.startswith("sessions.sqlite3")
    )
    assert store_path(tmp_path / "data").is_file()


def test_detach_rejects_later_work(host: EmbeddedHost) -> None:
    session = host.sessions.create("s-1")
    session.append("message", 1)
    host.sessions.detach(session)
    assert session.detached
    assert host.sessions.get("s-1") is None
    assert host.sessions.list() == ()
    with pytest.raises(SessionDetachedError):
        session.append("message", 2)
    assert isinstance(host.sessions.flush(session).exception(TIMEOUT), SessionDetachedError)
    assert isinstance(session.request_flush().exception(TIMEOUT), SessionDetachedError)
    assert data(session.events) == [1]
    host.sessions.detach(session)  # idempotent


def test_detaching_a_stale_session_object_leaves_the_live_one_alone(host: EmbeddedHost) -> None:
    old = host.sessions.create("s-1")
    assert flush(host, old) is True
    host.sessions.detach(old)
    new = host.sessions.resume("s-1")
    host.sessions.detach(old)  # a stale handle with the same id
    assert host.sessions.get("s-1") is new
    assert not new.detached
    assert new.append("message", "still live").seq == 0
    assert flush(host, new) is True


def test_resume_after_an_unflushed_detach_sees_every_append(host: EmbeddedHost) -> None:
    session = host.sessions.create("s-1")
    session.append("message", 1)
    assert flush(host, session) is True
    session.append("message", 2)  # written behind, not yet durable
    host.sessions.detach(session)
    resumed = host.sessions.resume("s-1")
    assert data(resumed.events) == [1, 2]
    assert resumed.append("message", 3).seq == 2
    assert flush(host, resumed) is True


def test_open_after_an_unflushed_detach_of_a_new_session_resumes_it(host: EmbeddedHost) -> None:
    session = host.sessions.create("s-1")
    session.append("message", 1)
    host.sessions.detach(session)  # never flushed: the session row is still queued
    reopened = host.sessions.open("s-1")
    assert data(reopened.events) == [1]


def test_flush_fails_for_a_session_of_another_store(tmp_path: Path, host: EmbeddedHost) -> None:
    with EmbeddedHost(tmp_path / "other") as other:
        foreign = other.sessions.create("s-1")
        mine = host.sessions.create("s-1")
        assert isinstance(host.sessions.flush(foreign).exception(TIMEOUT), SessionDetachedError)
        assert flush(host, mine) is True


def test_a_store_without_persistence_never_claims_durability() -> None:
    store = EmbeddedSessionStore(None, clock=FakeClock(1))
    try:
        session = store.create("s-1")
        assert session.append("message", "x").seq == 0
        assert store.flush(session).result(TIMEOUT) is False
        assert store.persistence is None
    finally:
        store.close()


def test_append_guards_judge_every_session_until_removed(host: EmbeddedHost) -> None:
    calls: list[tuple[str, int, str, Any]] = []

    def guard(header: SessionHeader, events: Sequence[SessionEvent], type_: str, data: Any) -> None:
        calls.append((header.id, len(events), type_, data))
        if data == "forbidden":
            raise PermissionError("no")

    first = host.sessions.create("a")
    remove = host.sessions.add_append_guard(guard)
    second = host.sessions.create("b")
    first.append("message", 1)
    second.append("message", 2)
    with pytest.raises(PermissionError):
        second.append("message", "forbidden")
    assert data(second.events) == [2]
    assert calls == [
        ("a", 0, "message", 1),
        ("b", 0, "message", 2),
        ("b", 1, "message", "forbidden"),
    ]
    remove()
    remove()
    assert second.append("message", "forbidden").seq == 1
    assert len(calls) == 3
    assert flush(host, second) is True
    assert host.persistence is not None
    stored = host.persistence.load("b")
    assert stored is not None
    assert data(stored.events) == [2, "forbidden"]


def test_close_detaches_every_session(host: EmbeddedHost) -> None:
    sessions: list[EmbeddedSession] = [host.sessions.create(f"s-{n}") for n in range(3)]
    host.sessions.close()
    assert host.sessions.list() == ()
    for session in sessions:
        assert session.detached
        with pytest.raises(SessionDetachedError):
            session.append("message", 1)


def test_concurrent_appends_through_sessions_are_contiguous_and_durable(
    tmp_path: Path, host: EmbeddedHost
) -> None:
    session = host.sessions.create("busy")
    threads, per_thread = 6, 30
    barrier = threading.Barrier(threads)
    seqs: list[list[int]] = [[] for _ in range(threads)]

    def worker(index: int) -> None:
        barrier.wait(TIMEOUT)
        for n in range(per_thread):
            seqs[index].append(session.append("message", [index, n]).seq)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(TIMEOUT)
    assert sorted(s for mine in seqs for s in mine) == list(range(threads * per_thread))
    assert flush(host, session) is True
    host.close()
    with reopen(tmp_path) as again:
        resumed = again.sessions.resume("busy")
        assert list(resumed.events) == list(session.events)
        for index, mine in enumerate(seqs):
            assert [resumed.events[s].data for s in mine] == [[index, n] for n in range(per_thread)]
