"""``dsh-schedule chat`` with piped input: commands, resume, delivery exactly once."""

from __future__ import annotations

import re
from pathlib import Path

from host_bridge.embedded.paths import store_path
from host_bridge.protocols import wall_clock_ms
from messages import format_instant
from messages._cron_zone import cron_schedule
from messages._tool_values import ToolError, parse_create_input
from tests.changes import reopened_changes
from tests.cli.helpers import run_cli

HEADER = "[SCHEDULE REMINDER]"


def chat(data_dir: Path, home: Path, lines: str, *extra: str) -> tuple[int, str, str]:
    run = run_cli(["chat", "--data", str(data_dir), *extra], home, stdin=lines)
    return run.code, run.out, run.err


def schedule_changes(data_dir: Path, session_id: str) -> list[tuple[str, str]]:
    return reopened_changes(store_path(data_dir), session_id)


def test_quit_resume_after_due_time_delivers_exactly_once(data_dir: Path, home: Path) -> None:
    code, out, err = chat(data_dir, home, "/create 1 hello\n/quit\n", "--session", "s1")
    assert code == 0, err
    assert "session s1: new" in out
    assert "created schedule-1 due " in out
    assert HEADER not in out
    assert "1 reminder(s) still pending" in out

    # The reminder comes due while nobody runs the session; /wait returns once it arrived.
    code, out, err = chat(data_dir, home, "/wait 10\n/quit\n", "--session", "s1")
    assert code == 0, err
    assert "session s1: resumed" in out
    assert out.count(HEADER) == 1
    assert 'schedule_id_json: "schedule-1"' in out
    assert 'reminder_prompt_json: "hello"' in out
    assert "1 reminder(s) shown this time, no reminders pending" in out

    code, out, err = chat(data_dir, home, "/list\n/quit\n", "--session", "s1")
    assert code == 0, err
    assert HEADER not in out
    assert "no active reminders" in out
    assert schedule_changes(data_dir, "s1") == [
        ("create", "schedule-1"),
        ("dispatch", "schedule-1"),
    ]


def test_commands_errors_and_end_of_input(data_dir: Path, home: Path) -> None:
    script = "\n".join(
        [
            "/help",
            "/create 3600 water the plants",
            "/create 7200   feed the cat  ",
            "/list",
            "/create soon nope",
            "/create 0 nope",
            "/create 5",
            "/delete schedule-1",
            "/delete schedule-1",
            "/delete",
            "/wait forever",
            "/wait 0",
            "just talking",
            "/bogus",
            "",
        ]
    )  # no /quit: the end of input leaves cleanly
    code, out, err = chat(data_dir, home, script)
    assert code == 0, err
    assert "session chat: new" in out  # the default session
    assert "> /help" in out  # piped commands are echoed into the transcript
    assert "/create SECONDS TEXT" in out
    assert "created schedule-1 due " in out
    assert "created schedule-2 due " in out
    listed = [line for line in out.splitlines() if re.match(r"schedule-\d+ +after ", line)]
    assert [line.split()[:4] for line in listed] == [
        ["schedule-1", "after", "3600s", "scheduled"],
        ["schedule-2", "after", "7200s", "scheduled"],
    ]
    assert '"feed the cat"' in listed[1]  # the tool trims the prompt
    assert out.count("error invalid_rule: ") == 2
    assert "usage: /create SECONDS TEXT" in out
    assert "deleted schedule-1" in out
    assert "schedule-1 not found" in out
    assert "usage: /delete ID" in out
    assert "usage: /wait SECONDS" in out
    assert "no reminder arrived" in out
    assert "You play the model" in out
    assert "unknown command /bogus" in out
    assert "1 reminder(s) still pending" in out
    assert err == ""
    assert schedule_changes(data_dir, "chat") == [
        ("create", "schedule-1"),
        ("create", "schedule-2"),
        ("delete", "schedule-1"),
    ]


def test_an_unreadable_store_exits_2(data_dir: Path, home: Path) -> None:
    data_dir.mkdir()
    store_path(data_dir).write_bytes(b"\x00garbage" * 100)
    store_path(data_dir).chmod(0o600)  # private: the content is what is wrong
    code, _, err = chat(data_dir, home, "/quit\n")
    assert code == 2
    assert "corrupt or not an SQLite database" in err
    assert "Traceback" not in err


def test_at_and_every_commands_call_the_tool_with_each_selector(data_dir: Path, home: Path) -> None:
    script = "\n".join(
        [
            "/help",
            "/every 1800 stand up",
            "/at 2099-01-01T09:00:00+08:00 new year",
            "/at 2099-01-01 09:00:00 Asia/Shanghai new year, local",
            "/every 60 too often",
            "/every soon nope",
            "/every 300",
            "/at 2026-08-06T09:00:00 no offset",
            "/at 2099-01-01 09:00:00 EST zone abbreviation",
            "/at 2020-01-01T00:00:00Z the past",
            "/at 2099-01-01 09:00:00",
            "/at",
            "/list",
            "/quit",
        ]
    )
    code, out, err = chat(data_dir, home, script, "--session", "kinds")
    assert code == 0, err
    assert err == ""
    assert "/every SECONDS TEXT" in out and "/at WHEN TEXT" in out
    assert "created schedule-1 every 1800s, next " in out
    assert "created schedule-2 due 2099-01-01T01:00:00.000Z (scheduled)" in out
    assert "created schedule-3 due 2099-01-01T01:00:00.000Z (scheduled)" in out
    assert "error frequency_too_high: every_seconds must be at least 300" in out
    assert out.count("error invalid_rule: ") == 2  # "soon" and the offset-less time
    assert "error invalid_time_zone: " in out
    assert "error not_future: The reminder time must be later than now." in out
    assert "usage: /every SECONDS TEXT" in out
    assert out.count("usage: /at ") == 2
    rows = [line.split() for line in out.splitlines() if re.match(r"schedule-\d+ ", line)]
    assert [row[:4] for row in rows] == [
        ["schedule-1", "every", "1800s", "scheduled"],
        ["schedule-2", "at", "scheduled", "2099-01-01T01:00:00.000Z"],
        ["schedule-3", "at", "scheduled", "2099-01-01T01:00:00.000Z"],
    ]
    assert "3 reminder(s) still pending" in out
    assert schedule_changes(data_dir, "kinds") == [
        ("create", "schedule-1"),
        ("create", "schedule-2"),
        ("create", "schedule-3"),
    ]


def test_an_at_reminder_arrives_in_the_shell(data_dir: Path, home: Path) -> None:
    due = format_instant(wall_clock_ms() + 1500)
    code, out, err = chat(data_dir, home, f"/at {due} look up\n/wait 20\n/quit\n")
    assert code == 0, err
    assert f"created schedule-1 due {due} (scheduled)" in out
    assert out.count(HEADER) == 1
    assert f"occurrence_at: {due}" in out
    assert "s after its due time):" in out
    assert "1 reminder(s) shown this time, no reminders pending" in out


def tool_answer(cron: dict[str, str]) -> str:
    """The line the shell prints for the tool's refusal of ``cron`` (judged before the queue)."""
    refused = parse_create_input({"prompt": "x", "cron": cron})
    assert isinstance(refused, ToolError)
    return f"error {refused.code}: {refused.message}"


def test_cron_creates_a_calendar_reminder_through_the_tool(data_dir: Path, home: Path) -> None:
    rules = [  # (typed expression, typed zone, prompt typed, canonical expression, zone key)
        ("0 9 * * 1-5", "Asia/Shanghai", "stand-up", "0 9 * * 1-5", "Asia/Shanghai"),
        ("*/5 * * * *", " asia/tokyo ", "  drink some water  ", "*/5 * * * *", "Asia/Tokyo"),
        ("0 8 1 * mon", "UTC", "pay rent", "0 8 1 * MON", "UTC"),
        ("@daily", "Europe/London", "backup", "@daily", "Europe/London"),
    ]
    lines = [f'/cron "{expr}" {zone} {text}' for expr, zone, text, _, _ in rules]
    before = wall_clock_ms()
    code, out, err = chat(data_dir, home, "\n".join(["/help", *lines, "/list", "/quit"]))
    after = wall_clock_ms()
    assert code == 0, err
    assert err == ""
    assert '/cron "EXPR" ZONE TEXT' in out  # in the help
    created = [line for line in out.splitlines() if line.startswith("created ")]
    rows = [" ".join(line.split()) for line in out.splitlines() if line.startswith("schedule-")]
    assert len(created) == len(rows) == len(rules), out
    for number, (_, _, text, expression, zone) in enumerate(rules, start=1):
        schedule = cron_schedule(expression, zone)
        # the first occurrence after the tool's clock sample, taken between the two here
        targets = {
            format_instant(ms)
            for ms in (schedule.next_after(before), schedule.next_after(after))
            if ms
        }
        assert created[number - 1].startswith(f"created schedule-{number} ")
        assert created[number - 1].endswith(" (scheduled)")
        assert any(target in created[number - 1] for target in targets), created
        shown = f'schedule-{number} cron "{expression}" {zone} scheduled'
        assert rows[number - 1] in {f'{shown} {target} "{text.strip()}"' for target in targets}
    assert f"{len(rules)} reminder(s) still pending" in out
    assert schedule_changes(data_dir, "chat") == [
        ("create", f"schedule-{number}") for number in range(1, len(rules) + 1)
    ]


def test_cron_usage_and_the_tools_refusals(data_dir: Path, home: Path) -> None:
    usage = [  # the shell cannot tell the parts apart: a usage line, nothing sent
        "/cron",
        '/cron "0 9 * * 1-5 Asia/Shanghai stand-up',  # no closing quote
        '/cron "0 9 * * 1-5"',  # no zone, no text
        '/cron "0 9 * * 1-5" Asia/Shanghai',  # no text
        '/cron "0 9 * * 1-5" Asia/Shanghai    ',
        "/cron 0 9 * * 1-5 Asia/Shanghai stand-up",  # the expression is not quoted
    ]
    refused = [  # the parts are there: the tool judges them, as it would a model's call
        ('/cron "0 9 31 2 *" UTC never', {"expression": "0 9 31 2 *", "time_zone": "UTC"}),
        ('/cron "0 9 * *" UTC four fields', {"expression": "0 9 * *", "time_zone": "UTC"}),
        ('/cron "" UTC empty', {"expression": "", "time_zone": "UTC"}),
        ('/cron "*/4 * * * *" UTC often', {"expression": "*/4 * * * *", "time_zone": "UTC"}),
        ('/cron "0 9 * * *" EST abbreviation', {"expression": "0 9 * * *", "time_zone": "EST"}),
    ]
    script = "\n".join([*usage, *(line for line, _ in refused), "/list", "/quit"])
    code, out, err = chat(data_dir, home, script, "--session", "bad")
    assert code == 0, err
    assert "Traceback" not in err and err == ""
    assert out.count('usage: /cron "EXPR" ZONE TEXT') == len(usage)
    answers = [line for line in out.splitlines() if line.startswith("error ")]
    assert answers == [tool_answer(cron) for _, cron in refused]
    assert [answer.split(":")[0] for answer in answers] == [
        "error invalid_rule",
        "error invalid_rule",
        "error invalid_rule",
        "error frequency_too_high",
        "error invalid_time_zone",
    ]
    assert "no active reminders" in out
    assert schedule_changes(data_dir, "bad") == []
