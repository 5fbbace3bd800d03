"""The runnable example of docs/host-integration.md: a pykka host that embeds Schedule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import REPO


def test_the_pykka_host_example_runs_and_receives_its_reminder(tmp_path: Path) -> None:
    example = REPO / "docs" / "examples" / "pykka_host.py"
    done = subprocess.run(
        [sys.executable, str(example), "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "has tools: schedule_create, schedule_delete, schedule_list" in done.stdout
    assert done.stdout.count("[SCHEDULE REMINDER]") == 1
    assert 'reminder_prompt_json: "stand up and stretch"' in done.stdout
    assert '"operation": "dispatch", "id": "schedule-1"' in done.stdout
    (log,) = tmp_path.glob("example-*.jsonl")
    assert log.read_text("utf-8").count('"schedule/change"') == 2
