"""Builders shared by the messages tests: events, payloads and valid-log strategies."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from hypothesis import strategies as st

from messages import SCHEDULE_CHANGE_TYPE, format_instant

AT = "2026-01-01T00:00:00.000Z"
AT_MS = 1_767_225_600_000


def local(date: object, time: object, zone: object) -> dict[str, object]:
    """An ``at`` selector in local time: ``{"date", "time", "time_zone"}``."""
    return {"date": date, "time": time, "time_zone": zone}


AT_EXAMPLES: tuple[tuple[object, str], ...] = (
    ("2026-08-06T09:00:00+08:00", "2026-08-06T01:00:00.000Z"),
    ("2026-08-05T20:30:00-05:30", "2026-08-06T02:00:00.000Z"),
    ("2026-08-06T01:00:00.12Z", "2026-08-06T01:00:00.120Z"),
    ("2028-02-29T01:00:00Z", "2028-02-29T01:00:00.000Z"),
    ("2026-08-07T01:00:00+14:00", "2026-08-06T11:00:00.000Z"),
    ("2026-08-05T12:00:00.001Z", "2026-08-05T12:00:00.001Z"),
    ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
    (local("2026-08-06", "09:00:00.25", "Asia/Shanghai"), "2026-08-06T01:00:00.250Z"),
    (local("2026-08-06", "09:00:00", "Etc/GMT+3"), "2026-08-06T12:00:00.000Z"),
    (local("2026-08-06", "09:00:00", "Asia/Kolkata"), "2026-08-06T03:30:00.000Z"),
    (local("2026-08-06", "09:00:00", "america/new_york"), "2026-08-06T13:00:00.000Z"),
    (local("2026-11-01", "01:30:00", "America/New_York"), "2026-11-01T05:30:00.000Z"),
    (local("2026-10-25", "01:30:00", "Europe/London"), "2026-10-25T00:30:00.000Z"),
)
"""Accepted ``at`` values of the contract's table with their stored instants, for now =
2026-08-05T12:00:00.000Z."""

REFUSED_ZONE_NAMES: tuple[str, ...] = (
    "utc",
    "GMT",
    "Z",
    "EST",
    "CST",
    "PST",
    "EST5EDT",
    "+08:00",
    "",
    " UTC",
    "UTC ",
    "Not/A_Real_Zone",
    "America//New_York",
    "America/New York",
)
"""Time zone names that are not canonical IANA keys: abbreviations, offsets, case or
whitespace slips, unknown names and malformed paths."""


@dataclass(frozen=True, slots=True)
class Event:
    """A minimal session event (matches ``EventLike``)."""

    type: str
    seq: int
    data: object


def create(id: str, prompt: str = "p", after: object = 5, at: object = AT) -> dict[str, object]:
    """A ``create`` payload."""
    schedule = {
        "id": id,
        "kind": "after",
        "prompt": prompt,
        "afterSeconds": after,
        "scheduledAt": at,
    }
    return {"version": 1, "operation": "create", "schedule": schedule}


def create_at(id: str, prompt: str = "p", at: object = AT) -> dict[str, object]:
    """A ``create`` payload of an ``at`` record."""
    schedule = {"id": id, "kind": "at", "prompt": prompt, "scheduledAt": at}
    return {"version": 1, "operation": "create", "schedule": schedule}


def create_every(
    id: str, prompt: str = "p", every: object = 300, at: object = AT
) -> dict[str, object]:
    """A ``create`` payload of an ``every`` record."""
    schedule = {
        "id": id,
        "kind": "every",
        "prompt": prompt,
        "everySeconds": every,
        "scheduledAt": at,
    }
    return {"version": 1, "operation": "create", "schedule": schedule}


DROP = object()
"""A value for :func:`changed_schedule` that removes the key."""


def changed_schedule(payload: dict[str, object], **changes: object) -> dict[str, object]:
    """A create ``payload`` whose ``schedule`` has ``changes`` (:data:`DROP` removes a key)."""
    schedule = dict(payload["schedule"])  # type: ignore[call-overload]
    for key, value in changes.items():
        if value is DROP:
            del schedule[key]
        else:
            schedule[key] = value
    return {**payload, "schedule": schedule}


def delete(id: object) -> dict[str, object]:
    """A ``delete`` payload."""
    return {"version": 1, "operation": "delete", "id": id}


def dispatch(id: object) -> dict[str, object]:
    """A one-shot ``dispatch`` payload."""
    return {"version": 1, "operation": "dispatch", "id": id}


def dispatch_every(id: object, accepted: object) -> dict[str, object]:
    """An ``every`` dispatch payload accepted at ``accepted`` (an instant string or ms)."""
    accepted_at = format_instant(accepted) if isinstance(accepted, int) else accepted
    return {"version": 1, "operation": "dispatch", "id": id, "acceptedAt": accepted_at}


def other(data: object = None) -> tuple[str, object]:
    """An event of a type Schedule does not own."""
    return ("message", data)


def log(*items: dict[str, object] | tuple[str, object]) -> list[Event]:
    """A contiguous log: dicts are ``schedule/change`` payloads, tuples ``(type, data)``."""
    events = []
    for seq, item in enumerate(items):
        if isinstance(item, tuple):
            events.append(Event(item[0], seq, item[1]))
        else:
            events.append(Event(SCHEDULE_CHANGE_TYPE, seq, item))
    return events


class CountingLog(Sequence[Event]):
    """A sequence that records which indexes were read."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self.reads: list[int] = []

    def __len__(self) -> int:
        return len(self.events)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        if isinstance(index, slice):
            raise AssertionError("folding must not copy the log with a slice")
        self.reads.append(index)
        return self.events[index]

    def __iter__(self) -> Iterator[Event]:
        raise AssertionError("folding must not iterate the whole log")


instants = st.integers(-62_135_596_800_000, 253_402_300_799_999).map(format_instant)


@st.composite
def valid_segment(
    draw: st.DrawFn, max_size: int = 25
) -> list[dict[str, object] | tuple[str, object]]:
    """Items of a log segment that folds cleanly on its own (ids may repeat other segments)."""
    items: list[dict[str, object] | tuple[str, object]] = []
    active: list[str] = []
    created = 0
    for _ in range(draw(st.integers(0, max_size))):
        choice = draw(st.sampled_from(["create", "create", "other", "delete", "dispatch"]))
        if choice == "create":
            created += 1
            record_id = f"schedule-{created}"
            active.append(record_id)
            items.append(create(record_id, f"prompt {created}", created, draw(instants)))
        elif choice == "other" or not active:
            items.append(other({"n": len(items)}))
        else:
            record_id = draw(st.sampled_from(active))
            active.remove(record_id)
            items.append(delete(record_id) if choice == "delete" else dispatch(record_id))
    return items
