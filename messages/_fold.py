"""Folding a session's ``schedule/change`` events into the active reminders."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Protocol

from messages._errors import ScheduleLogError
from messages._numbers import json_integer
from messages._occurrence import advance_repeating_record
from messages._records import (
    REPEATING_KINDS,
    SCHEDULE_CHANGE_TYPE,
    CreateChange,
    DeleteChange,
    OneShotRecord,
    ScheduleChange,
    ScheduleRecord,
    decode_schedule_change,
)

__all__ = [
    "EventLike",
    "FoldedSchedules",
    "allocate_schedule_id",
    "apply_schedule_change",
    "check_schedule_candidate",
    "continue_fold",
    "fold_schedule_events",
    "validate_schedule_stream",
]

_target = attrgetter("target_ms")


class _Unknown:
    """Marks a cached value that has not been computed yet."""

    __slots__ = ()


_UNKNOWN = _Unknown()


class EventLike(Protocol):
    """The read-only view of a session event that folding needs."""

    @property
    def type(self) -> str:
        """The event type; only ``"schedule/change"`` is folded."""
        ...

    @property
    def seq(self) -> int:
        """The event's index in its session log."""
        ...

    @property
    def data(self) -> object:
        """The event's JSON-like payload."""
        ...


@dataclass(frozen=True, slots=True)
class FoldedSchedules:
    """The result of folding a log suffix.

    ``active`` holds the live records in create order (an advanced ``every`` record
    keeps its position), ``seen_ids`` every id created in the folded suffix in
    order, ``seed_length`` where the suffix starts and ``end`` the log length that
    was folded (one past the last folded event). Inconsistent values (duplicate
    ids, active ids never seen, ``seed_length > end``) raise ``ValueError``.

    The earliest record overall and the earliest one-shot record are cached; the
    fold keeps both caches right as records are created, removed and advanced,
    and recomputes one lazily (one scan) only after its record left or moved.
    """

    active: tuple[ScheduleRecord, ...] = ()
    seen_ids: tuple[str, ...] = ()
    seed_length: int = 0
    end: int = 0
    _by_id: Mapping[str, ScheduleRecord] = field(init=False, compare=False, repr=False)
    _seen: AbstractSet[str] = field(init=False, compare=False, repr=False)
    _earliest: ScheduleRecord | _Unknown | None = field(init=False, compare=False, repr=False)
    _earliest_one_shot: OneShotRecord | _Unknown | None = field(
        init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        seen = frozenset(self.seen_ids)
        by_id = {record.id: record for record in self.active}
        if len(seen) != len(self.seen_ids):
            raise ValueError("seen_ids must be unique")
        if len(by_id) != len(self.active) or not seen.issuperset(by_id):
            raise ValueError("active records must have unique, seen ids")
        if not 0 <= self.seed_length <= self.end:
            raise ValueError("need 0 <= seed_length <= end")
        object.__setattr__(self, "_seen", seen)
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_earliest", _UNKNOWN if self.active else None)
        object.__setattr__(self, "_earliest_one_shot", _UNKNOWN if self.active else None)

    @classmethod
    def _adopt(
        cls,
        by_id: dict[str, ScheduleRecord],
        *,
        seen_ids: list[str],
        seen: set[str],
        seed_length: int,
        end: int,
        earliest: ScheduleRecord | _Unknown | None,
        earliest_one_shot: OneShotRecord | _Unknown | None,
    ) -> FoldedSchedules:
        """Build from a finished :class:`_Fold`'s state, taking ownership of it.

        The fold keeps its invariants by construction, so the O(n) Python-level
        re-validation of ``__post_init__`` is skipped: only C-level copies remain,
        which keeps an incremental fold cheap however many records are active.
        """
        folded: FoldedSchedules = object.__new__(cls)
        setattr_ = object.__setattr__
        setattr_(folded, "active", tuple(by_id.values()))
        setattr_(folded, "seen_ids", tuple(seen_ids))
        setattr_(folded, "seed_length", seed_length)
        setattr_(folded, "end", end)
        setattr_(folded, "_by_id", by_id)
        setattr_(folded, "_seen", seen)
        setattr_(folded, "_earliest", earliest)
        setattr_(folded, "_earliest_one_shot", earliest_one_shot)
        return folded

    def get(self, id: str) -> ScheduleRecord | None:
        """The active record with this id, or ``None``."""
        return self._by_id.get(id)

    def earliest(self) -> ScheduleRecord | None:
        """The active record due first (smallest target; ties in create order), or ``None``."""
        earliest = self._earliest
        if isinstance(earliest, _Unknown):
            earliest = min(self.active, key=_target, default=None)
            object.__setattr__(self, "_earliest", earliest)  # a cache; not compared
        return earliest

    def earliest_one_shot(self) -> OneShotRecord | None:
        """The active ``after``/``at`` record due first (ties in create order), or ``None``."""
        earliest = self._earliest_one_shot
        if isinstance(earliest, _Unknown):
            one_shots = (r for r in self.active if not isinstance(r, REPEATING_KINDS))
            earliest = min(one_shots, key=_target, default=None)
            object.__setattr__(self, "_earliest_one_shot", earliest)  # a cache; not compared
        return earliest

    def is_seen(self, id: str) -> bool:
        """Tell whether ``id`` was ever created in the folded suffix."""
        return id in self._seen


class _Fold:
    """Mutable fold state, frozen into a :class:`FoldedSchedules` at the end."""

    __slots__ = ("active", "earliest", "earliest_one_shot", "seed_length", "seen", "seen_ids")

    def __init__(self, folded: FoldedSchedules) -> None:
        # C-level copies (the previous fold stays immutable); no per-record Python work.
        self.active: dict[str, ScheduleRecord] = dict(folded._by_id)
        self.seen: set[str] = set(folded._seen)
        self.seen_ids = list(folded.seen_ids)
        self.seed_length = folded.seed_length
        self.earliest: ScheduleRecord | _Unknown | None = folded._earliest
        self.earliest_one_shot: OneShotRecord | _Unknown | None = folded._earliest_one_shot

    def apply(self, change: ScheduleChange, where: str) -> None:
        if isinstance(change, CreateChange):
            self._create(change.schedule, where)
            return
        record = self.active.get(change.id)
        if record is None:
            raise ScheduleLogError(f"{where}: {change.operation} of inactive id {change.id!r:.80}")
        if isinstance(change, DeleteChange):
            self._remove(record)
        elif isinstance(record, REPEATING_KINDS):
            accepted = change.accepted_ms
            if accepted is None:
                raise ScheduleLogError(
                    f"{where}: dispatch of {record.kind} record {change.id!r:.80} lacks acceptedAt"
                )
            try:
                advanced = advance_repeating_record(record, accepted)
            except ScheduleLogError as error:
                raise ScheduleLogError(f"{where}: {error.message}") from error
            if advanced is None:
                self._remove(record)
            else:
                # In place: the dict keeps the key's create position. The target only
                # grows, so a cached earliest other than this record stays earliest.
                self.active[record.id] = advanced
                if record is self.earliest:
                    self.earliest = _UNKNOWN
        elif change.accepted_at is not None:
            raise ScheduleLogError(
                f"{where}: dispatch of one-shot record {change.id!r:.80} carries acceptedAt"
            )
        else:
            self._remove(record)

    def _create(self, record: ScheduleRecord, where: str) -> None:
        record_id = record.id
        if record_id in self.seen:
            raise ScheduleLogError(f"{where}: create id {record_id!r:.80} was reused")
        self.seen.add(record_id)
        self.seen_ids.append(record_id)
        self.active[record_id] = record
        # Ties keep create order: a later record wins only with a strictly smaller target.
        target = record.target_ms
        earliest = self.earliest
        if earliest is None or (not isinstance(earliest, _Unknown) and target < earliest.target_ms):
            self.earliest = record
        if not isinstance(record, REPEATING_KINDS):
            one_shot = self.earliest_one_shot
            if one_shot is None or (
                not isinstance(one_shot, _Unknown) and target < one_shot.target_ms
            ):
                self.earliest_one_shot = record

    def _remove(self, record: ScheduleRecord) -> None:
        del self.active[record.id]
        if record is self.earliest:
            self.earliest = _UNKNOWN
        if record is self.earliest_one_shot:
            self.earliest_one_shot = _UNKNOWN

    def fold(self, events: Sequence[EventLike], start: int, stop: int) -> None:
        for index in range(start, stop):
            event = events[index]
            if event.type != SCHEDULE_CHANGE_TYPE:
                continue
            try:
                change = decode_schedule_change(event.data)
            except ScheduleLogError as error:
                raise ScheduleLogError(f"event seq {event.seq}: {error.message}") from error
            self.apply(change, f"event seq {event.seq}")

    def freeze(self, end: int) -> FoldedSchedules:
        """The immutable result; this state must not be used afterwards (it is adopted)."""
        return FoldedSchedules._adopt(
            self.active,
            seen_ids=self.seen_ids,
            seen=self.seen,
            seed_length=self.seed_length,
            end=end,
            earliest=self.earliest,
            earliest_one_shot=self.earliest_one_shot,
        )


def _seed_length(value: object, length: int) -> int:
    seed = json_integer(value)
    if seed is None or not 0 <= seed <= length:
        raise ScheduleLogError(f"seed_length must be an integer in 0..{length}")
    return seed


def fold_schedule_events(events: Sequence[EventLike], seed_length: object = 0) -> FoldedSchedules:
    """Fold ``events[seed_length:]`` (a fork does not inherit its parent's reminders).

    Other event types are skipped. A delete retires any record; a one-shot
    dispatch retires its record; an ``every`` dispatch advances its record in place
    to the next target selected by its ``acceptedAt`` (or retires it when exhausted).
    A malformed change, a reused create id, a delete/dispatch of an inactive id,
    a dispatch whose shape does not fit its record's kind, or an ``acceptedAt``
    before the record's current target raises ``ScheduleLogError`` naming the
    event's seq; so does a ``seed_length`` that is not an integer in ``0..len(events)``.
    """
    length = len(events)
    seed = _seed_length(seed_length, length)
    state = _Fold(FoldedSchedules(seed_length=seed, end=seed))
    state.fold(events, seed, length)
    return state.freeze(length)


def continue_fold(folded: FoldedSchedules, events: Sequence[EventLike]) -> FoldedSchedules:
    """Fold only the events appended since ``folded`` (``events[folded.end:]``).

    ``events`` is the same append-only log, possibly grown; the result equals
    ``fold_schedule_events(events, folded.seed_length)``. A log shorter than
    ``folded.end`` raises ``ScheduleLogError``.
    """
    length = len(events)
    if length < folded.end:
        raise ScheduleLogError(f"the log shrank from {folded.end} to {length} events")
    if length == folded.end:
        return folded
    state = _Fold(folded)
    state.fold(events, folded.end, length)
    return state.freeze(length)


def apply_schedule_change(folded: FoldedSchedules, change: ScheduleChange) -> FoldedSchedules:
    """Apply one decoded change as if appended at ``folded.end`` (fold rules apply)."""
    state = _Fold(folded)
    state.apply(change, "candidate")
    return state.freeze(folded.end + 1)


def check_schedule_candidate(folded: FoldedSchedules, data: object) -> FoldedSchedules:
    """Decode a candidate ``schedule/change`` payload and apply it to ``folded``.

    Raises ``ScheduleLogError`` if it is malformed or breaks the fold rules.
    """
    try:
        change = decode_schedule_change(data)
    except ScheduleLogError as error:
        raise ScheduleLogError(f"candidate: {error.message}") from error
    return apply_schedule_change(folded, change)


def allocate_schedule_id(folded: FoldedSchedules) -> str:
    """The next unused id ``schedule-N``, N counting up from ``len(seen_ids) + 1``."""
    number = len(folded.seen_ids) + 1
    while folded.is_seen(f"schedule-{number}"):
        number += 1
    return f"schedule-{number}"


def validate_schedule_stream(
    events: Sequence[EventLike], seed_length: object = None
) -> FoldedSchedules:
    """The invariant check of a session's owned stream; ``seed_length`` ``None`` means 0."""
    return fold_schedule_events(events, 0 if seed_length is None else seed_length)
