"""The OpenAI Agents SDK integration: real SDK runs, a real AsyncHost on SQLite, fake time.

The agent is a real ``agents.Agent`` with Schedule's tools on the kit's scripted
model (an SDK ``ScriptedModel``); its history is the log-backed session. Time
moves only when a test moves it, timer by timer, with the host quiet after each
step, so "not before it is due" is checked on a host that had every chance to
deliver.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from agents import Agent, FunctionTool, Runner, set_tracing_disabled
from agents.models.chatcmpl_converter import Converter
from agents.testing import ModelStep, ScriptedModel, function_call

from host_bridge import openai_tools
from host_bridge._schemas import TOOL_SPECS
from host_bridge.aio import AgentTurn, AsyncHost
from host_bridge.integrations.openai_agents import (
    HISTORY_EVENT,
    HostLogSession,
    schedule_tools,
    turn_runner,
)
from host_bridge.testing import FakeClock, FakeTimers
from host_bridge.testing.openai_agents import ScriptedReminderModel, reminder_request
from tests.integrations.oai_helpers import (
    TIMEOUT,
    Bot,
    advance,
    delivery_counts,
    due_entries,
    settled,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "openai_agents_bot.py"

_T = TypeVar("_T")


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # offline: the SDK would export traces to OpenAI
    yield
    set_tracing_disabled(False)


def run(body: Callable[[], Awaitable[_T]]) -> _T:
    """Run one async test body on a fresh loop, bounded by a generous timeout."""

    async def bounded() -> _T:
        return await asyncio.wait_for(body(), TIMEOUT * 6)

    return asyncio.run(bounded())


def host_on(tmp_path: Path, run_turn: Any, clock: FakeClock) -> tuple[AsyncHost, FakeTimers]:
    timers = FakeTimers(clock)
    return AsyncHost(run_turn, data_dir=tmp_path, clock=clock, timers=timers), timers


def tool_messages(host: AsyncHost, session_id: str) -> list[dict[str, Any]]:
    """The ``message`` events of the session log that record tool calls and results."""
    session = host.embedded.sessions.get(session_id)
    assert session is not None
    return [
        e.data
        for e in session.events
        if e.type == "message" and ("toolCall" in e.data or e.data.get("role") == "tool")
    ]


# --- (a) the tools ------------------------------------------------------------------------


def test_the_tools_keep_the_catalog_schemas_as_they_are() -> None:
    tools = schedule_tools()
    assert [tool.name for tool in tools] == [spec.name for spec in TOOL_SPECS]
    for tool, spec, offered in zip(tools, TOOL_SPECS, openai_tools(), strict=True):
        assert isinstance(tool, FunctionTool)
        assert tool.strict_json_schema is False
        assert tool.description == spec.description
        assert tool.params_json_schema == {
            k: v for k, v in spec.parameters.items() if k != "$schema"
        }
        # what the SDK sends a chat-completions model is the catalog's function, not strict
        assert Converter.tool_to_openai(tool) == {
            "type": "function",
            "function": {**offered["function"], "strict": False},
        }
    create = tools[0]
    assert isinstance(create, FunctionTool)
    assert "additionalProperties" not in create.params_json_schema  # the root stays open
    assert create.params_json_schema["required"] == ["prompt"]


def test_the_strict_tools_are_the_strict_catalog_and_the_sdk_keeps_it() -> None:
    for tool, offered in zip(schedule_tools(strict=True), openai_tools(strict=True), strict=True):
        assert isinstance(tool, FunctionTool)
        assert tool.strict_json_schema is True
        assert tool.params_json_schema == offered["function"]["parameters"]
        assert Converter.tool_to_openai(tool) == offered


def test_the_sdk_default_strict_conversion_would_rewrite_the_open_schema() -> None:
    """Why the tools are not strict by default: every selector would become required."""
    (spec, *_) = TOOL_SPECS
    parameters = {k: v for k, v in spec.parameters.items() if k != "$schema"}

    async def nothing(context: Any, arguments: str) -> str:
        return ""

    rewritten = FunctionTool(spec.name, spec.description, parameters, nothing).params_json_schema
    assert rewritten["additionalProperties"] is False
    assert rewritten["required"] == ["prompt", "after_seconds", "at", "every_seconds"]
    assert rewritten["properties"]["after_seconds"]["type"] == "integer"  # and not nullable


def test_the_models_argument_text_reaches_the_tool_unchanged_and_errors_come_back(
    tmp_path: Path,
) -> None:
    odd = '{"prompt":  "stretch" , "after_seconds": 5}'  # spacing a parser would not keep
    refused = '{"prompt": "stretch", "after_seconds": 5, "cron": "* * * * *"}'
    repeated = '{"prompt": "a", "prompt": "b", "after_seconds": 5}'
    bot = Bot()
    bot.model.extend(
        [
            [function_call("schedule_create", odd, call_id="call_odd")],
            [function_call("schedule_create", refused, call_id="call_refused")],
            [function_call("schedule_create", repeated, call_id="call_repeated")],
        ]
    )

    async def body() -> tuple[list[dict[str, Any]], Any]:
        clock = FakeClock()
        host, _ = host_on(tmp_path, bot, clock)
        async with host:
            chat = await host.open("chat")
            await chat.send("do as scripted")
            return tool_messages(host, "chat"), bot.model.calls

    messages, calls = run(body)
    sent = [m["toolCall"]["arguments"] for m in messages if "toolCall" in m]
    assert sent == [odd, refused, repeated]  # byte for byte what the model sent
    results = [json.loads(m["content"]) for m in messages if m.get("role") == "tool"]
    assert results[0]["id"] == "schedule-1" and results[0]["afterSeconds"] == 5
    assert results[1]["code"] == "invalid_selector"
    assert results[2]["code"] == "invalid_selector"  # a repeated key is refused by the tool
    outputs = [
        item["output"]
        for item in calls[-1].input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert [json.loads(output) for output in outputs] == results  # the model read the errors


def test_strict_tools_normalise_the_models_nulls(tmp_path: Path) -> None:
    nulls = '{"prompt": "stretch", "after_seconds": 5, "at": null, "every_seconds": null}'
    bot = Bot(strict=True)
    bot.model.enqueue([function_call("schedule_create", nulls, call_id="call_strict")])

    async def body() -> list[dict[str, Any]]:
        host, _ = host_on(tmp_path, bot, FakeClock())
        async with host:
            chat = await host.open("chat")
            reply = await chat.send("do as scripted")
            assert reply is not None and reply.startswith("OK, I will remind you to stretch")
            return tool_messages(host, "chat")

    result = json.loads(run(body)[-1]["content"])
    assert result["id"] == "schedule-1" and result["kind"] == "after"


def test_a_tool_called_outside_a_turn_answers_an_error_the_model_reads() -> None:
    model = ScriptedReminderModel([[function_call("schedule_list", "{}", call_id="call_1")]])
    agent: Agent[Any] = Agent(name="assistant", tools=schedule_tools(), model=model)

    async def body() -> Any:
        return await Runner.run(agent, "list my reminders")

    result = run(body)
    (output,) = [
        item
        for item in model.calls[-1].input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert json.loads(output["output"]) == {
        "code": "no_turn",
        "message": "Schedule tools run only inside a host turn; none is running here.",
        "tool": "schedule_list",
    }
    assert "no_turn" in result.final_output


def test_the_scripted_model_understands_simple_reminder_requests() -> None:
    assert reminder_request("remind me in 5 seconds to stretch") == ("stretch", 5)
    assert reminder_request("Remind me to call mom in 2 minutes.") == ("call mom", 120)
    assert reminder_request("remind me in 1 hour, to drink water!") == ("drink water", 3600)
    assert reminder_request("what time is it") is None


# --- (b) on time, once, through the SDK runner; the history holds the reminder turn -----------


def test_a_reminder_is_a_new_sdk_turn_on_time_once_and_in_the_history(tmp_path: Path) -> None:
    bot = Bot()
    clock = FakeClock()

    async def body() -> None:
        host, timers = host_on(tmp_path, bot, clock)
        async with host:
            chat = await host.open("chat")
            reply = await chat.send("remind me in 5 seconds to stretch")
            assert reply == "OK, I will remind you to stretch at 2026-01-01T00:00:05.000Z."
            await advance(timers, 4_999, host)
            assert bot.reminders() == []  # not before it is due
            await advance(timers, 1, host)
            await bot.wait_reminders(1)
            await advance(timers, 60_000, host)
            assert bot.reminders() == ["Reminder: stretch"]  # exactly once
            await chat.send("thanks")
            seen = bot.model.calls[-1].input  # what the SDK gave the model: the history
        texts = [_text(item) for item in seen]
        assert texts[0] == "remind me in 5 seconds to stretch"
        reminder_at = next(i for i, t in enumerate(texts) if t.startswith("[SCHEDULE REMINDER]"))
        assert texts[reminder_at + 1 :] == ["Reminder: stretch", "thanks"]

    run(body)
    assert delivery_counts(tmp_path / "sessions.sqlite3") == {"chat": (1, 1, 1)}


def test_the_log_backed_session_folds_adds_pops_and_clears_across_turns(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def run_turn(turn: AgentTurn) -> str | None:
        session = HostLogSession()  # the current turn's
        assert session.session_id == turn.session_id == "chat"
        if turn.text == "write":
            await session.add_items([{"role": "user", "content": c} for c in ("a", "b", "c")])
            seen["popped"] = await session.pop_item()
            seen["last two"] = await session.get_items(limit=2)
        elif turn.text == "clear":
            seen["before clear"] = await session.get_items()
            await session.clear_session()
            seen["popped empty"] = await session.pop_item()
            await session.add_items([{"role": "user", "content": "d"}])
        elif turn.text == "fail":
            async with session:  # a run that raises keeps its changes (it is not run again)
                await session.add_items([{"role": "user", "content": "e"}])
                raise RuntimeError("the framework failed")
        seen[turn.text] = await session.get_items()
        seen[f"{turn.text} records"] = len(turn.records(HISTORY_EVENT))
        return None

    async def once(*texts: str) -> None:
        host, _ = host_on(tmp_path, run_turn, FakeClock())
        async with host:
            chat = await host.open("chat")
            for text in texts:
                if text == "fail":
                    with pytest.raises(RuntimeError, match="the framework failed"):
                        await chat.send(text)
                else:
                    await chat.send(text)

    run(lambda: once("write"))
    run(lambda: once("clear"))  # a new host: the history comes from the store
    run(lambda: once("read", "fail", "read again"))
    assert seen["popped"] == {"role": "user", "content": "c"}
    assert seen["last two"] == seen["write"] == [_user("a"), _user("b")]
    assert seen["before clear"] == [_user("a"), _user("b")]
    assert seen["popped empty"] is None  # nothing to pop: nothing recorded
    assert seen["clear"] == seen["read"] == [_user("d")]
    assert seen["read records"] == 4  # add, pop, clear, add: an append-only log
    assert seen["read again"] == [_user("d"), _user("e")]
    assert seen["read again records"] == 6  # and the failed run's add and done


# --- (c) a restart ---------------------------------------------------------------------------


def test_a_reminder_pending_at_close_arrives_once_after_a_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    first, second = Bot(), Bot()

    async def before() -> None:
        host, timers = host_on(tmp_path, first, clock)
        async with host:
            chat = await host.open("chat")
            await chat.send("remind me in 30 seconds to stretch")
            await advance(timers, 10_000, host)
        assert first.reminders() == []  # closed with the reminder pending

    async def after() -> Any:
        host, timers = host_on(tmp_path, second, clock)
        async with host:
            await host.open("chat")
            await advance(timers, 19_999, host)
            assert second.reminders() == []
            await advance(timers, 1, host)
            await second.wait_reminders(1)
            await advance(timers, 60_000, host)
            return second.model.calls[-1].input

    run(before)
    seen = run(after)
    assert second.reminders() == ["Reminder: stretch"]
    assert _text(seen[0]) == "remind me in 30 seconds to stretch"
    assert delivery_counts(tmp_path / "sessions.sqlite3") == {"chat": (1, 1, 1)}


# --- (d) a closed chat -----------------------------------------------------------------------


def test_a_closed_chats_reminder_wakes_it_and_runs_an_sdk_turn(tmp_path: Path) -> None:
    bot = Bot()
    clock = FakeClock()

    async def body() -> None:
        host, timers = host_on(tmp_path, bot, clock)
        async with host:
            chat = await host.open("chat")
            await chat.send("remind me in 60 seconds to stretch")
            await chat.close()
            await settled(host)
            assert host.embedded.sessions.list() == ()  # nobody has the session open
            await advance(timers, 59_999, host)
            assert bot.reminders() == []
            assert host.embedded.sessions.list() == ()  # not woken early either
            await advance(timers, 1, host)
            await bot.wait_reminders(1)
            await advance(timers, 60_000, host)
        assert [(r.session_id, r.reply) for r in bot.ran if r.reminder] == [
            ("chat", "Reminder: stretch")
        ]

    run(body)
    assert delivery_counts(tmp_path / "sessions.sqlite3") == {"chat": (1, 1, 1)}
    assert due_entries(tmp_path / "sessions.sqlite3") == {}


# --- (f) the example ---------------------------------------------------------------------------


def test_the_example_is_at_most_40_lines() -> None:
    assert len(EXAMPLE.read_text("utf-8").splitlines()) <= 40


def _bot(data_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1", "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), str(data_dir)],
        cwd=EXAMPLE.parent,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_example_keeps_its_reminder_over_a_restart(tmp_path: Path) -> None:
    first = _bot(tmp_path)
    out, err = first.communicate("remind me in 2 seconds to stretch\n", timeout=TIMEOUT * 3)
    assert first.returncode == 0, err
    assert out.startswith("agent: OK, I will remind you to stretch at ")
    assert "Reminder" not in out  # it ended before the reminder was due

    second = _bot(tmp_path)  # a restart: the same store, the same conversation
    stdout = second.stdout
    assert stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:  # the reminder arrives while the bot waits for input
        assert lines.get(timeout=TIMEOUT * 3) == "agent: Reminder: stretch\n"
    finally:
        rest, err = second.communicate("", timeout=TIMEOUT * 3)  # end of input: it closes
    assert second.returncode == 0, err
    assert rest == ""
    assert delivery_counts(tmp_path / "sessions.sqlite3") == {"chat": (1, 1, 1)}


# --- helpers ---------------------------------------------------------------------------------


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _text(item: Any) -> str:
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return f"<{item.get('type') if isinstance(item, dict) else type(item).__name__}>"


def test_a_reminder_turn_cut_by_a_stop_runs_again_once_at_the_next_start(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    author, second = Bot(), Bot()
    hanging = asyncio.Event()

    async def hang(call: Any) -> Any:
        hanging.set()
        await asyncio.Event().wait()  # the model never answers: the stop cuts the turn

    stuck = turn_runner(
        Agent(
            name="assistant", tools=schedule_tools(), model=ScriptedModel([ModelStep.respond(hang)])
        )
    )

    async def first_run_turn(turn: AgentTurn) -> str | None:
        return await (stuck(turn) if turn.is_reminder else author(turn))

    async def before() -> None:
        timers = FakeTimers(clock)
        host = AsyncHost(
            first_run_turn, data_dir=tmp_path, clock=clock, timers=timers, stop_timeout=0.1
        )
        async with host:
            chat = await host.open("chat")
            await chat.send("remind me in 5 seconds to stretch")
            await asyncio.to_thread(timers.advance, 5_000)
            await asyncio.wait_for(hanging.wait(), TIMEOUT)

    async def after() -> Any:
        host, timers = host_on(tmp_path, second, clock)
        async with host:
            await host.open("chat")
            await second.wait_reminders(1)
            await advance(timers, 60_000, host)
            return second.model.calls[-1].input

    run(before)
    assert delivery_counts(tmp_path / "sessions.sqlite3") == {"chat": (1, 1, 0)}  # cut: owed
    seen = run(after)
    assert second.reminders() == ["Reminder: stretch"]
    texts = [_text(item) for item in seen]
    assert [t.startswith("[SCHEDULE REMINDER]") for t in texts].count(True) == 1  # not twice
    assert texts[-1].startswith("[SCHEDULE REMINDER]")  # the cut run left nothing behind
    assert delivery_counts(tmp_path / "sessions.sqlite3") == {"chat": (1, 1, 1)}
