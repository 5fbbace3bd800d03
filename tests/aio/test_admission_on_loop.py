"""admission_on_loop: a host's own turn admission starting its turns on an asyncio loop."""

from __future__ import annotations

import asyncio
import threading

from host_bridge.aio import admission_on_loop, wait

TIMEOUT = 10.0


async def test_a_followup_from_another_thread_runs_its_turn_on_the_loop() -> None:
    loop = asyncio.get_running_loop()
    ran: list[tuple[str, bool]] = []

    async def run(message: str) -> None:
        ran.append((message, threading.current_thread() is threading.main_thread()))

    admission = admission_on_loop(loop, run)
    await asyncio.to_thread(admission.followup, "from a Schedule thread")
    await asyncio.wait_for(wait(admission.when_idle()), TIMEOUT)
    assert ran == [("from a Schedule thread", True)]  # the test's loop runs on the main thread


async def test_a_reservation_holds_the_turn_and_its_release_starts_it() -> None:
    loop = asyncio.get_running_loop()
    ran: list[str] = []

    async def run(message: str) -> None:
        ran.append(message)

    admission = admission_on_loop(loop, run)
    release = admission.reserve()
    assert release is not None
    admission.followup("reminder")
    await asyncio.sleep(0)  # a turn could have been scheduled now: none was
    assert ran == [] and admission.queued == ("reminder",)
    release()
    await asyncio.wait_for(wait(admission.when_idle()), TIMEOUT)
    assert ran == ["reminder"]


async def test_a_failing_turn_still_ends_and_the_next_one_runs() -> None:
    loop = asyncio.get_running_loop()
    ran: list[str] = []

    async def run(message: str) -> None:
        ran.append(message)
        if message == "bad":
            raise ValueError("model down")

    admission = admission_on_loop(loop, run)
    admission.followup("bad")
    admission.followup("good")
    await asyncio.wait_for(wait(admission.when_idle()), TIMEOUT)
    assert ran == ["bad", "good"]


def test_on_a_closed_loop_a_turn_is_dropped_and_the_agent_stays_usable() -> None:
    loop = asyncio.new_event_loop()
    loop.close()

    async def run(message: str) -> None:
        raise AssertionError("never runs")

    admission = admission_on_loop(loop, run)
    admission.followup("message")
    assert admission.when_idle().result(timeout=TIMEOUT) is None  # dropped, not wedged
