"""``dsh-schedule demo --fast``: the whole story, then inspect and verify its store."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from zoneinfo import ZoneInfo

from host_bridge.protocols import wall_clock_ms
from messages import format_instant
from tests.cli.helpers import run_cli


def test_fast_demo_shows_the_whole_story_and_leaves_a_valid_store(
    data_dir: Path, home: Path, tmp_path: Path
) -> None:
    temporary = tmp_path / "tmp"  # the fast-clock part's store goes here, and is removed
    temporary.mkdir()
    # On the default store (the data dir is $DSH_SCHEDULE_HOME), as a newcomer runs it.
    run = run_cli(
        ["demo", "--fast"], data_dir, script=True, timeout=90, env={"TMPDIR": str(temporary)}
    )
    assert run.code == 0, run.out + run.err
    out = run.out
    assert run.err == ""
    match = re.search(r"session:  (demo-\S+)", out)
    assert match is not None
    session_id = match.group(1)
    assert str(data_dir) in out

    sections = [line for line in out.splitlines() if line.startswith("== ")]
    assert len(sections) == 8
    assert out.count("-> schedule_create ") == 6
    assert out.count("-> schedule_list ") == 5
    assert out.count("-> schedule_delete ") == 3
    assert '"after_seconds": 2' in out  # the three kinds, as a model would call them
    assert '"at": {"date": "' in out and '"time_zone": "Asia/Shanghai"}' in out
    assert '"every_seconds": 300' in out
    cron = re.search(
        r'-> schedule_create \{"prompt": "water the plants", "cron": \{"expression": '
        r'"(\d+) (\d+) \* \* \*", "time_zone": "Asia/Shanghai"\}\}',
        out,
    )
    assert cron is not None  # a daily rule at a Shanghai time the compressed clock soon reaches
    minute, hour = int(cron.group(1)), int(cron.group(2))
    assert f"Every day at {hour:02d}:{minute:02d} Shanghai time, remind me to" in out
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
        f'create schedule-2 cron "{minute} {hour} * * *" Asia/Shanghai, first at ',
        "dispatch schedule-2 accepted at ",
        "delete schedule-2",
    ):
        assert f"schedule/change {record}" in out  # shown as it was appended
    assert out.count("[SCHEDULE REMINDER]") == 2  # the after and the at reminder
    assert out.count("[SCHEDULE REMINDER BATCH]") == 3  # the every reminder twice, then cron
    assert "follow-up turn for agent-1" in out
    assert "follow-up turn for agent-2" in out
    assert out.count("follow-up turn for agent-3") == 3
    part = out.split("== 5.")[1].split("== 6.")[0]
    created = re.search(
        rf"OK, schedule-2 repeats at {hour:02d}:{minute:02d}, every day \(Asia/Shanghai time\), "
        r"first at (\S+)\.\n",
        part,
    )
    assert created is not None
    first = created.group(1)  # the cron reminder's first occurrence, as the model said
    turn = (
        '[{"schedule_id":"schedule-2","occurrence_at":"' + first + '",'
        '"reminder_prompt":"water the plants"}]'
    )
    assert f"reminders_json: {turn}" in part  # the cron reminder's batch turn, printed
    local = datetime.datetime.fromisoformat(first).astimezone(ZoneInfo("Asia/Shanghai"))
    assert (local.hour, local.minute, local.second) == (hour, minute, 0)
    assert "You have 1 reminder(s): schedule-2 (cron, " in part  # listed after its delivery
    assert "schedule-2 moved on to the same Asia/Shanghai time tomorrow" in part
    assert "this host's clock runs 300x faster than real time" in out
    assert "wait     ... " in out  # progress while waiting
    assert "in its log: schedule-3 is active, state overdue" in out
    assert (
        "schedule-1 (after), schedule-3 (at) and schedule-4 (after, delivered by serve) "
        "were each dispatched exactly once"
    ) in out
    assert "schedule-1 (every) was dispatched twice, then deleted; schedule-2 (cron) once" in out
    assert "Result: after, at, every and cron reminders were created, listed and deleted" in out
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
    # The fast-clock session ran in a temporary store, removed; the default store holds
    # the first session only, and no time in it lies ahead of the real clock.
    assert f"({session_id}-every, as read from its temporary store before it was removed)" in out
    assert list(temporary.iterdir()) == []
    inspected = run_cli(["inspect", "--json"], data_dir)
    listing = run_cli(["inspect"], data_dir)
    now = format_instant(wall_clock_ms())  # after both looked
    assert inspected.code == listing.code == 0, inspected.err + listing.err
    (only,) = json.loads(inspected.out)["sessions"]
    assert only["id"] == session_id
    times = [d[key] for d in only["dispatches"] for key in ("time", "acceptedAt") if key in d]
    assert len(times) >= 3 and max(times) <= now
    shown = re.findall(r"\d{4}-\d\d-\d\dT[\d:.]+Z", listing.out)  # DISPATCHED and the rest
    assert len(shown) >= 3 and max(shown) <= now
    verified = run_cli(["verify"], data_dir)
    assert verified.code == 0, verified.out + verified.err


def test_a_data_dir_that_cannot_be_created_exits_2(tmp_path: Path, home: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory should be")
    run = run_cli(["demo", "--fast", "--data", str(blocker / "data")], home)
    assert run.code == 2
    assert "cannot create the data directory" in run.err
    assert "Traceback" not in run.err
