"""Shared by the end-to-end tests: a scripted model of the embedded host."""

from __future__ import annotations

import threading
from typing import Any

from host_bridge.embedded.agents import Turn
from tests.schema_check import checked


class ScriptedModel:
    """Creates a reminder when asked (``remind N prompt``, ``every N prompt``) and records
    every reminder it is shown."""

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
        command, _, rest = text.partition(" ")
        selector = {"every": "every_seconds", "remind": "after_seconds"}.get(command)
        if selector is None:
            return None
        seconds, prompt = rest.split(" ", 1)
        result = turn.call_tool("schedule_create", {"prompt": prompt, selector: int(seconds)})
        self.results.append(checked("schedule_create", result.value))
        return "Scheduled."
