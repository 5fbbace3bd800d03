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
``schedule_tools(calendar_rules=False)`` offers the catalog without the ``cron``
selector, for a host installed with ``calendar_rules=False``.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from agents import Agent, FunctionTool, Runner, SessionSettings, Tool, TResponseInputItem
from agents.memory.session_settings import resolve_session_limit
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


def schedule_tools(*, strict: bool = False, calendar_rules: bool = True) -> list[Tool]:
    """Schedule's three tools as Agents SDK function tools.

    The parameter schemas are the catalog's (:func:`host_bridge.openai_tools`),
    kept as they are: ``strict_json_schema=False``, because the SDK's strict
    conversion would close the open roots and make every selector required.
    The model's JSON arguments reach the tool unchanged and the tool's
    content (its value or its error, as JSON) is the tool output. The
    model's tool-call id (``ToolContext.tool_call_id``) is passed on
    (``AgentTurn.call_tool(..., call_id=...)``): the tool's span carries it
    as ``gen_ai.tool.call.id``.

    ``strict=True`` gives the strict-mode layout (``openai_tools(strict=True)``,
    ``strict_json_schema=True``; the SDK keeps it unchanged) and passes the
    arguments through :func:`host_bridge.normalize_strict_arguments` first.

    ``calendar_rules=False`` offers the tools without the ``cron`` selector
    (``openai_tools(calendar_rules=False)``). It only shapes what the model
    is offered: what a call may do is the host's to decide, so pass what the
    host was installed with (``AsyncHost(..., calendar_rules=False)``).
    """
    offered = openai_tools(strict=strict, calendar_rules=calendar_rules)
    return [
        _function_tool(tool["function"], strict=strict, calendar_rules=calendar_rules)
        for tool in offered
    ]


def _function_tool(
    function: Mapping[str, Any], *, strict: bool, calendar_rules: bool
) -> FunctionTool:
    name: str = function["name"]

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        try:
            turn = current_turn()
        except LookupError:
            _log.warning("%s was called outside a host turn", name)
            return json.dumps(
                {"code": "no_turn", "message": _NO_TURN, "tool": name}, separators=(",", ":")
            )
        given: Any = (
            normalize_strict_arguments(name, arguments, calendar_rules=calendar_rules)
            if strict
            else arguments
        )
        try:
            result = await turn.call_tool(name, given, call_id=context.tool_call_id)
        except Exception:  # the turn's session is gone: say so, never invite a blind retry
            _log.warning("%s could not run in session %r", name, turn.session_id, exc_info=True)
            return json.dumps(
                {"code": "tool_failed", "message": "The tool failed.", "tool": name},
                separators=(",", ":"),
            )
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

    Made in a turn (``turn`` defaults to :func:`~host_bridge.aio.current_turn`);
    ``session_id`` is the host session's id. Kept across turns of its
    conversation (one session per chat, as with the SDK's own sessions), it
    follows the turn running now; changing it outside a turn of its
    conversation raises ``RuntimeError``. Every change is appended as a
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
        """The history (fresh copies), oldest first; the newest ``limit`` items when given.

        ``limit`` (or the settings' limit) counts as with ``SQLiteSession``:
        ``0`` gives none, a negative one all.
        """
        items = self._history()
        count = resolve_session_limit(limit, self.session_settings)
        if count is None or count < 0:
            return items
        return items[-count:] if count > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` to the history (one record)."""
        if items:
            plain = json.loads(json.dumps(list(items), ensure_ascii=False))
            await self._turn(changing=True).record(HISTORY_EVENT, {"add": plain})

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; ``None`` when the history is empty."""
        turn = self._turn(changing=True)
        items = _fold_history(turn.records(HISTORY_EVENT))
        if not items:
            return None
        await turn.record(HISTORY_EVENT, {"pop": 1})
        return items[-1]

    async def clear_session(self) -> None:
        """Forget the whole history."""
        await self._turn(changing=True).record(HISTORY_EVENT, {"clear": True})

    def _turn(self, *, changing: bool = False) -> AgentTurn:
        """The running turn of this conversation; else, for reading, the one it was made in."""
        try:
            running: AgentTurn | None = current_turn()
        except LookupError:
            running = None
        if running is not None and running.session_id == self.session_id:
            return running
        if changing:
            raise RuntimeError(
                f"the history of session {self.session_id!r} changes only in one of its turns"
            )
        return self.turn

    def _history(self) -> list[TResponseInputItem]:
        return _fold_history(self._turn().records(HISTORY_EVENT))


def _fold_history(records: Sequence[Any]) -> list[TResponseInputItem]:
    """The history :data:`HISTORY_EVENT` records (oldest first) leave; others are logged."""
    items: list[TResponseInputItem] = []
    for data in records:
        if isinstance(data, Mapping) and set(data) == {"add"} and isinstance(data["add"], list):
            items.extend(copy.deepcopy(data["add"]))  # callers may change what they get
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
    ``max_turns``, ``context``, ``hooks``, ...); ``session`` is the runner's own
    (``TypeError``).
    """
    if "session" in run_options:
        raise TypeError("turn_runner keeps the history in a HostLogSession; do not pass one")

    async def run_turn(turn: AgentTurn) -> str | None:
        session = HostLogSession(turn)
        result = await Runner.run(agent, turn.text, session=session, **run_options)
        output = result.final_output
        return None if output is None else str(output)

    return run_turn
