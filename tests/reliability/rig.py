"""An embedded host on real SQLite with fake time, driven tool call by tool call."""

from __future__ import annotations

import sqlite3
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.embedded.agents import EmbeddedAgent, Turn
from host_bridge.embedded.codec import decode_payload
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import EventStore
from host_bridge.protocols import ToolResult
from host_bridge.testing import FakeClock, FakeTimers, call_tool, settle
from messages import SCHEDULE_CHANGE_TYPE
from messages._text import canonical_json
from tests.changes import change_of
from tests.schema_check import checked

TOOL_TIMEOUT = 10.0


class Recorder:
    """A model that records the id of every reminder it is shown."""

    def __init__(self) -> None:
        self.reminders: list[str] = []

    def __call__(self, turn: Turn) -> str | None:
        text = turn.message.text
        if text.startswith("[SCHEDULE REMINDER]"):
            for line in text.split("\n"):
                if line.startswith("schedule_id_json: "):
                    self.reminders.append(line.split('"')[1])
        return None


class Rig:
    """An :class:`EmbeddedHost` in ``data_dir`` with Schedule installed and fake time."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.clock = FakeClock()
        self.timers = FakeTimers(self.clock)
        self.host = EmbeddedHost(data_dir, clock=self.clock, timers=self.timers)
        self.plugin: SchedulePlugin = install_schedule(self.host.context())
        self.models: dict[str, Recorder] = {}
        self.closed = False

    @property
    def store(self) -> EventStore:
        assert self.host.persistence is not None
        return self.host.persistence

    @property
    def path(self) -> Path:
        return store_path(self.data_dir)

    def agent(self, session_id: str = "s1") -> EmbeddedAgent:
        model = Recorder()
        agent = self.host.spawn_root(session_id=session_id, model=model)
        self.models[agent.id] = model
        self.settle(agent)
        return agent

    def call(self, agent: EmbeddedAgent, name: str, arguments: Any) -> dict[str, Any]:
        """Run a tool; check its value against the schema and its content bytes; settle."""
        result = call_tool(self.host, agent, name, arguments, timeout=TOOL_TIMEOUT)
        self.settle(agent)  # the drive a successful preflight requests runs too
        return self.value(name, result)

    def submit(self, agent: EmbeddedAgent, name: str, arguments: Any) -> Future[ToolResult]:
        """Start a tool call without waiting; the owner has taken the request when this returns."""
        future = self.host.tools.submit(name, arguments, agent=agent)
        owner = self.plugin.owner_of(agent)
        assert owner is not None
        settle(owner)
        return future

    @staticmethod
    def value(name: str, result: ToolResult) -> dict[str, Any]:
        assert not result.is_error, result
        assert result.content == canonical_json(result.value)
        value: dict[str, Any] = checked(name, result.value)
        return value

    def create(self, agent: EmbeddedAgent, prompt: str, seconds: int = 60) -> dict[str, Any]:
        return self.call(agent, "schedule_create", {"prompt": prompt, "after_seconds": seconds})

    def list_ids(self, agent: EmbeddedAgent) -> list[str] | dict[str, Any]:
        value = self.call(agent, "schedule_list", {})
        if "schedules" not in value:
            return value
        return [view["id"] for view in value["schedules"]]

    def delete(self, agent: EmbeddedAgent, schedule_id: str) -> dict[str, Any]:
        return self.call(agent, "schedule_delete", {"id": schedule_id})

    def settle(self, agent: EmbeddedAgent) -> None:
        for _ in range(20):
            self.plugin.wait_quiet(agent)
            agent.when_idle().result(timeout=TOOL_TIMEOUT)
            status = self.plugin.wait_quiet(agent)
            # an owner waiting for idle while the agent is idle is about to drive again
            if agent.status == "idle" and not status.busy and not status.waiting_for_idle:
                return
        raise AssertionError("the host never settled")

    def advance(self, ms: int, *agents: EmbeddedAgent) -> None:
        self.timers.advance(ms)
        for agent in agents:
            self.settle(agent)

    def reminders(self, agent: EmbeddedAgent) -> list[str]:
        return list(self.models[agent.id].reminders)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.plugin.dispose().result(timeout=TOOL_TIMEOUT)
            self.host.close()


def durable_changes(path: Path, session_id: str) -> list[tuple[str, str]]:
    """(operation, id) of the session's durable schedule changes, read with a plain connection.

    Works while a host has the store open (WAL readers do not block the writer).
    """
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT type, data FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    finally:
        conn.close()
    changes = []
    for type_, data in rows:
        if type_ != SCHEDULE_CHANGE_TYPE:
            continue
        changes.append(change_of(decode_payload(data)))
    return changes
