"""A wake-up that fails at any step gives its session back, and delivers once it can.

The real embedded host on both backends (SQLite, PostgreSQL) with its
activation, fake time and threads. One stored session has a reminder due; the
host's wake-up actor wakes it. A fault is injected at one step of that
wake-up: the claim gets a clock reading that is not an ``int`` (or one whose
comparison raises, once the lock is taken), the claim raises after taking the
lock or lease, reading the log during the resume raises, reading the index
row again after the resume raises, or starting the agent in the spawn raises.
Afterwards the session must not be held: another host opens it (as ``chat``
does). Once the fault is gone the wake-up actor
tries again after its back-off and the reminder is delivered, exactly once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from host_bridge._plugin import SchedulePlugin, WakePolicy, install_schedule
from host_bridge.embedded.activation import EmbeddedActivation
from host_bridge.embedded.agents import EmbeddedAgent
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.stores import open_store
from host_bridge.protocols import SessionEvent, SessionHeader
from host_bridge.testing import FakeClock, FakeTimers
from messages._instant import format_instant
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.changes import schedule_changes
from tests.e2e.test_wake_embedded import Recorder, advance, quiet

TIMEOUT = 20.0
DUE_IN_MS = 60_000
RETRY_MS = 5_000


class RaisingInt(int):
    """A clock reading that is an ``int`` but cannot be compared with one."""

    def __lt__(self, other: object) -> bool:
        raise OSError("the clock reading cannot be compared")

    __le__ = __gt__ = __ge__ = __lt__


class InjectedError(Exception):
    """The fault a test injects."""


@pytest.fixture(params=("sqlite", "postgresql"))
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the sessions are stored: an SQLite file or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "sessions.sqlite3")
    return str(request.getfixturevalue("pg_url"))


def store_due_session(location: str, clock: FakeClock) -> None:
    """Store session ``s`` with an ``at`` reminder due in a minute; nobody holds it."""
    store = open_store(location)
    try:
        store.acquire_session("s")
        store.create_session(SessionHeader("s"))
        schedule = {
            "id": "schedule-1",
            "kind": "at",
            "prompt": "stretch",
            "scheduledAt": format_instant(clock.now() + DUE_IN_MS),
        }
        data = {"version": 1, "operation": "create", "schedule": schedule}
        event = SessionEvent(SCHEDULE_CHANGE_TYPE, 0, clock.now(), data)
        store.record_append("s", event, encode_payload(data))
        assert store.flush("s").result(TIMEOUT) is True
    finally:
        store.close()


def once(original: Callable[..., Any], fault: Callable[..., Any]) -> Callable[..., Any]:
    """``original``, except that the first call goes to ``fault`` (with the same arguments)."""
    calls = [0]

    def call(*args: Any) -> Any:
        calls[0] += 1
        return fault(*args) if calls[0] == 1 else original(*args)

    return call


def inject(step: str, bad: Any, host: EmbeddedHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the first wake-up fail at ``step``."""
    store = host.persistence
    assert store is not None
    if step == "claim reading":
        claim = store.claim_due_session
        reading = RaisingInt if bad is RaisingInt else (lambda _: bad)
        fault = once(claim, lambda session_id, now_ms: claim(session_id, reading(now_ms)))
        monkeypatch.setattr(store, "claim_due_session", fault)
    elif step == "claim after the lock":
        acquire = store.acquire_session

        def acquire_then_raise(session_id: str) -> int:
            acquire(session_id)
            raise InjectedError("after the lock")

        monkeypatch.setattr(store, "acquire_session", once(acquire, acquire_then_raise))
    elif step == "resume":  # reading the log from its schedule checkpoint on
        load_tail = store.load_tail
        monkeypatch.setattr(store, "load_tail", once(load_tail, _raise))
    elif step == "due check":  # reading the index row again after the resume
        check = EmbeddedActivation._due_after_all
        monkeypatch.setattr(EmbeddedActivation, "_due_after_all", once(check, _raise))
    else:
        assert step == "spawn"
        activate = EmbeddedAgent._activate
        monkeypatch.setattr(EmbeddedAgent, "_activate", once(activate, _raise))


def _raise(*_: object) -> Any:
    raise InjectedError("the step failed")


def stored_dispatches(location: str) -> list[tuple[str, str]]:
    store = open_store(location)
    try:
        stored = store.load("s")
    finally:
        store.close()
    assert stored is not None
    return [c for c in schedule_changes(stored.events) if c[0] == "dispatch"]


class Woken:
    """An embedded host with activation and Schedule installed, on fake time."""

    def __init__(self, root: Path, location: str, clock: FakeClock) -> None:
        self.timers = FakeTimers(clock)
        self.host = EmbeddedHost(root, store=location, clock=clock, timers=self.timers)
        self.model = Recorder()
        self.host.enable_activation(model=self.model)
        policy = WakePolicy(rescan_ms=600_000, retry_ms=RETRY_MS, quiet_period_ms=30_000)
        context = dataclasses.replace(self.host.context(), clock_watch_ms=None)
        self.plugin: SchedulePlugin = install_schedule(context, wake_policy=policy)

    def advance(self, ms: int) -> None:
        advance(self.timers, ms, self.plugin, self.host)

    def close(self) -> None:
        self.plugin.dispose().result(timeout=TIMEOUT)
        assert self.host.close() is None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def woken(tmp_path: Path, location: str, clock: FakeClock) -> Iterator[Woken]:
    store_due_session(location, clock)
    woken = Woken(tmp_path / "host", location, clock)
    quiet(woken.plugin, woken.host)
    yield woken
    woken.close()


FAULTS = [
    *[("claim reading", bad) for bad in (None, 1.5, math.nan, True, "x", RaisingInt)],
    ("claim after the lock", InjectedError),
    ("resume", InjectedError),
    ("due check", InjectedError),
    ("spawn", InjectedError),
]


@pytest.mark.parametrize(
    ("step", "bad"),
    FAULTS,
    ids=[f"{step}-{getattr(bad, '__name__', repr(bad))}" for step, bad in FAULTS],
)
def test_a_wake_up_that_fails_at_a_step_gives_the_session_back_and_delivers_later(
    woken: Woken,
    location: str,
    clock: FakeClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
    bad: Any,
) -> None:
    inject(step, bad, woken.host, monkeypatch)
    woken.advance(DUE_IN_MS)  # due: the wake-up actor tries, and the step fails
    status = woken.plugin.status().wake_up
    assert status is not None
    assert (status.declined, status.failures, status.activations) in ((1, 0, 0), (0, 1, 0))
    assert woken.model.reminders == []
    assert woken.host.sessions.get("s") is None
    assert woken.host.agents.roots() == ()

    other = EmbeddedHost(tmp_path / "chat", store=location, clock=clock, timers=FakeTimers(clock))
    try:  # nobody holds the session: another host opens it, as chat does
        session = other.sessions.open("s")
        assert len(session.events) == 1
    finally:
        assert other.close() is None

    woken.advance(RETRY_MS)  # the back-off ended: the next wake-up delivers
    woken.model.wait_for(1)
    assert woken.model.reminders == [("s", 'schedule_id_json: "schedule-1"')]
    woken.advance(30_000)  # quiet for the quiet period: let go again
    assert woken.host.sessions.get("s") is None
    assert stored_dispatches(location) == [("dispatch", "schedule-1")]
