"""Folding the log: transitions, forks, incremental folds, candidates, id allocation."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages import (
    AfterRecord,
    CreateChange,
    DeleteChange,
    DispatchChange,
    ErrorCode,
    EventLike,
    FoldedSchedules,
    ScheduleLogError,
    ScheduleRecord,
    allocate_schedule_id,
    decode_schedule_change,
    fold_schedule_events,
    validate_schedule_stream,
)
from messages._fold import apply_schedule_change, check_schedule_candidate, continue_fold
from tests.messages.helpers import (
    AT,
    CountingLog,
    Event,
    create,
    delete,
    dispatch,
    log,
    other,
    valid_segment,
)


def rec(id: str, prompt: str = "p", after: int = 5, at: str = AT) -> ScheduleRecord:
    return AfterRecord(id, prompt, after, at)


def ids(folded: FoldedSchedules) -> list[str]:
    return [record.id for record in folded.active]


def test_event_dataclass_is_event_like() -> None:
    event: EventLike = Event("x", 0, None)
    assert event.seq == 0


def test_empty_log() -> None:
    assert fold_schedule_events([]) == FoldedSchedules((), (), 0, 0)


def test_create_delete_dispatch_transitions() -> None:
    events = log(
        create("schedule-1"),
        create("schedule-2", "two"),
        create("schedule-3"),
        delete("schedule-1"),
        dispatch("schedule-3"),
    )
    folded = fold_schedule_events(events)
    assert folded.active == (rec("schedule-2", "two"),)
    assert folded.seen_ids == ("schedule-1", "schedule-2", "schedule-3")
    assert (folded.seed_length, folded.end) == (0, 5)
    assert folded.get("schedule-2") == rec("schedule-2", "two")
    assert folded.get("schedule-1") is None
    assert folded.is_seen("schedule-1")
    assert not folded.is_seen("schedule-4")


def test_active_keeps_create_order() -> None:
    events = log(create("b"), create("a"), create("c"), delete("a"), create("d"))
    assert ids(fold_schedule_events(events)) == ["b", "c", "d"]


def test_other_event_types_are_skipped_whatever_their_data() -> None:
    events = log(
        other({"version": 2}),
        create("schedule-1"),
        ("schedule/change ", {"garbage": True}),
        ("Schedule/Change", None),
        other(delete("schedule-9")),
    )
    folded = fold_schedule_events(events)
    assert ids(folded) == ["schedule-1"]
    assert folded.end == 5


@pytest.mark.parametrize(
    ("items", "fragment"),
    [
        ((create("s"), create("s")), "event seq 1: create id 's' was reused"),
        ((create("s"), delete("s"), create("s")), "event seq 2"),
        ((create("s"), dispatch("s"), create("s")), "was reused"),
        ((create("s"), create("s")), "was reused"),
        ((delete("s"),), "event seq 0: delete of inactive id 's'"),
        ((dispatch("s"),), "event seq 0: dispatch of inactive id 's'"),
        ((create("s"), delete("s"), delete("s")), "event seq 2: delete of inactive id"),
        ((create("s"), dispatch("s"), dispatch("s")), "event seq 2: dispatch of inactive id"),
        ((create("s"), delete("s"), dispatch("s")), "dispatch of inactive id"),
        ((create("s"), dispatch("s"), delete("s")), "delete of inactive id"),
        ((other(), other(), {"version": 2}), "event seq 2: schedule/change: version"),
        ((create("s"), create("t", after=0)), "event seq 1: schedule/change: afterSeconds"),
    ],
)
def test_fold_rejects_broken_streams(items: tuple[dict[str, object], ...], fragment: str) -> None:
    with pytest.raises(ScheduleLogError) as caught:
        fold_schedule_events(log(*items))
    assert fragment in caught.value.message
    assert caught.value.code is ErrorCode.CORRUPT_SCHEDULE_LOG


def test_fork_suffix_ignores_the_parents_events() -> None:
    parent = [create("schedule-1", "parent"), create("schedule-2")]
    child = [create("schedule-1", "child"), dispatch("schedule-1")]
    folded = fold_schedule_events(log(*parent, *child), seed_length=2)
    assert folded.active == ()
    assert folded.seen_ids == ("schedule-1",)
    assert (folded.seed_length, folded.end) == (2, 4)
    assert allocate_schedule_id(folded) == "schedule-2"


def test_fork_cannot_touch_inherited_records() -> None:
    events = log(create("schedule-1"), delete("schedule-1"))
    with pytest.raises(ScheduleLogError, match="event seq 1: delete of inactive id"):
        fold_schedule_events(events, seed_length=1)


def test_fork_does_not_judge_a_broken_parent_prefix() -> None:
    events = log({"version": 2}, delete("x"), create("schedule-1"))
    assert ids(fold_schedule_events(events, 2)) == ["schedule-1"]


@pytest.mark.parametrize("seed", [0, 3, 3.0, 2])
def test_fold_accepts_seed_lengths_in_range(seed: object) -> None:
    events = log(create("a"), create("b"), create("c"))
    folded = fold_schedule_events(events, seed)
    assert folded.seed_length == seed
    assert type(folded.seed_length) is int
    assert len(folded.active) == 3 - folded.seed_length


@pytest.mark.parametrize("seed", [-1, 4, True, False, 1.5, "0", None, float("nan")])
def test_fold_rejects_bad_seed_length(seed: object) -> None:
    with pytest.raises(ScheduleLogError, match=r"seed_length must be an integer in 0\.\.3"):
        fold_schedule_events(log(create("a"), other(), other()), seed)


def test_earliest_takes_the_smallest_target_ties_in_create_order() -> None:
    events = log(
        create("late", at="2026-01-02T00:00:00.000Z"),
        create("tie-1", at=AT),
        create("early", at="2025-12-31T00:00:00.000Z"),
        create("tie-2", at=AT),
        delete("early"),
    )
    folded = fold_schedule_events(events)
    earliest = folded.earliest()
    assert earliest is not None
    assert earliest.id == "tie-1"
    assert fold_schedule_events([]).earliest() is None


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        ((), "schedule-1"),
        (("schedule-1",), "schedule-2"),
        (("schedule-2",), "schedule-3"),
        (("schedule-2", "schedule-3"), "schedule-4"),
        (("x", "schedule-3", "schedule-4"), "schedule-5"),
        (("schedule-3", "x", "schedule-5"), "schedule-4"),
        (("a", "b"), "schedule-3"),
        (("schedule-1", "schedule-2"), "schedule-3"),
    ],
)
def test_allocate_schedule_id(seen: tuple[str, ...], expected: str) -> None:
    assert allocate_schedule_id(FoldedSchedules((), seen)) == expected


def test_allocated_ids_are_never_reused_after_delete() -> None:
    folded = fold_schedule_events(log(create("schedule-1"), delete("schedule-1")))
    assert allocate_schedule_id(folded) == "schedule-2"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"seen_ids": ("a", "a")},
        {"active": (rec("a"),), "seen_ids": ()},
        {"active": (rec("a"), rec("a")), "seen_ids": ("a",)},
        {"seed_length": 2, "end": 1},
        {"seed_length": -1, "end": 1},
    ],
)
def test_folded_schedules_rejects_inconsistent_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        FoldedSchedules(**kwargs)  # type: ignore[arg-type]


def test_folded_schedules_is_frozen_and_compares_by_value() -> None:
    folded = fold_schedule_events(log(create("a")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        folded.end = 3  # type: ignore[misc]
    assert folded == FoldedSchedules((rec("a"),), ("a",), 0, 1)
    assert hash(folded) == hash(FoldedSchedules((rec("a"),), ("a",), 0, 1))
    assert folded != FoldedSchedules((rec("a"),), ("a",), 0, 2)


# ---- incremental folding ---------------------------------------------------


def test_continue_fold_reads_only_new_events() -> None:
    items = [create(f"s{i}") if i % 10 == 0 else other() for i in range(2_000)]
    events = log(*items)
    folded = fold_schedule_events(events[:1_990], 5)
    counting = CountingLog(events)
    result = continue_fold(folded, counting)
    assert sorted(counting.reads) == list(range(1_990, 2_000))
    assert result == fold_schedule_events(events, 5)


def test_fold_reads_only_the_suffix() -> None:
    counting = CountingLog(log(create("a"), create("b"), create("c")))
    fold_schedule_events(counting, 2)
    assert counting.reads == [2]


def test_continue_fold_without_new_events_is_the_same_fold() -> None:
    events = log(create("a"))
    folded = fold_schedule_events(events)
    assert continue_fold(folded, events) is folded


def test_continue_fold_rejects_a_shrunk_log() -> None:
    events = log(create("a"), other())
    folded = fold_schedule_events(events)
    with pytest.raises(ScheduleLogError, match="shrank from 2 to 1"):
        continue_fold(folded, events[:1])


def test_continue_fold_applies_the_rules_to_new_events() -> None:
    events = log(create("a"), delete("a"))
    folded = fold_schedule_events(events)
    grown = log(create("a"), delete("a"), create("a"))
    with pytest.raises(ScheduleLogError, match="event seq 2: create id 'a' was reused"):
        continue_fold(folded, grown)


def test_continue_fold_does_not_change_its_input() -> None:
    events = log(create("a"))
    folded = fold_schedule_events(events)
    snapshot = (folded.active, folded.seen_ids, folded.end)
    continue_fold(folded, [*events, Event("schedule/change", 1, delete("a"))])
    assert (folded.active, folded.seen_ids, folded.end) == snapshot
    assert folded.get("a") == rec("a")


@st.composite
def forked_logs(draw: st.DrawFn) -> tuple[list[Event], int, list[int]]:
    parent = draw(valid_segment())
    child = draw(valid_segment(40))
    events = log(*parent, *child)
    seed = len(parent)
    cuts = sorted(draw(st.lists(st.integers(seed, len(events)), max_size=4)))
    return events, seed, cuts


@settings(max_examples=200, deadline=None)
@given(forked_logs())
def test_continue_fold_equals_a_full_refold(case: tuple[list[Event], int, list[int]]) -> None:
    events, seed, cuts = case
    expected = fold_schedule_events(events, seed)
    folded = fold_schedule_events(events[: cuts[0]] if cuts else events[:seed], seed)
    for cut in cuts[1:]:
        folded = continue_fold(folded, events[:cut])
        assert folded == fold_schedule_events(events[:cut], seed)
    assert continue_fold(folded, events) == expected
    assert len(expected.seen_ids) == len(set(expected.seen_ids))


arbitrary_items = st.lists(
    st.one_of(
        st.sampled_from(["a", "b", "c"]).map(create),
        st.sampled_from(["a", "b", "c"]).map(delete),
        st.sampled_from(["a", "b", "c"]).map(dispatch),
        st.just(other()),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(arbitrary_items, st.data())
def test_continue_fold_fails_exactly_when_a_full_fold_fails(
    items: list[dict[str, object] | tuple[str, object]], data: st.DataObject
) -> None:
    events = log(*items)
    cut = data.draw(st.integers(0, len(events)))

    def outcome(run: object) -> object:
        try:
            assert callable(run)
            return run()
        except ScheduleLogError as error:
            return error.message

    full = outcome(lambda: fold_schedule_events(events))
    prefix = outcome(lambda: fold_schedule_events(events[:cut]))
    if isinstance(prefix, FoldedSchedules):
        assert outcome(lambda: continue_fold(prefix, events)) == full
    else:
        assert isinstance(full, str)


def test_large_log_folds_linearly() -> None:
    """100,000 events, 10% of them schedule changes; reads every suffix event once."""
    items: list[dict[str, object] | tuple[str, object]] = []
    for i in range(10_000):
        items.extend([other()] * 9)
        items.append(create(f"s{i}") if i % 2 == 0 else dispatch(f"s{i - 1}"))
    counting = CountingLog(log(*items))
    folded = fold_schedule_events(counting)
    assert counting.reads == list(range(100_000))
    assert len(folded.active) == 0
    assert len(folded.seen_ids) == 5_000


# ---- candidates --------------------------------------------------------------


def test_apply_schedule_change_judges_a_candidate() -> None:
    folded = fold_schedule_events(log(create("a"), other()))
    after = apply_schedule_change(folded, CreateChange(rec("b")))
    assert ids(after) == ["a", "b"]
    assert after.end == 3
    assert ids(folded) == ["a"]
    after = apply_schedule_change(after, DispatchChange("a"))
    assert (ids(after), after.seen_ids, after.end) == (["b"], ("a", "b"), 4)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (CreateChange(rec("a")), "candidate: create id 'a' was reused"),
        (CreateChange(rec("gone")), "candidate: create id 'gone' was reused"),
        (DeleteChange("gone"), "candidate: delete of inactive id 'gone'"),
        (DispatchChange("nope"), "candidate: dispatch of inactive id 'nope'"),
    ],
)
def test_apply_schedule_change_rejects(
    change: CreateChange | DeleteChange | DispatchChange, fragment: str
) -> None:
    folded = fold_schedule_events(log(create("a"), create("gone"), delete("gone")))
    with pytest.raises(ScheduleLogError) as caught:
        apply_schedule_change(folded, change)
    assert caught.value.message == fragment


def test_apply_then_continue_matches_appending() -> None:
    events = log(create("a"))
    folded = fold_schedule_events(events)
    candidate = delete("a")
    judged = check_schedule_candidate(folded, candidate)
    appended = log(create("a"), candidate)
    assert judged == fold_schedule_events(appended) == continue_fold(folded, appended)
    assert judged == apply_schedule_change(folded, decode_schedule_change(candidate))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"version": 1, "operation": "delete"}, "candidate: schedule/change: missing key 'id'"),
        (create("a", prompt=" p"), "candidate: schedule/change: prompt"),
        (create("a"), "candidate: create id 'a' was reused"),
        (dispatch("zzz"), "candidate: dispatch of inactive id 'zzz'"),
        ("not a payload", "candidate: schedule/change: payload must be an object"),
    ],
)
def test_check_schedule_candidate_rejects(data: object, fragment: str) -> None:
    folded = fold_schedule_events(log(create("a")))
    with pytest.raises(ScheduleLogError) as caught:
        check_schedule_candidate(folded, data)
    assert fragment in caught.value.message


def test_validate_schedule_stream() -> None:
    events = log(create("schedule-1"), create("schedule-1"))
    assert validate_schedule_stream(events, 1) == fold_schedule_events(events, 1)
    with pytest.raises(ScheduleLogError, match="was reused"):
        validate_schedule_stream(events)
    with pytest.raises(ScheduleLogError, match="was reused"):
        validate_schedule_stream(events, None)
    with pytest.raises(ScheduleLogError, match="seed_length"):
        validate_schedule_stream(events, 3)
