"""The version 1 ``schedule/change`` protocol: records, changes, strict decoding."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from messages.errors import ErrorCode, ScheduleInputError, ScheduleLogError
from messages.instant import MAX_INSTANT_MS, MIN_INSTANT_MS, format_instant, parse_instant
from messages.numbers import MAX_SAFE_INTEGER, json_integer
from messages.text import ecma_trim, has_lone_surrogate, is_ecma_trimmed

__all__ = [
    "PROTOCOL_VERSION",
    "SCHEDULE_CHANGE_TYPE",
    "CreateChange",
    "DeleteChange",
    "DispatchChange",
    "ScheduleChange",
    "ScheduleRecord",
    "create_after_schedule_record",
    "decode_schedule_change",
    "encode_schedule_change",
]

SCHEDULE_CHANGE_TYPE = "schedule/change"
"""The session event type Schedule owns."""

PROTOCOL_VERSION = 1
"""The only ``version`` this protocol reads and writes."""

_CHANGE_KEYS: dict[str, tuple[str, ...]] = {
    "create": ("version", "operation", "schedule"),
    "delete": ("version", "operation", "id"),
    "dispatch": ("version", "operation", "id"),
}
_SCHEDULE_KEYS = ("id", "kind", "prompt", "afterSeconds", "scheduledAt")


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """One one-shot ``after`` reminder as stored in a ``create`` change.

    ``target_ms`` is derived from ``scheduled_at`` once, at construction; building a
    record with a non-canonical ``scheduled_at`` raises ``ValueError``.
    """

    id: str
    prompt: str
    after_seconds: int
    scheduled_at: str
    target_ms: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_ms", parse_instant(self.scheduled_at))

    @property
    def kind(self) -> Literal["after"]:
        """The schedule kind; v1 knows only ``"after"``."""
        return "after"

    def to_json(self) -> dict[str, object]:
        """The record's wire object: ``id, kind, prompt, afterSeconds, scheduledAt``."""
        return {
            "id": self.id,
            "kind": "after",
            "prompt": self.prompt,
            "afterSeconds": self.after_seconds,
            "scheduledAt": self.scheduled_at,
        }


@dataclass(frozen=True, slots=True)
class CreateChange:
    """A ``create`` change: the record becomes active."""

    schedule: ScheduleRecord
    operation: ClassVar[Literal["create"]] = "create"

    @property
    def id(self) -> str:
        """The id of the created record."""
        return self.schedule.id

    def to_json(self) -> dict[str, object]:
        """The change's wire payload: ``version, operation, schedule``."""
        schedule = self.schedule.to_json()
        return {"version": PROTOCOL_VERSION, "operation": "create", "schedule": schedule}


@dataclass(frozen=True, slots=True)
class DeleteChange:
    """A ``delete`` change: the active record ``id`` is removed without delivery."""

    id: str
    operation: ClassVar[Literal["delete"]] = "delete"

    def to_json(self) -> dict[str, object]:
        """The change's wire payload: ``version, operation, id``."""
        return {"version": PROTOCOL_VERSION, "operation": "delete", "id": self.id}


@dataclass(frozen=True, slots=True)
class DispatchChange:
    """A ``dispatch`` change: the active record ``id`` was delivered once."""

    id: str
    operation: ClassVar[Literal["dispatch"]] = "dispatch"

    def to_json(self) -> dict[str, object]:
        """The change's wire payload: ``version, operation, id``."""
        return {"version": PROTOCOL_VERSION, "operation": "dispatch", "id": self.id}


ScheduleChange = CreateChange | DeleteChange | DispatchChange
"""Any decoded ``schedule/change``."""


def _fail(rule: str) -> ScheduleLogError:
    return ScheduleLogError(f"schedule/change: {rule}")


def _show(value: str) -> str:
    """A short, printable rendering of a key or id for a diagnostic."""
    text = repr(value)
    return text if len(text) <= 64 else text[:60] + "...'"


def _object(value: object, where: str, keys: tuple[str, ...]) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise _fail(f"{where} must be an object")
    for key in value:
        if not isinstance(key, str):
            raise _fail(f"{where} has a non-string key")
    for key in value:
        if key not in keys:
            raise _fail(f"unknown key {_show(key)} in {where}")
    for key in keys:
        if key not in value:
            raise _fail(f"missing key {key!r} in {where}")
    return value


def _id(value: object) -> str:
    if not isinstance(value, str) or not value or not is_ecma_trimmed(value):
        raise _fail("id must be a non-empty string equal to its own trim")
    return str(value)


def _record(value: object) -> ScheduleRecord:
    schedule = _object(value, "schedule", _SCHEDULE_KEYS)
    record_id = _id(schedule["id"])
    kind = schedule["kind"]
    if not isinstance(kind, str) or kind != "after":
        raise _fail('kind must be "after"')
    prompt = schedule["prompt"]
    if not isinstance(prompt, str) or not prompt or not is_ecma_trimmed(prompt):
        raise _fail("prompt must be a non-empty string equal to its own trim")
    if has_lone_surrogate(prompt):
        raise _fail("prompt must be valid Unicode (no lone surrogates)")
    after = json_integer(schedule["afterSeconds"])
    if after is None or not 1 <= after <= MAX_SAFE_INTEGER:
        raise _fail("afterSeconds must be an integer in 1..2**53-1")
    scheduled_at = schedule["scheduledAt"]
    if not isinstance(scheduled_at, str):
        raise _fail("scheduledAt must be a string")
    try:
        return ScheduleRecord(record_id, str(prompt), after, str(scheduled_at))
    except ValueError as error:
        raise _fail(f"scheduledAt must be a canonical UTC instant: {error}") from None


def decode_schedule_change(value: object) -> ScheduleChange:
    """Strictly decode a ``schedule/change`` payload into an immutable change.

    Any violation of the v1 protocol raises ``ScheduleLogError`` naming the rule.
    Objects may be any ``Mapping`` with string keys; numbers follow JSON semantics.
    """
    if not isinstance(value, Mapping):
        raise _fail("payload must be an object")
    if "version" not in value:
        raise _fail("missing key 'version'")
    version = value["version"]
    if json_integer(version) != PROTOCOL_VERSION:
        raise _fail("version must be the number 1")
    operation = value.get("operation")
    if not isinstance(operation, str) or operation not in _CHANGE_KEYS:
        raise _fail("operation must be one of 'create', 'delete', 'dispatch'")
    payload = _object(value, "payload", _CHANGE_KEYS[operation])
    if operation == "create":
        return CreateChange(_record(payload["schedule"]))
    if operation == "delete":
        return DeleteChange(_id(payload["id"]))
    return DispatchChange(_id(payload["id"]))


def encode_schedule_change(change: ScheduleChange) -> dict[str, object]:
    """Encode a change as its wire payload (``change.to_json()``)."""
    return change.to_json()


def create_after_schedule_record(
    id: str,
    prompt: object,
    after_seconds: object,
    now_ms: object,
) -> ScheduleRecord:
    """Build the record for "remind me ``after_seconds`` from ``now_ms``" under ``id``.

    Checks, in order: ``prompt`` (a string, valid Unicode, non-empty after trim;
    stored trimmed) else ``invalid_prompt``; ``after_seconds`` (integer in
    1..2**53-1) else ``invalid_rule``; ``now_ms`` (integer) and the target instant
    (within years 0001–9999) else ``time_out_of_range``. A malformed ``id`` is a
    programming error and raises ``ValueError``.
    """
    if not isinstance(prompt, str) or has_lone_surrogate(prompt) or not ecma_trim(prompt):
        raise ScheduleInputError(
            ErrorCode.INVALID_PROMPT, "prompt must be a non-empty string of valid Unicode"
        )
    after = json_integer(after_seconds)
    if after is None or not 1 <= after <= MAX_SAFE_INTEGER:
        raise ScheduleInputError(
            ErrorCode.INVALID_RULE, "after_seconds must be an integer in 1..9007199254740991"
        )
    now = json_integer(now_ms)
    target = None if now is None else now + after * 1000
    if target is None or not MIN_INSTANT_MS <= target <= MAX_INSTANT_MS:
        raise ScheduleInputError(
            ErrorCode.TIME_OUT_OF_RANGE,
            "the reminder time must fall within 0001-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z",
        )
    if not isinstance(id, str) or not id or not is_ecma_trimmed(id):
        raise ValueError("schedule id must be a non-empty string equal to its own trim")
    return ScheduleRecord(str(id), ecma_trim(prompt), after, format_instant(target))
