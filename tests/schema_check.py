"""Validate every tool value a test sees against the tool's output schema."""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema

from host_bridge._schemas import TOOL_SPECS

_BY_OPERATION = {"create": "schedule_create", "list": "schedule_list", "delete": "schedule_delete"}


@cache
def _validator(tool: str) -> jsonschema.Draft202012Validator:
    spec = next(s for s in TOOL_SPECS if s.name == tool)
    jsonschema.Draft202012Validator.check_schema(spec.output_schema)
    return jsonschema.Draft202012Validator(spec.output_schema)


def checked(tool: str, value: Any) -> Any:
    """Return ``value`` after asserting it validates against ``tool``'s output schema."""
    name = _BY_OPERATION.get(tool, tool)
    _validator(name).validate(value)
    return value
