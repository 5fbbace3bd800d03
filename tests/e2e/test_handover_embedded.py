"""A session woken by one embedded host is handed over to another host that wants it.

Real SQLite, real actors, fake time, both runtimes. The waking host keeps its
sessions for an hour of quiet; a person's host that waits to open the session
says so through its store (``want``), and the waking host lets the session go
at its next demand poll, once its reminder turn is done. The person's host then
delivers the next reminder: each reminder is dispatched once.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from actors._runtime import Runtime
from host_bridge._plugin import WakePolicy, install_schedule
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.sessions import SessionLeaseRefusedError
from host_bridge.testing import FakeClock, FakeTimers
from tests.changes import reopened_changes
from tests.e2e.test_wake_embedded import TIMEOUT, Recorder, advance, closed_chat, quiet

POLL = 500


def test_a_woken_session_is_handed_over_to_a_host_that_wants_it(
    tmp_path: Path, runtime: Runtime
) -> None:
    clock = FakeClock()
    closed_chat(tmp_path, runtime, clock, "remind 60 stretch", "remind 120 drink water")
    timers = FakeTimers(clock)

    host = EmbeddedHost(tmp_path, clock=clock, timers=timers, runtime=runtime)
    model = Recorder()
    host.enable_activation(model=model)
    policy = WakePolicy(rescan_ms=600_000, quiet_period_ms=3_600_000, demand_poll_ms=POLL)
    context = dataclasses.replace(host.context(), clock_watch_ms=None)
    serving = install_schedule(context, runtime=runtime, wake_policy=policy)
    person = EmbeddedHost(tmp_path, clock=clock, timers=timers, runtime=runtime)
    mine = install_schedule(
        dataclasses.replace(person.context(), clock_watch_ms=None), runtime=runtime
    )
    try:
        quiet(serving, host)  # the wake-up actor armed its first timer before time moves
        advance(timers, 60_000, serving, host)
        model.wait_for(1)
        assert [s.id for s in host.sessions.list()] == ["chat"]
        advance(timers, 10 * POLL, serving, host)
        assert [s.id for s in host.sessions.list()] == ["chat"]  # nobody asked: kept
        with pytest.raises(SessionLeaseRefusedError):
            person.sessions.open("chat")
        store = person.persistence
        assert store is not None
        with store.want("chat") as asked:
            assert asked is True
            advance(timers, POLL, serving, host)
            assert host.sessions.list() == ()  # handed over, an hour before its quiet period ended
            session = person.sessions.open("chat")
        status = serving.status().wake_up
        assert status is not None and status.handovers == 1
        reader = Recorder()
        opened = person.spawn_root(session=session, model=reader)
        advance(timers, 60_000, serving, host)  # schedule-2 comes due: the person's host has it
        mine.wait_quiet(opened, TIMEOUT)
        reader.wait_for(1)
        assert [r[1] for r in reader.reminders] == ['schedule_id_json: "schedule-2"']
        assert len(model.reminders) == 1
        quiet(serving, host)
        assert host.sessions.list() == ()
    finally:
        mine.dispose().result(timeout=TIMEOUT)
        person.close()
        serving.dispose().result(timeout=TIMEOUT)
        host.close()
    assert reopened_changes(tmp_path / "sessions.sqlite3", "chat") == [
        ("create", "schedule-1"),
        ("create", "schedule-2"),
        ("dispatch", "schedule-1"),
        ("dispatch", "schedule-2"),
    ]
