"""The three tools' names, descriptions and JSON Schemas (draft 2020-12), defined once.

``docs/tool-catalog.md`` and ``docs/tool-catalog.json`` are generated from this
module by ``python -m host_bridge._catalog --write``; a test fails when they drift.
Parameter roots stay open (no ``additionalProperties: false``) so unknown keys
such as a ``time_zone`` outside ``at`` reach the tool and get
``invalid_selector``; "exactly one of ``after_seconds``, ``at``,
``every_seconds``, ``cron``" is said in the descriptions, not in a root-level
combinator (function-calling APIs reject those). Output schemas discriminate
the view kinds by their ``kind`` constant.

:func:`tool_specs` builds the catalog; ``calendar_rules=False`` leaves the
``cron`` selector and its view out of every schema and description (for a host
whose logs must stay readable by implementations without calendar rules: a
``cron`` key is then an unknown key, answered ``invalid_selector``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from messages._cron import MAX_CRON_EXPRESSION_LENGTH
from messages._errors import ERROR_CODES
from messages._numbers import MAX_SAFE_INTEGER
from messages._records import MAX_EVERY_SECONDS, MIN_EVERY_SECONDS
from messages._tool_values import (
    MAX_ACTIVE_SCHEDULES,
    MAX_PROMPT_LENGTH,
    MAX_SCHEDULE_ID_LENGTH,
)

__all__ = ["TOOL_SPECS", "ToolSpec", "tool_specs"]

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
_CRON_VIEW = _view(
    "cron",
    "A calendar reminder: expression (canonical, e.g. 0 9 * * MON-FRI) matched in timeZone; "
    "scheduledAt is its next occurrence (UTC), state refers to it.",
    {
        "expression": {"type": "string", "minLength": 1, "maxLength": MAX_CRON_EXPRESSION_LENGTH},
        "timeZone": {"type": "string", "minLength": 1},
    },
)


def _defs(*, calendar_rules: bool) -> dict[str, Any]:
    """The output schemas' ``$defs``: the error, the view union and each view kind."""
    views = {"afterSchedule": _AFTER_VIEW, "atSchedule": _AT_VIEW, "everySchedule": _EVERY_VIEW}
    if calendar_rules:
        views["cronSchedule"] = _CRON_VIEW
    union: dict[str, Any] = {
        "description": (
            f"An active reminder; kind says which of the {_COUNT[len(views)]} shapes it has."
        ),
        "oneOf": [{"$ref": f"#/$defs/{name}"} for name in views],
    }
    return {"error": _ERROR, "schedule": union, **views}


_COUNT = {3: "three", 4: "four"}

_DELETE_ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_SCHEDULE_ID_LENGTH}
"""A ``schedule_delete`` value's id: the id as given, which the input check bounds."""


def _output(defs: Mapping[str, Any], *alternatives: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "$schema": _DIALECT,
        "$defs": defs,
        "oneOf": [*alternatives, {"$ref": "#/$defs/error"}],
    }


def _alternatives(names: Sequence[str], last: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} {last} {names[-1]}"


def _alone(name: str, selectors: Sequence[str]) -> str:
    """The sentence that keeps selector ``name`` from being combined with the others."""
    return f"Do not combine with {_alternatives([s for s in selectors if s != name])}."


@dataclass(frozen=True)
class ToolSpec:
    """Name, description and schemas of one Schedule tool."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    output_schema: Mapping[str, Any]


_CRON_EXAMPLE = '{"cron": {"expression": "0 9 * * 1-5", "time_zone": "Asia/Shanghai"}}'

_CRON_PARAMETER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "expression": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_CRON_EXPRESSION_LENGTH,
            "description": (
                "Five cron fields, minute hour day-of-month month day-of-week, e.g. "
                "0 9 * * 1-5; or a macro such as @daily."
            ),
        },
        "time_zone": {
            "type": "string",
            "minLength": 1,
            "description": "The user's zone: UTC or a tz database name, e.g. Asia/Shanghai.",
        },
    },
    "required": ["expression", "time_zone"],
    "additionalProperties": False,
}


def _cron_description(selectors: Sequence[str]) -> str:
    return (
        "Repeat at the local wall-clock times a cron expression names, in the user's time "
        "zone (a calendar rhythm; every_seconds is a fixed rate). expression has five fields "
        "separated by single spaces: minute (0-59), hour (0-23), day of month (1-31), month "
        "(1-12 or JAN-DEC) and day of week (0-7 or SUN-SAT, 0 and 7 are Sunday); each field "
        "is *, a value, a range a-b, a step */n or a-b/n, or a comma list of these. The "
        "macros @hourly, @daily, @weekly, @monthly and @yearly are accepted too. When both "
        "day fields are restricted (not exactly *), a day matches if either matches. "
        "time_zone is the user's tz database zone (or UTC), e.g. America/New_York, not EST. "
        "Examples: "
        f'"weekdays at 9" -> {_CRON_EXAMPLE}; "the 1st of each month at 8:00" -> '
        '{"cron": {"expression": "0 8 1 * *", "time_zone": "Asia/Shanghai"}}; "every Monday '
        'at 8:30 New York time" -> {"cron": {"expression": "30 8 * * 1", "time_zone": '
        '"America/New_York"}}. The rule may match at most once per five minutes. The first '
        "one is due at the next match after now; missed occurrences are skipped, not "
        f"replayed. {_alone('cron', selectors)}"
    )


def _create_description(*, calendar_rules: bool) -> str:
    """``schedule_create``'s description, naming the selectors on offer."""
    every = (
        f"every_seconds (repeating, the first one interval from now, at least "
        f'{MIN_EVERY_SECONDS} seconds: "every 30 minutes" -> {{"every_seconds": 1800}}'
    )
    repeating = "a repeating reminder runs until you delete it)"
    if calendar_rules:
        last = (
            f"{every}); or cron (repeating at the times a calendar rule names in the user's "
            f'time zone: "weekdays at 9" -> {_CRON_EXAMPLE}; {repeating}'
        )
    else:
        last = f"or {every}; {repeating}"
    return (
        "Create a durable reminder for this session. When it is due, the prompt comes back "
        "to you as a [SCHEDULE REMINDER] user message (a [SCHEDULE REMINDER BATCH] for "
        "repeating ones), also across host restarts. Give prompt plus exactly one of: "
        'after_seconds (once, that many seconds from now: "in 20 minutes" -> '
        '{"after_seconds": 1200}); at (once, at a wall-clock time, which must carry an '
        'explicit UTC offset or a time_zone: "tomorrow at 9 Shanghai time" -> '
        '{"at": {"date": "2026-08-06", "time": "09:00:00", "time_zone": "Asia/Shanghai"}}, '
        f'"at 09:00 UTC+8 on 6 August" -> {{"at": "2026-08-06T09:00:00+08:00"}}); {last}. '
        "Occurrences of a repeating "
        "reminder missed while the session was not running are skipped: only the latest "
        "one is delivered. Delivery is session-local: reminders reach only this session, "
        "as a turn in it (one that came due while it was closed arrives when it resumes, "
        "or when the host wakes it for the reminder). A session holds at most "
        f"{MAX_ACTIVE_SCHEDULES} active reminders."
    )


def _create_parameters(*, calendar_rules: bool) -> dict[str, Any]:
    selectors = ["after_seconds", "at", "every_seconds"] + (["cron"] if calendar_rules else [])
    properties: dict[str, Any] = {
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
                + _alone("after_seconds", selectors)
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
                "use UTC or a zone name such as America/New_York, not EST or GMT. "
                + _alone("at", selectors)
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
                "now. Missed occurrences are skipped, not replayed. "
                + _alone("every_seconds", selectors)
            ),
        },
    }
    if calendar_rules:
        properties["cron"] = {"description": _cron_description(selectors), **_CRON_PARAMETER}
    return {
        "$schema": _DIALECT,
        "type": "object",
        "properties": properties,
        "required": ["prompt"],
    }


def _build(*, calendar_rules: bool) -> tuple[ToolSpec, ...]:
    defs = _defs(calendar_rules=calendar_rules)
    kinds = _alternatives(["after", "at", "every"] + (["cron"] if calendar_rules else []))
    return (
        ToolSpec(
            name="schedule_create",
            description=_create_description(calendar_rules=calendar_rules),
            parameters=_create_parameters(calendar_rules=calendar_rules),
            output_schema=_output(defs, {"$ref": "#/$defs/schedule"}),
        ),
        ToolSpec(
            name="schedule_list",
            description=(
                "List this session's active reminders in creation order, each with its kind "
                f"({kinds}), its next due time and its state (scheduled or overdue)."
            ),
            parameters={"$schema": _DIALECT, "type": "object", "properties": {}},
            output_schema=_output(
                defs,
                {
                    "type": "object",
                    "properties": {
                        "schedules": {"type": "array", "items": {"$ref": "#/$defs/schedule"}}
                    },
                    "required": ["schedules"],
                    "additionalProperties": False,
                },
            ),
        ),
        ToolSpec(
            name="schedule_delete",
            description=(
                "Delete an active reminder of this session by its id (as returned by "
                "schedule_create)."
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
                defs,
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


_SPECS = {flag: _build(calendar_rules=flag) for flag in (True, False)}


def tool_specs(*, calendar_rules: bool = True) -> tuple[ToolSpec, ...]:
    """The three tools in catalog order.

    ``calendar_rules=False`` gives them without the ``cron`` selector: no
    ``cron`` parameter, view or mention in any description (the catalog of
    implementations without calendar rules). The specs are shared: do not
    change what they hold.
    """
    return _SPECS[bool(calendar_rules)]


TOOL_SPECS: tuple[ToolSpec, ...] = tool_specs()
"""The three tools in catalog order, with the ``cron`` selector."""
