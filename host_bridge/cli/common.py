"""Shared parts of the ``dsh-schedule`` commands: options, exit codes, store access, output.

Everything here is CLI code: it may print (through :func:`click.echo`) and it
turns library errors into :class:`click.ClickException` subclasses that carry
the documented exit codes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from host_bridge.embedded.agents import EmbeddedAgent
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import default_data_dir, store_path
from host_bridge.embedded.sqlite_store import SqliteEventStore, StoreError
from host_bridge.embedded.stores import is_postgres_url, open_store
from host_bridge.plugin import SchedulePlugin
from messages.instant import format_instant

__all__ = [
    "EXIT_CODES_HELP",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "STORE_ENV",
    "CommandFailed",
    "StoreUnavailable",
    "configure_logging",
    "data_option",
    "describe_store",
    "format_ms",
    "open_host",
    "open_store_readonly",
    "resolve_data_dir",
    "settle",
    "show_text",
    "store_spec",
]

EXIT_OK = 0
"""The command did what was asked (``verify``: every session is valid)."""

EXIT_FAILED = 1
"""``verify`` found an invalid session, ``inspect`` a corrupt log, or ``demo`` did not complete."""

EXIT_USAGE = 2
"""A usage error (bad option or argument) or an unreadable/missing session store."""

EXIT_CODES_HELP = (
    "\b\nExit codes:\n"
    "  0  success (verify: every stored session is valid)\n"
    "  1  verification failed, a corrupt log was found, or the demo did not complete\n"
    "  2  usage error, or the session store is missing or unreadable"
)
"""The exit-code table shown in ``--help`` epilogs (``\\b`` keeps click from rewrapping it)."""

_DATA_HELP = (
    "Data directory holding the session store (sessions.sqlite3). Default: "
    "$DSH_SCHEDULE_HOME, else $XDG_DATA_HOME/dsh-schedule, else ~/.local/share/dsh-schedule."
)

F = TypeVar("F", bound=Callable[..., Any])


class CommandFailed(click.ClickException):
    """The command ran but its check failed (exit code 1)."""

    exit_code = EXIT_FAILED


class StoreUnavailable(click.ClickException):
    """The session store (or a session in it) cannot be opened or read (exit code 2)."""

    exit_code = EXIT_USAGE


def data_option(function: F) -> F:
    """The ``--data DIR`` option shared by every command (``None`` means the default dir)."""
    option = click.option(
        "--data",
        "data_dir",
        type=click.Path(file_okay=False, dir_okay=True, path_type=Path),
        default=None,
        metavar="DIR",
        help=_DATA_HELP,
    )
    return option(function)


def resolve_data_dir(data_dir: Path | None) -> Path:
    """``data_dir`` if given, else the documented default data directory."""
    return data_dir if data_dir is not None else default_data_dir()


def configure_logging(verbosity: int) -> None:
    """Quiet by default; ``-v`` logs INFO and ``-vv`` DEBUG to stderr."""
    if verbosity <= 0:
        # A handler on the root logger keeps logging's last-resort stderr output quiet.
        logging.getLogger().addHandler(logging.NullHandler())
        return
    logging.basicConfig(
        level=logging.DEBUG if verbosity > 1 else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


STORE_ENV = "DSH_SCHEDULE_STORE"
"""Environment variable naming the session store (like ``dsh-schedule --store``)."""


def store_spec() -> str | None:
    """The ``--store`` given to the ``dsh-schedule`` group (or ``$DSH_SCHEDULE_STORE``), if any."""
    ctx = click.get_current_context(silent=True)
    value = None if ctx is None else ctx.find_root().params.get("store")
    return value if isinstance(value, str) and value else None


def describe_store(data_dir: Path) -> str:
    """The store commands use, for display: ``--store`` (without password) or the SQLite file."""
    spec = store_spec()
    if spec is None:
        return str(store_path(data_dir))
    if is_postgres_url(spec):
        from host_bridge.embedded.postgres_store import redact_url

        return redact_url(spec)
    return spec


@contextlib.contextmanager
def open_store_readonly(data_dir: Path) -> Iterator[SqliteEventStore]:
    """Open the existing store (``--store``, else the one of ``data_dir``) for reading.

    A missing or bad store exits 2.
    """
    spec = store_spec()
    try:
        store = (
            open_store(spec, create=False)
            if spec is not None
            else SqliteEventStore(store_path(data_dir), create=False)
        )
    except StoreError as error:
        raise StoreUnavailable(str(error)) from None
    try:
        yield store
    finally:
        with contextlib.suppress(StoreError):
            store.close()


def open_host(data_dir: Path) -> EmbeddedHost:
    """A durable :class:`EmbeddedHost` on ``data_dir`` (or ``--store``); errors exit 2."""
    try:
        return EmbeddedHost(data_dir, store=store_spec())
    except StoreError as error:
        raise StoreUnavailable(str(error)) from None


def settle(plugin: SchedulePlugin, agent: EmbeddedAgent, timeout: float = 30.0) -> None:
    """Block until ``agent``'s Schedule owner and the agent itself have no work left.

    Waits on the owner's status and the agent's idle future (no sleeping);
    raises :class:`TimeoutError` when that does not happen within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the host did not settle in time")
        return remaining

    while True:
        plugin.wait_quiet(agent, left())
        agent.when_idle().result(timeout=left())
        status = plugin.wait_quiet(agent, left())
        if agent.status == "idle" and not status.busy:
            return


def format_ms(ms: int) -> str:
    """Epoch milliseconds as the protocol's canonical UTC instant (``…T…:…:….sssZ``)."""
    try:
        return format_instant(ms)
    except Exception:
        return f"{ms} ms"


def show_text(text: str) -> str:
    """A one-line, quoted rendering of user text (JSON string escaping, non-ASCII kept)."""
    return json.dumps(text, ensure_ascii=False)
