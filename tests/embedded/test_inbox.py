"""The embedded agents' durable inbox: logging, staging, the durability gate, back-off, resume."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from host_bridge._futures import resolved
from host_bridge._plugin import install_schedule
from host_bridge.embedded.agents import (
    RETRY_FIRST_MS,
    RETRY_MAX_MS,
    EmbeddedAgent,
    Turn,
    TurnInterrupted,
)
from host_bridge.embedded.codec import PayloadError
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.inbox import (
    INBOX_EVENT,
    TURN_COMPLETED_EVENT,
    InboxEntry,
    completed_data,
    message_of,
    pending_entries,
    queued_data,
)
from host_bridge.embedded.stores import EventStore, SqliteEventStore
from host_bridge.protocols import SessionEvent, TextBlock, UserMessage
from host_bridge.testing import FakeClock, FakeTimers, settle
from messages import SCHEDULE_CHANGE_TYPE

TIMEOUT = 5.0


def message(text: str, kind: str = "test") -> UserMessage:
    return UserMessage((TextBlock(text),), {"kind": "plugin", "plugin": kind})


class Recorder:
    """A model that records the text of every turn it runs."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, turn: Turn) -> str | None:
        with self._lock:
            self.texts.append(turn.message.text)
        return None


class ScriptedFlush:
    """The store's ``flush`` for one session: ``ok`` (real), ``false``, ``raise`` or ``hold``."""

    def __init__(self, store: EventStore, session_id: str) -> None:
        self.real = store.flush
        self.session_id = session_id
        self.mode = "ok"
        self.calls = 0
        self.held: list[Future[bool]] = []

    def __call__(self, session_id: str) -> Future[bool]:
        if session_id != self.session_id:
            return self.real(session_id)
        self.calls += 1
        if self.mode == "false":
            return resolved(False)
        if self.mode == "raise":
            raise OSError("database or disk is full")
        if self.mode == "hold":
            future: Future[bool] = Future()
            self.held.append(future)
            return future
        return self.real(session_id)


class Rig:
    """An embedded host on SQLite with fake time, one agent and a scripted flush for its session."""

    def __init__(self, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.clock = FakeClock(7_000)
        self.timers = FakeTimers(self.clock)
        self.host = EmbeddedHost(data_dir, clock=self.clock, timers=self.timers)
        self.model = Recorder()
        assert self.host.persistence is not None
        self.store = self.host.persistence
        self.flush = ScriptedFlush(self.store, "s")
        monkeypatch.setattr(self.store, "flush", self.flush)
        self.agent = self.host.spawn_root(session_id="s", model=self.model)
        self.flush.calls = 0  # opening the session flushed it once

    def quiet(self) -> None:
        """Let the session and turn actors handle everything sent so far."""
        for _ in range(3):
            settle(self.agent.session.actor_ref)
            settle(self.agent.actor_ref)

    def types(self) -> list[str]:
        return [event.type for event in self.agent.session.events]


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    made = Rig(tmp_path / "data", monkeypatch)
    yield made
    made.host.close()


def wait_idle(agent: EmbeddedAgent) -> None:
    agent.when_idle().result(timeout=TIMEOUT)
    settle(agent.actor_ref)


# --- the log ------------------------------------------------------------------------------------


def test_a_prompt_is_logged_then_run_then_completed(rig: Rig) -> None:
    rig.agent.prompt("hello")
    wait_idle(rig.agent)
    events = rig.agent.session.events
    assert [e.type for e in events] == [INBOX_EVENT, "message", TURN_COMPLETED_EVENT]
    assert events[0].data == {"content": ["hello"], "source": {"kind": "user"}}
    assert events[1].data == {
        "role": "user",
        "content": "hello",
        "source": {"kind": "user"},
        "inbox": 0,
    }
    assert events[2].data == {"inbox": 0, "failed": False}
    assert rig.model.texts == ["hello"]
    rig.quiet()
    assert rig.flush.calls == 2  # the gate's flush, then one for the completion (not awaited)


def test_a_failed_turn_is_completed_too(rig: Rig) -> None:
    def broken(turn: Turn) -> str:
        raise RuntimeError("model crashed")

    rig.agent.model = broken
    rig.agent.followup(message("boom"))
    wait_idle(rig.agent)
    assert rig.agent.session.events[-1].data == {"inbox": 0, "failed": True}
    assert rig.agent.turns[0].failed


def test_an_interrupted_turn_records_no_completion_and_runs_again_after_a_resume(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"

    def cut(turn: Turn) -> str:
        raise TurnInterrupted("the host is stopping")

    with EmbeddedHost(data) as first:
        agent = first.spawn_root(session_id="s", model=cut)
        agent.followup(message("pill"))
        wait_idle(agent)
        assert [e.type for e in agent.session.events] == [INBOX_EVENT, "message"]
        assert agent.turns[0].failed

    model = Recorder()
    with EmbeddedHost(data) as second:
        agent = second.spawn_root(session_id="s", model=model)
        wait_idle(agent)
        assert model.texts == ["pill"]  # the interrupted turn runs again, once
        assert agent.session.events[-1].data == {"inbox": 0, "failed": False}


def test_a_follow_up_whose_inbox_append_fails_raises_and_queues_nothing(rig: Rig) -> None:
    unstorable = UserMessage((TextBlock("x"),), {"kind": {1, 2}})  # a set cannot be encoded
    with pytest.raises(PayloadError):
        rig.agent.followup(unstorable)
    assert rig.agent.queued == ()
    assert len(rig.agent.session.events) == 0
    assert rig.agent.when_idle().done()
    assert rig.model.texts == []


# --- the durability gate ---------------------------------------------------------------------


def test_a_turn_starts_only_after_a_flush_covering_its_entry_succeeded(rig: Rig) -> None:
    rig.flush.mode = "hold"
    rig.agent.prompt("hello")
    rig.quiet()
    assert rig.flush.calls == 1  # the agent asked for the flush at once
    assert rig.model.texts == []
    assert rig.types() == [INBOX_EVENT]
    assert [entry.seq for entry in rig.agent.queued] == [0]
    assert rig.agent.reserve_turn_admission() is None  # about to wake: no admission
    idle = rig.agent.when_idle()
    assert not idle.done()
    rig.flush.held[0].set_result(True)
    idle.result(TIMEOUT)
    assert rig.model.texts == ["hello"]


@pytest.mark.parametrize("failure", ["false", "raise"])
def test_a_failed_flush_keeps_the_message_until_a_successful_flush_by_anyone(
    rig: Rig, failure: str
) -> None:
    rig.flush.mode = failure
    rig.agent.prompt("hello")
    rig.quiet()
    assert rig.model.texts == []
    assert [entry.seq for entry in rig.agent.queued] == [0]  # kept, never dropped
    assert rig.timers.armed() == [RETRY_FIRST_MS]
    assert not rig.agent.when_idle().done()
    rig.flush.mode = "ok"
    assert rig.host.sessions.flush(rig.agent.session).result(TIMEOUT) is True  # someone else's
    wait_idle(rig.agent)
    assert rig.model.texts == ["hello"]
    assert rig.timers.armed() == []  # the retry was called off


def test_failed_flushes_are_retried_on_a_doubling_back_off(rig: Rig) -> None:
    rig.flush.mode = "false"
    rig.agent.prompt("hello")
    rig.quiet()
    delays = []
    for _ in range(9):
        (delay,) = rig.timers.armed()
        delays.append(delay)
        calls = rig.flush.calls
        rig.timers.advance(delay - 1)
        rig.quiet()
        assert rig.flush.calls == calls  # not before its time
        rig.timers.advance(1)
        rig.quiet()
        assert rig.flush.calls == calls + 1
    assert delays == [500, 1000, 2000, 4000, 8000, 16000, RETRY_MAX_MS, RETRY_MAX_MS, RETRY_MAX_MS]
    assert rig.model.texts == []
    rig.flush.mode = "ok"  # space returns
    rig.timers.advance(RETRY_MAX_MS)
    wait_idle(rig.agent)
    assert rig.model.texts == ["hello"]
    rig.flush.mode = "false"  # progress resets the back-off
    rig.agent.prompt("again")
    rig.quiet()
    assert rig.timers.armed() == [RETRY_FIRST_MS]


def test_messages_keep_their_order_behind_a_waiting_head(rig: Rig) -> None:
    rig.flush.mode = "false"
    rig.agent.prompt("first")
    rig.agent.followup(message("second"))
    rig.quiet()
    assert [entry.message.text for entry in rig.agent.queued] == ["first", "second"]
    rig.flush.mode = "ok"
    assert rig.timers.run_next()  # the retry (each failed attempt doubled its back-off)
    wait_idle(rig.agent)
    assert rig.model.texts == ["first", "second"]


def test_a_host_without_persistence_starts_turns_at_once(tmp_path: Path) -> None:
    model = Recorder()
    with EmbeddedHost(tmp_path, durable=False) as host:
        agent = host.spawn_root(model=model)
        agent.prompt("hello")
        wait_idle(agent)
        assert model.texts == ["hello"]
        assert [e.type for e in agent.session.events] == [
            INBOX_EVENT,
            "message",
            TURN_COMPLETED_EVENT,
        ]


# --- staging inside a reservation ------------------------------------------------------------


def test_a_follow_up_inside_a_reservation_reaches_the_store_with_the_reservers_appends(
    rig: Rig,
) -> None:
    release = rig.agent.reserve_turn_admission()
    assert release is not None
    rig.agent.followup(message("reminder"))
    rig.quiet()
    assert rig.types() == [INBOX_EVENT]
    assert rig.store.pending_rows == 1  # only the session row: the entry is staged
    assert rig.flush.calls == 0  # and the agent does not flush while reserved
    rig.agent.session.append("note", {"dispatch": 1})
    rig.agent.session.append("note", {"dispatch": 2})  # every append of the reserver joins
    assert rig.store.pending_rows == 1
    release()  # the release hands the stage over as one unit and flushes it
    wait_idle(rig.agent)
    assert rig.model.texts == ["reminder"]
    assert isinstance(rig.store, SqliteEventStore)
    stored = SqliteEventStore(rig.store.path, create=False)
    try:
        loaded = stored.load("s")
    finally:
        stored.close()
    assert loaded is not None
    assert [e.type for e in loaded.events][:3] == [INBOX_EVENT, "note", "note"]


def test_release_commits_a_stage_that_no_append_followed(rig: Rig) -> None:
    release = rig.agent.reserve_turn_admission()
    assert release is not None
    rig.agent.followup(message("reminder"))
    release()  # e.g. the reserver's own append failed
    wait_idle(rig.agent)
    assert rig.model.texts == ["reminder"]
    assert rig.agent.session.durable_length >= 1  # the stage was handed over and flushed


@pytest.mark.parametrize(
    ("host_runtime", "owner_runtime"),
    [("threading", "threading"), ("gevent", "gevent"), ("threading", "gevent")],
)
def test_a_reminder_and_its_inbox_entry_reach_the_store_as_one_unit(
    tmp_path: Path, host_runtime: str, owner_runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    timers = FakeTimers(clock)
    host = EmbeddedHost(tmp_path, clock=clock, timers=timers, runtime=host_runtime)
    assert host.persistence is not None
    units: list[list[str]] = []
    real = host.persistence.record_appends

    def record_appends(session_id: str, rows: Any) -> None:
        units.append([event.type for event, _ in rows])
        real(session_id, rows)

    monkeypatch.setattr(host.persistence, "record_appends", record_appends)
    plugin = install_schedule(host.context(), runtime=owner_runtime)
    model = Recorder()
    agent = host.spawn_root(session_id="s", model=model)
    created = host.tools.execute(
        "schedule_create", {"prompt": "p", "after_seconds": 5}, agent=agent, timeout=5
    )
    assert created.value["id"] == "schedule-1"
    plugin.wait_quiet(agent)
    units.clear()
    timers.advance(5_000)
    plugin.wait_quiet(agent)
    agent.when_idle().result(timeout=TIMEOUT)
    plugin.wait_quiet(agent)
    assert len(model.texts) == 1 and model.texts[0].startswith("[SCHEDULE REMINDER]")
    assert units[0] == [INBOX_EVENT, SCHEDULE_CHANGE_TYPE]  # staged entry + dispatch together
    types = [e.type for e in agent.session.events]
    entry = types.index(INBOX_EVENT)
    assert types[entry : entry + 4] == [
        INBOX_EVENT,
        SCHEDULE_CHANGE_TYPE,
        "message",
        TURN_COMPLETED_EVENT,
    ]
    plugin.dispose().result(timeout=TIMEOUT)
    host.close()


# --- resume --------------------------------------------------------------------------------


def test_a_resumed_session_queues_its_unfinished_entries_again_first(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedHost(data, durable=True) as first:
        session = first.sessions.create("s")
        for text in ("done", "started", "never started"):
            session.append(INBOX_EVENT, queued_data(message(text)))
        session.append("message", {"role": "user", "content": "done", "inbox": 0})
        session.append(TURN_COMPLETED_EVENT, completed_data(0, failed=False))
        session.append("message", {"role": "user", "content": "started", "inbox": 1})
        assert first.sessions.flush(session).result(TIMEOUT) is True

    model = Recorder()
    with EmbeddedHost(data) as second:
        refused: list[object] = []
        second.agents.on_created(lambda agent: refused.append(agent.reserve_turn_admission()))
        agent = second.spawn_root(session_id="s", model=model)
        agent.prompt("new")
        wait_idle(agent)
        assert refused == [None]  # nothing could get in ahead of the taken-over entries
        assert model.texts == ["started", "never started", "new"]
        other = second.spawn_root(session=agent.session)  # the inbox was claimed already
        assert other.queued == ()
        completed = [
            e.data["inbox"] for e in agent.session.events if e.type == TURN_COMPLETED_EVENT
        ]
        assert completed == [0, 1, 2, 6]  # 6: the new prompt

    with EmbeddedHost(data) as third:  # everything finished: nothing runs again
        again = Recorder()
        wait_idle(third.spawn_root(session_id="s", model=again))
        assert again.texts == []


def test_pending_entries_follow_log_order_skip_malformed_ones_and_respect_a_fork() -> None:
    def ev(seq: int, type_: str, data: Any) -> SessionEvent:
        return SessionEvent(type_, seq, 0, data)

    events = [
        ev(0, INBOX_EVENT, queued_data(message("inherited"))),
        ev(1, INBOX_EVENT, queued_data(message("a"))),
        ev(2, INBOX_EVENT, {"content": "not a list", "source": {}}),
        ev(3, "message", {"role": "user", "content": "a", "inbox": 1}),
        ev(4, INBOX_EVENT, queued_data(message("b"))),
        ev(5, TURN_COMPLETED_EVENT, {"inbox": 1, "failed": True}),
        ev(6, TURN_COMPLETED_EVENT, {"inbox": True}),  # malformed: ignored
        ev(7, INBOX_EVENT, queued_data(message("c"))),
    ]
    assert [(e.seq, e.message.text) for e in pending_entries(events)] == [
        (0, "inherited"),
        (4, "b"),
        (7, "c"),
    ]
    assert [e.seq for e in pending_entries(events, start=1)] == [4, 7]
    assert pending_entries(events, start=1)[0] == InboxEntry(4, message("b"))


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {"content": ["x"]},
        {"content": ["x"], "source": {}, "extra": 1},
        {"content": [1], "source": {}},
        {"content": ["x"], "source": "user"},
    ],
)
def test_malformed_inbox_data_is_not_a_message(data: Any) -> None:
    assert message_of(data) is None


def test_inbox_data_round_trips_a_message() -> None:
    original = UserMessage((TextBlock("a"), TextBlock("b")), {"kind": "plugin", "plugin": "x"})
    assert message_of(queued_data(original)) == original
