"""The Responses API layout fits the ``openai`` package's own types."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

from host_bridge import openai_responses_tools, openai_tools
from host_bridge._schemas import TOOL_SPECS

responses = pytest.importorskip("openai.types.responses")
pydantic = pytest.importorskip("pydantic")


def keys(typed_dict: Any) -> tuple[set[str], set[str]]:
    """The required keys of a TypedDict, and all of its keys (``Required[...]`` marks the first)."""
    hints = typing.get_type_hints(typed_dict, include_extras=True)
    required = {key for key, hint in hints.items() if typing.get_origin(hint) is typing.Required}
    return required, set(hints)


@pytest.mark.parametrize("strict", [False, True], ids=["open", "strict"])
def test_every_tool_is_a_function_tool_param_with_only_known_keys(strict: bool) -> None:
    required, known = keys(responses.FunctionToolParam)
    assert {"type", "name", "parameters", "strict"} <= required  # strict cannot be left out
    adapter = pydantic.TypeAdapter(responses.FunctionToolParam)
    tools = openai_responses_tools(strict=strict)
    assert [tool["name"] for tool in tools] == [spec.name for spec in TOOL_SPECS]
    for tool in tools:
        assert required <= set(tool) <= known
        assert adapter.validate_python(tool) == tool  # nothing dropped, nothing coerced
        assert responses.FunctionTool.model_validate(tool).strict is strict  # as echoed back
        assert tool["strict"] is strict
    json.dumps(tools)  # a request body


@pytest.mark.parametrize("strict", [False, True], ids=["open", "strict"])
def test_a_responses_tool_is_the_chat_function_moved_up(strict: bool) -> None:
    flat_tools, chat_tools = openai_responses_tools(strict=strict), openai_tools(strict=strict)
    for flat, chat in zip(flat_tools, chat_tools, strict=True):
        assert chat["type"] == flat["type"] == "function"
        assert {"type": "function", **chat["function"], "strict": strict} == flat
    assert "$schema" not in openai_responses_tools()[0]["parameters"]
