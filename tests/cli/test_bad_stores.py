"""Every command against every bad store: one ``Error:`` line on stderr and exit code 2.

The sweep runs each command of ``dsh-schedule`` (``inspect``, ``verify``,
``chat``, ``demo``; ``catalog`` uses no store) through the real entry point
against each case of the bad-store matrix in docs/reliability.md: garbage,
truncated, zeroed, an SQLite database of another application, a directory
where the file should be, a file where the data directory should be,
read-only (file and directory), unreadable, of a newer schema, a version 1
store, rows that do not read (a bad payload, a gap in the seq numbers),
locked by another process (a real second process holding the SQLite write
lock, or holding the session's lock), missing and empty, open to other local
users (the store file, its lock file, its directory; a lock file of another
user), accepted with ``--allow-shared-store``, and missing under umask 000
(what the writers create must be private all the same); and, with
``--store``, PostgreSQL databases (empty, another application's tables, a
newer schema, unreachable, a bad payload, a session leased by another
process); on both, a damaged due index row.

Each cell expects exactly one outcome: exit 2 with one ``Error:`` line (the
same message for every command, the verb aside), exit 1 with the command's
finding (inspect and verify report a session whose rows do not read), or a
normal run (a read-only command on a store it can read; a writing command on
a store it may create or migrate, or whose damaged session it does not use).
No cell prints a traceback or a backend's own error text, and no refused
store is changed. The stores are built once per module and shared; a writing
command that may change a store gets a copy of it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import click
import pytest
from click.testing import CliRunner

from host_bridge.cli import cli
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import (
    BUSY_TIMEOUT_MS,
    SCHEMA_VERSION,
    StoreCorruptError,
)
from host_bridge.protocols import SessionEvent, SessionHeader
from tests.cli.helpers import (
    REPO,
    Run,
    cli_env,
    create,
    message,
    read_only_prefix,
    run_cli,
    without_file_privileges,
    write_locked,
    write_session,
)

try:
    from host_bridge.embedded.stores import PG_SCHEMA_VERSION
except ImportError:  # psycopg missing: the PostgreSQL cases skip
    PG_SCHEMA_VERSION = 0

NOW = 1_800_000_000_000
SESSION = [message("hi"), create("schedule-1", "p", 60, NOW), message("bye")]

COMMANDS = ("inspect", "verify", "chat", "demo")
VERBS = {"inspect": "inspect", "verify": "verify"}
DEMO_MARKER = "tool     <- created schedule-1"
"""A demo line printed once its first create is confirmed durable: the store was usable."""

BACKEND_TEXT = (
    "Traceback",
    "file is not a database",
    "database disk image is malformed",
    "unable to open database",
    "attempt to write a readonly database",
    "database is locked",
    "psycopg",
    "Connection refused",
    "connection to server",
    "Errno",
)
"""Backend exception text that must never reach the user."""

SQLITE_TYPES = re.compile(r"sqlite3\.[A-Z]")
"""Names of sqlite3's exception types (a path such as ``sessions.sqlite3.locks`` is fine)."""


# --- outcomes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one command does on one case.

    ``code`` 2: ``line`` is the regex of the one ``Error:`` message (``{path}``,
    ``{dir}``, ``{url}`` and ``{verb}`` are filled in, escaped). ``code`` 1: a
    finding; ``line`` is the regex of stderr's last line and ``out`` a fragment
    of stdout. ``code`` 0: a normal run (demo: it got as far as a confirmed
    create); ``line``, if given, is the regex of the one ``warning:`` line on stderr.
    """

    code: int
    line: str = ""
    out: str = ""


RUNS = Outcome(0)


def error(line: str) -> Outcome:
    """Exit 2 with this one message."""
    return Outcome(2, line)


def finding(line: str, out: str) -> Outcome:
    """Exit 1: ``line`` ends stderr, ``out`` is in stdout."""
    return Outcome(1, line, out)


def same(outcome: Outcome) -> dict[str, Outcome]:
    """The same outcome for every command."""
    return dict.fromkeys(COMMANDS, outcome)


NOT_A_DATABASE = error(
    r"{path} is corrupt or not an SQLite database \(SQLITE_NOTADB\); "
    "move it aside or restore a backup"
)
CORRUPT = error(
    r"{path} is corrupt or not an SQLite database \(SQLITE_CORRUPT\w*\); "
    "move it aside or restore a backup",
)
BAD_PAYLOAD = "session 's1' has an unreadable payload at seq 1: payload is not valid msgpack"
SEQ_GAP = "session 's1' has no event with seq 1 (found 2)"


def warned(line: str) -> Outcome:
    """A normal run with this one ``warning:`` line on stderr."""
    return Outcome(0, line)


def readers(outcome: Outcome) -> dict[str, Outcome]:
    return {"inspect": outcome, "verify": outcome}


def writers(outcome: Outcome) -> dict[str, Outcome]:
    return {"chat": outcome, "demo": outcome}


def damaged_session(problem: str, *, in_history: bool = False) -> dict[str, Outcome]:
    """A session's stored log is damaged: the readers report it, chat refuses to resume it.

    ``in_history``: the damage is in rows the resume does not read (it reads the
    session from its schedule state on), so chat resumes it; the readers still see it.
    """
    return {
        "inspect": finding(
            r"1 of \d+ session\(s\) could not be read or folded", f"ERROR: store: {problem}"
        ),
        "verify": finding(r"\d+ of \d+ session\(s\) invalid", f"INVALID  s1: store: {problem}"),
        "chat": RUNS if in_history else error(re.escape(problem) + ".*"),
        "demo": RUNS,  # it runs on a session of its own
    }


def damaged_index_row(problem: str) -> dict[str, Outcome]:
    """A session's due index row is wrong: only verify looks at it (exit 1, that session)."""
    return {
        **readers(RUNS),
        "verify": finding(r"1 of 1 session\(s\) invalid", f"INVALID  s1: {problem}"),
        **writers(RUNS),
    }


# --- SQLite cases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One bad store: how to build it in a data directory, and each command's outcome."""

    name: str
    build: Callable[[Path], object]
    expect: dict[str, Outcome]
    read_only: bool = False  # the store file (or, with ``directory``, its directory)
    directory: bool = False
    mutable: bool = False  # a command that runs may change it: it gets a copy
    holder: str = ""  # "write-lock" or "session": another process holds it meanwhile
    unprivileged: bool = False  # commands run without root's power over file permissions
    root: bool = False  # building it needs root (a file given to another user)
    writer_args: tuple[str, ...] = ()  # more arguments for chat and demo
    umask: int | None = None  # the commands run under this umask; what they make is private


def _private(path: Path) -> None:
    """Give a store file made by hand the mode the store gives its files: its content is bad."""
    path.chmod(0o600)


def _good(data_dir: Path) -> Path:
    write_session(data_dir, "s1", SESSION)
    return store_path(data_dir)


def _sql(path: Path, *statements: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for statement in statements:
            conn.execute(statement)


def _missing(data_dir: Path) -> None:
    pass


def _zero_length(data_dir: Path) -> None:
    data_dir.mkdir(parents=True)
    store_path(data_dir).touch()
    _private(store_path(data_dir))


def _garbage(data_dir: Path) -> None:
    data_dir.mkdir(parents=True)
    store_path(data_dir).write_bytes(random.Random(7).randbytes(16384))
    _private(store_path(data_dir))


def _truncated(data_dir: Path) -> None:
    for index in range(40):
        write_session(data_dir, f"filler-{index}", [message("x" * 2000)] * 3)
    path = _good(data_dir)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _zeroed(data_dir: Path) -> None:
    path = _good(data_dir)
    path.write_bytes(bytes(path.stat().st_size))


def _foreign(data_dir: Path) -> None:
    data_dir.mkdir(parents=True)
    _sql(store_path(data_dir), "CREATE TABLE songs(title TEXT)", "INSERT INTO songs VALUES ('x')")
    _private(store_path(data_dir))


def _directory(data_dir: Path) -> None:
    store_path(data_dir).mkdir(parents=True)


def _data_dir_is_a_file(data_dir: Path) -> None:
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    data_dir.write_text("not a directory\n")


def _newer(data_dir: Path) -> None:
    _sql(_good(data_dir), "UPDATE meta SET value = '99' WHERE key = 'schema_version'")


def _version_1(data_dir: Path) -> None:
    _sql(
        _good(data_dir),
        "DROP TABLE leases",
        "DROP TABLE due_index",
        "DROP TABLE schedule_checkpoints",
        "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
    )


def _bad_payload(data_dir: Path) -> None:
    _sql(_good(data_dir), "UPDATE events SET data = x'c1ff' WHERE session_id = 's1' AND seq = 1")


def _seq_gap(data_dir: Path) -> None:
    _sql(_good(data_dir), "DELETE FROM events WHERE session_id = 's1' AND seq = 1")


def _bad_index_row(data_dir: Path) -> None:
    _sql(_good(data_dir), "UPDATE due_index SET schedule_ms = 'garbage' WHERE session_id = 's1'")


def _unreadable(data_dir: Path) -> None:
    _good(data_dir).chmod(0)


def _shared_file(data_dir: Path) -> None:
    _good(data_dir).chmod(0o644)


def _lock_file(data_dir: Path) -> Path:
    locks = store_path(data_dir).with_name("sessions.sqlite3.locks")
    os.close(os.open(locks, os.O_RDWR | os.O_CREAT, 0o600))
    return locks


def _shared_lock_file(data_dir: Path) -> None:
    _good(data_dir)
    _lock_file(data_dir).chmod(0o644)


def _lock_file_of_another_user(data_dir: Path) -> None:
    _good(data_dir)
    if os.geteuid() == 0:
        os.chown(_lock_file(data_dir), NOBODY, NOBODY)


def _shared_directory(data_dir: Path) -> None:
    _good(data_dir)
    data_dir.chmod(0o777)


READ_ONLY = error(
    "the (directory of the )?session store {path} is read-only; this command writes to it"
)
NOBODY = 65534
"""Another local user (``nobody``)."""
ACCEPT = ", or pass --allow-shared-store to accept it"
SHARED_FILE = (  # a reader leaves SQLite's -wal and -shm, with the database file's mode
    "the session store files? {path} \\(mode 0644\\)(, {path}-(wal|shm) \\(mode 0644\\))* "
    "(is|are) accessible to other local users"
)
SHARED_FILE_FIX = "run chmod 600 {path}( {path}-(wal|shm))*"
SHARED_LOCKS = (
    "the session store file {path}\\.locks \\(mode 0644\\) is accessible to other local users"
)
FOREIGN_LOCKS = (
    f"the session store file {{path}}\\.locks \\(uid {NOBODY}\\) belongs to another user, "
    "not to uid 0"
)
SHARED_DIR = "the directory {dir} of the session store is writable by other users \\(mode 0777\\)"


def shared(problem: str, remedy: str) -> dict[str, Outcome]:
    """A store open to other users: the readers read it after a warning, the writers refuse it."""
    return {
        **readers(warned(f"warning: {problem}; {remedy}")),
        **writers(error(f"{problem}; {remedy}{ACCEPT}")),
    }


CASES = [
    Case(
        "missing",
        _missing,
        {
            **readers(error("there is nothing to {verb} at {path} \\(no such file\\)")),
            **writers(RUNS),
        },
        mutable=True,
    ),
    Case(
        "zero-length",
        _zero_length,
        {
            **readers(error("there is nothing to {verb} at {path} \\(the file is empty\\)")),
            **writers(RUNS),
        },
        mutable=True,
    ),
    Case("garbage", _garbage, same(NOT_A_DATABASE)),
    Case("truncated", _truncated, same(CORRUPT)),
    Case("zeroed", _zeroed, same(NOT_A_DATABASE)),
    Case(
        "foreign",
        _foreign,
        same(error("{path} is an SQLite database but not a dsh-schedule session store")),
    ),
    Case("directory", _directory, same(error("{path} is not a file"))),
    Case(
        "data-dir-is-a-file",
        _data_dir_is_a_file,
        {
            **same(error("the data directory {dir} is not a directory")),
        },
    ),
    Case("read-only-file", _good, {**readers(RUNS), **writers(READ_ONLY)}, read_only=True),
    Case(
        "read-only-directory",
        _good,
        {**readers(RUNS), **writers(READ_ONLY)},
        read_only=True,
        directory=True,
    ),
    Case(
        "unreadable",
        _unreadable,
        same(error("cannot read the session store {path} \\(permission denied\\)")),
        unprivileged=True,
    ),
    Case(
        "newer-schema",
        _newer,
        same(
            error(
                f"{{path}} has schema version 99, newer than the {SCHEMA_VERSION} understood by "
                "this version "
                "of dsh-schedule; upgrade dsh-schedule to open it"
            )
        ),
    ),
    Case("version-1", _version_1, same(RUNS), mutable=True),
    Case("bad-payload", _bad_payload, damaged_session(BAD_PAYLOAD, in_history=True)),
    Case("seq-gap", _seq_gap, damaged_session(SEQ_GAP, in_history=True)),
    Case(
        "bad-index-row",
        _bad_index_row,
        damaged_index_row(
            "the due index row is unreadable: its schedule_ms holds text, not an integer"
        ),
        mutable=True,
    ),
    Case(
        "write-locked",
        _good,
        {
            **readers(RUNS),
            **writers(
                error(
                    r"the session store {path} is locked by another process \(SQLITE_BUSY for "
                    f"{BUSY_TIMEOUT_MS // 1000} s\\); retry once that process is done"
                )
            ),
        },
        holder="write-lock",
    ),
    Case(
        "session-held",
        _good,
        {
            **readers(RUNS),
            "chat": error(  # a library host holds it (see _SESSION_HOLDER)
                "session s1 is held by a library host \\(pid \\d+ on host [^)]+\\), which did "
                "not let it go within 0 s; retry once it has closed the session "
                "\\(--wait-for-holder SECONDS waits longer\\)"
            ),
            "demo": RUNS,
        },
        holder="session",
    ),
    Case(
        "missing-umask-000",
        _missing,
        {
            **readers(error("there is nothing to {verb} at {path} \\(no such file\\)")),
            **writers(RUNS),
        },
        mutable=True,
        umask=0o000,
    ),
    Case("shared-file", _shared_file, shared(SHARED_FILE, SHARED_FILE_FIX)),
    Case(
        "shared-file-accepted",
        _shared_file,
        {**shared(SHARED_FILE, SHARED_FILE_FIX), **writers(RUNS)},
        mutable=True,
        writer_args=("--allow-shared-store",),
    ),
    Case(
        "shared-lock-file", _shared_lock_file, shared(SHARED_LOCKS, "run chmod 600 {path}\\.locks")
    ),
    Case(
        "lock-file-of-another-user",
        _lock_file_of_another_user,
        {
            **readers(RUNS),  # reading a store of another user is no exposure
            **writers(error(f"{FOREIGN_LOCKS}; move it aside{ACCEPT}")),
        },
        root=True,
    ),
    Case("shared-directory", _shared_directory, shared(SHARED_DIR, "run chmod 700 {dir}")),
]

_SESSION_HOLDER = textwrap.dedent(
    """
    import sys
    from host_bridge.embedded.stores import SqliteEventStore
    store = SqliteEventStore(sys.argv[1], create=False)
    store.acquire_session("s1")
    assert store.flush_all().result(30) is True  # the holder is recorded
    print("held", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


@contextlib.contextmanager
def session_held(path: Path) -> Iterator[None]:
    """Another process holds session ``s1`` of the store at ``path`` meanwhile."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _SESSION_HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Every case's data directory, built once; holders run for the whole module."""
    root = tmp_path_factory.mktemp("bad-stores")
    dirs: dict[str, Path] = {}
    with contextlib.ExitStack() as holders:
        for case in CASES:
            data_dir = root / case.name / "data"
            case.build(data_dir)
            dirs[case.name] = data_dir
            if case.holder == "write-lock":
                holders.enter_context(write_locked(store_path(data_dir)))
            elif case.holder == "session":
                holders.enter_context(session_held(store_path(data_dir)))
        yield dirs
        for path in root.rglob("*"):  # let pytest clean up what the cases made unreadable
            with contextlib.suppress(OSError):
                path.chmod(0o755 if path.is_dir() else 0o644)


# --- running ---------------------------------------------------------------------------------


def command_line(command: str, location: Sequence[str]) -> list[str]:
    if command == "chat":
        return ["chat", "--session", "s1", "--wait-for-holder", "0", *location]
    if command == "demo":
        return ["demo", "--fast", *location]
    return [command, *location]


def run_demo_until_usable(args: Sequence[str], home: Path, prefix: Sequence[str]) -> Run:
    """Run demo until its first create is confirmed, then stop it (code 0: it got there)."""
    process = subprocess.Popen(
        [*prefix, sys.executable, "-m", "host_bridge.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=cli_env(home),
        cwd=REPO,
    )
    assert process.stdout is not None and process.stderr is not None
    err: list[str] = []
    drain = threading.Thread(target=lambda: err.extend(process.stderr or ()), daemon=True)
    drain.start()
    out: list[str] = []
    reached = False
    try:
        for line in process.stdout:
            out.append(line)
            if DEMO_MARKER in line:
                reached = True
                break
    finally:
        if reached:
            process.kill()
        process.wait(timeout=120)
        drain.join(timeout=30)
    return Run(0 if reached else process.returncode, "".join(out), "".join(err))


def run(command: str, location: Sequence[str], home: Path, prefix: Sequence[str] = ()) -> Run:
    args = command_line(command, location)
    if command == "demo":
        return run_demo_until_usable(args, home, prefix)
    return run_cli(args, home, stdin="/list\n", prefix=prefix)


def check(result: Run, expected: Outcome, fill: dict[str, str]) -> None:
    """Assert ``result`` is ``expected``: one line and its code, no backend text."""
    shown = f"exit {result.code}\nstdout:\n{result.out}\nstderr:\n{result.err}"
    for text in BACKEND_TEXT:
        assert text not in result.err, shown
    assert not SQLITE_TYPES.search(result.err), shown
    assert result.code == expected.code, shown
    escaped = {key: re.escape(value) for key, value in fill.items()}
    if expected.code == 2:
        assert result.err.count("\n") == 1, shown
        pattern = "Error: " + expected.line.format(**escaped)
        assert re.fullmatch(pattern, result.err.rstrip("\n")), (pattern, shown)
    elif expected.code == 1:
        lines = result.err.splitlines()
        assert len(lines) == 1, shown
        assert re.fullmatch(expected.line, lines[0]), shown
        assert expected.out in result.out, shown
    elif expected.line:
        pattern = expected.line.format(**escaped)
        assert re.fullmatch(pattern, result.err.rstrip("\n")), (pattern, shown)
    else:
        assert "Error" not in result.err, shown
        assert "warning: " not in result.err, shown


def fingerprint(data_dir: Path, *, rows: bool) -> tuple[str, frozenset[str]]:
    """What must not change when a command is refused (or only reads).

    The store's bytes, or with ``rows`` (a writing command that opened the
    store and was refused a session: SQLite rewrites pages for the holder
    record it adds and removes) its rows; and the names in the data directory,
    less the companions SQLite and the lock file may add.
    """
    path = store_path(data_dir)
    if not path.is_file() or not os.access(path, os.R_OK):
        content = "-"
    elif rows:
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                dump = "\n".join(
                    line for line in conn.iterdump() if 'INSERT INTO "leases"' not in line
                )
            finally:
                conn.close()
            content = hashlib.sha256(dump.encode()).hexdigest()
        except sqlite3.Error:
            content = hashlib.sha256(path.read_bytes()).hexdigest()
    else:
        content = hashlib.sha256(path.read_bytes()).hexdigest()
    companions = {f"{path.name}{suffix}" for suffix in ("-wal", "-shm", ".locks")}
    names = frozenset(os.listdir(data_dir)) - companions if data_dir.is_dir() else frozenset()
    return content, names


SQLITE_CELLS = [
    pytest.param(case, command, id=f"{case.name}-{command}")
    for case in CASES
    for command in COMMANDS
]


@pytest.mark.parametrize(("case", "command"), SQLITE_CELLS)
def test_every_command_on_every_bad_sqlite_store(
    built: dict[str, Path], home: Path, tmp_path: Path, case: Case, command: str
) -> None:
    expected = case.expect[command]
    if case.root and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    data_dir = built[case.name]
    if case.mutable and expected.code == 0 and command in ("chat", "demo"):
        copy = tmp_path / "data"
        if data_dir.exists():
            shutil.copytree(data_dir, copy)
        data_dir = copy
    path = store_path(data_dir)
    prefix: list[str] = []
    guarded = data_dir if case.directory else path
    if case.read_only:
        prefix = read_only_prefix(guarded)
    if case.unprivileged:
        prefix = without_file_privileges()
    if case.umask is not None:
        prefix = ["sh", "-c", f'umask {case.umask:03o} && exec "$@"', "sh"]
    writes = command in ("chat", "demo")
    before = fingerprint(data_dir, rows=writes)
    location = ["--data", str(data_dir), *(case.writer_args if writes else ())]
    try:
        result = run(command, location, home, prefix)
    finally:
        if case.read_only and os.geteuid() != 0:
            guarded.chmod(0o700 if case.directory else 0o600)
    fill = {"path": str(path), "dir": str(data_dir), "verb": VERBS.get(command, "")}
    check(result, expected, fill)
    if expected.code != 0 or not writes:
        assert fingerprint(data_dir, rows=writes) == before  # nothing of it was changed
    if case.umask is not None and writes:  # made under umask 000, private all the same
        assert {path.name, f"{path.name}.locks"} <= set(os.listdir(data_dir))
        assert modes(data_dir) == {
            ".": 0o700,
            **dict.fromkeys(sorted(os.listdir(data_dir)), 0o600),
        }


def modes(directory: Path) -> dict[str, int]:
    """The permission bits of ``directory`` (as ``"."``) and of every name in it."""
    names = [".", *sorted(os.listdir(directory))]
    return {name: stat.S_IMODE(os.stat(directory / name).st_mode) for name in names}


# --- PostgreSQL cases ------------------------------------------------------------------------


def _pg_execute(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def _pg_good(url: str) -> None:
    from host_bridge.embedded.stores import PostgresEventStore

    store = PostgresEventStore(url)
    try:
        store.acquire_session("s1")
        rows = [
            (SessionEvent(kind, seq, NOW + seq, data), encode_payload(data))
            for seq, (kind, data) in enumerate(SESSION)
        ]
        store.create_session(SessionHeader("s1"), rows)
        assert store.flush_all().result(30) is True
    finally:
        store.close()


def _pg_tables(url: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() ORDER BY table_name"
        ).fetchall()


@dataclass(frozen=True)
class PgCase:
    """One bad PostgreSQL store: how to build it in a fresh database, each command's outcome."""

    name: str
    expect: dict[str, Outcome]
    seeded: bool = False  # session s1 is stored first
    sql: tuple[str, ...] = ()  # then these statements run
    leased: bool = False
    unreachable: bool = False

    def build(self, url: str) -> None:
        """Make this case in the fresh database at ``url``."""
        if self.seeded:
            _pg_good(url)
        _pg_execute(url, *self.sql)


UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nothing"

PG_CASES = [
    PgCase(
        "pg-empty-database",
        {
            **readers(
                error(
                    "there is nothing to {verb} at {url} \\(the database has none of its tables\\)"
                )
            ),
            **writers(RUNS),
        },
    ),
    PgCase(
        "pg-foreign",
        same(error("{url} has tables \\['sessions'\\] but is not a dsh-schedule store")),
        sql=("CREATE TABLE sessions(name TEXT)",),
    ),
    PgCase(
        "pg-newer-schema",
        same(
            error(
                f"{{url}} has schema version 99, newer than the {PG_SCHEMA_VERSION} understood by "
                "this version of "
                "dsh-schedule; upgrade dsh-schedule to open it"
            )
        ),
        seeded=True,
        sql=("UPDATE meta SET value = '99' WHERE key = 'schema_version'",),
    ),
    PgCase(
        "pg-unreachable",
        same(error("cannot connect to the session store {url} \\(OperationalError\\)")),
        unreachable=True,
    ),
    PgCase(
        "pg-bad-payload",
        damaged_session(BAD_PAYLOAD, in_history=True),
        seeded=True,
        sql=("UPDATE events SET data = '\\xc1ff'::bytea WHERE session_id = 's1' AND seq = 1",),
    ),
    PgCase(
        "pg-bad-index-row",
        damaged_index_row(
            "the due index row is inconsistent: its due_ms says 9999-12-31T23:59:59.999Z, its "
            "schedule_ms and inbox_ms say 2027-01-15T08:01:00.000Z"
        ),
        seeded=True,
        sql=("UPDATE due_index SET due_ms = 253402300799999 WHERE session_id = 's1'",),
    ),
    PgCase(
        "pg-session-leased",
        {
            **readers(RUNS),
            "chat": error(  # the test's own store holds it, a library host
                "session s1 is held by a library host \\(pid \\d+ on host [^)]+\\), which did "
                "not let it go within 0 s; retry once it has closed the session "
                "\\(--wait-for-holder SECONDS waits longer\\)"
            ),
            "demo": RUNS,
        },
        seeded=True,
        leased=True,
    ),
]

PG_CELLS = [
    pytest.param(case, command, id=f"{case.name}-{command}")
    for case in PG_CASES
    for command in COMMANDS
]


@pytest.mark.parametrize(("case", "command"), PG_CELLS)
def test_every_command_on_every_bad_postgres_store(
    pg_url: str, home: Path, tmp_path: Path, case: PgCase, command: str
) -> None:
    url = UNREACHABLE if case.unreachable else pg_url
    if not case.unreachable:
        case.build(url)
    before = None if case.unreachable else _pg_tables(url)
    with contextlib.ExitStack() as stack:
        if case.leased:
            from host_bridge.embedded.stores import PostgresEventStore

            holder = PostgresEventStore(url)
            stack.callback(holder.close)
            holder.acquire_session("s1")
        location = ["--store", url, "--data", str(tmp_path / "data")]
        result = run(command, location, home)
    expected = case.expect[command]
    fill = {"url": url, "verb": VERBS.get(command, "")}
    check(result, expected, fill)
    if expected.code != 0 and before is not None:
        assert _pg_tables(url) == before  # no schema was created or migrated


# --- catalog, shutdown, and errors that escape a command --------------------------------------


def test_catalog_uses_no_store_so_no_bad_store_stops_it(built: dict[str, Path], home: Path) -> None:
    plain = run_cli(["catalog"], home)
    assert plain.code == 0
    for location in (
        ["--data", str(built["garbage"])],
        ["--data", str(built["directory"])],
        ["--data", str(built["write-locked"])],
        ["--store", UNREACHABLE],
    ):
        result = run_cli(["catalog", *location], home)
        assert (result.code, result.out, result.err) == (0, plain.out, ""), location


_STUCK_DISK = textwrap.dedent(
    """
    import dataclasses, sys, threading
    import host_bridge.cli._common as common
    from host_bridge.cli import main
    from host_bridge.embedded.host import EmbeddedHost

    class StuckDiskHost(EmbeddedHost):
        # Every commit of rows hangs, as on a disk that stopped answering.
        def __init__(self, *args, **kwargs):
            super().__init__(*args, close_timeout=0, **kwargs)
            self.persistence.fault_hook = threading.Event().wait

        def context(self):
            return dataclasses.replace(super().context(), flush_timeout_ms=200)

    common.EmbeddedHost = StuckDiskHost
    main(sys.argv[1:])
    """
)


def test_a_disk_stuck_at_shutdown_ends_chat_in_one_line_and_exit_2(
    data_dir: Path, home: Path
) -> None:
    """Regression: host.close() hung while a commit was blocked (still blocked after 20 s)."""
    write_session(data_dir, "s1", [message("hi")])
    path = store_path(data_dir)
    done = subprocess.run(
        [sys.executable, "-c", _STUCK_DISK, "chat", "--session", "s1", "--data", str(data_dir)],
        input="/create 60 hi\n/quit\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(home),
        cwd=REPO,
        check=False,
    )
    result = Run(done.returncode, done.stdout, done.stderr)
    check(
        result,
        error(
            "{path}: closing the session store timed out after 0 s: its writer did not finish "
            "the last write \\(a stuck disk or database\\?\\); 1 unflushed rows of sessions "
            "'s1' are not confirmed durable"
        ),
        {"path": str(path)},
    )
    assert "error persistence_uncertain (create)" in result.out
    bye = next(line for line in result.out.splitlines() if line.startswith("bye: "))
    assert "pending reminders unknown (error persistence_uncertain (list)" in bye


def test_errors_that_escape_a_command_end_in_one_line() -> None:
    """The group turns store errors into exit 2 and anything unexpected into exit 1."""

    @click.command("corrupt")
    def corrupt() -> None:
        raise StoreCorruptError("session 'x\ny' is broken")

    @click.command("boom")
    def boom() -> None:
        raise RuntimeError("unexpected\nstate")

    group = type(cli)(name="dsh-schedule", commands={"corrupt": corrupt, "boom": boom})
    runner = CliRunner()
    store_error = runner.invoke(group, ["corrupt"])
    assert store_error.exit_code == 2
    assert store_error.output == "Error: session 'x\\ny' is broken\n"
    internal = runner.invoke(group, ["boom"])
    assert internal.exit_code == 1
    assert internal.output == (
        "Error: internal error (RuntimeError: unexpected\\nstate); -v logs the traceback\n"
    )


def test_an_internal_error_of_a_driver_names_its_class_not_its_text() -> None:
    """A driver's message can quote the connection string; Python's and ours are shown."""

    @click.command("driver")
    def driver() -> None:
        raise sqlite3.OperationalError('missing "=" after "s3cret" in connection info string')

    group = type(cli)(name="dsh-schedule", commands={"driver": driver})
    result = CliRunner().invoke(group, ["driver"])
    assert result.exit_code == 1
    assert result.output == (
        "Error: internal error (sqlite3.OperationalError); -v logs the traceback\n"
    )


def _with_password(url: str) -> str:
    parts = urlsplit(url)
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit((parts.scheme, f"{user}:s3cret@{host}", parts.path, parts.query, ""))


def test_chat_on_postgres_hints_the_store_without_its_password(
    pg_url: str, data_dir: Path, home: Path
) -> None:
    secret_url = _with_password(pg_url)
    first = run_cli(
        ["--store", secret_url, "chat", "--session", "s1", "--data", str(data_dir)],
        home,
        stdin="/create 3600 hi\n/quit\n",
    )
    assert first.code == 0, first.err
    assert "created schedule-1" in first.out
    bye = next(line for line in first.out.splitlines() if line.startswith("bye: "))
    assert f"resume with: dsh-schedule chat --session s1 --data {data_dir} --store {pg_url}" in bye
    assert "s3cret" not in first.out + first.err
    again = run_cli(
        ["chat", "--session", "s1", "--store", pg_url, "--data", str(data_dir)],
        home,
        stdin="/list\n",
    )
    assert again.code == 0, again.err
    assert "schedule-1  after 3600s  scheduled" in again.out
