"""A tiny soak (the full one is ``python bench/soak.py``) and the store leak it found."""

from __future__ import annotations

from pathlib import Path

from bench.soak import run_soak
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.testing import FakeClock, FakeTimers


def test_every_reminder_that_was_not_deleted_is_delivered_exactly_once(tmp_path: Path) -> None:
    report = run_soak(agents=10, reminders=400, rounds=4, workers=3, max_delay_s=30, data=tmp_path)
    summary = report.summary()
    assert report.violations == []
    assert summary["reminders_created"] == 400
    assert summary["delivered"] == 400 - summary["deleted"]
    assert summary["duplicates"] == summary["missing"] == summary["early"] == 0
    assert summary["deleted_but_delivered"] == 0
    assert summary["lists"] > 0 and summary["deleted"] > 0  # the mix really ran concurrently
    assert len(set(summary["threads_by_round"])) == 1  # no thread outlives its round
    assert summary["store_tracked_sessions_by_round"] == [0, 0, 0, 0]


def test_a_detached_session_leaves_no_bookkeeping_in_the_store(tmp_path: Path) -> None:
    """Regression: the store kept one entry per session it had ever seen (found by the soak)."""
    clock = FakeClock()
    host = EmbeddedHost(tmp_path, clock=clock, timers=FakeTimers(clock))
    try:
        store = host.persistence
        assert store is not None
        for n in range(50):
            session = host.sessions.create(f"s{n}")
            session.append("message", {"n": n})
            host.sessions.detach(session)  # detached with its rows still queued
        assert store.flush_all().result(timeout=10) is True
        assert store.tracked_sessions == 0

        resumed = host.sessions.resume("s7")
        assert store.tracked_sessions == 1
        assert resumed.append("message", {"again": True}).seq == 1
        assert host.sessions.flush(resumed).result(timeout=10) is True
        host.sessions.detach(resumed)
        assert store.tracked_sessions == 0
    finally:
        host.close()
    reopened = SqliteEventStore(store_path(tmp_path), create=False)
    try:
        stored = reopened.load("s7")
    finally:
        reopened.close()
    assert stored is not None
    assert [event.data for event in stored.events] == [{"n": 7}, {"again": True}]
