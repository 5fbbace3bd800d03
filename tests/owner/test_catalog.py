"""The generated tool catalog is committed, current and valid JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from host_bridge import _catalog
from host_bridge._catalog import (
    catalog_json,
    catalog_markdown,
    main,
    openai_responses_tools,
    openai_tools,
)
from host_bridge._schemas import TOOL_SPECS, ToolSpec

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_committed_catalog_matches_the_generated_one() -> None:
    assert (DOCS / "tool-catalog.json").read_text(encoding="utf-8") == catalog_json()
    assert (DOCS / "tool-catalog.md").read_text(encoding="utf-8") == catalog_markdown()
    for name, strict in (("openai_responses.json", False), ("openai_responses_strict.json", True)):
        saved = json.loads((DOCS / "examples" / name).read_text(encoding="utf-8"))
        assert saved["tools"] == openai_responses_tools(strict=strict)
    assert main(["--check"]) == 0


def test_check_reports_a_saved_response_whose_tools_drifted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    monkeypatch.setattr(_catalog, "_DOCS", docs)
    (docs / "examples").mkdir(parents=True)
    for name in ("openai_responses.json", "openai_responses_strict.json"):
        (docs / "examples" / name).write_text('{"output": [], "tools": []}', encoding="utf-8")
    assert main(["--check"]) == 1
    assert "openai_responses.json, openai_responses_strict.json" in capsys.readouterr().err
    assert main(["--write"]) == 0
    assert main(["--check"]) == 0
    saved = json.loads((docs / "examples" / "openai_responses.json").read_text("utf-8"))
    assert saved == {"output": [], "tools": openai_responses_tools()}  # the output is kept


@pytest.mark.parametrize("spec", TOOL_SPECS, ids=lambda s: s.name)
def test_every_schema_is_valid_draft_2020_12(spec: ToolSpec) -> None:
    jsonschema.Draft202012Validator.check_schema(spec.parameters)
    jsonschema.Draft202012Validator.check_schema(spec.output_schema)


@pytest.mark.parametrize("spec", TOOL_SPECS, ids=lambda s: s.name)
def test_parameter_roots_stay_open_for_unsupported_selectors(spec: ToolSpec) -> None:
    parameters = spec.parameters
    assert "additionalProperties" not in parameters
    validator = jsonschema.Draft202012Validator(parameters)
    example = {"prompt": "x", "after_seconds": 5, "id": "schedule-1", "cron": "* * * * *"}
    assert validator.is_valid(example)


def test_output_schemas_reject_values_we_never_return() -> None:
    create = jsonschema.Draft202012Validator(TOOL_SPECS[0].output_schema)
    assert not create.is_valid({"code": "made_up", "message": "x"})
    assert not create.is_valid({"id": "schedule-1"})
    assert not create.is_valid({"code": "invalid_rule", "message": "x", "stack": "Traceback ..."})


def test_openai_layout_has_the_three_functions() -> None:
    tools = openai_tools()
    assert [t["function"]["name"] for t in tools] == [s.name for s in TOOL_SPECS]
    for tool in tools:
        assert tool["type"] == "function"
        assert "$schema" not in tool["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
    json.dumps(tools)  # serialisable as a request body


def test_responses_layout_is_the_flat_three_functions_with_strict_always_given() -> None:
    for strict in (False, True):
        tools = openai_responses_tools(strict=strict)
        assert [t["name"] for t in tools] == [s.name for s in TOOL_SPECS]
        for tool in tools:
            assert tool["type"] == "function"
            assert tool["strict"] is strict
            assert "function" not in tool and "$schema" not in tool["parameters"]
            jsonschema.Draft202012Validator.check_schema(tool["parameters"])
    assert openai_responses_tools()[0]["parameters"] == openai_tools()[0]["function"]["parameters"]
