"""A fold's state as a JSON-like value, so it can be stored and read back as it was.

:func:`encode_schedule_state` writes a :class:`~messages._fold.FoldedSchedules`
as an object::

    {"version": 1, "seedLength": int, "end": int,
     "seenIds": [id, ...], "active": [record, ...]}

each ``active`` record in the JSON shape of a create change's ``schedule``
object (an advanced ``every`` record carries its current ``scheduledAt``), in
create order. A ``cron`` record that a dispatch moved carries one more key,
``acceptedAt``: that dispatch's time. Reading it back derives the record's
target from it again, with the zone data installed then, exactly as folding
the log would; so a state stored before a ``tzdata`` release changed a zone's
rules reads back as the fold under the new rules (a record those rules
exhaust is gone). :func:`decode_schedule_state` is strict: anything else raises
:class:`~messages._errors.ScheduleLogError` with a short reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from messages._errors import ScheduleLogError
from messages._fold import FoldedSchedules
from messages._instant import format_instant, parse_instant
from messages._occurrence import move_cron_record
from messages._records import CronRecord, ScheduleRecord, decode_schedule_record
from messages._text import is_ecma_trimmed

__all__ = ["SCHEDULE_STATE_VERSION", "decode_schedule_state", "encode_schedule_state"]

SCHEDULE_STATE_VERSION = 1
"""The only ``version`` of an encoded fold state."""

_KEYS = ("version", "seedLength", "end", "seenIds", "active")


def encode_schedule_state(folded: FoldedSchedules) -> dict[str, object]:
    """The JSON-like value of ``folded``; :func:`decode_schedule_state` gives it back."""
    return {
        "version": SCHEDULE_STATE_VERSION,
        "seedLength": folded.seed_length,
        "end": folded.end,
        "seenIds": list(folded.seen_ids),
        "active": [_record_state(record) for record in folded.active],
    }


def _record_state(record: ScheduleRecord) -> dict[str, object]:
    value = record.to_json()
    if isinstance(record, CronRecord) and record.moved_by_ms is not None:
        value["acceptedAt"] = format_instant(record.moved_by_ms)
    return value


def _decode_record(item: object) -> ScheduleRecord | None:
    """One ``active`` entry (``None``: a moved ``cron`` record the zone data now exhausts)."""
    if not (isinstance(item, Mapping) and item.get("kind") == "cron" and "acceptedAt" in item):
        return decode_schedule_record(item)
    accepted = item["acceptedAt"]
    record = decode_schedule_record({k: v for k, v in item.items() if k != "acceptedAt"})
    assert isinstance(record, CronRecord)
    try:
        accepted_ms = parse_instant(accepted) if isinstance(accepted, str) else None
    except ValueError:
        accepted_ms = None
    if accepted_ms is None:
        raise ScheduleLogError("schedule/change: acceptedAt must be a canonical UTC instant")
    return move_cron_record(record, accepted_ms)


def decode_schedule_state(value: object) -> FoldedSchedules:
    """Strictly decode a value of :func:`encode_schedule_state`.

    Wrong or missing keys, wrong types, a count that is not a non-negative
    integer, ``seedLength > end``, duplicate or malformed ids, an active id not
    seen or out of create order, or a record that does not decode as a create's
    ``schedule`` object raise ``ScheduleLogError``; nothing else is raised.
    """
    state = _object(value)
    version = state["version"]
    if type(version) is not int or version != SCHEDULE_STATE_VERSION:
        raise _fail("version must be the number 1")
    seed_length = _count(state["seedLength"], "seedLength")
    end = _count(state["end"], "end")
    if seed_length > end:
        raise _fail("seedLength must not exceed end")
    seen_ids = _seen_ids(state["seenIds"])
    active = _active(state["active"], dict(zip(seen_ids, range(len(seen_ids)), strict=True)))
    try:
        return FoldedSchedules(active, seen_ids, seed_length, end)
    except ValueError:  # (checked above; kept total all the same)
        raise _fail("inconsistent fold") from None


def _fail(rule: str) -> ScheduleLogError:
    return ScheduleLogError(f"schedule state: {rule}")


def _object(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise _fail("must be an object")
    if len(value) != len(_KEYS) or not all(isinstance(k, str) and k in _KEYS for k in value):
        raise _fail(f"must have exactly the keys {', '.join(_KEYS)}")
    return value


def _count(value: object, name: str) -> int:
    if type(value) is not int or value < 0:
        raise _fail(f"{name} must be a non-negative integer")
    return value


def _list(value: object, name: str) -> Sequence[object]:
    if not isinstance(value, list | tuple):
        raise _fail(f"{name} must be an array")
    return value


def _seen_ids(value: object) -> tuple[str, ...]:
    items = _list(value, "seenIds")
    # (whole-list checks: a state holds every id ever created, decoded on each read)
    ids = tuple(item for item in items if isinstance(item, str))
    if len(ids) != len(items) or not all(ids) or not all(map(is_ecma_trimmed, ids)):
        raise _fail("seenIds must hold non-empty strings equal to their own trim")
    if len(frozenset(ids)) != len(ids):
        raise _fail("seenIds must be unique")
    return ids


def _active(value: object, order: Mapping[str, int]) -> tuple[ScheduleRecord, ...]:
    records: list[ScheduleRecord] = []
    last = -1
    for index, item in enumerate(_list(value, "active")):
        try:
            decoded = _decode_record(item)
        except ScheduleLogError as error:
            reason = error.message.removeprefix("schedule/change: ")
            raise _fail(f"active[{index}]: {reason}") from None
        if decoded is None:
            continue
        record = decoded
        position = order.get(record.id)
        if position is None:
            raise _fail(f"active[{index}]: its id was never seen")
        if position <= last:
            raise _fail(f"active[{index}]: not in create order (or a duplicate id)")
        last = position
        records.append(record)
    return tuple(records)
