"""The OpenAI Agents SDK integration: real SDK runs, a real AsyncHost on SQLite, fake time.

The agent is a real ``agents.Agent`` with Schedule's tools on the kit's scripted
model (an SDK ``ScriptedModel``); its history is the log-backed session. Time
moves only when a test moves it, timer by timer with the host settled after
each, so "not before it is due" is checked on a host that had every chance to
deliver. The example and ``serve`` run as real processes on a real clock;
their waits are on output lines, never on sleeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from agents import (
    Agent,
    FunctionTool,
    Runner,
    SessionSettings,
    TResponseInputItem,
    set_tracing_disabled,
)
from agents.models.chatcmpl_converter import Converter
from agents.testing import ModelCall, ModelStep, ScriptedModel, function_call

from host_bridge import openai_tools
from host_bridge._schemas import TOOL_SPECS
from host_bridge.aio import AgentTurn, AsyncHost
from host_bridge.embedded.agents import AgentDisposedError, TurnInterrupted
from host_bridge.integrations.openai_agents import (
    HISTORY_EVENT,
    HostLogSession,
    schedule_tools,
    turn_runner,
)
from host_bridge.testing import FakeClock, FakeTimers, advance_async, settle_async
from host_bridge.testing.openai_agents import ScriptedReminderModel, reminder_request
from tests.cli.helpers import Proc
from tests.integrations.oai_helpers import (
    TIMEOUT,
    Bot,
    delivery_counts,
    owed,
    stored_history,
    text_of,
)
from tests.integrations.otel_helpers import CALL_ID, Spans, attributes, traced_host

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"
EXAMPLE = EXAMPLES / "openai_agents_bot.py"
FRAMING = "[SCHEDULE REMINDER]"


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # offline: the SDK would export traces to OpenAI
    yield
    set_tracing_disabled(False)


def fake_time_host(
    data_dir: Path, run_turn: Any, clock: FakeClock, *, calendar_rules: bool = True
) -> tuple[AsyncHost, FakeTimers]:
    timers = FakeTimers(clock)
    host = AsyncHost(
        run_turn, data_dir=data_dir, clock=clock, timers=timers, calendar_rules=calendar_rules
    )
    return host, timers


async def advance(host: AsyncHost, timers: FakeTimers, ms: int) -> None:
    await advance_async(host, timers, ms, timeout=TIMEOUT)


def tool_messages(host: AsyncHost, session_id: str) -> list[dict[str, Any]]:
    """The ``message`` events of the session log that record tool calls and results."""
    session = host.embedded.sessions.get(session_id)
    assert session is not None
    return [
        e.data
        for e in session.events
        if e.type == "message" and ("toolCall" in e.data or e.data.get("role") == "tool")
    ]


def outputs_seen(model: ScriptedModel) -> list[Any]:
    """The tool outputs the model's last call received, decoded."""
    last = model.last_call
    assert last is not None and isinstance(last.input, list)
    return [
        json.loads(item["output"])
        for item in last.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


# --- (a) the tools ----------------------------------------------------------------------------


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
        # what the SDK sends a chat-completions model: the catalog's function, not strict
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


def test_the_sdks_default_strict_conversion_would_rewrite_the_open_schema() -> None:
    """Why the tools are not strict by default: every selector would become required."""
    spec = TOOL_SPECS[0]
    parameters = {k: v for k, v in spec.parameters.items() if k != "$schema"}

    async def nothing(context: Any, arguments: str) -> str:
        return ""

    rewritten = FunctionTool(spec.name, spec.description, parameters, nothing).params_json_schema
    assert rewritten["additionalProperties"] is False
    assert rewritten["required"] == ["prompt", "after_seconds", "at", "every_seconds", "cron"]
    assert rewritten["properties"]["after_seconds"]["type"] == "integer"  # and not nullable


async def test_the_models_argument_text_reaches_the_tool_unchanged_and_errors_come_back(
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
    host, _ = fake_time_host(tmp_path, bot, FakeClock())
    async with host:
        chat = await host.open("chat")
        reply = await chat.send("do as scripted")
        messages = tool_messages(host, "chat")
    sent = [m["toolCall"]["arguments"] for m in messages if "toolCall" in m]
    assert sent == [odd, refused, repeated]  # byte for byte what the model sent
    results = [json.loads(m["content"]) for m in messages if m.get("role") == "tool"]
    assert results[0]["id"] == "schedule-1" and results[0]["afterSeconds"] == 5
    assert results[1]["code"] == "invalid_selector"
    assert results[2]["code"] == "invalid_selector"  # the tool refuses a repeated key
    assert outputs_seen(bot.model) == results  # the model read every result, errors too
    assert reply == "I could not set that reminder: invalid_selector."


async def test_strict_tools_normalise_the_models_nulls(tmp_path: Path) -> None:
    nulls = '{"prompt": "stretch", "after_seconds": 5, "at": null, "every_seconds": null}'
    bot = Bot(strict=True)
    bot.model.enqueue([function_call("schedule_create", nulls, call_id="call_strict")])
    host, _ = fake_time_host(tmp_path, bot, FakeClock())
    async with host:
        chat = await host.open("chat")
        reply = await chat.send("do as scripted")
    assert reply == "OK, I will remind you to stretch at 2026-01-01T00:00:05.000Z."
    (result,) = outputs_seen(bot.model)
    assert result["id"] == "schedule-1" and result["kind"] == "after"


@pytest.mark.parametrize("strict", [False, True], ids=["open", "strict"])
def test_the_tools_without_calendar_rules_are_that_catalog_and_never_mention_cron(
    strict: bool,
) -> None:
    tools = schedule_tools(strict=strict, calendar_rules=False)
    offered = openai_tools(strict=strict, calendar_rules=False)
    for tool, function in zip(tools, offered, strict=True):
        assert isinstance(tool, FunctionTool)
        assert tool.description == function["function"]["description"]
        assert tool.params_json_schema == function["function"]["parameters"]
        assert "cron" not in json.dumps([tool.description, tool.params_json_schema]).lower()
    (create,) = [t for t in schedule_tools(strict=strict) if t.name == "schedule_create"]
    assert isinstance(create, FunctionTool) and "cron" in create.params_json_schema["properties"]


CRON_CALL = '{"prompt": "standup", "cron": {"expression": "0 9 * * 1-5", "time_zone": "UTC"}}'
STRICT_CRON = json.dumps(
    {
        "prompt": "standup",
        "after_seconds": None,
        "at": None,
        "every_seconds": None,
        "cron": {"expression": "0 9 * * 1-5", "time_zone": "UTC"},
    }
)


@pytest.mark.parametrize(
    ("strict", "calendar_rules", "sent", "answer"),
    [
        (False, True, CRON_CALL, "OK, I will remind you to standup at 2026-01-01T09:00:00.000Z."),
        (True, True, STRICT_CRON, "OK, I will remind you to standup at 2026-01-01T09:00:00.000Z."),
        (False, False, CRON_CALL, "I could not set that reminder: invalid_selector."),
        (  # this catalog has no cron, so the normaliser keeps a null one for the tool to refuse
            True,
            False,
            '{"prompt": "p", "after_seconds": 5, "at": null, "cron": null}',
            "I could not set that reminder: invalid_selector.",
        ),
    ],
    ids=["open", "strict", "without-cron", "without-cron-strict-null"],
)
async def test_a_cron_call_through_the_sdk_is_the_hosts_to_accept_or_refuse(
    tmp_path: Path, strict: bool, calendar_rules: bool, sent: str, answer: str
) -> None:
    bot = Bot(strict=strict, calendar_rules=calendar_rules)
    bot.model.enqueue([function_call("schedule_create", sent, call_id="call_cron")])
    host, _ = fake_time_host(tmp_path, bot, FakeClock(), calendar_rules=calendar_rules)
    async with host:
        chat = await host.open("chat")
        reply = await chat.send("do as scripted")
        creates = [e for e in chat.agent.session.events if e.type == "schedule/change"]
    (result,) = outputs_seen(bot.model)
    assert reply == answer
    if calendar_rules:
        assert (result["kind"], result["expression"], result["timeZone"]) == (
            "cron",
            "0 9 * * 1-5",
            "UTC",
        )
        assert len(creates) == 1
    else:
        assert result["code"] == "invalid_selector"
        assert creates == []


async def test_a_tool_called_outside_a_turn_answers_an_error_the_model_reads() -> None:
    model = ScriptedReminderModel([[function_call("schedule_list", "{}", call_id="call_1")]])
    agent: Agent[Any] = Agent(name="assistant", tools=schedule_tools(), model=model)
    result = await Runner.run(agent, "list my reminders")
    assert outputs_seen(model) == [
        {
            "code": "no_turn",
            "message": "Schedule tools run only inside a host turn; none is running here.",
            "tool": "schedule_list",
        }
    ]
    assert result.final_output == "I could not set that reminder: no_turn."


def test_the_scripted_model_understands_simple_reminder_requests() -> None:
    assert reminder_request("remind me in 5 seconds to stretch") == ("stretch", 5)
    assert reminder_request("Remind me to call mom in 2 minutes.") == ("call mom", 120)
    assert reminder_request("remind me in 1 hour, to drink water!") == ("drink water", 3600)
    assert reminder_request("what time is it") is None


# --- (b) on time, once, through the SDK runner; the history holds the reminder turn -----------


async def test_a_reminder_is_a_new_sdk_turn_on_time_once_and_in_the_history(
    tmp_path: Path,
) -> None:
    bot = Bot()
    host, timers = fake_time_host(tmp_path, bot, FakeClock())
    async with host:
        chat = await host.open("chat")
        reply = await chat.send("remind me in 5 seconds to stretch")
        assert reply == "OK, I will remind you to stretch at 2026-01-01T00:00:05.000Z."
        await advance(host, timers, 4_999)
        assert bot.reminders() == []  # not before it is due
        await advance(host, timers, 1)
        await bot.wait_reminders(1)
        await advance(host, timers, 60_000)
        assert bot.reminders() == ["Reminder: stretch"]  # exactly once
        await chat.send("thanks")
        last = bot.model.last_call  # what the SDK gave the model: the session's history
    assert last is not None
    texts = [text_of(item) for item in last.input]
    assert texts[0] == "remind me in 5 seconds to stretch"
    at = next(i for i, text in enumerate(texts) if text.startswith(FRAMING))
    assert texts[at + 1 :] == ["Reminder: stretch", "thanks"]
    assert delivery_counts(tmp_path) == {"chat": (1, 1, 1)}


async def test_the_log_backed_session_folds_adds_pops_and_clears_across_hosts(
    tmp_path: Path,
) -> None:
    seen: dict[str, Any] = {}

    async def run_turn(turn: AgentTurn) -> str | None:
        session = HostLogSession()  # the current turn's
        assert session.session_id == turn.session_id == "chat"
        if turn.text == "write":
            await session.add_items([user(c) for c in ("a", "b", "c")])
            seen["popped"] = await session.pop_item()
            seen["last two"] = await session.get_items(limit=2)
        elif turn.text == "clear":
            seen["before clear"] = await session.get_items()
            await session.clear_session()
            seen["popped empty"] = await session.pop_item()
            await session.add_items([user("d")])
        elif turn.text == "read again":
            limited = HostLogSession(session_settings=SessionSettings(limit=1))
            seen["limited"] = await limited.get_items()
            seen["limit wins"] = await limited.get_items(limit=2)
        elif turn.text == "fail":  # a run that raises keeps its changes (it is not run again)
            await session.add_items([user("e")])
            raise RuntimeError("the framework failed")
        seen[turn.text] = await session.get_items()
        seen[f"{turn.text} records"] = len(turn.records(HISTORY_EVENT))
        return None

    for texts in (["write"], ["clear"], ["read", "fail", "read again"]):  # a new host each
        host, _ = fake_time_host(tmp_path, run_turn, FakeClock())
        async with host:
            chat = await host.open("chat")
            for text in texts:
                if text == "fail":
                    with pytest.raises(RuntimeError, match="the framework failed"):
                        await chat.send(text)
                else:
                    await chat.send(text)
    assert seen["popped"] == user("c")
    assert seen["last two"] == seen["write"] == [user("a"), user("b")]
    assert seen["before clear"] == [user("a"), user("b")]
    assert seen["popped empty"] is None  # nothing to pop: nothing recorded
    assert seen["clear"] == seen["read"] == [user("d")]
    assert seen["read records"] == 4  # add, pop, clear, add: an append-only log
    assert seen["read again"] == [user("d"), user("e")]
    assert seen["read again records"] == 5  # and the failed run's add
    assert seen["limited"] == [user("e")]
    assert seen["limit wins"] == [user("d"), user("e")]


async def test_a_session_kept_across_turns_follows_the_running_turn_and_hands_out_copies(
    tmp_path: Path,
) -> None:
    kept: dict[str, HostLogSession] = {}  # one SDK session per chat, as SDK users keep them
    cut = asyncio.Event()
    seen: list[list[TResponseInputItem]] = []

    async def run_turn(turn: AgentTurn) -> str | None:
        session = kept.setdefault(turn.session_id, HostLogSession())
        seen.append(await session.get_items())
        await session.add_items([user(turn.text)])
        if turn.text == "hangs" and not cut.is_set():
            cut.set()
            await asyncio.Event().wait()  # cut by the stop below: its add must not count
        mine = await session.get_items()
        newest: dict[str, Any] = dict(mine[-1])  # (a TypedDict union for the type checker)
        newest["content"] = "changed by the caller"
        mine[-1] = cast(TResponseInputItem, newest)  # the list is a fresh copy: the log is not
        cast(dict[str, Any], mine[0])["content"] = "changed too"  # nor are its items
        return None

    host = AsyncHost(run_turn, data_dir=tmp_path, stop_timeout=0.0)
    await host.start()
    chat = await host.open("chat")
    await chat.send("first")
    sending = asyncio.ensure_future(chat.send("hangs"))
    await asyncio.wait_for(cut.wait(), 20)
    await host.aclose()
    with pytest.raises((TurnInterrupted, AgentDisposedError)):  # the stop cut it
        await sending
    kept.clear()
    async with AsyncHost(run_turn, data_dir=tmp_path) as again:
        chat = await again.open("chat")
        await asyncio.wait_for(chat.when_idle(), 20)  # the cut turn runs again
        await chat.send("third")
    assert seen == [[], [user("first")], [user("first")], [user("first"), user("hangs")]]
    outside = kept["chat"]
    with pytest.raises(RuntimeError, match="changes only in one of its turns"):
        await outside.add_items([user("outside a turn")])


async def test_limits_count_as_the_sdks_sqlite_session_does(tmp_path: Path) -> None:
    got: dict[int, list[TResponseInputItem]] = {}

    async def run_turn(turn: AgentTurn) -> str | None:
        session = HostLogSession()
        await session.add_items([user(c) for c in "abc"])
        for limit in (0, 2, -1):
            got[limit] = await session.get_items(limit=limit)
        return None

    async with AsyncHost(run_turn, data_dir=tmp_path) as host:
        await (await host.open("chat")).send("go")
    assert got == {0: [], 2: [user("b"), user("c")], -1: [user(c) for c in "abc"]}


def test_turn_runner_refuses_a_session_of_the_callers() -> None:
    with pytest.raises(TypeError, match="HostLogSession"):
        turn_runner(Agent(name="a", model=ScriptedReminderModel()), session=object())


def test_the_tools_schemas_are_fresh_objects_every_time() -> None:
    first = schedule_tools()[0]
    assert isinstance(first, FunctionTool)
    first.params_json_schema["properties"]["prompt"]["maxLength"] = 1
    again = schedule_tools()[0]
    assert isinstance(again, FunctionTool)
    assert again.params_json_schema["properties"]["prompt"]["maxLength"] != 1
    assert openai_tools()[0]["function"]["parameters"]["properties"]["prompt"]["maxLength"] != 1


# --- (c) a restart ----------------------------------------------------------------------------


async def test_a_reminder_pending_at_close_arrives_once_after_a_restart(tmp_path: Path) -> None:
    clock = FakeClock()
    first, second = Bot(), Bot()
    host, timers = fake_time_host(tmp_path, first, clock)
    async with host:
        chat = await host.open("chat")
        await chat.send("remind me in 30 seconds to stretch")
        await advance(host, timers, 10_000)
    assert first.reminders() == []  # closed with the reminder pending

    host, timers = fake_time_host(tmp_path, second, clock)  # the same store, a new process
    async with host:
        await host.open("chat")
        await advance(host, timers, 19_999)
        assert second.reminders() == []
        await advance(host, timers, 1)
        await second.wait_reminders(1)
        await advance(host, timers, 60_000)
    assert second.reminders() == ["Reminder: stretch"]
    last = second.model.last_call
    assert last is not None  # the history the reminder's run saw came from the store
    assert text_of(last.input[0]) == "remind me in 30 seconds to stretch"
    assert delivery_counts(tmp_path) == {"chat": (1, 1, 1)}


async def test_a_reminder_turn_cut_by_a_stop_runs_again_once_without_a_duplicate(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    author, second = Bot(), Bot()
    hanging = asyncio.Event()

    async def hang(call: ModelCall) -> Any:
        hanging.set()
        await asyncio.Event().wait()  # the model never answers: the stop cuts the turn

    model = ScriptedModel([ModelStep.respond(hang)])
    stuck = turn_runner(Agent(name="assistant", tools=schedule_tools(), model=model))

    async def first_runner(turn: AgentTurn) -> str | None:
        return await (stuck(turn) if turn.is_reminder else author(turn))

    timers = FakeTimers(clock)
    first = AsyncHost(first_runner, data_dir=tmp_path, clock=clock, timers=timers, stop_timeout=1.0)
    async with first:
        chat = await first.open("chat")
        await chat.send("remind me in 5 seconds to stretch")
        await settle_async(first, timeout=TIMEOUT)
        timers.advance(5_000)
        await asyncio.wait_for(hanging.wait(), TIMEOUT)
    assert delivery_counts(tmp_path) == {"chat": (1, 1, 0)}  # cut: still owed

    host, timers = fake_time_host(tmp_path, second, clock)
    async with host:  # the next start wakes the session for the turn it owes
        await second.wait_reminders(1)
        await advance(host, timers, 60_000)
    assert second.reminders() == ["Reminder: stretch"]
    assert delivery_counts(tmp_path) == {"chat": (1, 1, 1)}
    texts = [text_of(item) for item in await stored_history(tmp_path, "chat")]
    assert [t.startswith(FRAMING) for t in texts].count(True) == 1  # the cut run left nothing
    assert texts[-2:] == [texts[-2], "Reminder: stretch"] and texts[-2].startswith(FRAMING)


# --- (d) a closed chat ------------------------------------------------------------------------


async def test_a_closed_chats_reminder_wakes_it_and_runs_an_sdk_turn(tmp_path: Path) -> None:
    bot = Bot()
    host, timers = fake_time_host(tmp_path, bot, FakeClock())
    async with host:
        chat = await host.open("chat")
        await chat.send("remind me in 60 seconds to stretch")
        await chat.close()
        await settle_async(host, timeout=TIMEOUT)
        assert host.embedded.sessions.list() == ()  # nobody has the session open
        await advance(host, timers, 59_999)
        assert bot.reminders() == []
        assert host.embedded.sessions.list() == ()  # not woken early either
        await advance(host, timers, 1)
        await bot.wait_reminders(1)
        await advance(host, timers, 60_000)
    assert [(r.session_id, r.reply) for r in bot.ran if r.reminder] == [
        ("chat", "Reminder: stretch")
    ]
    assert delivery_counts(tmp_path) == {"chat": (1, 1, 1)}
    assert owed(tmp_path) == {}


async def test_on_postgresql_the_history_and_the_reminder_share_the_store(
    tmp_path: Path, pg_url: str
) -> None:
    clock = FakeClock()
    first, second, third = Bot(), Bot(), Bot()
    async with AsyncHost(first, store=pg_url, data_dir=tmp_path, clock=clock, wake=False) as one:
        chat = await one.open("chat")
        await chat.send("remind me in 60 seconds to stretch")
        await chat.close()
    timers = FakeTimers(clock)
    async with AsyncHost(
        second, store=pg_url, data_dir=tmp_path, clock=clock, timers=timers
    ) as two:
        await advance(two, timers, 60_000)  # another process wakes the closed chat
        await second.wait_reminders(1)
    async with AsyncHost(third, store=pg_url, data_dir=tmp_path, clock=clock) as three:
        await (await three.open("chat")).send("thanks")
    assert second.reminders() == ["Reminder: stretch"]
    last = third.model.last_call
    assert last is not None
    texts = [text_of(item) for item in last.input]
    assert texts[0] == "remind me in 60 seconds to stretch"
    assert texts[-3].startswith(FRAMING) and texts[-2:] == ["Reminder: stretch", "thanks"]


# --- the example, and serve with its runner (real processes, the real clock) ------------------


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """``$DSH_SCHEDULE_HOME`` of ``serve``; given ``--data``, it must stay unused."""
    default = tmp_path / "default-home"
    yield default
    assert not default.exists(), "serve wrote to the default data dir despite --data"


def example_env() -> dict[str, str]:
    path = os.pathsep.join([str(EXAMPLES), str(REPO)])  # the example's module; this checkout
    return {"PYTHONPATH": path, "OPENAI_AGENTS_DISABLE_TRACING": "1"}


def start_example(data_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), str(data_dir)],
        cwd=EXAMPLES,
        env={**os.environ, **example_env()},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def closed_chat(data_dir: Path, seconds: int) -> None:
    """The example's first run: a person asks for a reminder, and the chat ends before it is due."""
    first = start_example(data_dir)
    out, err = first.communicate(f"remind me in {seconds} seconds to stretch\n", TIMEOUT * 3)
    assert first.returncode == 0, err
    assert out.startswith("agent: OK, I will remind you to stretch at ")
    assert "Reminder" not in out


def serve(procs: list[Proc], data_dir: Path, home: Path, runner: str) -> Proc:
    args = ["-m", "host_bridge.cli", "serve", "--data", str(data_dir), "--turn-runner", runner]
    proc = Proc(args, home, example_env())
    procs.append(proc)
    proc.wait_line("serving ")
    return proc


def test_the_example_is_at_most_40_lines() -> None:
    assert len(EXAMPLE.read_text("utf-8").splitlines()) <= 40


def test_the_example_keeps_its_reminder_over_a_restart(tmp_path: Path) -> None:
    closed_chat(tmp_path, 2)
    second = start_example(tmp_path)  # a restart: the same store, the same conversation
    stdout = second.stdout
    assert stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:  # the reminder arrives while the bot waits for input
        line = lines.get(timeout=TIMEOUT * 3)
    finally:
        rest, err = second.communicate("", timeout=TIMEOUT * 3)  # end of input: it closes
    assert line == "agent: Reminder: stretch\n", err
    assert second.returncode == 0, err
    assert rest == ""
    assert delivery_counts(tmp_path) == {"chat": (1, 1, 1)}


async def test_serve_with_the_examples_runner_delivers_a_closed_chats_reminder(
    tmp_path: Path, home: Path, procs: list[Proc]
) -> None:
    await asyncio.to_thread(closed_chat, tmp_path, 1)
    proc = serve(procs, tmp_path, home, "openai_agents_bot:run_turn")
    proc.wait_line("agent: Reminder: stretch")  # the SDK turn's reply, printed by the runner
    proc.wait_line("reminder schedule-1 of session chat")
    assert proc.stop() == 0
    assert delivery_counts(tmp_path) == {"chat": (1, 1, 1)}
    texts = [text_of(item) for item in await stored_history(tmp_path, "chat")]
    assert texts[0] == "remind me in 1 seconds to stretch"
    assert texts[-1] == "Reminder: stretch" and texts[-2].startswith(FRAMING)


# --- (e) SIGKILL in the middle of the reminder's SDK turn --------------------------------------


async def test_a_sigkill_during_the_sdk_turn_presents_the_reminder_again_once(
    tmp_path: Path, home: Path, procs: list[Proc]
) -> None:
    await asyncio.to_thread(closed_chat, tmp_path, 1)
    paused = serve(procs, tmp_path, home, "tests.integrations.oai_pausing_bot:run_turn")
    paused.wait_line("PAUSED in the model")  # the reminder's turn is inside the SDK run
    assert paused.stop(signal.SIGKILL) == -signal.SIGKILL
    assert not [line for line in paused.out if " reminder " in line]

    again = serve(procs, tmp_path, home, "openai_agents_bot:run_turn")
    again.wait_line("reminder schedule-1 of session chat")
    assert again.stop() == 0
    assert [line for line in again.out if line.startswith("agent:")] == ["agent: Reminder: stretch"]
    assert delivery_counts(tmp_path) == {"chat": (1, 1, 1)}  # one dispatch: presented again
    assert owed(tmp_path) == {}
    texts = [text_of(item) for item in await stored_history(tmp_path, "chat")]
    assert [t.startswith(FRAMING) for t in texts].count(True) == 1  # no trace of the cut run
    assert texts[-1] == "Reminder: stretch"


# --- helpers ----------------------------------------------------------------------------------


def user(text: str) -> TResponseInputItem:
    return {"role": "user", "content": text}


# --- the model's tool-call id on the tool spans -----------------------------------------------


async def test_the_tool_spans_carry_the_models_tool_call_ids(tmp_path: Path) -> None:
    spans = Spans()
    bot = Bot()
    bot.model.enqueue([function_call("schedule_list", "{}", call_id="call_MODEL_abc123")])
    async with traced_host(bot, tmp_path, spans) as host:
        chat = await host.open("chat")
        assert await chat.send("list them") == 'The tool answered: {"schedules":[]}'
        reply = await chat.send("remind me in 5 seconds to stretch")
        assert reply is not None and reply.startswith("OK, I will remind you to stretch")
        last = bot.model.last_call
        assert last is not None and isinstance(last.input, list)
        called = [  # the history's calls: the scripted one, then one the model made an id for
            item["call_id"]
            for item in last.input
            if isinstance(item, dict) and item.get("type") == "function_call"
        ]
        assert len(called) == 2 and called[0] == "call_MODEL_abc123"
        created_by = called[1]
    (listed,) = spans.named("execute_tool schedule_list", "dsh_schedule")
    (created,) = spans.named("execute_tool schedule_create", "dsh_schedule")
    assert attributes(listed)[CALL_ID] == "call_MODEL_abc123"
    assert attributes(created)[CALL_ID] == created_by
    spans.tracers.shutdown()
