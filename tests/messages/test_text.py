"""ECMAScript trim, lone surrogates, JSON.stringify of strings, canonical JSON."""

from __future__ import annotations

import json
import math
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages import ErrorCode
from messages._text import (
    ECMASCRIPT_WHITESPACE,
    _encode,
    canonical_json,
    ecma_trim,
    has_lone_surrogate,
    is_ecma_trimmed,
    js_json_string,
)

SPEC_WHITESPACE = frozenset(
    [chr(c) for c in range(0x09, 0x0E)]
    + ["\u0020", "\u00a0", "\u1680"]
    + [chr(c) for c in range(0x2000, 0x200B)]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"]
)

any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
valid_text = st.text(max_size=40)  # hypothesis never draws surrogates by default
whitespace_heavy = st.text(
    st.one_of(
        st.sampled_from(sorted(SPEC_WHITESPACE | {"\x1c", "\x1f", "\x85", "a", "b"})),
        st.characters(),
    ),
    max_size=20,
)


def reference_trim(s: str) -> str:
    start, end = 0, len(s)
    while start < end and s[start] in SPEC_WHITESPACE:
        start += 1
    while end > start and s[end - 1] in SPEC_WHITESPACE:
        end -= 1
    return s[start:end]


def reference_js_json_string(s: str) -> str:
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
    short["\t"] = "\\t"
    out = []
    for ch in s:
        if ch in short:
            out.append(short[ch])
        elif ord(ch) < 0x20 or 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def test_whitespace_set_is_exactly_the_spec_set() -> None:
    assert ECMASCRIPT_WHITESPACE == SPEC_WHITESPACE
    assert len(ECMASCRIPT_WHITESPACE) == 25


@pytest.mark.parametrize("ch", sorted(SPEC_WHITESPACE))
def test_trim_removes_each_whitespace_at_both_ends(ch: str) -> None:
    assert ecma_trim(f"{ch}{ch}a{ch}b{ch}") == f"a{ch}b"
    assert not is_ecma_trimmed(f"{ch}a")
    assert not is_ecma_trimmed(f"a{ch}")
    assert is_ecma_trimmed(f"a{ch}b")


@pytest.mark.parametrize("ch", ["\x1c", "\x1d", "\x1e", "\x1f", "\x85"])
def test_trim_keeps_what_python_strip_removes(ch: str) -> None:
    assert ecma_trim(f"{ch}a{ch}") == f"{ch}a{ch}"
    assert f"{ch}a{ch}".strip() == "a"
    assert is_ecma_trimmed(f"{ch}a{ch}")


def test_trim_removes_bom_which_python_strip_keeps() -> None:
    assert ecma_trim("\ufeffa\ufeff") == "a"
    assert "\ufeffa\ufeff".strip() == "\ufeffa\ufeff"


@pytest.mark.parametrize(
    ("text", "trimmed"), [("", True), ("a", True), (" ", False), ("\u3000", False)]
)
def test_is_ecma_trimmed_edges(text: str, trimmed: bool) -> None:
    assert is_ecma_trimmed(text) is trimmed


@settings(max_examples=200)
@given(whitespace_heavy)
def test_trim_matches_reference(s: str) -> None:
    assert ecma_trim(s) == reference_trim(s)
    assert is_ecma_trimmed(s) is (s == reference_trim(s))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", False),
        ("plain", False),
        ("emoji 😀", False),
        ("\ud800", True),
        ("a\udfffb", True),
        ("\udbff\udc00", True),  # a pair of code points is still two surrogates in a str
    ],
)
def test_has_lone_surrogate(text: str, expected: bool) -> None:
    assert has_lone_surrogate(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", '""'),
        ("plain", '"plain"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
        ("\x00\x01\x0b\x0e\x1f", '"\\u0000\\u0001\\u000b\\u000e\\u001f"'),
        ("\x1a", '"\\u001a"'),
        ("\x7f", '"\x7f"'),
        ("\u2028\u2029", '"\u2028\u2029"'),
        ("é ü 中 😀", '"é ü 中 😀"'),
        ("/", '"/"'),
        ("\ud800", '"\\ud800"'),
        ("a\udabcb", '"a\\udabcb"'),
        ("\udfff", '"\\udfff"'),
    ],
)
def test_js_json_string_table(text: str, expected: str) -> None:
    assert js_json_string(text) == expected


@settings(max_examples=200)
@given(valid_text)
def test_js_json_string_parses_back(s: str) -> None:
    assert json.loads(js_json_string(s)) == s


@settings(max_examples=200)
@given(any_text)
def test_js_json_string_matches_reference_and_is_clean(s: str) -> None:
    out = js_json_string(s)
    assert out == reference_js_json_string(s)
    assert not any(ord(ch) < 0x20 for ch in out)
    assert not has_lone_surrogate(out)
    out.encode("utf-8")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-12, "-12"),
        (2**64, "18446744073709551616"),
        (1.0, "1"),
        (-0.0, "0"),
        (1.5, "1.5"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1.5e-6, "0.0000015"),
        (1.23e-18, "1.23e-18"),
        (float(2**60), "1152921504606847000"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        ("a\nb", '"a\\nb"'),
        ([], "[]"),
        ({}, "{}"),
        ((1, "x"), '[1,"x"]'),
        ({"b": 1, "a": [True, None]}, '{"b":1,"a":[true,null]}'),
        (MappingProxyType({"z": {"y": 1.0}}), '{"z":{"y":1}}'),
        ({"code": ErrorCode.INVALID_RULE}, '{"code":"invalid_rule"}'),
        ({"k\ud800": "\u2028"}, '{"k\\ud800":"\u2028"}'),
    ],
)
def test_canonical_json_table(value: object, expected: str) -> None:
    assert canonical_json(value) == expected


def _circular() -> list[object]:
    items: list[object] = []
    items.append(items)
    return items


@pytest.mark.parametrize(
    "value",
    [
        math.nan,
        math.inf,
        -math.inf,
        [1, math.nan],
        {"a": {"b": math.inf}},
        {1: "x"},
        {("a",): 1},
        {1, 2},
        b"bytes",
        object(),
        _circular(),
    ],
)
def test_canonical_json_rejects_non_json(value: object) -> None:
    with pytest.raises(ValueError, match="canonical_json"):
        canonical_json(value)


def test_canonical_json_allows_shared_non_circular_children() -> None:
    shared = [1]
    assert canonical_json({"a": shared, "b": shared}) == '{"a":[1],"b":[1]}'


def _as_floats(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float | list | dict):
        return value
    if isinstance(value, list):
        return [_as_floats(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_floats(item) for key, item in value.items()}
    return float(value)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | valid_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(valid_text, children, max_size=4)
    ),
    max_leaves=15,
)


@settings(max_examples=200)
@given(json_values)
def test_canonical_json_is_deterministic_and_loadable(value: object) -> None:
    out = canonical_json(value)
    assert out == canonical_json(value)
    # JSON.parse semantics: every number is a double, so compare as floats.
    assert json.loads(out, parse_int=float) == _as_floats(value)
    assert canonical_json(json.loads(out)) == out


def _slow_canonical_json(value: object) -> str:
    """The general encoder alone, without the plain-value fast path."""
    parts: list[str] = []
    _encode(value, parts, set())
    return "".join(parts)


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | any_text,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(any_text, children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400)
@given(plain_values)
def test_canonical_json_fast_path_equals_the_general_encoder(value: object) -> None:
    # Lone surrogates included: the fast path must hand those to the general encoder.
    assert canonical_json(value) == _slow_canonical_json(value)


@pytest.mark.parametrize(
    "value",
    [
        {"a": "\ud800"},
        ["\udfff", 1],
        {"\udc00": None},
        {"a": 1.5, "b": 2.0},
        {"mapping": MappingProxyType({"x": 1})},
        _nested(40),
        {"control": '\x00\x1f\b\f\n\r\t"\\', "lines": "\u2028\u2029"},
        {"enum": ErrorCode.INTERNAL_ERROR},
    ],
)
def test_canonical_json_fast_path_hands_over_what_it_cannot_write(value: object) -> None:
    assert canonical_json(value) == _slow_canonical_json(value)
