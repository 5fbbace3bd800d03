"""The strict-mode catalog obeys OpenAI's strict-mode rules, and its calls reach the tools right."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import pytest

from actors._runtime import Runtime
from host_bridge._catalog import catalog_value, openai_responses_tools, openai_tools
from host_bridge._openai_strict import normalize_strict_arguments, strict_parameters
from host_bridge._plugin import install_schedule
from host_bridge._schemas import TOOL_SPECS
from host_bridge.testing import FakeHost
from tests.owner.helpers import Tools, error

# OpenAI's structured-outputs rules for strict mode, written out independently of the
# generator: the portable subset of keywords, closed objects, everything required, no
# root-level anyOf, at most 10 levels of nesting and 5000 properties.
ALLOWED = {"type", "description", "properties", "required", "additionalProperties", "enum"}
ALLOWED |= {"anyOf", "items"}
TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}


def strict_mode_violations(schema: Mapping[str, Any], path: str = "$", depth: int = 0) -> list[str]:
    """Every way ``schema`` breaks a strict-mode rule (empty when it breaks none)."""
    found = [f"{path}: keyword {key}" for key in schema if key not in ALLOWED]
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds] if kinds else []:
        if kind not in TYPES:
            found.append(f"{path}: type {kind}")
    if "type" not in schema and "anyOf" not in schema:
        found.append(f"{path}: neither type nor anyOf")
    is_object = kinds == "object" or (isinstance(kinds, list) and "object" in kinds)
    if is_object or "properties" in schema:
        if depth >= 10:
            found.append(f"{path}: nested deeper than 10 levels")
        if schema.get("additionalProperties") is not False:
            found.append(f"{path}: additionalProperties is not false")
        properties = schema.get("properties", {})
        if sorted(schema.get("required", [])) != sorted(properties):
            found.append(f"{path}: not every property is required")
        for name, sub in properties.items():
            found += strict_mode_violations(sub, f"{path}.{name}", depth + 1)
    for index, sub in enumerate(schema.get("anyOf", [])):
        found += strict_mode_violations(sub, f"{path}.anyOf[{index}]", depth)
    if "items" in schema:
        found += strict_mode_violations(schema["items"], f"{path}[]", depth + 1)
    return found


def count_properties(schema: Mapping[str, Any]) -> int:
    total = len(schema.get("properties", {}))
    for sub in [*schema.get("properties", {}).values(), *schema.get("anyOf", [])]:
        total += count_properties(sub)
    return total


STRICT = openai_tools(strict=True)


def test_the_strict_layout_names_the_three_functions_in_strict_mode() -> None:
    assert [tool["function"]["name"] for tool in STRICT] == [spec.name for spec in TOOL_SPECS]
    for tool in STRICT:
        assert tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters", "strict"}
        assert tool["function"]["strict"] is True
    json.dumps(STRICT)  # a request body


@pytest.mark.parametrize("tool", STRICT, ids=lambda t: t["function"]["name"])
def test_every_strict_schema_is_valid_json_schema_and_follows_the_strict_rules(
    tool: dict[str, Any],
) -> None:
    parameters = tool["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(parameters)
    assert parameters["type"] == "object" and "anyOf" not in parameters
    assert strict_mode_violations(parameters) == []
    assert count_properties(parameters) <= 5000


@pytest.mark.parametrize("tool", openai_responses_tools(strict=True), ids=lambda t: t["name"])
def test_the_strict_responses_tools_follow_the_strict_rules_too(tool: dict[str, Any]) -> None:
    assert tool["strict"] is True
    parameters = tool["parameters"]
    jsonschema.Draft202012Validator.check_schema(parameters)
    assert parameters["type"] == "object" and "anyOf" not in parameters
    assert strict_mode_violations(parameters) == []
    assert count_properties(parameters) <= 5000
    (chat,) = [t["function"] for t in STRICT if t["function"]["name"] == tool["name"]]
    assert (tool["description"], parameters) == (chat["description"], chat["parameters"])


def test_the_open_responses_tools_say_strict_false_and_would_break_the_rules() -> None:
    create = openai_responses_tools()[0]
    assert create["strict"] is False
    assert "$: additionalProperties is not false" in strict_mode_violations(create["parameters"])


def test_the_checker_catches_what_the_default_layout_does_wrong() -> None:
    create = openai_tools()[0]["function"]["parameters"]
    found = strict_mode_violations(create)
    assert "$: additionalProperties is not false" in found
    assert "$: not every property is required" in found
    assert "$.prompt: keyword minLength" in found
    assert "$.at.anyOf[0]: keyword pattern" in found


def test_the_default_layout_and_the_catalog_are_unchanged() -> None:
    create = openai_tools()[0]["function"]
    assert "strict" not in create
    assert "additionalProperties" not in create["parameters"]  # the root stays open
    assert create["parameters"]["required"] == ["prompt"]
    assert catalog_value()["tools"][0]["parameters"] == TOOL_SPECS[0].parameters


def test_optional_selectors_are_nullable_and_constraints_are_in_the_descriptions() -> None:
    properties = STRICT[0]["function"]["parameters"]["properties"]
    assert properties["prompt"]["type"] == "string"  # required: not nullable
    assert properties["after_seconds"]["type"] == ["integer", "null"]
    assert properties["every_seconds"]["type"] == ["integer", "null"]
    assert properties["at"]["anyOf"][-1] == {"type": "null"}
    cron = properties["cron"]
    assert cron["type"] == ["object", "null"]
    assert cron["required"] == ["expression", "time_zone"]
    assert cron["additionalProperties"] is False
    assert cron["properties"]["expression"]["type"] == "string"  # required inside: not nullable
    assert cron["properties"]["time_zone"]["type"] == "string"
    assert "1 to 128 characters" in cron["properties"]["expression"]["description"]
    assert "1 to 4096 characters" in properties["prompt"]["description"]
    assert "from 1 to 9007199254740991" in properties["after_seconds"]["description"]
    assert "from 300 to " in properties["every_seconds"]["description"]
    pattern = TOOL_SPECS[0].parameters["properties"]["at"]["anyOf"][0]["pattern"]
    assert pattern in properties["at"]["anyOf"][0]["description"]
    assert "Set to null when not used." in properties["at"]["description"]
    assert STRICT[0]["function"]["description"].endswith(
        "Every parameter must be given: set after_seconds, at, every_seconds and cron to null "
        "when you do not use them."
    )
    assert STRICT[2]["function"]["description"] == TOOL_SPECS[2].description


def test_the_strict_layout_without_calendar_rules_has_no_cron() -> None:
    tools = openai_tools(strict=True, calendar_rules=False)
    assert "cron" not in json.dumps(tools).lower()
    create = tools[0]["function"]
    selectors = list(create["parameters"]["properties"])
    assert selectors == ["prompt", "after_seconds", "at", "every_seconds"]
    assert create["description"].endswith(
        "Every parameter must be given: set after_seconds, at and every_seconds to null "
        "when you do not use them."
    )
    for tool in tools:
        assert strict_mode_violations(tool["function"]["parameters"]) == []
    flat = openai_responses_tools(strict=True, calendar_rules=False)
    assert [t["parameters"] for t in flat] == [t["function"]["parameters"] for t in tools]


NULLS: dict[str, Any] = {"after_seconds": None, "at": None, "every_seconds": None, "cron": None}

STRICT_CALLS: list[dict[str, Any]] = [
    {"prompt": "stretch", **NULLS, "after_seconds": 1200},
    {"prompt": "water", **NULLS, "every_seconds": 1800},
    {
        "prompt": "call mom",
        **NULLS,
        "at": {"date": "2026-08-06", "time": "09:00:00", "time_zone": "Asia/Shanghai"},
    },
    {"prompt": "standup", **NULLS, "at": "2026-08-06T09:00:00+08:00"},
    {"prompt": "standup", **NULLS, "cron": {"expression": "0 9 * * 1-5", "time_zone": "UTC"}},
]


@pytest.mark.parametrize("arguments", STRICT_CALLS)
def test_what_a_strict_model_sends_fits_the_schema_and_loses_only_its_nulls(
    arguments: dict[str, Any],
) -> None:
    validator = jsonschema.Draft202012Validator(STRICT[0]["function"]["parameters"])
    assert validator.is_valid(arguments)
    normalized = normalize_strict_arguments("schedule_create", json.dumps(arguments))
    assert normalized == {key: value for key, value in arguments.items() if value is not None}
    default = jsonschema.Draft202012Validator(TOOL_SPECS[0].parameters)
    assert default.is_valid(normalized)


def test_the_strict_schema_refuses_missing_and_extra_keys() -> None:
    validator = jsonschema.Draft202012Validator(STRICT[0]["function"]["parameters"])
    assert not validator.is_valid({"prompt": "x", "after_seconds": 60})
    assert not validator.is_valid({**STRICT_CALLS[0], "time_zone": "UTC"})
    assert not validator.is_valid({**STRICT_CALLS[0], "cron": "* * * * *"})
    assert not validator.is_valid({**STRICT_CALLS[0], "cron": {"expression": "@daily"}})
    assert not validator.is_valid({**STRICT_CALLS[0], "prompt": None})
    nulls = {key: value for key, value in STRICT_CALLS[0].items() if key != "cron"}
    assert not validator.is_valid(nulls)  # a strict model sends cron too, as null
    old = openai_tools(strict=True, calendar_rules=False)[0]["function"]["parameters"]
    assert jsonschema.Draft202012Validator(old).is_valid(nulls)


def test_the_normalizer_drops_a_null_cron_unless_the_catalog_has_none() -> None:
    given = '{"prompt": "p", "after_seconds": 60, "cron": null}'
    assert normalize_strict_arguments("schedule_create", given) == {
        "prompt": "p",
        "after_seconds": 60,
    }
    kept = normalize_strict_arguments("schedule_create", given, calendar_rules=False)
    assert kept == {"prompt": "p", "after_seconds": 60, "cron": None}
    both = {"prompt": "p", "at": None, "every_seconds": 300, "cron": None}
    assert normalize_strict_arguments("schedule_create", both, calendar_rules=False) == {
        "prompt": "p",
        "every_seconds": 300,
        "cron": None,
    }


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("schedule_create", '{"prompt": "x", "after_seconds": NaN, "at": null}'),  # refused text
        ("schedule_create", "[null]"),
        ("schedule_create", ["prompt"]),
        ("schedule_create", {"prompt": None, "after_seconds": 5}),  # prompt is not optional
        ("schedule_list", '{"anything": null}'),
        ("schedule_delete", '{"id": null}'),
        ("unknown_tool", '{"at": null}'),
    ],
)
def test_the_normalizer_leaves_everything_else_alone(name: str, arguments: object) -> None:
    assert normalize_strict_arguments(name, arguments) is arguments


def test_a_dict_subclass_is_left_to_the_tool() -> None:
    class Arguments(dict[str, Any]):
        pass

    given = Arguments(prompt="p", after_seconds=5, at=None)
    assert normalize_strict_arguments("schedule_create", given) is given


@pytest.fixture
def tools(host: FakeHost, runtime: Runtime) -> Iterator[Tools]:
    plugin = install_schedule(host.context(), runtime=runtime)
    agent = host.spawn_root("agent-1")
    tools = Tools(host, plugin, agent)
    tools.settle()
    yield tools
    plugin.dispose().result(timeout=10)


def strict_call(tools: Tools, name: str, arguments: dict[str, Any]) -> Any:
    return tools.call(name, normalize_strict_arguments(name, json.dumps(arguments)))


def test_strict_calls_create_what_they_say(tools: Tools) -> None:
    calls = [STRICT_CALLS[0], STRICT_CALLS[1], STRICT_CALLS[4]]
    views = [strict_call(tools, "schedule_create", arguments) for arguments in calls]
    assert [(v["id"], v["kind"]) for v in views] == [
        ("schedule-1", "after"),
        ("schedule-2", "every"),
        ("schedule-3", "cron"),
    ]
    assert (views[2]["expression"], views[2]["timeZone"]) == ("0 9 * * 1-5", "UTC")
    assert views[2]["scheduledAt"] == "2026-01-01T09:00:00.000Z"  # the kit's clock: a Thursday
    listed = strict_call(tools, "schedule_list", {})
    assert [v["id"] for v in listed["schedules"]] == ["schedule-1", "schedule-2", "schedule-3"]
    assert strict_call(tools, "schedule_delete", {"id": "schedule-1"})["deleted"] is True


def test_null_selectors_still_count_without_the_normalizer(tools: Tools) -> None:
    """The contract's presence rule stands for input that does not come from strict mode."""
    assert error("invalid_selector", tools.call("schedule_create", json.dumps(STRICT_CALLS[0])))
    assert error("invalid_rule", tools.call("schedule_create", {"prompt": "p", "at": None}))
    nothing = {"prompt": "p", **NULLS}
    assert error("invalid_selector", strict_call(tools, "schedule_create", nothing))
    cron_null = {"prompt": "p", "after_seconds": 60, "cron": None}
    assert error("invalid_selector", tools.call("schedule_create", cron_null))


def test_a_new_keyword_in_the_schemas_must_be_given_a_strict_form() -> None:
    with pytest.raises(ValueError, match="'oneOf' has no strict-mode form"):
        strict_parameters({"type": "object", "properties": {"x": {"oneOf": []}}})
    with pytest.raises(ValueError, match="no anyOf at the root"):
        strict_parameters({"type": "object", "anyOf": []})
