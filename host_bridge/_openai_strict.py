"""OpenAI's strict mode: the tools' parameter schemas in its subset, and its arguments back.

With ``"strict": true`` on a function, OpenAI-compatible APIs make the model's
arguments match the parameter schema exactly, but accept only a subset of JSON
Schema. :func:`strict_parameters` derives that form from the one definition in
:mod:`host_bridge._schemas`:

- every object has ``additionalProperties: false`` and lists **every** property
  in ``required``;
- a property that is optional in the tool is *nullable* instead: its ``type``
  gains ``"null"`` (``"type": ["integer", "null"]``), or its ``anyOf`` gains a
  ``{"type": "null"}`` member;
- only ``type``, ``description``, ``properties``, ``required``,
  ``additionalProperties``, ``enum``, ``anyOf`` (never at the root) and
  ``items`` are kept. The value constraints (``minLength``, ``maxLength``,
  ``minimum``, ``maximum``, ``pattern``, ``format``) move into the description,
  where the model reads them; the tools check every one of them anyway.
  (Recent OpenAI models accept some of these keywords in strict mode; others,
  and other OpenAI-compatible APIs, refuse them, so the catalog keeps to the
  subset they all take.) ``$schema`` is dropped; any other keyword is an error
  here, so a new keyword in the schemas is a decision, not a surprise.

A model in strict mode therefore sends every parameter and ``null`` for the
ones it does not use, e.g. ``{"prompt": "stretch", "after_seconds": 1200,
"at": null, "every_seconds": null, "cron": null}`` (``cron`` becomes a
nullable object whose ``expression`` and ``time_zone`` are both required).
The tools themselves keep the contract's presence rule (a selector given as
``null`` still counts toward "exactly one", so that call would be
``invalid_selector``). A host that offers the strict
catalog therefore passes the model's arguments through
:func:`normalize_strict_arguments` before ``tools.execute``: it drops the
optional parameters whose value is ``null``, and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from host_bridge._schemas import ToolSpec, tool_specs
from messages._json_arguments import JsonArgumentsError, decode_json_arguments

__all__ = [
    "STRICT_KEYWORDS",
    "normalize_strict_arguments",
    "strict_description",
    "strict_parameters",
]

STRICT_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "anyOf",
        "items",
    }
)
"""The JSON Schema keywords a strict parameter schema uses."""

_CONSTRAINTS = ("minLength", "maxLength", "minimum", "maximum", "pattern", "format")
_DROPPED = frozenset({"$schema"})

_NULL_NOTE = "Set to null when not used."


def _constraint_text(schema: Mapping[str, Any]) -> str | None:
    """The constraints of ``schema`` in words, e.g. ``Constraints: 1 to 4096 characters.``."""
    phrases: list[str] = []
    low, high = schema.get("minLength"), schema.get("maxLength")
    if low is not None and high is not None:
        phrases.append(f"{low} to {high} characters")
    elif low == 1:
        phrases.append("not empty")
    elif low is not None:
        phrases.append(f"at least {low} characters")
    elif high is not None:
        phrases.append(f"at most {high} characters")
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        phrases.append(f"from {low} to {high}")
    elif low is not None:
        phrases.append(f"at least {low}")
    elif high is not None:
        phrases.append(f"at most {high}")
    if "pattern" in schema:
        phrases.append(f"matches the regular expression {schema['pattern']}")
    if "format" in schema:
        phrases.append(f"in the {schema['format']} format")
    return f"Constraints: {'; '.join(phrases)}." if phrases else None


def _strict(schema: Mapping[str, Any], *, nullable: bool, root: bool = False) -> dict[str, Any]:
    required = set(schema.get("required", ()))
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED or key in _CONSTRAINTS or key in ("required", "additionalProperties"):
            continue
        if key == "properties":
            out[key] = {
                name: _strict(sub, nullable=name not in required) for name, sub in value.items()
            }
        elif key == "anyOf":
            if root:
                raise ValueError("strict mode allows no anyOf at the root")
            out[key] = [_strict(sub, nullable=False) for sub in value]
        elif key == "items":
            out[key] = _strict(value, nullable=False)
        elif key in ("type", "description", "enum"):
            out[key] = list(value) if isinstance(value, list) else value
        else:
            raise ValueError(f"the JSON Schema keyword {key!r} has no strict-mode form")
    if out.get("type") == "object" or "properties" in out:
        out.setdefault("properties", {})
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    notes = [note for note in (_constraint_text(schema), _NULL_NOTE if nullable else None) if note]
    if notes:
        text = " ".join([out["description"], *notes] if "description" in out else notes)
        out = {"description": text, **{k: v for k, v in out.items() if k != "description"}}
    if nullable:
        out = _nullable(out)
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also admits ``null``."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list):
        return {**schema, "type": [*kind, "null"]} if "null" not in kind else schema
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    raise ValueError("a nullable schema needs a type or an anyOf")


def strict_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The strict-mode form of a tool's parameter schema (see the module docstring)."""
    if parameters.get("type") != "object":
        raise ValueError("a strict parameter schema must be an object")
    return _strict(parameters, nullable=False, root=True)


def strict_description(spec: ToolSpec) -> str:
    """The tool's description, telling the model to send ``null`` for what it does not use."""
    required = set(spec.parameters.get("required", ()))
    optional = [name for name in spec.parameters.get("properties", {}) if name not in required]
    if not optional:
        return spec.description
    return (
        f"{spec.description} Every parameter must be given: set "
        f"{_words(optional)} to null when you do not use "
        f"{'it' if len(optional) == 1 else 'them'}."
    )


def _words(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


_OPTIONAL: Mapping[bool, Mapping[str, frozenset[str]]] = {
    flag: {
        spec.name: frozenset(spec.parameters.get("properties", {}))
        - frozenset(spec.parameters.get("required", ()))
        for spec in tool_specs(calendar_rules=flag)
    }
    for flag in (True, False)
}


def normalize_strict_arguments(
    name: str, arguments: object, *, calendar_rules: bool = True
) -> object:
    """The arguments of a strict-mode call of tool ``name``, as the tools take them.

    Hand the result to ``tools.execute``. ``arguments`` may be the JSON text of
    an OpenAI-format tool call or a decoded ``dict``. Every optional parameter
    whose value is ``null`` is left out (for ``schedule_create``: the selectors
    ``after_seconds``, ``at``, ``every_seconds`` and ``cron``); everything else
    is left as it is, and so is anything that is not (the text of) a ``dict``,
    which the tool then judges and refuses itself. A text is decoded with the
    tools' own strict decoder, so a text the tools would refuse is passed on
    unchanged and gets the same answer. ``calendar_rules=False`` goes with the
    catalog without ``cron`` (``install_schedule(..., calendar_rules=False)``):
    a ``cron`` key is then kept, even ``null``, and the tool refuses it.
    """
    optional = _OPTIONAL[bool(calendar_rules)].get(name)
    if not optional:
        return arguments
    value: object = arguments
    if type(arguments) is str:
        try:
            value = decode_json_arguments(arguments)
        except JsonArgumentsError:
            return arguments
    if type(value) is not dict:
        return arguments
    unused = [key for key in optional if key in value and value[key] is None]
    if not unused:
        return value
    return {key: item for key, item in value.items() if key not in unused}
