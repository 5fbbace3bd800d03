"""Call a tool for an agent the way a host does, and wait for its result."""

from __future__ import annotations

import itertools
import json
from typing import Any, Protocol

from actors._contract import Agent, AgentRegistry, ToolRegistry, ToolResult, tool_call
from actors._runtime import wait_for

__all__ = ["call_tool", "call_tool_json"]

_call_ids = itertools.count(1)


class _HasTools(Protocol):
    """A host (``FakeHost``, ``EmbeddedHost``, a ``HostContext``) exposing its tool registry."""

    @property
    def tools(self) -> ToolRegistry | None: ...


def _registry(host: ToolRegistry | _HasTools) -> ToolRegistry:
    tools = getattr(host, "tools", None)
    if tools is not None and callable(getattr(tools, "get", None)):
        return tools  # type: ignore[no-any-return]
    if callable(getattr(host, "get", None)) and callable(getattr(host, "register", None)):
        return host  # type: ignore[return-value]
    raise TypeError(f"{type(host).__name__} is neither a ToolRegistry nor a host with .tools")


def _agent(host: object, agent: Agent | str) -> Agent:
    if not isinstance(agent, str):
        return agent
    registry: AgentRegistry | None = getattr(host, "agents", None)
    if registry is None:
        raise TypeError("an agent id needs a host with .agents; pass the Agent itself")
    found = registry.get(agent)
    if found is None:
        raise LookupError(f"no live agent {agent!r}")
    return found


def call_tool(
    host: ToolRegistry | _HasTools,
    agent: Agent | str,
    name: str,
    arguments: Any,
    *,
    timeout: float = 10.0,
    call_id: str | None = None,
) -> ToolResult:
    """Run tool ``name`` for ``agent`` exactly as a host does; its ``ToolResult``.

    ``host`` is a ``ToolRegistry`` or anything holding one in ``.tools``
    (``FakeHost``, ``EmbeddedHost``, a ``HostContext``); ``agent`` is the
    ``Agent`` or, with a host that has ``.agents``, its id. The tool visible to
    that agent is looked up with ``get(name, agent=agent)``, called with a
    ``ToolCall`` carrying ``call_id`` (the model's tool-call id a host would
    pass on) or, without one, a fresh synthetic id, and its future is waited for (in
    the caller's style: on a gevent hub only the calling greenlet waits).

    Unlike a registry's ``execute``, nothing is turned into an error value: a
    tool that is not visible raises ``LookupError``, an exception of the tool
    or of its future propagates, a result that is not a ``ToolResult`` raises
    ``TypeError``, and no answer within ``timeout`` seconds raises ``TimeoutError``.
    """
    tools = _registry(host)
    target = _agent(host, agent)
    tool = tools.get(name, agent=target)
    if tool is None:
        raise LookupError(f"no tool {name!r} is visible to agent {target.id!r}")
    call = tool_call(target, call_id, lambda: f"kit-call-{next(_call_ids)}")
    future = tool.execute(arguments, call)
    try:
        result = wait_for(future, timeout)
    except TimeoutError:
        if future.done():
            raise
        raise TimeoutError(
            f"tool {name!r} did not answer agent {target.id!r} within {timeout} seconds"
        ) from None
    if not isinstance(result, ToolResult):
        raise TypeError(f"tool {name!r} returned {type(result).__name__}, not a ToolResult")
    return result


def call_tool_json(
    host: ToolRegistry | _HasTools,
    agent: Agent | str,
    name: str,
    arguments: Any,
    *,
    timeout: float = 10.0,
    call_id: str | None = None,
) -> dict[str, Any]:
    """:func:`call_tool`, then the result's ``content`` parsed as a JSON object.

    That is what a model reads; Schedule's domain errors (``{"code", "message"}``)
    are ordinary values here too. Content that is not a JSON object raises ``ValueError``.
    """
    result = call_tool(host, agent, name, arguments, timeout=timeout, call_id=call_id)
    try:
        value = json.loads(result.content)
    except (TypeError, ValueError) as error:
        raise ValueError(f"tool {name!r} content is not JSON: {result.content!r:.200}") from error
    if not isinstance(value, dict):
        raise ValueError(f"tool {name!r} content is not a JSON object: {result.content!r:.200}")
    return value
