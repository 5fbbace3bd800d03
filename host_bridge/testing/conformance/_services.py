"""Checks of ``ToolRegistry``, the clocks and ``Timers``."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from typing import Any

from actors._contract import ToolCall, ToolDefinition, ToolResult
from host_bridge._futures import resolved
from host_bridge.testing.conformance._base import ConformanceBase, expect, fail

__all__ = ["ServiceChecks"]

TOOLS = "ToolRegistry"
CLOCK = "HostContext.clock"
MONOTONIC = "HostContext.monotonic"
TIMERS = "Timers.call_later"
CANCEL = "Cancellable.cancel"

MAX_EPOCH_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z, the last instant Schedule accepts."""


class _Probe:
    """A tool that records every call it gets."""

    def __init__(self, name: str) -> None:
        self.calls: list[tuple[Any, ToolCall]] = []
        self.definition = ToolDefinition(
            name=name,
            description="A conformance probe: answers what it was called with.",
            parameters={"type": "object"},
            output_schema={"type": "object"},
            execute=self._execute,
            render=lambda value: json.dumps(value, sort_keys=True),
            present=lambda value: "probe",
        )

    def _execute(self, arguments: Any, call: ToolCall) -> Future[ToolResult]:
        self.calls.append((arguments, call))
        value = {"agent": call.agent.id}
        return resolved(ToolResult(False, value, json.dumps(value)))


class ServiceChecks(ConformanceBase):
    """Scoped tools, integer clocks and cancellable timers."""

    def _execute_elsewhere(self, probe: _Probe, agent: Any) -> None:
        tools = self.ctx.tools
        assert tools is not None
        before = len(probe.calls)
        try:
            result = tools.execute(probe.definition.name, {}, agent=agent)
        except Exception:
            result = None
        expect(
            len(probe.calls) == before,
            TOOLS,
            f"a tool not registered for {agent.id!r} ran for it",
        )
        expect(
            result is None or result.is_error,
            TOOLS,
            f"executing an unknown tool for {agent.id!r} gave a non-error result {result!r}",
        )

    def test_tools_are_scoped_to_the_agent_they_were_registered_for(self) -> None:
        """``register(tool, agent=a)`` offers the tool to ``a`` only: ``get(name,
        agent=a)`` finds it, another agent neither sees nor runs it."""
        tools = self.ctx.tools
        assert tools is not None
        mine, _ = self.spawn()
        other, _ = self.spawn()
        probe = _Probe("conformance_probe")
        unregister = tools.register(probe.definition, agent=mine)
        try:
            expect(
                tools.get(probe.definition.name, agent=mine) is probe.definition,
                TOOLS,
                "get(name, agent=owner) does not return the registered tool",
            )
            expect(
                tools.get(probe.definition.name, agent=other) is None,
                TOOLS,
                "a tool registered for one agent is visible to another",
            )
            self._execute_elsewhere(probe, other)
        finally:
            unregister()

    def test_tool_call_names_the_calling_agent(self) -> None:
        """``execute(name, arguments, agent=a)`` runs the tool with ``ToolCall.agent is a``
        and the arguments given, and returns the tool's result."""
        tools = self.ctx.tools
        assert tools is not None
        agent, _ = self.spawn()
        probe = _Probe("conformance_probe")
        unregister = tools.register(probe.definition, agent=agent)
        try:
            result = tools.execute(probe.definition.name, {"x": 1}, agent=agent)
        finally:
            unregister()
        expect(len(probe.calls) == 1, TOOLS, f"the tool ran {len(probe.calls)} times for one call")
        arguments, call = probe.calls[0]
        expect(call.agent is agent, TOOLS, "ToolCall.agent is not the calling agent")
        expect(isinstance(call.call_id, str), TOOLS, "ToolCall.call_id is not a string")
        expect(arguments == {"x": 1}, TOOLS, f"the tool got arguments {arguments!r}")
        expect(
            isinstance(result, ToolResult) and result.value == {"agent": agent.id},
            TOOLS,
            f"execute returned {result!r}, not the tool's result",
        )

    def test_register_refuses_a_name_conflict(self) -> None:
        """Registering a second tool with the same name for the same agent raises (the
        first stays registered)."""
        tools = self.ctx.tools
        assert tools is not None
        agent, _ = self.spawn()
        first, second = _Probe("conformance_probe"), _Probe("conformance_probe")
        unregister = tools.register(first.definition, agent=agent)
        try:
            try:
                extra = tools.register(second.definition, agent=agent)
            except Exception:
                pass
            else:
                extra()
                fail(TOOLS, "register accepted a second tool with the same name for one agent")
            expect(
                tools.get("conformance_probe", agent=agent) is first.definition,
                TOOLS,
                "a refused registration replaced the first tool",
            )
        finally:
            unregister()

    def test_unregister_removes_the_tool(self) -> None:
        """The callable ``register`` returns removes the tool from that agent; the name
        can then be registered again."""
        tools = self.ctx.tools
        assert tools is not None
        agent, _ = self.spawn()
        probe = _Probe("conformance_probe")
        tools.register(probe.definition, agent=agent)()
        expect(tools.get("conformance_probe", agent=agent) is None, TOOLS, "unregister kept it")
        self._execute_elsewhere(probe, agent)
        tools.register(probe.definition, agent=agent)()

    # --- clocks and timers ------------------------------------------------------------------

    def test_clock_returns_integer_epoch_milliseconds(self) -> None:
        """``clock()`` returns the wall clock as an ``int`` of epoch milliseconds (not a
        float, not a bool), within 0001-01-01 … 9999-12-31."""
        now = self.ctx.clock()
        expect(type(now) is int, CLOCK, f"clock() returned {type(now).__name__} {now!r}, not int")
        expect(0 <= now <= MAX_EPOCH_MS, CLOCK, f"clock() returned {now}, out of range")

    def test_monotonic_returns_integer_milliseconds_that_never_go_back(self) -> None:
        """``monotonic()`` returns an ``int`` of milliseconds that never decreases."""
        readings = [self.ctx.monotonic() for _ in range(3)]
        for value in readings:
            expect(type(value) is int, MONOTONIC, f"monotonic() returned {value!r}, not int")
        expect(readings == sorted(readings), MONOTONIC, f"monotonic() went back: {readings}")

    def test_call_later_fires_once_after_the_delay_on_the_monotonic_clock(self) -> None:
        """``call_later(delay_ms, callback)`` runs the callback once, no sooner than
        ``delay_ms`` after it was armed as measured by ``monotonic()`` (the clock the
        timers run on)."""
        delay = self.time_window_ms
        fired: list[int] = []
        done: Future[None] = Future()
        lock = threading.Lock()

        def callback() -> None:
            with lock:
                fired.append(self.ctx.monotonic())
                if not done.done():
                    done.set_result(None)

        timers = self.host_timers()
        armed = self.ctx.monotonic()
        timers.call_later(delay, callback)
        if self.host.advance is not None:
            self.host.advance(delay * 3)
        self.wait(done, TIMERS, f"a {delay} ms timer firing")
        self.pass_time(delay)  # a second firing would show by now
        with lock:
            times = list(fired)
        expect(len(times) == 1, TIMERS, f"the callback ran {len(times)} times")
        # One millisecond of slack for rounding two integer readings of one clock.
        expect(
            times[0] - armed >= delay - 1,
            TIMERS,
            f"a {delay} ms timer fired after {times[0] - armed} ms of monotonic() time",
        )

    def test_cancel_stops_the_callback(self) -> None:
        """``cancel()`` on an armed timer keeps its callback from ever running, and a
        second ``cancel()`` is harmless."""
        delay = self.time_window_ms
        cancelled: list[str] = []
        timers = self.host_timers()
        handle = timers.call_later(delay, lambda: cancelled.append("ran"))
        handle.cancel()
        handle.cancel()
        later: Future[None] = Future()
        timers.call_later(delay * 2, lambda: later.set_result(None))
        if self.host.advance is not None:
            self.host.advance(delay * 3)
        self.wait(later, TIMERS, f"a {delay * 2} ms timer firing")
        expect(not cancelled, CANCEL, "a cancelled timer's callback ran")
