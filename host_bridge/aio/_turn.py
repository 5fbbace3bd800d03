"""One turn of the host's turn runner, and the bridge that runs it on the host's loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from actors._contract import AgentStatus, ToolDefinition, ToolResult, UserMessage
from actors._runtime import wait_for
from host_bridge._admission import TurnAdmission
from host_bridge.aio._futures import wait
from host_bridge.embedded.agents import (
    MESSAGE_EVENT,
    Turn,
    TurnInterrupted,
    completed_runs,
    tool_call_data,
    tool_result_data,
)
from host_bridge.embedded.codec import PayloadError
from host_bridge.embedded.tools import error_result

__all__ = [
    "RESERVED_PREFIXES",
    "AgentTurn",
    "LoopTurns",
    "RunnerCancelledError",
    "TurnRunner",
    "admission_on_loop",
    "current_turn",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

_M = TypeVar("_M")

RESERVED_PREFIXES = ("schedule/", "inbox/", "turn/")
"""Event types the module writes; :meth:`AgentTurn.record` refuses them."""

_current: contextvars.ContextVar[AgentTurn] = contextvars.ContextVar("dsh_schedule_turn")


def current_turn() -> AgentTurn:
    """The turn the calling task runs in (tools of a framework find their turn here).

    Raises ``LookupError`` outside a turn.
    """
    try:
        return _current.get()
    except LookupError:
        raise LookupError("no Schedule turn is running in this task") from None


def _cancelled_result(name: str) -> ToolResult:
    return error_result("tool_cancelled", "The tool call was cancelled.", name)


class AgentTurn:
    """What the host's turn runner receives: one turn of one agent.

    ``text`` is the text of the ``message`` the turn answers, ``source`` who sent it
    (``{"kind": "user"}`` for a person; a reminder carries
    ``{"kind": "plugin", "plugin": "tool-schedule", ...}``), ``tools`` the tool
    definitions the agent sees. Every call awaits without blocking the loop.
    """

    __slots__ = ("_turn", "agent_id", "message", "session_id", "source", "text", "tools")

    def __init__(self, turn: Turn) -> None:
        self._turn = turn
        self.session_id: str = turn.agent.session.id
        self.agent_id: str = turn.agent.id
        self.message: UserMessage = turn.message
        self.text: str = turn.message.text
        self.source: Mapping[str, Any] = turn.message.source
        registry = turn.tools
        self.tools: tuple[ToolDefinition, ...] = (
            () if registry is None else tuple(registry.tools_for(turn.agent))
        )

    @property
    def is_reminder(self) -> bool:
        """Whether the message is a Schedule reminder (not a person's message)."""
        return self.source.get("plugin") == "tool-schedule"

    async def call_tool(
        self, name: str, arguments: Any, *, call_id: str | None = None
    ) -> ToolResult:
        """Run tool ``name`` for this agent; the call and its result are recorded in the log.

        ``arguments`` is a JSON value or the model's JSON text (the tools decode
        text once, strictly). ``call_id`` is the model's tool-call id for this
        call: the tool's span reports it as ``gen_ai.tool.call.id``, so it joins
        the model's and a framework's records of the call. Without one (or with
        one that is not a string of 1 to 256 characters) the call gets a
        synthetic id, which no span reports. A failing tool, or a session that can no longer
        record the call, is an ``is_error`` result, never an exception.
        Cancelling the awaiting task cancels the call while it can still stop
        (a Schedule call before its append: then nothing changed); a call that
        went on completes. Either way the log records how it ended.
        """
        registry = self._turn.tools
        if registry is None:
            raise RuntimeError("this agent has no tool registry")
        agent = self._turn.agent
        session = agent.session
        try:
            try:
                await wait(session.submit_append(MESSAGE_EVENT, tool_call_data(name, arguments)))
            except PayloadError:
                unstored = tool_call_data(name, None, stored=False)
                await wait(session.submit_append(MESSAGE_EVENT, unstored))
        except Exception:
            _log.warning("the call of %s could not be recorded; it does not run", name)
            return error_result("tool_failed", "The tool failed.", name)
        call = registry.submit(name, arguments, agent=agent, call_id=call_id)
        recorded: concurrent.futures.Future[None] = concurrent.futures.Future()

        def record_outcome(done: concurrent.futures.Future[ToolResult]) -> None:
            outcome = (
                tool_result_data(name, _cancelled_result(name)) | {"cancelled": True}
                if done.cancelled()
                else tool_result_data(name, done.result())
            )
            appended = session.submit_append(MESSAGE_EVENT, outcome)
            appended.add_done_callback(lambda _: recorded.set_result(None))

        call.add_done_callback(record_outcome)  # on whichever thread ends it, cancelled or not
        result = await wait(call)
        await asyncio.shield(wait(recorded))
        return result

    async def record(self, type: str, data: Any) -> None:
        """Append a record of the host's (a framework's history, say) to the session log.

        It is kept in the same store as the turn, tagged with this run of it:
        :meth:`records` leaves out the records of a run that never completed.
        ``type`` must contain a ``/`` and not start with one of
        :data:`RESERVED_PREFIXES` (``ValueError``); ``data`` must be storable
        (JSON values). The event's data is ``{"turn": <run>, "data": data}``.
        """
        if "/" not in type or type.startswith(RESERVED_PREFIXES):
            raise ValueError(
                f"event type {type!r} must contain '/' and not start with {RESERVED_PREFIXES}"
            )
        tagged = {"turn": self._turn.started_seq, "data": data}
        await wait(self._turn.agent.session.submit_append(type, tagged))

    def records(self, type: str) -> list[Any]:
        """The data of the ``type`` records of completed turns and of this one, oldest first.

        A run that a crash or a stop cut before its completion was recorded is
        run again; its records are left out, so history never holds a cut run
        beside its re-run.
        """
        events = self._turn.agent.session.events
        kept = completed_runs(events)
        kept.add(self._turn.started_seq or -1)
        return [
            event.data["data"]
            for event in events
            if event.type == type
            and isinstance(event.data, dict)
            and event.data.get("turn") in kept
            and "data" in event.data
        ]

    def __repr__(self) -> str:
        kind = "reminder" if self.is_reminder else "message"
        return f"AgentTurn({self.session_id!r}, {kind})"


TurnRunner = Callable[[AgentTurn], Awaitable["str | None"]]
"""The host's turn: runs one turn with its framework; returns the reply text when complete.

Raising fails the turn (recorded as failed, not run again). Being cancelled
(the host stopping) leaves it unfinished: the next resume of the session runs
it again, so a reminder is presented again rather than lost.
"""


class RunnerCancelledError(RuntimeError):
    """The turn runner ended with ``CancelledError`` although nobody cancelled its turn.

    The turn is recorded as failed (and not run again); only a stop, which
    cancels the turn's task, leaves a turn unfinished.
    """


class LoopTurns:
    """The embedded agents' model that runs a :data:`TurnRunner` on an asyncio loop.

    Called on an agent's turn actor; the turn's coroutine runs on ``loop`` as a
    task, and the turn actor waits for it (a greenlet on the gevent runtime is
    suspended, not the hub). :meth:`cut` cancels every running turn and makes
    later ones end at once: they raise :class:`TurnInterrupted`, so their inbox
    entries stay unfinished. So does a turn whose task something else
    cancelled (the loop shutting down); a runner that ends with
    ``CancelledError`` by itself fails its turn (:class:`RunnerCancelledError`).
    """

    def __init__(self, run_turn: TurnRunner, loop: asyncio.AbstractEventLoop) -> None:
        self._run_turn = run_turn
        self._loop = loop
        self._lock = threading.Lock()
        self._running: set[concurrent.futures.Future[str | None]] = set()
        self._cut = False

    @property
    def running(self) -> int:
        """How many turns run now."""
        with self._lock:
            return len(self._running)

    def __call__(self, turn: Turn) -> str | None:
        """Run one turn on the loop and wait for its reply (the embedded ``Model``)."""
        with self._lock:
            if self._cut:
                raise TurnInterrupted("the host is stopping")
            try:
                future = asyncio.run_coroutine_threadsafe(self._run(AgentTurn(turn)), self._loop)
            except RuntimeError:  # the loop is closed
                raise TurnInterrupted("the host's loop is closed") from None
            self._running.add(future)
        try:
            reply = wait_for(future)
        except concurrent.futures.CancelledError:
            raise TurnInterrupted("the turn was cancelled") from None
        finally:
            with self._lock:
                self._running.discard(future)
        if reply is not None and not isinstance(reply, str):
            _log.warning("a turn runner returned %s, not a str or None", type(reply).__name__)
            return str(reply)
        return reply

    async def _run(self, turn: AgentTurn) -> str | None:
        _current.set(turn)  # this task's own context: tasks the framework starts inherit it
        try:
            return await self._run_turn(turn)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling() == 0:
                # Nobody cancelled this task: the runner itself ended cancelled (a framework's
                # inner task). That is a failed turn, not a stop; re-running it would
                # present the reminder again at every wake-up.
                raise RunnerCancelledError("the turn runner ended with CancelledError") from None
            raise

    def cut(self) -> int:
        """Cancel every running turn and refuse new ones; how many were cancelled."""
        with self._lock:
            self._cut = True
            running = list(self._running)
        for future in running:
            future.cancel()
        return len(running)


def admission_on_loop(
    loop: asyncio.AbstractEventLoop,
    run: Callable[[_M], Awaitable[object]],
    on_status: Callable[[AgentStatus], None] | None = None,
    *,
    ready: Callable[[_M], bool] | None = None,
) -> TurnAdmission[_M]:
    """A :class:`~host_bridge.TurnAdmission` whose turns run as ``await run(message)`` on ``loop``.

    For a host with agents of its own on asyncio: Schedule starts a reminder's
    turn from its own thread; the turn is handed to the loop
    (``call_soon_threadsafe``) and the admission hears it ended, however it
    ended (a failed turn is logged). ``on_status`` and ``ready`` are the
    admission's. If the loop is closed a turn does not start (the admission
    drops it with a logged error, as it does when ``start_turn`` raises).
    """

    async def turn(message: _M) -> None:
        try:
            await run(message)
        except Exception:
            _log.exception("a turn run on the loop failed")
        finally:
            admission.turn_finished()

    def start_turn(message: _M) -> None:
        if loop.is_closed():
            raise RuntimeError("the loop is closed")
        work = turn(message)
        try:
            asyncio.run_coroutine_threadsafe(work, loop)
        except BaseException:
            work.close()
            raise

    admission: TurnAdmission[_M] = TurnAdmission(start_turn, on_status, ready=ready)
    return admission
