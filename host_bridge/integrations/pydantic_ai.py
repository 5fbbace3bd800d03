"""Schedule for Pydantic AI agents: the three tools as a toolset, the history in the session log.

Needs the ``pydantic-ai`` extra (``pydantic-ai-slim``)::

    agent = Agent("openai:gpt-4.1", toolsets=[ScheduleToolset()])
    async with AsyncHost(turn_runner(agent)) as host: ...

:class:`ScheduleToolset` offers ``schedule_create``, ``schedule_list`` and
``schedule_delete`` with the catalog's JSON schemas as they are, never in
strict mode, and runs each call in the running turn
(:func:`host_bridge.aio.current_turn`). :func:`history` and :func:`remember`
keep the agent's messages in the turn's session log, next to the reminders
and the inbox; :func:`turn_runner` puts the three together into a turn runner
for :class:`~host_bridge.aio.AsyncHost` or ``dsh-schedule serve --turn-runner``.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Protocol

import pydantic
import pydantic_core
from pydantic_ai import ModelMessagesTypeAdapter, ToolFailed
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

from host_bridge._schemas import tool_specs
from host_bridge.aio import AgentTurn, TurnRunner, current_turn

__all__ = ["MESSAGES_RECORD", "ScheduleToolset", "history", "remember", "turn_runner"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

MESSAGES_RECORD = "pydantic_ai/messages"
"""The session-log event type of one run's new messages (a list in the JSON form of
``ModelMessagesTypeAdapter``)."""

_ANY = pydantic_core.SchemaValidator(pydantic_core.core_schema.any_schema())


class _Decoded(dict[str, Any]):
    """Arguments Pydantic AI decoded from the model's JSON text, which they still carry."""

    text: str
    rendered: bytes  # the decoded value as it was, to tell whether a hook changed it since


class _KeepText:
    """The tools' argument validator: decodes as Pydantic AI does, accepts any value.

    An object decoded from text keeps that text, so the tools get the model's
    own text and decode it themselves, strictly (a repeated key or ``NaN`` is
    refused as in every host), unless a hook changed the arguments meanwhile.
    """

    def validate_json(self, input: str | bytes | bytearray, **options: Any) -> Any:
        value = _ANY.validate_json(input, **options)
        if not isinstance(value, dict):
            return value
        decoded = _Decoded(value)
        decoded.text = input if isinstance(input, str) else bytes(input).decode()
        decoded.rendered = pydantic_core.to_json(value)
        return decoded

    def validate_python(self, input: Any, **options: Any) -> Any:
        return _ANY.validate_python(input, **options)


def _as_sent(arguments: Any) -> Any:
    """The model's text for arguments decoded from it and unchanged since, else the value."""
    if isinstance(arguments, _Decoded) and pydantic_core.to_json(arguments) == arguments.rendered:
        return arguments.text
    return arguments


_ARGUMENTS = _KeepText()

_FAILED = "The schedule tool failed; nothing is known to have changed. Do not retry blindly."

_NO_TURN = (
    "The schedule tools are unavailable: this agent run is not part of a Schedule turn, "
    "so no reminder was created, listed or deleted."
)


class ScheduleToolset(AbstractToolset[Any]):
    """The three Schedule tools for an ``Agent``, run in the current Schedule turn.

    Each definition has the catalog's name, description and parameter schema
    (an open root: an unknown key reaches the tool and is answered
    ``invalid_selector``), ``strict=False`` (Pydantic AI would otherwise make a
    closed-looking schema strict on OpenAI and close every object), and
    ``sequential=True`` (calls run in the model's order, so ids and the log
    follow it). A call runs ``current_turn().call_tool(name, arguments,
    call_id=...)`` with the model's arguments as it sent them (its JSON text,
    or the object a provider decoded) and the model's tool-call id
    (``RunContext.tool_call_id``: the tool's span and Pydantic AI's own
    ``execute_tool`` span carry the same ``gen_ai.tool.call.id``), and
    returns the result's ``content``: the model-visible JSON the tools
    define, errors included (an ordinary result the model reads and
    corrects). Outside a turn the call fails with a
    :class:`~pydantic_ai.ToolFailed` message the model reads; the run goes on.

    ``calendar_rules=False`` offers the catalog without the ``cron`` selector.
    It only shapes what the model is offered: what a call may do is the
    host's to decide, so pass what the host was installed with
    (``AsyncHost(..., calendar_rules=False)``).
    """

    def __init__(self, *, id: str | None = None, calendar_rules: bool = True) -> None:
        self._id = id
        self._calendar_rules = calendar_rules

    @property
    def id(self) -> str | None:
        """The toolset's id (``None`` unless given)."""
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The three tools, with fresh copies of the catalog's schemas."""
        return {
            spec.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=spec.name,
                    description=spec.description,
                    parameters_json_schema=copy.deepcopy(dict(spec.parameters)),
                    strict=False,
                    sequential=True,
                ),
                max_retries=ctx.max_retries,
                args_validator=_ARGUMENTS,
            )
            for spec in tool_specs(calendar_rules=self._calendar_rules)
        }

    async def call_tool(
        self, name: str, tool_args: Any, ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> str:
        """Run the tool in the current turn; the result's model-visible content."""
        try:
            turn = current_turn()
        except LookupError:
            _log.warning("%s was called outside a Schedule turn; the model is told", name)
            raise ToolFailed(_NO_TURN) from None
        try:
            result = await turn.call_tool(name, _as_sent(tool_args), call_id=ctx.tool_call_id)
        except Exception:  # the turn's session is gone: say so, never invite a blind retry
            _log.warning("%s could not run in session %r", name, turn.session_id, exc_info=True)
            raise ToolFailed(_FAILED) from None
        return result.content


class _RunResult(Protocol):
    """What :func:`remember` reads of a run's result (``AgentRunResult``, a streamed one)."""

    def new_messages(self) -> list[ModelMessage]: ...


def history(turn: AgentTurn) -> list[ModelMessage]:
    """The conversation so far: every run's messages recorded in ``turn``'s session, in order.

    Pass it as ``message_history=``. A record that no longer validates (written
    by hand, or by a Pydantic AI that this one cannot read) is left out and
    logged, so a reminder's turn still runs.
    """
    messages: list[ModelMessage] = []
    for index, data in enumerate(turn.records(MESSAGES_RECORD)):
        try:
            messages.extend(ModelMessagesTypeAdapter.validate_python(data))
        except pydantic.ValidationError as error:
            _log.error(
                "session %r: %s record %d is unreadable and left out of the history (%s)",
                turn.session_id,
                MESSAGES_RECORD,
                index,
                error.error_count(),
            )
    return messages


async def remember(turn: AgentTurn, result: _RunResult) -> None:
    """Record the run's new messages in ``turn``'s session log (durable with the turn)."""
    data = ModelMessagesTypeAdapter.dump_python(result.new_messages(), mode="json")
    await turn.record(MESSAGES_RECORD, data)


def _reply(output: object) -> str | None:
    if output is None or isinstance(output, str):
        return output
    return pydantic_core.to_json(output).decode()


def turn_runner(agent: AbstractAgent[Any, Any], **run_options: Any) -> TurnRunner:
    """A turn runner that answers each turn with ``agent.run``, its history from the session.

    Every turn, a person's message or a reminder, runs
    ``agent.run(turn.text, message_history=history(turn), **run_options)``,
    records the run's new messages (:func:`remember`) and returns the output:
    a ``str`` as it is, ``None`` as ``None``, structured output as its JSON.
    """
    if "message_history" in run_options:
        raise TypeError("turn_runner keeps the message history itself; do not pass one")

    async def run_turn(turn: AgentTurn) -> str | None:
        result = await agent.run(turn.text, message_history=history(turn), **run_options)
        await remember(turn, result)
        return _reply(result.output)

    return run_turn
