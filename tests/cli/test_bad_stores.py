"""A store the command cannot use ends in one ``Error:`` line on stderr and exit code 2.

Through the real entry point: unreadable session rows, a gap in the seq
numbers, a read-only store file, a store locked by another process, a session
live in another process (PostgreSQL). Nothing is written to a store that was
refused, and no command prints a traceback.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import click
import pytest
from click.testing import CliRunner

from host_bridge.cli import cli
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.sqlite_store import StoreCorruptError
from tests.cli.helpers import (
    assert_one_line_error,
    create,
    message,
    run_cli,
    write_locked,
    write_session,
)

NOW = 1_800_000_000_000


def digest(path: Path) -> str:
    """A digest of every row in the store (the file's bytes may change when it is opened)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    return hashlib.sha256(dump.encode()).hexdigest()


def _unreadable_payload(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET data = x'c1ff' WHERE session_id = 's1' AND seq = 1")


def _gap(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM events WHERE session_id = 's1' AND seq = 1")


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (_unreadable_payload, "session 's1' has an unreadable payload at seq 1"),
        (_gap, "session 's1' has no event with seq 1"),
    ],
    ids=["unreadable-payload", "seq-gap"],
)
def test_chat_on_a_damaged_session_exits_2_in_one_line_and_writes_nothing(
    data_dir: Path, home: Path, damage: object, says: str
) -> None:
    write_session(
        data_dir, "s1", [message("hi"), create("schedule-1", "p", 60, NOW), message("bye")]
    )
    path = store_path(data_dir)
    assert callable(damage)
    damage(path)
    before = digest(path)
    run = run_cli(["chat", "--session", "s1", "--data", str(data_dir)], home, stdin="/list\n")
    assert_one_line_error(run, 2, says)
    assert len(run.err.splitlines()) == 1
    assert digest(path) == before
    # The other commands report the same session as a finding, not a crash.
    verify = run_cli(["verify", "--data", str(data_dir)], home)
    assert verify.code == 1 and f"INVALID  s1: store: {says}" in verify.out
    inspect = run_cli(["inspect", "--data", str(data_dir)], home)
    assert inspect.code == 1 and "Traceback" not in inspect.err


@pytest.mark.parametrize("command", [["chat", "--session", "s1"], ["demo", "--fast"]])
def test_chat_and_demo_on_a_read_only_store_exit_2_in_one_line(
    data_dir: Path, home: Path, command: list[str]
) -> None:
    write_session(data_dir, "s1", [message("hi")])
    path = store_path(data_dir)
    before = digest(path)
    run = run_cli(
        [*command, "--data", str(data_dir)], home, stdin="/create 60 hi\n", read_only=path
    )
    assert_one_line_error(run, 2, f"the session store {path} is read-only")
    assert len(run.err.splitlines()) == 1
    assert digest(path) == before
    path.chmod(0o644)


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_inspect_and_verify_read_a_read_only_store(
    data_dir: Path, home: Path, command: str
) -> None:
    write_session(data_dir, "s1", [message("hi")])
    path = store_path(data_dir)
    run = run_cli([command, "--data", str(data_dir)], home, read_only=path)
    assert run.code == 0, run.err
    assert "s1" in run.out
    path.chmod(0o644)


def test_a_store_locked_by_another_process_ends_chat_with_exit_2_naming_what_was_lost(
    data_dir: Path, home: Path
) -> None:
    """Regression: ``host.close()`` raised ``StoreWriteError`` over the chat's own output."""
    write_session(data_dir, "other", [])
    path = store_path(data_dir)
    with write_locked(path):
        run = run_cli(["chat", "--session", "new", "--data", str(data_dir)], home, stdin="/quit\n")
    last = assert_one_line_error(run, 2, str(path), "could not write", "not durable")
    assert "SQLITE_BUSY" in last
    # The final list failed too: the goodbye says so instead of "no reminders pending".
    bye = next(line for line in run.out.splitlines() if line.startswith("bye: "))
    assert "no reminders pending" not in bye
    assert "pending reminders unknown (error persistence_uncertain (list)" in bye
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT id FROM sessions ORDER BY id").fetchall() == [("other",)]


def test_a_missing_store_is_created_by_chat_and_refused_by_inspect(
    data_dir: Path, home: Path
) -> None:
    refused = run_cli(["inspect", "--data", str(data_dir)], home)
    assert_one_line_error(refused, 2, "there is nothing to inspect at")
    chat = run_cli(["chat", "--data", str(data_dir)], home, stdin="/quit\n")
    assert chat.code == 0, chat.err
    assert store_path(data_dir).exists()


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


def _with_password(url: str) -> str:
    parts = urlsplit(url)
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit((parts.scheme, f"{user}:s3cret@{host}", parts.path, parts.query, ""))


def test_chat_on_postgres_hints_the_store_and_refuses_a_session_live_elsewhere(
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

    holder = EmbeddedHost(data_dir / "holder", store=pg_url)
    try:
        holder.sessions.open("s1")  # live here: its lease is held by this process
        refused = run_cli(
            ["chat", "--session", "s1", "--store", pg_url, "--data", str(data_dir)],
            home,
            stdin="/list\n",
        )
    finally:
        assert holder.close() is None
    assert_one_line_error(refused, 2, "s1", "live in another process")
    again = run_cli(
        ["chat", "--session", "s1", "--store", pg_url, "--data", str(data_dir)],
        home,
        stdin="/list\n",
    )
    assert again.code == 0, again.err
    assert "schedule-1  after 3600s  scheduled" in again.out
