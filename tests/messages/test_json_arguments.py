"""Tool arguments given as JSON text: strict, bounded, then judged exactly like an object."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages._errors import ErrorCode
from messages._json_arguments import (
    MAX_INTEGER_DIGITS,
    MAX_JSON_ARGUMENTS_DEPTH,
    MAX_JSON_ARGUMENTS_LENGTH,
    JsonArgumentsError,
    decode_json_arguments,
)
from messages._tool_values import (
    AfterSelector,
    CreateInput,
    DeleteInput,
    ListInput,
    ToolError,
    parse_create_input,
    parse_delete_input,
    parse_list_input,
)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"prompt": "stretch", "after_seconds": 60}', {"prompt": "stretch", "after_seconds": 60}),
        (' \n\t{"a": [1, 2.5, true, null]}\r\n', {"a": [1, 2.5, True, None]}),
        ('"{\\"prompt\\": \\"x\\"}"', '{"prompt": "x"}'),  # decoded once: a string stays one
        ('{"a": "\\ud800"}', {"a": "\ud800"}),  # a lone surrogate escape is the string it spells
        ('{"a": "[[[[{{{{"}', {"a": "[[[[{{{{"}),
        ('{"a": 1e999}', {"a": float("inf")}),  # a finite literal too large for a float
        ("1" * (MAX_INTEGER_DIGITS + 1), 10**MAX_INTEGER_DIGITS),
        ("-" + "9" * 5000, -(10**MAX_INTEGER_DIGITS)),
        ("9" * MAX_INTEGER_DIGITS, int("9" * MAX_INTEGER_DIGITS)),
        (nested(MAX_JSON_ARGUMENTS_DEPTH), json.loads(nested(MAX_JSON_ARGUMENTS_DEPTH))),
        ('"' + "[{" * 1000 + '"', "[{" * 1000),  # brackets in strings do not nest
        ('{"a": "' + "x" * (MAX_JSON_ARGUMENTS_LENGTH - 10) + '"}', {"a": "x" * 65526}),
    ],
    ids=[
        "object",
        "whitespace",
        "a-string",
        "lone-surrogate-escape",
        "brackets-in-a-string",
        "1e999",
        "long-integer",
        "longer-negative-integer",
        "longest-exact-integer",
        "deepest",
        "many-brackets-in-a-string",
        "longest",
    ],
)
def test_decodes(text: str, value: Any) -> None:
    assert decode_json_arguments(text) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": NaN}', "constant"),
        ('{"a": [Infinity]}', "constant"),
        ("-Infinity", "constant"),
        ('{"prompt": "a", "prompt": "b", "after_seconds": 60}', "repeated_key"),
        ('{"at": {"date": "x", "date": "y"}}', "repeated_key"),
        ("", "not_json"),
        ("   ", "not_json"),
        ("{} {}", "not_json"),
        ('{"a": 1,}', "not_json"),
        ("{'a': 1}", "not_json"),
        ('{"a": "tab\there"}', "not_json"),
        ('{"a": 01}', "not_json"),
        ('{"a": "unterminated', "not_json"),
        ('"\\"' * 20_000, "not_json"),  # unterminated, full of escaped quotes: still linear
        ("\ufeff{}", "not_json"),
        ("{" + " " * MAX_JSON_ARGUMENTS_LENGTH + "}", "too_long"),
        (nested(MAX_JSON_ARGUMENTS_DEPTH + 1), "too_deep"),
        ("[" * (MAX_JSON_ARGUMENTS_LENGTH // 2), "too_deep"),
        ('{"a": ' * 40 + "1" + "}" * 40, "too_deep"),
        ("[]" * (MAX_JSON_ARGUMENTS_LENGTH // 2), "not_json"),
    ],
)
def test_refuses(text: str, reason: str) -> None:
    with pytest.raises(JsonArgumentsError) as raised:
        decode_json_arguments(text)
    assert raised.value.reason == reason
    assert str(raised.value) == raised.value.args[0]


def _error(result: object) -> ErrorCode:
    assert isinstance(result, ToolError), result
    return result.code


def test_each_tool_takes_the_text_of_an_object() -> None:
    assert parse_create_input('{"prompt": " stretch ", "after_seconds": 60.0}') == CreateInput(
        " stretch ", AfterSelector(60)
    )
    assert parse_list_input("{}") == ListInput()
    assert parse_list_input('{"anything": [1, 2]}') == ListInput()
    assert parse_delete_input('{"id": "schedule-1"}') == DeleteInput("schedule-1")


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_create_input, '{"prompt": "x", "after_seconds": NaN}'),
        (parse_create_input, '{"prompt": "x", "prompt": "y", "after_seconds": 60}'),
        (parse_create_input, '{"prompt": "x", "after_seconds": 60'),
        (parse_list_input, ""),
        (parse_list_input, "{" + " " * MAX_JSON_ARGUMENTS_LENGTH + "}"),
        (parse_delete_input, nested(100)),
    ],
)
def test_a_text_that_is_not_strict_bounded_json_is_invalid_selector(parse: Any, text: str) -> None:
    result = parse(text)
    assert _error(result) is ErrorCode.INVALID_SELECTOR
    assert result.message.startswith("Tool arguments given as text must be one JSON object")


@pytest.mark.parametrize("text", ["[1]", '"text"', "null", "5", "true", '"{}"'])
def test_a_text_of_something_else_is_not_an_object(text: str) -> None:
    for parse in (parse_create_input, parse_list_input, parse_delete_input):
        result = parse(text)
        assert isinstance(result, ToolError)
        assert result.code is ErrorCode.INVALID_SELECTOR
        assert result.message == "Tool arguments must be a JSON object."


def test_the_text_keeps_the_presence_rule() -> None:
    """A selector present with ``null`` still counts toward exactly one."""
    assert _error(parse_create_input('{"prompt": "p", "every_seconds": null}')) == "invalid_rule"
    both = '{"prompt": "p", "after_seconds": 60, "at": null}'
    assert _error(parse_create_input(both)) == "invalid_selector"


class Text(str):
    """A ``str`` subclass that lies about its length."""

    def __len__(self) -> int:
        return 2


def test_a_str_subclass_is_measured_by_what_it_is() -> None:
    huge = Text("{" + " " * (MAX_JSON_ARGUMENTS_LENGTH + 1) + "}")
    assert _error(parse_list_input(huge)) == "invalid_selector"
    assert parse_list_input(Text("{}")) == ListInput()


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(10**150), max_value=10**150),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
        st.sampled_from(["", " ", "schedule-1", "2026-08-06T09:00:00+08:00", "Asia/Shanghai"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
keys = st.sampled_from(["prompt", "after_seconds", "at", "every_seconds", "id", "cron"])
objects = st.one_of(
    st.dictionaries(keys, json_values, max_size=4),
    st.fixed_dictionaries(
        {"prompt": st.one_of(st.text(), json_values)},
        optional={
            "after_seconds": st.one_of(st.integers(), json_values),
            "at": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {"date": json_values, "time": json_values, "time_zone": json_values}
                ),
            ),
            "every_seconds": st.one_of(st.integers(min_value=-(2**60), max_value=2**60)),
        },
    ),
    st.fixed_dictionaries({"id": st.one_of(st.text(), json_values)}),
)


@given(value=st.one_of(objects, json_values), ascii_only=st.booleans(), indent=st.booleans())
@settings(max_examples=200, deadline=None)
def test_a_text_is_judged_exactly_as_its_value(value: Any, ascii_only: bool, indent: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=2 if indent else None)
    for parse in (parse_create_input, parse_list_input, parse_delete_input):
        if isinstance(value, str):  # a str argument is itself JSON text: decoded once only
            assert parse(text) == ToolError.of(ErrorCode.INVALID_SELECTOR, "not_object")
        else:
            assert parse(text) == parse(value)
