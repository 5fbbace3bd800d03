"""Stored strings cannot forge output lines or drive the terminal; JSON output stays JSON.

Session ids, schedule ids and prompts come from the store, where anything may
have been written. Human output escapes control, format (bidi) and separator
characters; ``inspect --json`` writes them as ``\\uXXXX`` escapes of the same
JSON value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from host_bridge.cli._common import safe_json, show_text, visible
from host_bridge.protocols import wall_clock_ms
from tests.cli.helpers import assert_printable, create, message, run_cli, write_session

FORGED_OK = "ok       forged (0 events, 0 schedule changes, 0 active)"
EVIL_SESSION = f"evil\n{FORGED_OK}"
HOSTILE = "\x1b[2J\x1b]0;title\x07\u202egnp.exe\u2028\u2029\u200b\x85\x9b\ufeff\U000e0041"
EVIL_ID = "schedule-1\n[SCHEDULE REMINDER]"
EVIL_PROMPT = f"call {HOSTILE} back\\n"


def build(data_dir: Path, now: int) -> None:
    write_session(data_dir, EVIL_SESSION, [message("hi")])
    write_session(data_dir, f"s{HOSTILE}", [message("hi")])
    write_session(
        data_dir,
        "prompts",
        [message("hi"), create(EVIL_ID, EVIL_PROMPT, 3600, now)],
        parent=f"parent{HOSTILE}",
        seed_length=0,
    )


def test_verify_prints_one_line_per_session_whatever_its_id(data_dir: Path, home: Path) -> None:
    """Regression: a session id with a newline forged an ``ok`` line."""
    build(data_dir, wall_clock_ms())
    run = run_cli(["verify", "--data", str(data_dir)], home)
    assert run.code == 0, run.err
    assert_printable(run.out)
    lines = run.out.splitlines()
    assert len(lines) == 1 + 3 + 1  # store, one per session, summary
    assert not any(line.startswith("ok       forged") for line in lines)
    assert f"ok       evil\\n{FORGED_OK} (1 events, 0 schedule changes, 0 active)" in lines


def test_inspect_tables_escape_ids_parents_and_prompts(data_dir: Path, home: Path) -> None:
    build(data_dir, wall_clock_ms())
    run = run_cli(["inspect", "--data", str(data_dir)], home)
    assert run.code == 0, run.err
    assert_printable(run.out)
    assert "session evil\\nok       forged" in run.out
    assert "fork of parent\\x1b[2J" in run.out
    assert "schedule-1\\n[SCHEDULE REMINDER]" in run.out
    assert not any(line.startswith("[SCHEDULE REMINDER]") for line in run.out.splitlines())
    assert "\\u202egnp.exe\\u2028\\u2029\\u200b" in run.out
    assert "\\\\n" in run.out  # the prompt's own backslash-n stays distinguishable


def test_inspect_json_is_the_same_json_with_nothing_unsafe(data_dir: Path, home: Path) -> None:
    build(data_dir, wall_clock_ms())
    run = run_cli(["inspect", "--json", "--data", str(data_dir)], home)
    assert run.code == 0, run.err
    assert_printable(run.out)
    document = json.loads(run.out)
    sessions = {session["id"]: session for session in document["sessions"]}
    assert set(sessions) == {EVIL_SESSION, f"s{HOSTILE}", "prompts"}
    assert sessions["prompts"]["parentSession"] == f"parent{HOSTILE}"
    [view] = sessions["prompts"]["active"]
    assert (view["id"], view["prompt"]) == (EVIL_ID, EVIL_PROMPT)


def test_chat_escapes_what_it_shows_from_the_log(data_dir: Path, home: Path) -> None:
    now = wall_clock_ms()
    write_session(
        data_dir,
        "s1",
        [
            message("hi"),
            create(EVIL_ID, EVIL_PROMPT, 1, now - 60_000),  # overdue: delivered on resume
            create("schedule-2", EVIL_PROMPT, 3600, now),
        ],
    )
    run = run_cli(
        ["chat", "--session", "s1", "--data", str(data_dir)], home, stdin="/list\n/quit\n"
    )
    assert run.code == 0, run.err
    assert_printable(run.out)
    assert_printable(run.err)
    lines = run.out.splitlines()
    assert sum(line.strip() == "[SCHEDULE REMINDER]" for line in lines) == 1  # the real one
    assert '  schedule_id_json: "schedule-1\\n[SCHEDULE REMINDER]"' in lines
    row = "schedule-2  after 3600s  scheduled"
    assert any(line.startswith(row) and "\\u202e" in line for line in lines)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain é 日本", "plain é 日本"),
        ("a\nb\r\tc\\d", "a\\nb\\r\\tc\\\\d"),
        ("\x00\x1b\x7f\x85\x9b", "\\x00\\x1b\\x7f\\x85\\x9b"),
        (
            "\u2028\u2029\u202e\u2066\u200e\u061c\ufeff",
            "\\u2028\\u2029\\u202e\\u2066\\u200e\\u061c\\ufeff",
        ),
        ("\ud800", "\\ud800"),
        ("\U000e0041", "\\U000e0041"),
    ],
)
def test_visible_escapes_what_a_terminal_acts_on(text: str, shown: str) -> None:
    assert visible(text) == shown
    assert "\n" not in visible(text)


@pytest.mark.parametrize("text", ["plain", HOSTILE, EVIL_PROMPT, "\ud800x", "\U000e0041"])
def test_show_text_and_safe_json_keep_the_json_value(text: str) -> None:
    assert json.loads(show_text(text)) == text
    assert_printable(show_text(text))
    document = json.dumps({"k": [text]}, indent=2, ensure_ascii=False)
    assert json.loads(safe_json(document)) == {"k": [text]}
    assert safe_json(document).count("\n") == document.count("\n")
