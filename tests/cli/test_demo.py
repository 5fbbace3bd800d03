"""``dsh-schedule demo --fast``: the whole story, then inspect and verify its store."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli.helpers import run_cli


def test_fast_demo_shows_the_whole_story_and_leaves_a_valid_store(
    data_dir: Path, home: Path
) -> None:
    run = run_cli(["demo", "--fast", "--data", str(data_dir)], home, script=True, timeout=90)
    assert run.code == 0, run.out + run.err
    out = run.out
    assert run.err == ""
    match = re.search(r"session:  (demo-\S+)", out)
    assert match is not None
    session_id = match.group(1)
    assert str(data_dir) in out

    sections = [line for line in out.splitlines() if line.startswith("== ")]
    assert len(sections) == 6
    assert out.count("-> schedule_create ") == 3
    assert out.count("-> schedule_list ") == 3
    assert out.count("-> schedule_delete ") == 1
    assert "<- deleted schedule-2" in out
    for record in (
        "create schedule-1",
        "create schedule-2",
        "create schedule-3",
        "delete schedule-2",
        "dispatch schedule-1",
        "dispatch schedule-3",
    ):
        assert f"schedule/change {record}" in out  # shown as it was appended
    assert out.count("[SCHEDULE REMINDER]") == 2
    assert "follow-up turn for agent-1" in out
    assert "follow-up turn for agent-2" in out
    assert "wait     ... " in out  # progress while waiting
    assert "in its log: schedule-3 is active, state overdue" in out
    assert "schedule-1 and schedule-3 were each dispatched exactly once" in out
    assert "Result: create, list, delete, on-time delivery, restart and overdue" in out

    inspected = run_cli(
        ["inspect", "--json", "--session", session_id, "--data", str(data_dir)], home
    )
    assert inspected.code == 0, inspected.err
    (session,) = json.loads(inspected.out)["sessions"]
    assert session["active"] == []
    assert [(d["scheduleId"], d["prompt"]) for d in session["dispatches"]] == [
        ("schedule-1", "stretch your legs"),
        ("schedule-3", "call Alice back"),
    ]
    assert run_cli(["verify", "--data", str(data_dir)], home).code == 0


def test_a_data_dir_that_cannot_be_created_exits_2(tmp_path: Path, home: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory should be")
    run = run_cli(["demo", "--fast", "--data", str(blocker / "data")], home)
    assert run.code == 2
    assert "cannot create the data directory" in run.err
    assert "Traceback" not in run.err
