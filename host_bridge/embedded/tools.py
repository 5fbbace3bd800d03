"""A thread-safe tool registry scoped per agent, with optional global tools."""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from actors._contract import Agent, ToolDefinition, ToolResult, tool_call
from actors._futures import resolved
from actors._runtime import wait_for

__all__ = ["ScopedToolRegistry", "ToolConflictError", "error_result"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


class ToolConflictError(Exception):
    """A tool with the same name is already visible in the scope."""


def error_result(code: str, message: str, name: str) -> ToolResult:
    """The ``is_error`` result of a host-level failure: ``{"code", "message", "tool"}``."""
    value = {"code": code, "message": message, "tool": name}
    content = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return ToolResult(is_error=True, value=value, content=content)


class _Outcome(Future[ToolResult]):
    """The judged result of a started tool; cancelling it cancels the tool's own future."""

    def __init__(self, started: Future[ToolResult]) -> None:
        super().__init__()
        self._started = started

    def cancel(self) -> bool:
        """Cancel the tool call; False (and the result comes) once it can no longer stop."""
        if not (self._started.cancel() or self._started.cancelled()):
            return False
        return super().cancel()


class ScopedToolRegistry:
    """A ``ToolRegistry``: tools registered for one agent are invisible to others.

    Scopes are keyed by agent id. A *global* tool (:meth:`register_global`) is
    visible to every agent; a scoped tool may not share a global tool's name.
    Failures of lookup or execution become ``ToolResult(is_error=True)`` values
    with code ``unknown_tool``, ``tool_failed`` or ``tool_timeout`` and a fixed
    message; exception text is logged (``dsh_schedule.tools``), never returned.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scoped: dict[str, dict[str, ToolDefinition]] = {}
        self._global: dict[str, ToolDefinition] = {}
        self._call_ids = itertools.count(1)

    def register(self, tool: ToolDefinition, *, agent: Agent) -> Callable[[], None]:
        """Offer ``tool`` to ``agent`` only; returns an idempotent ``unregister``.

        Raises :class:`ToolConflictError` if ``agent`` already sees a tool of that name.
        """
        agent_id = agent.id
        with self._lock:
            scope = self._scoped.setdefault(agent_id, {})
            if tool.name in scope or tool.name in self._global:
                raise ToolConflictError(
                    f"tool {tool.name!r} is already registered for agent {agent_id!r}"
                )
            scope[tool.name] = tool

        def unregister() -> None:
            with self._lock:
                current = self._scoped.get(agent_id)
                if current is not None and current.get(tool.name) is tool:
                    del current[tool.name]
                    if not current:
                        del self._scoped[agent_id]

        return unregister

    def register_global(self, tool: ToolDefinition) -> Callable[[], None]:
        """Offer ``tool`` to every agent; returns an idempotent ``unregister``.

        Raises :class:`ToolConflictError` if any scope already has that name.
        """
        with self._lock:
            if tool.name in self._global or any(tool.name in s for s in self._scoped.values()):
                raise ToolConflictError(f"tool {tool.name!r} is already registered")
            self._global[tool.name] = tool

        def unregister() -> None:
            with self._lock:
                if self._global.get(tool.name) is tool:
                    del self._global[tool.name]

        return unregister

    def get(self, name: str, *, agent: Agent | None = None) -> ToolDefinition | None:
        """The tool ``name`` visible to ``agent`` (only global tools when ``agent`` is None)."""
        with self._lock:
            if agent is not None:
                scoped = self._scoped.get(agent.id, {}).get(name)
                if scoped is not None:
                    return scoped
            return self._global.get(name)

    def tools_for(self, agent: Agent) -> list[ToolDefinition]:
        """Every tool visible to ``agent``, sorted by name (for model callables)."""
        with self._lock:
            visible = dict(self._global)
            visible.update(self._scoped.get(agent.id, {}))
        return [visible[name] for name in sorted(visible)]

    def submit(
        self, name: str, arguments: Any, *, agent: Agent, call_id: str | None = None
    ) -> Future[ToolResult]:
        """Start a tool for ``agent`` without waiting; the future never fails.

        ``call_id`` is the model's tool-call id, when the caller has it: the
        tool's ``ToolCall`` carries it (and its span reports it). Without one,
        or with one that is not a string of 1 to 256 characters, the call gets
        a synthetic id (``ToolCall.synthetic``).

        An unknown tool, a tool that raises, a failed future or a non-``ToolResult``
        value resolve to an ``is_error`` result. Cancelling the returned future
        cancels the tool's own: it succeeds while the tool can still stop (a
        Schedule call before its append), and fails once the tool went on, whose
        result then arrives.
        """
        started = self._start(name, arguments, agent, call_id)
        if isinstance(started, ToolResult):
            return resolved(started)
        outer = _Outcome(started)

        def settle(done: Future[ToolResult]) -> None:
            if done.cancelled():
                Future.cancel(outer)  # the call stopped before it changed anything
            elif outer.set_running_or_notify_cancel():  # False: cancelled meanwhile
                outer.set_result(self._outcome(name, agent, done))

        started.add_done_callback(settle)
        return outer

    def execute(
        self,
        name: str,
        arguments: Any,
        *,
        agent: Agent,
        timeout: float | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """Run a tool for ``agent`` and wait (at most ``timeout`` seconds) for its result.

        Judged like :meth:`submit` (``call_id`` too), but waiting on the tool's own future (no
        second future). The wait follows the caller (:func:`actors._runtime.wait_for`):
        a model running in a greenlet actor suspends only its greenlet, so the
        tool's owner can answer on the same gevent hub.
        """
        started = self._start(name, arguments, agent, call_id)
        if isinstance(started, ToolResult):
            return started
        try:
            wait_for(started, timeout)
        except TimeoutError:
            if not started.done():
                _log.warning("tool %s timed out for agent %s", name, agent.id)
                return error_result("tool_timeout", "The tool did not finish in time.", name)
        except Exception:
            if not started.done():
                raise
        return self._outcome(name, agent, started)

    def _start(
        self, name: str, arguments: Any, agent: Agent, call_id: str | None
    ) -> Future[ToolResult] | ToolResult:
        """The tool's future, or the error result when it is unknown or raised."""
        tool = self.get(name, agent=agent)
        if tool is None:
            return error_result("unknown_tool", f"No tool named {name!r} is available.", name)
        call = tool_call(agent, call_id, self._synthetic_id)
        try:
            return tool.execute(arguments, call)
        except Exception:
            _log.warning("tool %s raised for agent %s", name, agent.id, exc_info=True)
            return error_result("tool_failed", "The tool failed.", name)

    def _synthetic_id(self) -> str:
        return f"call-{next(self._call_ids)}"  # (count() is thread-safe)

    @staticmethod
    def _outcome(name: str, agent: Agent, done: Future[ToolResult]) -> ToolResult:
        try:
            result = done.result()
        except Exception:
            _log.warning("tool %s failed for agent %s", name, agent.id, exc_info=True)
            return error_result("tool_failed", "The tool failed.", name)
        if not isinstance(result, ToolResult):
            _log.warning("tool %s returned %r instead of a ToolResult", name, type(result))
            return error_result("tool_failed", "The tool failed.", name)
        return result
