"""A scripted OpenAI Agents SDK bot for an AsyncHost, fake time moved timer by timer, counts.

The bot is a real SDK ``Agent`` with Schedule's tools, on the kit's scripted
model, run by :func:`~host_bridge.integrations.openai_agents.turn_runner`; it
remembers every turn it ran. Fake time moves one armed timer at a time and the
host is let become quiet after each (no sleeps): a test then sees what a due
timer caused before it looks.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents import Agent

from host_bridge.aio import AgentTurn, AsyncHost
from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.integrations.openai_agents import schedule_tools, turn_runner
from host_bridge.testing import FakeTimers, settle
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

    def __init__(self, *, strict: bool = False) -> None:
        self.model = ScriptedReminderModel()
        self.agent: Agent[Any] = Agent(
            name="assistant", tools=schedule_tools(strict=strict), model=self.model
        )
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


def quiet(host: AsyncHost) -> None:
    """Blocking: let the wake-up actor, activations, owners and agents run until none has work."""
    plugin, embedded = host.plugin, host.embedded
    wake, activation = plugin.wake_up, embedded.activation
    for _ in range(50):
        if wake is not None:
            settle(wake, timeout=TIMEOUT)
        if activation is not None:
            activation.wait_idle(TIMEOUT)
        for agent in plugin.agents():
            plugin.wait_quiet(agent, TIMEOUT)
            agent.when_idle().result(timeout=TIMEOUT)
        if wake is not None:
            settle(wake, timeout=TIMEOUT)
        status = plugin.status()
        busy = any(o.busy for o in status.owners) or any(
            a.status != "idle" for a in embedded.agents.roots()
        )
        in_flight = status.wake_up.in_flight if status.wake_up is not None else 0
        if not busy and in_flight == 0:
            return
    raise AssertionError("the host never became quiet")


def _advance(timers: FakeTimers, ms: int, host: AsyncHost) -> None:
    clock = timers.clock
    target = clock.monotonic() + ms
    quiet(host)
    for _ in range(10_000):
        armed = timers.armed()
        if not armed or clock.monotonic() + armed[0] > target:
            break
        timers.advance(armed[0])
        quiet(host)
    else:
        raise AssertionError("timers kept firing")
    timers.advance(target - clock.monotonic())
    quiet(host)


async def advance(timers: FakeTimers, ms: int, host: AsyncHost) -> None:
    """Let ``ms`` of fake time pass, timer by timer, the host quiet after each (in a thread)."""
    await asyncio.to_thread(_advance, timers, ms, host)


async def settled(host: AsyncHost) -> None:
    """Return once the host is quiet (see :func:`quiet`)."""
    await asyncio.to_thread(quiet, host)


def delivery_counts(store: Path) -> dict[str, tuple[int, int, int]]:
    """Per session of the closed store: dispatches, reminder inbox entries, their finished turns."""
    opened = SqliteEventStore(store, create=False)
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


def due_entries(store: Path) -> dict[str, Any]:
    """The closed store's due index: what is still owed, per session."""
    opened = SqliteEventStore(store, create=False)
    try:
        return dict(opened.due_entries())
    finally:
        opened.close()
