"""Records, changes and the strict ``schedule/change`` decoder."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages import (
    PROTOCOL_VERSION,
    SCHEDULE_CHANGE_TYPE,
    AfterRecord,
    CreateChange,
    DeleteChange,
    DispatchChange,
    ErrorCode,
    ScheduleChange,
    ScheduleInputError,
    ScheduleLogError,
    ScheduleRecord,
    create_after_schedule_record,
    decode_schedule_change,
    encode_schedule_change,
    format_instant,
)
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS
from messages._records import AtRecord, EveryRecord, ScheduleKind, record_at_target
from messages._text import ECMASCRIPT_WHITESPACE
from tests.messages.helpers import AT, AT_MS, create, delete, dispatch

WHITESPACE = sorted(ECMASCRIPT_WHITESPACE)
RECORD = AfterRecord("schedule-1", "p", 5, AT)


def _with(payload: dict[str, object], **changes: object) -> dict[str, object]:
    out = dict(payload)
    for key, value in changes.items():
        if value is _DROP:
            del out[key]
        else:
            out[key] = value
    return out


_DROP = object()


def _schedule(**changes: object) -> dict[str, object]:
    base = create("schedule-1")
    schedule = base["schedule"]
    assert isinstance(schedule, dict)
    return _with(base, schedule=_with(schedule, **changes))


def test_constants() -> None:
    assert SCHEDULE_CHANGE_TYPE == "schedule/change"
    assert PROTOCOL_VERSION == 1


# ---- records and changes ---------------------------------------------------


def test_record_derives_target_and_kind() -> None:
    assert RECORD.target_ms == AT_MS
    assert RECORD.kind == "after"
    assert "target_ms" not in repr(RECORD)


def test_record_json_key_order() -> None:
    assert list(RECORD.to_json().items()) == [
        ("id", "schedule-1"),
        ("kind", "after"),
        ("prompt", "p"),
        ("afterSeconds", 5),
        ("scheduledAt", AT),
    ]


def test_record_is_frozen_hashable_and_replace_recomputes_target() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RECORD.prompt = "x"  # type: ignore[misc]
    assert hash(RECORD) == hash(AfterRecord("schedule-1", "p", 5, AT))
    later = dataclasses.replace(RECORD, scheduled_at="2026-01-01T00:00:01.000Z")
    assert later.target_ms == AT_MS + 1000
    assert later != RECORD


def test_record_rejects_non_canonical_scheduled_at() -> None:
    with pytest.raises(ValueError, match="form"):
        AfterRecord("schedule-1", "p", 5, "2026-01-01T00:00:00Z")


@pytest.mark.parametrize(
    ("change", "operation", "payload"),
    [
        (
            CreateChange(RECORD),
            "create",
            {"version": 1, "operation": "create", "schedule": RECORD.to_json()},
        ),
        (
            DeleteChange("schedule-1"),
            "delete",
            {"version": 1, "operation": "delete", "id": "schedule-1"},
        ),
        (
            DispatchChange("schedule-1"),
            "dispatch",
            {"version": 1, "operation": "dispatch", "id": "schedule-1"},
        ),
    ],
)
def test_change_payloads(
    change: ScheduleChange, operation: str, payload: dict[str, object]
) -> None:
    assert change.operation == operation
    assert change.id == "schedule-1"
    assert change.to_json() == payload
    assert list(change.to_json()) == list(payload)
    assert encode_schedule_change(change) == payload
    assert decode_schedule_change(payload) == change


# ---- decoding: accepted ----------------------------------------------------


def _created(**changes: object) -> CreateChange:
    return CreateChange(dataclasses.replace(RECORD, **changes))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (create("schedule-1"), CreateChange(RECORD)),
        (_with(create("schedule-1"), version=1.0), CreateChange(RECORD)),
        (_schedule(afterSeconds=5.0), CreateChange(RECORD)),
        (delete("a b"), DeleteChange("a b")),
        (dispatch("\x1cx\x85"), DispatchChange("\x1cx\x85")),
        (delete("\ud800"), DeleteChange("\ud800")),
        (_schedule(afterSeconds=2**53 - 1), _created(after_seconds=2**53 - 1)),
        (_schedule(prompt="a\u2028b 😀"), _created(prompt="a\u2028b 😀")),
        (
            _schedule(scheduledAt="0001-01-01T00:00:00.000Z"),
            CreateChange(dataclasses.replace(RECORD, scheduled_at="0001-01-01T00:00:00.000Z")),
        ),
        (
            _schedule(scheduledAt="9999-12-31T23:59:59.999Z"),
            CreateChange(dataclasses.replace(RECORD, scheduled_at="9999-12-31T23:59:59.999Z")),
        ),
    ],
)
def test_decode_accepts(payload: dict[str, object], expected: ScheduleChange) -> None:
    change = decode_schedule_change(payload)
    assert change == expected
    if isinstance(change, CreateChange):
        assert isinstance(change.schedule, AfterRecord)
        assert type(change.schedule.after_seconds) is int


def test_decode_accepts_read_only_mappings_at_both_levels() -> None:
    payload = create("schedule-1")
    proxied = MappingProxyType({**payload, "schedule": MappingProxyType(payload["schedule"])})  # type: ignore[arg-type]
    assert decode_schedule_change(proxied) == CreateChange(RECORD)


# ---- decoding: rejected ----------------------------------------------------

_NON_STRING_KEY: dict[object, object] = dict(delete("x").items())
_NON_STRING_KEY[1] = "x"

REJECTIONS: list[tuple[str, object, str]] = [
    ("not an object: list", [("version", 1)], "payload must be an object"),
    ("not an object: str", "create", "payload must be an object"),
    ("not an object: None", None, "payload must be an object"),
    ("non-string key", _NON_STRING_KEY, "non-string key"),
    ("version 2", _with(delete("x"), version=2), "version must be the number 1"),
    ("version 0", _with(delete("x"), version=0), "version must be the number 1"),
    ("version '1'", _with(delete("x"), version="1"), "version must be the number 1"),
    ("version True", _with(delete("x"), version=True), "version must be the number 1"),
    ("version 1.5", _with(delete("x"), version=1.5), "version must be the number 1"),
    ("version NaN", _with(delete("x"), version=math.nan), "version must be the number 1"),
    ("version None", _with(delete("x"), version=None), "version must be the number 1"),
    ("version missing", _with(delete("x"), version=_DROP), "missing key 'version'"),
    ("operation missing", _with(delete("x"), operation=_DROP), "operation must be one of"),
    ("operation unknown", _with(delete("x"), operation="update"), "operation must be one of"),
    ("operation case", _with(delete("x"), operation="DELETE"), "operation must be one of"),
    ("operation non-str", _with(delete("x"), operation=1), "operation must be one of"),
    ("extra top key", _with(delete("x"), extra=1), "unknown key 'extra' in payload"),
    ("schedule on delete", _with(delete("x"), schedule={}), "unknown key 'schedule' in payload"),
    ("id on create", _with(create("x"), id="x"), "unknown key 'id' in payload"),
    ("delete id missing", _with(delete("x"), id=_DROP), "missing key 'id' in payload"),
    ("dispatch id missing", _with(dispatch("x"), id=_DROP), "missing key 'id' in payload"),
    ("schedule missing", _with(create("x"), schedule=_DROP), "missing key 'schedule' in payload"),
    ("schedule not object", _with(create("x"), schedule=["x"]), "schedule must be an object"),
    ("numeric-looking schedule key", _schedule(**{"0": 1}), "unknown key '0' in schedule"),
    ("extra schedule key", _schedule(every_seconds=5), "unknown key 'every_seconds' in schedule"),
    ("at key", _schedule(at=AT), "unknown key 'at' in schedule"),
    ("kind missing", _schedule(kind=_DROP), "missing key 'kind' in schedule"),
    ("after relabelled at", _schedule(kind="at"), "unknown key 'afterSeconds' in schedule"),
    ("prompt missing", _schedule(prompt=_DROP), "missing key 'prompt' in schedule"),
    ("afterSeconds missing", _schedule(afterSeconds=_DROP), "missing key 'afterSeconds'"),
    ("scheduledAt missing", _schedule(scheduledAt=_DROP), "missing key 'scheduledAt'"),
    ("schedule id missing", _schedule(id=_DROP), "missing key 'id' in schedule"),
    ("snake case", _schedule(afterSeconds=_DROP, after_seconds=5), "unknown key 'after_seconds'"),
    ("kind upper", _schedule(kind="AFTER"), "kind must be one of"),
    ("kind None", _schedule(kind=None), "kind must be one of"),
    ("id empty", delete(""), "id must be a non-empty string equal to its own trim"),
    ("id int", delete(1), "id must be"),
    ("id None", dispatch(None), "id must be"),
    ("schedule id empty", _schedule(id=""), "id must be"),
    ("schedule id padded", _schedule(id=" schedule-1"), "id must be"),
    ("schedule id int", _schedule(id=1), "id must be"),
    ("prompt empty", _schedule(prompt=""), "prompt must be a non-empty string"),
    ("prompt blank", _schedule(prompt="   "), "prompt must be a non-empty string"),
    ("prompt leading", _schedule(prompt=" p"), "prompt must be a non-empty string"),
    ("prompt trailing newline", _schedule(prompt="p\n"), "prompt must be a non-empty string"),
    ("prompt BOM", _schedule(prompt="\ufeffp"), "prompt must be a non-empty string"),
    ("prompt ideographic space", _schedule(prompt="p\u3000"), "prompt must be a non-empty string"),
    ("prompt int", _schedule(prompt=5), "prompt must be a non-empty string"),
    ("prompt lone high", _schedule(prompt="a\ud800b"), "lone surrogates"),
    ("prompt lone low", _schedule(prompt="\udfff"), "lone surrogates"),
    (
        "afterSeconds 0",
        _schedule(afterSeconds=0),
        r"afterSeconds must be an integer in 1\.\.2\*\*53",
    ),
    ("afterSeconds -1", _schedule(afterSeconds=-1), "afterSeconds must be an integer"),
    ("afterSeconds 1.5", _schedule(afterSeconds=1.5), "afterSeconds must be an integer"),
    ("afterSeconds True", _schedule(afterSeconds=True), "afterSeconds must be an integer"),
    ("afterSeconds 2**53", _schedule(afterSeconds=2**53), "afterSeconds must be an integer"),
    ("afterSeconds '5'", _schedule(afterSeconds="5"), "afterSeconds must be an integer"),
    ("afterSeconds NaN", _schedule(afterSeconds=math.nan), "afterSeconds must be an integer"),
    ("afterSeconds inf", _schedule(afterSeconds=math.inf), "afterSeconds must be an integer"),
    ("afterSeconds None", _schedule(afterSeconds=None), "afterSeconds must be an integer"),
    ("scheduledAt int", _schedule(scheduledAt=AT_MS), "scheduledAt must be a string"),
    ("Feb 30", _schedule(scheduledAt="2026-02-30T00:00:00.000Z"), "scheduledAt.*calendar date"),
    ("year 0000", _schedule(scheduledAt="0000-01-01T00:00:00.000Z"), "scheduledAt.*year"),
    ("year 10000", _schedule(scheduledAt="10000-01-01T00:00:00.000Z"), "scheduledAt.*form"),
    ("two ms digits", _schedule(scheduledAt="2026-01-01T00:00:00.00Z"), "scheduledAt.*form"),
    ("four ms digits", _schedule(scheduledAt="2026-01-01T00:00:00.0000Z"), "scheduledAt.*form"),
    ("second 60", _schedule(scheduledAt="2026-01-01T00:00:60.000Z"), "scheduledAt.*time of day"),
    ("hour 24", _schedule(scheduledAt="2026-01-01T24:00:00.000Z"), "scheduledAt.*time of day"),
    ("missing Z", _schedule(scheduledAt="2026-01-01T00:00:00.000"), "scheduledAt.*form"),
    ("lowercase t", _schedule(scheduledAt="2026-01-01t00:00:00.000Z"), "scheduledAt.*form"),
    ("lowercase z", _schedule(scheduledAt="2026-01-01T00:00:00.000z"), "scheduledAt.*form"),
    ("offset", _schedule(scheduledAt="2026-01-01T00:00:00.000+00:00"), "scheduledAt.*form"),
]


@pytest.mark.parametrize(
    ("payload", "rule"), [(p, r) for _, p, r in REJECTIONS], ids=[n for n, _, _ in REJECTIONS]
)
def test_decode_rejects(payload: object, rule: str) -> None:
    with pytest.raises(ScheduleLogError, match=rule) as caught:
        decode_schedule_change(payload)
    assert caught.value.code is ErrorCode.CORRUPT_SCHEDULE_LOG
    assert caught.value.message.startswith("schedule/change: ")


def test_decode_rejects_non_string_schedule_key() -> None:
    payload = create("x")
    schedule = payload["schedule"]
    assert isinstance(schedule, dict)
    with pytest.raises(ScheduleLogError, match="schedule has a non-string key"):
        decode_schedule_change({**payload, "schedule": {**schedule, 2: "x"}})


@pytest.mark.parametrize("ch", WHITESPACE, ids=[f"U+{ord(c):04X}" for c in WHITESPACE])
@pytest.mark.parametrize("where", ["leading", "trailing"])
@pytest.mark.parametrize("build", [delete, dispatch, create], ids=["delete", "dispatch", "create"])
def test_decode_rejects_every_whitespace_padding_of_ids(
    ch: str, where: str, build: Callable[[str], dict[str, object]]
) -> None:
    padded = f"{ch}schedule-1" if where == "leading" else f"schedule-1{ch}"
    with pytest.raises(ScheduleLogError, match="id must be a non-empty string equal to its own"):
        decode_schedule_change(build(padded))


@pytest.mark.parametrize("ch", WHITESPACE, ids=[f"U+{ord(c):04X}" for c in WHITESPACE])
def test_decode_rejects_every_whitespace_padding_of_prompts(ch: str) -> None:
    for prompt in (f"{ch}p", f"p{ch}", ch):
        with pytest.raises(ScheduleLogError, match="prompt must be a non-empty string"):
            decode_schedule_change(_schedule(prompt=prompt))


def test_unknown_key_in_message_is_truncated() -> None:
    with pytest.raises(ScheduleLogError) as caught:
        decode_schedule_change(_with(delete("x"), **{"k" * 500: 1}))
    assert len(caught.value.message) < 120


# ---- round trip ------------------------------------------------------------

_WS = "".join(ECMASCRIPT_WHITESPACE)
ids = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=20).map(
    lambda s: s.strip(_WS) or "x"
)
prompts = st.text(min_size=1, max_size=40).map(lambda s: s.strip(_WS) or "p")
records = st.builds(
    AfterRecord,
    ids,
    prompts,
    st.integers(1, 2**53 - 1),
    st.integers(MIN_INSTANT_MS, MAX_INSTANT_MS).map(format_instant),
)
changes = st.one_of(
    st.builds(CreateChange, records), st.builds(DeleteChange, ids), st.builds(DispatchChange, ids)
)


@settings(max_examples=200)
@given(changes)
def test_encode_decode_round_trip(change: ScheduleChange) -> None:
    payload = encode_schedule_change(change)
    assert decode_schedule_change(payload) == change
    assert decode_schedule_change(MappingProxyType(payload)) == change


@settings(max_examples=200)
@given(records)
def test_create_round_trips_through_json_text(record: ScheduleRecord) -> None:
    if any(0xD800 <= ord(c) <= 0xDFFF for c in record.id):
        record = dataclasses.replace(record, id="schedule-1")
    payload = json.loads(json.dumps(CreateChange(record).to_json()))
    assert decode_schedule_change(payload) == CreateChange(record)


# ---- create_after_schedule_record ------------------------------------------


def test_create_after_builds_the_record() -> None:
    record = create_after_schedule_record("schedule-3", "call mom", 90, AT_MS)
    assert record == AfterRecord("schedule-3", "call mom", 90, "2026-01-01T00:01:30.000Z")
    assert record.target_ms == AT_MS + 90_000


@pytest.mark.parametrize(
    ("prompt", "stored"),
    [
        ("  call mom \n", "call mom"),
        ("\ufeff\u3000call\u2028mom\u00a0", "call\u2028mom"),
        ("\x85call\x1c", "\x85call\x1c"),
    ],
)
def test_create_after_trims_the_ecmascript_way(prompt: str, stored: str) -> None:
    assert create_after_schedule_record("schedule-1", prompt, 1, 0).prompt == stored


@pytest.mark.parametrize(("after", "stored"), [(1, 1), (1.0, 1), (10**11, 10**11), (1e11, 10**11)])
def test_create_after_accepts_integral_seconds(after: object, stored: int) -> None:
    record = create_after_schedule_record("schedule-1", "p", after, MIN_INSTANT_MS)
    assert record.after_seconds == stored
    assert type(record.after_seconds) is int


@pytest.mark.parametrize(
    ("prompt", "after", "now", "code"),
    [
        ("", 5, 0, ErrorCode.INVALID_PROMPT),
        ("   ", 5, 0, ErrorCode.INVALID_PROMPT),
        ("\u3000\ufeff\u2028", 5, 0, ErrorCode.INVALID_PROMPT),
        (None, 5, 0, ErrorCode.INVALID_PROMPT),
        (5, 5, 0, ErrorCode.INVALID_PROMPT),
        (b"p", 5, 0, ErrorCode.INVALID_PROMPT),
        ("a\ud800", 5, 0, ErrorCode.INVALID_PROMPT),
        ("p", 0, 0, ErrorCode.INVALID_RULE),
        ("p", -1, 0, ErrorCode.INVALID_RULE),
        ("p", 1.5, 0, ErrorCode.INVALID_RULE),
        ("p", True, 0, ErrorCode.INVALID_RULE),
        ("p", "5", 0, ErrorCode.INVALID_RULE),
        ("p", None, 0, ErrorCode.INVALID_RULE),
        ("p", math.nan, 0, ErrorCode.INVALID_RULE),
        ("p", 2**53, 0, ErrorCode.INVALID_RULE),
        ("p", 5, True, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 5, 1.5, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 5, None, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 5, "0", ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 5, math.inf, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 1, MAX_INSTANT_MS - 999, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 2**53 - 1, 0, ErrorCode.TIME_OUT_OF_RANGE),
        ("p", 1, MIN_INSTANT_MS - 1001, ErrorCode.TIME_OUT_OF_RANGE),
        # check order: prompt before rule before time
        ("", 0, None, ErrorCode.INVALID_PROMPT),
        ("p", 0, None, ErrorCode.INVALID_RULE),
    ],
)
def test_create_after_rejects(prompt: object, after: object, now: object, code: ErrorCode) -> None:
    with pytest.raises(ScheduleInputError) as caught:
        create_after_schedule_record("schedule-1", prompt, after, now)
    assert caught.value.code is code


@pytest.mark.parametrize(
    ("after", "now", "at"),
    [
        (1, MAX_INSTANT_MS - 1000, "9999-12-31T23:59:59.999Z"),
        (1, MIN_INSTANT_MS - 1000, "0001-01-01T00:00:00.000Z"),
        (1, -86_400_000 * 365, "1969-01-01T00:00:01.000Z"),
        (1, 1000.0, "1970-01-01T00:00:02.000Z"),
    ],
)
def test_create_after_range_boundaries(after: int, now: object, at: str) -> None:
    assert create_after_schedule_record("schedule-1", "p", after, now).scheduled_at == at


@pytest.mark.parametrize("bad_id", ["", " schedule-1", "schedule-1\ufeff", 5])
def test_create_after_rejects_a_malformed_id_as_a_bug(bad_id: object) -> None:
    with pytest.raises(ValueError, match="schedule id"):
        create_after_schedule_record(bad_id, "p", 1, 0)  # type: ignore[arg-type]


@settings(max_examples=200)
@given(prompts, st.integers(1, 10**9), st.integers(MIN_INSTANT_MS, MAX_INSTANT_MS - 10**12))
def test_created_records_decode_back(prompt: str, after: int, now: int) -> None:
    record = create_after_schedule_record("schedule-1", prompt, after, now)
    assert record.target_ms == now + after * 1000
    assert decode_schedule_change(CreateChange(record).to_json()) == CreateChange(record)


@pytest.mark.parametrize(
    ("kind", "seconds", "built"),
    [
        ("after", 60, AfterRecord("schedule-1", "p", 60, "2026-01-01T00:01:00.000Z")),
        ("at", None, AtRecord("schedule-1", "p", "2026-01-01T00:01:00.000Z")),
        ("every", 300, EveryRecord("schedule-1", "p", 300, "2026-01-01T00:01:00.000Z")),
    ],
)
def test_record_at_target_equals_the_constructed_record(
    kind: ScheduleKind, seconds: int | None, built: ScheduleRecord
) -> None:
    target = built.target_ms
    record = record_at_target(kind, "schedule-1", "p", seconds, target)
    assert type(record) is type(built)
    assert record == built
    assert record.target_ms == target
    assert encode_schedule_change(CreateChange(record)) == CreateChange(built).to_json()


def test_record_at_target_refuses_what_the_constructor_refuses() -> None:
    with pytest.raises(ValueError):
        record_at_target("after", "schedule-1", "p", 60, MAX_INSTANT_MS + 1)
    with pytest.raises(ValueError):
        record_at_target("every", "schedule-1", "p", 299, 0)
