"""The version 1 ``schedule/change`` protocol: records, changes, strict decoding.

A record is one of three kinds, each a frozen value holding exactly its wire fields:

* :class:`AfterRecord` (``after``): one-shot, "in N seconds";
* :class:`AtRecord` (``at``): one-shot at an absolute instant (only the resolved UTC
  instant is stored, never the submitted text, offset or zone);
* :class:`EveryRecord` (``every``): fixed-rate, its ``scheduled_at`` the earliest
  creation-anchored occurrence not yet dispatched (it moves as dispatches fold);
* :class:`CronRecord` (``cron``): a calendar rule in a time zone, its
  ``scheduled_at`` the earliest occurrence not yet dispatched (an extension of
  the version 1 union: readers that know only the first three kinds reject it).

:data:`ScheduleRecord` is their union; ``record.kind`` names the kind and
``record.target_ms`` is the current target in epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypeAlias

from messages._cron import CronRuleError, parse_cron_expression
from messages._cron_zone import CronSchedule, cron_schedule
from messages._errors import ScheduleError, ScheduleLogError
from messages._instant import format_instant, parse_instant
from messages._numbers import MAX_SAFE_INTEGER, json_integer
from messages._text import has_lone_surrogate, is_ecma_trimmed
from messages._zones import canonicalize_time_zone

__all__ = [
    "MAX_EVERY_SECONDS",
    "MIN_EVERY_SECONDS",
    "PROTOCOL_VERSION",
    "REPEATING_KINDS",
    "SCHEDULE_CHANGE_TYPE",
    "AfterRecord",
    "AtRecord",
    "CreateChange",
    "CronRecord",
    "DeleteChange",
    "DispatchChange",
    "EveryRecord",
    "OneShotRecord",
    "RepeatingRecord",
    "ScheduleChange",
    "ScheduleKind",
    "ScheduleRecord",
    "cron_problem",
    "decode_schedule_change",
    "decode_schedule_record",
    "encode_schedule_change",
    "record_at_target",
]

SCHEDULE_CHANGE_TYPE = "schedule/change"
"""The session event type Schedule owns."""

PROTOCOL_VERSION = 1
"""The only ``version`` this protocol reads and writes."""

MIN_EVERY_SECONDS = 300
"""The shortest interval of an ``every`` record, in seconds."""

MAX_EVERY_SECONDS = MAX_SAFE_INTEGER // 1000
"""The longest interval of an ``every`` record: ``everySeconds * 1000`` stays a safe integer."""

ScheduleKind = Literal["after", "at", "every", "cron"]
"""The record kinds of protocol version 1 (``cron`` is this implementation's extension)."""


@dataclass(frozen=True, slots=True)
class AfterRecord:
    """A one-shot ``after`` reminder: "remind me ``after_seconds`` from now".

    ``target_ms`` is derived from ``scheduled_at`` once, at construction; building a
    record with a non-canonical ``scheduled_at`` raises ``ValueError``.
    """

    id: str
    prompt: str
    after_seconds: int
    scheduled_at: str
    target_ms: int = field(init=False, compare=False, repr=False)
    kind: ClassVar[Literal["after"]] = "after"

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_ms", parse_instant(self.scheduled_at))

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
class AtRecord:
    """A one-shot ``at`` reminder due at the absolute instant ``scheduled_at``.

    ``target_ms`` is derived as for :class:`AfterRecord`.
    """

    id: str
    prompt: str
    scheduled_at: str
    target_ms: int = field(init=False, compare=False, repr=False)
    kind: ClassVar[Literal["at"]] = "at"

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_ms", parse_instant(self.scheduled_at))

    def to_json(self) -> dict[str, object]:
        """The record's wire object: ``id, kind, prompt, scheduledAt``."""
        return {
            "id": self.id,
            "kind": "at",
            "prompt": self.prompt,
            "scheduledAt": self.scheduled_at,
        }


@dataclass(frozen=True, slots=True)
class EveryRecord:
    """A fixed-rate ``every`` reminder on the grid ``created + k * every_seconds`` (k ≥ 1).

    ``scheduled_at`` is the earliest occurrence not yet dispatched. Construction
    checks ``every_seconds`` (an ``int`` in ``MIN_EVERY_SECONDS..MAX_EVERY_SECONDS``)
    and derives ``target_ms``; a violation raises ``ValueError``.
    """

    id: str
    prompt: str
    every_seconds: int
    scheduled_at: str
    target_ms: int = field(init=False, compare=False, repr=False)
    kind: ClassVar[Literal["every"]] = "every"

    def __post_init__(self) -> None:
        seconds = self.every_seconds
        if type(seconds) is not int or not MIN_EVERY_SECONDS <= seconds <= MAX_EVERY_SECONDS:
            raise ValueError(
                f"every_seconds must be an int in {MIN_EVERY_SECONDS}..{MAX_EVERY_SECONDS}"
            )
        object.__setattr__(self, "target_ms", parse_instant(self.scheduled_at))

    @property
    def interval_ms(self) -> int:
        """The interval in milliseconds (``every_seconds * 1000``)."""
        return self.every_seconds * 1000

    def to_json(self) -> dict[str, object]:
        """The record's wire object: ``id, kind, prompt, everySeconds, scheduledAt``."""
        return {
            "id": self.id,
            "kind": "every",
            "prompt": self.prompt,
            "everySeconds": self.every_seconds,
            "scheduledAt": self.scheduled_at,
        }


@dataclass(frozen=True, slots=True)
class CronRecord:
    """A calendar ``cron`` reminder: ``expression`` matched on wall-clock time in ``time_zone``.

    ``expression`` is the canonical text of a valid rule (see :mod:`messages._cron`)
    and ``time_zone`` a canonical zone key (``UTC`` or a tz database name);
    ``scheduled_at`` is the earliest occurrence not yet dispatched. Construction
    checks both and derives ``target_ms``; a violation raises ``ValueError``.
    ``schedule`` is the rule in its zone, for occurrence arithmetic.

    ``moved_by_ms`` is fold state, not part of the wire object: the
    ``acceptedAt`` of the dispatch that moved the record to its target (``None``
    while no dispatch has). The target was derived from it with the installed
    zone data, so the fold accepts a later dispatch after it even when that
    dispatch, written under older zone data, precedes the target.
    """

    id: str
    prompt: str
    expression: str
    time_zone: str
    scheduled_at: str
    moved_by_ms: int | None = field(default=None, kw_only=True, compare=False, repr=False)
    target_ms: int = field(init=False, compare=False, repr=False)
    kind: ClassVar[Literal["cron"]] = "cron"

    def __post_init__(self) -> None:
        problem = cron_problem(self.expression, self.time_zone)
        if problem is not None:
            raise ValueError(problem)
        object.__setattr__(self, "target_ms", parse_instant(self.scheduled_at))

    @property
    def schedule(self) -> CronSchedule:
        """The rule in its zone (cached per expression and zone)."""
        return cron_schedule(self.expression, self.time_zone)

    def to_json(self) -> dict[str, object]:
        """The record's wire object: ``id, kind, prompt, expression, timeZone, scheduledAt``."""
        return {
            "id": self.id,
            "kind": "cron",
            "prompt": self.prompt,
            "expression": self.expression,
            "timeZone": self.time_zone,
            "scheduledAt": self.scheduled_at,
        }


def cron_problem(expression: object, time_zone: object) -> str | None:
    """Why ``expression``/``time_zone`` cannot be a stored ``cron`` record's, or ``None``.

    The expression must be a valid rule written in its canonical form, the zone
    a canonical zone key.
    """
    if not isinstance(expression, str):
        return "expression must be a string"
    try:
        rule = parse_cron_expression(expression)
    except CronRuleError as error:
        return f"expression must be a valid cron rule: {error.reason}"
    if rule.expression != expression:
        return "expression must be in canonical form (trimmed, names upper-case)"
    if not isinstance(time_zone, str):
        return "timeZone must be a string"
    try:
        canonical = canonicalize_time_zone(time_zone)
    except ScheduleError:
        canonical = None
    if canonical != time_zone:
        return "timeZone must be UTC or a tz database zone name, as the database spells it"
    return None


ScheduleRecord: TypeAlias = AfterRecord | AtRecord | EveryRecord | CronRecord
"""Any active record."""

OneShotRecord: TypeAlias = AfterRecord | AtRecord
"""A record that one dispatch retires."""

RepeatingRecord: TypeAlias = EveryRecord | CronRecord
"""A record a dispatch moves on to its next occurrence (its dispatch carries ``acceptedAt``)."""

REPEATING_KINDS = (EveryRecord, CronRecord)
"""The repeating record classes, for ``isinstance``."""


def record_at_target(
    kind: ScheduleKind, id: str, prompt: str, seconds: int | None, target_ms: int
) -> ScheduleRecord:
    """Build a new record due at ``target_ms`` without parsing back its ``scheduled_at``.

    For a caller that has judged every field already (see :mod:`messages._creation`):
    ``scheduled_at`` is formatted from ``target_ms`` once, so the record equals the
    one the constructor would build, field for field. ``seconds`` is the count of
    ``after``/``every`` (``None`` for ``at``). A ``target_ms`` outside years
    0001–9999 or an ``every`` interval out of range raises ``ValueError``.
    """
    scheduled_at = format_instant(target_ms)
    record: ScheduleRecord
    if kind == "at":
        record = object.__new__(AtRecord)
    elif kind == "after":
        record = object.__new__(AfterRecord)
        object.__setattr__(record, "after_seconds", seconds)
    else:
        if type(seconds) is not int or not MIN_EVERY_SECONDS <= seconds <= MAX_EVERY_SECONDS:
            raise ValueError(
                f"every_seconds must be an int in {MIN_EVERY_SECONDS}..{MAX_EVERY_SECONDS}"
            )
        record = object.__new__(EveryRecord)
        object.__setattr__(record, "every_seconds", seconds)
    object.__setattr__(record, "id", id)
    object.__setattr__(record, "prompt", prompt)
    object.__setattr__(record, "scheduled_at", scheduled_at)
    object.__setattr__(record, "target_ms", target_ms)
    return record


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
    """A ``delete`` change: the active record ``id`` (any kind) is removed without delivery."""

    id: str
    operation: ClassVar[Literal["delete"]] = "delete"

    def to_json(self) -> dict[str, object]:
        """The change's wire payload: ``version, operation, id``."""
        return {"version": PROTOCOL_VERSION, "operation": "delete", "id": self.id}


@dataclass(frozen=True, slots=True)
class DispatchChange:
    """A ``dispatch`` change: the active record ``id`` was delivered once.

    A one-shot dispatch has no ``accepted_at``; a repeating (``every``, ``cron``)
    dispatch carries the canonical instant of the decision time, from which the
    fold derives the occurrence delivered and the record's next target. ``accepted_ms`` is derived
    from ``accepted_at`` (``None`` without it); a non-canonical ``accepted_at``
    raises ``ValueError``.
    """

    id: str
    accepted_at: str | None = None
    accepted_ms: int | None = field(init=False, compare=False, repr=False)
    operation: ClassVar[Literal["dispatch"]] = "dispatch"

    def __post_init__(self) -> None:
        accepted = None if self.accepted_at is None else parse_instant(self.accepted_at)
        object.__setattr__(self, "accepted_ms", accepted)

    def to_json(self) -> dict[str, object]:
        """The wire payload: ``version, operation, id`` (then ``acceptedAt`` for ``every``)."""
        payload: dict[str, object] = {
            "version": PROTOCOL_VERSION,
            "operation": "dispatch",
            "id": self.id,
        }
        if self.accepted_at is not None:
            payload["acceptedAt"] = self.accepted_at
        return payload


ScheduleChange: TypeAlias = CreateChange | DeleteChange | DispatchChange
"""Any decoded ``schedule/change``."""

# ---- decoding ------------------------------------------------------------------------------

_CHANGE_KEYS: dict[str, tuple[str, ...]] = {
    "create": ("version", "operation", "schedule"),
    "delete": ("version", "operation", "id"),
    "dispatch": ("version", "operation", "id"),
}
_EVERY_DISPATCH_KEYS = ("version", "operation", "id", "acceptedAt")
_RECORD_KEYS: dict[str, tuple[str, ...]] = {
    "after": ("id", "kind", "prompt", "afterSeconds", "scheduledAt"),
    "at": ("id", "kind", "prompt", "scheduledAt"),
    "every": ("id", "kind", "prompt", "everySeconds", "scheduledAt"),
    "cron": ("id", "kind", "prompt", "expression", "timeZone", "scheduledAt"),
}


def _fail(rule: str) -> ScheduleLogError:
    return ScheduleLogError(f"schedule/change: {rule}")


def _show(value: str) -> str:
    """A short, printable rendering of a key or id for a diagnostic."""
    text = repr(value)
    return text if len(text) <= 64 else text[:60] + "...'"


def _mapping(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise _fail(f"{where} must be an object")
    for key in value:
        if not isinstance(key, str):
            raise _fail(f"{where} has a non-string key")
    return value


def _exact_keys(value: Mapping[str, object], where: str, keys: tuple[str, ...]) -> None:
    for key in value:
        if key not in keys:
            raise _fail(f"unknown key {_show(key)} in {where}")
    for key in keys:
        if key not in value:
            raise _fail(f"missing key {key!r} in {where}")


def _id(value: object) -> str:
    if not isinstance(value, str) or not value or not is_ecma_trimmed(value):
        raise _fail("id must be a non-empty string equal to its own trim")
    return str(value)


def _string(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise _fail(f"{name} must be a string")
    return str(value)


def _non_canonical(name: str, error: ValueError) -> ScheduleLogError:
    return _fail(f"{name} must be a canonical UTC instant: {error}")


def _record(value: object) -> ScheduleRecord:
    schedule = _mapping(value, "schedule")
    if "kind" not in schedule:
        raise _fail("missing key 'kind' in schedule")
    kind = schedule["kind"]
    if not isinstance(kind, str) or kind not in _RECORD_KEYS:
        raise _fail('kind must be one of "after", "at", "every", "cron"')
    _exact_keys(schedule, "schedule", _RECORD_KEYS[kind])
    record_id = _id(schedule["id"])
    prompt = schedule["prompt"]
    if not isinstance(prompt, str) or not prompt or not is_ecma_trimmed(prompt):
        raise _fail("prompt must be a non-empty string equal to its own trim")
    if has_lone_surrogate(prompt):
        raise _fail("prompt must be valid Unicode (no lone surrogates)")
    prompt = str(prompt)
    if kind == "cron":
        return _cron_record(record_id, prompt, schedule)
    count: int | None = None  # afterSeconds or everySeconds
    if kind == "after":
        count = json_integer(schedule["afterSeconds"])
        if count is None or not 1 <= count <= MAX_SAFE_INTEGER:
            raise _fail("afterSeconds must be an integer in 1..2**53-1")
    elif kind == "every":
        count = json_integer(schedule["everySeconds"])
        if count is None or not MIN_EVERY_SECONDS <= count <= MAX_EVERY_SECONDS:
            raise _fail("everySeconds must be an integer in 300..(2**53-1)//1000")
    scheduled_at = _string(schedule["scheduledAt"], "scheduledAt")
    try:
        if count is None:
            return AtRecord(record_id, prompt, scheduled_at)
        if kind == "after":
            return AfterRecord(record_id, prompt, count, scheduled_at)
        return EveryRecord(record_id, prompt, count, scheduled_at)
    except ValueError as error:
        raise _non_canonical("scheduledAt", error) from None


def _cron_record(record_id: str, prompt: str, schedule: Mapping[str, object]) -> CronRecord:
    expression = _string(schedule["expression"], "expression")
    time_zone = _string(schedule["timeZone"], "timeZone")
    problem = cron_problem(expression, time_zone)
    if problem is not None:
        raise _fail(problem)
    scheduled_at = _string(schedule["scheduledAt"], "scheduledAt")
    try:
        return CronRecord(record_id, prompt, expression, time_zone, scheduled_at)
    except ValueError as error:
        raise _non_canonical("scheduledAt", error) from None


def _dispatch(payload: Mapping[str, object]) -> DispatchChange:
    if "acceptedAt" not in payload:
        _exact_keys(payload, "payload", _CHANGE_KEYS["dispatch"])
        return DispatchChange(_id(payload["id"]))
    _exact_keys(payload, "payload", _EVERY_DISPATCH_KEYS)
    record_id = _id(payload["id"])
    accepted_at = _string(payload["acceptedAt"], "acceptedAt")
    try:
        return DispatchChange(record_id, accepted_at)
    except ValueError as error:
        raise _non_canonical("acceptedAt", error) from None


def decode_schedule_change(value: object) -> ScheduleChange:
    """Strictly decode a ``schedule/change`` payload into an immutable change.

    Any violation of the protocol raises ``ScheduleLogError`` naming the rule.
    Objects may be any ``Mapping`` with string keys; numbers follow JSON semantics.
    Only the payload's own shape is checked here; rules that depend on earlier
    changes (such as which dispatch shape a record takes) belong to the fold.
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
    payload = _mapping(value, "payload")
    if operation == "dispatch":
        return _dispatch(payload)
    _exact_keys(payload, "payload", _CHANGE_KEYS[operation])
    if operation == "create":
        return CreateChange(_record(payload["schedule"]))
    return DeleteChange(_id(payload["id"]))


def decode_schedule_record(value: object) -> ScheduleRecord:
    """Strictly decode a record by the rules of a create change's ``schedule`` object."""
    return _record(value)


def encode_schedule_change(change: ScheduleChange) -> dict[str, object]:
    """Encode a change as its wire payload (``change.to_json()``)."""
    return change.to_json()
