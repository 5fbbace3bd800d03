"""docs/examples/asyncio_host.py: its reminder survives a restart and reaches a closed chat."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import REPO, TIMEOUT, Proc
from tests.cli.test_serve import delivery_counts

EXAMPLE = REPO / "docs" / "examples" / "asyncio_host.py"


def run_example(data_dir: Path, *text: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(data_dir), *text],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_example_is_at_most_forty_lines() -> None:
    assert len(EXAMPLE.read_text("utf-8").splitlines()) <= 40


def test_the_reminder_set_in_one_run_is_presented_by_the_next_once(tmp_path: Path) -> None:
    created = run_example(tmp_path, "remind 1 stretch")
    assert '"state":"scheduled"' in created
    presented = run_example(tmp_path)  # a restart: it waits until the reminder came due
    assert presented.count("REMINDER") == 1
    assert 'reminder_prompt_json: "stretch"' in presented
    assert delivery_counts(tmp_path) == {"chat": (1, 1, 1)}


def test_serve_with_the_examples_runner_delivers_to_the_closed_chat(
    tmp_path: Path, procs: list[Proc]
) -> None:
    data_dir = tmp_path / "data"
    run_example(data_dir, "remind 1 stretch")
    env = {"PYTHONPATH": str(EXAMPLE.parent)}
    args = ["-m", "host_bridge.cli", "serve", "--data", str(data_dir)]
    proc = Proc([*args, "--turn-runner", "asyncio_host:run_turn"], tmp_path / "home", env)
    procs.append(proc)
    proc.wait_line("serving ")
    assert 'reminder_prompt_json: "stretch"' in proc.wait_line("REMINDER")
    proc.wait_line("reminder schedule-1 of session chat")
    assert proc.stop() == 0
    assert delivery_counts(data_dir) == {"chat": (1, 1, 1)}
