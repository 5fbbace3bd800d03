"""JSON number semantics."""

from __future__ import annotations

import math

import pytest

from messages._numbers import MAX_SAFE_INTEGER, json_integer


def test_max_safe_integer_is_javascripts() -> None:
    assert MAX_SAFE_INTEGER == 9_007_199_254_740_991


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0),
        (-7, -7),
        (2**70, 2**70),
        (1.0, 1),
        (-3.0, -3),
        (1e16, 10**16),
        (0.0, 0),
        (-0.0, 0),
    ],
)
def test_integral_numbers_are_integers(value: object, expected: int) -> None:
    result = json_integer(value)
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize(
    "value",
    [True, False, 1.5, -0.5, math.nan, math.inf, -math.inf, "1", None, [1], b"1"],
)
def test_everything_else_is_not_an_integer(value: object) -> None:
    assert json_integer(value) is None
