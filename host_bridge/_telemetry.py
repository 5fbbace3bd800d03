"""OpenTelemetry metrics and traces of Schedule's owners, through ``opentelemetry-api`` only.

:class:`ScheduleTelemetry` implements :class:`actors._observer.OwnerObserver`
with one ``Meter`` and one ``Tracer`` named ``dsh_schedule``. It emits nothing
unless the host installed an OpenTelemetry SDK: either as the global providers
(``opentelemetry.metrics.set_meter_provider``, ``opentelemetry.trace.set_tracer_provider``)
or handed in (``ScheduleTelemetry(meter_provider=..., tracer_provider=...)``).
On the global providers, each owner looks once, when it starts, whether an SDK
is configured; an owner started without one gets the do-nothing observer, so it
pays one empty method call per report.

Metrics (counters are monotonic sums):

=================================  =============  ============================================
name                               unit           attributes
=================================  =============  ============================================
``schedule.creates``               ``{reminder}`` ``dsh.schedule.kind``
``schedule.deletes``               ``{reminder}``
``schedule.dispatches``            ``{dispatch}`` ``dsh.schedule.kind``
``schedule.persistence_uncertain`` ``{flush}``    ``dsh.schedule.operation``, ``dsh.schedule.phase``
``schedule.contained_failures``    ``{failure}``  ``dsh.owner.message``, ``error.type``
``schedule.delivery.lateness``     ``ms``         ``dsh.schedule.kind`` (a histogram)
=================================  =============  ============================================

Spans: ``schedule.tool.schedule_create`` / ``schedule_list`` / ``schedule_delete``
from the call's admission to the owner's queue to its answer, and
``schedule.delivery`` from a delivery's preflight to its barrier; the
attributes are listed in ``docs/host-integration.md`` ("Observability").
Metric attributes never name an agent, a session or a reminder (they would
make one time series each); spans do.
"""

from __future__ import annotations

import importlib.metadata
from collections import Counter
from collections.abc import Mapping
from typing import Final

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, Status, StatusCode, TracerProvider

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
    "ERROR_TYPE",
    "INSTRUMENTATION_NAME",
    "KIND",
    "LATENESS",
    "LATENESS_BUCKETS_MS",
    "MESSAGE",
    "OPERATION",
    "OUTCOME",
    "PHASE",
    "SCHEDULE_ID",
    "SCHEDULE_IDS",
    "SESSION_ID",
    "ScheduleTelemetry",
    "sdk_configured",
]

INSTRUMENTATION_NAME: Final = "dsh_schedule"
"""The name of the ``Meter`` and the ``Tracer`` (the instrumentation scope)."""

AGENT_ID: Final = "dsh.agent_id"
"""Span attribute: the id of the agent whose owner ran the transaction."""

SESSION_ID: Final = "dsh.session_id"
"""Span attribute: the id of that agent's session."""

SCHEDULE_ID: Final = "dsh.schedule.id"
"""Span attribute: the reminder a create allocated or a delete named."""

SCHEDULE_IDS: Final = "dsh.schedule.ids"
"""Span attribute: the reminders a delivery dispatched, in append order."""

KIND: Final = "dsh.schedule.kind"
"""Metric attribute: a reminder's kind (``after``, ``at``, ``every``, ``cron``)."""

OUTCOME: Final = "dsh.schedule.outcome"
"""Span attribute: how the transaction ended (``created``, ``delivered``, ``agent_busy``...)."""

COUNT: Final = "dsh.schedule.count"
"""Span attribute: the reminders a list returned, or the dispatches a delivery appended."""

LATENESS: Final = "dsh.schedule.lateness_ms"
"""Span attribute: the largest lateness of the reminders a delivery handed over."""

OPERATION: Final = "dsh.schedule.operation"
"""Metric attribute: a failed flush's operation (``create``, ``list``, ``delete``, ``dispatch``)."""

PHASE: Final = "dsh.schedule.phase"
"""Metric attribute: the failed flush's phase (``preflight`` or ``barrier``)."""

MESSAGE: Final = "dsh.owner.message"
"""Metric attribute: the type of the mailbox message whose handler failed."""

ERROR_TYPE: Final = "error.type"
"""The semantic-convention attribute: an error code, or an exception's class."""

LATENESS_BUCKETS_MS: Final[tuple[float, ...]] = (
    0,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    30_000,
    60_000,
    300_000,
    900_000,
    3_600_000,
    21_600_000,
    86_400_000,
)
"""Bucket boundaries suggested for ``schedule.delivery.lateness`` (ms, up to a day)."""

_SPAN_NAMES: Final[Mapping[TxnKind, str]] = {
    "create": "schedule.tool.schedule_create",
    "list": "schedule.tool.schedule_list",
    "delete": "schedule.tool.schedule_delete",
    "deliver": "schedule.delivery",
}

_FAILED_DELIVERIES: Final = frozenset({"followup_failed", "dispatch_failed"})


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


class _Transaction:
    """The token of one observed transaction: its span and what its end needs."""

    __slots__ = ("error", "kind", "lateness", "span")

    def __init__(self, span: Span, kind: TxnKind) -> None:
        self.span = span
        self.kind = kind
        self.error: str | None = None
        self.lateness: int | None = None


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
            "schedule.creates", "{reminder}", "Reminders created and confirmed durable."
        )
        self._deletes = meter.create_counter(
            "schedule.deletes", "{reminder}", "Reminders deleted and confirmed durable."
        )
        self._dispatches = meter.create_counter(
            "schedule.dispatches",
            "{dispatch}",
            "Dispatch records appended after a reminder's follow-up (one per batch member).",
        )
        self._uncertain = meter.create_counter(
            "schedule.persistence_uncertain",
            "{flush}",
            "Durability barriers (flushes) that failed, timed out or raised.",
        )
        self._contained = meter.create_counter(
            "schedule.contained_failures",
            "{failure}",
            "Unexpected errors an owner contained (its delivery paused or stopped).",
        )
        self._lateness = meter.create_histogram(
            "schedule.delivery.lateness",
            "ms",
            "How long after its due time a reminder was handed to the agent.",
            explicit_bucket_boundaries_advisory=LATENESS_BUCKETS_MS,
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

    # --- OwnerObserver ------------------------------------------------------------------

    def transaction_started(self, kind: TxnKind, agent_id: str, session_id: str) -> object:
        """Start the transaction's span; the token carries it."""
        span = self._tracer.start_span(
            _SPAN_NAMES[kind], attributes={AGENT_ID: agent_id, SESSION_ID: session_id}
        )
        return _Transaction(span, kind)

    def transaction_finished(
        self,
        token: object,
        outcome: DeliveryOutcome | ToolOutcome | None,
        answer: ToolError | Mapping[str, object] | None,
        schedule_id: str | None,
        dispatched: tuple[str, ...],
    ) -> None:
        """Count a confirmed create or delete, set the span's outcome and status, end it."""
        if not isinstance(token, _Transaction):
            return
        span = token.span
        if token.kind == "deliver":
            name: str = outcome or "skipped"
            if token.error is None and name in _FAILED_DELIVERIES:
                token.error = name
            if dispatched:
                span.set_attribute(SCHEDULE_IDS, list(dispatched))
            span.set_attribute(COUNT, len(dispatched))
            if token.lateness is not None:
                span.set_attribute(LATENESS, token.lateness)
        else:
            name = self._tool_outcome(token, outcome, answer)
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
            token.span.set_attribute(COUNT, len(schedules))
        return "listed"

    def delivered(
        self, token: object, plan: DeliverNow | DeliverBatch, decided_ms: int, dispatched: int
    ) -> None:
        """Record each reminder's lateness and count the dispatches appended, by kind.

        The first ``dispatched`` reminders of the plan (in dispatch order) were appended.
        """
        delivered: list[tuple[str, int]]
        if isinstance(plan, DeliverNow):
            delivered = [(plan.record.kind, plan.record.target_ms)]
        else:
            delivered = [(m.record.kind, parse_instant(m.occurrence_at)) for m in plan.members]
        latest = 0
        for kind, occurrence_ms in delivered:
            late = max(0, decided_ms - occurrence_ms)
            latest = max(latest, late)
            self._lateness.record(late, {KIND: kind})
        for kind, count in Counter(kind for kind, _ in delivered[:dispatched]).items():
            self._dispatches.add(count, {KIND: kind})
        if isinstance(token, _Transaction):
            token.lateness = latest

    def persistence_uncertain(self, token: object, operation: Operation, phase: FlushPhase) -> None:
        """Count the failed flush; a delivery's span is marked failed by it."""
        attributes = {OPERATION: operation, PHASE: phase}
        self._uncertain.add(1, attributes)
        if isinstance(token, _Transaction):
            token.span.add_event("persistence_uncertain", attributes)
            if token.kind == "deliver" and token.error is None:
                token.error = "persistence_uncertain"

    def contained_failure(self, token: object | None, message_type: str, error: Exception) -> None:
        """Count it by message and exception type (never the exception's text)."""
        error_type = _qualified_name(type(error))
        self._contained.add(1, {MESSAGE: message_type, ERROR_TYPE: error_type})
        if isinstance(token, _Transaction):
            token.span.add_event(
                "contained_failure", {MESSAGE: message_type, "exception.type": error_type}
            )
            if token.kind == "deliver":
                token.error = error_type


def _qualified_name(cls: type) -> str:
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
