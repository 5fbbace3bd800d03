"""Shared parts of the ``dsh-schedule`` commands: options, exit codes, store access, output.

Everything here is CLI code: it may print (through :func:`click.echo`) and it
turns library errors into :class:`click.ClickException` subclasses that carry
the documented exit codes. Every string that comes from a store, a session or
the user goes through :func:`visible` (or :func:`show_text` / :func:`safe_json`)
before it is printed, so stored data can neither forge an output line nor
drive the terminal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shlex
import stat
import sys
import textwrap
import time
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click
import pykka

from actors._contract import Timers
from host_bridge._plugin import SchedulePlugin
from host_bridge.embedded.agents import EmbeddedAgent
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import default_data_dir, is_postgres_url, redact_url, store_path
from host_bridge.embedded.private_files import store_exposure
from host_bridge.embedded.stores import (
    DEFAULT_PROGRAM,
    SharedStoreError,
    SqliteStoreReader,
    StoreError,
    StoreMissingError,
    StoreReader,
    check_write_lock,
    open_store,
    parse_holder,
)
from messages._instant import format_instant

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "READ_STORE_EXIT",
    "SIGNAL_POLL_S",
    "STORE_ENV",
    "WRITE_STORE_EXIT",
    "CommandFailed",
    "InternalError",
    "Seconds",
    "StoreUnavailable",
    "allow_shared_store",
    "allow_shared_store_option",
    "close_host",
    "configure_logging",
    "describe_store",
    "exit_codes_help",
    "explicit_data_dir",
    "format_ms",
    "holder_phrase",
    "location_args",
    "location_options",
    "open_host",
    "open_store_readonly",
    "resolve_data_dir",
    "safe_json",
    "settle",
    "shared_store_refused",
    "shell_words",
    "show_text",
    "store_spec",
    "visible",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

EXIT_OK = 0
"""The command did what was asked."""

EXIT_FAILED = 1
"""The command ran and its check failed (each command's ``--help`` says which), or a bug."""

EXIT_USAGE = 2
"""A usage error, or a session store the command cannot use."""

READ_STORE_EXIT = (
    "usage error, or the session store cannot be read: missing or empty, not a file, "
    "unreadable, corrupt, not a session store, or of a newer schema"
)
"""What exit code 2 means for a command that only reads the store."""

WRITE_STORE_EXIT = (
    "usage error, or the session store cannot be used: not a file, unreadable, corrupt, "
    "not a session store, of a newer schema, read-only, locked by another process, or open "
    "to other local users (without --allow-shared-store); "
    "the session is live in another process, or its rows are unreadable (a bad payload, "
    "a gap in its seq numbers); also when the store could not write every event by the "
    "end (or not in time: a disk that stopped answering)"
)
"""What exit code 2 means for a command that writes to the store (it creates a missing one)."""


def exit_codes_help(*rows: tuple[int, str]) -> str:
    """A command's ``Exit codes:`` epilog block, wrapped by hand (``\b`` keeps click from it)."""
    lines = ["\b", "Exit codes:"]
    for code, meaning in rows:
        wrapped = textwrap.wrap(meaning, width=72)
        lines.append(f"  {code}  {wrapped[0]}")
        lines += [f"     {more}" for more in wrapped[1:]]
    return "\n".join(lines)


_DATA_HELP = (
    "Data directory holding the session store (sessions.sqlite3). Default: "
    "$DSH_SCHEDULE_HOME, else $XDG_DATA_HOME/dsh-schedule, else ~/.local/share/dsh-schedule."
)

STORE_ENV = "DSH_SCHEDULE_STORE"
"""Environment variable naming the session store (like ``--store``)."""

_STORE_HELP = (
    "Session store to use instead of the one in --data: a postgresql:// URL (a database "
    "shared by many hosts; sessions are leased to one process at a time) or an SQLite "
    f"file. Default: ${STORE_ENV}, else sessions.sqlite3 in the data directory."
)

_SHARED_HELP = (
    "Use an SQLite store that other local users can reach (its directory writable by others, "
    "or a file of it another user's or open to group or others) instead of refusing it."
)

_META_DATA = "dsh_schedule.data_dir"
_META_STORE = "dsh_schedule.store"
_META_SHARED = "dsh_schedule.allow_shared_store"

F = TypeVar("F", bound=Callable[..., Any])


# --- safe output -----------------------------------------------------------------------------

_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ASCII_UNSAFE = re.compile(r"[\x00-\x1f\x7f\\]")


def _unsafe(char: str) -> bool:
    return unicodedata.category(char) in _UNSAFE_CATEGORIES


def _escape(char: str) -> str:
    short = _SHORT_ESCAPES.get(char)
    if short is not None:
        return short
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


SIGNAL_POLL_S = 0.25
"""How often a command's main thread wakes from a wait so a pending signal handler runs.

The kernel may hand SIGINT or SIGTERM to any thread; Python runs the handler
on the main thread only, between bytecodes, so a main thread blocked in a
wait without a timeout would not see it until the wait ends.
"""


class Seconds(click.FloatRange):
    """A duration option in seconds: a finite number within the range (``nan``, ``inf`` refused)."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number, or a usage error naming the option."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return number


def visible(text: str) -> str:
    """``text`` safe to print on one line: what a terminal would act on becomes a visible escape.

    Escaped: control characters (C0, DEL, C1: ``\\n``, ``\\x1b``, ``\\x9b``…),
    format characters (bidi controls such as U+202E, zero-width characters,
    U+FEFF…), the line and paragraph separators U+2028/U+2029, lone surrogates,
    and the backslash itself (``\\\\``), so an escape can never be mistaken for
    the character. Everything else, including non-ASCII text, is kept.
    """
    if text.isascii():
        return _ASCII_UNSAFE.sub(lambda match: _escape(match.group()), text)
    return "".join(_escape(char) if char == "\\" or _unsafe(char) else char for char in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def safe_json(text: str) -> str:
    """JSON text (or JSON-escaped lines) with what :func:`visible` escapes written ``\\uXXXX``.

    ``json.dumps(..., ensure_ascii=False)`` already escapes C0 controls inside
    strings; this also escapes DEL, C1 controls, format characters, U+2028/2029
    and lone surrogates. The result is the same JSON value (``json.loads`` gives
    back the same data); the layout's own newlines and spaces are kept.
    """
    return "".join(
        _json_escape(char) if char not in "\n\t\r" and _unsafe(char) else char for char in text
    )


def show_text(text: str) -> str:
    """A one-line, quoted rendering of user text (a JSON string, non-ASCII kept, nothing unsafe)."""
    return safe_json(json.dumps(text, ensure_ascii=False))


# --- errors ------------------------------------------------------------------------------------


class CommandFailed(click.ClickException):
    """The command ran but its check failed (exit code 1). The message is printed on one line."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(visible(message))


class StoreUnavailable(click.ClickException):
    """The session store (or a session in it) cannot be used (exit code 2), on one line."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(visible(message))


_OWN_PACKAGES = frozenset({"builtins", "actors", "messages", "host_bridge"})


class InternalError(click.ClickException):
    """An unexpected exception (a bug): one line, exit code 1; ``-v`` logs the traceback.

    The line shows ``type: text`` of exceptions of Python's own and of this
    package's classes; of any other (a driver's ``psycopg.OperationalError``,
    whose text can quote a connection string) only the qualified class name.
    """

    exit_code = EXIT_FAILED

    def __init__(self, error: BaseException) -> None:
        kind = type(error)
        if kind.__module__.partition(".")[0] in _OWN_PACKAGES:
            shown = f"{kind.__name__}: {error}"
        else:
            shown = f"{kind.__module__}.{kind.__qualname__}"
        super().__init__(visible(f"internal error ({shown}); -v logs the traceback"))


# --- where the store is ------------------------------------------------------------------------


def _remember(key: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:
            ctx.meta[key] = value  # meta is shared by the group's and the command's contexts

    return callback


def location_options(function: F) -> F:
    """``--data DIR`` and ``--store URL|PATH``, accepted by the group and by every command.

    Given in both places, the command's value wins (its context parses after
    the group's). Read them with :func:`resolve_data_dir` and :func:`store_spec`.
    """
    data = click.option(
        "--data",
        default=None,  # a plain string: resolve_data_dir reports what is wrong with it, in one line
        metavar="DIR",
        expose_value=False,
        callback=_remember(_META_DATA),
        help=_DATA_HELP,
    )
    store = click.option(
        "--store",
        default=None,
        metavar="URL|PATH",
        expose_value=False,
        callback=_remember(_META_STORE),
        help=_STORE_HELP,
    )
    return data(store(function))


def allow_shared_store_option(function: F) -> F:
    """``--allow-shared-store`` for the commands that write (read by :func:`allow_shared_store`)."""
    return click.option(
        "--allow-shared-store",
        is_flag=True,
        default=False,
        expose_value=False,
        callback=_remember(_META_SHARED),
        help=_SHARED_HELP,
    )(function)


def allow_shared_store() -> bool:
    """Whether ``--allow-shared-store`` was given."""
    return _meta(_META_SHARED) is True


def shared_store_refused(error: SharedStoreError) -> StoreUnavailable:
    """The one-line refusal of a shared store, naming the fix and the flag that accepts it."""
    return StoreUnavailable(
        f"{error.problem}; {error.remedy}, or pass --allow-shared-store to accept it"
    )


def _meta(key: str) -> Any:
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(key)


def explicit_data_dir() -> Path | None:
    """The ``--data`` given on the command line (to the group or the command), if any."""
    value = _meta(_META_DATA)
    return Path(value) if isinstance(value, str) else None


def resolve_data_dir() -> Path:
    """``--data`` if given (the command's over the group's), else the default data directory.

    For the commands that use a store, one that cannot be used exits 2 with one
    line: a path with a NUL character, one that exists but is not a directory,
    and, when the store is the one inside it, one that cannot be looked up or
    searched (permission denied). A missing one is created by the store.
    """
    given = explicit_data_dir()
    directory = given if given is not None else default_data_dir()
    problem = _data_dir_problem(directory, holds_store=store_spec() is None)
    if problem is not None:
        raise StoreUnavailable(f"the data directory {directory} {problem}")
    return directory


def _data_dir_problem(directory: Path, *, holds_store: bool) -> str | None:
    """Why ``directory`` cannot be the data directory, or ``None``."""
    if "\0" in str(directory):
        return "is not a valid path (it contains a NUL character)"
    try:
        mode = directory.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None  # opening the store creates it, or says why it cannot
    except OSError as error:
        if not holds_store:
            return None
        if isinstance(error, PermissionError):
            return "cannot be read (permission denied)"
        return f"cannot be used ({error.strerror or type(error).__name__})"
    if not stat.S_ISDIR(mode):
        return "is not a directory"
    if holds_store and not os.access(directory, os.X_OK):
        return "cannot be read (permission denied)"
    return None


def store_spec() -> str | None:
    """``--store`` (the command's over the group's), else ``$DSH_SCHEDULE_STORE``, if any."""
    value = _meta(_META_STORE)
    if not (isinstance(value, str) and value):
        value = os.environ.get(STORE_ENV)
    return value if isinstance(value, str) and value else None


def describe_store(data_dir: Path) -> str:
    """The store commands use, for display: ``--store`` (without passwords) or the SQLite file."""
    spec = store_spec()
    return str(store_path(data_dir)) if spec is None else redact_url(spec)


def location_args() -> list[str]:
    """``--data``/``--store`` arguments that reach the same store again, for printed hints.

    ``--data`` when one was given; ``--store`` whenever a store other than the
    data directory's is in use (from the option or the environment). A
    PostgreSQL URL is shown without its passwords (see :func:`redact_url`).
    """
    args: list[str] = []
    given = explicit_data_dir()
    if given is not None:
        args += ["--data", str(given)]
    spec = store_spec()
    if spec is not None:
        args += ["--store", describe_store(given or default_data_dir())]
    return args


def shell_words(words: list[str]) -> str:
    """``words`` as one shell command line, safe to print."""
    return visible(" ".join(shlex.quote(word) for word in words))


# --- opening and closing ----------------------------------------------------------------------


@contextlib.contextmanager
def open_store_readonly(data_dir: Path, *, verb: str = "read") -> Iterator[StoreReader]:
    """Open the existing store (``--store``, else the one of ``data_dir``) strictly read-only.

    Nothing is created, migrated, locked or written (see
    :func:`host_bridge.embedded.stores.open_store` with ``read_only=True``), so
    this works on a read-only store and beside a process writing to it. A
    missing or empty store exits 2 with ``there is nothing to VERB at …``; a
    bad one exits 2 with the store's own one-line message. A store other local
    users can reach is read, after a ``warning:`` line on stderr (none when
    ``--allow-shared-store`` accepted it).
    """
    spec = store_spec()
    try:
        store = open_store(spec if spec is not None else store_path(data_dir), read_only=True)
    except StoreMissingError as error:
        raise StoreUnavailable(
            f"there is nothing to {verb} at {error.location} ({error.reason})"
        ) from None
    except StoreError as error:
        raise StoreUnavailable(str(error)) from None
    exposure = store.exposure if isinstance(store, SqliteStoreReader) else None
    if exposure is not None and not allow_shared_store():
        click.echo(visible(f"warning: {exposure.problem}; {exposure.remedy}"), err=True)
    try:
        yield store
    finally:
        with contextlib.suppress(StoreError):
            store.close()


def _refuse_read_only(path: Path) -> None:
    """Exit 2 when the SQLite store at ``path`` (or its directory) cannot be written."""
    try:
        path.exists()
    except OSError as error:  # a directory on the way cannot be searched
        reason = error.strerror or type(error).__name__
        raise StoreUnavailable(f"cannot read the session store {path} ({reason})") from None
    if path.is_file() and not os.access(path, os.R_OK):
        raise StoreUnavailable(f"cannot read the session store {path} (permission denied)")
    if path.exists() and not os.access(path, os.W_OK):
        raise StoreUnavailable(f"the session store {path} is read-only; this command writes to it")
    directory = path.parent
    if directory.is_dir() and not os.access(directory, os.W_OK | os.X_OK):
        raise StoreUnavailable(
            f"the directory of the session store {path} is read-only; this command writes to it"
        )


def open_host(
    data_dir: Path,
    *,
    program: str,
    clock: Callable[[], int] | None = None,
    timers: Timers | None = None,
    store: Path | None = None,
) -> EmbeddedHost:
    """A durable :class:`EmbeddedHost` on ``data_dir`` (or ``--store``) for a command that writes.

    ``program`` (``serve``, ``chat``, ``demo``) is named in the store's holder
    records (see :func:`holder_phrase`). ``clock`` and ``timers`` replace the
    host's wall clock and timer service (the caller closes timers it passes).
    ``store``: an SQLite file used instead of ``--store`` and the data
    directory's (the demo's temporary store). An SQLite store that is read-only,
    one other local users can reach (unless ``--allow-shared-store``), one
    another process keeps write-locked (past the busy timeout), or one that
    cannot be opened, exits 2.
    """
    spec = store_spec() if store is None else str(store)
    shared = allow_shared_store()
    try:
        if spec is None or not is_postgres_url(spec):
            path = Path(spec) if spec is not None else store_path(data_dir)
            _refuse_read_only(path)
            exposure = None if shared else store_exposure(path)
            if exposure is not None:  # refused before any file of it is opened
                raise shared_store_refused(exposure)
            check_write_lock(path)
        if clock is None:
            return EmbeddedHost(
                data_dir, store=spec, timers=timers, allow_shared_store=shared, program=program
            )
        return EmbeddedHost(
            data_dir,
            store=spec,
            clock=clock,
            timers=timers,
            allow_shared_store=shared,
            program=program,
        )
    except SharedStoreError as error:
        raise shared_store_refused(error) from None
    except StoreError as error:
        raise StoreUnavailable(str(error)) from None


_COMMANDS = frozenset({"serve", "chat", "demo"})


def holder_phrase(owner: str | None) -> str:
    """Who holds a session, for a person: ```dsh-schedule serve` (pid 7 on host h)``, ….

    From the holder record ``owner`` (``host:pid:PROGRAM-random``, see
    :func:`host_bridge.embedded.stores.new_owner`): a ``dsh-schedule`` command,
    ``a library host`` (a program that names none), ``another process`` (a
    record of an earlier release, or none), each with its pid and host. Not
    escaped: print it through :func:`visible` (as :class:`StoreUnavailable` does).
    """
    holder = None if owner is None else parse_holder(owner)
    if holder is None:
        return "another process" if owner is None else f"another process ({owner})"
    where = f"(pid {holder.pid} on host {holder.host})"
    if holder.program in _COMMANDS:
        return f"`dsh-schedule {holder.program}` {where}"
    if holder.program == DEFAULT_PROGRAM:
        return f"a library host {where}"
    if holder.program is not None:
        return f"the program {holder.program!r} {where}"
    return f"another process {where}"


def close_host(
    host: EmbeddedHost,
    plugin: SchedulePlugin | None = None,
    *,
    failing: BaseException | None = None,
    timeout: float = 30.0,
) -> None:
    """Dispose ``plugin``, close ``host`` and stop every actor; report what was not written.

    Call it on the way out of a command, with the exception on its way out as
    ``failing`` (if any). When the store could not write every queued event
    (read-only, full, locked by another process, or not in time: the host's
    close is bounded), the store is what failed: the command's own error, if
    any, is printed first on its own line, and :class:`StoreUnavailable`
    (exit 2) names what was not written; that also takes precedence over a
    plugin that did not finish disposing within ``timeout``. Otherwise this
    returns and the caller's exception (if any) goes on.
    """
    late: TimeoutError | None = None
    try:
        if plugin is not None:
            try:
                plugin.dispose().result(timeout=timeout)
            except TimeoutError as error:  # (a store that stopped answering is reported below)
                _log.error("the Schedule plugin did not finish disposing within %g s", timeout)
                late = error
    finally:
        unwritten = host.close()
        pykka.ActorRegistry.stop_all()
    if unwritten is None:
        if late is not None:
            raise late
        return
    if isinstance(failing, click.ClickException):
        click.echo(f"Error: {failing.format_message()}", err=True)
    elif isinstance(failing, Exception):
        _log.error("dsh-schedule failed", exc_info=failing)
        click.echo(f"Error: {InternalError(failing).format_message()}", err=True)
    raise StoreUnavailable(f"{describe_store(host.data_dir)}: {unwritten}")


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
