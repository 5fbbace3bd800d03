"""The generated tool catalog: ``docs/tool-catalog.md`` and ``docs/tool-catalog.json``.

Regenerate with ``python -m host_bridge._catalog --write``; ``--check`` exits 1
when the committed files differ from what :mod:`host_bridge._schemas` generates.
The tools echoed by the saved Responses API responses in ``docs/examples`` are
regenerated with them. The committed files hold the catalog with the ``cron``
selector; every function here takes ``calendar_rules=False`` for the catalog
without it (the tools of ``install_schedule(..., calendar_rules=False)``).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

from host_bridge._openai_strict import strict_description, strict_parameters
from host_bridge._schemas import ToolSpec, tool_specs
from messages._json_arguments import MAX_JSON_ARGUMENTS_DEPTH, MAX_JSON_ARGUMENTS_LENGTH

__all__ = [
    "catalog_json",
    "catalog_markdown",
    "catalog_value",
    "openai_responses_tools",
    "openai_tools",
]

_DOCS = Path(__file__).resolve().parent.parent / "docs"


def catalog_value(*, calendar_rules: bool = True) -> dict[str, Any]:
    """The catalog as one JSON value: every tool with its parameter and output schema."""
    return {
        "catalog": "dsh-tool-schedule",
        "protocolVersion": 1,
        "tools": [
            {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
                "outputSchema": spec.output_schema,
            }
            for spec in tool_specs(calendar_rules=calendar_rules)
        ],
    }


def _function(spec: ToolSpec, *, strict: bool) -> dict[str, Any]:
    """``name``, ``description`` and ``parameters`` of one tool, open or in strict form."""
    if strict:  # fresh objects every call: a caller may change what it gets
        return {
            "name": spec.name,
            "description": strict_description(spec),
            "parameters": copy.deepcopy(strict_parameters(spec.parameters)),
        }
    return {
        "name": spec.name,
        "description": spec.description,
        "parameters": copy.deepcopy({k: v for k, v in spec.parameters.items() if k != "$schema"}),
    }


def openai_tools(*, strict: bool = False, calendar_rules: bool = True) -> list[dict[str, Any]]:
    """The tools in the function-calling layout of OpenAI-compatible chat APIs.

    Each is ``{"type": "function", "function": {name, description, parameters}}``.
    The default keeps the parameter roots open, as in the catalog.
    ``strict=True`` gives the layout for strict mode (``"strict": true``; see
    :mod:`host_bridge._openai_strict`): pass the model's arguments through
    :func:`host_bridge.normalize_strict_arguments` before
    executing them. For the Responses API see :func:`openai_responses_tools`.
    ``calendar_rules=False`` leaves the ``cron`` selector out, for a plugin
    installed with ``calendar_rules=False``.
    """
    tools = []
    for spec in tool_specs(calendar_rules=calendar_rules):
        function = _function(spec, strict=strict)
        if strict:
            function["strict"] = True
        tools.append({"type": "function", "function": function})
    return tools


def openai_responses_tools(
    *, strict: bool = False, calendar_rules: bool = True
) -> list[dict[str, Any]]:
    """The tools in the flat function-tool layout of OpenAI's Responses API.

    Each is ``{"type": "function", name, description, parameters, "strict": ...}``,
    with ``strict`` always given, since functions are strict by default there.
    The default is ``"strict": false`` with the open parameters of
    :func:`openai_tools`; ``strict=True`` gives the strict parameters and
    descriptions, whose arguments go through
    :func:`host_bridge.normalize_strict_arguments` before executing them.
    ``calendar_rules=False`` leaves the ``cron`` selector out.
    """
    return [
        {"type": "function", **_function(spec, strict=strict), "strict": strict}
        for spec in tool_specs(calendar_rules=calendar_rules)
    ]


def catalog_json(*, calendar_rules: bool = True) -> str:
    """The JSON catalog file's text (stable: sorted nothing, two-space indent, final newline)."""
    document = catalog_value(calendar_rules=calendar_rules)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def catalog_markdown() -> str:
    """The Markdown catalog file's text."""
    lines = [
        "# Tool catalog",
        "",
        "Generated from `host_bridge/_schemas.py` by `python -m host_bridge._catalog --write`;",
        "do not edit by hand (a test fails when this file drifts).",
        "",
        "`schedule_create` takes `prompt` plus exactly one of `after_seconds`, `at`,",
        "`every_seconds` and `cron`; inputs are snake_case, values canonical camelCase",
        "(`afterSeconds`, `everySeconds`, `timeZone`, `scheduledAt`, `deliveryMode`). A",
        "reminder view has one of four shapes, told apart by `kind` (`after`, `at`, `every`,",
        "`cron`). Every error value is",
        '`{"code", "message"}`, plus `operation` and `id` for `persistence_uncertain`. Tool',
        "content is the compact JSON of the value. The order in which inputs are checked,",
        "when each error code is answered and the records these tools write are in",
        "[the protocol](protocol.md#6-tool-inputs).",
        "",
        "Arguments are an object or its JSON text: hosts may pass the `arguments` string of an",
        "OpenAI-format tool call as is. A text is decoded once, as strict JSON (no `NaN` or",
        f"`Infinity`, no repeated key, at most {MAX_JSON_ARGUMENTS_LENGTH:,} characters and "
        f"{MAX_JSON_ARGUMENTS_DEPTH} levels deep; otherwise",
        "`invalid_selector`), and then judged exactly like the object it holds",
        "([details](protocol.md#68-arguments-given-as-json-text)).",
        "",
    ]
    for spec in tool_specs():
        lines += [
            f"## `{spec.name}`",
            "",
            spec.description,
            "",
            "### Parameters",
            "",
            "```json",
            json.dumps(spec.parameters, indent=2, ensure_ascii=False),
            "```",
            "",
            "### Output",
            "",
            "```json",
            json.dumps(spec.output_schema, indent=2, ensure_ascii=False),
            "```",
            "",
        ]
    create = tool_specs()[0]
    lines += [
        "## OpenAI strict mode",
        "",
        "`dsh-schedule catalog --format openai-strict` (or",
        "`host_bridge.openai_tools(strict=True)`) gives the tools for OpenAI's strict",
        'mode (`"strict": true`): every object closed and every property required, optional',
        "ones nullable, value constraints moved into the descriptions. A model then sends",
        "`null` for the selectors it does not use; pass its arguments through",
        "`host_bridge.normalize_strict_arguments(name, arguments)` before",
        "executing them (see [LLM APIs](llm-apis.md#3-openai-strict-mode)). The strict",
        f"parameters of `{create.name}`:",
        "",
        "```json",
        json.dumps(strict_parameters(create.parameters), indent=2, ensure_ascii=False),
        "```",
        "",
        '`schedule_list` becomes `{"type": "object", "properties": {}, "required": [],',
        '"additionalProperties": false}` and `schedule_delete` requires its `id` as before.',
        "",
        "For OpenAI's Responses API, `--format responses` and `--format responses-strict` (or",
        "`host_bridge.openai_responses_tools(strict=...)`) give the same tools as flat function",
        'tools with an explicit `"strict": false` or `"strict": true`',
        "(see [LLM APIs](llm-apis.md#5-the-responses-api)).",
        "",
        "## Without calendar rules",
        "",
        "A `cron` record is an extension of the version-1 stream: a reader that knows only",
        "`after`, `at` and `every` rejects the log. A host that shares its logs with such a",
        "reader installs Schedule with `install_schedule(host, calendar_rules=False)`: the",
        "tools it registers then describe no `cron` anywhere (parameters, descriptions,",
        "output schemas) and answer a `cron` key `invalid_selector`, as an unknown key.",
        "`dsh-schedule catalog --without-cron` prints that catalog in every `--format`; in",
        "code, `host_bridge.openai_tools`, `host_bridge.openai_responses_tools` and",
        "`host_bridge.normalize_strict_arguments` take the same `calendar_rules=False`.",
        "",
    ]
    return "\n".join(lines)


def _responses_example(path: Path, *, strict: bool) -> str:
    """A saved Responses API response whose ``tools`` echo is today's catalog.

    The model's output in the file is kept as saved; only the offered tools are
    generated, so a schema change is one ``--write`` away from the examples.
    """
    response = json.loads(path.read_text(encoding="utf-8"))
    response["tools"] = openai_responses_tools(strict=strict)
    return json.dumps(response, indent=2, ensure_ascii=False) + "\n"


def _files() -> dict[Path, str]:
    files = {
        _DOCS / "tool-catalog.md": catalog_markdown(),
        _DOCS / "tool-catalog.json": catalog_json(),
    }
    for name, strict in (("openai_responses.json", False), ("openai_responses_strict.json", True)):
        path = _DOCS / "examples" / name
        files[path] = _responses_example(path, strict=strict)
    return files


def main(argv: list[str] | None = None) -> int:
    """``--write`` regenerates the committed catalog; ``--check`` reports drift."""
    parser = argparse.ArgumentParser(prog="python -m host_bridge._catalog")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--write",
        action="store_true",
        help="regenerate docs/tool-catalog.* and the tools of the Responses examples",
    )
    mode.add_argument(
        "--check", action="store_true", help="exit 1 if the committed catalog drifted"
    )
    args = parser.parse_args(argv)
    drifted = []
    for path, text in _files().items():
        if args.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            drifted.append(path.name)
    if drifted:
        sys.stderr.write(f"catalog drifted: {', '.join(drifted)}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
