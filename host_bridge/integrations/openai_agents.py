"""Schedule for the OpenAI Agents SDK (``pip install 'dsh-tool-schedule[openai-agents]'``).

Three parts, each usable alone:

- :func:`schedule_tools`: ``schedule_create``, ``schedule_list`` and
  ``schedule_delete`` as SDK :class:`~agents.FunctionTool` objects for
  ``Agent(tools=...)``. They run in the :class:`~host_bridge.aio.AgentTurn` of
  the task that calls them (:func:`~host_bridge.aio.current_turn`).
- :class:`HostLogSession`: an SDK :class:`~agents.memory.Session` whose
  history is kept in the host session's own log, so the conversation, the
  reminders and the inbox are written by the same commits to the same store.
- :func:`turn_runner`: the :data:`~host_bridge.aio.TurnRunner` that runs an
  SDK agent for each turn with that session, for ``AsyncHost(run_turn)`` and
  ``dsh-schedule serve --turn-runner``.

The tools keep the catalog's open parameter schemas (``strict_json_schema=False``);
``schedule_tools(strict=True)`` offers the strict-mode layout instead and
normalises the model's nulls before the tools see them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from agents import Agent, FunctionTool, Runner, SessionSettings, Tool, TResponseInputItem
from agents.tool_context import ToolContext

from host_bridge import normalize_strict_arguments, openai_tools
from host_bridge.aio import AgentTurn, TurnRunner, current_turn

__all__ = ["HISTORY_EVENT", "HostLogSession", "schedule_tools", "turn_runner"]

_log = logging.getLogger("dsh_schedule.integrations.openai_agents")

HISTORY_EVENT = "openai_agents/items"
"""Type of the session-log records that hold the SDK history.

Data: ``{"add": [item, ...]}``, ``{"pop": 1}`` (the newest item was removed) or
``{"clear": true}``; the history is their fold, oldest first.
"""

_NO_TURN = "Schedule tools run only inside a host turn; none is running here."


def schedule_tools(*, strict: bool = False) -> list[Tool]:
    """Schedule's three tools as Agents SDK function tools.

    The parameter schemas are the catalog's (:func:`host_bridge.openai_tools`),
    kept as they are: ``strict_json_schema=False``, because the SDK's strict
    conversion would close the open roots and make every selector required.
    The model's JSON arguments reach the tool unchanged and the tool's
    content (its value or its error, as JSON) is the tool output.

    ``strict=True`` gives the strict-mode layout (``openai_tools(strict=True)``,
    ``strict_json_schema=True``; the SDK keeps it unchanged) and passes the
    arguments through :func:`host_bridge.normalize_strict_arguments` first.
    """
    return [_function_tool(tool["function"], strict=strict) for tool in openai_tools(strict=strict)]


def _function_tool(function: Mapping[str, Any], *, strict: bool) -> FunctionTool:
    name: str = function["name"]

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        try:
            turn = current_turn()
        except LookupError:
            _log.warning("%s was called outside a host turn", name)
            return json.dumps(
                {"code": "no_turn", "message": _NO_TURN, "tool": name}, separators=(",", ":")
            )
        given: Any = normalize_strict_arguments(name, arguments) if strict else arguments
        result = await turn.call_tool(name, given)
        return result.content

    return FunctionTool(
        name=name,
        description=function["description"],
        params_json_schema=dict(function["parameters"]),
        on_invoke_tool=invoke,
        strict_json_schema=strict,
    )


class HostLogSession:
    """An Agents SDK session whose history lives in the host session's log.

    One per turn (``turn`` defaults to :func:`~host_bridge.aio.current_turn`);
    ``session_id`` is the host session's id. Every change is appended as a
    :data:`HISTORY_EVENT` record with :meth:`AgentTurn.record
    <host_bridge.aio.AgentTurn.record>`, in the same store and commits as the
    turn; since the log is append-only, ``pop_item`` and ``clear_session`` are
    records too, and the history is their fold. The records of a run that was
    cut (by a stop or a crash, so that its turn runs again) are left out
    (:meth:`AgentTurn.records <host_bridge.aio.AgentTurn.records>`): the re-run
    starts from the history as it was before.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self, turn: AgentTurn | None = None, *, session_settings: SessionSettings | None = None
    ) -> None:
        self.turn = current_turn() if turn is None else turn
        self.session_id: str = self.turn.session_id
        self.session_settings = session_settings

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history, oldest first; the newest ``limit`` items when given."""
        items = self._history()
        settings = self.session_settings
        count = limit if limit is not None or settings is None else settings.limit
        if count is None:
            return items
        return items[-count:] if count > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` to the history (one record)."""
        if items:
            plain = json.loads(json.dumps(list(items), ensure_ascii=False))
            await self.turn.record(HISTORY_EVENT, {"add": plain})

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; ``None`` when the history is empty."""
        items = self._history()
        if not items:
            return None
        await self.turn.record(HISTORY_EVENT, {"pop": 1})
        return items[-1]

    async def clear_session(self) -> None:
        """Forget the whole history."""
        await self.turn.record(HISTORY_EVENT, {"clear": True})

    def _history(self) -> list[TResponseInputItem]:
        return _fold_history(self.turn.records(HISTORY_EVENT))


def _fold_history(records: Sequence[Any]) -> list[TResponseInputItem]:
    """The history :data:`HISTORY_EVENT` records (oldest first) leave; others are logged."""
    items: list[TResponseInputItem] = []
    for data in records:
        if isinstance(data, Mapping) and set(data) == {"add"} and isinstance(data["add"], list):
            items.extend(data["add"])
        elif data == {"pop": 1}:
            if items:
                items.pop()
        elif data == {"clear": True}:
            items.clear()
        else:
            _log.warning("skipped a malformed %s record", HISTORY_EVENT)
    return items


def turn_runner(agent: Agent[Any], **run_options: Any) -> TurnRunner:
    """A turn runner that answers each turn with ``Runner.run`` on ``agent``.

    It runs ``Runner.run(agent, turn.text, session=HostLogSession(turn), **run_options)``
    and returns ``str(result.final_output)`` (``None`` when there is none).
    ``run_options`` are ``Runner.run``'s other keywords (``run_config``,
    ``max_turns``, ``context``, ``hooks``, ...).
    """

    async def run_turn(turn: AgentTurn) -> str | None:
        session = HostLogSession(turn)
        result = await Runner.run(agent, turn.text, session=session, **run_options)
        output = result.final_output
        return None if output is None else str(output)

    return run_turn
