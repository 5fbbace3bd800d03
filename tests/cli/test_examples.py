"""The runnable examples of the docs: a pykka host that embeds Schedule, OpenAI round trips."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from host_bridge import openai_responses_tools
from messages._text import canonical_json
from tests.cli.helpers import REPO, round_trip


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


NOW = "2026-08-05T12:00:00.000Z"
AFTER_VIEW = {
    "id": "schedule-1",
    "kind": "after",
    "prompt": "stretch your legs",
    "afterSeconds": 1200,
    "scheduledAt": "2026-08-05T12:20:00.000Z",
    "state": "scheduled",
    "deliveryMode": "session-local",
}
AT_VIEW = {
    "id": "schedule-1",
    "kind": "at",
    "prompt": "call mom",
    "scheduledAt": "2026-08-06T01:00:00.000Z",
    "state": "scheduled",
    "deliveryMode": "session-local",
}


ROUND_TRIPS = pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            [],
            [
                ("call_example_create", AFTER_VIEW),
                ("call_example_list", {"schedules": [AFTER_VIEW]}),
            ],
        ),
        (["--strict"], [("call_example_strict", AT_VIEW)]),
    ],
    ids=["default", "strict"],
)
"""The saved responses of the round-trip example and the tool values they must get back."""


@ROUND_TRIPS
def test_the_openai_round_trip_answers_the_saved_tool_calls(
    options: list[str], expected: list[tuple[str, dict[str, Any]]]
) -> None:
    example = REPO / "docs" / "examples" / "openai_round_trip.py"
    replies = round_trip("--now", NOW, *options, prefix="tool: ")
    assert [(r["role"], r["tool_call_id"]) for r in replies] == [("tool", i) for i, _ in expected]
    for reply, (_, value) in zip(replies, expected, strict=True):
        assert reply["content"] == canonical_json(value)  # the tool's content, byte for byte
    page = (REPO / "docs" / "llm-apis.md").read_text("utf-8")
    if not options:  # the page shows the first tool message of this run
        shown = re.search(r"prints, for the first call.*?```json\n(.*?)```", page, re.S)
        assert shown is not None
        assert json.loads(shown.group(1)) == replies[0]
    quoted = re.search(r"```python\n(def tool_messages.*?)```", page, re.S)
    assert quoted is not None
    assert quoted.group(1) in example.read_text("utf-8")  # the page quotes the example's code
    saved = "openai_chat_completion_strict.json" if options else "openai_chat_completion.json"
    response = json.loads((REPO / "docs" / "examples" / saved).read_text("utf-8"))
    calls = response["choices"][0]["message"]["tool_calls"]
    assert all(isinstance(call["function"]["arguments"], str) for call in calls)


@ROUND_TRIPS
def test_the_responses_round_trip_answers_the_saved_function_calls(
    options: list[str], expected: list[tuple[str, dict[str, Any]]]
) -> None:
    example = REPO / "docs" / "examples" / "openai_round_trip.py"
    outputs = round_trip("--api", "responses", "--now", NOW, *options, prefix="output: ")
    assert [(o["type"], o["call_id"]) for o in outputs] == [
        ("function_call_output", i) for i, _ in expected
    ]
    for output, (_, value) in zip(outputs, expected, strict=True):
        assert output["output"] == canonical_json(value)  # the tool's content, byte for byte
    page = (REPO / "docs" / "llm-apis.md").read_text("utf-8")
    section = page[page.index("## 5. The Responses API") :]
    if not options:  # the page shows the first output item of this run
        shown = re.search(r"prints, for the first call.*?```json\n(.*?)```", section, re.S)
        assert shown is not None
        assert json.loads(shown.group(1)) == outputs[0]
        call = re.search(r"comes back as a `function_call` item.*?```json\n(.*?)```", section, re.S)
        assert call is not None
        saved = REPO / "docs" / "examples" / "openai_responses.json"  # the page quotes it
        assert json.loads(call.group(1)) == json.loads(saved.read_text("utf-8"))["output"][0]
    quoted = re.search(r"```python\n(def function_call_outputs.*?)```", section, re.S)
    assert quoted is not None
    assert quoted.group(1) in example.read_text("utf-8")  # the page quotes the example's code


def test_the_responses_page_shows_a_generated_tool() -> None:
    page = (REPO / "docs" / "llm-apis.md").read_text("utf-8")
    section = page[page.index("## 5. The Responses API") :]
    shown = re.search(r"strict by default:\n\n```json\n(.*?)```", section, re.S)
    assert shown is not None
    assert json.loads(shown.group(1)) == openai_responses_tools()[1]  # schedule_list
