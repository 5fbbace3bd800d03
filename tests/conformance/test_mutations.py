"""The kit's checks can fail: deliberately broken hosts, each caught by the check of its rule.

Each case breaks one rule of a host that passes the kit (the fake host or the
docs' pykka example), runs the one check of that rule with
``HostConformance.run_check`` and expects its ``AssertionError`` naming the rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from host_bridge._futures import resolved
from host_bridge.protocols import Agent, AgentStatus, Cancellable, Session, UserMessage
from host_bridge.testing.conformance import ConformanceHost, HostConformance
from tests.conformance.hosts import example_host, fake_host

Mutation = Callable[[ConformanceHost], ConformanceHost]


def _context(host: ConformanceHost, **changes: Any) -> ConformanceHost:
    return dataclasses.replace(host, context=dataclasses.replace(host.context, **changes))


class _Sessions:
    """A session store delegating to the host's, with another ``flush``."""

    def __init__(self, inner: Any, flush: Callable[[Session], Any]) -> None:
        self._inner = inner
        self.flush = flush

    def get(self, session_id: str) -> Session | None:
        return self._inner.get(session_id)  # type: ignore[no-any-return]

    def list(self) -> Sequence[Session]:
        return self._inner.list()  # type: ignore[no-any-return]


def flush_true_before_durable(host: ConformanceHost) -> ConformanceHost:
    """``flush`` answers True at once, before the session's file was written and fsync'ed."""
    return _context(host, sessions=_Sessions(host.context.sessions, lambda s: resolved(True)))


def flush_returns_a_bool(host: ConformanceHost) -> ConformanceHost:
    """``flush`` returns ``True`` itself instead of a future."""
    return _context(host, sessions=_Sessions(host.context.sessions, lambda s: True))


class _LateCreations:
    """A registry that announces creations later, on a timer, instead of synchronously."""

    def __init__(self, inner: Any, timers: Any) -> None:
        self._inner = inner
        self._timers = timers

    def roots(self) -> Sequence[Agent]:
        return self._inner.roots()  # type: ignore[no-any-return]

    def get(self, agent_id: str) -> Agent | None:
        return self._inner.get(agent_id)  # type: ignore[no-any-return]

    def on_created(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        def later(agent: Agent) -> None:
            self._timers.call_later(0, lambda: listener(agent))

        return self._inner.on_created(later)  # type: ignore[no-any-return]

    def on_status(self, listener: Callable[[Agent, AgentStatus], None]) -> Callable[[], None]:
        return self._inner.on_status(listener)  # type: ignore[no-any-return]

    def on_disposed(self, listener: Callable[[Agent], None]) -> Callable[[], None]:
        return self._inner.on_disposed(listener)  # type: ignore[no-any-return]


def created_asynchronously(host: ConformanceHost) -> ConformanceHost:
    """``on_created`` listeners run on a timer after the agent was created."""
    agents = _LateCreations(host.context.agents, host.context.timers)
    return _context(host, agents=agents)


class _LeakyReservation:
    """An agent whose reservation is only bookkeeping: queued turns start anyway."""

    def __init__(self, inner: Agent) -> None:
        self._inner = inner
        self._held = False

    @property
    def id(self) -> str:
        return self._inner.id

    @property
    def session(self) -> Session:
        return self._inner.session

    def followup(self, message: UserMessage) -> None:
        self._inner.followup(message)

    def when_idle(self) -> Future[None]:
        return self._inner.when_idle()

    def reserve_turn_admission(self) -> Callable[[], None] | None:
        if self._held:
            return None
        release = self._inner.reserve_turn_admission()
        if release is None:
            return None
        release()  # the bug: the agent is not held
        self._held = True

        def unhold() -> None:
            self._held = False

        return unhold


def reservation_does_not_hold(host: ConformanceHost) -> ConformanceHost:
    """A reserved agent starts a follow-up's turn before ``release()``."""
    spawn = host.spawn_root
    return dataclasses.replace(host, spawn_root=lambda model: _LeakyReservation(spawn(model)))


class _StuckHandle:
    def cancel(self) -> None:
        """Does nothing: the bug."""


class _UncancellableTimers:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        self._inner.call_later(delay_ms, callback)
        return _StuckHandle()


def cancel_does_not_cancel(host: ConformanceHost) -> ConformanceHost:
    """``cancel()`` returns without stopping the callback."""
    return _context(host, timers=_UncancellableTimers(host.context.timers))


def float_clock(host: ConformanceHost) -> ConformanceHost:
    """``clock()`` returns float milliseconds, like ``time.time() * 1000``."""
    clock = host.context.clock
    return _context(host, clock=lambda: float(clock()))


def float_monotonic(host: ConformanceHost) -> ConformanceHost:
    """``monotonic()`` returns float milliseconds."""
    monotonic = host.context.monotonic
    return _context(host, monotonic=lambda: monotonic() + 0.5)


def inbox_only_in_memory(host: ConformanceHost) -> ConformanceHost:
    """The host claims a durable inbox, but ``followup`` queues in memory only."""
    return dataclasses.replace(host, durable_inbox=True)


def detach_keeps_the_session(host: ConformanceHost) -> ConformanceHost:
    """``detach`` refuses appends but leaves the session in the store."""

    def detach(session: Session) -> None:
        session.detach()  # type: ignore[attr-defined]

    return dataclasses.replace(host, detach=detach)


FLUSH_DURABLE = "test_flush_true_means_every_earlier_append_is_durable"
FLUSH_FUTURE = "test_flush_returns_a_future_resolving_true_after_earlier_appends"
CREATED = "test_on_created_fires_synchronously_for_a_new_root"
RESERVED = "test_reserved_agent_starts_no_queued_turn_until_release"
INBOX = "test_followup_persists_the_message_and_its_turn_waits_for_durability"
DETACHED = "test_detached_session_is_gone_and_refuses_appends_and_flushes"

CASES = [
    (
        example_host,
        flush_true_before_durable,
        FLUSH_DURABLE,
        r"SessionStore\.flush: flush resolved True but event seq \d+ was not durable",
    ),
    (
        fake_host,
        flush_returns_a_bool,
        FLUSH_FUTURE,
        r"SessionStore\.flush: flush must return a concurrent\.futures\.Future, not bool",
    ),
    (
        fake_host,
        created_asynchronously,
        CREATED,
        r"AgentRegistry\.on_created: on_created did not fire before the call creating the root",
    ),
    (
        example_host,
        reservation_does_not_hold,
        RESERVED,
        r"Agent\.reserve_turn_admission: a follow-up queued while reserved started its turn",
    ),
    (
        fake_host,
        cancel_does_not_cancel,
        "test_cancel_stops_the_callback",
        r"Cancellable\.cancel: a cancelled timer's callback ran",
    ),
    (
        fake_host,
        float_clock,
        "test_clock_returns_integer_epoch_milliseconds",
        r"HostContext\.clock: clock\(\) returned float",
    ),
    (
        fake_host,
        float_monotonic,
        "test_monotonic_returns_integer_milliseconds_that_never_go_back",
        r"HostContext\.monotonic: monotonic\(\) returned .*, not int",
    ),
    (
        example_host,
        inbox_only_in_memory,
        INBOX,
        r"durable inbox: followup returned without appending the message",
    ),
    (
        fake_host,
        detach_keeps_the_session,
        DETACHED,
        r"detached session: sessions\.get\(id\) is not None",
    ),
]


@pytest.mark.parametrize(
    ("base", "mutation", "check", "message"),
    CASES,
    ids=[case[1].__name__ for case in CASES],
)
def test_the_kit_catches_a_broken_host(
    tmp_path: Path,
    base: Callable[[Path], ConformanceHost],
    mutation: Mutation,
    check: str,
    message: str,
) -> None:
    class Broken(HostConformance):
        def make_host(self, tmp: Path) -> ConformanceHost:
            return mutation(base(tmp))

    class Sound(HostConformance):
        def make_host(self, tmp: Path) -> ConformanceHost:
            return base(tmp)

    try:  # the same check passes on the unbroken host (or is off there)
        Sound.run_check(check, tmp_path / "sound")
    except pytest.skip.Exception:
        assert mutation is inbox_only_in_memory
    with pytest.raises(AssertionError, match=message):
        Broken.run_check(check, tmp_path / "broken")


def test_run_check_refuses_an_unknown_check(tmp_path: Path) -> None:
    class Fake(HostConformance):
        def make_host(self, tmp: Path) -> ConformanceHost:
            return fake_host(tmp)

    with pytest.raises(ValueError, match="no check 'make_host'"):
        Fake.run_check("make_host", tmp_path)
