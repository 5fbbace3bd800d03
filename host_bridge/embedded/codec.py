"""The msgpack codec of event payloads stored by the embedded host.

Payloads are JSON-like values only: ``dict`` with ``str`` keys, ``list`` (a
``tuple`` is encoded as a list), ``str`` (valid Unicode, no lone surrogates),
``int`` in msgpack's range (``-2**63 … 2**64-1``), ``float``, ``bool`` and
``None``. Encoding is deterministic: the same value, including the insertion
order of its dict keys, always gives the same bytes (dict order is kept rather
than sorted so that a decoded value is identical to the one appended).

Decoding is strict and bounded: at most :data:`MAX_PAYLOAD_BYTES` of input,
str keys only, no duplicate keys, no binary values, no extension types
(msgpack timestamps included), nothing after the value. Every failure raises
:class:`PayloadError`, whose message never contains the raw payload bytes.
"""

from __future__ import annotations

from typing import Any, NoReturn

import msgpack

__all__ = [
    "MAX_NESTING",
    "MAX_PAYLOAD_BYTES",
    "PayloadError",
    "decode_payload",
    "encode_payload",
    "encode_payload_copy",
]

MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""The largest payload (16 MiB) that :func:`encode_payload` produces and
:func:`decode_payload` reads."""

MAX_NESTING = 500
"""The deepest nesting of lists and dicts that :func:`encode_payload` accepts."""

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


class PayloadError(ValueError):
    """A value cannot be encoded as a payload, or stored bytes are not a valid payload."""


def encode_payload(data: object) -> bytes:
    """Encode a JSON-like value as msgpack bytes (``use_bin_type=True``).

    Raises :class:`PayloadError` for any other value: unsupported types, non-str
    dict keys, integers outside msgpack's range, strings with lone surrogates,
    nesting deeper than :data:`MAX_NESTING` (including cycles) or an encoding
    larger than :data:`MAX_PAYLOAD_BYTES`.
    """
    _check_encodable(data)
    try:
        raw: bytes = msgpack.packb(data, use_bin_type=True, strict_types=False)
    except UnicodeEncodeError:
        raise PayloadError(
            "payload contains a string that is not valid Unicode (lone surrogate)"
        ) from None
    except (
        TypeError,
        ValueError,
        OverflowError,
    ) as error:  # pragma: no cover - guarded by _check_encodable
        raise PayloadError(f"payload cannot be encoded ({type(error).__name__})") from None
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadError(
            f"encoded payload is {len(raw)} bytes, more than the {MAX_PAYLOAD_BYTES} allowed"
        )
    return raw


def encode_payload_copy(data: object) -> tuple[bytes, object]:
    """Encode ``data`` and return the bytes with the value a decode of them gives.

    One walk checks ``data`` as :func:`encode_payload` does and copies it to
    exact built-ins (tuples become lists, ``str``/``int``/``float`` subclasses
    their base type); the copy is what is packed, so ``decode_payload`` of the
    bytes equals the copy, without decoding. Raises :class:`PayloadError` as
    :func:`encode_payload` does, and for a dict whose keys collide once copied.
    """
    copy = _plain(data)
    try:
        raw: bytes = msgpack.packb(copy, use_bin_type=True)
    except UnicodeEncodeError:
        raise PayloadError(
            "payload contains a string that is not valid Unicode (lone surrogate)"
        ) from None
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadError(
            f"encoded payload is {len(raw)} bytes, more than the {MAX_PAYLOAD_BYTES} allowed"
        )
    return raw, copy


def _plain(data: object) -> object:
    """``data`` copied to exact JSON-like built-ins, iteratively; PayloadError otherwise."""
    root: list[object] = [None]
    stack: list[tuple[object, int, list[object] | dict[str, object], int | str]] = [
        (data, 0, root, 0)
    ]
    while stack:
        value, depth, parent, slot = stack.pop()
        kind = type(value)
        copy: object
        if kind is str or kind is float or kind is bool or value is None:
            copy = value
        elif kind is int or (isinstance(value, int) and not isinstance(value, bool)):
            assert isinstance(value, int)
            copy = value if kind is int else int.__int__(value)
            if not _INT_MIN <= copy <= _INT_MAX:
                raise PayloadError("payload contains an integer outside msgpack's 64-bit range")
        elif isinstance(value, dict | list | tuple):
            if depth >= MAX_NESTING:
                raise PayloadError(
                    f"payload is nested deeper than {MAX_NESTING} levels (or is cyclic)"
                )
            if isinstance(value, dict):
                mapping: dict[str, object] = {}
                for key, item in value.items():
                    if type(key) is not str:
                        if not isinstance(key, str):
                            raise PayloadError(
                                f"payload has a dict key of type {type(key).__name__}; "
                                "keys must be str"
                            )
                        key = str.__str__(key)  # noqa: PLW2901 - the copy's exact key
                    mapping[key] = None  # the key's place, in order; filled below
                    stack.append((item, depth + 1, mapping, key))
                if len(mapping) != len(value):
                    raise PayloadError("payload has a duplicate map key")
                copy = mapping
            else:
                items: list[object] = [None] * len(value)
                stack.extend((item, depth + 1, items, i) for i, item in enumerate(value))
                copy = items
        elif isinstance(value, str):
            copy = str.__str__(value)
        elif isinstance(value, float):
            copy = float.__float__(value)
        else:
            raise PayloadError(
                f"payload contains a value of unsupported type {type(value).__name__}"
            )
        parent[slot] = copy  # type: ignore[index]
    return root[0]


def decode_payload(raw: bytes) -> object:
    """Decode msgpack bytes produced by :func:`encode_payload` back to a JSON-like value.

    Arrays decode as lists. Raises :class:`PayloadError` for anything that is not
    exactly one valid, JSON-like msgpack value of at most :data:`MAX_PAYLOAD_BYTES`.
    """
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise PayloadError(f"payload must be bytes, not {type(raw).__name__}")
    size = len(raw) if not isinstance(raw, memoryview) else raw.nbytes
    if size == 0:
        raise PayloadError("payload is empty")
    if size > MAX_PAYLOAD_BYTES:
        raise PayloadError(f"payload is {size} bytes, more than the {MAX_PAYLOAD_BYTES} allowed")
    # Every element takes at least one byte, so no length in the payload may exceed its
    # size: a few header bytes then cannot make msgpack reserve room for millions of items.
    try:
        value = msgpack.unpackb(
            raw,
            raw=False,
            use_list=True,
            strict_map_key=True,
            unicode_errors="strict",
            ext_hook=_reject_ext,
            list_hook=_checked_list,
            object_pairs_hook=_checked_map,
            max_str_len=size,
            max_bin_len=size,
            max_array_len=size,
            max_map_len=size // 2,
            max_ext_len=size,
        )
    except PayloadError:
        raise
    except msgpack.ExtraData:
        raise PayloadError("payload has trailing bytes after its value") from None
    except UnicodeDecodeError:
        raise PayloadError("payload contains a string that is not valid UTF-8") from None
    except msgpack.StackError:
        raise PayloadError("payload is nested too deeply") from None
    except ValueError as error:
        reason = str(error)
        if "incomplete" in reason:
            raise PayloadError("payload is truncated") from None
        if "exceeds max_" in reason:
            raise PayloadError("payload declares a length larger than the payload") from None
        if "map key" in reason:
            raise PayloadError("payload has a map key that is not a str") from None
        raise PayloadError("payload is not valid msgpack (ValueError)") from None
    except Exception as error:
        raise PayloadError(f"payload is not valid msgpack ({type(error).__name__})") from None
    _check_item(value)
    return value


def _check_encodable(data: object) -> None:
    """Walk ``data`` iteratively; raise PayloadError at the first non-JSON-like part."""
    stack: list[tuple[object, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if value is None or isinstance(value, bool | str | float):
            continue
        if isinstance(value, int):
            if not _INT_MIN <= value <= _INT_MAX:
                raise PayloadError("payload contains an integer outside msgpack's 64-bit range")
            continue
        if isinstance(value, dict | list | tuple):
            if depth >= MAX_NESTING:
                raise PayloadError(
                    f"payload is nested deeper than {MAX_NESTING} levels (or is cyclic)"
                )
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise PayloadError(
                            f"payload has a dict key of type {type(key).__name__}; keys must be str"
                        )
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)
            continue
        raise PayloadError(f"payload contains a value of unsupported type {type(value).__name__}")


def _check_item(value: object) -> None:
    """Reject a decoded leaf that is not JSON-like (bytes, msgpack timestamps...)."""
    if value is None or isinstance(value, bool | int | float | str | list | dict):
        return
    if isinstance(value, bytes):
        _fail("payload contains a binary value; only JSON-like values are allowed")
    _fail(f"payload contains a value of unsupported type {type(value).__name__}")


def _checked_list(items: list[Any]) -> list[Any]:
    for item in items:
        _check_item(item)
    return items


def _checked_map(pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, item in pairs:
        if not isinstance(key, str):
            _fail(f"payload has a map key of type {type(key).__name__}; keys must be str")
        if key in result:
            _fail("payload has a duplicate map key")
        _check_item(item)
        result[key] = item
    return result


def _reject_ext(code: int, _data: bytes) -> NoReturn:
    _fail(f"payload contains msgpack extension type {code}; extension types are not allowed")


def _fail(message: str) -> NoReturn:
    raise PayloadError(message)
