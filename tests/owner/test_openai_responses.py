"""The Responses API layout fits the ``openai`` package's own types, and so do the examples."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from host_bridge import openai_responses_tools, openai_tools
from host_bridge._schemas import TOOL_SPECS
from tests.cli.helpers import round_trip

responses = pytest.importorskip("openai.types.responses")
response_input = pytest.importorskip("openai.types.responses.response_input_param")
pydantic = pytest.importorskip("pydantic")

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"
SAVED = {False: "openai_responses.json", True: "openai_responses_strict.json"}


def keys(typed_dict: Any) -> tuple[set[str], set[str]]:
    """The required keys of a TypedDict, and all of its keys (``Required[...]`` marks the first)."""
    hints = typing.get_type_hints(typed_dict, include_extras=True)
    required = {key for key, hint in hints.items() if typing.get_origin(hint) is typing.Required}
    return required, set(hints)


@pytest.mark.parametrize("calendar_rules", [True, False], ids=["cron", "without-cron"])
@pytest.mark.parametrize("strict", [False, True], ids=["open", "strict"])
def test_every_tool_is_a_function_tool_param_with_only_known_keys(
    strict: bool, calendar_rules: bool
) -> None:
    required, known = keys(responses.FunctionToolParam)
    assert {"type", "name", "parameters", "strict"} <= required  # strict cannot be left out
    adapter = pydantic.TypeAdapter(responses.FunctionToolParam)
    tools = openai_responses_tools(strict=strict, calendar_rules=calendar_rules)
    assert [tool["name"] for tool in tools] == [spec.name for spec in TOOL_SPECS]
    assert ("cron" in tools[0]["parameters"]["properties"]) is calendar_rules
    for tool in tools:
        assert required <= set(tool) <= known
        assert adapter.validate_python(tool) == tool  # nothing dropped, nothing coerced
        assert responses.FunctionTool.model_validate(tool).strict is strict  # as echoed back
        assert tool["strict"] is strict
    json.dumps(tools)  # a request body


@pytest.mark.parametrize("calendar_rules", [True, False], ids=["cron", "without-cron"])
@pytest.mark.parametrize("strict", [False, True], ids=["open", "strict"])
def test_a_responses_tool_is_the_chat_function_moved_up(strict: bool, calendar_rules: bool) -> None:
    flat_tools = openai_responses_tools(strict=strict, calendar_rules=calendar_rules)
    chat_tools = openai_tools(strict=strict, calendar_rules=calendar_rules)
    for flat, chat in zip(flat_tools, chat_tools, strict=True):
        assert chat["type"] == flat["type"] == "function"
        assert {"type": "function", **chat["function"], "strict": strict} == flat
    assert "$schema" not in openai_responses_tools()[0]["parameters"]


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_the_saved_responses_are_responses_and_echo_the_generated_tools(strict: bool) -> None:
    saved = json.loads((EXAMPLES / SAVED[strict]).read_text("utf-8"))
    response = responses.Response.model_validate(saved)
    assert response.object == "response"
    calls = [item for item in response.output if item.type == "function_call"]
    assert calls and all(isinstance(call, responses.ResponseFunctionToolCall) for call in calls)
    assert all(isinstance(call.arguments, str) for call in calls)
    assert saved["tools"] == openai_responses_tools(strict=strict)
    assert saved["parallel_tool_calls"] is not strict  # llm-apis.md: none with strict tools


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_the_round_trip_answers_with_function_call_output_items(strict: bool) -> None:
    options = ["--api", "responses", "--now", "2026-08-05T12:00:00.000Z"]
    items = round_trip(*options, *(["--strict"] if strict else []), prefix="output: ")
    saved = json.loads((EXAMPLES / SAVED[strict]).read_text("utf-8"))
    calls = [item for item in saved["output"] if item["type"] == "function_call"]
    assert [item["call_id"] for item in items] == [call["call_id"] for call in calls]
    required, known = keys(response_input.FunctionCallOutput)
    adapter = pydantic.TypeAdapter(response_input.FunctionCallOutput)
    for item in items:
        assert required <= set(item) <= known
        assert adapter.validate_python(item) == item
        assert isinstance(item["output"], str)


def _saved_calls(name: str) -> list[tuple[str, str]]:
    """``(tool name, argument text)`` of every call in a saved chat or Responses response."""
    saved = json.loads((EXAMPLES / name).read_text("utf-8"))
    if "choices" in saved:
        calls = saved["choices"][0]["message"].get("tool_calls") or []
        return [(c["function"]["name"], c["function"]["arguments"]) for c in calls]
    return [(i["name"], i["arguments"]) for i in saved["output"] if i["type"] == "function_call"]


@pytest.mark.parametrize(
    "name", ["openai_chat_completion_strict.json", "openai_responses_strict.json"]
)
def test_the_saved_strict_calls_fit_todays_strict_schemas(name: str) -> None:
    """A strict model sends every parameter: a new selector must be in the saved calls too."""
    schemas = {tool["name"]: tool["parameters"] for tool in openai_responses_tools(strict=True)}
    calls = _saved_calls(name)
    assert calls
    for tool, arguments in calls:
        jsonschema.Draft202012Validator(schemas[tool]).validate(json.loads(arguments))
