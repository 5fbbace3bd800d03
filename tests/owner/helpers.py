"""Shared helpers of the owner tests: calling the installed tools of one agent."""

from __future__ import annotations

from typing import Any

from host_bridge.plugin import SchedulePlugin
from host_bridge.testing import FakeAgent, FakeHost, call_tool, settle
from messages.text import canonical_json
from tests.schema_check import checked


class Tools:
    """Calls the installed tools of one agent and validates every value."""

    def __init__(self, host: FakeHost, plugin: SchedulePlugin, agent: FakeAgent) -> None:
        self.host = host
        self.plugin = plugin
        self.agent = agent

    def call(self, name: str, arguments: Any, *, agent: FakeAgent | None = None) -> Any:
        result = call_tool(self.host, agent or self.agent, name, arguments, timeout=5)
        assert not result.is_error, result
        assert result.content == canonical_json(result.value)
        return checked(name, result.value)

    def settle(self) -> None:
        owner = self.plugin.owner_of(self.agent)
        assert owner is not None
        settle(owner)


def error(code: str, value: Any) -> str:
    """Assert ``value`` is an error value with ``code``; its message."""
    assert set(value) >= {"code", "message"}, value
    assert value["code"] == code, value
    return str(value["message"])
