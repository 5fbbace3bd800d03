"""Tool arguments given as JSON text, the way LLM APIs deliver them.

An OpenAI-format tool call carries ``function.arguments`` as a string holding
a JSON object. The tools accept that string as is: :func:`decode_json_arguments`
parses it once, strictly, and the tool then judges the value exactly as it
judges an object handed over directly.

Strict means RFC 8259 JSON and nothing more:

- ``NaN``, ``Infinity`` and ``-Infinity`` are refused (Python's ``json`` module
  would accept them);
- an object that repeats a key is refused at any depth (which of the values
  would count is a guess; ``JSON.parse`` and Python keep the last one);
- the text is bounded *before* it is parsed: at most
  :data:`MAX_JSON_ARGUMENTS_LENGTH` characters and
  :data:`MAX_JSON_ARGUMENTS_DEPTH` levels of nesting, so a huge or deeply
  nested text costs at most one linear scan of that many characters and never
  reaches the parser's recursion.

An integer literal of more than :data:`MAX_INTEGER_DIGITS` digits decodes as
``±10**MAX_INTEGER_DIGITS``: every such integer lies outside every range a tool
accepts, so no verdict changes, and decoding never converts a huge literal.
Anything else (an empty text, trailing data, raw control characters inside a
string) is refused as invalid JSON. One text is decoded once: a text that holds
a JSON string is that string, not the object it may spell.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Literal

__all__ = [
    "MAX_INTEGER_DIGITS",
    "MAX_JSON_ARGUMENTS_DEPTH",
    "MAX_JSON_ARGUMENTS_LENGTH",
    "JsonArgumentsError",
    "decode_json_arguments",
]

MAX_JSON_ARGUMENTS_LENGTH = 65_536
"""The longest JSON text accepted as tool arguments, in characters (code points).

Sixteen times the longest prompt: room for a prompt whose every character is
written as a six-character ``\\uXXXX`` escape, and for whitespace."""

MAX_JSON_ARGUMENTS_DEPTH = 32
"""The deepest nesting of arrays and objects accepted in a JSON arguments text.

Valid arguments nest two levels (the arguments and an ``at`` object)."""

MAX_INTEGER_DIGITS = 100
"""Integer literals longer than this many digits decode as ``±10**MAX_INTEGER_DIGITS``."""

Reason = Literal["too_long", "too_deep", "not_json", "constant", "repeated_key"]
"""Why a text was refused."""

_HUGE: int = 10**MAX_INTEGER_DIGITS

# A string, running to the end of the text when it is not closed, so the pattern
# matches at every quote and never backtracks (possessive quantifiers): linear.
_STRINGS = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.S)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]++")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_CHUNK = 256


class JsonArgumentsError(ValueError):
    """A JSON arguments text was refused; ``reason`` says why (the message is fixed)."""

    reason: Reason

    def __init__(self, reason: Reason) -> None:
        super().__init__(_MESSAGES[reason])
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return (JsonArgumentsError, (self.reason,))


_MESSAGES: dict[Reason, str] = {
    "too_long": f"The JSON text is longer than {MAX_JSON_ARGUMENTS_LENGTH} characters.",
    "too_deep": f"The JSON text nests deeper than {MAX_JSON_ARGUMENTS_DEPTH} levels.",
    "not_json": "The text is not one valid JSON value.",
    "constant": "NaN, Infinity and -Infinity are not JSON.",
    "repeated_key": "A JSON object in the text repeats a key.",
}


class _RepeatedKeyError(Exception):
    pass


class _ConstantError(Exception):
    pass


def _object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _RepeatedKeyError
    return value


def _constant(_name: str) -> object:
    raise _ConstantError


def _integer(literal: str) -> int:
    digits = len(literal) - (literal[0] == "-")
    if digits > MAX_INTEGER_DIGITS:
        return -_HUGE if literal[0] == "-" else _HUGE
    return int(literal)


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object, parse_constant=_constant, parse_int=_integer, strict=True
)


def _nests_deeper_than(text: str, limit: int) -> bool:
    """Whether arrays and objects in ``text`` nest deeper than ``limit``.

    Brackets inside strings do not count. The strings and everything but the
    brackets are removed by two linear regular-expression passes; the depth is
    then summed over the brackets in chunks, stopping at the first chunk that
    goes too deep. Malformed text is scanned as well as it can be (the parser
    refuses it afterwards).
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    depth = 0
    for start in range(0, len(brackets), _CHUNK):
        steps = map(_DEPTH_STEP.__getitem__, brackets[start : start + _CHUNK])
        depths = list(itertools.accumulate(steps, initial=depth))
        if max(depths) > limit:
            return True
        depth = depths[-1]
    return False


def decode_json_arguments(text: str) -> object:
    """The value of a strict JSON text, bounded before parsing; see the module docstring.

    ``text`` must be an exact ``str``. Raises :class:`JsonArgumentsError`.
    """
    if len(text) > MAX_JSON_ARGUMENTS_LENGTH:
        raise JsonArgumentsError("too_long")
    if _nests_deeper_than(text, MAX_JSON_ARGUMENTS_DEPTH):
        raise JsonArgumentsError("too_deep")
    try:
        value: object = _DECODER.decode(text)
    except _RepeatedKeyError:
        raise JsonArgumentsError("repeated_key") from None
    except _ConstantError:
        raise JsonArgumentsError("constant") from None
    except (ValueError, RecursionError):
        raise JsonArgumentsError("not_json") from None
    return value
