"""The three tools' names, descriptions and JSON Schemas (draft 2020-12), defined once.

``docs/tool-catalog.md`` and ``docs/tool-catalog.json`` are generated from this
module by ``python -m host_bridge.catalog --write``; a test fails when they drift.
Parameter roots stay open (no ``additionalProperties: false``) so unsupported
selectors such as ``cron`` reach the tool and get ``invalid_selector``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from messages.errors import ERROR_CODES
from messages.numbers import MAX_SAFE_INTEGER
from messages.tool_values import MAX_ACTIVE_SCHEDULES, MAX_PROMPT_LENGTH, MAX_SCHEDULE_ID_LENGTH

__all__ = ["TOOL_SPECS", "ToolSpec"]

_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_INSTANT_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"

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

_VIEW: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "kind": {"const": "after"},
        "prompt": {"type": "string", "minLength": 1},
        "afterSeconds": {"type": "integer", "minimum": 1, "maximum": MAX_SAFE_INTEGER},
        "scheduledAt": {"type": "string", "pattern": _INSTANT_PATTERN},
        "state": {"enum": ["scheduled", "overdue"]},
        "deliveryMode": {"const": "session-local"},
    },
    "required": ["id", "kind", "prompt", "afterSeconds", "scheduledAt", "state", "deliveryMode"],
    "additionalProperties": False,
}

_DEFS = {"error": _ERROR, "schedule": _VIEW}

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
            "Create a durable one-shot reminder for this session. After after_seconds seconds "
            "the prompt comes back to you as a [SCHEDULE REMINDER] user message, even across "
            "host restarts. Only relative delays are supported. A session holds at most "
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
                    "description": "Delay in whole seconds from now.",
                },
            },
            "required": ["prompt", "after_seconds"],
        },
        output_schema=_output({"$ref": "#/$defs/schedule"}),
    ),
    ToolSpec(
        name="schedule_list",
        description=(
            "List this session's active reminders in creation order, each with its state "
            "(scheduled or overdue)."
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
