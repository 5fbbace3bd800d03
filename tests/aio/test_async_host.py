"""AsyncHost end to end: real SQLite, real actors, turns on the test's loop, fake time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import AsyncIterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from host_bridge.aio import (
    AgentTurn,
    AsyncHost,
    RunnerCancelledError,
    TurnRunner,
    current_turn,
    wait,
)
from host_bridge.embedded.agents import AgentDisposedError, TurnInterrupted
from host_bridge.embedded.sessions import EmbeddedSession
from host_bridge.protocols import ToolCall, ToolDefinition, ToolResult
from host_bridge.testing import FakeClock, FakeTimers, advance_async, settle_async
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.changes import change_of, reopened
from tests.stores.case import Seam

TIMEOUT = 20.0
REMIND = re.compile(r"remind (\d+) (.+)")


class Runner:
    """A turn runner that creates a reminder for ``remind N text`` and notes every turn."""

    def __init__(self) -> None:
        self.turns: list[tuple[bool, str]] = []
        self.loops: set[asyncio.AbstractEventLoop] = set()

    async def __call__(self, turn: AgentTurn) -> str | None:
        self.loops.add(asyncio.get_running_loop())
        assert current_turn() is turn
        self.turns.append((turn.is_reminder, turn.text))
        match = REMIND.fullmatch(turn.text)
        if match is None:
            return f"seen: {turn.text.splitlines()[0]}"
        arguments = json.dumps({"prompt": match[2], "after_seconds": int(match[1])})
        result = await turn.call_tool("schedule_create", arguments)
        return str(json.loads(result.content)["id"])

    @property
    def reminders(self) -> list[str]:
        return [text for is_reminder, text in self.turns if is_reminder]


async def stop_during_a_turn(
    runner: TurnRunner, data_dir: Path, started: asyncio.Event, text: str = "hi"
) -> None:
    """Send ``text`` to session u-1, close the host once ``started`` is set; the send is cut."""
    host = AsyncHost(runner, data_dir=data_dir, stop_timeout=0.0)
    await host.start()
    chat = await host.open("u-1")
    sending = asyncio.ensure_future(chat.send(text))
    await asyncio.wait_for(started.wait(), TIMEOUT)
    await host.aclose()
    with pytest.raises((TurnInterrupted, AgentDisposedError)):  # not answered, either way
        await asyncio.wait_for(sending, TIMEOUT)


@contextlib.asynccontextmanager
async def fake_time_host(
    data_dir: Path, runner: Runner, clock: FakeClock | None = None
) -> AsyncIterator[tuple[AsyncHost, FakeTimers]]:
    clock = clock if clock is not None else FakeClock()
    timers = FakeTimers(clock)
    async with AsyncHost(runner, data_dir=data_dir, clock=clock, timers=timers) as host:
        yield host, timers


def stored_changes(data_dir: Path, session_id: str) -> list[tuple[str, str]]:
    events = reopened(data_dir / "sessions.sqlite3", session_id).events
    return [change_of(e.data) for e in events if e.type == SCHEDULE_CHANGE_TYPE]


async def test_a_reminder_arrives_as_a_new_turn_on_the_hosts_loop_once_and_not_early(
    tmp_path: Path,
) -> None:
    runner = Runner()
    async with fake_time_host(tmp_path, runner) as (host, timers):
        chat = await host.open("u-1")
        assert await chat.send("remind 60 stretch") == "schedule-1"
        timers.advance(59_999)
        await settle_async(host, timeout=TIMEOUT)
        assert runner.reminders == []
        timers.advance(1)
        await settle_async(host, timeout=TIMEOUT)
        assert len(runner.reminders) == 1
        assert 'reminder_prompt_json: "stretch"' in runner.reminders[0]
        timers.advance(3_600_000)
        await settle_async(host, timeout=TIMEOUT)
        assert len(runner.reminders) == 1
        assert runner.loops == {asyncio.get_running_loop()}
        completed = [e for e in chat.agent.session.events if e.type == "turn/completed"]
        assert len(completed) == 2  # the person's turn and the reminder's, recorded by the module
    assert stored_changes(tmp_path, "u-1") == [("create", "schedule-1"), ("dispatch", "schedule-1")]


async def test_a_reminder_survives_a_restart_and_reaches_a_closed_conversation(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    first = Runner()
    async with fake_time_host(tmp_path, first, clock) as (host, _):
        chat = await host.open("u-1")
        await chat.send("remind 60 stretch")
    assert first.reminders == []

    second = Runner()
    async with fake_time_host(tmp_path, second, clock) as (host, timers):
        await advance_async(host, timers, 60_000)  # nobody opened u-1: activation wakes it
        assert len(second.reminders) == 1
        assert host.embedded.sessions.get("u-1") is not None
        chat = await host.open("u-1")  # takes over the woken agent
        assert await chat.send("hello") == "seen: hello"
        await chat.close()
        assert host.embedded.sessions.get("u-1") is None
    assert stored_changes(tmp_path, "u-1") == [("create", "schedule-1"), ("dispatch", "schedule-1")]


async def test_a_failing_runner_fails_the_send_and_the_turn_is_completed_not_rerun(
    tmp_path: Path,
) -> None:
    async def broken(turn: AgentTurn) -> str | None:
        raise ValueError("the model is down")

    async with AsyncHost(broken, data_dir=tmp_path) as host:
        chat = await host.open("u-1")
        with pytest.raises(ValueError, match="the model is down"):
            await chat.send("hi")
        events = chat.agent.session.events
        completed = [e.data for e in events if e.type == "turn/completed"]
        assert len(completed) == 1 and completed[0]["failed"] is True


async def test_records_are_kept_in_the_session_log_and_reserved_types_are_refused(
    tmp_path: Path,
) -> None:
    async def remember(turn: AgentTurn) -> str | None:
        before = turn.records("test/history")
        await turn.record("test/history", {"said": turn.text})
        with pytest.raises(ValueError):
            await turn.record("schedule/change", {})
        with pytest.raises(ValueError):
            await turn.record("history", {})
        return str(len(before))

    async with AsyncHost(remember, data_dir=tmp_path) as host:
        chat = await host.open("u-1")
        assert await chat.send("one") == "0"
    async with AsyncHost(remember, data_dir=tmp_path) as host:
        chat = await host.open("u-1")
        assert await chat.send("two") == "1"
    events = reopened(tmp_path / "sessions.sqlite3", "u-1").events
    history = [e.data["data"] for e in events if e.type == "test/history"]
    assert history == [{"said": "one"}, {"said": "two"}]


async def test_the_records_of_a_run_a_stop_cut_are_left_out_when_it_runs_again(
    tmp_path: Path,
) -> None:
    recorded = asyncio.Event()
    seen: list[list[Any]] = []

    async def records_then_hangs(turn: AgentTurn) -> str | None:
        seen.append(turn.records("test/history"))
        await turn.record("test/history", {"run": len(seen)})
        if len(seen) == 1:
            recorded.set()
            await asyncio.Event().wait()  # cut by the stop below
        return "done"

    await stop_during_a_turn(records_then_hangs, tmp_path, recorded)

    async with AsyncHost(records_then_hangs, data_dir=tmp_path) as again:
        chat = await again.open("u-1")
        await asyncio.wait_for(chat.when_idle(), TIMEOUT)  # the cut turn runs again
        assert await chat.send("next") == "done"
    assert seen == [[], [], [{"run": 2}]]  # the cut run's record never reached a later turn
    events = reopened(tmp_path / "sessions.sqlite3", "u-1").events
    stored = [e.data["data"] for e in events if e.type == "test/history"]
    assert stored == [{"run": 1}, {"run": 2}, {"run": 3}]  # the log keeps everything


async def test_no_coroutine_is_blocked_while_a_tool_call_waits_for_a_slow_flush(
    tmp_path: Path,
) -> None:
    seam = Seam()
    ticks = 0
    held_ticks: list[int] = []

    async def watchdog() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async def slow_create(turn: AgentTurn) -> str | None:
        seam.pause()  # the next write round (the create's preflight flush) is held open
        call = asyncio.ensure_future(
            turn.call_tool("schedule_create", {"prompt": "p", "after_seconds": 60})
        )
        await asyncio.to_thread(seam.entered.wait, TIMEOUT)
        start = ticks
        async with asyncio.timeout(TIMEOUT):
            while ticks < start + 20:  # the loop keeps ticking while the flush is held
                assert not call.done()
                await asyncio.sleep(0.01)
        held_ticks.append(ticks - start)
        seam.unpause()
        result = await call
        return str(json.loads(result.content)["state"])

    ticking = asyncio.ensure_future(watchdog())
    try:
        async with AsyncHost(slow_create, data_dir=tmp_path) as host:
            host.embedded.persistence.fault_hook = seam  # type: ignore[union-attr]
            chat = await host.open("u-1")
            assert await chat.send("go") == "scheduled"
    finally:
        ticking.cancel()
    assert held_ticks and held_ticks[0] >= 20


async def test_cancelling_an_awaited_tool_call_cancels_it_before_its_append(
    tmp_path: Path,
) -> None:
    seam = Seam()

    async def cancel_create(turn: AgentTurn) -> str | None:
        seam.pause()
        call = asyncio.ensure_future(
            turn.call_tool("schedule_create", {"prompt": "p", "after_seconds": 60})
        )
        await asyncio.to_thread(seam.entered.wait, TIMEOUT)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        seam.unpause()
        listed = await turn.call_tool("schedule_list", {})
        return listed.content

    async with AsyncHost(cancel_create, data_dir=tmp_path) as host:
        host.embedded.persistence.fault_hook = seam  # type: ignore[union-attr]
        chat = await host.open("u-1")
        listed: Any = json.loads(await chat.send("go") or "null")
        await settle_async(host, timeout=TIMEOUT)
    assert listed["schedules"] == []
    assert stored_changes(tmp_path, "u-1") == []
    tool_records = [
        e.data
        for e in reopened(tmp_path / "sessions.sqlite3", "u-1").events
        if e.type == "message" and e.data.get("role") == "tool"
    ]
    assert tool_records[0]["name"] == "schedule_create"  # the cancelled call ended in the log
    assert tool_records[0]["cancelled"] is True and tool_records[0]["isError"] is True


class HeldTool:
    """A tool whose calls wait for the test; it goes on (cannot stop) once ``start`` ran."""

    def __init__(self) -> None:
        self.calls: list[Future[ToolResult]] = []

    def execute(self, arguments: Any, call: ToolCall) -> Future[ToolResult]:
        future: Future[ToolResult] = Future()
        self.calls.append(future)
        return future

    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            "held", "waits for the test", {"type": "object"}, {}, self.execute, str, str
        )


async def test_a_cancel_too_late_to_stop_a_tool_lets_it_finish_and_records_its_result(
    tmp_path: Path,
) -> None:
    tool = HeldTool()
    cancelled: list[bool] = []

    async def cancel_late(turn: AgentTurn) -> str | None:
        call = asyncio.ensure_future(turn.call_tool("held", {}))
        while not tool.calls:
            await asyncio.sleep(0)
        assert tool.calls[0].set_running_or_notify_cancel()  # the tool went on: no stopping now
        call.cancel()
        try:
            await call
        except asyncio.CancelledError:
            cancelled.append(True)
        tool.calls[0].set_result(ToolResult(False, {"ok": 1}, '{"ok":1}'))
        return "done"

    async with AsyncHost(cancel_late, data_dir=tmp_path, schedule=False) as host:
        host.embedded.tools.register_global(tool.definition())
        chat = await host.open("u-1")
        assert await chat.send("go") == "done"
        await settle_async_records(chat)
        tool_records = [
            e.data
            for e in chat.agent.session.events
            if e.type == "message" and e.data.get("role") == "tool"
        ]
    assert cancelled == [True]  # the awaiting task was cancelled ...
    assert tool_records == [  # ... and the log still has the result of the call that went on
        {"role": "tool", "name": "held", "isError": False, "content": '{"ok":1}'}
    ]


async def settle_async_records(chat: Any) -> None:
    """Wait until the session's pending appends are in the live log (a flush covers them)."""
    assert await wait(chat.agent.session.request_flush()) is True


async def test_aclose_cuts_a_running_turn_and_the_next_start_runs_it_again(tmp_path: Path) -> None:
    started = asyncio.Event()
    runs: list[str] = []

    async def hangs(turn: AgentTurn) -> str | None:
        runs.append(turn.text)
        if len(runs) == 1:
            started.set()
            await asyncio.Event().wait()  # never ends by itself
        return "done"

    await stop_during_a_turn(hangs, tmp_path, started)

    async with AsyncHost(hangs, data_dir=tmp_path) as again:
        chat = await again.open("u-1")
        await asyncio.wait_for(chat.when_idle(), TIMEOUT)
        assert runs == ["hi", "hi"]  # the unfinished turn ran once more
        completed = [e for e in chat.agent.session.events if e.type == "turn/completed"]
        assert len(completed) == 1


async def test_wait_awaits_a_module_future_and_opening_twice_gives_one_conversation(
    tmp_path: Path,
) -> None:
    runner = Runner()
    async with AsyncHost(runner, data_dir=tmp_path) as host:
        first = await host.open("u-1")
        assert await host.open("u-1") is first
        await wait(first.agent.when_idle())
        fresh = await host.open()
        assert fresh.session_id != "u-1"
        assert await fresh.send("x") == "seen: x"
        await host.when_idle()


async def test_opening_a_session_its_activation_is_waking_takes_over_the_woken_agent(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    async with fake_time_host(tmp_path, Runner(), clock) as (host, _):
        await (await host.open("u-1")).send("remind 60 stretch")
    clock.advance(61_000)  # overdue when the next host starts

    runner = Runner()
    async with fake_time_host(tmp_path, runner, clock) as (host, timers):
        sessions = host.embedded.sessions
        resume = sessions.resume_claimed
        entered, gate = threading.Event(), threading.Event()

        def held_resume(session_id: str) -> EmbeddedSession:
            entered.set()
            assert gate.wait(TIMEOUT)
            return resume(session_id)

        sessions.resume_claimed = held_resume  # type: ignore[method-assign]
        timers.advance(0)  # the wake-up activates u-1 on a worker thread, held before going live
        assert await asyncio.to_thread(entered.wait, TIMEOUT)
        opening = asyncio.ensure_future(host.open("u-1"))
        await asyncio.to_thread(lambda: None)  # let the open reach the activation
        assert not opening.done()  # it waits for the activation of its session
        gate.set()
        chat = await asyncio.wait_for(opening, TIMEOUT)
        roots = [a for a in host.embedded.agents.roots() if a.session.id == "u-1"]
        assert roots == [chat.agent]  # the woken agent, taken over: one root on the session
        await settle_async(host, timeout=TIMEOUT)
        assert len(runner.reminders) == 1
        assert await chat.send("hello") == "seen: hello"


@pytest.mark.parametrize(("watch_ms", "ticking"), [(1000, True), (None, False)])
async def test_the_clock_watchdog_follows_clock_watch_ms(
    tmp_path: Path, watch_ms: int | None, ticking: bool
) -> None:
    clock = FakeClock()
    async with AsyncHost(
        Runner(), data_dir=tmp_path, clock=clock, timers=FakeTimers(clock), clock_watch_ms=watch_ms
    ) as host:
        await host.open("u-1")
        await settle_async(host, timeout=TIMEOUT)
        assert host.plugin.status().clock_watch is ticking


class HeldOpen:
    """Holds the next ``sessions.open`` of a host's worker thread until the test lets it go."""

    def __init__(self, host: AsyncHost) -> None:
        self.entered, self.gate = threading.Event(), threading.Event()
        sessions = host.embedded.sessions
        real = sessions.open

        def held(session_id: str) -> EmbeddedSession:
            if not self.gate.is_set():
                self.entered.set()
                assert self.gate.wait(TIMEOUT)
            return real(session_id)

        sessions.open = held  # type: ignore[method-assign]


def roots_on(host: AsyncHost, session_id: str) -> list[Any]:
    return [a for a in host.embedded.agents.roots() if a.session.id == session_id]


async def test_a_cancelled_open_still_opens_once_and_the_next_open_gets_that_conversation(
    tmp_path: Path,
) -> None:
    async with AsyncHost(Runner(), data_dir=tmp_path) as host:
        held = HeldOpen(host)
        first = asyncio.ensure_future(host.open("u-1"))
        assert await asyncio.to_thread(held.entered.wait, TIMEOUT)
        first.cancel()  # a request timeout, say: the spawn in the worker thread goes on
        with pytest.raises(asyncio.CancelledError):
            await first
        second = asyncio.ensure_future(host.open("u-1"))
        held.gate.set()
        chat = await asyncio.wait_for(second, TIMEOUT)
        assert roots_on(host, "u-1") == [chat.agent]  # no orphan beside it
        assert await host.open("u-1") is chat
        await chat.close()
        assert roots_on(host, "u-1") == [] and host.embedded.sessions.get("u-1") is None


async def test_two_opens_of_one_session_at_once_give_one_conversation(tmp_path: Path) -> None:
    async with AsyncHost(Runner(), data_dir=tmp_path) as host:
        await (await host.open("u-1")).close()  # stored, cold
        held = HeldOpen(host)
        both = asyncio.gather(host.open("u-1"), host.open("u-1"))
        assert await asyncio.to_thread(held.entered.wait, TIMEOUT)
        held.gate.set()
        one, two = await asyncio.wait_for(both, TIMEOUT)
        assert one is two
        assert roots_on(host, "u-1") == [one.agent]


async def test_a_cancelled_close_still_lets_the_session_go_and_an_open_waits_for_it(
    tmp_path: Path,
) -> None:
    release = asyncio.Event()

    async def slow(turn: AgentTurn) -> str | None:
        await release.wait()
        return "done"

    async with AsyncHost(slow, data_dir=tmp_path) as host:
        chat = await host.open("u-1")
        sending = asyncio.ensure_future(chat.send("hi"))
        closing = asyncio.ensure_future(chat.close())  # waits for the turn
        await asyncio.sleep(0)
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        reopening = asyncio.ensure_future(host.open("u-1"))  # waits for the close to finish
        release.set()
        assert await sending == "done"
        again = await asyncio.wait_for(reopening, TIMEOUT)
        assert again is not chat
        assert roots_on(host, "u-1") == [again.agent]
        assert await again.send("next") == "done"



async def test_a_close_waits_for_a_send_made_before_it_even_when_the_agent_looks_idle(
    tmp_path: Path,
) -> None:
    """Regression: a close that found the agent idle before a submitted turn counted let
    the session go, and that send failed with AgentDisposedError (seen on a loaded machine).
    """
    release = asyncio.Event()

    async def slow(turn: AgentTurn) -> str | None:
        await release.wait()
        return "done"

    async def looks_idle() -> None:
        return None  # what a close saw when it ran before the submitted turn was counted

    async with AsyncHost(slow, data_dir=tmp_path) as host:
        chat = await host.open("u-1")
        chat.when_idle = looks_idle  # type: ignore[method-assign]
        sending = asyncio.ensure_future(chat.send("hi"))
        await asyncio.sleep(0)  # the send has submitted its message
        closing = asyncio.ensure_future(chat.close())
        await asyncio.sleep(0)
        assert not closing.done()  # it waits for the send's turn
        release.set()
        assert await sending == "done"
        await asyncio.wait_for(closing, TIMEOUT)
        assert roots_on(host, "u-1") == []

async def test_a_runner_that_ends_cancelled_by_itself_fails_its_turn_instead_of_rerunning(
    tmp_path: Path,
) -> None:
    runs: list[str] = []

    async def cancels_itself(turn: AgentTurn) -> str | None:
        runs.append(turn.text)
        inner = asyncio.ensure_future(asyncio.sleep(3600))
        inner.cancel()
        await inner  # a framework's inner task cancelled: CancelledError escapes the runner
        return "never"

    async with AsyncHost(cancels_itself, data_dir=tmp_path) as host:
        chat = await host.open("u-1")
        with pytest.raises(RunnerCancelledError):
            await chat.send("hi")
    async with AsyncHost(cancels_itself, data_dir=tmp_path) as host:
        chat = await host.open("u-1")
        await asyncio.wait_for(chat.when_idle(), TIMEOUT)
    assert runs == ["hi"]  # recorded as failed, so not run again at the next start
    events = reopened(tmp_path / "sessions.sqlite3", "u-1").events
    assert [e.data["failed"] for e in events if e.type == "turn/completed"] == [True]


async def test_aclose_past_its_timeout_never_cancels_the_plugins_shared_dispose(
    tmp_path: Path,
) -> None:
    host = AsyncHost(Runner(), data_dir=tmp_path, stop_timeout=0.0)
    await host.start()
    await host.open("u-1")
    plugin = host.plugin
    await asyncio.gather(host.aclose(), host.aclose())  # the second waits for the first
    assert not plugin.dispose().cancelled()


async def test_a_runner_raising_turn_interrupted_leaves_a_cold_reminder_to_its_next_wake_up(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    presented: list[str] = []

    async def flaky(turn: AgentTurn) -> str | None:
        if not turn.is_reminder:
            return await Runner()(turn)
        presented.append(turn.text)
        if len(presented) == 1:
            raise TurnInterrupted("the model provider is down")  # worth waiting out
        return "presented"

    async with fake_time_host(tmp_path, Runner(), clock) as (host, _):
        await (await host.open("u-1")).send("remind 60 stretch")
    async with AsyncHost(
        flaky, data_dir=tmp_path, clock=clock, timers=FakeTimers(clock), clock_watch_ms=None
    ) as host:
        timers = host.embedded.timers
        assert isinstance(timers, FakeTimers)
        await advance_async(host, timers, 60_000)
        assert len(presented) == 1  # woken, and the runner gave up for now
        await advance_async(host, timers, 120_000)  # quiet period, let go, woken again
        assert len(presented) == 2 and presented[0] == presented[1]
    events = reopened(tmp_path / "sessions.sqlite3", "u-1").events
    assert [e.data["failed"] for e in events if e.type == "turn/completed"] == [False, False]


WEEKDAYS_AT_9 = '{"prompt": "standup", "cron": {"expression": "0 9 * * 1-5", "time_zone": "UTC"}}'


async def call_create(turn: AgentTurn) -> str | None:
    """A runner whose person's turn text is ``schedule_create``'s argument text; its content."""
    if turn.is_reminder:
        return "presented"
    return (await turn.call_tool("schedule_create", turn.text)).content


async def test_a_cron_reminder_created_on_the_host_arrives_at_its_local_time(
    tmp_path: Path,
) -> None:
    clock = FakeClock()  # 2026-01-01T00:00:00.000Z, a Thursday
    timers = FakeTimers(clock)
    async with AsyncHost(
        call_create, data_dir=tmp_path, clock=clock, timers=timers, wake=False, clock_watch_ms=None
    ) as host:  # no periodic timers: only the reminder's
        assert host.plugin.calendar_rules is True
        chat = await host.open("u-1")
        created = json.loads(await chat.send(WEEKDAYS_AT_9) or "")
        assert (created["kind"], created["scheduledAt"]) == ("cron", "2026-01-01T09:00:00.000Z")
        await advance_async(host, timers, 9 * 3_600_000 - 1, timeout=TIMEOUT)
        assert stored_changes(tmp_path, "u-1") == [("create", "schedule-1")]
        await advance_async(host, timers, 1, timeout=TIMEOUT)
    assert stored_changes(tmp_path, "u-1") == [("create", "schedule-1"), ("dispatch", "schedule-1")]


async def test_without_calendar_rules_the_hosts_tools_refuse_cron_and_never_mention_it(
    tmp_path: Path,
) -> None:
    async with AsyncHost(call_create, data_dir=tmp_path, calendar_rules=False) as host:
        assert host.plugin.calendar_rules is False
        chat = await host.open("u-1")
        refused = json.loads(await chat.send(WEEKDAYS_AT_9) or "")
        assert refused["code"] == "invalid_selector"
        assert "cron and a time_zone outside at are not supported" in refused["message"]
        tool = host.embedded.tools.get("schedule_create", agent=chat.agent)
        assert tool is not None
        assert "cron" not in json.dumps([tool.description, tool.parameters, tool.output_schema])
    assert stored_changes(tmp_path, "u-1") == []
