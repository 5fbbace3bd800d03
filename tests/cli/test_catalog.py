"""``dsh-schedule catalog``: the tool schemas, valid JSON Schema, in every layout."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from host_bridge._catalog import catalog_value, openai_responses_tools, openai_tools
from tests.cli.helpers import REPO, run_cli

NAMES = ["schedule_create", "schedule_list", "schedule_delete"]


def test_json_catalog_is_the_committed_catalog_and_every_schema_is_valid(home: Path) -> None:
    run = run_cli(["catalog"], home)
    assert run.code == 0, run.err
    document = json.loads(run.out)
    assert document == json.loads((REPO / "docs" / "tool-catalog.json").read_text("utf-8"))
    assert document == catalog_value()
    assert [tool["name"] for tool in document["tools"]] == NAMES
    for tool in document["tools"]:
        Draft202012Validator.check_schema(tool["parameters"])
        Draft202012Validator.check_schema(tool["outputSchema"])
        assert tool["description"]
    explicit = run_cli(["catalog", "--format", "json"], home)
    assert explicit.out == run.out


def test_openai_layout_is_function_tools_with_valid_parameter_schemas(home: Path) -> None:
    run = run_cli(["catalog", "--format", "openai"], home)
    assert run.code == 0, run.err
    tools: list[dict[str, Any]] = json.loads(run.out)
    assert [tool["function"]["name"] for tool in tools] == NAMES
    for tool in tools:
        assert set(tool) == {"type", "function"}
        assert tool["type"] == "function"
        function = tool["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert function["description"]
        parameters = function["parameters"]
        Draft202012Validator.check_schema(parameters)
        assert parameters["type"] == "object"
        assert "$schema" not in parameters
    create = tools[0]["function"]["parameters"]
    assert create["required"] == ["prompt"]  # plus exactly one selector, said in words
    assert set(create["properties"]) == {"prompt", "after_seconds", "at", "every_seconds", "cron"}
    assert create["properties"]["cron"]["required"] == ["expression", "time_zone"]
    assert "additionalProperties" not in create  # the root stays open


def test_format_is_case_insensitive(home: Path) -> None:
    assert run_cli(["catalog", "--format", "OpenAI"], home).code == 0
    upper = run_cli(["catalog", "--format", "Responses-Strict"], home)
    assert upper.code == 0, upper.err
    assert json.loads(upper.out) == openai_responses_tools(strict=True)


def test_openai_strict_layout_is_the_strict_tools(home: Path) -> None:
    run = run_cli(["catalog", "--format", "openai-strict"], home)
    assert run.code == 0, run.err
    tools: list[dict[str, Any]] = json.loads(run.out)
    assert tools == openai_tools(strict=True)
    assert [tool["function"]["name"] for tool in tools] == NAMES
    for tool in tools:
        assert tool["function"]["strict"] is True
        parameters = tool["function"]["parameters"]
        Draft202012Validator.check_schema(parameters)
        assert parameters["additionalProperties"] is False
        assert parameters["required"] == list(parameters["properties"])


def test_responses_layouts_are_flat_function_tools_with_an_explicit_strict(home: Path) -> None:
    for layout, strict in (("responses", False), ("responses-strict", True)):
        run = run_cli(["catalog", "--format", layout], home)
        assert run.code == 0, run.err
        tools: list[dict[str, Any]] = json.loads(run.out)
        assert tools == openai_responses_tools(strict=strict)
        assert [tool["name"] for tool in tools] == NAMES
        chat = openai_tools(strict=strict)
        for tool, chat_tool in zip(tools, chat, strict=True):
            assert set(tool) == {"type", "name", "description", "parameters", "strict"}
            assert tool["type"] == "function"
            assert tool["strict"] is strict
            assert tool["parameters"] == chat_tool["function"]["parameters"]
            Draft202012Validator.check_schema(tool["parameters"])
        create = tools[0]["parameters"]
        assert ("additionalProperties" in create) is strict  # open unless strict


LAYOUTS: dict[str, Callable[[], Any]] = {
    "json": lambda: catalog_value(calendar_rules=False),
    "openai": lambda: openai_tools(calendar_rules=False),
    "openai-strict": lambda: openai_tools(strict=True, calendar_rules=False),
    "responses": lambda: openai_responses_tools(calendar_rules=False),
    "responses-strict": lambda: openai_responses_tools(strict=True, calendar_rules=False),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_without_cron_every_layout_leaves_the_selector_out(home: Path, layout: str) -> None:
    run = run_cli(["catalog", "--format", layout, "--without-cron"], home)
    assert run.code == 0, run.err
    printed = json.loads(run.out)
    assert printed == LAYOUTS[layout]()
    assert "cron" not in run.out.lower()
    with_cron = run_cli(["catalog", "--format", layout], home)
    assert with_cron.code == 0, with_cron.err
    assert '"cron"' in with_cron.out


def test_help_lists_every_format_and_an_unknown_one_is_a_usage_error(home: Path) -> None:
    shown = run_cli(["catalog", "--help"], home)
    assert shown.code == 0, shown.err
    assert "[json|openai|openai-strict|responses|responses-strict]" in shown.out
    assert "--without-cron" in shown.out
    for layout in ("responses", "responses-strict"):
        assert f"\n    {layout}\n" in shown.out  # each has its paragraph under Formats
    wrong = run_cli(["catalog", "--format", "responses-lax"], home)
    assert wrong.code == 2
    assert "responses-strict" in wrong.err
