"""Helpers of the Pydantic AI integration tests: a recording bot, child processes, the store."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from host_bridge.aio import AgentTurn
from host_bridge.embedded.agents import MESSAGE_EVENT
from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.integrations.pydantic_ai import MESSAGES_RECORD, ScheduleToolset, turn_runner
from host_bridge.protocols import SessionEvent
from host_bridge.testing.pydantic_ai import reminder_model_function

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
    dispatches = sum(
        1
        for e in events
        if e.type == "schedule/change" and e.data.get("operation") == "dispatch"
    )
    inbox = [
        e.seq
        for e in events
        if e.type == INBOX_EVENT and e.data["source"].get("plugin") == "tool-schedule"
    ]
    done = Counter(e.data["inbox"] for e in events if e.type == TURN_COMPLETED_EVENT)
    return Deliveries(dispatches, len(inbox), sum(done[seq] for seq in inbox))


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


class Child:
    """A Python subprocess whose stdout lines a thread collects; its stdin stays open.

    ``paths`` go first on its ``PYTHONPATH``, then the repository (so it imports
    this checkout), then the test's own; ``home`` is its default data location,
    which it must not need.
    """

    def __init__(self, args: Sequence[str], home: Path, paths: Sequence[Path] = ()) -> None:
        env = dict(os.environ)
        inherited = [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
        env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), str(REPO), *inherited])
        env["DSH_SCHEDULE_HOME"] = str(home)
        env["PYTHONIOENCODING"] = "utf-8"
        self.popen = subprocess.Popen(
            [sys.executable, *args],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        assert self.popen.stdout is not None and self.popen.stderr is not None
        self.out: list[str] = []
        self.err: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._readers = [
            threading.Thread(target=self._read, args=(self.popen.stdout, self.out, True)),
            threading.Thread(target=self._read, args=(self.popen.stderr, self.err, False)),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: IO[str], into: list[str], announce: bool) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))
            if announce:
                self._lines.put(line.rstrip("\n"))
        if announce:
            self._lines.put(None)

    def wait_line(self, text: str) -> str:
        """The next stdout line containing ``text`` (fails when it ends or after the timeout)."""
        while True:
            try:
                line = self._lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"no line with {text!r}: {self.out} {self.err}") from None
            if line is None:
                raise AssertionError(f"it ended with no line {text!r}: {self.out} {self.err}")
            if text in line:
                return line

    def finish(self, stdin: str = "") -> int:
        """Write ``stdin``, close it and wait for the exit status."""
        assert self.popen.stdin is not None
        self.popen.stdin.write(stdin)
        self.popen.stdin.close()
        return self._wait()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait for the exit status (negative: killed by a signal)."""
        self.popen.send_signal(sig)
        return self._wait()

    def _wait(self) -> int:
        code = self.popen.wait(timeout=TIMEOUT)
        for reader in self._readers:
            reader.join(timeout=TIMEOUT)
        return code

    def kill(self) -> None:
        """Kill it if it still runs (a test's clean-up)."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        if self.popen.stdin is not None:
            self.popen.stdin.close()
