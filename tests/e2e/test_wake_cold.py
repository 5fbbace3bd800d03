"""Cold delivery on the embedded host: real SQLite, real actors, fake time, both runtimes.

Stored sessions nobody has open come due; a host whose activation delivers
cold (:class:`~host_bridge.embedded.cold.ColdActivation`) delivers them in
passes without an agent each: the inbox entry and dispatches of many sessions
in one commit, then each reminder turn, recorded as an embedded agent records
it. One-shots go first and an ``every`` batch follows, an owed turn or a
person's queued message goes to a live agent, a cut turn runs again at the
next start, a failed commit is retried and its turn runs only once durable,
a session whose rows fail at give-back is let go by a later pass, one that
cannot be queued is backed off, and a person opening a session being
delivered waits for that session's turn only.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors._runtime import Runtime
from host_bridge._plugin import SchedulePlugin, WakePolicy, install_schedule
from host_bridge.embedded.agents import Turn, TurnInterrupted
from host_bridge.embedded.cold import ColdActivation, ColdTurn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT, queued_data
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.sessions import SessionError
from host_bridge.embedded.stores import EventStore
from host_bridge.protocols import SessionEvent, TextBlock, UserMessage
from host_bridge.testing import FakeClock, FakeTimers, settle
from messages import (
    REMINDER_SOURCE,
    CreateChange,
    DispatchChange,
    create_after_schedule_record,
    create_every_schedule_record,
)
from tests.changes import reopened
from tests.cli.helpers import change, deliveries, message, write_session

TIMEOUT = 20.0
MINUTE = 60_000


class ColdTurns:
    """Records the cold reminder turns; can cut them or hold one until released."""

    def __init__(self) -> None:
        self.turns: list[ColdTurn] = []
        self.cut = False
        self.fail = False
        self.hold: threading.Event | None = None
        self.hold_only: str | None = None  # hold only this session's turn
        self.then: threading.Event | None = None  # set as a turn ends
        self.started = threading.Event()
        self.holding = threading.Event()  # a held turn waits
        self.lock = threading.Lock()

    def __call__(self, turn: ColdTurn) -> str | None:
        self.started.set()
        if self.then is not None:
            self.then.set()
        if self.hold is not None and self.hold_only in (None, turn.session_id):
            self.holding.set()
            assert self.hold.wait(TIMEOUT)
        if self.cut:
            raise TurnInterrupted("stopping")
        if self.fail:
            raise RuntimeError("the model broke")
        with self.lock:
            self.turns.append(turn)
        return "Presented: " + "; ".join(r.prompt for r in turn.reminders)

    def prompts(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(t.session_id, r.prompt) for t in self.turns for r in t.reminders]


class LiveModel:
    """The model of the sessions a pass hands back to a live agent."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []

    def __call__(self, turn: Turn) -> str | None:
        self.texts.append((turn.agent.session.id, turn.message.text.splitlines()[0]))
        return "ok"


@dataclasses.dataclass
class Rig:
    host: EmbeddedHost
    plugin: SchedulePlugin
    timers: FakeTimers
    turns: ColdTurns
    live: LiveModel

    @property
    def activation(self) -> ColdActivation:
        activation = self.host.activation
        assert isinstance(activation, ColdActivation)
        return activation

    def quiet(self) -> None:
        wake = self.plugin.wake_up
        assert wake is not None
        for _ in range(50):
            settle(wake, timeout=TIMEOUT)
            self.activation.wait_idle(TIMEOUT)
            for agent in self.plugin.agents():
                self.plugin.wait_quiet(agent, TIMEOUT)
                agent.when_idle().result(timeout=TIMEOUT)
            settle(wake, timeout=TIMEOUT)
            status = self.plugin.status().wake_up
            assert status is not None
            busy = any(o.busy for o in self.plugin.status().owners)
            if not busy and status.in_flight == 0:
                self.activation.wait_idle(TIMEOUT)
                settle(wake, timeout=TIMEOUT)
                if self.plugin.status().wake_up == status:
                    return
        raise AssertionError("the host never became quiet")

    def advance(self, ms: int) -> None:
        clock = self.timers.clock
        target = clock.monotonic() + ms
        for _ in range(1_000):
            armed = self.timers.armed()
            if not armed or clock.monotonic() + armed[0] > target:
                break
            self.timers.advance(armed[0])
            self.quiet()
        else:
            raise AssertionError("timers kept firing")
        self.timers.advance(target - clock.monotonic())
        self.quiet()

    def close(self) -> None:
        self.plugin.dispose().result(timeout=TIMEOUT)
        assert self.host.close() is None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rigs(tmp_path: Path, runtime: Runtime, clock: FakeClock) -> Iterator[list[Rig]]:
    made: list[Rig] = []
    yield made
    for rig in made:
        if rig.host.persistence is not None:
            rig.close()


def open_rig(rigs: list[Rig], data: Path, runtime: Runtime, clock: FakeClock, **policy: Any) -> Rig:
    timers = FakeTimers(clock)
    host = EmbeddedHost(data, clock=clock, timers=timers, runtime=runtime)
    turns, live = ColdTurns(), LiveModel()
    host.enable_activation(model=live, cold_turns=turns)
    context = dataclasses.replace(host.context(), clock_watch_ms=None)
    options = {"rescan_ms": 600_000, "quiet_period_ms": 30_000} | policy
    plugin = install_schedule(context, runtime=runtime, wake_policy=WakePolicy(**options))
    rig = Rig(host, plugin, timers, turns, live)
    rigs.append(rig)
    rig.quiet()
    return rig


def after(schedule_id: str, prompt: str, seconds: int, now_ms: int) -> tuple[str, object]:
    return change(CreateChange(create_after_schedule_record(schedule_id, prompt, seconds, now_ms)))


def every(schedule_id: str, prompt: str, seconds: int, now_ms: int) -> tuple[str, object]:
    return change(CreateChange(create_every_schedule_record(schedule_id, prompt, seconds, now_ms)))


def types_after(data: Path, session_id: str, start: int) -> list[str]:
    return [e.type for e in reopened(store_path(data), session_id).events[start:]]


def pill_rig(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig], **policy: Any
) -> tuple[Path, Rig, EventStore]:
    """A stored session ``s1`` with a "pill" reminder due in a minute, its rig and store."""
    data = tmp_path / "data"
    write_session(data, "s1", [after("schedule-1", "pill", 60, clock.now())])
    rig = open_rig(rigs, data, runtime, clock, **policy)
    store = rig.host.persistence
    assert store is not None
    return data, rig, store


def failing_commits(store: EventStore) -> threading.Event:
    """An event that, while set, makes every commit of ``store`` fail as a full disk does."""
    failing = threading.Event()

    def hook() -> None:
        if failing.is_set():
            raise sqlite3.OperationalError("database or disk is full")

    store.fault_hook = hook
    return failing


def test_a_herd_is_delivered_without_agents_in_a_few_commits(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    ids = [f"s{i:02d}" for i in range(20)]
    for index, session_id in enumerate(ids):
        write_session(data, session_id, [message("hi"), after("schedule-1", f"p{index}", 60, now)])
    rig = open_rig(rigs, data, runtime, clock)
    store = rig.host.persistence
    assert store is not None
    commits = store.commit_count
    rig.advance(MINUTE - 1)
    assert rig.turns.prompts() == []  # never early
    rig.advance(1)
    assert sorted(rig.turns.prompts()) == sorted((s, f"p{i}") for i, s in enumerate(ids))
    assert rig.host.agents.roots() == () and rig.activation.activated == 0
    status = rig.plugin.status().wake_up
    assert status is not None and status.cold_deliveries == 20 and status.activations == 0
    assert store.commit_count - commits <= 6  # inbox + dispatches of all 20 together, ...
    rig.close()
    for session_id in ids:
        log = reopened(store_path(data), session_id).events
        assert deliveries(log) == (1, 1, 1)
        assert [e.type for e in log[2:]] == [
            INBOX_EVENT,
            "schedule/change",
            "message",
            "message",
            TURN_COMPLETED_EVENT,
        ]
        start, reply = log[4].data, log[5].data
        assert start["role"] == "user" and start["inbox"] == 2
        assert start["source"] == dict(REMINDER_SOURCE)
        assert start["content"].splitlines()[0] == "[SCHEDULE REMINDER]"
        assert reply == {"role": "assistant", "content": f"Presented: p{ids.index(session_id)}"}
        assert log[6].data == {"inbox": 2, "failed": False}


def test_a_due_one_shot_goes_first_then_one_every_batch(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, then = tmp_path / "data", clock.now() - 20 * MINUTE  # all overdue at the start
    events = [
        every("schedule-1", "water", 600, then),
        every("schedule-2", "stretch", 300, then),
        after("schedule-3", "call", 900, then),
    ]
    write_session(data, "s1", events)
    rig = open_rig(rigs, data, runtime, clock)
    framings = [t.message.text.splitlines()[0] for t in rig.turns.turns]
    assert framings == ["[SCHEDULE REMINDER]", "[SCHEDULE REMINDER BATCH]"]
    assert [[r.schedule_id for r in t.reminders] for t in rig.turns.turns] == [
        ["schedule-3"],
        ["schedule-2", "schedule-1"],  # stored target order: 300 s before 600 s
    ]
    rig.close()
    log = reopened(store_path(data), "s1").events
    accepted = {e.data.get("acceptedAt") for e in log if e.data.get("operation") == "dispatch"}
    assert len(accepted - {None}) == 1  # one acceptedAt for the whole batch
    assert [e.type for e in log].count(INBOX_EVENT) == 2  # latest only: no backlog


def test_an_owed_turn_goes_to_a_live_agent_and_is_not_delivered_again(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    owed = UserMessage((TextBlock("[SCHEDULE REMINDER]\nowed"),), dict(REMINDER_SOURCE))
    events = [
        after("schedule-1", "pill", 1, now - 5_000),
        (INBOX_EVENT, queued_data(owed)),  # a crash after the inbox commit, before the turn
        change(DispatchChange("schedule-1")),
        after("schedule-2", "later", 3600, now),
    ]
    write_session(data, "s1", events, start_ms=now - 4_000)
    rig = open_rig(rigs, data, runtime, clock)
    rig.advance(1_000)
    assert rig.live.texts == [("s1", "[SCHEDULE REMINDER]")]  # the owed turn, by a live agent
    assert rig.turns.prompts() == []
    rig.close()
    assert deliveries(reopened(store_path(data), "s1").events) == (1, 1, 1)


def test_a_persons_queued_message_goes_first_on_a_live_agent(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    asked = UserMessage((TextBlock("what time is it"),), {"kind": "user"})
    queued = (INBOX_EVENT, queued_data(asked))
    write_session(data, "s1", [after("schedule-1", "pill", 1, now), queued], start_ms=now)
    rig = open_rig(rigs, data, runtime, clock)
    rig.advance(1_000)
    assert rig.live.texts == [("s1", "what time is it"), ("s1", "[SCHEDULE REMINDER]")]
    assert rig.turns.prompts() == []
    rig.close()
    assert deliveries(reopened(store_path(data), "s1").events) == (1, 1, 1)


def test_a_cut_turn_is_presented_again_at_the_next_start(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    write_session(data, "s1", [after("schedule-1", "pill", 60, now)])
    rig = open_rig(rigs, data, runtime, clock)
    release = threading.Event()
    rig.turns.hold = release
    rig.timers.advance(MINUTE)  # the pass starts; its turn holds
    assert rig.turns.started.wait(TIMEOUT)
    disposed = rig.plugin.dispose()  # a stop: no pass, no activation any more ...
    rig.turns.cut = True  # ... and the turn still running is cut
    release.set()
    disposed.result(timeout=TIMEOUT)
    assert rig.turns.prompts() == []
    assert rig.host.close() is None
    assert types_after(data, "s1", 1) == [INBOX_EVENT, "schedule/change", "message"]
    again = open_rig(rigs, data, runtime, clock)
    again.advance(1_000)
    assert again.live.texts == [("s1", "[SCHEDULE REMINDER]")]  # run again, once
    again.close()
    assert deliveries(reopened(store_path(data), "s1").events) == (1, 1, 1)


def test_a_failing_turn_is_recorded_as_failed_and_not_run_again(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    write_session(data, "s1", [after("schedule-1", "pill", 60, now)])
    rig = open_rig(rigs, data, runtime, clock)
    rig.turns.fail = True
    rig.advance(MINUTE)
    rig.close()
    log = reopened(store_path(data), "s1").events
    assert log[-1].type == TURN_COMPLETED_EVENT and log[-1].data == {"inbox": 1, "failed": True}
    assert deliveries(log) == (1, 1, 1)


def test_a_failed_inbox_commit_is_retried_and_its_turn_runs_once_durable(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, rig, store = pill_rig(tmp_path, runtime, clock, rigs, rescan_ms=5_000)
    failing = failing_commits(store)
    failing.set()
    rig.advance(MINUTE)
    assert rig.turns.prompts() == []  # not durable: the turn waits
    with rig.activation.opening("s1"), pytest.raises(SessionError):
        rig.host.sessions.open("s1")  # held for the retry: refused at once, not kept waiting
    failing.clear()
    rig.advance(5_000)
    assert rig.turns.prompts() == [("s1", "pill")]
    rig.advance(60_000)
    assert rig.turns.prompts() == [("s1", "pill")]  # once
    rig.close()
    assert deliveries(reopened(store_path(data), "s1").events) == (1, 1, 1)


def test_a_person_opening_a_session_being_delivered_waits_for_the_pass(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    write_session(data, "s1", [after("schedule-1", "pill", 60, now)])
    rig = open_rig(rigs, data, runtime, clock)
    release = threading.Event()
    rig.turns.hold = release
    rig.timers.advance(MINUTE)  # the pass starts; its turn holds
    assert rig.turns.started.wait(TIMEOUT)
    seen: list[list[SessionEvent]] = []
    entered = threading.Event()

    def person() -> None:
        with rig.activation.opening("s1") as woken:
            assert woken is None
            entered.set()
            session = rig.host.sessions.open("s1")
            seen.append(list(session.events))
            rig.host.sessions.detach(session)

    registered = threading.Event()

    class Opening(dict[str, int]):  # tells when the person's open registered (then it waits)
        def __setitem__(self, key: str, value: int) -> None:
            super().__setitem__(key, value)
            registered.set()

    rig.activation._opening = Opening()
    opener = threading.Thread(target=person)
    opener.start()
    assert registered.wait(TIMEOUT)  # registered under the lock; it now waits for the pass
    assert not entered.is_set()
    release.set()
    opener.join(TIMEOUT)
    assert entered.is_set()
    rig.quiet()
    assert deliveries(seen[0]) == (1, 1, 1)  # the person sees the delivered turn, once
    assert rig.turns.prompts() == [("s1", "pill")]


def test_an_index_row_due_too_early_is_mended_and_nothing_is_delivered_early(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    write_session(data, "s1", [after("schedule-1", "pill", 3600, now)])
    with sqlite3.connect(store_path(data)) as db:
        db.execute("UPDATE due_index SET due_ms = 0, schedule_ms = 0 WHERE session_id = 's1'")
    rig = open_rig(rigs, data, runtime, clock)
    rig.advance(1_000)
    assert rig.turns.prompts() == []
    store = rig.host.persistence
    assert store is not None
    row = store.due_row("s1")
    assert row is not None and row.entry() is not None
    assert row.wake_ms == now + 3_600_000  # rewritten from the log
    rig.advance(3_600_000)
    assert rig.turns.prompts() == [("s1", "pill")]


def test_a_session_another_host_wrote_after_a_pass_is_delivered_again(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    from host_bridge.embedded.codec import encode_payload
    from host_bridge.embedded.stores import SqliteEventStore

    data, now = tmp_path / "data", clock.now()
    write_session(data, "s1", [after("schedule-1", "pill", 60, now)])
    rig = open_rig(rigs, data, runtime, clock)
    rig.advance(MINUTE)
    assert rig.turns.prompts() == [("s1", "pill")]
    other = SqliteEventStore(store_path(data))  # a person's chat elsewhere adds a reminder
    try:
        other.acquire_session("s1")
        length = other.stored_length("s1")
        assert length is not None
        kind, value = after("schedule-2", "water", 60, clock.now())
        other.record_append(
            "s1", SessionEvent(kind, length, clock.now(), value), encode_payload(value)
        )
        assert other.flush("s1").result(timeout=TIMEOUT) is True
    finally:
        other.close()
    rig.activation._notify()  # (another process's commit is seen at the next rescan)
    rig.advance(MINUTE)
    assert rig.turns.prompts() == [("s1", "pill"), ("s1", "water")]
    status = rig.plugin.status().wake_up
    assert status is not None and status.cold_passes < 10  # no loop of failing passes


def test_a_slow_turn_holds_only_its_own_session(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    for session_id in ("slow", "quick"):
        write_session(data, session_id, [after("schedule-1", session_id, 60, now)])
    rig = open_rig(rigs, data, runtime, clock)
    release = threading.Event()
    rig.turns.hold, rig.turns.hold_only = release, "slow"
    rig.timers.advance(MINUTE)  # one pass takes both; the slow turn holds
    assert rig.turns.holding.wait(TIMEOUT)
    opened: list[list[SessionEvent]] = []

    def person() -> None:  # opens the quick session while the slow turn still runs
        with rig.activation.opening("quick"):
            session = rig.host.sessions.open("quick")
            opened.append(list(session.events))
            rig.host.sessions.detach(session)

    try:
        opener = threading.Thread(target=person)
        opener.start()
        opener.join(TIMEOUT)
        assert not opener.is_alive() and len(opened) == 1  # given back when its turn ended
        assert deliveries(opened[0]) == (1, 1, 1)
        store = rig.host.persistence
        assert store is not None and store.holds_lease("slow")  # still the pass's
    finally:
        release.set()
    rig.quiet()
    assert sorted(rig.turns.prompts()) == [("quick", "quick"), ("slow", "slow")]


def test_a_session_whose_rows_fail_at_give_back_is_given_back_by_a_later_pass(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    from host_bridge.embedded.stores import SqliteEventStore

    data, rig, store = pill_rig(tmp_path, runtime, clock, rigs, rescan_ms=5_000)
    failing = failing_commits(store)
    rig.turns.then = failing  # the inbox commit is durable; the turn's rows will not be
    rig.advance(MINUTE)
    assert rig.turns.prompts() == [("s1", "pill")]
    assert store.holds_lease("s1")  # its rows are not durable: kept, not let go
    status = rig.plugin.status().wake_up
    assert status is not None
    rig.turns.then = None
    failing.clear()
    rig.advance(5_000)  # a later pass writes them and lets it go, nothing else due
    assert not store.holds_lease("s1")
    other = SqliteEventStore(store_path(data))  # another host can take it now
    try:
        other.acquire_session("s1")
    finally:
        other.close()
    rig.advance(60_000)
    assert rig.turns.prompts() == [("s1", "pill")]  # presented once
    rig.close()
    log = reopened(store_path(data), "s1").events
    assert deliveries(log) == (1, 1, 1)
    assert log[-1].type == TURN_COMPLETED_EVENT


def test_a_session_that_cannot_be_queued_does_not_take_every_batch(
    tmp_path: Path,
    runtime: Runtime,
    clock: FakeClock,
    rigs: list[Rig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from host_bridge.embedded.stores import StoreError

    data, now = tmp_path / "data", clock.now()
    for session_id in ("a-refused", "b-fine"):
        write_session(data, session_id, [after("schedule-1", session_id, 60, now)])
    rig = open_rig(rigs, data, runtime, clock, cold_batch=1, retry_ms=5_000)
    store = rig.host.persistence
    assert store is not None
    refusing = {"a-refused"}
    record_appends = store.record_appends

    def refuse(session_id: str, rows: Any) -> None:
        if session_id in refusing:
            raise StoreError("refused (injected)")
        record_appends(session_id, rows)

    monkeypatch.setattr(store, "record_appends", refuse)
    rig.advance(MINUTE)
    assert rig.turns.prompts() == [("b-fine", "b-fine")]  # the next batch took the other one
    status = rig.plugin.status().wake_up
    assert status is not None and status.backing_off == 1
    refusing.clear()
    rig.advance(5_000)
    assert sorted(rig.turns.prompts()) == [("a-refused", "a-refused"), ("b-fine", "b-fine")]


def test_sessions_a_failed_claim_kept_are_given_back_and_delivered_by_a_later_pass(
    tmp_path: Path,
    runtime: Runtime,
    clock: FakeClock,
    rigs: list[Rig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from host_bridge.embedded.stores import StoreError

    data, rig, store = pill_rig(tmp_path, runtime, clock, rigs, rescan_ms=5_000)
    claim = store.claim_due_sessions
    failures = [1]

    def claim_then_fail(*args: Any, **kwargs: Any) -> list[str]:
        taken = claim(*args, **kwargs)  # taken, and (as if its give-back failed) still held
        if failures and taken:
            failures.pop()
            raise StoreError("the connection dropped (injected)")
        return taken

    monkeypatch.setattr(store, "claim_due_sessions", claim_then_fail)
    rig.advance(MINUTE)
    assert rig.turns.prompts() == [] and store.holds_lease("s1")
    rig.advance(5_000)  # a later pass gives it back, then claims and delivers it
    assert rig.turns.prompts() == [("s1", "pill")]
    assert not store.holds_lease("s1")
    rig.close()
    assert deliveries(reopened(store_path(data), "s1").events) == (1, 1, 1)
