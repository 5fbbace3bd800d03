"""``dsh-schedule catalog``: print the three tool schemas."""

from __future__ import annotations

import json

import click

from host_bridge.catalog import catalog_json, openai_tools
from host_bridge.cli.common import exit_codes_help, location_options

__all__ = ["catalog_command"]


@click.command(
    "catalog",
    short_help="The three tool schemas (JSON Schema, OpenAI layout).",
    epilog=(
        "\b\nFormats:\n"
        "  json    the catalog document (same as docs/tool-catalog.json): name,\n"
        "          description, parameter and output JSON Schemas (draft 2020-12)\n"
        "  openai  a `tools` array in the function-calling layout accepted by\n"
        "          OpenAI-compatible chat APIs (OpenAI, DeepSeek, ...)\n\n"
        + exit_codes_help((0, "the catalog was printed"), (2, "usage error"))
    ),
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["json", "openai"], case_sensitive=False),
    default="json",
    show_default=True,
    help="Output layout.",
)
@location_options
def catalog_command(output_format: str) -> None:
    """Print the schedule_create, schedule_list and schedule_delete tool schemas.

    The catalog does not depend on any stored data; --data and --store are
    accepted for uniformity with the other commands and ignored.
    """
    if output_format.lower() == "openai":
        click.echo(json.dumps(openai_tools(), indent=2, ensure_ascii=False))
    else:
        click.echo(catalog_json(), nl=False)
