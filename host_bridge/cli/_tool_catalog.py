"""``dsh-schedule catalog``: print the three tool schemas."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import click

from host_bridge._catalog import catalog_json, openai_responses_tools, openai_tools
from host_bridge.cli._common import exit_codes_help, location_options

__all__ = ["catalog_command"]

_LAYOUTS: dict[str, Callable[..., list[dict[str, Any]]] | None] = {
    "json": None,
    "openai": openai_tools,
    "openai-strict": partial(openai_tools, strict=True),
    "responses": openai_responses_tools,
    "responses-strict": partial(openai_responses_tools, strict=True),
}
"""Each ``--format`` and the tools array it prints (``None``: the catalog document)."""


@click.command(
    "catalog",
    short_help="The three tool schemas (JSON Schema, OpenAI layouts).",
    epilog=(
        "\b\nFormats:\n"
        "  json    the catalog document (same as docs/tool-catalog.json): name,\n"
        "          description, parameter and output JSON Schemas (draft 2020-12)\n"
        "  openai  a `tools` array in the function-calling layout accepted by\n"
        "          OpenAI-compatible chat APIs (OpenAI, DeepSeek, ...)\n"
        "  openai-strict\n"
        '          the same for strict mode ("strict": true): closed objects, every\n'
        "          property required, optional ones nullable, constraints in the\n"
        "          descriptions; pass the model's arguments through\n"
        "          host_bridge.normalize_strict_arguments\n"
        "  responses\n"
        "          a `tools` array of flat function tools for OpenAI's Responses API\n"
        '          (client.responses.create), open parameters and "strict": false\n'
        "  responses-strict\n"
        '          the same with "strict": true and the strict-mode parameters\n\n'
        "--without-cron prints the catalog of a host installed with\n"
        "install_schedule(..., calendar_rules=False): no cron selector.\n\n"
        + exit_codes_help((0, "the catalog was printed"), (2, "usage error"))
    ),
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(list(_LAYOUTS), case_sensitive=False),
    default="json",
    show_default=True,
    help="Output layout.",
)
@click.option(
    "--without-cron",
    is_flag=True,
    help="Leave the cron selector out (calendar_rules=False).",
)
@location_options
def catalog_command(output_format: str, without_cron: bool) -> None:
    """Print the schedule_create, schedule_list and schedule_delete tool schemas.

    The catalog does not depend on any stored data; --data and --store are
    accepted for uniformity with the other commands and ignored.
    """
    tools = _LAYOUTS[output_format.lower()]
    calendar_rules = not without_cron
    if tools is None:
        click.echo(catalog_json(calendar_rules=calendar_rules), nl=False)
    else:
        layout = tools(calendar_rules=calendar_rules)
        click.echo(json.dumps(layout, indent=2, ensure_ascii=False))
