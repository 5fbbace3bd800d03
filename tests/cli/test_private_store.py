"""Private stores through the real entry point: what the commands create, and what they refuse.

Regression for "other local users can read every prompt and block every
session": outside a private home (``$XDG_DATA_HOME`` in a 0755 directory) the
store was created 0644 in a 0755 directory, so any local user could read it
and hold a read lock in ``sessions.sqlite3.locks``. The modes and owners below
are the ones the commands check; only the ``nobody`` test asks the kernel.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from host_bridge.embedded.paths import APP_DIR_NAME, store_path
from tests.cli.helpers import REPO, assert_one_line_error, cli_env, message, run_cli, write_session

TIMEOUT = 60.0


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A directory every local user may enter and list (0755), like a shared ``XDG_DATA_HOME``."""
    path = Path(tempfile.mkdtemp(prefix="dsh-open-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def xdg_env(home: Path, xdg: Path) -> dict[str, str]:
    """The environment of a command using its default data directory under ``xdg``."""
    env = cli_env(home)
    env["DSH_SCHEDULE_HOME"] = ""  # empty: not set
    env["XDG_DATA_HOME"] = str(xdg)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def chat_until_created(env: dict[str, str], umask: int) -> tuple[dict[str, int], int]:
    """Run chat, create a reminder and, while chat still has the store open, read the modes.

    Returns the modes of the data directory's files then, and chat's exit code.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "host_bridge.cli", "chat", "--session", "s1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=REPO,
        umask=umask,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write("/create 3600 stretch\n")
        process.stdin.flush()
        for line in process.stdout:
            if "created schedule-1" in line:
                break
        data_dir = Path(env["XDG_DATA_HOME"]) / APP_DIR_NAME
        open_modes = {path.name: mode(path) for path in data_dir.iterdir()}
        process.stdin.write("/quit\n")
        process.stdin.close()
        process.stdout.read()
    finally:
        code = process.wait(timeout=TIMEOUT)
    return open_modes, code


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_chat_creates_a_private_store_in_an_open_xdg_data_home(
    home: Path, open_parent: Path, umask: int
) -> None:
    xdg = open_parent / "xdg"
    xdg.mkdir()
    xdg.chmod(0o755)
    open_modes, code = chat_until_created(xdg_env(home, xdg), umask)
    assert code == 0
    assert open_modes == {
        "sessions.sqlite3": 0o600,
        "sessions.sqlite3-wal": 0o600,
        "sessions.sqlite3-shm": 0o600,
        "sessions.sqlite3.locks": 0o600,
    }
    data_dir = xdg / APP_DIR_NAME
    assert mode(data_dir) == 0o700
    assert {path.name: mode(path) for path in data_dir.iterdir()} == {
        "sessions.sqlite3": 0o600,
        "sessions.sqlite3.locks": 0o600,
    }
    assert mode(xdg) == 0o755  # a directory that was there is not changed


_ANOTHER_USER = textwrap.dedent(
    """
    import fcntl, os, sys
    for path in sys.argv[1:]:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as error:
            print(path, "refused", error.errno)
        else:
            if path.endswith(".locks"):  # the read lock that blocked every session
                fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 1)
            print(path, "opened")
    """
)


def test_another_local_user_can_neither_read_the_store_nor_lock_its_sessions(
    home: Path, open_parent: Path
) -> None:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("acting as another local user needs root and runuser")
    xdg = open_parent / "xdg"
    xdg.mkdir()
    xdg.chmod(0o755)
    done = run_cli(
        ["chat", "--session", "s1"],
        home,
        stdin="/create 3600 a secret\n/quit\n",
        env=xdg_env(home, xdg),
    )
    assert done.code == 0, done.err
    db = store_path(xdg / APP_DIR_NAME)
    targets = [str(db), f"{db}.locks"]
    # A system interpreter: ours may live where nobody may go (the script needs only stdlib).
    python = shutil.which("python3", path=os.defpath) or str(Path(sys.executable).resolve())
    nobody = subprocess.run(
        ["runuser", "-u", "nobody", "--", python, "-c", _ANOTHER_USER, *targets],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    if "failed to execute" in nobody.stderr:
        pytest.skip(f"nobody may not run {python}")
    assert nobody.returncode == 0, nobody.stderr
    assert nobody.stdout.splitlines() == [f"{target} refused 13" for target in targets]  # EACCES


@pytest.mark.parametrize(
    "command",
    [["chat", "--session", "s1"], ["reindex"]],
    ids=["chat", "reindex"],
)
def test_a_writing_command_refuses_a_store_open_to_others_and_accepts_it_with_the_flag(
    data_dir: Path, home: Path, command: list[str]
) -> None:
    write_session(data_dir, "s1", [message("hi")])
    db = store_path(data_dir)
    db.chmod(0o644)
    before = db.read_bytes()
    refused = run_cli([*command, "--data", str(data_dir)], home, stdin="/list\n")
    assert refused.err == (
        f"Error: the session store file {db} (mode 0644) is accessible to other local users; "
        f"run chmod 600 {db}, or pass --allow-shared-store to accept it\n"
    )
    assert_one_line_error(refused, 2)
    assert db.read_bytes() == before
    assert sorted(os.listdir(data_dir)) == ["sessions.sqlite3", "sessions.sqlite3.locks"]
    assert mode(db) == 0o644
    accepted = run_cli(
        [*command, "--data", str(data_dir), "--allow-shared-store"], home, stdin="/list\n"
    )
    assert accepted.code == 0, accepted.err
    assert accepted.err == ""
    assert mode(db) == 0o644  # accepted as it is


def test_the_readers_read_a_store_open_to_others_after_one_warning(
    data_dir: Path, home: Path
) -> None:
    write_session(data_dir, "s1", [message("hi")])
    data_dir.chmod(0o777)
    for command in ("inspect", "verify"):
        result = run_cli([command, "--data", str(data_dir)], home)
        assert result.code == 0, result.err
        assert result.err == (
            f"warning: the directory {data_dir} of the session store is writable by other "
            f"users (mode 0777); run chmod 700 {data_dir}\n"
        )
        assert "s1" in result.out
