"""OpenTelemetry metrics and traces of Schedule's owners, through ``opentelemetry-api`` only.

:class:`ScheduleTelemetry` implements :class:`actors._observer.OwnerObserver`
with one ``Meter`` and one ``Tracer`` named ``dsh_schedule``. It emits nothing
unless the host installed an OpenTelemetry SDK: either as the global providers
(``opentelemetry.metrics.set_meter_provider``, ``opentelemetry.trace.set_tracer_provider``)
or handed in (``ScheduleTelemetry(meter_provider=..., tracer_provider=...)``).
On the global providers, each owner looks once, when it starts, whether an SDK
is configured; an owner started without one gets the do-nothing observer, so it
pays one empty method call per report.

Every metric name and project attribute starts with ``dsh.schedule.``; durations
are in seconds. Metrics (counters are monotonic sums), by name, unit and attributes:

- ``dsh.schedule.creates`` (``{reminder}``): ``dsh.schedule.kind``
- ``dsh.schedule.deletes`` (``{reminder}``): none
- ``dsh.schedule.dispatches`` (``{dispatch}``): ``dsh.schedule.kind``
- ``dsh.schedule.persistence_uncertain`` (``{flush}``): ``dsh.schedule.operation``,
  ``dsh.schedule.phase``
- ``dsh.schedule.contained_failures`` (``{failure}``): ``dsh.schedule.owner.message``,
  ``error.type``
- ``dsh.schedule.delivery.lateness`` (``s``, a histogram): ``dsh.schedule.kind``

Spans follow the GenAI conventions for tools: ``execute_tool schedule_create``
(``_list``, ``_delete``) from the call's admission to the owner's queue to its
answer, with ``gen_ai.operation.name``, ``gen_ai.tool.name``, ``session.id``
and, when the host passed on the model's tool-call id, ``gen_ai.tool.call.id``;
a child of the span that was current where the host called the tool.
``dsh.schedule.delivery`` (a root span) runs from a delivery's preflight to
its barrier, only for a pass that handed reminders over or failed: a pass
with nothing due leaves no span. The attributes are listed in
``docs/host-integration.md`` ("Observability"). Metric attributes never name
an agent, a session or a reminder (they would make one time series each);
spans do.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, Final

from opentelemetry import context, metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from actors._contract import ToolCall, model_call_id
from actors._observer import (
    NO_OBSERVER,
    DeliveryOutcome,
    OwnerObserver,
    ToolOutcome,
    TxnKind,
)
from messages._delivery import DeliverBatch, DeliverNow
from messages._instant import parse_instant
from messages._mailbox import FlushPhase
from messages._tool_values import Operation, ToolError

__all__ = [
    "AGENT_ID",
    "COUNT",
    "DELIVERY_SPAN",
    "ERROR_TYPE",
    "EXECUTE_TOOL",
    "INSTRUMENTATION_NAME",
    "KIND",
    "LATENESS",
    "LATENESS_BUCKETS",
    "MESSAGE",
    "OPERATION",
    "OPERATION_NAME",
    "OUTCOME",
    "PHASE",
    "SCHEDULE_ID",
    "SCHEDULE_IDS",
    "SESSION_ID",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "TOOL_TYPE",
    "ScheduleTelemetry",
    "sdk_configured",
]

INSTRUMENTATION_NAME: Final = "dsh_schedule"
"""The name of the ``Meter`` and the ``Tracer`` (the instrumentation scope)."""

# --- semantic-convention attributes ----------------------------------------------------

OPERATION_NAME: Final = "gen_ai.operation.name"
"""Tool span attribute: always :data:`EXECUTE_TOOL`."""

EXECUTE_TOOL: Final = "execute_tool"
"""The GenAI operation of a tool span; its name is ``execute_tool {gen_ai.tool.name}``."""

TOOL_NAME: Final = "gen_ai.tool.name"
"""Tool span attribute: ``schedule_create``, ``schedule_list`` or ``schedule_delete``."""

TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
"""Tool span attribute: the model's tool-call id (``ToolCall.call_id``), when the host has it.

A synthetic id (``ToolCall.synthetic``) is left out."""

TOOL_TYPE: Final = "gen_ai.tool.type"
"""Tool span attribute: always ``function``."""

SESSION_ID: Final = "session.id"
"""Span attribute: the id of the agent's session."""

ERROR_TYPE: Final = "error.type"
"""The semantic-convention attribute: an error code, or an exception's class."""

# --- project attributes ----------------------------------------------------------------

AGENT_ID: Final = "dsh.schedule.agent.id"
"""Span attribute: the id of the agent whose owner ran the transaction."""

SCHEDULE_ID: Final = "dsh.schedule.id"
"""Span attribute: the reminder a create allocated or a delete named."""

SCHEDULE_IDS: Final = "dsh.schedule.ids"
"""Span attribute: the reminders a delivery dispatched, in append order."""

KIND: Final = "dsh.schedule.kind"
"""Metric attribute: a reminder's kind (``after``, ``at``, ``every``, ``cron``)."""

OUTCOME: Final = "dsh.schedule.outcome"
"""Span attribute: how the transaction ended (``created``, ``delivered``, ``error``...)."""

COUNT: Final = "dsh.schedule.count"
"""Span attribute: the reminders a list returned, or the dispatches a delivery appended."""

LATENESS: Final = "dsh.schedule.lateness"
"""Span attribute: the largest lateness of the reminders a delivery handed over (s)."""

OPERATION: Final = "dsh.schedule.operation"
"""Metric attribute: a failed flush's operation (``create``, ``list``, ``delete``, ``dispatch``)."""

PHASE: Final = "dsh.schedule.phase"
"""Metric attribute: the failed flush's phase (``preflight`` or ``barrier``)."""

MESSAGE: Final = "dsh.schedule.owner.message"
"""Metric attribute: the type of the mailbox message whose handler failed."""

DELIVERY_SPAN: Final = "dsh.schedule.delivery"
"""The name of a delivery's span."""

LATENESS_BUCKETS: Final[tuple[float, ...]] = (
    0,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
    900,
    3_600,
    21_600,
    86_400,
)
"""Bucket boundaries suggested for ``dsh.schedule.delivery.lateness`` (s, up to a day)."""

_TOOL_NAMES: Final[Mapping[TxnKind, str]] = {
    "create": "schedule_create",
    "list": "schedule_list",
    "delete": "schedule_delete",
}

_SPANNED_DELIVERIES: Final = frozenset(
    {"delivered", "preflight_failed", "followup_failed", "dispatch_failed", "failed"}
)
"""The delivery outcomes that decided something or failed: only they have a span."""

_FAILED_DELIVERIES: Final = frozenset({"followup_failed", "dispatch_failed"})

_ROOT: Final = context.Context()
"""The empty context: a delivery span starts a trace of its own."""


def _version() -> str:
    try:
        return importlib.metadata.version("dsh-tool-schedule")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _api_default(provider: object) -> bool:
    """Whether ``provider`` is one of the API's own (a proxy or a no-op), not an SDK's."""
    return type(provider).__module__.startswith(("opentelemetry.trace", "opentelemetry.metrics"))


def sdk_configured() -> bool:
    """Whether the global meter or tracer provider is an SDK's (something would be emitted)."""
    return not (
        _api_default(metrics.get_meter_provider()) and _api_default(trace.get_tracer_provider())
    )


class _CallOrigin:
    """What a tool call's reply carries for its span: the model's call id, the caller's context."""

    __slots__ = ("call_id", "context")

    def __init__(self, call_id: str | None, parent: context.Context) -> None:
        self.call_id = call_id
        self.context = parent


class _Transaction:
    """The token of one observed transaction: its span (a delivery's once it has one)."""

    __slots__ = ("agent_id", "error", "kind", "session_id", "span", "started_ns")

    def __init__(self, kind: TxnKind, span: Span | None, agent_id: str, session_id: str) -> None:
        self.kind = kind
        self.span = span
        self.agent_id = agent_id
        self.session_id = session_id
        self.started_ns = time.time_ns()
        self.error: str | None = None


class ScheduleTelemetry:
    """An :class:`~actors._observer.OwnerObserver` that emits OpenTelemetry metrics and spans.

    ``meter_provider`` and ``tracer_provider`` default to the global providers.
    Give the plugin one instance (``install_schedule(host, telemetry=...)``);
    its instruments are made once, here, and shared by every owner.
    """

    def __init__(
        self,
        *,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        version = _version()
        self._own_providers = meter_provider is not None or tracer_provider is not None
        meter = metrics.get_meter(INSTRUMENTATION_NAME, version, meter_provider)
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, version, tracer_provider)
        self._creates = meter.create_counter(
            "dsh.schedule.creates", "{reminder}", "Reminders created and confirmed durable."
        )
        self._deletes = meter.create_counter(
            "dsh.schedule.deletes", "{reminder}", "Reminders deleted and confirmed durable."
        )
        self._dispatches = meter.create_counter(
            "dsh.schedule.dispatches",
            "{dispatch}",
            "Dispatch records appended after a reminder's follow-up (one per batch member).",
        )
        self._uncertain = meter.create_counter(
            "dsh.schedule.persistence_uncertain",
            "{flush}",
            "Durability barriers (flushes) that failed, timed out or raised.",
        )
        self._contained = meter.create_counter(
            "dsh.schedule.contained_failures",
            "{failure}",
            "Unexpected errors an owner contained (its delivery paused or stopped).",
        )
        self._lateness = meter.create_histogram(
            "dsh.schedule.delivery.lateness",
            "s",
            "How long after its due time a reminder was handed to the agent.",
            explicit_bucket_boundaries_advisory=LATENESS_BUCKETS,
        )

    def for_owner(self) -> OwnerObserver:
        """The observer an owner starting now should use.

        This instance when providers were handed in or the global ones are an
        SDK's; otherwise :data:`~actors._observer.NO_OBSERVER` (nothing would
        be emitted, so nothing is computed).
        """
        if self._own_providers or sdk_configured():
            return self
        return NO_OBSERVER

    def call_origin(self, call: ToolCall) -> object:
        """What a tool call's span needs of its caller; called in the caller's thread.

        The plugin's tools call it as a call enters them and keep the value
        on the call's reply (it lives as long as the call does): the context
        current there becomes the parent of the call's span, and the call id,
        unless it is synthetic, its ``gen_ai.tool.call.id``.
        """
        call_id = None if call.synthetic else model_call_id(call.call_id)
        return _CallOrigin(call_id, context.get_current())

    # --- OwnerObserver ------------------------------------------------------------------

    def transaction_started(
        self, kind: TxnKind, agent_id: str, session_id: str, reply: Future[Any] | None
    ) -> object:
        """Start a tool call's span; a delivery's waits until it decides something."""
        if kind == "deliver":
            return _Transaction(kind, None, agent_id, session_id)
        tool = _TOOL_NAMES[kind]
        attributes: dict[str, AttributeValue] = {
            OPERATION_NAME: EXECUTE_TOOL,
            TOOL_NAME: tool,
            TOOL_TYPE: "function",
            AGENT_ID: agent_id,
            SESSION_ID: session_id,
        }
        origin = getattr(reply, "origin", None)
        parent = None
        if isinstance(origin, _CallOrigin):
            if origin.call_id is not None:
                attributes[TOOL_CALL_ID] = origin.call_id
            parent = origin.context
        span = self._tracer.start_span(
            f"{EXECUTE_TOOL} {tool}", parent, SpanKind.INTERNAL, attributes
        )
        return _Transaction(kind, span, agent_id, session_id)

    def _span(self, token: _Transaction) -> Span:
        """The transaction's span; a delivery's starts now, dated back to its preflight."""
        if token.span is None:
            token.span = self._tracer.start_span(
                DELIVERY_SPAN,
                _ROOT,
                SpanKind.INTERNAL,
                {AGENT_ID: token.agent_id, SESSION_ID: token.session_id},
                start_time=token.started_ns,
            )
        return token.span

    def transaction_finished(
        self,
        token: object,
        outcome: DeliveryOutcome | ToolOutcome | None,
        answer: ToolError | Mapping[str, object] | None,
        schedule_id: str | None,
        dispatched: tuple[str, ...],
    ) -> None:
        """Count a confirmed create or delete, set the span's outcome and status, end it.

        A delivery that decided nothing (nothing due, the agent busy, skipped)
        and did not fail ends without a span.
        """
        if not isinstance(token, _Transaction):
            return
        if token.kind == "deliver":
            if token.span is None and outcome not in _SPANNED_DELIVERIES:
                return
            span = self._span(token)
            name: str = outcome or "skipped"
            if token.error is None and name in _FAILED_DELIVERIES:
                token.error = name
            if dispatched:
                span.set_attribute(SCHEDULE_IDS, list(dispatched))
            span.set_attribute(COUNT, len(dispatched))
        else:
            span = self._span(token)
            name = self._tool_outcome(token, span, outcome, answer)
            if schedule_id is not None:
                span.set_attribute(SCHEDULE_ID, schedule_id)
        span.set_attribute(OUTCOME, name)
        if token.error is not None:
            span.set_attribute(ERROR_TYPE, token.error)
            span.set_status(Status(StatusCode.ERROR, token.error))
        span.end()

    def _tool_outcome(
        self,
        token: _Transaction,
        span: Span,
        outcome: ToolOutcome | DeliveryOutcome | None,
        answer: ToolError | Mapping[str, object] | None,
    ) -> str:
        """Name a tool call's outcome from its answer; count confirmed creates and deletes."""
        if answer is None:
            return outcome or "unanswered"
        if isinstance(answer, ToolError):
            token.error = answer.code.value
            return "error"
        if token.kind == "create":
            kind = answer.get("kind")
            self._creates.add(1, {KIND: kind if isinstance(kind, str) else "unknown"})
            return "created"
        if token.kind == "delete":
            if answer.get("deleted") is True:
                self._deletes.add(1)
                return "deleted"
            return "not_found"
        schedules = answer.get("schedules")
        if isinstance(schedules, list):
            span.set_attribute(COUNT, len(schedules))
        return "listed"

    def delivered(
        self, token: object, plan: DeliverNow | DeliverBatch, decided_ms: int, dispatched: int
    ) -> None:
        """Record each reminder's lateness (s) and count the dispatches appended, by kind.

        The first ``dispatched`` reminders of the plan (in dispatch order) were appended.
        """
        delivered: list[tuple[str, int]]
        if isinstance(plan, DeliverNow):
            delivered = [(plan.record.kind, plan.record.target_ms)]
        else:
            delivered = [(m.record.kind, parse_instant(m.occurrence_at)) for m in plan.members]
        latest = 0.0
        for kind, occurrence_ms in delivered:
            late = max(0, decided_ms - occurrence_ms) / 1000
            latest = max(latest, late)
            self._lateness.record(late, {KIND: kind})
        for kind, count in Counter(kind for kind, _ in delivered[:dispatched]).items():
            self._dispatches.add(count, {KIND: kind})
        if isinstance(token, _Transaction):
            self._span(token).set_attribute(LATENESS, latest)

    def persistence_uncertain(self, token: object, operation: Operation, phase: FlushPhase) -> None:
        """Count the failed flush; a delivery's span is marked failed by it."""
        attributes = {OPERATION: operation, PHASE: phase}
        self._uncertain.add(1, attributes)
        if isinstance(token, _Transaction):
            self._span(token).add_event("persistence_uncertain", attributes)
            if token.kind == "deliver" and token.error is None:
                token.error = "persistence_uncertain"

    def contained_failure(self, token: object | None, message_type: str, error: Exception) -> None:
        """Count it by message and exception type (never the exception's text)."""
        error_type = _qualified_name(type(error))
        self._contained.add(1, {MESSAGE: message_type, ERROR_TYPE: error_type})
        if isinstance(token, _Transaction):
            self._span(token).add_event(
                "contained_failure", {MESSAGE: message_type, "exception.type": error_type}
            )
            if token.kind == "deliver":
                token.error = error_type


def _qualified_name(cls: type) -> str:
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
