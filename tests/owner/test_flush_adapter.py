"""A host's flush is adapted at run time; flushes that keep resolving False are reported.

Schedule's owners use the host's ``SessionStore`` through the
:class:`~host_bridge._composition.CheckedSessionStore` that ``install_schedule``
puts around it: a pykka future is adapted (on the test kit and on the embedded
host, on both actor runtimes), anything else fails that flush with one logged
error instead of faulting the owner, and a session whose flushes keep resolving
``False`` is reported once, and again when it recovers.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors._runtime import Runtime, get_runtime
from actors.gevent import GeventFuture, GeventRuntime
from host_bridge._checked_sessions import FlushMonitor
from host_bridge._futures import resolved
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import Session
from host_bridge.testing import PENDING, FakeClock, FakeHost, FakeTimers, settle_host
from tests.e2e.helpers import ScriptedModel
from tests.owner.helpers import Tools, error

SESSIONS_LOGGER = "dsh_schedule.sessions"


class WrappedSessions:
    """A session store that hands ``get`` and ``list`` to ``store``; subclasses change ``flush``."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def get(self, session_id: str) -> Session | None:
        session: Session | None = self.store.get(session_id)
        return session

    def list(self) -> list[Session]:
        return list(self.store.list())


class PykkaFlushes(WrappedSessions):
    """A session store whose ``flush`` answers with a pykka future, as a pykka host's might."""

    def __init__(
        self, store: Any, make: Callable[[], pykka.Future[bool]] = pykka.ThreadingFuture
    ) -> None:
        super().__init__(store)
        self.make = make
        self.returned: list[pykka.Future[bool]] = []

    def flush(self, session: Session) -> Any:
        inner: Future[bool] = self.store.flush(session)
        outer = self.make()

        def copy(done: Future[bool]) -> None:
            failure = done.exception()
            if failure is None:
                outer.set(done.result())
            else:
                outer.set_exception((type(failure), failure, failure.__traceback__))

        inner.add_done_callback(copy)
        self.returned.append(outer)
        return outer


class OddFlushes(WrappedSessions):
    """A session store whose ``flush`` returns ``value`` (not a future) every time."""

    def __init__(self, store: Any, value: object) -> None:
        super().__init__(store)
        self.value = value
        self.calls = 0

    def flush(self, session: Session) -> Any:
        self.calls += 1
        return self.value


def _installed(host: FakeHost, store: Any, runtime: Runtime) -> tuple[SchedulePlugin, Tools]:
    plugin = install_schedule(dataclasses.replace(host.context(), sessions=store), runtime=runtime)
    agent = host.spawn_root("agent-1")
    tools = Tools(host, plugin, agent)
    tools.settle()
    return plugin, tools


def test_a_pykka_future_from_flush_is_adapted_on_the_test_kit(
    host: FakeHost, runtime: Runtime
) -> None:
    store = PykkaFlushes(host.sessions)
    plugin, tools = _installed(host, store, runtime)
    created = tools.call("schedule_create", {"prompt": "stretch", "after_seconds": 60})
    assert created["id"] == "schedule-1"  # preflight and barrier both answered by pykka futures

    host.sessions.script(PENDING)  # a flush still pending when it is returned
    pending = host.tools.submit("schedule_list", {}, agent=tools.agent)
    tools.settle()
    assert not pending.done()
    host.sessions.release(True)
    listed = pending.result(timeout=10).value
    assert [view["id"] for view in listed["schedules"]] == ["schedule-1"]

    host.timers.advance(60_000)
    tools.settle()
    assert [message.text.splitlines()[0] for message in tools.agent.received] == [
        "[SCHEDULE REMINDER]"
    ]
    assert len(store.returned) == host.sessions.flush_count
    assert plugin.status().faulted == ()
    plugin.dispose().result(timeout=10)


def test_a_gevent_future_from_flush_is_adapted() -> None:
    """The gevent runtime's futures are pykka futures with done-callbacks."""
    host = FakeHost()
    runtime = get_runtime("gevent")
    assert isinstance(runtime, GeventRuntime)
    store = PykkaFlushes(host.sessions, lambda: GeventFuture(runtime))
    plugin, tools = _installed(host, store, runtime)
    assert tools.call("schedule_create", {"prompt": "p", "after_seconds": 60})["id"] == "schedule-1"
    host.sessions.script(PENDING)
    pending = host.tools.submit("schedule_list", {}, agent=tools.agent)
    tools.settle()
    host.sessions.release(True)
    assert len(pending.result(timeout=10).value["schedules"]) == 1
    assert all(isinstance(future, GeventFuture) for future in store.returned)
    assert plugin.status().faulted == ()
    plugin.dispose().result(timeout=10)


def test_a_failed_pykka_flush_is_a_failed_flush(host: FakeHost, runtime: Runtime) -> None:
    _, tools = _installed(host, PykkaFlushes(host.sessions), runtime)
    host.sessions.script(OSError("listener died"))
    value = tools.call("schedule_list", {})
    assert error("persistence_uncertain", value)
    assert "listener died" not in str(value)


def test_a_pykka_future_from_flush_is_adapted_on_the_embedded_host(
    tmp_path: Path, runtime: Runtime
) -> None:
    clock = FakeClock()
    timers = FakeTimers(clock)
    host = EmbeddedHost(tmp_path, clock=clock, timers=timers, runtime=runtime)
    context = dataclasses.replace(host.context(), sessions=PykkaFlushes(host.sessions))
    plugin = install_schedule(context, runtime=runtime)
    model = ScriptedModel()
    agent = host.spawn_root(model=model, session_id="s-1")
    try:
        agent.prompt("remind 60 stretch your legs")
        settle_host(host, plugin)
        assert [result["id"] for result in model.results] == ["schedule-1"]
        timers.advance(60_000)
        settle_host(host, plugin)
        assert len(model.reminders) == 1
        assert 'reminder_prompt_json: "stretch your legs"' in model.reminders[0]
        assert plugin.status().faulted == ()
    finally:
        plugin.dispose().result(timeout=10)
        assert host.close() is None


@pytest.mark.parametrize("returned", [None, True, "ok", object()], ids=repr)
def test_a_flush_that_returns_no_future_fails_with_one_logged_error(
    host: FakeHost, runtime: Runtime, returned: object, caplog: pytest.LogCaptureFixture
) -> None:
    store = OddFlushes(host.sessions, returned)
    caplog.set_level(logging.DEBUG, logger=SESSIONS_LOGGER)
    plugin, tools = _installed(host, store, runtime)
    before = store.calls  # the owner's first drive flushed too
    for _ in range(3):
        value = tools.call("schedule_list", {})
        assert error("persistence_uncertain", value)
        assert value["operation"] == "list"
    assert store.calls == before + 3
    (record,) = [r for r in caplog.records if r.name == SESSIONS_LOGGER]
    assert record.levelno == logging.ERROR
    assert record.getMessage().startswith(
        "HostContext.sessions (SessionStore): flush returned a "
        f"{type(returned).__name__}, not a concurrent.futures.Future[bool]"
    )
    assert "host_bridge._futures.from_pykka" in record.getMessage()
    (status,) = plugin.status().owners
    assert status.state == "running" and status.contained_failures == 0


def _sessions_log(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == SESSIONS_LOGGER]


def test_flushes_resolving_false_are_reported_once_and_so_is_the_recovery(
    host: FakeHost, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=SESSIONS_LOGGER)
    _, tools = _installed(host, host.sessions, runtime)
    host.sessions.script(False, False)
    for _ in range(2):
        assert error("persistence_uncertain", tools.call("schedule_list", {}))
    assert _sessions_log(caplog) == []  # two in a row may be a passing hiccup

    host.sessions.script(False, OSError("listener died"), False, False)
    for _ in range(4):
        assert error("persistence_uncertain", tools.call("schedule_list", {}))
    (warning,) = _sessions_log(caplog)
    assert warning == (
        logging.WARNING,
        "3 consecutive flushes of session 'agent-1/session' resolved False: no persistence "
        "listener acknowledged durability (is the host's durability service attached to this "
        "session's store?). Until a flush resolves True, Schedule's tools answer "
        "persistence_uncertain and no reminder of this session is delivered",
    )  # a failed flush neither counts nor ends the streak; the fifth False says nothing new

    assert tools.call("schedule_list", {}) == {"schedules": []}
    assert tools.call("schedule_list", {}) == {"schedules": []}
    assert _sessions_log(caplog)[1:] == [
        (
            logging.INFO,
            "flushes of session 'agent-1/session' resolve True again, after 5 that resolved False",
        )
    ]


def test_each_session_is_reported_on_its_own(host: FakeHost, runtime: Runtime) -> None:
    monitor = FlushMonitor(logging.getLogger("test.monitor"), warn_after=2)
    for session_id in ("a", "b", "a", "b", "a"):
        monitor.watch(session_id, resolved(False))
    assert monitor.warnings == 2
    monitor.watch("a", resolved(True))
    monitor.watch("a", resolved(False))
    monitor.watch("a", resolved(False))
    assert monitor.warnings == 3  # a new streak after a recovery is reported again


def test_a_flush_resolving_a_non_bool_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="test.monitor")
    monitor = FlushMonitor(logging.getLogger("test.monitor"))
    for value in (1, None, "yes"):
        odd: Future[Any] = resolved(value)
        monitor.watch("s", odd)
    assert [r.getMessage() for r in caplog.records] == [
        "HostContext.sessions (SessionStore): a flush of session 's' resolved a int instead of "
        "True or False; it counts as failed"
    ]
    assert monitor.warnings == 0


def test_pending_and_cancelled_flushes_count_for_nothing() -> None:
    monitor = FlushMonitor(logging.getLogger("test.monitor"), warn_after=1)
    pending: Future[bool] = Future()
    monitor.watch("s", pending)
    assert monitor.warnings == 0
    pending.cancel()
    assert monitor.warnings == 0
    monitor.watch("s", resolved(False))
    assert monitor.warnings == 1
