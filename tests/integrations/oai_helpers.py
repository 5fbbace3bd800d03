"""A scripted OpenAI Agents SDK bot for an AsyncHost, and what a store says was delivered.

The bot is a real SDK ``Agent`` with Schedule's tools, on the kit's scripted
model, run by :func:`~host_bridge.integrations.openai_agents.turn_runner`; it
remembers every turn it ran.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents import Agent

from host_bridge.aio import AgentTurn, AsyncHost
from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.integrations.openai_agents import HostLogSession, schedule_tools, turn_runner
from host_bridge.testing.openai_agents import ScriptedReminderModel
from messages import SCHEDULE_CHANGE_TYPE

TIMEOUT = 20.0
"""Seconds any wait may take before the test fails (a failure bound, never a pace)."""


@dataclass(frozen=True)
class Ran:
    """One turn the bot ran: the session, whether it was a reminder, its text and reply."""

    session_id: str
    reminder: bool
    text: str
    reply: str | None


class Bot:
    """An SDK agent on :class:`ScriptedReminderModel` with Schedule's tools, as a turn runner."""

    def __init__(self, *, strict: bool = False, calendar_rules: bool = True) -> None:
        self.model = ScriptedReminderModel()
        tools = schedule_tools(strict=strict, calendar_rules=calendar_rules)
        self.agent: Agent[Any] = Agent(name="assistant", tools=tools, model=self.model)
        self._answer = turn_runner(self.agent)
        self.ran: list[Ran] = []
        self._changed = asyncio.Condition()

    async def __call__(self, turn: AgentTurn) -> str | None:
        """Run the turn with the SDK runner and remember it."""
        reply = await self._answer(turn)
        async with self._changed:
            self.ran.append(Ran(turn.session_id, turn.is_reminder, turn.text, reply))
            self._changed.notify_all()
        return reply

    def reminders(self) -> list[str | None]:
        """The replies of the reminder turns so far."""
        return [ran.reply for ran in self.ran if ran.reminder]

    async def wait_reminders(self, count: int) -> None:
        """Return once ``count`` reminder turns ran (fails after :data:`TIMEOUT`)."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(self.reminders()) >= count), TIMEOUT
            )


def store_of(data_dir: Path) -> Path:
    """The SQLite store of a data directory."""
    return data_dir / "sessions.sqlite3"


def delivery_counts(data_dir: Path) -> dict[str, tuple[int, int, int]]:
    """Per stored session: dispatches, reminder inbox entries, and how many of those finished."""
    opened = SqliteEventStore(store_of(data_dir), create=False)
    try:
        counts: dict[str, tuple[int, int, int]] = {}
        for session_id in opened.session_ids():
            stored = opened.load(session_id)
            assert stored is not None
            counts[session_id] = _counts(stored.events)
        return counts
    finally:
        opened.close()


def _counts(events: Sequence[Any]) -> tuple[int, int, int]:
    dispatches = sum(
        1
        for e in events
        if e.type == SCHEDULE_CHANGE_TYPE and e.data.get("operation") == "dispatch"
    )
    inbox = [
        e.seq
        for e in events
        if e.type == INBOX_EVENT and e.data["source"].get("plugin") == "tool-schedule"
    ]
    done = Counter(e.data["inbox"] for e in events if e.type == TURN_COMPLETED_EVENT)
    return dispatches, len(inbox), sum(done[seq] for seq in inbox)


def owed(data_dir: Path) -> dict[str, Any]:
    """The closed store's due index: what is still owed, per session."""
    opened = SqliteEventStore(store_of(data_dir), create=False)
    try:
        return dict(opened.due_entries())
    finally:
        opened.close()


async def stored_history(data_dir: Path, session_id: str) -> list[Any]:
    """The SDK history of a stored session, read by a :class:`HostLogSession` in a new host.

    The host has no Schedule and wakes nothing: it only runs this one turn.
    """

    async def read(turn: AgentTurn) -> str:
        return json.dumps(await HostLogSession(turn).get_items())

    async with AsyncHost(read, data_dir=data_dir, wake=False, schedule=False) as host:
        reply = await (await host.open(session_id)).send("(read the history)")
    assert reply is not None
    history: list[Any] = json.loads(reply)
    return history


def text_of(item: Any) -> str:
    """The text of a history item (``<type>`` for one without text, a tool call say)."""
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return f"<{item.get('type') if isinstance(item, dict) else type(item).__name__}>"
