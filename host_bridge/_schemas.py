"""The three tools' names, descriptions and JSON Schemas (draft 2020-12), defined once.

``docs/tool-catalog.md`` and ``docs/tool-catalog.json`` are generated from this
module by ``python -m host_bridge._catalog --write``; a test fails when they drift.
Parameter roots stay open (no ``additionalProperties: false``) so unsupported
selectors such as ``cron`` reach the tool and get ``invalid_selector``; "exactly
one of ``after_seconds``, ``at``, ``every_seconds``" is said in the descriptions,
not in a root-level combinator (function-calling APIs reject those). Output
schemas discriminate the three view kinds by their ``kind`` constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from messages._errors import ERROR_CODES
from messages._numbers import MAX_SAFE_INTEGER
from messages._records import MAX_EVERY_SECONDS, MIN_EVERY_SECONDS
from messages._tool_values import (
    MAX_ACTIVE_SCHEDULES,
    MAX_PROMPT_LENGTH,
    MAX_SCHEDULE_ID_LENGTH,
)

__all__ = ["TOOL_SPECS", "ToolSpec"]

_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_INSTANT_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"

_AT_STRING_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,3})?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})$"
)
_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_TIME_PATTERN = r"^[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,3})?$"

_ERROR: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"enum": list(ERROR_CODES)},
        "message": {"type": "string", "minLength": 1},
        "operation": {"enum": ["create", "list", "delete", "dispatch"]},
        "id": {"type": "string", "minLength": 1, "maxLength": MAX_SCHEDULE_ID_LENGTH},
    },
    "required": ["code", "message"],
    "additionalProperties": False,
}

_COMMON_VIEW: dict[str, Any] = {
    "id": {"type": "string", "minLength": 1},
    "prompt": {"type": "string", "minLength": 1},
    "scheduledAt": {"type": "string", "pattern": _INSTANT_PATTERN},
    "state": {"enum": ["scheduled", "overdue"]},
    "deliveryMode": {"const": "session-local"},
}


def _view(kind: str, description: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The view of one record kind: its wire keys in order, then ``state``, ``deliveryMode``."""
    properties: dict[str, Any] = {
        "id": _COMMON_VIEW["id"],
        "kind": {"const": kind},
        "prompt": _COMMON_VIEW["prompt"],
        **extra,
        "scheduledAt": _COMMON_VIEW["scheduledAt"],
        "state": _COMMON_VIEW["state"],
        "deliveryMode": _COMMON_VIEW["deliveryMode"],
    }
    return {
        "description": description,
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_AFTER_VIEW = _view(
    "after",
    "A one-shot reminder created with after_seconds; due at scheduledAt.",
    {"afterSeconds": {"type": "integer", "minimum": 1, "maximum": MAX_SAFE_INTEGER}},
)
_AT_VIEW = _view(
    "at",
    "A one-shot reminder created with at; due at scheduledAt (the resolved UTC instant).",
    {},
)
_EVERY_VIEW = _view(
    "every",
    "A fixed-rate reminder; scheduledAt is its next occurrence, state refers to it.",
    {
        "everySeconds": {
            "type": "integer",
            "minimum": MIN_EVERY_SECONDS,
            "maximum": MAX_EVERY_SECONDS,
        }
    },
)

_VIEW: dict[str, Any] = {
    "description": "An active reminder; kind says which of the three shapes it has.",
    "oneOf": [
        {"$ref": "#/$defs/afterSchedule"},
        {"$ref": "#/$defs/atSchedule"},
        {"$ref": "#/$defs/everySchedule"},
    ],
}

_DEFS = {
    "error": _ERROR,
    "schedule": _VIEW,
    "afterSchedule": _AFTER_VIEW,
    "atSchedule": _AT_VIEW,
    "everySchedule": _EVERY_VIEW,
}

_DELETE_ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_SCHEDULE_ID_LENGTH}
"""A ``schedule_delete`` value's id: the id as given, which the input check bounds."""


def _output(*alternatives: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "$schema": _DIALECT,
        "$defs": _DEFS,
        "oneOf": [*alternatives, {"$ref": "#/$defs/error"}],
    }


@dataclass(frozen=True)
class ToolSpec:
    """Name, description and schemas of one Schedule tool."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    output_schema: Mapping[str, Any]


TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="schedule_create",
        description=(
            "Create a durable reminder for this session. When it is due, the prompt comes back "
            "to you as a [SCHEDULE REMINDER] user message (a [SCHEDULE REMINDER BATCH] for "
            "repeating ones), also across host restarts. Give prompt plus exactly one of: "
            'after_seconds (once, that many seconds from now: "in 20 minutes" -> '
            '{"after_seconds": 1200}); at (once, at a wall-clock time, which must carry an '
            'explicit UTC offset or a time_zone: "tomorrow at 9 Shanghai time" -> '
            '{"at": {"date": "2026-08-06", "time": "09:00:00", "time_zone": "Asia/Shanghai"}}, '
            '"at 09:00 UTC+8 on 6 August" -> {"at": "2026-08-06T09:00:00+08:00"}); or '
            f"every_seconds (repeating, the first one interval from now, at least "
            f'{MIN_EVERY_SECONDS} seconds: "every 30 minutes" -> {{"every_seconds": 1800}}; '
            "a repeating reminder runs until you delete it). Occurrences of a repeating "
            "reminder missed while the session was not running are skipped: only the latest "
            "one is delivered. Delivery is session-local: reminders reach only this session, "
            "as a turn in it (one that came due while it was closed arrives when it resumes, "
            "or when the host wakes it for the reminder). A session holds at most "
            f"{MAX_ACTIVE_SCHEDULES} active reminders."
        ),
        parameters={
            "$schema": _DIALECT,
            "type": "object",
            "properties": {
                "prompt": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_PROMPT_LENGTH,
                    "description": "What to remind about, as the user would say it.",
                },
                "after_seconds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_SAFE_INTEGER,
                    "description": (
                        "Once, this many whole seconds from now (e.g. 1200 for in 20 minutes). "
                        "Do not combine with at or every_seconds."
                    ),
                },
                "at": {
                    "description": (
                        "Once, at this wall-clock time, which must be in the future. Either an "
                        "instant with an explicit offset, YYYY-MM-DDTHH:MM:SS followed by Z or "
                        "+HH:MM/-HH:MM (e.g. 2026-08-06T09:00:00+08:00), or an object with the "
                        "user's local date, time and tz database time_zone (e.g. "
                        '{"date": "2026-08-06", "time": "09:00:00", "time_zone": '
                        '"Asia/Shanghai"}). A time without an offset or time_zone is refused; '
                        "use UTC or a zone name such as America/New_York, not EST or GMT. Do "
                        "not combine with after_seconds or every_seconds."
                    ),
                    "anyOf": [
                        {"type": "string", "pattern": _AT_STRING_PATTERN},
                        {
                            "type": "object",
                            "properties": {
                                "date": {"type": "string", "pattern": _DATE_PATTERN},
                                "time": {"type": "string", "pattern": _TIME_PATTERN},
                                "time_zone": {
                                    "type": "string",
                                    "minLength": 1,
                                    "description": "UTC or a tz database name, e.g. Asia/Shanghai.",
                                },
                            },
                            "required": ["date", "time", "time_zone"],
                            "additionalProperties": False,
                        },
                    ],
                },
                "every_seconds": {
                    "type": "integer",
                    "minimum": MIN_EVERY_SECONDS,
                    "maximum": MAX_EVERY_SECONDS,
                    "description": (
                        f"Repeat every this many seconds, at least {MIN_EVERY_SECONDS} (e.g. "
                        "1800 for every 30 minutes); the first one is due one interval from "
                        "now. Missed occurrences are skipped, not replayed. Do not combine "
                        "with after_seconds or at."
                    ),
                },
            },
            "required": ["prompt"],
        },
        output_schema=_output({"$ref": "#/$defs/schedule"}),
    ),
    ToolSpec(
        name="schedule_list",
        description=(
            "List this session's active reminders in creation order, each with its kind "
            "(after, at or every), its next due time and its state (scheduled or overdue)."
        ),
        parameters={"$schema": _DIALECT, "type": "object", "properties": {}},
        output_schema=_output(
            {
                "type": "object",
                "properties": {
                    "schedules": {"type": "array", "items": {"$ref": "#/$defs/schedule"}}
                },
                "required": ["schedules"],
                "additionalProperties": False,
            }
        ),
    ),
    ToolSpec(
        name="schedule_delete",
        description=(
            "Delete an active reminder of this session by its id (as returned by schedule_create)."
        ),
        parameters={
            "$schema": _DIALECT,
            "type": "object",
            "properties": {
                "id": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_SCHEDULE_ID_LENGTH,
                    "description": "The reminder id, e.g. schedule-1.",
                }
            },
            "required": ["id"],
        },
        output_schema=_output(
            {
                "type": "object",
                "properties": {"id": _DELETE_ID, "deleted": {"const": True}},
                "required": ["id", "deleted"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {
                    "id": _DELETE_ID,
                    "deleted": {"const": False},
                    "code": {"const": "schedule_not_found"},
                },
                "required": ["id", "deleted", "code"],
                "additionalProperties": False,
            },
        ),
    ),
)
"""The three tools in catalog order."""
