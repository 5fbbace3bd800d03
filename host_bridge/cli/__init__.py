"""The ``dsh-schedule`` command line: demo, chat, serve, inspect, verify, reindex and catalog.

``main`` runs the command group; the console script (``dsh-schedule =
dsh_schedule.cli:main``) calls it once the package names are checked, so that a
shadowed package is one error line. ``python -m host_bridge.cli`` runs the same group.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import click

from host_bridge.cli._chat import chat_command
from host_bridge.cli._common import (
    EXIT_USAGE,
    InternalError,
    StoreUnavailable,
    configure_logging,
    location_options,
    shared_store_refused,
)
from host_bridge.cli._demo import demo_command
from host_bridge.cli._inspect_store import inspect_command
from host_bridge.cli._reindex import reindex_command
from host_bridge.cli._serve import serve_command
from host_bridge.cli._tool_catalog import catalog_command
from host_bridge.cli._verify import verify_command
from host_bridge.embedded.sessions import SessionError
from host_bridge.embedded.stores import SharedStoreError, StoreError

__all__ = ["cli", "main"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

_EPILOG = (
    "--data and --store are taken before or after the command name; given in both\n"
    "places, the one after the name wins.\n\n"
    "\b\nExit codes (`dsh-schedule COMMAND --help` says what each means there):\n"
    "  0  success\n"
    "  1  the command's check failed (verify, inspect, demo), or an internal error\n"
    f"  {EXIT_USAGE}  usage error, or the session store cannot be used\n\n"
    "Run `dsh-schedule COMMAND --help` for the options of a command."
)


class _Group(click.Group):
    """Lists commands in the order they were added (demo first); errors end in one line.

    A store or session error that escapes a command becomes a one-line
    ``Error:`` with exit code 2; any other unexpected exception a one-line
    internal error with exit code 1 (its traceback is logged, shown with ``-v``).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The command names in insertion order."""
        return list(self.commands)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; turn what escapes it into a one-line error and an exit code."""
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except SharedStoreError as error:
            raise shared_store_refused(error) from None
        except (StoreError, SessionError) as error:
            raise StoreUnavailable(str(error)) from None
        except Exception as error:
            _log.exception("dsh-schedule failed")
            raise InternalError(error) from None


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_EPILOG,
)
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Log to stderr: -v for INFO, -vv for DEBUG (quiet by default).",
)
@location_options
@click.version_option(package_name="dsh-tool-schedule", prog_name="dsh-schedule")
def cli(verbose: int) -> None:
    """Durable after, at, every and cron reminders: try them, inspect and check the store."""
    configure_logging(verbose)


cli.add_command(demo_command)
cli.add_command(chat_command)
cli.add_command(serve_command)
cli.add_command(inspect_command)
cli.add_command(verify_command)
cli.add_command(reindex_command)
cli.add_command(catalog_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``dsh-schedule`` with ``argv`` (default: the process arguments) and exit."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="dsh-schedule")
