"""``dsh-schedule serve --turn-runner``: the host's own async turn runs each woken reminder.

Real subprocesses on a real store; waits are on output lines, never on sleeps.
The runner module is written into the test's directory and found on
``PYTHONPATH``, as an operator's package would be.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from host_bridge.cli._serve import EXIT_CUT
from host_bridge.embedded.inbox import INBOX_EVENT, queued_data
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import TextBlock, UserMessage, wall_clock_ms
from tests.cli.helpers import Proc, assert_one_line_error, create, run_cli, write_session
from tests.cli.test_serve import delivery_counts, due_sessions

RUNNER = textwrap.dedent(
    '''
    """A host's turn runner: notes each turn in a file, replies, or hangs when told to."""
    import asyncio, json, os, sys

    async def run_turn(turn):
        with open(os.environ["RUNNER_NOTES"], "a", encoding="utf-8") as notes:
            notes.write(json.dumps([turn.session_id, turn.is_reminder]) + "\\n")
        if os.environ.get("RUNNER_HANGS") and (turn.is_reminder or os.environ.get("HANG_ALL")):
            print("runner: turn started", flush=True)
            await asyncio.Event().wait()
        listed = await turn.call_tool("schedule_list", {})
        return "handled; listed " + str(len(json.loads(listed.content)["schedules"]))

    def not_async(turn):
        return None

    async def broken(turn):
        print("runner: failing", flush=True)
        raise ValueError("secret-text of the runner")
    '''
)


@pytest.fixture
def runner_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "hostbot.py").write_text(RUNNER, "utf-8")
    (folder / "badmod.py").write_text('raise RuntimeError("password=hunter2")\n', "utf-8")
    return folder


def serve_with_runner(
    procs: list[Proc],
    data_dir: Path,
    home: Path,
    runner_dir: Path,
    *extra: str,
    hangs: bool = False,
    runner: str = "hostbot:run_turn",
    env: dict[str, str] | None = None,
) -> Proc:
    environment = {"PYTHONPATH": str(runner_dir), "RUNNER_NOTES": str(runner_dir / "notes.jsonl")}
    if hangs:
        environment["RUNNER_HANGS"] = "1"
    environment.update(env or {})
    args = ["-m", "host_bridge.cli", "serve", "--data", str(data_dir)]
    proc = Proc([*args, "--turn-runner", runner, *extra], home, environment)
    procs.append(proc)
    proc.wait_line("serving ")
    return proc


def notes(runner_dir: Path) -> list[list[object]]:
    lines = (runner_dir / "notes.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def replies(data_dir: Path, session_id: str) -> list[str]:
    store = SqliteEventStore(store_path(data_dir), create=False)
    try:
        stored = store.load(session_id)
    finally:
        store.close()
    assert stored is not None
    return [
        e.data["content"]
        for e in stored.events
        if e.type == "message" and e.data.get("role") == "assistant" and "content" in e.data
    ]


def test_serve_runs_the_reminder_turns_of_closed_sessions_with_the_hosts_runner(
    data_dir: Path, home: Path, procs: list[Proc], runner_dir: Path
) -> None:
    ids = due_sessions(data_dir, 2)
    proc = serve_with_runner(procs, data_dir, home, runner_dir)
    seen = {proc.wait_line("reminder schedule-1 of session"), proc.wait_line("reminder schedule-1")}
    assert {line.split(" of session ")[1].split(" ")[0] for line in seen} == set(ids)
    assert proc.stop() == 0
    assert proc.out[-1] == "stopped; 2 reminder(s) presented"
    assert sorted(notes(runner_dir)) == [[session_id, True] for session_id in ids]
    assert delivery_counts(data_dir) == {session_id: (1, 1, 1) for session_id in ids}
    for session_id in ids:  # the runner's reply is the turn's, and its tool call was the agent's
        assert replies(data_dir, session_id) == ["handled; listed 0"]


def test_a_runner_turn_cut_by_a_stop_is_run_again_at_the_next_start(
    data_dir: Path, home: Path, procs: list[Proc], runner_dir: Path
) -> None:
    (session_id,) = due_sessions(data_dir, 1)
    proc = serve_with_runner(procs, data_dir, home, runner_dir, "--stop-timeout", "0.2", hangs=True)
    proc.wait_line("runner: turn started")
    assert proc.stop() == EXIT_CUT
    assert any("will be presented again at the next start" in line for line in proc.err)
    assert delivery_counts(data_dir, owed=True) == {session_id: (1, 1, 0)}

    again = serve_with_runner(procs, data_dir, home, runner_dir)
    again.wait_line("reminder schedule-1 of session")
    assert again.stop() == 0
    assert notes(runner_dir) == [[session_id, True], [session_id, True]]  # presented once more
    assert delivery_counts(data_dir) == {session_id: (1, 1, 1)}


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("hostbot", "is not of the form MODULE:ATTR"),
        ("no_such_module_here:run", "cannot be imported"),
        ("hostbot:missing", "has no attribute 'missing'"),
        ("hostbot:not_async", "is not an async function"),
        ("badmod:run", "raised RuntimeError while being imported"),
    ],
)
def test_a_turn_runner_that_cannot_be_loaded_is_a_one_line_usage_error(
    data_dir: Path, home: Path, runner_dir: Path, path: str, says: str
) -> None:
    run = run_cli(
        ["serve", "--data", str(data_dir), "--turn-runner", path],
        home,
        env={"PYTHONPATH": str(runner_dir)},
    )
    assert_one_line_error(run, 2, "--turn-runner", says)
    assert "hunter2" not in run.err + run.out  # the module's exception text stays out
    assert not data_dir.exists()


def test_a_turn_runner_and_a_notify_command_cannot_be_combined(
    data_dir: Path, home: Path, runner_dir: Path
) -> None:
    run = run_cli(
        [
            *("serve", "--data", str(data_dir)),
            *("--turn-runner", "hostbot:run_turn", "--notify-command", "cat"),
        ],
        home,
        env={"PYTHONPATH": str(runner_dir)},
    )
    assert_one_line_error(run, 2, "cannot be combined")


def test_a_runner_that_raises_is_reported_in_one_line_without_its_text(
    data_dir: Path, home: Path, procs: list[Proc], runner_dir: Path
) -> None:
    (session_id,) = due_sessions(data_dir, 1)
    proc = serve_with_runner(procs, data_dir, home, runner_dir, runner="hostbot:broken")
    proc.wait_line("runner: failing")
    assert proc.stop() == 0
    errors = "\n".join(proc.err)
    assert (
        f"the turn runner failed (ValueError) in session {session_id} presenting reminder "
        "schedule-1; the turn is recorded as failed and not run again"
    ) in errors
    assert "secret-text" not in errors
    assert delivery_counts(data_dir) == {session_id: (1, 1, 1)}  # completed, as failed


def test_a_cut_turn_that_is_not_a_reminders_is_named_and_runs_again(
    data_dir: Path, home: Path, procs: list[Proc], runner_dir: Path
) -> None:
    write_session(  # a person's message whose turn never completed, and a reminder due now
        data_dir,
        "chat",
        [
            (INBOX_EVENT, queued_data(UserMessage((TextBlock("hello"),), {"kind": "user"}))),
            create("schedule-1", "stretch", 1, wall_clock_ms() - 1000),
        ],
    )
    proc = serve_with_runner(
        procs,
        data_dir,
        home,
        runner_dir,
        "--stop-timeout",
        "0.2",
        hangs=True,
        env={"HANG_ALL": "1"},
    )
    proc.wait_line("runner: turn started")  # the person's message runs first
    assert proc.stop() == EXIT_CUT
    assert any(
        "cut: a turn of session chat (not a reminder's) will run again" in line for line in proc.err
    )
