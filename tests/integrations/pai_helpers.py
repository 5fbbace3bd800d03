"""Helpers of the Pydantic AI integration tests: a recording bot, child processes, the store."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from host_bridge.aio import AgentTurn
from host_bridge.embedded.agents import MESSAGE_EVENT
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.integrations.pydantic_ai import MESSAGES_RECORD, ScheduleToolset, turn_runner
from host_bridge.protocols import SessionEvent
from host_bridge.testing.pydantic_ai import reminder_model_function
from tests.cli.helpers import Proc
from tests.cli.helpers import deliveries as counted

TIMEOUT = 60.0
"""A failure bound for every wait, never a synchronisation."""

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"
HERE = Path(__file__).resolve().parent


@dataclass
class Bot:
    """A Pydantic AI agent on the scripted reminder model that remembers what it saw.

    ``requests`` holds the messages the model received on each call; ``turns``
    every finished turn as ``(is_reminder, reply)``, in order.
    """

    requests: list[list[ModelMessage]] = field(default_factory=list)
    turns: list[tuple[bool, str | None]] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.agent = Agent(FunctionModel(self._model), toolsets=[ScheduleToolset()])
        self._answer = turn_runner(self.agent)

    def _model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        return reminder_model_function(messages, info)

    async def run_turn(self, turn: AgentTurn) -> str | None:
        """The turn runner: the integration's, recording each finished turn."""
        reply = await self._answer(turn)
        with self.changed:
            self.turns.append((turn.is_reminder, reply))
            self.changed.notify_all()
        return reply

    @property
    def reminders(self) -> list[str | None]:
        """The replies of the reminder turns so far."""
        return [reply for is_reminder, reply in self.turns if is_reminder]

    async def wait_reminders(self, count: int) -> None:
        """Return once ``count`` reminder turns finished (fails after the timeout)."""

        def wait() -> bool:
            with self.changed:
                return self.changed.wait_for(lambda: len(self.reminders) >= count, TIMEOUT)

        assert await asyncio.to_thread(wait), f"{count} reminder(s) expected: {self.turns}"


def stored_events(data_dir: Path, session_id: str) -> Sequence[SessionEvent]:
    """The durable log of ``session_id`` in the SQLite store of ``data_dir``."""
    store = SqliteEventStore(store_path(data_dir), create=False)
    try:
        stored = store.load(session_id)
        assert stored is not None, session_id
        return stored.events
    finally:
        store.close()


@dataclass(frozen=True)
class Deliveries:
    """What a session's log says about its reminders."""

    dispatches: int
    reminder_entries: int
    completed: int


def deliveries(events: Sequence[SessionEvent]) -> Deliveries:
    """Dispatches, reminder inbox entries and their completed turns in ``events``."""
    return Deliveries(*counted(events))


def nothing_owed(data_dir: Path) -> bool:
    """Whether the store's due index says no session is owed anything."""
    store = SqliteEventStore(store_path(data_dir), create=False)
    try:
        return store.due_entries() == {}
    finally:
        store.close()


def recorded_runs(events: Sequence[SessionEvent]) -> list[Any]:
    """The data of every ``pydantic_ai/messages`` record, oldest first."""
    return [e.data["data"] for e in events if e.type == MESSAGES_RECORD]


def tool_calls(events: Sequence[SessionEvent]) -> list[Any]:
    """The tool calls the log recorded (name and arguments as the tool received them)."""
    return [
        e.data["toolCall"] for e in events if e.type == MESSAGE_EVENT and "toolCall" in e.data
    ]


def tool_results(events: Sequence[SessionEvent]) -> list[Any]:
    """The tool results the log recorded (``isError`` and the model-visible ``content``)."""
    return [e.data for e in events if e.type == MESSAGE_EVENT and e.data.get("role") == "tool"]


def prompts_seen(messages: Sequence[ModelMessage]) -> list[str]:
    """The user prompts in a message history, in order (the framing of reminders included)."""
    return [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def child(args: Sequence[str], home: Path, paths: Sequence[Path] = ()) -> Proc:
    """A Python subprocess with its stdin open (see :class:`tests.cli.helpers.Proc`).

    ``paths`` go first on its ``PYTHONPATH``, then the repository (so it imports
    this checkout), then the test's own; ``home`` is its default data location,
    which it must not need.
    """
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    path = os.pathsep.join([*map(str, paths), str(REPO), *inherited])
    return Proc(args, home, {"PYTHONPATH": path}, stdin=True)
