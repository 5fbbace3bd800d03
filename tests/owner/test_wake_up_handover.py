"""The wake-up actor hands a wanted session over: at mailbox level, on fake time.

A host that also offers :class:`~host_bridge.protocols.SessionDemand` is asked
every ``demand_poll_ms`` which managed sessions another process wants; such a
session is let go by the ordinary passivation as soon as its agent is idle,
its owner quiet and nothing is due in it within the hand-over margin, long
before its quiet period ends. Every test runs on both actor runtimes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import pykka
import pytest

from actors._runtime import Runtime
from actors._wake_policy import HANDOVER_MARGIN_MS
from host_bridge._plugin import WakePolicy
from host_bridge.protocols import SessionDemand
from host_bridge.testing import FakeActivation, FakeHost
from tests.owner.test_wake_up import START, Waker, reminder

QUIET = 3_600_000  # an hour: nothing here is let go for being quiet
POLL = 500
POLICY = WakePolicy(rescan_ms=60_000, quiet_period_ms=QUIET, demand_poll_ms=POLL)


class DemandActivation(FakeActivation):
    """A fake activation whose sessions another process may want (``want``/``unwant``)."""

    def __init__(self, host: FakeHost) -> None:
        super().__init__(host)
        self.wanted_ids: set[str] = set()
        self.polls: list[frozenset[str]] = []
        self.scans = 0  # next_due calls: the store scans of the wake-up actor

    def wanted(self, session_ids: Collection[str]) -> set[str]:
        self.polls.append(frozenset(session_ids))
        return self.wanted_ids & set(session_ids)

    def next_due(self) -> int | None:
        self.scans += 1
        return super().next_due()


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


def waker(runtime: Runtime, events: list[tuple[str, object]]) -> tuple[Waker, DemandActivation]:
    w = Waker(runtime, POLICY, stored={"s1": events}, activation=DemandActivation)
    assert isinstance(w.activation, DemandActivation)
    assert isinstance(w.activation, SessionDemand)
    return w, w.activation


def test_a_wanted_idle_session_is_handed_over_at_the_next_poll(runtime: Runtime) -> None:
    w, activation = waker(runtime, [reminder("schedule-1", START)])
    agent = w.woken()
    assert w.dispatched(agent) == ["schedule-1"]
    agent.run_queued_turns()
    w.settle()
    w.advance(10 * POLL)
    assert w.host.journal.of("passivate") == []  # nobody wants it: kept for its quiet period
    assert activation.polls and activation.polls[-1] == {"s1"}
    activation.wanted_ids.add("s1")
    w.advance(POLL - 1)
    assert w.host.journal.of("passivate") == []
    w.advance(1)
    assert w.host.journal.of("passivated") == [("passivated", agent.id, True)]
    assert activation.is_cold("s1")
    status = w.plugin.status().wake_up
    assert status is not None and status.handovers == 1 and status.passivations == 1
    polls = len(activation.polls)
    w.advance(10 * POLL)
    assert len(activation.polls) == polls  # nothing managed: nothing polled
    assert w.dispatched(agent) == ["schedule-1"]  # delivered once, before the hand-over


def test_a_wanted_session_waits_for_its_turn_in_flight(runtime: Runtime) -> None:
    w, activation = waker(runtime, [reminder("schedule-1", START)])
    agent = w.woken()
    activation.wanted_ids.add("s1")
    w.advance(20 * POLL)  # its reminder turn has not run: the agent is not idle
    assert w.host.journal.of("passivate") == []
    agent.run_queued_turns()
    w.settle()
    w.advance(POLL)
    assert [e[1] for e in w.host.journal.of("passivate")] == [agent.id]
    assert w.dispatched(agent) == ["schedule-1"]


def test_a_wanted_session_with_a_reminder_due_is_kept_until_it_was_delivered(
    runtime: Runtime,
) -> None:
    events = [reminder("schedule-1", START), reminder("schedule-2", START + 2_000)]
    w, activation = waker(runtime, events)
    agent = w.woken()
    agent.run_queued_turns()
    w.settle()
    w.advance(1_000)
    agent.begin_turn()  # a turn of its own runs while schedule-2 comes due
    w.settle()
    activation.wanted_ids.add("s1")
    w.advance(5 * POLL)
    assert w.dispatched(agent) == ["schedule-1"]  # the owner waits for the agent to be idle
    assert w.host.journal.of("passivate") == []  # due and not delivered: kept
    agent.end_turn()
    w.settle()
    assert w.dispatched(agent) == ["schedule-1", "schedule-2"]
    w.advance(5 * POLL)
    assert w.host.journal.of("passivate") == []  # its reminder turn has not run yet
    agent.run_queued_turns()
    w.settle()
    w.advance(POLL)
    assert [e[1] for e in w.host.journal.of("passivate")] == [agent.id]
    assert w.dispatched(agent) == ["schedule-1", "schedule-2"]  # each delivered once


def test_a_session_handed_over_before_its_next_reminder_gets_it_delivered_once(
    runtime: Runtime,
) -> None:
    later = START + POLL + HANDOVER_MARGIN_MS + 1  # beyond the margin at the next poll
    events = [reminder("schedule-1", START), reminder("schedule-2", later)]
    w, activation = waker(runtime, events)
    agent = w.woken()
    agent.run_queued_turns()
    w.settle()
    activation.wanted_ids.add("s1")
    w.advance(POLL)  # idle, schedule-2 not due within the margin: handed over
    assert [e[1] for e in w.host.journal.of("passivated")] == [agent.id]
    assert w.dispatched(agent) == ["schedule-1"]
    activation.wanted_ids.clear()
    w.advance(later - START - POLL)  # whoever holds it next delivers schedule-2 (here: woken again)
    assert w.activated() == ["s1", "s1"]
    assert w.dispatched(w.woken(1)) == ["schedule-1", "schedule-2"]


def test_a_session_wanted_then_no_longer_is_kept_for_its_quiet_period(runtime: Runtime) -> None:
    w, activation = waker(runtime, [reminder("schedule-1", START)])
    agent = w.woken()
    activation.wanted_ids.add("s1")
    w.advance(2 * POLL)  # wanted while busy
    activation.wanted_ids.clear()
    w.advance(POLL)
    agent.run_queued_turns()
    w.settle()
    w.advance(10 * POLL)
    assert w.host.journal.of("passivate") == []


def test_a_failing_demand_poll_keeps_the_session_and_is_tried_again(runtime: Runtime) -> None:
    w, activation = waker(runtime, [reminder("schedule-1", START)])
    agent = w.woken()
    agent.run_queued_turns()
    w.settle()
    calls: list[int] = []

    def broken(session_ids: Collection[str]) -> set[str]:
        calls.append(1)
        raise RuntimeError("the store went away")

    activation.wanted = broken  # type: ignore[method-assign]
    w.advance(3 * POLL)
    assert len(calls) == 3 and w.host.journal.of("passivate") == []
    del activation.wanted  # the class's method again: s1 is wanted from now on
    activation.wanted_ids.add("s1")
    w.advance(POLL)
    assert [e[1] for e in w.host.journal.of("passivate")] == [agent.id]


def test_no_demand_poll_without_the_policy(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=60_000, quiet_period_ms=QUIET, demand_poll_ms=None)
    w = Waker(
        runtime, policy, stored={"s1": [reminder("schedule-1", START)]}, activation=DemandActivation
    )
    assert isinstance(w.activation, DemandActivation)
    w.activation.wanted_ids.add("s1")
    w.woken().run_queued_turns()
    w.settle()
    w.advance(10 * POLL)
    assert w.activation.polls == [] and w.host.journal.of("passivate") == []
    with pytest.raises(ValueError, match="demand_poll_ms"):
        WakePolicy(demand_poll_ms=0)


def test_a_wanted_session_with_a_reminder_due_within_the_margin_is_kept_until_it_ran(
    runtime: Runtime,
) -> None:
    """Regression: a reminder due just after the check started a turn the let-go then cut."""
    soon = START + HANDOVER_MARGIN_MS  # due within the margin once the first turn is done
    w, activation = waker(runtime, [reminder("schedule-1", START), reminder("schedule-2", soon)])
    agent = w.woken()
    agent.run_queued_turns()
    w.settle()
    activation.wanted_ids.add("s1")
    w.advance(POLL)
    assert w.host.journal.of("passivate") == []  # schedule-2 is due within the margin
    w.advance(soon - START - POLL)
    assert w.dispatched(agent) == ["schedule-1", "schedule-2"]
    agent.run_queued_turns()
    w.settle()
    w.advance(POLL)
    assert [e[1] for e in w.host.journal.of("passivate")] == [agent.id]


@pytest.mark.parametrize("poll", [None, POLL])
def test_demand_polls_do_not_scan_the_store(runtime: Runtime, poll: int | None) -> None:
    """Regression: each demand poll ran a full pass, doubling the due-index reads."""
    policy = WakePolicy(rescan_ms=1_000, quiet_period_ms=QUIET, demand_poll_ms=poll)
    w = Waker(
        runtime, policy, stored={"s1": [reminder("schedule-1", START)]}, activation=DemandActivation
    )
    activation = w.activation
    assert isinstance(activation, DemandActivation)
    agent = w.woken()
    agent.run_queued_turns()
    w.settle()
    before = activation.scans
    w.advance(10_000)  # one idle managed session, nobody wants it
    assert 10 <= activation.scans - before <= 12  # one scan per rescan, polls or not
    assert len(activation.polls) >= (20 if poll else 0)


@pytest.mark.parametrize("quiet", [0, 1_000])
def test_a_long_turn_is_looked_at_again_on_a_timer_that_lets_time_pass(
    runtime: Runtime, quiet: int
) -> None:
    """Regression: a not-quiet session past its quiet period re-armed a 0 ms timer, on and on.

    ``Waker.advance`` fails with "timers kept firing" when timers fire without
    time passing; the turn runs longer than the quiet period, wanted or not.
    """
    policy = WakePolicy(rescan_ms=60_000, quiet_period_ms=quiet, demand_poll_ms=POLL)
    w = Waker(
        runtime, policy, stored={"s1": [reminder("schedule-1", START)]}, activation=DemandActivation
    )
    activation = w.activation
    assert isinstance(activation, DemandActivation)
    agent = w.woken()
    agent.run_queued_turns()
    agent.begin_turn()  # a turn of its own, longer than the quiet period
    w.settle()
    w.advance(5 * POLL)
    activation.wanted_ids.add("s1")
    w.advance(5 * POLL)
    assert w.host.journal.of("passivate") == []  # not idle: kept
    agent.end_turn()
    w.settle()
    w.advance(POLL)
    assert [e[1] for e in w.host.journal.of("passivate")] == [agent.id]
    assert w.dispatched(agent) == ["schedule-1"]
