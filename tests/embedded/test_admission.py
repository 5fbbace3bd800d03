"""``TurnAdmission``: the queue, reservations, idle futures and status reports of one agent.

Most tests drive the helper by hand: ``start_turn`` only records the message and
the test ends the turn with ``turn_finished()``, so every step is explicit. The
concurrency test runs real turns on a pykka actor fed from several threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pykka
import pytest

from actors._base import MailboxActor
from host_bridge import AdmissionClosedError, TurnAdmission
from host_bridge._admission import AgentStatus
from host_bridge.testing import settle
from messages._mailbox import RunTurn

TIMEOUT = 5.0


class Rig:
    """A ``TurnAdmission[str]`` whose turns start only in :attr:`started`."""

    def __init__(self, ready: Callable[[str], bool] | None = None) -> None:
        self.log: list[str] = []  # "running", "idle" and "start <message>", in delivery order
        self.started: list[str] = []
        self.on_start: Callable[[str], None] | None = None
        self.on_status: Callable[[AgentStatus], None] | None = None
        self.admission: TurnAdmission[str] = TurnAdmission(self._start, self._status, ready=ready)

    def _start(self, message: str) -> None:
        self.log.append(f"start {message}")
        self.started.append(message)
        if self.on_start is not None:
            self.on_start(message)

    def _status(self, status: AgentStatus) -> None:
        self.log.append(status)
        if self.on_status is not None:
            self.on_status(status)


def bounded(action: Callable[[], Any]) -> Any:
    """Run ``action`` on another thread; fail (instead of hanging) if it deadlocks."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(action()), daemon=True)
    worker.start()
    worker.join(TIMEOUT)
    assert not worker.is_alive(), "deadlocked: a lock was held while calling out"
    return result[0] if result else None


# --- reservations --------------------------------------------------------------------------


def test_reserve_is_refused_while_running_reserved_or_about_to_start() -> None:
    rig = Rig()
    admission = rig.admission
    release = admission.reserve()
    assert release is not None and admission.reserved
    assert admission.reserve() is None  # already reserved
    release()
    admission.followup("work")
    assert rig.started == ["work"] and admission.running
    assert admission.reserve() is None  # running
    admission.turn_finished()
    assert admission.reserve() is not None  # idle again


def test_reserve_is_refused_between_the_start_decision_and_start_turn() -> None:
    rig = Rig()
    answers: list[object] = []
    # "running" is delivered before start_turn: a start is imminent, the turn not handed over
    rig.on_status = lambda status: answers.append((status, rig.started[:], rig.admission.reserve()))
    rig.admission.followup("work")
    assert answers == [("running", [], None)]
    assert rig.started == ["work"]


def test_a_queued_message_means_a_start_is_imminent() -> None:
    rig = Rig(ready=lambda message: False)
    rig.admission.followup("waiting")
    assert rig.started == []
    assert rig.admission.reserve() is None
    assert not rig.admission.idle


def test_a_message_queued_while_reserved_starts_only_after_release() -> None:
    rig = Rig()
    admission = rig.admission
    release = admission.reserve()
    assert release is not None
    admission.followup("due reminder")
    assert rig.started == [] and not admission.running
    assert admission.queued == ("due reminder",)
    release()
    assert rig.started == ["due reminder"]
    release()  # idempotent: starts nothing more, releases nothing
    admission.turn_finished()
    assert rig.started == ["due reminder"]
    assert admission.idle


def test_an_old_release_does_not_end_a_newer_reservation() -> None:
    admission = Rig().admission
    first = admission.reserve()
    assert first is not None
    first()
    second = admission.reserve()
    assert second is not None
    first()
    assert admission.reserved
    second()
    second()
    assert not admission.reserved


def test_on_release_runs_once_before_the_turn_it_lets_start() -> None:
    rig = Rig()
    release = rig.admission.reserve(on_release=lambda: rig.log.append("released"))
    assert release is not None
    rig.admission.followup("m")
    release()
    release()
    assert rig.log == ["released", "running", "start m"]


# --- the queue -------------------------------------------------------------------------------


def test_follow_ups_start_in_order_one_at_a_time() -> None:
    rig = Rig()
    admission = rig.admission
    for message in ("a", "b", "c"):
        admission.followup(message)
    assert rig.started == ["a"]
    assert admission.queued == ("b", "c")
    admission.turn_finished()
    assert rig.started == ["a", "b"]
    admission.turn_finished()
    admission.turn_finished()
    assert rig.started == ["a", "b", "c"]
    assert admission.idle
    # one "running" for the whole run of turns, one "idle" at its end
    assert rig.log == ["running", "start a", "start b", "start c", "idle"]


def test_order_puts_a_late_message_ahead_of_higher_numbered_ones() -> None:
    rig = Rig()
    release = rig.admission.reserve()
    assert release is not None
    rig.admission.followup("five", order=5)
    rig.admission.followup("seven", order=7)
    rig.admission.followup("six", order=6)  # queued late, numbered earlier
    rig.admission.followup("unnumbered")
    rig.admission.followup("four", order=4)  # not ahead of an unnumbered message
    assert rig.admission.queued == ("five", "six", "seven", "unnumbered", "four")
    release()
    assert rig.started == ["five"]


def test_turn_finished_without_a_turn_raises() -> None:
    with pytest.raises(RuntimeError):
        Rig().admission.turn_finished()


# --- when_idle -------------------------------------------------------------------------------


def test_when_idle_resolves_at_once_when_idle() -> None:
    assert Rig().admission.when_idle().result(0) is None


def test_when_idle_waits_for_the_last_queued_turn() -> None:
    rig = Rig()
    rig.admission.followup("a")
    rig.admission.followup("b")
    idle = rig.admission.when_idle()
    rig.admission.turn_finished()
    assert not idle.done()  # "b" started at once
    rig.admission.turn_finished()
    assert idle.result(0) is None
    assert rig.log[-1] == "idle"  # the status listener heard "idle" before the waiter


def test_when_idle_waits_for_a_reservation_to_be_released() -> None:
    admission = Rig().admission
    release = admission.reserve()
    assert release is not None
    idle = admission.when_idle()
    assert not idle.done()  # otherwise a refused reserver would spin
    release()
    assert idle.result(0) is None


def test_cancelled_idle_waiters_are_skipped() -> None:
    rig = Rig()
    rig.admission.followup("a")
    cancelled = rig.admission.when_idle()
    kept = rig.admission.when_idle()
    assert cancelled.cancel()
    rig.admission.turn_finished()
    assert kept.result(0) is None


# --- the gate --------------------------------------------------------------------------------


def test_a_message_that_is_not_ready_keeps_the_agent_busy_until_it_is() -> None:
    durable: set[str] = set()
    rig = Rig(ready=lambda message: message in durable)
    admission = rig.admission
    admission.followup("first")
    admission.followup("second")
    idle = admission.when_idle()
    assert rig.started == [] and admission.reserve() is None
    durable.add("second")
    admission.recheck()
    assert rig.started == []  # "second" waits behind "first"
    durable.add("first")
    admission.recheck()
    assert rig.started == ["first"]
    admission.turn_finished()
    assert rig.started == ["first", "second"]
    assert not idle.done()
    admission.turn_finished()
    assert idle.result(0) is None
    assert rig.log == ["running", "start first", "start second", "idle"]


def test_a_turn_followed_by_a_message_that_is_not_ready_reports_no_idle() -> None:
    durable = {"first"}
    rig = Rig(ready=lambda message: message in durable)
    rig.admission.followup("first")
    rig.admission.followup("second")
    rig.admission.turn_finished()
    assert rig.log == ["running", "start first"]  # not idle: "second" waits for its flush
    assert not rig.admission.idle and not rig.admission.running
    durable.add("second")
    rig.admission.recheck()
    rig.admission.turn_finished()
    assert rig.log == ["running", "start first", "start second", "idle"]


def test_a_ready_check_that_raises_counts_as_not_ready(caplog: pytest.LogCaptureFixture) -> None:
    def ready(message: str) -> bool:
        raise ValueError("broken gate")

    rig = Rig(ready=ready)
    with caplog.at_level(logging.ERROR, logger="dsh_schedule.host_bridge._admission"):
        rig.admission.followup("m")
    assert rig.started == []
    assert "ready check" in caplog.text


# --- call-outs: no lock held, re-entry, order, failures -------------------------------------


def test_call_outs_run_without_the_lock_and_may_re_enter() -> None:
    rig = Rig(ready=lambda message: rig.admission.reserve() is None)  # re-enters: no lock
    seen: list[object] = []

    def on_start(message: str) -> None:
        if message == "first":
            rig.admission.followup("from start_turn")
            seen.append(rig.admission.reserve())  # running: refused, not deadlocked
            seen.append(rig.admission.queued)

    def on_status(status: AgentStatus) -> None:
        seen.append((status, rig.admission.idle))

    rig.on_start = on_start
    rig.on_status = on_status
    bounded(lambda: rig.admission.followup("first"))
    assert seen == [("running", False), None, ("from start_turn",)]
    bounded(rig.admission.turn_finished)
    assert rig.started == ["first", "from start_turn"]
    bounded(rig.admission.turn_finished)
    assert seen[-1] == ("idle", True)
    # a status listener that queues a follow-up: its "running" comes after this "idle"
    rig.on_status = lambda status: rig.admission.followup("again") if status == "idle" else None
    rig.admission.followup("third")
    bounded(rig.admission.turn_finished)
    assert rig.log[-5:] == ["running", "start third", "idle", "running", "start again"]


def test_call_outs_caused_while_another_thread_delivers_are_delivered_by_it_in_order() -> None:
    rig = Rig()
    in_idle, let_go = threading.Event(), threading.Event()
    starters: list[str] = []
    rig.on_start = lambda message: starters.append(threading.current_thread().name)

    def on_status(status: AgentStatus) -> None:
        if status == "idle" and not in_idle.is_set():
            in_idle.set()
            assert let_go.wait(TIMEOUT)

    rig.on_status = on_status
    rig.admission.followup("a")
    finisher = threading.Thread(target=rig.admission.turn_finished, name="finisher")
    finisher.start()
    assert in_idle.wait(TIMEOUT)  # the finisher is delivering "idle"
    rig.admission.followup("b")  # returns at once: its call-outs wait behind that "idle"
    assert rig.admission.running and rig.admission.reserve() is None
    assert rig.started == ["a"]
    assert rig.log == ["running", "start a", "idle"]
    let_go.set()
    finisher.join(TIMEOUT)
    assert not finisher.is_alive()
    assert rig.log == ["running", "start a", "idle", "running", "start b"]
    assert starters == [threading.current_thread().name, "finisher"]


def test_a_failing_status_listener_is_logged_and_turns_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started: list[str] = []

    def listener(status: AgentStatus) -> None:
        raise RuntimeError("listener bug")

    admission: TurnAdmission[str] = TurnAdmission(started.append, listener)
    with caplog.at_level(logging.ERROR, logger="dsh_schedule.host_bridge._admission"):
        admission.followup("m")
        admission.turn_finished()
    assert started == ["m"]
    assert admission.idle
    assert "status listener failed" in caplog.text


def test_a_start_turn_that_raises_drops_the_message_and_the_agent_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = Rig()

    def on_start(message: str) -> None:
        if message == "broken":
            raise RuntimeError("runner is gone")

    rig.on_start = on_start
    idle = rig.admission.when_idle()
    with caplog.at_level(logging.ERROR, logger="dsh_schedule.host_bridge._admission"):
        rig.admission.followup("broken")
    assert "could not be started" in caplog.text
    assert not rig.admission.running and rig.admission.queued == ()
    assert rig.log == ["running", "start broken", "idle"]  # paired: no wedged "running"
    assert idle.result(0) is None
    rig.admission.followup("next")  # the agent still works
    assert rig.started == ["broken", "next"]


def test_a_start_failure_starts_the_next_queued_message() -> None:
    rig = Rig()
    release = rig.admission.reserve()
    assert release is not None
    rig.admission.followup("broken")
    rig.admission.followup("fine")

    def on_start(message: str) -> None:
        if message == "broken":
            raise RuntimeError("runner refused it")

    rig.on_start = on_start
    release()
    assert rig.started == ["broken", "fine"]
    assert rig.admission.running


# --- close -----------------------------------------------------------------------------------


def test_close_fails_idle_waiters_drops_the_queue_and_refuses_work() -> None:
    rig = Rig()
    rig.admission.followup("running")
    rig.admission.followup("queued")
    waiter = rig.admission.when_idle()
    rig.admission.close(lambda: LookupError("agent disposed"))
    rig.admission.close()  # idempotent
    assert isinstance(waiter.exception(0), LookupError)
    assert rig.admission.closed and rig.admission.queued == ()
    with pytest.raises(LookupError):
        rig.admission.followup("late")
    assert isinstance(rig.admission.when_idle().exception(0), LookupError)
    assert rig.admission.reserve() is None
    rig.admission.turn_finished()  # the running turn ends after close: ignored
    assert rig.started == ["running"]
    assert rig.log == ["running", "start running"]  # no "idle" from a closed agent


def test_close_lifts_a_reservation_and_its_release_does_nothing() -> None:
    rig = Rig()
    release = rig.admission.reserve(on_release=lambda: rig.log.append("released"))
    assert release is not None
    rig.admission.close()
    assert not rig.admission.reserved
    release()
    assert rig.log == []
    with pytest.raises(AdmissionClosedError):
        rig.admission.followup("late")


def test_statuses_and_starts_still_queued_at_close_are_dropped() -> None:
    rig = Rig()
    rig.on_status = lambda status: rig.admission.close() if status == "running" else None
    rig.admission.followup("m")
    assert rig.log == ["running"]  # closed while "running" was delivered: no start
    assert rig.started == []


# --- real turns on an actor, follow-ups from several threads ---------------------------------


class Runner(MailboxActor):
    """Runs each turn by recording it, then tells the admission the turn finished."""

    def __init__(self, admission: list[TurnAdmission[str]], log: Callable[[str], None]) -> None:
        super().__init__()
        self._admission = admission
        self._log = log

    def handle_RunTurn(self, message: RunTurn) -> None:
        self._log(f"end {message.message}")
        self._admission[0].turn_finished()


def test_statuses_alternate_and_turns_never_overlap_under_concurrent_followups() -> None:
    events: list[str] = []
    lock = threading.Lock()

    def record(event: str) -> None:
        with lock:
            events.append(event)

    holder: list[TurnAdmission[str]] = []
    runner: pykka.ActorRef[Runner] = Runner.start(holder, record)

    def start_turn(message: str) -> None:
        record(f"start {message}")
        runner.tell(RunTurn(message))

    admission: TurnAdmission[str] = TurnAdmission(start_turn, record)
    holder.append(admission)
    threads, per_thread = 6, 40
    go = threading.Barrier(threads)
    queued: dict[str, list[str]] = {f"t{n}": [] for n in range(threads)}

    def feed(name: str) -> None:
        go.wait(TIMEOUT)
        for index in range(per_thread):
            admission.followup(f"{name}-{index}")
            queued[name].append(f"{name}-{index}")
            if index % 7 == 0:
                release = admission.reserve()  # sometimes granted between turns
                if release is not None:
                    admission.followup(f"{name}-reserved-{index}")
                    queued[name].append(f"{name}-reserved-{index}")
                    release()

    feeders = [threading.Thread(target=feed, args=(f"t{n}",)) for n in range(threads)]
    for feeder in feeders:
        feeder.start()
    for feeder in feeders:
        feeder.join(TIMEOUT)
        assert not feeder.is_alive()
    admission.when_idle().result(TIMEOUT)
    settle(runner)
    runner.stop()

    # running -> (start m, end m)+ -> idle, repeated; never two turns at once
    state, current = "idle", ""
    ran: list[str] = []
    for event in events:
        if event == "running":
            assert state == "idle"
            state = "ready"
        elif event == "idle":
            assert state == "ready" and current == ""
            state = "idle"
        elif event.startswith("start "):
            assert state == "ready" and current == ""
            current = event.removeprefix("start ")
        else:
            assert current and event == f"end {current}"
            ran.append(current)
            current = ""
    assert state == "idle"
    assert sorted(ran) == sorted(m for mine in queued.values() for m in mine)
    for name, mine in queued.items():
        assert [message for message in ran if message.startswith(f"{name}-")] == mine
