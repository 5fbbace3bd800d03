"""The command group itself: help everywhere, version, usage errors, logging, both entry points."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from host_bridge.cli import cli
from tests.cli.helpers import STORE_COMMANDS, run_cli, without_file_privileges, write_session

COMMANDS = ["demo", "chat", "inspect", "verify", "catalog"]


def test_group_help_lists_commands_exit_codes_and_data_dir(home: Path) -> None:
    run = run_cli(["--help"], home)
    assert run.code == 0
    for command in COMMANDS:
        assert f"  {command} " in run.out
    assert "Exit codes (" in run.out
    assert "2  usage error" in run.out
    assert "DSH_SCHEDULE_HOME" in run.out


EXIT_CODES = {
    "demo": ["0  every step happened", "1  a step did not happen", "2  usage error"],
    "chat": ["0  the shell ended", "1  an internal error", "2  usage error"],
    "inspect": ["0  every listed session was read", "1  a session's rows", "2  usage error"],
    "verify": ["0  every stored session is valid", "1  at least one session", "2  usage error"],
    "catalog": ["0  the catalog was printed", "2  usage error"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_location_options_and_its_own_exit_codes(
    home: Path, command: str
) -> None:
    """Regression: every command repeated the group's table (chat said "0 success (verify: …)")."""
    run = run_cli([command, "--help"], home)
    assert run.code == 0, run.err
    assert f"Usage: dsh-schedule {command}" in run.out
    assert "--data DIR" in run.out
    assert "--store URL|PATH" in run.out
    block = run.out.split("Exit codes:", 1)[1]
    codes = [line.strip() for line in block.splitlines() if line[:5].strip().isdigit()]
    assert [code[:1] for code in codes] == [row[:1] for row in EXIT_CODES[command]]
    for code, expected in zip(codes, EXIT_CODES[command], strict=True):
        assert code.startswith(expected), (code, expected)
    others = {"verify", "inspect", "demo", "chat"} - {command}
    assert not any(f"({other}:" in block for other in others)


def test_the_installed_script_is_the_same_command(home: Path) -> None:
    run = run_cli(["--help"], home, script=True)
    assert run.code == 0
    assert "Usage: dsh-schedule" in run.out


def test_version(home: Path) -> None:
    run = run_cli(["--version"], home)
    assert run.code == 0
    assert "dsh-schedule, version 0.1.0" in run.out


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["frobnicate"], "No such command"),
        (["inspect", "--bogus"], "No such option"),
        (["catalog", "--format", "xml"], "'xml' is not one of"),
        (["chat", "--session", ""], "--session"),
        (["chat", "--session", " padded "], "--session"),
        (["demo", "--fast", "extra"], "unexpected extra argument"),
    ],
)
def test_usage_errors_exit_2_with_a_clear_message(home: Path, args: list[str], hint: str) -> None:
    run = run_cli(args, home)
    assert run.code == 2
    assert hint in run.err
    assert "Traceback" not in run.err


def test_data_must_not_be_a_file(home: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "plain-file"
    a_file.write_text("not a directory")
    run = run_cli(["verify", "--data", str(a_file)], home)
    assert run.code == 2
    assert run.err == f"Error: the data directory {a_file} is not a directory\n"


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    """A directory (holding ``inner/``) that nobody may list or search (mode 000)."""
    directory = tmp_path / "locked"
    (directory / "inner").mkdir(parents=True)
    directory.chmod(0)
    yield directory
    directory.chmod(0o700)


@pytest.mark.parametrize("inside", [False, True], ids=["unsearchable", "below-unsearchable"])
@pytest.mark.parametrize("command", STORE_COMMANDS, ids=lambda command: command[0])
def test_an_unreadable_data_dir_is_one_error_line_and_exit_2(
    home: Path, locked: Path, command: list[str], inside: bool
) -> None:
    """Regression: click's four-line usage error, or an internal error (exit 1) below it."""
    data = locked / "inner" if inside else locked
    run = run_cli([*command, "--data", str(data)], home, prefix=without_file_privileges())
    assert run.code == 2
    assert run.err == f"Error: the data directory {data} cannot be read (permission denied)\n"
    assert run.out == ""


def test_an_unreadable_data_dir_before_the_command_or_from_the_environment(
    home: Path, locked: Path
) -> None:
    prefix = without_file_privileges()
    expected = f"Error: the data directory {locked} cannot be read (permission denied)\n"
    before = run_cli(["--data", str(locked), "verify"], home, prefix=prefix)
    assert (before.code, before.err) == (2, expected)
    from_env = run_cli(["verify"], locked, prefix=prefix)
    assert (from_env.code, from_env.err) == (2, expected)


def test_catalog_ignores_an_unreadable_data_dir(home: Path, locked: Path) -> None:
    run = run_cli(["catalog", "--data", str(locked)], home, prefix=without_file_privileges())
    assert run.code == 0, run.err
    assert '"catalog": "dsh-tool-schedule"' in run.out


@pytest.mark.parametrize("command", [["chat", "--session", "s1"], ["reindex"]], ids=str)
def test_a_store_below_an_unsearchable_directory_is_one_error_line(
    home: Path, locked: Path, command: list[str]
) -> None:
    """Regression: the writing commands stopped with an internal error (PermissionError)."""
    store = locked / "inner" / "sessions.sqlite3"
    run = run_cli([*command, "--store", str(store)], home, prefix=without_file_privileges())
    assert run.code == 2
    assert run.err == f"Error: cannot read the session store {store} (Permission denied)\n"


def test_a_data_dir_with_a_nul_character_is_one_error_line() -> None:
    """A NUL cannot come through argv; through ``main``'s arguments it stopped click's parsing."""
    result = CliRunner().invoke(cli, ["verify", "--data", "bad\0dir"])
    assert result.exit_code == 2
    assert result.output == (
        "Error: the data directory bad\\x00dir is not a valid path (it contains a NUL character)\n"
    )


def test_quiet_by_default_and_verbose_logs_to_stderr(home: Path, data_dir: Path) -> None:
    write_session(data_dir, "s", [])
    quiet = run_cli(["verify", "--data", str(data_dir)], home)
    assert quiet.code == 0
    assert quiet.err == ""
    loud = run_cli(["-vv", "verify", "--data", str(data_dir)], home)
    assert loud.code == 0
    assert "DEBUG dsh_schedule.host_bridge.embedded.stores" in loud.err
    assert loud.out == quiet.out


def test_without_data_the_default_dir_from_the_environment_is_used(tmp_path: Path) -> None:
    default_home = tmp_path / "from-env"
    write_session(default_home, "from-env-session", [])
    run = run_cli(["verify"], default_home)
    assert run.code == 0
    assert str(default_home / "sessions.sqlite3") in run.out
    assert "from-env-session" in run.out


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "--data", "{data}"],
        ["--data", "{data}", "verify"],
        ["--data", "{elsewhere}", "verify", "--data", "{data}"],  # the command's value wins
        ["verify", "--store", "{store}"],
        ["--store", "{store}", "verify"],
        ["--store", "{elsewhere}/nope.sqlite3", "verify", "--store", "{store}"],
        ["--store", "{store}", "verify", "--data", "{elsewhere}"],  # --store names the store
    ],
    ids=[
        "data-after",
        "data-before",
        "data-both",
        "store-after",
        "store-before",
        "store-both",
        "store-and-data",
    ],
)
def test_data_and_store_work_before_and_after_the_command(
    home: Path, tmp_path: Path, args: list[str]
) -> None:
    """Regression: --store worked only before the command name and --data only after it."""
    data = tmp_path / "data"
    write_session(data, "here", [])
    store = data / "sessions.sqlite3"
    elsewhere = tmp_path / "elsewhere"
    values = {"data": str(data), "store": str(store), "elsewhere": str(elsewhere)}
    run = run_cli([arg.format(**values) for arg in args], home)
    assert run.code == 0, run.err
    assert f"store: {store}" in run.out
    assert "ok       here" in run.out
    assert not elsewhere.exists()


def test_the_store_environment_variable_yields_to_the_option(home: Path, tmp_path: Path) -> None:
    write_session(tmp_path / "a", "from-env", [])
    write_session(tmp_path / "b", "from-option", [])
    env = {"DSH_SCHEDULE_STORE": str(tmp_path / "a" / "sessions.sqlite3")}
    assert "from-env" in run_cli(["verify"], home, env=env).out
    run = run_cli(["verify", "--store", str(tmp_path / "b" / "sessions.sqlite3")], home, env=env)
    assert "from-option" in run.out and "from-env" not in run.out


def test_the_chat_resume_hint_names_the_store_it_used(home: Path, tmp_path: Path) -> None:
    store = tmp_path / "elsewhere" / "my store.sqlite3"
    store.parent.mkdir()
    run = run_cli(
        ["chat", "--session", "s 1", "--store", str(store)], home, stdin="/create 3600 hi\n"
    )
    assert run.code == 0, run.err
    assert f"resume with: dsh-schedule chat --session 's 1' --store '{store}'" in run.out
    again = run_cli(["--store", str(store), "chat", "--session", "s 1"], home, stdin="/quit\n")
    assert "session s 1: resumed" in again.out
