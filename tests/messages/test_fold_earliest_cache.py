"""The fold's cached ``earliest()`` always equals a fresh scan of ``active``.

The incremental fold tracks the earliest record as creates, deletes and
dispatches arrive (found by the benchmarks: a rescan per fold cost O(active)).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from messages import (
    AfterRecord,
    FoldedSchedules,
    ScheduleRecord,
    decode_schedule_change,
    fold_schedule_events,
)
from messages._fold import apply_schedule_change, continue_fold
from tests.messages.helpers import Event, create, delete, dispatch, log, other

# Few distinct instants, so ties (broken by create order) are common.
_INSTANTS = (
    "2026-01-01T00:00:00.000Z",
    "2026-01-01T00:00:00.001Z",
    "2026-01-01T00:00:01.000Z",
    "2025-12-31T23:59:59.999Z",
)


def _scan(folded: FoldedSchedules) -> ScheduleRecord | None:
    best: ScheduleRecord | None = None
    for record in folded.active:  # create order: the first of equal targets wins
        if best is None or record.target_ms < best.target_ms:
            best = record
    return best


@st.composite
def _logs(draw: st.DrawFn) -> tuple[list[Event], list[int]]:
    items: list[dict[str, object] | tuple[str, object]] = []
    active: list[str] = []
    created = 0
    for _ in range(draw(st.integers(0, 40))):
        choice = draw(st.sampled_from(["create", "create", "other", "delete", "dispatch"]))
        if choice == "create":
            created += 1
            record_id = f"schedule-{created}"
            active.append(record_id)
            items.append(create(record_id, "p", 1, draw(st.sampled_from(_INSTANTS))))
        elif choice == "other" or not active:
            items.append(other())
        else:
            record_id = draw(st.sampled_from(active))
            active.remove(record_id)
            items.append(delete(record_id) if choice == "delete" else dispatch(record_id))
    events = log(*items)
    cuts = sorted(draw(st.lists(st.integers(0, len(events)), max_size=6)))
    return events, cuts


@settings(max_examples=300, deadline=None)
@given(_logs())
def test_incremental_earliest_equals_a_scan(case: tuple[list[Event], list[int]]) -> None:
    events, cuts = case
    folded = fold_schedule_events(events[:0])
    for cut in [*cuts, len(events)]:
        folded = continue_fold(folded, events[:cut])
        assert folded.earliest() == _scan(folded)
        assert folded.earliest() is folded.earliest()
        assert folded == fold_schedule_events(events[:cut])
        assert fold_schedule_events(events[:cut]).earliest() == _scan(folded)


def test_cached_earliest_survives_removal_of_another_record() -> None:
    events = log(
        create("a", at=_INSTANTS[2]),
        create("b", at=_INSTANTS[0]),
        create("c", at=_INSTANTS[0]),
        delete("a"),
    )
    folded = fold_schedule_events(events)
    earliest = folded.earliest()
    assert earliest is not None
    assert earliest.id == "b"
    after = apply_schedule_change(folded, decode_schedule_change(dispatch("b")))
    later = after.earliest()
    assert later is not None
    assert later.id == "c"
    assert folded.earliest() is earliest  # the input fold is unchanged


def test_publicly_built_folds_compute_earliest_lazily() -> None:
    record = AfterRecord("x", "p", 1, _INSTANTS[1])
    assert FoldedSchedules((record,), ("x",), 0, 1).earliest() is record
    assert FoldedSchedules().earliest() is None
