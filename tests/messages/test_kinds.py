"""``at`` and ``every`` records in the log: strict decoding and the fold's stateful rules."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages import (
    AfterRecord,
    AtRecord,
    CreateChange,
    DispatchChange,
    ErrorCode,
    EveryRecord,
    FoldedSchedules,
    ScheduleChange,
    ScheduleLogError,
    ScheduleRecord,
    allocate_schedule_id,
    decode_schedule_change,
    fold_schedule_events,
    format_instant,
    parse_instant,
    validate_schedule_stream,
)
from messages._fold import check_schedule_candidate, continue_fold
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS
from messages._records import MAX_EVERY_SECONDS
from tests.messages.helpers import (
    AT,
    AT_MS,
    DROP,
    Event,
    changed_schedule,
    create,
    create_at,
    create_every,
    delete,
    dispatch,
    dispatch_every,
    log,
    other,
)

LATER = "2026-01-01T00:05:00.000Z"


# ---- decoding ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (create_at("s"), CreateChange(AtRecord("s", "p", AT))),
        (create_every("s"), CreateChange(EveryRecord("s", "p", 300, AT))),
        (create_every("s", every=300.0), CreateChange(EveryRecord("s", "p", 300, AT))),
        (create_every("s", every=86_400), CreateChange(EveryRecord("s", "p", 86_400, AT))),
        (
            create_every("s", every=MAX_EVERY_SECONDS),
            CreateChange(EveryRecord("s", "p", MAX_EVERY_SECONDS, AT)),
        ),
        (dispatch_every("s", AT), DispatchChange("s", AT)),
        ({**dispatch_every("s", AT), "version": 1.0}, DispatchChange("s", AT)),
        (dispatch("s"), DispatchChange("s")),
    ],
)
def test_decode_accepts_the_new_shapes(
    payload: dict[str, object], expected: ScheduleChange
) -> None:
    change = decode_schedule_change(payload)
    assert change == expected
    assert change.to_json() == {**payload, "version": 1}
    assert list(change.to_json()) == list(payload)
    if isinstance(change, CreateChange) and isinstance(change.schedule, EveryRecord):
        assert type(change.schedule.every_seconds) is int
    if isinstance(change, DispatchChange):
        assert change.accepted_ms == (None if change.accepted_at is None else AT_MS)


KIND_RULE = 'kind must be one of "after", "at", "every", "cron"'

REJECTIONS: list[tuple[str, object, str]] = [
    ("kind crontab", changed_schedule(create_every("s"), kind="crontab"), KIND_RULE),
    ("kind Cron", changed_schedule(create_every("s"), kind="Cron"), KIND_RULE),
    (
        "every as cron",
        changed_schedule(create_every("s"), kind="cron"),
        "unknown key 'everySeconds'",
    ),
    ("kind later", changed_schedule(create_at("s"), kind="later"), KIND_RULE),
    ("kind Every", changed_schedule(create_every("s"), kind="Every"), KIND_RULE),
    ("kind 1", changed_schedule(create_every("s"), kind=1), KIND_RULE),
    ("kind missing", changed_schedule(create_at("s"), kind=DROP), "missing key 'kind' in schedule"),
    (
        "after as at",
        changed_schedule(create("s"), kind="at"),
        "unknown key 'afterSeconds' in schedule",
    ),
    ("after as every", changed_schedule(create("s"), kind="every"), "unknown key 'afterSeconds'"),
    ("at as after", changed_schedule(create_at("s"), kind="after"), "missing key 'afterSeconds'"),
    ("at as every", changed_schedule(create_at("s"), kind="every"), "missing key 'everySeconds'"),
    ("every as at", changed_schedule(create_every("s"), kind="at"), "unknown key 'everySeconds'"),
    (
        "every as after",
        changed_schedule(create_every("s"), kind="after"),
        "unknown key 'everySeconds'",
    ),
    (
        "every without everySeconds",
        changed_schedule(create_every("s"), everySeconds=DROP),
        "missing key 'everySeconds' in schedule",
    ),
    (
        "every with afterSeconds",
        changed_schedule(create_every("s"), everySeconds=DROP, afterSeconds=300),
        "unknown key 'afterSeconds'",
    ),
    ("at with everySeconds", changed_schedule(create_at("s"), everySeconds=300), "unknown key"),
    ("at with at", changed_schedule(create_at("s"), at=AT), "unknown key 'at' in schedule"),
    (
        "at with timeZone",
        changed_schedule(create_at("s"), timeZone="UTC"),
        "unknown key 'timeZone'",
    ),
    (
        "every snake case",
        changed_schedule(create_every("s"), everySeconds=DROP, every_seconds=300),
        "unknown key 'every_seconds'",
    ),
    ("everySeconds 299", create_every("s", every=299), "everySeconds must be an integer"),
    ("everySeconds 299.0", create_every("s", every=299.0), "everySeconds must be an integer"),
    ("everySeconds 0", create_every("s", every=0), "everySeconds must be an integer"),
    ("everySeconds -300", create_every("s", every=-300), "everySeconds must be an integer"),
    ("everySeconds 300.5", create_every("s", every=300.5), "everySeconds must be an integer"),
    ("everySeconds '300'", create_every("s", every="300"), "everySeconds must be an integer"),
    ("everySeconds True", create_every("s", every=True), "everySeconds must be an integer"),
    ("everySeconds None", create_every("s", every=None), "everySeconds must be an integer"),
    ("everySeconds NaN", create_every("s", every=math.nan), "everySeconds must be an integer"),
    ("everySeconds inf", create_every("s", every=math.inf), "everySeconds must be an integer"),
    (
        "everySeconds too large",
        create_every("s", every=MAX_EVERY_SECONDS + 1),
        "everySeconds must be an integer",
    ),
    ("everySeconds 2**53-1", create_every("s", every=2**53 - 1), "everySeconds must be"),
    (
        "schedule null",
        {"version": 1, "operation": "create", "schedule": None},
        "schedule must be an object",
    ),
    ("at scheduledAt offset", create_at("s", at="2026-01-01T00:00:00+00:00"), "scheduledAt.*form"),
    ("at scheduledAt int", create_at("s", at=AT_MS), "scheduledAt must be a string"),
    ("at prompt padded", create_at("s", prompt=" p"), "prompt must be"),
    ("every id empty", create_every(""), "id must be"),
    ("every Feb 30", create_every("s", at="2026-02-30T00:00:00.000Z"), "scheduledAt.*calendar"),
    (
        "dispatch extra key",
        {**dispatch_every("s", AT), "extra": 1},
        "unknown key 'extra' in payload",
    ),
    ("dispatch snake case", {**dispatch("s"), "accepted_at": AT}, "unknown key 'accepted_at'"),
    ("dispatch camel typo", {**dispatch("s"), "acceptedat": AT}, "unknown key 'acceptedat'"),
    (
        "dispatch without id",
        {"version": 1, "operation": "dispatch", "acceptedAt": AT},
        "missing key 'id' in payload",
    ),
    ("dispatch acceptedAt null", dispatch_every("s", None), "acceptedAt must be a string"),
    (
        "dispatch acceptedAt ms",
        {**dispatch("s"), "acceptedAt": AT_MS},
        "acceptedAt must be a string",
    ),
    (
        "dispatch acceptedAt short",
        dispatch_every("s", "2026-01-01T00:00:00Z"),
        "acceptedAt must be a canonical UTC instant",
    ),
    (
        "dispatch acceptedAt year 0",
        dispatch_every("s", "0000-01-01T00:00:00.000Z"),
        "acceptedAt must be a canonical",
    ),
    ("delete with acceptedAt", {**delete("s"), "acceptedAt": AT}, "unknown key 'acceptedAt'"),
    ("create with acceptedAt", {**create_every("s"), "acceptedAt": AT}, "unknown key 'acceptedAt'"),
]


@pytest.mark.parametrize(
    ("payload", "rule"), [(p, r) for _, p, r in REJECTIONS], ids=[n for n, _, _ in REJECTIONS]
)
def test_decode_rejects_malformed_shapes(payload: object, rule: str) -> None:
    with pytest.raises(ScheduleLogError, match=rule) as caught:
        decode_schedule_change(payload)
    assert caught.value.code is ErrorCode.CORRUPT_SCHEDULE_LOG
    assert caught.value.message.startswith("schedule/change: ")


prompts = (
    st.text(min_size=1, max_size=20)
    .map(lambda s: s.strip() or "p")
    .filter(
        lambda s: s == s.strip("\ufeff\u1680\u2028\u2029\u202f\u205f\u3000\x1c\x1d\x1e\x1f\x85")
    )
)
instants = st.integers(MIN_INSTANT_MS, MAX_INSTANT_MS).map(format_instant)
new_changes = st.one_of(
    st.builds(lambda p, at: CreateChange(AtRecord("s", p, at)), prompts, instants),
    st.builds(
        lambda p, n, at: CreateChange(EveryRecord("s", p, n, at)),
        prompts,
        st.integers(300, MAX_EVERY_SECONDS),
        instants,
    ),
    st.builds(lambda at: DispatchChange("s", at), instants),
)


@settings(max_examples=200)
@given(new_changes)
def test_new_shapes_round_trip_through_json_text(change: ScheduleChange) -> None:
    payload = json.loads(json.dumps(change.to_json()))
    assert decode_schedule_change(payload) == change


def test_records_are_frozen_values_with_derived_targets() -> None:
    at = AtRecord("s", "p", LATER)
    assert at.target_ms == AT_MS + 300_000
    assert "target_ms" not in repr(at)
    with pytest.raises(dataclasses.FrozenInstanceError):
        at.prompt = "x"  # type: ignore[misc]
    moved = dataclasses.replace(EveryRecord("s", "p", 300, AT), scheduled_at=LATER)
    assert moved.target_ms == AT_MS + 300_000
    assert hash(moved) == hash(EveryRecord("s", "p", 300, LATER))
    records: list[ScheduleRecord] = [AtRecord("s", "p", AT), AfterRecord("s", "p", 5, AT)]
    assert records[0] != records[1]
    with pytest.raises(ValueError, match="form"):
        AtRecord("s", "p", "2026-01-01T00:00:00Z")
    with pytest.raises(ValueError, match="form"):
        DispatchChange("s", "2026-01-01T00:00:00Z")


# ---- the fold's stateful rules ----------------------------------------------------------------


def _ids(folded: FoldedSchedules) -> list[str]:
    return [record.id for record in folded.active]


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        (
            (create("a"), dispatch_every("a", AT)),
            "event seq 1: dispatch of one-shot record 'a' carries acceptedAt",
        ),
        (
            (create_at("a"), dispatch_every("a", LATER)),
            "event seq 1: dispatch of one-shot record 'a' carries acceptedAt",
        ),
        (
            (create_every("a"), dispatch("a")),
            "event seq 1: dispatch of every record 'a' lacks acceptedAt",
        ),
        (
            (create_every("a"), dispatch_every("a", AT_MS - 1)),
            "event seq 1: every dispatch of 'a' accepted at 2025-12-31T23:59:59.999Z precedes its "
            "target 2026-01-01T00:00:00.000Z",
        ),
        (
            (create_every("a"), dispatch_every("a", AT), dispatch_every("a", AT)),
            "event seq 2: every dispatch of 'a' accepted at 2026-01-01T00:00:00.000Z precedes its "
            "target 2026-01-01T00:05:00.000Z",
        ),
        (
            (create_every("a"), dispatch_every("a", AT_MS + 400_000), dispatch_every("a", LATER)),
            "event seq 2: every dispatch of 'a' accepted at",
        ),
        ((dispatch_every("a", AT),), "event seq 0: dispatch of inactive id 'a'"),
        ((create_every("a"), delete("a"), dispatch_every("a", AT)), "dispatch of inactive id 'a'"),
        ((create_every("a"), delete("a"), delete("a")), "delete of inactive id 'a'"),
        ((create_at("a"), dispatch("a"), dispatch("a")), "dispatch of inactive id 'a'"),
        ((create_every("a"), create_at("a")), "create id 'a' was reused"),
        ((create_every("a"), dispatch_every("a", AT), create("a")), "create id 'a' was reused"),
    ],
)
def test_fold_rejects_broken_streams(items: tuple[dict[str, object], ...], fragment: str) -> None:
    with pytest.raises(ScheduleLogError) as caught:
        fold_schedule_events(log(*items))
    assert fragment in caught.value.message
    assert caught.value.code is ErrorCode.CORRUPT_SCHEDULE_LOG


def test_delete_works_on_every_kind() -> None:
    events = log(
        create("a"), create_at("b"), create_every("c"), delete("b"), delete("c"), delete("a")
    )
    folded = fold_schedule_events(events)
    assert folded.active == ()
    assert folded.seen_ids == ("a", "b", "c")


def test_one_shot_dispatches_remove_their_records() -> None:
    folded = fold_schedule_events(log(create("a"), create_at("b"), dispatch("b")))
    assert _ids(folded) == ["a"]


def test_every_dispatch_advances_in_place_keeping_create_order() -> None:
    events = log(
        create("a", at=LATER),
        create_every("b", "stretch", 600),
        create_at("c", at=LATER),
        other(),
        dispatch_every("b", AT_MS + 1_234_567),  # 2 intervals late and a bit
    )
    folded = fold_schedule_events(events)
    assert _ids(folded) == ["a", "b", "c"]
    record = folded.get("b")
    assert record == EveryRecord("b", "stretch", 600, format_instant(AT_MS + 1_800_000))
    assert folded.active[1] is record
    before = fold_schedule_events(events[:4]).get("b")
    assert before is not None
    assert dataclasses.replace(before, scheduled_at=record.scheduled_at) == record
    assert folded.seen_ids == ("a", "b", "c")
    assert allocate_schedule_id(folded) == "schedule-4"


def test_dispatch_at_exactly_the_target_is_accepted() -> None:
    folded = fold_schedule_events(log(create_every("a"), dispatch_every("a", AT)))
    assert folded.active == (EveryRecord("a", "p", 300, LATER),)


def test_candidates_follow_the_same_rules() -> None:
    folded = fold_schedule_events(log(create_every("a"), create_at("b")))
    advanced = check_schedule_candidate(folded, dispatch_every("a", AT))
    assert advanced.get("a") == EveryRecord("a", "p", 300, LATER)
    assert _ids(advanced) == ["a", "b"]
    assert folded.get("a") == EveryRecord("a", "p", 300, AT)  # the input is unchanged
    for candidate, fragment in [
        (dispatch("a"), "candidate: dispatch of every record 'a' lacks acceptedAt"),
        (dispatch_every("b", LATER), "candidate: dispatch of one-shot record 'b' carries"),
        (dispatch_every("a", AT_MS - 1), "candidate: every dispatch of 'a' accepted at"),
        (
            changed_schedule(create_every("c"), everySeconds=60),
            "candidate: schedule/change: everySeconds",
        ),
    ]:
        with pytest.raises(ScheduleLogError) as caught:
            check_schedule_candidate(folded, candidate)
        assert fragment in caught.value.message
    events = log(create_every("a"), dispatch_every("a", AT), dispatch_every("a", LATER))
    assert validate_schedule_stream(events).get("a") == EveryRecord(
        "a", "p", 300, format_instant(AT_MS + 600_000)
    )


# ---- incremental folding and the earliest caches with every kind ------------------------------

_TARGETS = (AT_MS, AT_MS + 1, AT_MS + 300_000, AT_MS + 600_000, AT_MS - 1)


@st.composite
def mixed_segment(draw: st.DrawFn, max_size: int) -> list[dict[str, object] | tuple[str, object]]:
    """A segment of all three kinds that folds on its own; every dispatches are on time or late."""
    items: list[dict[str, object] | tuple[str, object]] = []
    active: dict[str, int | None] = {}  # id -> target of an every record, None for one-shots
    every_seconds: dict[str, int] = {}
    created = 0
    for _ in range(draw(st.integers(0, max_size))):
        choice = draw(
            st.sampled_from(["after", "at", "every", "every", "other", "delete", "dispatch"])
        )
        if choice in ("after", "at", "every"):
            created += 1
            record_id = f"schedule-{created}"
            target = draw(st.sampled_from(_TARGETS))
            if choice == "after":
                items.append(create(record_id, "p", 1, format_instant(target)))
                active[record_id] = None
            elif choice == "at":
                items.append(create_at(record_id, "p", format_instant(target)))
                active[record_id] = None
            else:
                seconds = draw(st.sampled_from((300, 301, 900)))
                items.append(create_every(record_id, "p", seconds, format_instant(target)))
                active[record_id] = target
                every_seconds[record_id] = seconds
        elif choice == "other" or not active:
            items.append(other())
        else:
            record_id = draw(st.sampled_from(sorted(active)))
            due = active[record_id]
            if choice == "delete":
                items.append(delete(record_id))
                del active[record_id]
            elif due is None:
                items.append(dispatch(record_id))
                del active[record_id]
            else:
                interval = every_seconds[record_id] * 1000
                accepted = due + draw(st.integers(0, 3 * interval))
                items.append(dispatch_every(record_id, accepted))
                active[record_id] = due + ((accepted - due) // interval + 1) * interval
    return items


@st.composite
def mixed_logs(draw: st.DrawFn) -> tuple[list[Event], int, list[int]]:
    """A parent segment, then the child's own segment (the fold starts at the fork)."""
    parent = draw(mixed_segment(10))
    events = log(*parent, *draw(mixed_segment(30)))
    seed = len(parent)
    cuts = sorted(draw(st.lists(st.integers(seed, len(events)), max_size=5)))
    return events, seed, cuts


def _scan(records: tuple[ScheduleRecord, ...], one_shots: bool) -> ScheduleRecord | None:
    best: ScheduleRecord | None = None
    for record in records:
        if one_shots and isinstance(record, EveryRecord):
            continue
        if best is None or record.target_ms < best.target_ms:
            best = record
    return best


@settings(max_examples=150, deadline=None)
@given(mixed_logs())
def test_incremental_fold_and_caches_equal_a_full_fold(
    case: tuple[list[Event], int, list[int]],
) -> None:
    events, seed, cuts = case
    expected = fold_schedule_events(events, seed)
    folded = fold_schedule_events(events[:seed], seed)
    for cut in [*cuts, len(events)]:
        folded = continue_fold(folded, events[:cut])
        full = fold_schedule_events(events[:cut], seed)
        assert folded == full
        assert folded.earliest() == _scan(folded.active, False) == full.earliest()
        assert folded.earliest_one_shot() == _scan(folded.active, True)
    assert folded == expected


def test_advancing_the_earliest_every_record_recomputes_the_cache() -> None:
    events = log(
        create_every("a", every=300, at=AT),
        create_at("b", at=format_instant(AT_MS + 200_000)),
        create_every("c", every=300, at=format_instant(AT_MS + 100_000)),
    )
    folded = fold_schedule_events(events)
    assert folded.earliest() == folded.get("a")
    assert folded.earliest_one_shot() == folded.get("b")
    advanced = continue_fold(
        folded, [*events, Event("schedule/change", 3, dispatch_every("a", AT))]
    )
    assert advanced.earliest() == advanced.get("c")
    assert advanced.earliest_one_shot() == advanced.get("b")
    other_advanced = continue_fold(
        advanced,
        [
            *events,
            Event("schedule/change", 3, dispatch_every("a", AT)),
            Event("schedule/change", 4, dispatch_every("c", AT_MS + 100_000)),
        ],
    )
    assert other_advanced.earliest() == other_advanced.get("b")
    assert parse_instant(AT) == AT_MS
