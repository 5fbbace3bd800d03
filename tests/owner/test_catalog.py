"""The generated tool catalog is committed, current and valid JSON Schema."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from host_bridge import _catalog
from host_bridge._catalog import (
    catalog_json,
    catalog_markdown,
    catalog_value,
    main,
    openai_responses_tools,
    openai_tools,
)
from host_bridge._schemas import TOOL_SPECS, ToolSpec, tool_specs
from messages._cron import MAX_CRON_EXPRESSION_LENGTH, parse_cron_expression
from messages._tool_values import CreateInput, CronSelector, parse_create_input

WITHOUT_CRON = tool_specs(calendar_rules=False)

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


@pytest.mark.parametrize("spec", [*TOOL_SPECS, *WITHOUT_CRON], ids=lambda s: s.name)
def test_every_schema_is_valid_draft_2020_12(spec: ToolSpec) -> None:
    jsonschema.Draft202012Validator.check_schema(spec.parameters)
    jsonschema.Draft202012Validator.check_schema(spec.output_schema)


@pytest.mark.parametrize("spec", [*TOOL_SPECS, *WITHOUT_CRON], ids=lambda s: s.name)
def test_parameter_roots_stay_open_for_unsupported_selectors(spec: ToolSpec) -> None:
    parameters = spec.parameters
    assert "additionalProperties" not in parameters
    validator = jsonschema.Draft202012Validator(parameters)
    example = {"prompt": "x", "after_seconds": 5, "id": "schedule-1", "time_zone": "UTC"}
    assert validator.is_valid(example)


def test_without_calendar_rules_a_cron_key_still_passes_the_schema_to_reach_the_tool() -> None:
    validator = jsonschema.Draft202012Validator(WITHOUT_CRON[0].parameters)
    assert validator.is_valid({"prompt": "x", "cron": "* * * * *"})


CRON_ARGUMENT = {"expression": "0 9 * * 1-5", "time_zone": "Asia/Shanghai"}

CRON_ARGUMENTS: list[tuple[Any, bool]] = [
    # (the cron value of a schedule_create call, whether the parameter schema accepts it)
    (CRON_ARGUMENT, True),
    ({"expression": "@daily", "time_zone": "UTC"}, True),
    ({"expression": "x" * MAX_CRON_EXPRESSION_LENGTH, "time_zone": "UTC"}, True),
    ({"expression": "x" * (MAX_CRON_EXPRESSION_LENGTH + 1), "time_zone": "UTC"}, False),
    ({"expression": "", "time_zone": "UTC"}, False),
    ({"expression": "0 9 * * 1-5"}, False),
    ({"time_zone": "Asia/Shanghai"}, False),
    ({**CRON_ARGUMENT, "seconds": 0}, False),
    ({"expression": 9, "time_zone": "UTC"}, False),
    ({"expression": "0 9 * * *", "time_zone": ""}, False),
    ("0 9 * * 1-5", False),
    (None, False),
]


@pytest.mark.parametrize(("cron", "valid"), CRON_ARGUMENTS)
def test_the_cron_parameter_is_an_object_of_exactly_expression_and_time_zone(
    cron: Any, valid: bool
) -> None:
    validator = jsonschema.Draft202012Validator(TOOL_SPECS[0].parameters)
    assert validator.is_valid({"prompt": "standup", "cron": cron}) is valid


CRON_VIEW: dict[str, Any] = {
    "id": "schedule-1",
    "kind": "cron",
    "prompt": "standup",
    "expression": "0 9 * * 1-5",
    "timeZone": "Asia/Shanghai",
    "scheduledAt": "2026-08-06T01:00:00.000Z",
    "state": "scheduled",
    "deliveryMode": "session-local",
}


def test_the_output_schemas_accept_a_cron_view_and_only_with_calendar_rules() -> None:
    create, listing = (jsonschema.Draft202012Validator(s.output_schema) for s in TOOL_SPECS[:2])
    assert create.is_valid(CRON_VIEW)
    assert listing.is_valid({"schedules": [CRON_VIEW]})
    assert list(TOOL_SPECS[0].output_schema["$defs"]["cronSchedule"]["properties"]) == list(
        CRON_VIEW
    )
    every = {k: v for k, v in CRON_VIEW.items() if k not in ("expression", "timeZone")}
    every |= {"kind": "every", "everySeconds": 300}
    for wrong in (
        {k: v for k, v in CRON_VIEW.items() if k != "timeZone"},
        {**CRON_VIEW, "everySeconds": 300},
        {**CRON_VIEW, "expression": ""},
        {**CRON_VIEW, "expression": "x" * (MAX_CRON_EXPRESSION_LENGTH + 1)},
        {**every, "kind": "cron"},
    ):
        assert not create.is_valid(wrong)
    old_create, old_listing = (
        jsonschema.Draft202012Validator(s.output_schema) for s in WITHOUT_CRON[:2]
    )
    assert old_create.is_valid(every) and create.is_valid(every)
    assert not old_create.is_valid(CRON_VIEW)
    assert not old_listing.is_valid({"schedules": [CRON_VIEW]})


@pytest.mark.parametrize("spec", WITHOUT_CRON, ids=lambda s: s.name)
def test_without_calendar_rules_no_schema_or_description_mentions_cron(spec: ToolSpec) -> None:
    text = json.dumps([spec.name, spec.description, spec.parameters, spec.output_schema])
    assert "cron" not in text.lower()
    assert "timeZone" not in text


def test_with_calendar_rules_every_tool_that_names_the_kinds_names_cron() -> None:
    create, listing, _ = TOOL_SPECS
    assert "cron" in create.parameters["properties"]
    assert "or cron (repeating" in create.description
    assert "(after, at, every or cron)" in listing.description
    assert "cronSchedule" in json.dumps(create.output_schema["$defs"]["schedule"])


SELECTORS = ["after_seconds", "at", "every_seconds", "cron"]


@pytest.mark.parametrize("selector", SELECTORS)
def test_each_selector_says_it_is_not_combined_with_the_three_others(selector: str) -> None:
    others = [name for name in SELECTORS if name != selector]
    description = TOOL_SPECS[0].parameters["properties"][selector]["description"]
    assert description.endswith(f"Do not combine with {others[0]}, {others[1]} or {others[2]}.")
    if selector != "cron":
        old = WITHOUT_CRON[0].parameters["properties"][selector]["description"]
        kept = [name for name in others if name != "cron"]
        assert old.endswith(f"Do not combine with {kept[0]} or {kept[1]}.")


def test_the_cron_description_says_what_a_model_needs() -> None:
    description = TOOL_SPECS[0].parameters["properties"]["cron"]["description"]
    for said in (
        "five fields",
        "minute (0-59), hour (0-23), day of month (1-31), month",
        "the user's tz database zone",
        "at most once per five minutes",
        '"weekdays at 9" -> {"cron": {"expression": "0 9 * * 1-5", "time_zone": "Asia/Shanghai"}}',
        '"the 1st of each month at 8:00" -> {"cron": {"expression": "0 8 1 * *"',
        '"every Monday at 8:30 New York time" -> {"cron": {"expression": "30 8 * * 1", '
        '"time_zone": "America/New_York"}}',
    ):
        assert said in description


def _examples(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Every ``"phrase" -> {"cron": {...}}`` call example in ``text``, decoded."""
    found = re.findall(r'"([^"]+)" -> (\{"cron": \{[^}]*\}\})', text)
    return [(phrase, json.loads(example)) for phrase, example in found]


MEANINGS = {
    "weekdays at 9": ("at 09:00, on Monday to Friday", "Asia/Shanghai"),
    "the 1st of each month at 8:00": ("at 08:00, on day 1 of the month", "Asia/Shanghai"),
    "every Monday at 8:30 New York time": ("at 08:30, on Monday", "America/New_York"),
}


def test_every_cron_example_in_the_catalog_is_a_call_the_tool_accepts_meaning_its_phrase() -> None:
    create = TOOL_SPECS[0]
    cron = create.parameters["properties"]["cron"]["description"]
    examples = _examples(create.description) + _examples(cron)
    assert [phrase for phrase, _ in examples] == ["weekdays at 9", *MEANINGS]
    validator = jsonschema.Draft202012Validator(create.parameters)
    for phrase, example in examples:
        arguments = {"prompt": "p", **example}
        assert validator.is_valid(arguments)
        parsed = parse_create_input(arguments)
        assert isinstance(parsed, CreateInput), parsed
        assert isinstance(parsed.when, CronSelector)
        words = parse_cron_expression(parsed.when.expression).describe()
        assert (words, parsed.when.time_zone) == MEANINGS[phrase]


def test_the_catalog_without_calendar_rules_is_the_catalog_before_them() -> None:
    """Its create description still lists three selectors, as it did before cron existed."""
    create, listing, _ = WITHOUT_CRON
    assert set(create.parameters["properties"]) == {"prompt", *SELECTORS[:3]}
    assert "or every_seconds (repeating" in create.description
    assert "(after, at or every)" in listing.description
    defs = create.output_schema["$defs"]
    assert set(defs) == {"error", "schedule", "afterSchedule", "atSchedule", "everySchedule"}
    assert catalog_value(calendar_rules=False)["tools"][0]["parameters"] == create.parameters
    assert tool_specs() is TOOL_SPECS  # built once


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
