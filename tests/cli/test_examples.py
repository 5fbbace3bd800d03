"""The runnable examples of the docs: a pykka host that embeds Schedule, an OpenAI round trip."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from messages._text import canonical_json
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


@pytest.mark.parametrize(
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
def test_the_openai_round_trip_answers_the_saved_tool_calls(
    options: list[str], expected: list[tuple[str, dict[str, Any]]]
) -> None:
    example = REPO / "docs" / "examples" / "openai_round_trip.py"
    done = subprocess.run(
        [sys.executable, str(example), "--now", NOW, *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    replies = [
        json.loads(line.removeprefix("tool: "))
        for line in done.stdout.splitlines()
        if line.startswith("tool: ")
    ]
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
