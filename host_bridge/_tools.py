"""The three Schedule tools of one agent, bound to that agent's ScheduleOwner.

Shape checks run here, before the owner's queue, and need no flush; everything
else is a message to the owner. ``execute`` never raises and never blocks: it
returns a pending future of a :class:`ToolResult` whose ``content`` is the
deterministic compact JSON of the value. A host cancels a call by cancelling
that future: cancelled before its transaction starts, the call flushes and
appends nothing; cancelled after its preflight but before its append, it
appends nothing. A call made once the owner's teardown began (the plugin or
the agent disposed) appends nothing and answers ``internal_error`` saying why,
also when the owner is already gone.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

import pykka

from actors._futures import resolved
from actors._teardown import TeardownGate
from host_bridge._schemas import tool_specs
from host_bridge.protocols import Agent, ToolCall, ToolDefinition, ToolResult
from messages._mailbox import CreateSchedule, DeleteSchedule, ListSchedules, ToolRequest
from messages._text import canonical_json
from messages._tool_values import (
    CreateInput,
    DeleteInput,
    ToolError,
    cross_agent_error,
    internal_error,
    parse_create_input,
    parse_delete_input,
    parse_list_input,
)

__all__ = ["present_value", "render_value", "schedule_tools"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

RequestFactory = Callable[[Any, "Future[Any]"], "ToolRequest | ToolError"]

CallOrigin = Callable[[ToolCall], object]
"""Called in the caller's thread as a call is admitted; what it returns rides on the reply."""


def render_value(value: Any) -> str:
    """The model-visible content of a tool value: deterministic compact JSON."""
    return canonical_json(value)


def present_value(value: Any) -> str:
    """A one-line human summary of a tool value, for transcripts and UIs."""
    if not isinstance(value, dict):
        return render_value(value)
    if "message" in value and "code" in value:
        extra = f" ({value['operation']})" if "operation" in value else ""
        return f"error {value['code']}{extra}: {value['message']}"
    if "schedules" in value:
        items = value["schedules"]
        listed = ", ".join(f"{v['id']} {v['state']} {_rule(v)}" for v in items)
        return f"{len(items)} active reminder(s)" + (f": {listed}" if listed else "")
    if "deleted" in value:
        return f"deleted {value['id']}" if value["deleted"] else f"{value['id']} not found"
    if "scheduledAt" in value:
        return f"created {value['id']} {_rule(value)} ({value['state']})"
    return render_value(value)


def _rule(view: dict[str, Any]) -> str:
    """When a view's reminder is due, in words.

    ``due …`` for a one-shot, ``every Ns, next …`` or ``cron EXPR ZONE, next …``
    for a repeating reminder (e.g. ``cron 0 9 * * 1-5 Asia/Shanghai, next
    2026-08-06T01:00:00.000Z``).
    """
    kind = view.get("kind")
    if kind == "every":
        return f"every {view.get('everySeconds')}s, next {view['scheduledAt']}"
    if kind == "cron":
        rule = f"{view.get('expression')} {view.get('timeZone')}"
        return f"cron {rule}, next {view['scheduledAt']}"
    return f"due {view['scheduledAt']}"


def _result(value: ToolError | dict[str, object]) -> ToolResult:
    data = value.to_json() if isinstance(value, ToolError) else value
    return ToolResult(is_error=False, value=data, content=render_value(data))


def _create(arguments: Any, reply: Future[Any], *, cron: bool = True) -> ToolRequest | ToolError:
    parsed = parse_create_input(arguments, cron=cron)
    if not isinstance(parsed, CreateInput):
        return parsed
    return CreateSchedule(parsed.prompt, parsed.when, reply)


def _list(arguments: Any, reply: Future[Any]) -> ToolRequest | ToolError:
    parsed = parse_list_input(arguments)
    if isinstance(parsed, ToolError):
        return parsed
    return ListSchedules(reply)


def _delete(arguments: Any, reply: Future[Any]) -> ToolRequest | ToolError:
    parsed = parse_delete_input(arguments)
    if not isinstance(parsed, DeleteInput):
        return parsed
    return DeleteSchedule(parsed.id, reply)


_FACTORIES: dict[bool, dict[str, RequestFactory]] = {
    flag: {
        "schedule_create": functools.partial(_create, cron=flag),
        "schedule_list": _list,
        "schedule_delete": _delete,
    }
    for flag in (True, False)
}
"""Each tool's request factory, with calendar rules (``True``) and without."""


class _ToolReply(Future[Any]):
    """One future for both ends of a tool call: the owner's reply and the host's result.

    The owner answers with a tool value (``set_result(value)``); the future
    then holds that value's :class:`ToolResult`, so the host's future needs no
    second future chained to it. A failure (``set_exception``) becomes
    ``internal_error``. A host that cancels it cancels the owner's reply, which
    the owner checks before its flush and before its append. ``origin`` is
    what the plugin's :data:`CallOrigin` took in the caller's thread (the
    telemetry's parent context and call id); it lives as long as the call.
    """

    def __init__(self, origin: object = None) -> None:
        super().__init__()
        self.origin = origin

    def set_result(self, result: Any) -> None:
        """Settle with the :class:`ToolResult` of the tool value ``result``."""
        super().set_result(_result(result))

    def set_exception(self, exception: BaseException | None) -> None:
        """A failed reply answers the fixed ``internal_error``; the exception is only logged."""
        _log.error("a schedule tool reply failed", exc_info=exception)
        super().set_result(_result(internal_error()))

    def refuse(self, value: ToolError) -> None:
        """Answer ``value`` unless the call was answered (or cancelled) already."""
        with contextlib.suppress(InvalidStateError):
            self.set_result(value)


def _refusal(gate: TeardownGate | None) -> ToolError:
    """What a call its owner will never read answers: why the owner's teardown began."""
    cause = gate.cause if gate is not None else None
    return internal_error(cause if cause is not None else "not_live")


def _origin_of(origin: CallOrigin | None, call: ToolCall) -> object:
    """What ``origin`` takes of ``call``, or ``None`` (logged) if it raises."""
    if origin is None:
        return None
    try:
        return origin(call)
    except Exception:  # any failure of the observer's hook must leave the call as it was
        _log.warning("the telemetry could not note a schedule tool call", exc_info=True)
        return None


def _executor(
    agent: Agent,
    owner: pykka.ActorRef[Any],
    factory: RequestFactory,
    gate: TeardownGate | None,
    origin: CallOrigin | None,
) -> Callable[[Any, ToolCall], Future[ToolResult]]:
    def execute(arguments: Any, call: ToolCall) -> Future[ToolResult]:
        try:
            if call.agent is not agent:
                return resolved(_result(cross_agent_error()))
            reply = _ToolReply(_origin_of(origin, call))
            request = factory(arguments, reply)
            if isinstance(request, ToolError):
                return resolved(_result(request))
            try:
                owner.tell(request)
            except pykka.ActorDeadError:
                return resolved(_result(_refusal(gate)))
            if not owner.is_alive():  # it stopped meanwhile and may never read the request
                reply.refuse(_refusal(gate))
            return reply
        except Exception:
            _log.exception("schedule tool failed before reaching its owner")
            return resolved(_result(internal_error()))

    return execute


def schedule_tools(
    agent: Agent,
    owner: pykka.ActorRef[Any],
    gate: TeardownGate | None = None,
    *,
    calendar_rules: bool = True,
    origin: CallOrigin | None = None,
) -> tuple[ToolDefinition, ...]:
    """The three tool definitions for ``agent``, routed to its owner actor.

    ``gate`` is the owner's :class:`~actors._teardown.TeardownGate`: a call that
    finds the owner gone answers with the cause its teardown began with.
    ``origin`` is called in the caller's thread for each call of ``agent``;
    the owner's observer finds its value on the call's reply.
    ``calendar_rules=False`` offers no ``cron`` selector: the definitions are
    :func:`~host_bridge._schemas.tool_specs` ``(calendar_rules=False)`` and a
    ``cron`` key is an unknown key (``invalid_selector``).
    """
    factories = _FACTORIES[bool(calendar_rules)]
    return tuple(
        ToolDefinition(
            name=spec.name,
            description=spec.description,
            parameters=spec.parameters,
            output_schema=spec.output_schema,
            execute=_executor(agent, owner, factories[spec.name], gate, origin),
            render=render_value,
            present=present_value,
        )
        for spec in tool_specs(calendar_rules=calendar_rules)
    )
