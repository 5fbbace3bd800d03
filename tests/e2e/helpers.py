"""Shared by the end-to-end tests: a scripted model of the embedded host."""

from __future__ import annotations

import threading
from typing import Any

from host_bridge.embedded.agents import Turn
from tests.schema_check import checked


class ScriptedModel:
    """Creates a reminder when asked, and records every reminder it is shown."""

    def __init__(self) -> None:
        self.reminders: list[str] = []
        self.results: list[Any] = []
        self.reminded = threading.Event()

    def __call__(self, turn: Turn) -> str | None:
        text = turn.message.text
        if text.startswith(("[SCHEDULE REMINDER]", "[SCHEDULE REMINDER BATCH]")):
            self.reminders.append(text)
            self.reminded.set()
            return "Reminder presented."
        if text.startswith("every "):
            _, seconds, prompt = text.split(" ", 2)
            result = turn.call_tool(
                "schedule_create", {"prompt": prompt, "every_seconds": int(seconds)}
            )
            self.results.append(checked("schedule_create", result.value))
            return "Scheduled."
        if text.startswith("remind "):
            _, seconds, prompt = text.split(" ", 2)
            result = turn.call_tool(
                "schedule_create", {"prompt": prompt, "after_seconds": int(seconds)}
            )
            self.results.append(checked("schedule_create", result.value))
            return "Scheduled."
        return None
