"""``dsh-schedule catalog``: print the three tool schemas."""

from __future__ import annotations

import json
from pathlib import Path

import click

from host_bridge.catalog import catalog_json, openai_tools
from host_bridge.cli.common import EXIT_CODES_HELP, data_option

__all__ = ["catalog_command"]


@click.command(
    "catalog",
    short_help="The three tool schemas (JSON Schema, OpenAI layout).",
    epilog=(
        "\b\nFormats:\n"
        "  json    the catalog document (same as docs/tool-catalog.json): name,\n"
        "          description, parameter and output JSON Schemas (draft 2020-12)\n"
        "  openai  a `tools` array in the function-calling layout accepted by\n"
        "          OpenAI-compatible chat APIs (OpenAI, DeepSeek, ...)\n\n" + EXIT_CODES_HELP
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
@data_option
def catalog_command(output_format: str, data_dir: Path | None) -> None:
    """Print the schedule_create, schedule_list and schedule_delete tool schemas.

    The catalog does not depend on any stored data; --data is accepted for
    uniformity with the other commands and ignored.
    """
    if output_format.lower() == "openai":
        click.echo(json.dumps(openai_tools(), indent=2, ensure_ascii=False))
    else:
        click.echo(catalog_json(), nl=False)
