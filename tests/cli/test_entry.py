"""The command group itself: help everywhere, version, usage errors, logging, both entry points."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import run_cli, write_session

COMMANDS = ["demo", "chat", "inspect", "verify", "catalog"]


def test_group_help_lists_commands_exit_codes_and_data_dir(home: Path) -> None:
    run = run_cli(["--help"], home)
    assert run.code == 0
    for command in COMMANDS:
        assert f"  {command} " in run.out
    assert "Exit codes:" in run.out
    assert "2  usage error" in run.out
    assert "DSH_SCHEDULE_HOME" in run.out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_data_option_and_exit_codes(home: Path, command: str) -> None:
    run = run_cli([command, "--help"], home)
    assert run.code == 0, run.err
    assert f"Usage: dsh-schedule {command}" in run.out
    assert "--data DIR" in run.out
    assert "Exit codes:" in run.out


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
    assert "is a file" in run.err


def test_quiet_by_default_and_verbose_logs_to_stderr(home: Path, data_dir: Path) -> None:
    write_session(data_dir, "s", [])
    quiet = run_cli(["verify", "--data", str(data_dir)], home)
    assert quiet.code == 0
    assert quiet.err == ""
    loud = run_cli(["-vv", "verify", "--data", str(data_dir)], home)
    assert loud.code == 0
    assert "DEBUG dsh_schedule.store" in loud.err
    assert loud.out == quiet.out


def test_without_data_the_default_dir_from_the_environment_is_used(tmp_path: Path) -> None:
    default_home = tmp_path / "from-env"
    write_session(default_home, "from-env-session", [])
    run = run_cli(["verify"], default_home)
    assert run.code == 0
    assert str(default_home / "sessions.sqlite3") in run.out
    assert "from-env-session" in run.out
