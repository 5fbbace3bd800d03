"""An owner whose session offers a schedule checkpoint folds only the log after it.

Each log of the table is folded both ways: by an owner on a plain session (the
whole log) and, for every possible checkpoint end, by an owner on a session
offering the fold of the log up to there. Both must list, deliver and delete
alike, and the second must never read an event before its checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any, overload

import pytest

from actors._runtime import Runtime
from host_bridge.protocols import SessionEvent, SessionWithCheckpoint
from host_bridge.testing import FakeHost, FakeSession
from messages._fold import FoldedSchedules, fold_schedule_events
from messages._instant import format_instant, parse_instant
from tests.messages.helpers import create, create_at, create_every, delete, dispatch
from tests.messages.helpers import dispatch_every as every_dispatch
from tests.owner.harness import Harness

NOW = parse_instant("2026-08-05T12:00:00.000Z")
MINUTE = 60_000


def at(minutes: int) -> str:
    """The canonical instant ``minutes`` after the tests' now."""
    return format_instant(NOW + minutes * MINUTE)


Item = dict[str, object] | tuple[str, object]

LOGS: dict[str, tuple[tuple[Item, ...], int | None]] = {
    "one-shots": (
        (
            create("schedule-1", "one", 60, at(-10)),
            ("message", {"n": 1}),
            create_at("schedule-2", "two", at(30)),
            dispatch("schedule-1"),
            ("message", {"n": 2}),
            create("schedule-3", "three", 600, at(10)),
        ),
        None,
    ),
    "every records advanced": (
        (
            create_every("schedule-1", "stretch", 300, at(-60)),
            ("message", {"n": 1}),
            every_dispatch("schedule-1", at(-60)),
            every_dispatch("schedule-1", at(-55)),
            create("schedule-2", "later", 3600, at(60)),
            every_dispatch("schedule-1", at(-50)),
            ("message", {"n": 2}),
        ),
        None,
    ),
    "deletes": (
        (
            create("schedule-1", "a", 60, at(5)),
            create("schedule-2", "b", 60, at(15)),
            delete("schedule-1"),
            ("message", {"n": 1}),
            create("schedule-3", "c", 60, at(25)),
            delete("schedule-3"),
            create("schedule-4", "d", 60, at(35)),
        ),
        None,
    ),
    "a fork": (
        (
            create("schedule-1", "the parent's", 60, at(1)),
            ("message", {"n": 1}),
            create("schedule-1", "the child's", 60, at(20)),
            ("message", {"n": 2}),
            create_every("schedule-2", "tick", 600, at(-30)),
            every_dispatch("schedule-2", at(-30)),
        ),
        2,
    ),
}


def events_of(items: Sequence[Item]) -> tuple[SessionEvent, ...]:
    """The log of ``items``: dicts are ``schedule/change`` payloads, tuples ``(type, data)``."""
    return tuple(
        SessionEvent(item[0], seq, NOW, item[1])
        if isinstance(item, tuple)
        else SessionEvent("schedule/change", seq, NOW, item)
        for seq, item in enumerate(items)
    )


class _Watched(Sequence[SessionEvent]):
    """A snapshot that records the lowest index read through it (slices and iteration too)."""

    def __init__(self, events: Sequence[SessionEvent], offset: int, reads: list[int]) -> None:
        self._events = events
        self._offset = offset
        self._reads = reads

    def __len__(self) -> int:
        return len(self._events)

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[SessionEvent]: ...

    def __getitem__(self, index: int | slice) -> SessionEvent | Sequence[SessionEvent]:
        if isinstance(index, slice):
            start = index.indices(len(self._events))[0]
            return _Watched(self._events[index], self._offset + start, self._reads)
        position = index + len(self._events) if index < 0 else index
        self._reads.append(self._offset + position)
        return self._events[index]

    def __iter__(self) -> Iterator[SessionEvent]:
        if self._events:
            self._reads.append(self._offset)
        return iter(self._events)


class CheckpointedSession(FakeSession):
    """A FakeSession offering ``checkpoint`` and recording which events are read."""

    def __init__(self, checkpoint: FoldedSchedules | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schedule_checkpoint = checkpoint
        self.reads: list[int] = []

    @property
    def events(self) -> Sequence[SessionEvent]:  # type: ignore[override]
        return _Watched(super().events, 0, self.reads)

    def plain_events(self) -> Sequence[SessionEvent]:
        """The log, read without being recorded."""
        return super().events


def _plain(runtime: Runtime, events: Sequence[SessionEvent], seed: int | None) -> Harness:
    host = FakeHost(start_ms=NOW)
    return Harness(host, seed_events=tuple(events), seed_length=seed, runtime=runtime)


def _checkpointed(
    runtime: Runtime, events: Sequence[SessionEvent], seed: int | None, end: int
) -> tuple[Harness, CheckpointedSession]:
    host = FakeHost(start_ms=NOW)
    checkpoint = fold_schedule_events(events[:end], seed or 0)
    session = CheckpointedSession(
        checkpoint,
        id="agent-1/session",
        seed_events=events,
        seed_length=seed,
        clock=host.clock,
        journal=host.journal,
    )
    return Harness(host, session=session, runtime=runtime), session


def _listed(harness: Harness) -> list[dict[str, Any]]:
    return list(harness.value(harness.list_schedules(), "list")["schedules"])


def _run(harness: Harness) -> dict[str, Any]:
    """What the owner shows and does: the list, then two hours of deliveries, then a delete."""
    shown: dict[str, Any] = {"listed": _listed(harness)}
    for _ in range(12):
        harness.advance(10 * MINUTE)
        while harness.agent.run_queued_turns():  # each turn's end lets the next delivery go
            harness.settle()
    shown["received"] = [message.text for message in harness.agent.received]
    shown["after"] = _listed(harness)
    remaining = shown["after"]
    if remaining:
        shown["deleted"] = harness.value(harness.delete(remaining[0]["id"]), "delete")
        shown["final"] = _listed(harness)
    shown["steps"] = harness.steps()
    shown["fault"] = harness.status.fault
    return shown


@pytest.mark.parametrize("name", sorted(LOGS))
def test_a_checkpoint_start_lists_delivers_and_deletes_as_a_full_fold(
    runtime: Runtime, name: str
) -> None:
    items, seed = LOGS[name]
    events = events_of(items)
    expected = _run(_plain(runtime, events, seed))
    assert expected["fault"] is None
    assert expected["received"], "the table's logs deliver something"
    for end in range(seed or 0, len(events) + 1):
        harness, session = _checkpointed(runtime, events, seed, end)
        assert isinstance(session, SessionWithCheckpoint)
        assert _run(harness) == expected, f"checkpoint at {end}"
        assert min(session.reads, default=end) >= end, f"checkpoint at {end}: read before it"


@pytest.mark.parametrize("name", sorted(LOGS))
def test_the_owner_folds_the_same_as_the_full_fold_from_any_checkpoint(
    runtime: Runtime, name: str
) -> None:
    items, seed = LOGS[name]
    events = events_of(items)
    for end in range(seed or 0, len(events) + 1):
        harness, session = _checkpointed(runtime, events, seed, end)
        listed = _listed(harness)
        full = fold_schedule_events(session.plain_events(), seed or 0)
        assert [view["id"] for view in listed] == [record.id for record in full.active]
        assert [view["scheduledAt"] for view in listed] == [r.scheduled_at for r in full.active]


def test_a_corrupt_tail_after_the_checkpoint_faults_as_a_full_fold_does(
    runtime: Runtime,
) -> None:
    items, _ = LOGS["one-shots"]
    events = events_of((*items, dispatch("schedule-9")))  # an inactive id: corrupt
    plain = _plain(runtime, events, None)
    harness, session = _checkpointed(runtime, events, None, len(items))
    for owner in (plain, harness):
        assert owner.status.fault == "corrupt schedule log"
        assert owner.value(owner.list_schedules(), "list")["code"] == "corrupt_schedule_log"
    assert min(session.reads) >= len(items)


@pytest.mark.parametrize(
    "checkpoint",
    [
        FoldedSchedules(seed_length=1, end=1),  # another seed_length than the header's
        FoldedSchedules(end=99),  # beyond the log
        "not a fold",
    ],
    ids=["seed", "beyond", "type"],
)
def test_an_unusable_checkpoint_is_logged_and_the_whole_log_folded(
    runtime: Runtime, checkpoint: Any, caplog: pytest.LogCaptureFixture
) -> None:
    items, _ = LOGS["deletes"]
    events = events_of(items)
    host = FakeHost(start_ms=NOW)
    session = CheckpointedSession(
        checkpoint, id="agent-1/session", seed_events=events, clock=host.clock, journal=host.journal
    )
    with caplog.at_level(logging.WARNING):
        harness = Harness(host, session=session, runtime=runtime)
        listed = _listed(harness)
    assert [view["id"] for view in listed] == ["schedule-2", "schedule-4"]
    assert 0 in session.reads  # the whole log was folded
    assert any("schedule checkpoint" in record.getMessage() for record in caplog.records)


def test_a_session_without_the_attribute_folds_the_whole_log(runtime: Runtime) -> None:
    items, _ = LOGS["deletes"]
    harness = _plain(runtime, events_of(items), None)
    assert not isinstance(harness.session, SessionWithCheckpoint)
    assert [view["id"] for view in _listed(harness)] == ["schedule-2", "schedule-4"]
