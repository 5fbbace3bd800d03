"""The ``dsh-schedule`` command line: demo, chat, inspect, verify and catalog.

``main`` is the console-script entry point (``dsh-schedule = host_bridge.cli:main``);
``python -m host_bridge.cli`` runs the same command group.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from host_bridge.cli.chat import chat_command
from host_bridge.cli.common import EXIT_CODES_HELP, STORE_ENV, configure_logging
from host_bridge.cli.demo import demo_command
from host_bridge.cli.inspect_store import inspect_command
from host_bridge.cli.tool_catalog import catalog_command
from host_bridge.cli.verify import verify_command

__all__ = ["cli", "main"]

_EPILOG = (
    "\b\nData directory (every command takes --data DIR):\n"
    "  $DSH_SCHEDULE_HOME, else $XDG_DATA_HOME/dsh-schedule,\n"
    "  else ~/.local/share/dsh-schedule; the store is sessions.sqlite3 in it,\n"
    "  unless `dsh-schedule --store postgresql://…` names a shared database.\n\n"
    + EXIT_CODES_HELP
    + "\n\nRun `dsh-schedule COMMAND --help` for the options of a command."
)


class _InOrderGroup(click.Group):
    """A group that lists its commands in the order they were added (demo first)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The command names in insertion order."""
        return list(self.commands)


@click.group(
    cls=_InOrderGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_EPILOG,
)
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Log to stderr: -v for INFO, -vv for DEBUG (quiet by default).",
)
@click.option(
    "--store",
    "store",
    envvar=STORE_ENV,
    default=None,
    metavar="URL|PATH",
    help=(
        "Session store to use instead of the one in --data: a postgresql:// URL (a database "
        f"shared by many hosts; sessions are leased to one process at a time) or an SQLite "
        f"file. Default: ${STORE_ENV}, else sessions.sqlite3 in the data directory."
    ),
)
@click.version_option(package_name="dsh-tool-schedule", prog_name="dsh-schedule")
def cli(verbose: int, store: str | None) -> None:
    """Durable one-shot reminders for agents: try them, inspect and check the store."""
    configure_logging(verbose)


cli.add_command(demo_command)
cli.add_command(chat_command)
cli.add_command(inspect_command)
cli.add_command(verify_command)
cli.add_command(catalog_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``dsh-schedule`` with ``argv`` (default: the process arguments) and exit."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="dsh-schedule")
