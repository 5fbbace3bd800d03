"""The msgpack payload codec: JSON-like round trips and every rejection."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host_bridge.embedded.codec import (
    MAX_NESTING,
    MAX_PAYLOAD_BYTES,
    PayloadError,
    decode_payload,
    encode_payload,
    encode_payload_copy,
)

ROUND_TRIPS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**64 - 1,
    -(2**63),
    1.5,
    -0.0,
    1e308,
    "",
    "plain",
    "é ✓ 🎉 \u2028 \x00 \ufeff",
    [],
    {},
    [1, "two", 3.0, None, [False, {"k": []}]],
    {
        "version": 1,
        "operation": "create",
        "schedule": {"id": "schedule-1", "kind": "after", "afterSeconds": 60},
    },
    {"": "empty key", "🔑": {"nested": [{"deep": [1, 2, 3]}]}},
]


@pytest.mark.parametrize("value", ROUND_TRIPS)
def test_round_trip(value: Any) -> None:
    decoded = decode_payload(encode_payload(value))
    assert decoded == value
    assert type(decoded) is type(value)


def test_round_trip_keeps_dict_key_order() -> None:
    value = {"z": 1, "a": 2, "m": {"y": 3, "b": 4}}
    decoded = decode_payload(encode_payload(value))
    assert isinstance(decoded, dict)
    assert list(decoded) == ["z", "a", "m"]
    assert list(decoded["m"]) == ["y", "b"]


def test_tuples_become_lists() -> None:
    assert decode_payload(encode_payload((1, (2, 3), {"t": ()}))) == [1, [2, 3], {"t": []}]


def test_non_finite_floats_round_trip() -> None:
    decoded = decode_payload(encode_payload([math.inf, -math.inf, math.nan]))
    assert isinstance(decoded, list)
    assert decoded[:2] == [math.inf, -math.inf]
    assert math.isnan(decoded[2])


def test_encoding_is_deterministic() -> None:
    def build() -> dict[str, Any]:
        return {"b": [1, 2.5, "x"], "a": {"n": None, "t": True}, "i": 2**40}

    first = encode_payload(build())
    assert first == encode_payload(build())
    assert first == encode_payload(build())
    # ints use their smallest encoding, floats are always 64-bit
    assert encode_payload(1) == b"\x01"
    assert encode_payload(1.0) == b"\xcb" + bytes.fromhex("3ff0000000000000")


def test_encoding_uses_msgpack_str_type() -> None:
    assert encode_payload("é") == msgpack.packb("é", use_bin_type=True)


class _Custom:
    pass


@pytest.mark.parametrize(
    "value",
    [
        b"bytes",
        bytearray(b"x"),
        {1, 2},
        frozenset(),
        _Custom(),
        object(),
        1j,
        {"ok": [1, {"bad": b"\x00"}]},
        [None, {2}],
    ],
    ids=lambda v: type(v).__name__,
)
def test_encode_rejects_unsupported_types(value: object) -> None:
    with pytest.raises(PayloadError, match="unsupported type"):
        encode_payload(value)


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, [1, 10**30]])
def test_encode_rejects_out_of_range_ints(value: object) -> None:
    with pytest.raises(PayloadError, match="64-bit range"):
        encode_payload(value)


@pytest.mark.parametrize("value", [{1: "x"}, {("a",): 1}, {None: 1}, {"ok": {b"k": 1}}, {True: 1}])
def test_encode_rejects_non_str_keys(value: object) -> None:
    with pytest.raises(PayloadError, match="keys must be str"):
        encode_payload(value)


@pytest.mark.parametrize("value", ["\ud800", "ok\udfff", {"k\udc80": 1}, ["x", {"y": "\ud83d"}]])
def test_encode_rejects_lone_surrogates(value: object) -> None:
    with pytest.raises(PayloadError, match="lone surrogate"):
        encode_payload(value)


def test_encode_accepts_nesting_up_to_the_limit_and_rejects_deeper() -> None:
    ok: Any = 0
    for _ in range(MAX_NESTING):
        ok = [ok]
    assert decode_payload(encode_payload(ok)) == ok
    with pytest.raises(PayloadError, match="nested deeper"):
        encode_payload([ok])


def test_encode_rejects_cycles() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(PayloadError, match="cyclic"):
        encode_payload(cyclic)


def test_encode_rejects_oversize() -> None:
    with pytest.raises(PayloadError, match="more than"):
        encode_payload("x" * MAX_PAYLOAD_BYTES)


def test_decode_rejects_oversize_input_before_parsing() -> None:
    with pytest.raises(PayloadError, match="more than"):
        decode_payload(b"\xc0" * (MAX_PAYLOAD_BYTES + 1))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (msgpack.packb(msgpack.ExtType(5, b"x")), "extension type 5"),
        (b"\x81\xa1a\x91\xd4\xfe\x00", "extension type -2"),  # {"a": [fixext1 type -2]}
        (msgpack.packb(msgpack.Timestamp(1, 0)), "unsupported type Timestamp"),
        (msgpack.packb([msgpack.Timestamp(1, 0)]), "unsupported type Timestamp"),
    ],
)
def test_decode_rejects_ext_types(raw: bytes, reason: str) -> None:
    with pytest.raises(PayloadError, match=reason):
        decode_payload(raw)


@pytest.mark.parametrize(
    "value",
    [b"secret", {"a": b"secret"}, [1, b"secret"], bytearray(b"secret")],
    ids=["top", "in-map", "in-list", "bytearray"],
)
def test_decode_rejects_bin_values(value: object) -> None:
    raw = msgpack.packb(value, use_bin_type=True)
    with pytest.raises(PayloadError, match="binary value"):
        decode_payload(raw)


@pytest.mark.parametrize(
    "raw",
    [
        msgpack.packb({1: 2}),
        msgpack.packb({"ok": {2.5: 1}}),
        msgpack.packb({b"k": 1}, use_bin_type=True),
        msgpack.packb({None: 1}),
    ],
)
def test_decode_rejects_non_str_keys(raw: bytes) -> None:
    with pytest.raises(PayloadError, match="map key"):
        decode_payload(raw)


def test_decode_rejects_duplicate_keys() -> None:
    raw = b"\x82" + msgpack.packb("a") + b"\x01" + msgpack.packb("a") + b"\x02"
    with pytest.raises(PayloadError, match="duplicate"):
        decode_payload(raw)


@pytest.mark.parametrize(
    "raw",
    [b"\xa1\xff", b"\xa3\xed\xa0\x80", b"\x81\xa2\xc3\x28\x01"],
    ids=["invalid-byte", "encoded-surrogate", "invalid-key"],
)
def test_decode_rejects_invalid_utf8(raw: bytes) -> None:
    with pytest.raises(PayloadError, match="UTF-8"):
        decode_payload(raw)


@pytest.mark.parametrize("raw", [b"\xc1", b"\xc1\x00\x00", b"\xd4"])
def test_decode_rejects_garbage(raw: bytes) -> None:
    with pytest.raises(PayloadError):
        decode_payload(raw)


def test_decode_rejects_every_truncation() -> None:
    raw = encode_payload({"key": ["value", 1, 2.5, {"n": None}], "s": "é" * 40})
    for cut in range(1, len(raw)):
        with pytest.raises(PayloadError):
            decode_payload(raw[:cut])


def test_decode_rejects_truncation_with_a_clear_message() -> None:
    with pytest.raises(PayloadError, match="truncated"):
        decode_payload(encode_payload(["abc", "def"])[:-2])


def test_decode_rejects_trailing_bytes() -> None:
    with pytest.raises(PayloadError, match="trailing"):
        decode_payload(encode_payload({"a": 1}) + b"\x00")


def test_decode_rejects_empty_and_non_bytes() -> None:
    with pytest.raises(PayloadError, match="empty"):
        decode_payload(b"")
    with pytest.raises(PayloadError, match="must be bytes"):
        decode_payload("\x01")  # type: ignore[arg-type]


def test_decode_rejects_excessive_nesting() -> None:
    with pytest.raises(PayloadError, match="nested too deeply"):
        decode_payload(b"\x91" * 5000 + b"\xc0")


def test_decode_accepts_bytearray_and_memoryview() -> None:
    raw = encode_payload({"a": [1]})
    assert decode_payload(bytearray(raw)) == {"a": [1]}  # type: ignore[arg-type]
    assert decode_payload(memoryview(raw)) == {"a": [1]}  # type: ignore[arg-type]


def test_errors_never_embed_raw_payload_bytes() -> None:
    secret = "TOPSECRET-PAYLOAD"
    broken = [
        msgpack.packb({"k": secret.encode()}, use_bin_type=True),
        msgpack.packb({secret: 1})[:-1],
        msgpack.packb({secret: 1}) + secret.encode(),
        msgpack.packb(msgpack.ExtType(9, secret.encode())),
        b"\xa5" + b"\xff" + secret.encode()[:4],
    ]
    for raw in broken:
        with pytest.raises(PayloadError) as info:
            decode_payload(raw)
        message = str(info.value)
        assert secret not in message
        assert secret[:4] not in message
        assert repr(raw) not in message
    with pytest.raises(PayloadError) as info:
        encode_payload({secret: {secret}})
    assert secret not in str(info.value)


def test_payload_error_is_a_value_error() -> None:
    assert issubclass(PayloadError, ValueError)


class _Text(str):
    pass


class _Count(int):
    pass


class _Real(float):
    pass


COPIES: list[Any] = [
    *ROUND_TRIPS,
    (1, ("a", [2.5])),
    {"t": (None,), _Text("k"): _Text("v"), "n": _Count(7), "r": _Real(0.5)},
    [_Count(2**64 - 1), _Text("é")],
]


@pytest.mark.parametrize("value", COPIES, ids=repr)
def test_encode_copy_gives_the_bytes_and_what_decoding_them_gives(value: Any) -> None:
    raw, copy = encode_payload_copy(value)
    decoded = decode_payload(encode_payload(value))
    assert raw == encode_payload(value)
    assert copy == decoded
    assert decode_payload(raw) == copy
    assert _types(copy) == _types(decoded)


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {type(k): _types(v) for k, v in value.items()} | {"": dict}
    if isinstance(value, list):
        return [list, *(_types(v) for v in value)]
    return type(value)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
@settings(max_examples=200, deadline=None)
def test_encode_copy_matches_encode_then_decode_for_any_json_like_value(value: Any) -> None:
    try:
        expected = encode_payload(value)
    except PayloadError:
        with pytest.raises(PayloadError):
            encode_payload_copy(value)
        return
    raw, copy = encode_payload_copy(value)
    assert raw == expected
    assert msgpack.packb(copy, use_bin_type=True) == raw
    assert repr(copy) == repr(decode_payload(raw))  # NaN-safe equality


def _deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def _cycle() -> Any:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    return cyclic


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"x", "unsupported type"),
        ({"ok": [1, {"bad": {1, 2}}]}, "unsupported type"),
        ([1, 10**30], "64-bit range"),
        (_Count(2**64), "64-bit range"),
        ({1: "x"}, "keys must be str"),
        ({True: 1}, "keys must be str"),
        (["x", {"y": "\ud83d"}], "lone surrogate"),
        ([_deep(MAX_NESTING)], "nested deeper"),
        (_cycle(), "cyclic"),
        ("x" * MAX_PAYLOAD_BYTES, "more than"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_encode_copy_refuses_what_encode_refuses(value: object, reason: str) -> None:
    with pytest.raises(PayloadError, match=reason):
        encode_payload(value)
    with pytest.raises(PayloadError, match=reason):
        encode_payload_copy(value)


def test_encode_copy_refuses_keys_that_collide_once_copied() -> None:
    class _Odd(str):
        def __hash__(self) -> int:
            return 1

        def __eq__(self, other: object) -> bool:
            return other is self

    value = {"a": 1, _Odd("a"): 2}
    with pytest.raises(PayloadError, match="duplicate map key"):
        decode_payload(encode_payload(value))
    with pytest.raises(PayloadError, match="duplicate map key"):
        encode_payload_copy(value)
