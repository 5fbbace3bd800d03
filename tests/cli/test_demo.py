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
    assert len(sections) == 8
    assert out.count("-> schedule_create ") == 5
    assert out.count("-> schedule_list ") == 4
    assert out.count("-> schedule_delete ") == 2
    assert '"after_seconds": 2' in out  # the three kinds, as a model would call them
    assert '"at": {"date": "' in out and '"time_zone": "Asia/Shanghai"}' in out
    assert '"every_seconds": 300' in out
    assert "<- deleted schedule-2" in out
    assert "<- deleted schedule-1" in out  # the repeating one, after two deliveries
    for record in (
        "create schedule-1 after 2s at ",
        "create schedule-2 after 3s at ",
        "create schedule-3 at ",
        "delete schedule-2",
        "dispatch schedule-1",
        "dispatch schedule-3",
        "create schedule-4 after 2s at ",
        "create schedule-1 every 300s, first at ",
        "dispatch schedule-1 accepted at ",
        "delete schedule-1",
    ):
        assert f"schedule/change {record}" in out  # shown as it was appended
    assert out.count("[SCHEDULE REMINDER]") == 2  # the after and the at reminder
    assert out.count("[SCHEDULE REMINDER BATCH]") == 2  # the every reminder, twice
    assert "follow-up turn for agent-1" in out
    assert "follow-up turn for agent-2" in out
    assert out.count("follow-up turn for agent-3") == 2
    assert "this host's clock runs 300x faster than real time" in out
    assert "wait     ... " in out  # progress while waiting
    assert "in its log: schedule-3 is active, state overdue" in out
    assert (
        "schedule-1 (after), schedule-3 (at) and schedule-4 (after, delivered by serve) "
        "were each dispatched exactly once"
    ) in out
    assert "schedule-1 (every) was dispatched twice, then deleted" in out
    assert "Result: after, at and every reminders were created, listed and deleted" in out
    # the chat is closed; a serve host that never had the session open delivers schedule-4
    assert f"reminder schedule-4 of session {session_id} (due " in out
    assert "serve woke the session, its owner delivered schedule-4" in out
    assert "dispatch schedule-4" in out.split("== 8.")[1]
    assert "and with the chat closed (by serve)" in out

    inspected = run_cli(
        ["inspect", "--json", "--session", session_id, "--data", str(data_dir)], home
    )
    assert inspected.code == 0, inspected.err
    (session,) = json.loads(inspected.out)["sessions"]
    assert session["active"] == []
    assert [(d["scheduleId"], d["prompt"]) for d in session["dispatches"]] == [
        ("schedule-1", "stretch your legs"),
        ("schedule-3", "call Alice back"),
        ("schedule-4", "take a break"),
    ]
    inspected = run_cli(
        ["inspect", "--json", "--session", f"{session_id}-every", "--data", str(data_dir)], home
    )
    assert inspected.code == 0, inspected.err
    (every,) = json.loads(inspected.out)["sessions"]
    first, second = every["dispatches"]
    assert first["scheduleId"] == second["scheduleId"] == "schedule-1"
    assert first["occurrenceAt"] < second["occurrenceAt"] <= second["acceptedAt"]
    assert run_cli(["verify", "--data", str(data_dir)], home).code == 0


def test_a_data_dir_that_cannot_be_created_exits_2(tmp_path: Path, home: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory should be")
    run = run_cli(["demo", "--fast", "--data", str(blocker / "data")], home)
    assert run.code == 2
    assert "cannot create the data directory" in run.err
    assert "Traceback" not in run.err
