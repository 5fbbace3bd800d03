"""ECMAScript-compatible string rules: trim, lone surrogates, ``JSON.stringify``."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal

__all__ = [
    "ECMASCRIPT_WHITESPACE",
    "canonical_json",
    "ecma_trim",
    "has_lone_surrogate",
    "is_ecma_trimmed",
    "js_json_string",
]

ECMASCRIPT_WHITESPACE: frozenset[str] = frozenset(
    "\t\n\u000b\u000c\r \u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""The characters ``String.prototype.trim`` removes (WhiteSpace and LineTerminator)."""

_WS_CHARS = "".join(sorted(ECMASCRIPT_WHITESPACE))
_SURROGATE = re.compile("[\ud800-\udfff]")
_STRING_ENCODER = json.JSONEncoder(ensure_ascii=False)
_PLAIN_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_PLAIN_DEPTH = 32
"""Deeper values take the general path (which also reports circular containers)."""


def ecma_trim(s: str) -> str:
    """Return ``s`` without leading and trailing ECMAScript whitespace (JS ``s.trim()``)."""
    return s.strip(_WS_CHARS)


def is_ecma_trimmed(s: str) -> bool:
    """Tell whether ``s`` equals its own ECMAScript trim."""
    return not s or (s[0] not in ECMASCRIPT_WHITESPACE and s[-1] not in ECMASCRIPT_WHITESPACE)


def has_lone_surrogate(s: str) -> bool:
    """Tell whether ``s`` holds a surrogate code point (U+D800–U+DFFF): not valid Unicode."""
    return _SURROGATE.search(s) is not None


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def js_json_string(s: str) -> str:
    """Return exactly what JavaScript's ``JSON.stringify(s)`` produces for the string ``s``.

    Every surrogate code point is escaped as ``\\udxxx``, so the output is always
    valid Unicode; all other non-ASCII characters stay literal.
    """
    out = _STRING_ENCODER.encode(s)
    if _SURROGATE.search(out) is None:
        return out
    return _SURROGATE.sub(_escape_surrogate, out)


def _js_number(value: float) -> str:
    """Format a finite float like ECMAScript ``Number.prototype.toString``."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    raw = "".join(map(str, digit_tuple))
    digits = raw.rstrip("0")
    k = len(digits)
    n = int(exponent) + len(raw)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def _encode(value: object, parts: list[str], stack: set[int]) -> None:
    if isinstance(value, str):
        parts.append(js_json_string(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(str(int(value)))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("canonical_json: NaN and Infinity are not JSON")
        parts.append(_js_number(value))
    elif isinstance(value, Mapping | list | tuple):
        marker = id(value)
        if marker in stack:
            raise ValueError("canonical_json: circular reference")
        stack.add(marker)
        if isinstance(value, Mapping):
            parts.append("{")
            for i, (key, item) in enumerate(value.items()):
                if not isinstance(key, str):
                    raise ValueError(f"canonical_json: object key {key!r:.60} is not a string")
                if i:
                    parts.append(",")
                parts.append(js_json_string(key))
                parts.append(":")
                _encode(item, parts, stack)
            parts.append("}")
        else:
            parts.append("[")
            for i, item in enumerate(value):
                if i:
                    parts.append(",")
                _encode(item, parts, stack)
            parts.append("]")
        stack.discard(marker)
    else:
        raise ValueError(f"canonical_json: {type(value).__name__} is not a JSON value")


_LEAVES = frozenset({str, int, bool, type(None)})


def _plain(value: object, depth: int) -> bool:
    """Whether ``value`` holds only ``dict`` (string keys), ``list``, ``tuple``, ``str``,
    ``int``, ``bool`` and ``None``, exactly those types, nested at most ``depth`` deep.

    For such a value :mod:`json` writes the text :func:`_encode` writes, except
    for surrogates, which :func:`canonical_json` looks for in the output.
    """
    kind = type(value)
    if kind in _LEAVES:
        return True
    if depth <= 0:
        return False
    leaves = _LEAVES
    if kind is dict:
        mapping: dict[object, object] = value  # type: ignore[assignment]
        for key, item in mapping.items():
            if type(key) is not str or (type(item) not in leaves and not _plain(item, depth - 1)):
                return False
        return True
    if kind is list or kind is tuple:
        items: list[object] = value  # type: ignore[assignment]
        return all(type(item) in leaves or _plain(item, depth - 1) for item in items)
    return False


def canonical_json(value: object) -> str:
    """Encode a JSON value compactly and deterministically, as ``JSON.stringify`` would.

    Mapping keys keep their given order and must be strings; lists and tuples are
    arrays; numbers print like JavaScript (integral floats as integers). NaN,
    Infinity, circular containers and non-JSON types raise ``ValueError``.
    """
    if _plain(value, _PLAIN_DEPTH):  # the common case: C speed, the same text
        out = _PLAIN_ENCODER.encode(value)
        if _SURROGATE.search(out) is None:
            return out
    parts: list[str] = []
    _encode(value, parts, set())
    return "".join(parts)
