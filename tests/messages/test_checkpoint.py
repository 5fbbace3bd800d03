"""A fold's stored state: every fold round-trips, anything malformed is a ScheduleLogError."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages import (
    ErrorCode,
    FoldedSchedules,
    ScheduleLogError,
    decode_schedule_state,
    encode_schedule_state,
    fold_schedule_events,
    format_instant,
)
from tests.messages.helpers import (
    AT_MS,
    Event,
    create,
    create_at,
    create_every,
    delete,
    dispatch,
    dispatch_every,
    instants,
    log,
    other,
    valid_segment,
)

HOUR = 3_600_000


@st.composite
def schedule_logs(draw: st.DrawFn) -> tuple[list[Event], int]:
    """A valid log of every kind (``every`` records advanced by dispatches), maybe forked."""
    items: list[dict[str, object] | tuple[str, object]] = list(draw(valid_segment(8)))
    seed = len(items) if draw(st.booleans()) else 0
    active: dict[str, tuple[str, int]] = {}  # id -> (kind, current target)
    created = 0
    for _ in range(draw(st.integers(0, 30))):
        choice = draw(st.sampled_from(["after", "at", "every", "other", "delete", "dispatch"]))
        if choice in ("after", "at", "every"):
            created += 1
            record_id = f"own-{created}"  # (the seed's ids are schedule-N)
            target = AT_MS + draw(st.integers(0, 1_000)) * HOUR
            if choice == "after":
                items.append(create(record_id, f"p {created}", created, format_instant(target)))
            elif choice == "at":
                items.append(create_at(record_id, "p", format_instant(target)))
            else:
                items.append(create_every(record_id, "p", 3_600, format_instant(target)))
            active[record_id] = (choice, target)
        elif choice == "other" or not active:
            items.append(other({"n": len(items)}))
        else:
            record_id = draw(st.sampled_from(sorted(active)))
            kind, target = active[record_id]
            if choice == "dispatch" and kind == "every":
                late = draw(st.integers(0, 3)) * HOUR
                items.append(dispatch_every(record_id, target + late))
                active[record_id] = (kind, target + late + HOUR)  # the next grid point
                continue
            del active[record_id]
            items.append(delete(record_id) if choice == "delete" else dispatch(record_id))
    return log(*items), seed


@settings(max_examples=300, deadline=None)
@given(schedule_logs(), st.data())
def test_every_fold_round_trips(case: tuple[list[Event], int], data: st.DataObject) -> None:
    events, seed = case
    cut = data.draw(st.integers(seed, len(events)))
    folded = fold_schedule_events(events[:cut], seed)
    encoded = encode_schedule_state(folded)
    decoded = decode_schedule_state(copy.deepcopy(encoded))
    assert decoded == folded
    assert [r.target_ms for r in decoded.active] == [r.target_ms for r in folded.active]
    assert decoded.earliest() == folded.earliest()
    assert encode_schedule_state(decoded) == encoded


def test_the_shape_is_versioned_and_records_keep_create_order() -> None:
    events = log(
        create_every("e", at=format_instant(AT_MS)),
        create_at("a", at=format_instant(AT_MS + 5)),
        dispatch_every("e", AT_MS + 1),
        create("x"),
        delete("x"),
    )
    encoded = encode_schedule_state(fold_schedule_events(events))
    assert encoded == {
        "version": 1,
        "seedLength": 0,
        "end": 5,
        "seenIds": ["e", "a", "x"],
        "active": [
            {
                "id": "e",
                "kind": "every",
                "prompt": "p",
                "everySeconds": 300,
                "scheduledAt": format_instant(AT_MS + 300_000),  # advanced
            },
            {"id": "a", "kind": "at", "prompt": "p", "scheduledAt": format_instant(AT_MS + 5)},
        ],
    }


def good() -> dict[str, Any]:
    return encode_schedule_state(fold_schedule_events(log(create("a"), create("b"), delete("a"))))


def changed(**changes: object) -> dict[str, Any]:
    state = good()
    state.update(changes)
    return state


def record_changed(**changes: object) -> dict[str, Any]:
    state = good()
    state["active"] = [{**state["active"][0], **changes}]
    return state


NON_STRING_KEY: dict[object, object] = {k: v for k, v in good().items() if k != "end"}
NON_STRING_KEY[5] = 1

MALFORMED: list[tuple[object, str]] = [
    (None, "must be an object"),
    ([], "must be an object"),
    ({**good(), "extra": 1}, "exactly the keys"),
    ({k: v for k, v in good().items() if k != "end"}, "exactly the keys"),
    (NON_STRING_KEY, "exactly the keys"),
    (changed(version=2), "version"),
    (changed(version=1.0), "version"),
    (changed(version=True), "version"),
    (changed(seedLength=-1), "seedLength"),
    (changed(seedLength="0"), "seedLength"),
    (changed(end=2.0), "end"),
    (changed(end=False), "end"),
    (changed(seedLength=4, end=3), "seedLength must not exceed end"),
    (changed(seenIds="a"), "seenIds must be an array"),
    (changed(seenIds=["a", "a", "b"]), "unique"),
    (changed(seenIds=["a", " b"]), "trim"),
    (changed(seenIds=["a", 2]), "trim"),
    (changed(seenIds=["a"]), "never seen"),
    (changed(active={"b": 1}), "active must be an array"),
    (changed(active=[None]), r"active\[0\]: schedule must be an object"),
    (record_changed(scheduledAt="2026-01-01T00:00:00Z"), "canonical UTC instant"),
    (record_changed(scheduledAt="2026-13-01T00:00:00.000Z"), "canonical UTC instant"),
    (record_changed(kind="later"), "kind must be one of"),
    (record_changed(afterSeconds=0), "afterSeconds"),
    (record_changed(prompt=""), "prompt"),
    (record_changed(extra=1), "unknown key"),
    (record_changed(id=" b"), "id must be"),
]


@pytest.mark.parametrize(("value", "reason"), MALFORMED)
def test_a_malformed_state_is_a_schedule_log_error(value: object, reason: str) -> None:
    with pytest.raises(ScheduleLogError, match=reason) as caught:
        decode_schedule_state(value)
    assert caught.value.code is ErrorCode.CORRUPT_SCHEDULE_LOG
    assert caught.value.message.startswith("schedule state: ")


def test_active_records_must_be_unique_and_in_create_order() -> None:
    state = encode_schedule_state(fold_schedule_events(log(create("a"), create("b"))))
    swapped = {**state, "active": state["active"][::-1]}  # type: ignore[index]
    twice = {**state, "active": [state["active"][0]] * 2}  # type: ignore[index]
    for value in (swapped, twice):
        with pytest.raises(ScheduleLogError, match="create order"):
            decode_schedule_state(value)
    assert decode_schedule_state(state) == FoldedSchedules(
        fold_schedule_events(log(create("a"), create("b"))).active, ("a", "b"), 0, 2
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | instants,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.data())
def test_decoding_is_total(value: object, data: st.DataObject) -> None:
    """Arbitrary values, and good states with one part replaced: a fold or a ScheduleLogError."""
    candidates = [value]
    state = good()
    key = data.draw(st.sampled_from(sorted(state)))
    candidates.append({**state, key: value})
    record = dict(state["active"][0])
    record[data.draw(st.sampled_from(sorted(record)))] = value
    candidates.append({**state, "active": [record]})
    for candidate in candidates:
        try:
            decoded = decode_schedule_state(candidate)
        except ScheduleLogError:
            continue
        assert isinstance(decoded, FoldedSchedules)
