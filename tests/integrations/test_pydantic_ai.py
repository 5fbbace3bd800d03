"""The Pydantic AI integration: real agents on scripted FunctionModels, a real AsyncHost and store.

Time is the kit's fake clock; waits are on the host settling or on a turn
finishing, bounded by a timeout that only catches failures.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

import pydantic
import pytest
from pydantic_ai import Agent, ModelMessagesTypeAdapter
from pydantic_ai.capabilities import Hooks
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import ToolDefinition

from host_bridge._schemas import TOOL_SPECS, tool_specs
from host_bridge.aio import AgentTurn, AsyncHost, TurnRunner
from host_bridge.embedded.inbox import (
    INBOX_EVENT,
    TURN_COMPLETED_EVENT,
    completed_data,
    queued_data,
)
from host_bridge.integrations.pydantic_ai import (
    MESSAGES_RECORD,
    ScheduleToolset,
    history,
    remember,
    turn_runner,
)
from host_bridge.protocols import TextBlock, UserMessage, wall_clock_ms
from host_bridge.testing import FakeClock, FakeTimers, advance_async, settle_async
from tests.cli.helpers import Proc, create, write_session
from tests.integrations.otel_helpers import CALL_ID, Spans, attributes, is_child, traced_host
from tests.integrations.pai_hanging import PAUSED
from tests.integrations.pai_helpers import (
    EXAMPLES,
    HERE,
    Bot,
    Deliveries,
    deliveries,
    nothing_owed,
    prompts_seen,
    recorded_runs,
    stored_events,
    tool_calls,
    tool_results,
)
from tests.integrations.pai_helpers import child as pai_child

SPECS = {spec.name: spec for spec in TOOL_SPECS}


def run(scenario: Coroutine[Any, Any, None]) -> None:
    """Run one test's scenario on a fresh loop."""
    asyncio.run(scenario)


def fake_time_host(
    run_turn: TurnRunner, data_dir: Path, clock: FakeClock, *, calendar_rules: bool = True
) -> AsyncHost:
    """An AsyncHost on ``data_dir`` whose time moves only when the test moves it."""
    timers = FakeTimers(clock)
    return AsyncHost(
        run_turn, data_dir=data_dir, clock=clock, timers=timers, calendar_rules=calendar_rules
    )


def text_of(part: ToolReturnPart) -> str:
    """A tool return's content, which the Schedule tools always give as text."""
    assert isinstance(part.content, str), part
    return part.content


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """The tool returns in ``messages``, in order."""
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def scripted(*responses: list[Any]) -> tuple[FunctionModel, list[list[ModelMessage]]]:
    """A FunctionModel answering each request with the next parts (then ``done``)."""
    seen: list[list[ModelMessage]] = []
    left = list(responses)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=left.pop(0) if left else [TextPart("done")])

    return FunctionModel(model), seen


# --- the tools the model sees and the calls it makes ----------------------------------------


def definitions(toolset: ScheduleToolset | None = None) -> list[ToolDefinition]:
    """The tool definitions an agent with the toolset hands its model."""
    offered: list[ToolDefinition] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.extend(info.function_tools)
        return ModelResponse(parts=[TextPart("hello")])

    agent = Agent(FunctionModel(model), toolsets=[toolset or ScheduleToolset()])
    assert agent.run_sync("hi").output == "hello"
    return offered


def test_the_model_gets_the_catalog_tools_with_their_schemas_never_strict() -> None:
    offered = definitions()
    assert [tool.name for tool in offered] == [spec.name for spec in TOOL_SPECS]
    for tool in offered:
        spec = SPECS[tool.name]
        assert tool.description == spec.description
        assert tool.parameters_json_schema == spec.parameters
        assert tool.parameters_json_schema is not spec.parameters  # a copy the model may change
        assert tool.strict is False
        assert tool.sequential is True  # calls run in the model's order


def test_without_calendar_rules_the_model_gets_that_catalog_and_no_cron() -> None:
    offered = definitions(ScheduleToolset(calendar_rules=False))
    specs = tool_specs(calendar_rules=False)
    assert [tool.name for tool in offered] == [spec.name for spec in specs]
    for tool, spec in zip(offered, specs, strict=True):
        assert (tool.description, tool.parameters_json_schema) == (
            spec.description,
            spec.parameters,
        )
        assert "cron" not in json.dumps([tool.description, tool.parameters_json_schema]).lower()
    assert "cron" in definitions()[0].parameters_json_schema["properties"]


CRON = {"prompt": "standup", "cron": {"expression": "0 9 * * 1-5", "time_zone": "Asia/Shanghai"}}


@pytest.mark.parametrize("calendar_rules", [True, False], ids=["cron", "without-cron"])
def test_a_cron_call_is_the_hosts_to_accept_or_refuse(tmp_path: Path, calendar_rules: bool) -> None:
    model, seen = scripted([ToolCallPart("schedule_create", CRON, tool_call_id="call-cron")])
    toolset = ScheduleToolset(calendar_rules=calendar_rules)
    runner = turn_runner(Agent(model, toolsets=[toolset]))

    async def scenario() -> None:
        host = fake_time_host(runner, tmp_path, FakeClock(), calendar_rules=calendar_rules)
        async with host:
            chat = await host.open("chat")
            assert await chat.send("go") == "done"
            (answered,) = returns(seen[1])
            value = json.loads(text_of(answered))
            changes = [e for e in chat.agent.session.events if e.type == "schedule/change"]
            if calendar_rules:
                assert (value["kind"], value["timeZone"]) == ("cron", "Asia/Shanghai")
                assert value["scheduledAt"] == "2026-01-01T01:00:00.000Z"
                assert len(changes) == 1
            else:
                assert value["code"] == "invalid_selector"
                assert changes == []

    run(scenario())


@pytest.mark.parametrize("model_class", [OpenAIChatModel, OpenAIResponsesModel])
def test_an_openai_model_sends_the_schemas_open_and_not_strict(
    model_class: type[OpenAIChatModel] | type[OpenAIResponsesModel],
) -> None:
    model: Model = model_class("gpt-4.1", provider=OpenAIProvider(api_key="offline"))
    offered = definitions()
    sent = model.customize_request_parameters(ModelRequestParameters(function_tools=offered))
    for tool in sent.function_tools:
        assert tool.strict is False
        open_schema = {k: v for k, v in SPECS[tool.name].parameters.items() if k != "$schema"}
        assert tool.parameters_json_schema == open_schema  # no additionalProperties: false
    # What strict=False prevents: left to infer, the model closes every root (and recent
    # Pydantic AI versions send schedule_delete as strict).
    inferred = [dataclasses.replace(tool, strict=None) for tool in offered]
    guessed = model.customize_request_parameters(ModelRequestParameters(function_tools=inferred))
    assert all(
        t.parameters_json_schema.get("additionalProperties") is False
        for t in guessed.function_tools
    )


def test_outside_a_turn_a_call_fails_with_a_message_the_model_reads() -> None:
    model, seen = scripted([ToolCallPart("schedule_list", {})])
    result = Agent(model, toolsets=[ScheduleToolset()]).run_sync("what is scheduled?")
    assert result.output == "done"  # the run went on
    (failed,) = returns(result.new_messages())
    assert failed.outcome == "failed"
    assert "not part of a Schedule turn" in text_of(failed)
    assert "no reminder was created" in text_of(failed)
    assert returns(seen[1]) == [failed]  # the model was told


NAN = '{"prompt":"a","after_seconds":NaN}'
ARGUMENTS: list[tuple[Any, Any, str | None]] = [
    # (what the model sends, what the tool receives, the error code it answers)
    ('{"prompt":"stretch","after_seconds":60}', '{"prompt":"stretch","after_seconds":60}', None),
    (  # the model's text reaches the tools, whose strict decoding refuses a repeated key
        '{"prompt":"a","prompt":"b","after_seconds":60}',
        '{"prompt":"a","prompt":"b","after_seconds":60}',
        "invalid_selector",
    ),
    (NAN, NAN, "invalid_selector"),
    (
        {"prompt": "stretch", "after_seconds": 60, "time_zone": "UTC"},
        {"prompt": "stretch", "after_seconds": 60, "time_zone": "UTC"},
        "invalid_selector",  # the open root let the unknown key through to the tool
    ),
    (
        {"prompt": "stretch", "after_seconds": 60, "cron": "*/5 * * * *"},
        {"prompt": "stretch", "after_seconds": 60, "cron": "*/5 * * * *"},
        "invalid_selector",  # two selectors
    ),
    (
        {"prompt": "water", "after_seconds": None, "every_seconds": 1800},
        {"prompt": "water", "after_seconds": None, "every_seconds": 1800},
        "invalid_selector",  # the null is kept, and counts toward "exactly one" selector
    ),
    ("[1]", [1], "invalid_selector"),  # not an object: decoded, still the tool's to answer
    ({"prompt": "", "after_seconds": 60}, {"prompt": "", "after_seconds": 60}, "invalid_prompt"),
]


def test_arguments_reach_the_tool_as_sent_and_its_errors_reach_the_model(tmp_path: Path) -> None:
    calls = [
        ToolCallPart("schedule_create", sent, tool_call_id=f"call-{i}")
        for i, (sent, _, _) in enumerate(ARGUMENTS)
    ]
    model, seen = scripted(calls)
    runner = turn_runner(Agent(model, toolsets=[ScheduleToolset()]))
    clock = FakeClock()

    async def scenario() -> None:
        async with fake_time_host(runner, tmp_path, clock) as host:
            chat = await host.open("chat")
            assert await chat.send("go") == "done"
            events = chat.agent.session.events
            assert [c["arguments"] for c in tool_calls(events)] == [r for _, r, _ in ARGUMENTS]
            answered = returns(seen[1])
            assert [p.tool_call_id for p in answered] == [c.tool_call_id for c in calls]
            logged = [result["content"] for result in tool_results(events)]
            assert [p.content for p in answered] == logged  # the tools' own rendering
            codes = [json.loads(text_of(p)).get("code") for p in answered]
            assert codes == [code for _, _, code in ARGUMENTS]
            assert all(p.outcome == "success" for p in answered)  # errors are ordinary values

    run(scenario())


@pytest.mark.parametrize("in_place", [True, False], ids=["changed in place", "replaced"])
def test_arguments_a_hook_changed_reach_the_tool_as_changed(tmp_path: Path, in_place: bool) -> None:
    async def later(ctx: Any, *, call: Any, tool_def: Any, args: Any) -> Any:
        if in_place:
            args["after_seconds"] = 120
            return args
        return {**args, "after_seconds": 120}

    sent = '{"prompt":"stretch","after_seconds":60}'
    model, _ = scripted([ToolCallPart("schedule_create", sent)])
    hooks = Hooks[Any](after_tool_validate=later)
    agent = Agent(model, toolsets=[ScheduleToolset()], capabilities=[hooks])
    clock = FakeClock()

    async def scenario() -> None:
        async with fake_time_host(turn_runner(agent), tmp_path, clock) as host:
            chat = await host.open("chat")
            assert await chat.send("go") == "done"
            (call,) = tool_calls(chat.agent.session.events)
            assert call["arguments"] == {"prompt": "stretch", "after_seconds": 120}

    run(scenario())


def test_argument_text_that_is_not_json_gets_pydantic_ais_retry_prompt(tmp_path: Path) -> None:
    model, seen = scripted([ToolCallPart("schedule_create", "{not json", tool_call_id="bad")])
    runner = turn_runner(Agent(model, toolsets=[ScheduleToolset()]))
    clock = FakeClock()

    async def scenario() -> None:
        async with fake_time_host(runner, tmp_path, clock) as host:
            chat = await host.open("chat")
            assert await chat.send("go") == "done"
            assert tool_calls(chat.agent.session.events) == []  # never reached the tool
            (retry,) = seen[1][-1].parts  # its class depends on the Pydantic AI version
            assert isinstance(retry, ToolReturnPart | RetryPromptPart)
            assert retry.tool_call_id == "bad"
            assert "Invalid JSON" in str(retry.content)

    run(scenario())


# --- reminders through agent.run ------------------------------------------------------------


def test_a_reminder_the_agent_creates_arrives_once_on_time_and_joins_the_history(
    tmp_path: Path,
) -> None:
    bot = Bot()
    clock = FakeClock()
    timers = FakeTimers(clock)

    async def scenario() -> None:
        async with AsyncHost(bot.run_turn, data_dir=tmp_path, clock=clock, timers=timers) as host:
            chat = await host.open("chat")
            reply = await chat.send("remind me in 60 seconds to stretch")
            assert reply == "OK, I will remind you to stretch at 2026-01-01T00:01:00.000Z."
            await advance_async(host, timers, 59_999)
            assert bot.reminders == []  # not before it is due
            await advance_async(host, timers, 1)
            assert bot.reminders == ["Reminder: stretch"]
            await advance_async(host, timers, 600_000)
            assert bot.reminders == ["Reminder: stretch"]  # exactly once
            assert await chat.send("thanks") == "thanks"
            seen = prompts_seen(bot.requests[-1])
            assert seen[0] == "remind me in 60 seconds to stretch"
            assert seen[1].startswith("[SCHEDULE REMINDER]\n")
            assert 'reminder_prompt_json: "stretch"' in seen[1]
            assert seen[2:] == ["thanks"]
            said = [p.content for m in bot.requests[-1] for p in m.parts if isinstance(p, TextPart)]
            assert "Reminder: stretch" in said
            events = chat.agent.session.events
            assert deliveries(events) == Deliveries(dispatches=1, reminder_entries=1, completed=1)
            assert len(recorded_runs(events)) == 3  # one record per turn

    run(scenario())


def test_a_reminder_pending_at_close_arrives_after_a_restart_with_the_earlier_history(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    first = Bot()

    async def before() -> None:
        async with AsyncHost(
            first.run_turn, data_dir=tmp_path, clock=clock, timers=FakeTimers(clock)
        ) as host:
            chat = await host.open("chat")
            await chat.send("remind me in 60 seconds to stretch")
        assert first.reminders == []

    run(before())
    clock.advance(3_600_000)  # the host is down when the reminder falls due
    again = Bot()
    timers = FakeTimers(clock)

    async def after() -> None:
        async with AsyncHost(again.run_turn, data_dir=tmp_path, clock=clock, timers=timers) as host:
            chat = await host.open("chat")
            await again.wait_reminders(1)
            await advance_async(host, timers, 600_000)
            assert again.reminders == ["Reminder: stretch"]
            reminded = prompts_seen(again.requests[0])
            assert reminded[0] == "remind me in 60 seconds to stretch"  # the earlier turn
            assert reminded[1].startswith("[SCHEDULE REMINDER]\n")
            assert deliveries(chat.agent.session.events).completed == 1

    run(after())
    events = stored_events(tmp_path, "chat")
    assert deliveries(events) == Deliveries(dispatches=1, reminder_entries=1, completed=1)
    assert len(recorded_runs(events)) == 2


def test_a_closed_chat_is_woken_for_its_reminder_by_the_host(tmp_path: Path) -> None:
    bot = Bot()
    clock = FakeClock()
    timers = FakeTimers(clock)

    async def scenario() -> None:
        async with AsyncHost(bot.run_turn, data_dir=tmp_path, clock=clock, timers=timers) as host:
            chat = await host.open("chat")
            await chat.send("remind me in 60 seconds to stretch")
            await chat.close()
            await settle_async(host)
            assert host.embedded.sessions.list() == ()  # nobody has it open
            await advance_async(host, timers, 59_999)
            assert bot.reminders == []
            await advance_async(host, timers, 1)
            await bot.wait_reminders(1)
            await advance_async(host, timers, 600_000)
            assert bot.reminders == ["Reminder: stretch"]
            reminded = bot.requests[-1]
            assert prompts_seen(reminded)[0] == "remind me in 60 seconds to stretch"

    run(scenario())
    events = stored_events(tmp_path, "chat")
    assert deliveries(events) == Deliveries(dispatches=1, reminder_entries=1, completed=1)
    assert len(recorded_runs(events)) == 2


# --- the history helpers --------------------------------------------------------------------


def test_a_runner_of_ones_own_keeps_the_history_with_the_public_helpers(tmp_path: Path) -> None:
    model, seen = scripted([TextPart("one")], [TextPart("two")])
    agent = Agent(model)

    async def run_turn(turn: AgentTurn) -> str | None:
        result = await agent.run(turn.text.upper(), message_history=history(turn))
        await remember(turn, result)
        return result.output

    clock = FakeClock()

    async def scenario() -> None:
        async with fake_time_host(run_turn, tmp_path, clock) as host:
            chat = await host.open("chat")
            assert await chat.send("first") == "one"
            assert await chat.send("second") == "two"
            assert prompts_seen(seen[1]) == ["FIRST", "SECOND"]
            assert isinstance(seen[1][0], ModelRequest)

    run(scenario())
    assert len(recorded_runs(stored_events(tmp_path, "chat"))) == 2


def test_an_unreadable_history_record_is_left_out_and_the_turn_still_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model, seen = scripted([TextPart("one")], [TextPart("two")])
    answer = turn_runner(Agent(model))

    async def run_turn(turn: AgentTurn) -> str | None:
        reply = await answer(turn)
        if turn.text == "first":
            await turn.record(MESSAGES_RECORD, [{"kind": "nonsense"}])
        return reply

    clock = FakeClock()

    async def scenario() -> None:
        async with fake_time_host(run_turn, tmp_path, clock) as host:
            chat = await host.open("chat")
            assert await chat.send("first") == "one"
            assert await chat.send("second") == "two"
            assert prompts_seen(seen[1]) == ["first", "second"]

    run(scenario())
    assert "record 1 is unreadable" in caplog.text


def test_turn_runner_refuses_a_message_history_of_its_own() -> None:
    model, _ = scripted()
    with pytest.raises(TypeError, match="message history"):
        turn_runner(Agent(model), message_history=[])


# --- the example, serve --turn-runner and a SIGKILL, in real processes on real time ----------

EXAMPLE = EXAMPLES / "pydantic_ai_bot.py"
SESSION = "pydantic-ai-bot"  # the example's conversation


@pytest.fixture
def children(tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Start child processes (``args``, ``paths`` for PYTHONPATH); killed at the end if alive."""
    started: list[Proc] = []

    def start(args: Sequence[str], paths: Sequence[Path] = ()) -> Proc:
        child = pai_child(args, tmp_path / "default-home", paths)
        started.append(child)
        return child

    yield start
    for child in started:
        child.kill()
    assert not (tmp_path / "default-home").exists()  # every process was given its store


def run_example(start: Callable[..., Proc], data_dir: Path, stdin: str) -> list[str]:
    """Run the example with ``stdin`` to its end; its output lines."""
    child = start([str(EXAMPLE), str(data_dir)])
    assert child.finish(stdin) == 0, child.err
    return child.out


def conversations(runs: list[Any]) -> set[str]:
    """The Pydantic AI conversation ids of the recorded runs (one: each run had the history)."""
    return {message["conversation_id"] for messages in runs for message in messages}


def test_the_example_is_at_most_40_lines() -> None:
    assert len(EXAMPLE.read_text("utf-8").splitlines()) <= 40


def test_the_examples_reminder_set_before_a_restart_arrives_after_it(
    tmp_path: Path, children: Callable[..., Proc]
) -> None:
    data_dir = tmp_path / "data"
    first = run_example(children, data_dir, "remind me in 3 seconds to stretch\n")
    assert len(first) == 1 and first[0].startswith("OK, I will remind you to stretch at ")
    second = children([str(EXAMPLE), str(data_dir)])  # the restart, before the reminder is due
    second.wait_line("Reminder: stretch")
    assert second.finish("thanks\n") == 0, second.err
    assert second.out == ["Reminder: stretch", "thanks"]
    events = stored_events(data_dir, SESSION)
    assert deliveries(events) == Deliveries(dispatches=1, reminder_entries=1, completed=1)
    runs = recorded_runs(events)
    assert len(runs) == 3 and len(conversations(runs)) == 1


def test_serve_with_the_examples_runner_delivers_to_the_closed_chat(
    tmp_path: Path, children: Callable[..., Proc]
) -> None:
    data_dir = tmp_path / "data"
    run_example(children, data_dir, "remind me in 2 seconds to stretch\n")  # and the chat closes
    serve = children(
        [
            *("-m", "host_bridge.cli", "serve", "--data", str(data_dir)),
            *("--turn-runner", "pydantic_ai_bot:run_turn"),
        ],
        [EXAMPLES],
    )
    serve.wait_line("serving ")
    serve.wait_line("Reminder: stretch")  # the example's runner, in serve's process
    serve.wait_line(f"reminder schedule-1 of session {SESSION}")
    assert serve.stop() == 0, serve.err
    assert serve.out.count("Reminder: stretch") == 1
    events = stored_events(data_dir, SESSION)
    assert deliveries(events) == Deliveries(dispatches=1, reminder_entries=1, completed=1)
    runs = recorded_runs(events)
    assert len(runs) == 2 and len(conversations(runs)) == 1


def closed_chat_with_a_due_reminder(data_dir: Path) -> None:
    """Store the example's session as a closed chat: one run of history, a reminder due now."""
    model, _ = scripted([TextPart("noted")])
    said = Agent(model).run_sync("hello").new_messages()
    earlier = ModelMessagesTypeAdapter.dump_python(said, mode="json")
    now = wall_clock_ms()
    hello = UserMessage((TextBlock("hello"),), {"kind": "user"})
    write_session(  # one completed turn (inbox entry 0, run 1) with its history, then a reminder
        data_dir,
        SESSION,
        [
            (INBOX_EVENT, queued_data(hello)),
            (
                "message",
                {"role": "user", "content": "hello", "source": {"kind": "user"}, "inbox": 0},
            ),
            (MESSAGES_RECORD, {"turn": 1, "data": earlier}),
            (TURN_COMPLETED_EVENT, completed_data(0, failed=False)),
            create("schedule-1", "stretch", 1, now - 1_000),
        ],
    )


@pytest.mark.parametrize("killed", ["AsyncHost", "serve"])
def test_a_sigkill_in_the_reminders_turn_runs_that_turn_once_more_at_the_next_start(
    tmp_path: Path, children: Callable[..., Proc], killed: str
) -> None:
    data_dir = tmp_path / "data"
    closed_chat_with_a_due_reminder(data_dir)
    if killed == "AsyncHost":
        hung = children(["-m", "tests.integrations.pai_hanging", str(data_dir)])
    else:
        serve = ["-m", "host_bridge.cli", "serve", "--data", str(data_dir)]
        hung = children([*serve, "--turn-runner", "pai_hanging:run_turn"], [HERE])
    hung.wait_line(PAUSED)
    assert hung.stop(signal.SIGKILL) == -signal.SIGKILL
    events = stored_events(data_dir, SESSION)
    assert deliveries(events) == Deliveries(dispatches=1, reminder_entries=1, completed=0)
    assert len(recorded_runs(events)) == 1  # the killed run recorded nothing

    again = children(
        [
            *("-m", "host_bridge.cli", "serve", "--data", str(data_dir)),
            *("--turn-runner", "pydantic_ai_bot:run_turn"),
        ],
        [EXAMPLES],
    )
    again.wait_line("Reminder: stretch")
    again.wait_line(f"reminder schedule-1 of session {SESSION}")
    assert again.stop() == 0, again.err
    assert again.out.count("Reminder: stretch") == 1  # presented once more, once
    events = stored_events(data_dir, SESSION)
    assert deliveries(events) == Deliveries(dispatches=1, reminder_entries=1, completed=1)
    runs = recorded_runs(events)
    assert len(runs) == 2 and len(conversations(runs)) == 1
    assert nothing_owed(data_dir)


class Count(pydantic.BaseModel):
    """A structured output."""

    count: int


def test_a_structured_output_is_the_turns_reply_as_json(tmp_path: Path) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"count": 2})])

    runner = turn_runner(Agent(FunctionModel(model), output_type=Count))
    clock = FakeClock()

    async def scenario() -> None:
        async with fake_time_host(runner, tmp_path, clock) as host:
            chat = await host.open("chat")
            assert await chat.send("how many?") == '{"count":2}'

    run(scenario())


# --- the model's tool-call id on the tool spans ---------------------------------------------


@pytest.fixture
def spans() -> Iterator[Spans]:
    spans = Spans()
    yield spans
    spans.tracers.shutdown()


@pytest.fixture
def instrument_all(spans: Spans) -> Iterator[None]:
    """``Agent.instrument_all`` on the private provider, undone afterwards."""
    saved = Agent._instrument_default
    Agent.instrument_all(InstrumentationSettings(tracer_provider=spans.tracers))
    yield
    Agent.instrument_all(saved)


def run_listing_call(tmp_path: Path, spans: Spans) -> None:
    """One turn whose model calls ``schedule_list`` with the tool-call id ``call_MODEL_abc123``."""
    model, seen = scripted([ToolCallPart("schedule_list", {}, tool_call_id="call_MODEL_abc123")])

    runner = turn_runner(Agent(model, toolsets=[ScheduleToolset()]))

    async def scenario() -> None:
        async with traced_host(runner, tmp_path, spans) as host:
            chat = await host.open("chat")
            assert await chat.send("list them") == "done"
        (answered,) = returns(seen[1])
        assert json.loads(text_of(answered)) == {"schedules": []}

    run(scenario())


def test_the_tool_span_carries_the_models_tool_call_id(tmp_path: Path, spans: Spans) -> None:
    run_listing_call(tmp_path, spans)
    (ours,) = spans.named("execute_tool schedule_list", "dsh_schedule")
    assert attributes(ours)[CALL_ID] == "call_MODEL_abc123"
    assert spans.named("execute_tool schedule_list", "pydantic-ai") == []  # not instrumented


def test_instrumented_the_tool_span_is_a_child_of_pydantic_ais_with_the_same_id(
    tmp_path: Path, spans: Spans, instrument_all: None
) -> None:
    run_listing_call(tmp_path, spans)
    (framework,) = spans.named("execute_tool schedule_list", "pydantic-ai")
    (ours,) = spans.named("execute_tool schedule_list", "dsh_schedule")
    assert attributes(framework)[CALL_ID] == attributes(ours)[CALL_ID] == "call_MODEL_abc123"
    assert is_child(ours, framework)
