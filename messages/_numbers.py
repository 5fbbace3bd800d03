"""JSON number semantics shared by the protocol and the tools."""

from __future__ import annotations

import math

__all__ = ["MAX_SAFE_INTEGER", "json_integer"]

MAX_SAFE_INTEGER = 2**53 - 1
"""JavaScript's ``Number.MAX_SAFE_INTEGER``: the upper bound of every count in the protocol."""


def json_integer(value: object) -> int | None:
    """Return ``value`` as an ``int`` if it is an integral JSON number, else ``None``.

    ``int`` (never ``bool``) is itself; a finite integral ``float`` such as ``1.0``
    is its integer; everything else (bools, NaN, infinities, fractions, strings,
    ``None``) is not an integer.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None
