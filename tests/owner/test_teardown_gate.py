"""The TeardownGate: once closed nothing passes, and closing waits for a passage under way."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import Any

import pytest
from pytest_mock import MockerFixture

from actors._teardown import TeardownGate, await_passages
from actors._waiting import wait_for as real_wait_for

BOUND_S = 5.0
"""How long a test waits for the other thread before failing (never a synchronisation)."""


def test_a_passage_after_close_is_refused_and_the_first_cause_stays() -> None:
    gate = TeardownGate()
    with gate.passage() as admitted:
        assert admitted
    assert (gate.closed, gate.cause) == (False, None)
    gate.close("not_live")
    gate.close("shutting_down")
    assert (gate.closed, gate.cause) == (True, "not_live")
    with gate.passage() as admitted:
        assert not admitted


def test_close_returns_only_once_a_passage_on_another_thread_has_ended(
    mocker: MockerFixture,
) -> None:
    gate = TeardownGate()
    waiting = threading.Event()

    def wait_for(future: Future[None], timeout: float | None) -> Any:
        waiting.set()  # close is about to wait for the passage
        return real_wait_for(future, timeout)

    mocker.patch("actors._teardown.wait_for", wait_for)
    inside = threading.Event()
    order: list[str] = []

    def step() -> None:
        with gate.passage() as admitted:
            assert admitted
            inside.set()
            assert waiting.wait(BOUND_S), "close did not wait for the passage"
            order.append("step ended")

    passer = threading.Thread(target=step)
    passer.start()
    assert inside.wait(BOUND_S)
    gate.close()
    order.append("close returned")
    passer.join()
    assert order == ["step ended", "close returned"]


def test_close_from_inside_the_passage_returns_at_once() -> None:
    gate = TeardownGate()
    with gate.passage() as admitted:
        assert admitted
        gate.close()  # a host callback made by the step itself
        assert gate.closed
    with gate.passage() as admitted:
        assert not admitted


def test_close_waits_at_most_wait_ms_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    gate = TeardownGate(wait_ms=1)
    inside = threading.Event()
    leave = threading.Event()

    def stuck_step() -> None:
        with gate.passage():
            inside.set()
            leave.wait(BOUND_S)

    passer = threading.Thread(target=stuck_step)
    passer.start()
    assert inside.wait(BOUND_S)
    with caplog.at_level(logging.WARNING, logger="dsh_schedule.actors.teardown"):
        gate.close()
    assert passer.is_alive()  # the step is still under way
    leave.set()
    passer.join()
    assert [r.getMessage() for r in caplog.records] == [
        "a schedule step under way did not end within 1 ms of teardown"
    ]


def test_gates_closed_together_wait_for_their_passages_within_one_deadline(
    mocker: MockerFixture,
) -> None:
    gates = [TeardownGate(wait_ms=1_000) for _ in range(3)]
    inside = [threading.Event() for _ in gates]
    leave = threading.Event()

    def stuck_step(gate: TeardownGate, entered: threading.Event) -> None:
        with gate.passage():
            entered.set()
            leave.wait(BOUND_S)

    passers = [
        threading.Thread(target=stuck_step, args=(gate, entered))
        for gate, entered in zip(gates, inside, strict=True)
    ]
    for passer in passers:
        passer.start()
    assert all(entered.wait(BOUND_S) for entered in inside)
    timeouts: list[float | None] = []

    def wait_for(future: Future[None], timeout: float | None) -> Any:
        timeouts.append(timeout)
        raise TimeoutError  # the first step under way never ends in time

    mocker.patch("actors._teardown.wait_for", wait_for)
    under_way = [gate.close(wait=False) for gate in gates]
    assert all(gate.closed for gate in gates)  # closed at once, none waited for yet
    await_passages([left for left in under_way if left is not None], 1_000)
    assert len(timeouts) == 1  # one deadline for all: the others are not waited for again
    assert timeouts[0] is not None and timeouts[0] <= 1.0
    leave.set()
    for passer in passers:
        passer.join()
    assert all(left is not None and left.done() for left in under_way)
