"""Waking cold sessions on the embedded host: real SQLite, real actors, fake time, both runtimes.

A first host creates reminders and closes. A second host on the same store has
never opened the session: its wake-up actor activates it when the reminder is
due, the owner delivers it to the activation's model, and once the agent was
quiet for the quiet period the session is let go again, to be woken once more
for its next reminder. A due index row damaged by hand costs at most one
activation, is rewritten from the log, and never hides a due reminder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sqlite3
import threading
from pathlib import Path

import pytest

from actors._runtime import Runtime
from host_bridge._plugin import SchedulePlugin, WakePolicy, install_schedule
from host_bridge.embedded.agents import Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.testing import FakeClock, FakeTimers, settle
from tests.changes import reopened_changes

TIMEOUT = 20.0


class Recorder:
    """A model that records the reminder turns it runs and answers the create prompts."""

    def __init__(self) -> None:
        self.reminders: list[tuple[str, str]] = []
        self.lock = threading.Condition()

    def __call__(self, turn: Turn) -> str | None:
        text = turn.message.text
        if text.startswith("remind "):
            _, seconds, prompt = text.split(" ", 2)
            turn.call_tool("schedule_create", {"prompt": prompt, "after_seconds": int(seconds)})
            return "Scheduled."
        if text.startswith("[SCHEDULE REMINDER]"):
            with self.lock:
                self.reminders.append((turn.agent.session.id, text.splitlines()[2]))
                self.lock.notify_all()
            return "Presented."
        return None

    def wait_for(self, count: int) -> None:
        with self.lock:
            assert self.lock.wait_for(lambda: len(self.reminders) >= count, TIMEOUT)


def quiet(plugin: SchedulePlugin, host: EmbeddedHost) -> None:
    """Let the wake-up actor, activations, owners and agents run until none has work left."""
    wake = plugin.wake_up
    activation = host.activation
    assert wake is not None and activation is not None
    for _ in range(50):
        settle(wake, timeout=TIMEOUT)
        activation.wait_idle(TIMEOUT)
        for agent in plugin.agents():
            plugin.wait_quiet(agent, TIMEOUT)
            agent.when_idle().result(timeout=TIMEOUT)
        settle(wake, timeout=TIMEOUT)
        status = plugin.status()
        busy = any(o.busy for o in status.owners) or any(
            a.status != "idle" for a in host.agents.roots()
        )
        assert status.wake_up is not None
        if not busy and status.wake_up.in_flight == 0:
            activation.wait_idle(TIMEOUT)
            return
    raise AssertionError("the host never became quiet")


def advance(timers: FakeTimers, ms: int, plugin: SchedulePlugin, host: EmbeddedHost) -> None:
    """Let ``ms`` of fake time pass timer by timer, letting the host become quiet after each."""
    clock = timers.clock
    target = clock.monotonic() + ms
    for _ in range(1_000):
        armed = timers.armed()
        if not armed or clock.monotonic() + armed[0] > target:
            break
        timers.advance(armed[0])
        quiet(plugin, host)
    else:
        raise AssertionError("timers kept firing")
    timers.advance(target - clock.monotonic())
    quiet(plugin, host)


def test_a_host_that_never_opened_a_session_delivers_its_reminders(
    tmp_path: Path, runtime: Runtime
) -> None:
    clock = FakeClock()
    closed_chat(tmp_path, runtime, clock, "remind 60 stretch", "remind 3600 drink water")

    timers = FakeTimers(clock)
    host = EmbeddedHost(tmp_path, clock=clock, timers=timers, runtime=runtime)
    model = Recorder()
    host.enable_activation(model=model)
    policy = WakePolicy(rescan_ms=600_000, quiet_period_ms=30_000)
    context = dataclasses.replace(host.context(), clock_watch_ms=None)  # no tick per fake second
    plugin = install_schedule(context, runtime=runtime, wake_policy=policy)
    try:
        quiet(plugin, host)
        assert host.sessions.list() == ()  # nothing due yet: nothing woken
        advance(timers, 59_999, plugin, host)
        assert model.reminders == []
        advance(timers, 1, plugin, host)
        model.wait_for(1)
        assert model.reminders == [("chat", 'schedule_id_json: "schedule-1"')]
        assert [s.id for s in host.sessions.list()] == ["chat"]

        advance(timers, 30_000, plugin, host)  # quiet for the quiet period: let go
        assert host.sessions.list() == ()
        status = plugin.status().wake_up
        assert status is not None and status.activations == 1 and status.passivations == 1

        advance(timers, 3_600_000, plugin, host)  # the second reminder wakes it again
        model.wait_for(2)
        assert [r[1] for r in model.reminders] == [
            'schedule_id_json: "schedule-1"',
            'schedule_id_json: "schedule-2"',
        ]
    finally:
        plugin.dispose().result(timeout=TIMEOUT)
        host.close()
    changes = reopened_changes(tmp_path / "sessions.sqlite3", "chat")
    assert changes == [
        ("create", "schedule-1"),
        ("create", "schedule-2"),
        ("dispatch", "schedule-1"),
        ("dispatch", "schedule-2"),
    ]
    store = SqliteEventStore(tmp_path / "sessions.sqlite3", create=False)
    try:
        assert store.due_entries() == {}  # every turn completed: nothing is due
    finally:
        store.close()


def test_a_session_live_in_another_host_is_not_woken(tmp_path: Path, runtime: Runtime) -> None:
    clock = FakeClock()
    first = EmbeddedHost(tmp_path, clock=clock, timers=FakeTimers(clock), runtime=runtime)
    first_plugin = install_schedule(first.context(), runtime=runtime)
    author = Recorder()
    agent = first.spawn_root(model=author, session_id="chat")
    agent.prompt("remind 60 stretch")
    first_plugin.wait_quiet(agent, TIMEOUT)
    agent.when_idle().result(timeout=TIMEOUT)

    timers = FakeTimers(clock)
    host = EmbeddedHost(tmp_path, clock=clock, timers=timers, runtime=runtime)
    model = Recorder()
    host.enable_activation(model=model)
    policy = WakePolicy(rescan_ms=1_000, quiet_period_ms=30_000)
    plugin = install_schedule(host.context(), runtime=runtime, wake_policy=policy)
    try:
        clock.advance(60_000)  # the reminder is due; the first host's timers did not run yet
        advance(timers, 1_000, plugin, host)
        assert host.sessions.list() == ()  # the session is live in the first host
        assert model.reminders == []
        status = plugin.status().wake_up
        assert status is not None and status.activations == 0
    finally:
        plugin.dispose().result(timeout=TIMEOUT)
        host.close()
        first_plugin.dispose().result(timeout=TIMEOUT)
        first.close()


# --- a damaged due index row: woken once, decided by the log, rewritten ------------------------


def closed_chat(tmp_path: Path, runtime: Runtime, clock: FakeClock, *prompts: str) -> None:
    """A person's chat sets reminders and is closed: the session is cold in the store."""
    host = EmbeddedHost(tmp_path, clock=clock, timers=FakeTimers(clock), runtime=runtime)
    plugin = install_schedule(host.context(), runtime=runtime)
    agent = host.spawn_root(model=Recorder(), session_id="chat")
    for prompt in prompts:
        agent.prompt(prompt)
    for _ in prompts:
        plugin.wait_quiet(agent, TIMEOUT)
        agent.when_idle().result(timeout=TIMEOUT)
    plugin.dispose().result(timeout=TIMEOUT)
    assert host.close() is None


def damage(tmp_path: Path, statement: str) -> None:
    with sqlite3.connect(tmp_path / "sessions.sqlite3") as db:
        db.execute(statement)


def index_rows(tmp_path: Path) -> dict[str, tuple[object, ...]]:
    """The due index as stored: ``{session_id: (due_ms, schedule_ms, inbox_ms)}``."""
    with contextlib.closing(sqlite3.connect(tmp_path / "sessions.sqlite3")) as db:
        rows = db.execute("SELECT session_id, due_ms, schedule_ms, inbox_ms FROM due_index")
        return {row[0]: tuple(row[1:]) for row in rows}


def index_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "due index" in r.getMessage()
    ]


def serving(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, policy: WakePolicy
) -> tuple[EmbeddedHost, SchedulePlugin, FakeTimers, Recorder]:
    """A host that never opened the chat, waking cold sessions (a ``serve``)."""
    timers = FakeTimers(clock)
    host = EmbeddedHost(tmp_path, clock=clock, timers=timers, runtime=runtime)
    model = Recorder()
    host.enable_activation(model=model)
    context = dataclasses.replace(host.context(), clock_watch_ms=None)
    return host, install_schedule(context, runtime=runtime, wake_policy=policy), timers, model


def test_a_due_time_in_the_past_on_a_quiet_session_costs_one_activation(
    tmp_path: Path, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: 16 wake-ups in 8 s, one per quiet period, for as long as it ran."""
    clock = FakeClock()
    closed_chat(tmp_path, runtime, clock, "remind 3600 drink water")
    due = clock() + 3_600_000
    assert index_rows(tmp_path) == {"chat": (due, due, None)}
    damage(tmp_path, "UPDATE due_index SET due_ms = 0, schedule_ms = 0")  # consistent, and wrong
    policy = WakePolicy(rescan_ms=60_000, quiet_period_ms=500)  # serve --quiet-period 0.5
    host, plugin, timers, model = serving(tmp_path, runtime, clock, policy)
    try:
        with caplog.at_level(logging.WARNING, logger="dsh_schedule"):
            quiet(plugin, host)
            advance(timers, 8_000, plugin, host)
        status = plugin.status().wake_up
        assert status is not None
        assert (status.activations, status.declined, status.passivations) == (0, 1, 0)
        assert index_rows(tmp_path) == {"chat": (due, due, None)}  # the log's again
        assert len(index_warnings(caplog)) == 1 and "session 'chat'" in index_warnings(caplog)[0]
        advance(timers, due - clock() - 1, plugin, host)
        assert model.reminders == []  # never early
        advance(timers, 1, plugin, host)
        model.wait_for(1)
        assert model.reminders == [("chat", 'schedule_id_json: "schedule-1"')]
    finally:
        plugin.dispose().result(timeout=TIMEOUT)
        host.close()
    assert index_rows(tmp_path) == {}


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE due_index SET due_ms = 253402300799999",  # moved to 9999-12-31
        "UPDATE due_index SET due_ms = 'soon'",  # made text
        "UPDATE due_index SET schedule_ms = 'garbage'",
    ],
    ids=["due-ms-year-9999", "due-ms-text", "schedule-ms-garbage"],
)
def test_a_damaged_row_never_keeps_a_due_reminder_from_its_session(
    tmp_path: Path, runtime: Runtime, caplog: pytest.LogCaptureFixture, statement: str
) -> None:
    """Regression: the first two were never woken until reindex, the third silently skipped."""
    clock = FakeClock()
    closed_chat(tmp_path, runtime, clock, "remind 60 stretch")
    damage(tmp_path, statement)
    host, plugin, timers, model = serving(tmp_path, runtime, clock, WakePolicy(rescan_ms=1_000))
    try:
        with caplog.at_level(logging.WARNING, logger="dsh_schedule"):
            quiet(plugin, host)
            advance(timers, 59_999, plugin, host)
            assert model.reminders == []
            due = clock() + 1
            assert index_rows(tmp_path) == {"chat": (due, due, None)}  # rewritten
            advance(timers, 1, plugin, host)
            model.wait_for(1)
        assert model.reminders == [("chat", 'schedule_id_json: "schedule-1"')]
        warnings = index_warnings(caplog)
        assert len(warnings) == 1, warnings
        assert warnings[0].startswith("session 'chat': the due index row is ")
    finally:
        plugin.dispose().result(timeout=TIMEOUT)
        host.close()
    assert reopened_changes(tmp_path / "sessions.sqlite3", "chat") == [
        ("create", "schedule-1"),
        ("dispatch", "schedule-1"),
    ]
