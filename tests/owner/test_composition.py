"""install_schedule checks every host part against its protocol, once, by looking."""

from __future__ import annotations

import dataclasses
import logging
import pickle
from collections.abc import Callable
from typing import Any, ClassVar, cast

import pytest

from host_bridge._checked_sessions import CheckedSessionStore
from host_bridge._composition import CompositionError, compose, composition_problems
from host_bridge._plugin import install_schedule
from host_bridge.protocols import HostContext
from host_bridge.testing import FakeHost


def _context(host: FakeHost, **changes: Any) -> HostContext:
    return dataclasses.replace(host.context(), **changes)


def _refused(host: FakeHost, context: HostContext) -> CompositionError:
    with pytest.raises(CompositionError) as raised:
        install_schedule(context)
    assert host.agents.listener_counts() == {"created": 0, "status": 0, "disposed": 0}
    return raised.value


class RegistryWithoutStatus:
    """An agent registry that forgot ``on_status`` and made ``roots`` a list."""

    roots: ClassVar[list[object]] = []

    def get(self, agent_id: str) -> None:
        return None

    def on_created(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        raise AssertionError("never subscribed by a refused install")

    def on_disposed(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        raise AssertionError("never subscribed by a refused install")


class ToolsWithoutAgentScope:
    """A tool table whose ``register`` has no ``agent`` keyword."""

    def register(self, tool: object) -> Callable[[], None]:
        raise AssertionError("not called")

    def get(self, name: str, *, agent: object = None) -> None:
        return None

    def execute(self, name: str, arguments: object, *, agent: object) -> None:
        raise AssertionError("not called")


class RecordingStore:
    """A session store that records every call (install must make none)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def flush(self, session: object) -> Any:
        self.calls.append("flush")
        raise AssertionError("flush must not be called at install")

    def get(self, session_id: str) -> None:
        self.calls.append("get")

    def list(self) -> list[object]:
        self.calls.append("list")
        return []


def test_one_error_names_every_problem_with_its_protocol() -> None:
    host = FakeHost()
    context = _context(
        host,
        agents=object(),
        tools={},
        clock=lambda: 1_767_225_600_000.5,
        logger="dsh",
        flush_timeout_ms=30.5,
    )
    error = _refused(host, context)
    assert error.problems == (
        "HostContext.agents (AgentRegistry): missing roots, get, on_created, on_status, "
        "on_disposed",
        "HostContext.tools (ToolRegistry): missing register, execute; "
        "get cannot be called as get(name, *, agent)",
        error.problems[2],
        "HostContext.logger must be a logging.Logger; it is a str",
        "HostContext.flush_timeout_ms must be a positive int of milliseconds (how long a "
        "flush may take) or None; it is 30.5",
    )
    assert error.problems[2].startswith("HostContext.clock must return the wall clock")
    assert "it returned a float 1767225600000.5" in error.problems[2]
    assert str(error) == "\n".join(error.problems)


def test_a_missing_method_and_a_member_that_is_not_callable() -> None:
    host = FakeHost()
    error = _refused(host, _context(host, agents=RegistryWithoutStatus()))
    assert error.problems == (
        "HostContext.agents (AgentRegistry): missing on_status; roots is not callable (list)",
    )


def test_a_method_that_cannot_take_schedules_call() -> None:
    host = FakeHost()
    error = _refused(host, _context(host, tools=ToolsWithoutAgentScope()))
    assert error.problems == (
        "HostContext.tools (ToolRegistry): register cannot be called as register(tool, *, agent)",
    )


def test_missing_parts_timers_and_monotonic() -> None:
    host = FakeHost()
    context = _context(
        host,
        sessions=None,
        session_persistence=None,
        timers=object(),
        monotonic=lambda: 12.5,
        clock_watch_ms=0,
    )
    error = _refused(host, context)
    assert error.problems == (
        "HostContext.sessions (SessionStore): missing",
        "HostContext.session_persistence: missing: pass the host's durability service (the "
        "object that makes appends durable); Schedule never runs on a host without one",
        "HostContext.timers (Timers): missing call_later",
        "HostContext.monotonic must return whole milliseconds (an int) of the clock the timers "
        "measure delays on, e.g. host_bridge.monotonic_ms; it returned a float",
        "HostContext.clock_watch_ms must be a positive int of milliseconds (the clock "
        "watchdog's tick) or None; it is 0",
    )


@pytest.mark.parametrize("value", [True, 0, -5, 2.0, "30000"])
def test_flush_timeout_must_be_a_positive_int_or_none(value: object) -> None:
    host = FakeHost()
    (line,) = _refused(host, _context(host, flush_timeout_ms=value)).problems
    assert line.startswith("HostContext.flush_timeout_ms must be a positive int")


def test_nothing_is_called_but_the_two_clocks() -> None:
    host = FakeHost()
    store = RecordingStore()
    samples: list[str] = []

    def clock() -> int:
        samples.append("clock")
        return 1_767_225_600_000

    def monotonic() -> int:
        samples.append("monotonic")
        return 5

    context = _context(host, sessions=store, clock=clock, monotonic=monotonic)
    plugin = install_schedule(context)
    assert store.calls == []
    assert samples == ["clock", "monotonic"]
    plugin.dispose().result(timeout=5)


def test_a_member_whose_reading_raises_is_reported_not_raised() -> None:
    class Exploding:
        @property
        def flush(self) -> Any:
            raise OSError("secret backend detail")

        def get(self, session_id: str) -> None:
            return None

        def list(self) -> list[object]:
            return []

    host = FakeHost()
    error = _refused(host, _context(host, sessions=Exploding()))
    assert error.problems == ("HostContext.sessions (SessionStore): reading flush raised OSError",)
    assert "secret" not in str(error)


def test_install_runs_on_a_copy_with_the_checked_store() -> None:
    host = FakeHost()
    context = host.context()
    checked = compose(context)
    assert checked is not context
    assert context.sessions is host.sessions  # the host's context is left alone
    assert isinstance(checked.sessions, CheckedSessionStore)
    assert checked.sessions.store is host.sessions
    assert checked.agents is host.agents and checked.clock is context.clock


def test_the_error_survives_pickling_and_takes_a_single_line() -> None:
    error = CompositionError(["a", "b"])
    copied = pickle.loads(pickle.dumps(error))
    assert copied.problems == ("a", "b") and str(copied) == "a\nb"
    assert CompositionError("one line").problems == ("one line",)


# --- the optional activation part -------------------------------------------------------------


class HalfActivation:
    """An activation without ``due_sessions`` whose ``passivate`` takes no agent."""

    next_due = None

    def activate(self, session_id: str) -> Any:
        raise AssertionError("not called")

    def on_due_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        raise AssertionError("not called")

    def passivate(self) -> Any:
        raise AssertionError("not called")


def test_an_activation_part_is_checked_when_it_is_set() -> None:
    host = FakeHost()
    context = host.context()
    context.activation = cast(Any, HalfActivation())
    assert composition_problems(context) == [
        "HostContext.activation (SessionActivation): missing due_sessions; next_due is not "
        "callable (NoneType); passivate cannot be called as passivate(agent)"
    ]
    context.activation = None
    assert composition_problems(context) == []


def test_the_logger_may_be_any_logging_logger() -> None:
    host = FakeHost()
    context = _context(host, logger=logging.getLogger("my.host"))
    install_schedule(context).dispose().result(timeout=5)
