"""OpenTelemetry of the owners: counters, the lateness histogram and spans, on both runtimes.

Every test hands a private SDK ``MeterProvider`` (read by an
``InMemoryMetricReader``) and ``TracerProvider`` (exported to an
``InMemorySpanExporter``) to a :class:`ScheduleTelemetry`; the global providers
are never touched. Time moves only with ``FakeTimers``; owners are settled
through their mailboxes.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, SpanContext, SpanKind, StatusCode
from pytest_mock import MockerFixture

import actors
from actors._observer import OwnerObserver
from actors._runtime import Runtime
from host_bridge import _telemetry as telemetry_module
from host_bridge._plugin import install_schedule
from host_bridge._telemetry import LATENESS_BUCKETS, ScheduleTelemetry, sdk_configured
from host_bridge.aio import AgentTurn
from host_bridge.protocols import ToolCall
from host_bridge.testing import PENDING, FakeClock, FakeHost, call_tool
from messages._mailbox import CreateSchedule
from messages._tool_values import AfterSelector, AtSelector
from tests.integrations.otel_helpers import traced_host
from tests.owner.harness import Harness
from tests.owner.helpers import Tools, error

SECOND = 1000
MINUTE = 60 * SECOND

Attributes = frozenset[tuple[str, Any]]


class Otel:
    """Private SDK providers with in-memory readers, and a ScheduleTelemetry on them."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader], shutdown_on_exit=False)
        self.exporter = InMemorySpanExporter()
        self.tracers = TracerProvider(shutdown_on_exit=False)
        self.tracers.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.telemetry = ScheduleTelemetry(meter_provider=self.meters, tracer_provider=self.tracers)

    def shutdown(self) -> None:
        self.meters.shutdown()
        self.tracers.shutdown()

    def _points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        if data is None:
            return []
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]

    def counter(self, name: str) -> dict[Attributes, int]:
        """The counter's value per attribute set (zero-valued sets left out)."""
        return {
            frozenset(point.attributes.items()): point.value
            for point in self._points(name)
            if point.value
        }

    def histogram(self, name: str) -> dict[Attributes, HistogramDataPoint]:
        """The histogram's data point per attribute set."""
        return {frozenset(point.attributes.items()): point for point in self._points(name)}

    def units(self) -> dict[str, str | None]:
        """Each metric recorded so far, by name: its unit."""
        data = self.reader.get_metrics_data()
        if data is None:
            return {}
        return {
            metric.name: metric.unit
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }

    def spans(self) -> list[ReadableSpan]:
        """Every ended span, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def tool_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith("execute_tool ")]

    def deliveries(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == "dsh.schedule.delivery"]


def attrs(**values: Any) -> Attributes:
    """An attribute set from short names: kind, operation, phase, message, error_type."""
    names = {
        "kind": "dsh.schedule.kind",
        "operation": "dsh.schedule.operation",
        "phase": "dsh.schedule.phase",
        "message": "dsh.schedule.owner.message",
        "error_type": "error.type",
    }
    return frozenset((names[key], value) for key, value in values.items())


def span_attrs(span: ReadableSpan) -> Mapping[str, Any]:
    assert span.attributes is not None
    return span.attributes


def outcome(span: ReadableSpan) -> Any:
    return span_attrs(span)["dsh.schedule.outcome"]


@pytest.fixture
def otel() -> Iterator[Otel]:
    otel = Otel()
    yield otel
    otel.shutdown()


@pytest.fixture
def observed(host: FakeHost, runtime: Runtime, otel: Otel) -> Harness:
    """One owner on the host test kit, reporting to ``otel``."""
    return Harness(host, runtime=runtime, observer=otel.telemetry)


# --- tool transactions -------------------------------------------------------------------


def test_tool_calls_count_confirmed_creates_and_deletes_with_one_span_each(
    host: FakeHost, runtime: Runtime, otel: Otel
) -> None:
    plugin = install_schedule(host.context(), runtime=runtime, telemetry=otel.telemetry)
    agent = host.spawn_root("agent-1")
    tools = Tools(host, plugin, agent)
    tools.settle()
    tools.call("schedule_create", {"prompt": "stretch", "after_seconds": 60})
    tools.call("schedule_create", {"prompt": "water", "every_seconds": 300})
    assert len(tools.call("schedule_list", {})["schedules"]) == 2
    tools.call("schedule_delete", {"id": "schedule-1"})
    tools.call("schedule_delete", {"id": "schedule-9"})
    tools.settle()

    assert otel.counter("dsh.schedule.creates") == {attrs(kind="after"): 1, attrs(kind="every"): 1}
    assert otel.counter("dsh.schedule.deletes") == {frozenset(): 1}
    spans = otel.tool_spans()
    assert [(s.name, outcome(s), span_attrs(s).get("dsh.schedule.id")) for s in spans] == [
        ("execute_tool schedule_create", "created", "schedule-1"),
        ("execute_tool schedule_create", "created", "schedule-2"),
        ("execute_tool schedule_list", "listed", None),
        ("execute_tool schedule_delete", "deleted", "schedule-1"),
        ("execute_tool schedule_delete", "not_found", "schedule-9"),
    ]
    for span in spans:
        attributes = dict(span_attrs(span))
        assert attributes == {  # the kit's calls had no model id: no gen_ai.tool.call.id
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": span.name.removeprefix("execute_tool "),
            "gen_ai.tool.type": "function",
            "dsh.schedule.agent.id": "agent-1",
            "session.id": agent.session.id,
            "dsh.schedule.outcome": outcome(span),
            **({"dsh.schedule.id": attributes["dsh.schedule.id"]} if span is not spans[2] else {}),
            **({"dsh.schedule.count": 2} if span is spans[2] else {}),
        }
        assert span.kind is SpanKind.INTERNAL
        assert span.parent is None  # called outside any span: a trace of its own
        assert span.status.status_code is StatusCode.UNSET
        assert span.end_time is not None and span.start_time is not None
        assert span.start_time <= span.end_time
    assert otel.counter("dsh.schedule.persistence_uncertain") == {}
    assert otel.counter("dsh.schedule.contained_failures") == {}
    assert otel.units() == {
        "dsh.schedule.creates": "{reminder}",
        "dsh.schedule.deletes": "{reminder}",
    }
    # the drives after the management calls are delivery passes with nothing due: no span
    assert otel.spans() == spans
    assert plugin.status().owners[0].state == "running"  # status() is unchanged


def test_a_tool_span_is_a_child_of_the_span_current_where_the_host_called_the_tool(
    host: FakeHost, runtime: Runtime, otel: Otel
) -> None:
    plugin = install_schedule(host.context(), runtime=runtime, telemetry=otel.telemetry)
    agent = host.spawn_root("agent-1")
    Tools(host, plugin, agent).settle()
    tool = host.tools.get("schedule_list", agent=agent)
    assert tool is not None
    with otel.tracers.get_tracer("host").start_as_current_span("host tool call") as parent:
        future = tool.execute({}, ToolCall("call-7", agent))
    assert future.result(timeout=5).value == {"schedules": []}
    Tools(host, plugin, agent).settle()

    (span,) = otel.tool_spans()
    caller = parent.get_span_context()
    assert span.parent is not None
    assert (span.parent.trace_id, span.parent.span_id) == (caller.trace_id, caller.span_id)
    assert span.context is not None and span.context.trace_id == caller.trace_id
    assert span_attrs(span)["gen_ai.tool.call.id"] == "call-7"
    assert span_attrs(span)["gen_ai.tool.name"] == "schedule_list"


def test_only_a_usable_model_call_id_is_reported(
    host: FakeHost, runtime: Runtime, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = install_schedule(host.context(), runtime=runtime, telemetry=otel.telemetry)
    agent = host.spawn_root("agent-1")
    tools = Tools(host, plugin, agent)
    tools.settle()
    tool = host.tools.get("schedule_list", agent=agent)
    assert tool is not None
    given: list[object] = ["call_MODEL_abc", "x" * 256, "x" * 257, "", 42, None]
    with caplog.at_level(logging.WARNING):
        for call_id in given:
            result = call_tool(host, agent, "schedule_list", {}, call_id=call_id)  # type: ignore[arg-type]
            assert result.value == {"schedules": []}
        made_up = ToolCall("call-9", agent, synthetic=True)  # a host's own counter
        assert tool.execute({}, made_up).result(timeout=5).value == {"schedules": []}
        odd = ToolCall(7, agent)  # type: ignore[arg-type]  # a host breaking the contract
        assert tool.execute({}, odd).result(timeout=5).value == {"schedules": []}
    tools.settle()

    reported = [span_attrs(s).get("gen_ai.tool.call.id") for s in otel.tool_spans()]
    assert reported == ["call_MODEL_abc", "x" * 256, None, None, None, None, None, None]
    replaced = [r for r in caplog.records if "tool-call id" in r.getMessage()]
    assert len(replaced) == 3  # the long, the empty and the non-string id; None is no id


def test_a_failing_call_origin_changes_nothing_the_call_does(
    host: FakeHost,
    runtime: Runtime,
    otel: Otel,
    mocker: MockerFixture,
    caplog: pytest.LogCaptureFixture,
) -> None:
    mocker.patch.object(otel.telemetry, "call_origin", side_effect=RuntimeError("broken"))
    plugin = install_schedule(host.context(), runtime=runtime, telemetry=otel.telemetry)
    tools = Tools(host, plugin, host.spawn_root("agent-1"))
    tools.settle()
    with caplog.at_level(logging.WARNING):
        assert tools.call("schedule_list", {}) == {"schedules": []}
        tools.settle()

    (span,) = otel.tool_spans()
    assert "gen_ai.tool.call.id" not in span_attrs(span)
    assert outcome(span) == "listed"
    assert any("could not note a schedule tool call" in r.getMessage() for r in caplog.records)


async def test_on_the_asyncio_host_a_tool_span_is_a_child_of_the_turns_span(
    tmp_path: Path, otel: Otel
) -> None:
    tracer = otel.tracers.get_tracer("host")
    callers: list[SpanContext] = []

    async def run_turn(turn: AgentTurn) -> str | None:
        with tracer.start_as_current_span("host tool call") as parent:
            callers.append(parent.get_span_context())
            result = await turn.call_tool("schedule_list", "{}", call_id="call_abc123")
            await turn.call_tool("schedule_list", "{}")  # no model id: none reported
        return result.content

    async with traced_host(run_turn, tmp_path, otel.telemetry) as host:
        chat = await host.open("u-1")
        assert await chat.send("list them") == '{"schedules":[]}'

    span, unnamed = otel.tool_spans()
    (caller,) = callers
    for each in (span, unnamed):
        assert each.parent is not None
        assert (each.parent.trace_id, each.parent.span_id) == (caller.trace_id, caller.span_id)
    assert span_attrs(span)["gen_ai.tool.call.id"] == "call_abc123"
    assert "gen_ai.tool.call.id" not in span_attrs(unnamed)


def test_an_error_code_sets_the_tool_span_status_and_error_type(
    observed: Harness, otel: Otel
) -> None:
    value = observed.value(
        observed.create_when("past", AtSelector("2020-01-01T00:00:00Z")), "create"
    )
    error("not_future", value)
    observed.settle()

    (span,) = otel.tool_spans()
    assert outcome(span) == "error"
    assert span_attrs(span)["error.type"] == "not_future"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "not_future"
    assert otel.counter("dsh.schedule.creates") == {}


def test_failed_flushes_count_persistence_uncertain_by_operation_and_phase(
    observed: Harness, otel: Otel
) -> None:
    sessions = observed.host.sessions
    sessions.script(False)
    error("persistence_uncertain", observed.value(observed.create(), "create"))
    sessions.script(True, False)  # preflight ok, barrier rejected: appended but not confirmed
    error("persistence_uncertain", observed.value(observed.create(), "create"))
    sessions.script(False)
    error("persistence_uncertain", observed.value(observed.list_schedules(), "list"))
    sessions.script(True, False)
    error("persistence_uncertain", observed.value(observed.delete("schedule-1"), "delete"))
    observed.settle()

    assert otel.counter("dsh.schedule.persistence_uncertain") == {
        attrs(operation="create", phase="preflight"): 1,
        attrs(operation="create", phase="barrier"): 1,
        attrs(operation="list", phase="preflight"): 1,
        attrs(operation="delete", phase="barrier"): 1,
    }
    assert otel.counter("dsh.schedule.creates") == {}  # an unconfirmed create is not counted
    assert otel.counter("dsh.schedule.deletes") == {}
    tools = otel.tool_spans()
    assert len(tools) == 4
    for span in tools:
        assert span_attrs(span)["error.type"] == "persistence_uncertain"
        assert span.status.status_code is StatusCode.ERROR
        (event,) = [e for e in span.events if e.name == "persistence_uncertain"]
        assert event.attributes is not None and "dsh.schedule.phase" in event.attributes
    assert span_attrs(tools[1])["dsh.schedule.id"] == "schedule-1"  # the id it appended


def test_a_call_cancelled_before_it_starts_ends_its_span_as_cancelled(
    observed: Harness, otel: Otel
) -> None:
    observed.host.sessions.script(PENDING)  # the first create waits in its preflight
    first = observed.create("first")
    cancelled: Future[Any] = Future()
    observed.send(CreateSchedule("second", AfterSelector(60), cancelled))
    assert cancelled.cancel()
    observed.host.sessions.release(True)
    observed.settle()

    assert observed.value(first, "create")["id"] == "schedule-1"
    assert [(outcome(s), s.status.status_code) for s in otel.tool_spans()] == [
        ("created", StatusCode.UNSET),
        ("cancelled", StatusCode.UNSET),
    ]


# --- deliveries ----------------------------------------------------------------------------


def test_a_delivery_span_counts_its_dispatch_and_a_busy_agent_makes_it_late(
    observed: Harness, otel: Otel
) -> None:
    observed.created("on time", 60)
    observed.advance(MINUTE)
    observed.agent.run_queued_turns()
    observed.settle()
    observed.created("late", 60)
    observed.agent.begin_turn()  # busy when the reminder comes due, for 5 s more
    observed.advance(MINUTE)
    assert len(observed.agent.received) == 1  # the second waits for the agent
    observed.host.clock.advance(5 * SECOND)
    observed.agent.end_turn()
    observed.settle()

    assert observed.changes()[-1] == ("dispatch", "schedule-2")
    assert otel.counter("dsh.schedule.dispatches") == {attrs(kind="after"): 2}
    (point,) = otel.histogram("dsh.schedule.delivery.lateness").values()
    assert (point.count, point.sum, point.min, point.max) == (2, 5.0, 0.0, 5.0)  # seconds
    assert tuple(point.explicit_bounds) == LATENESS_BUCKETS
    assert point.attributes == {"dsh.schedule.kind": "after"}
    assert otel.units()["dsh.schedule.delivery.lateness"] == "s"
    assert otel.units()["dsh.schedule.dispatches"] == "{dispatch}"
    # the pass that found the agent busy decided nothing: only the two deliveries have spans
    assert [dict(span_attrs(s)) for s in otel.deliveries()] == [
        {
            "dsh.schedule.agent.id": "agent-1",
            "session.id": observed.agent.session.id,
            "dsh.schedule.ids": (schedule_id,),
            "dsh.schedule.count": 1,
            "dsh.schedule.lateness": late,
            "dsh.schedule.outcome": "delivered",
        }
        for schedule_id, late in (("schedule-1", 0.0), ("schedule-2", 5.0))
    ]
    for span in otel.deliveries():
        assert span.parent is None and span.kind is SpanKind.INTERNAL
        assert span.status.status_code is StatusCode.UNSET


def test_an_every_batch_counts_one_dispatch_and_one_lateness_per_member(
    observed: Harness, otel: Otel
) -> None:
    observed.created_every("first", 300)  # due at +300 s
    observed.advance(100 * SECOND)
    observed.created_every("second", 300)  # due at +400 s
    observed.advance(150 * SECOND)
    observed.agent.begin_turn()  # busy from +250 s to +450 s
    observed.advance(200 * SECOND)
    assert observed.agent.received == []
    observed.agent.end_turn()
    observed.settle()

    assert observed.changes()[-2:] == [("dispatch", "schedule-1"), ("dispatch", "schedule-2")]
    assert len(observed.agent.received) == 1  # one follow-up for the batch
    assert otel.counter("dsh.schedule.dispatches") == {attrs(kind="every"): 2}
    (point,) = otel.histogram("dsh.schedule.delivery.lateness").values()
    assert (point.count, point.sum, point.min, point.max) == (2, 150.0 + 50.0, 50.0, 150.0)
    (span,) = [s for s in otel.deliveries() if outcome(s) == "delivered"]
    assert span_attrs(span)["dsh.schedule.ids"] == ("schedule-1", "schedule-2")
    assert span_attrs(span)["dsh.schedule.count"] == 2
    assert span_attrs(span)["dsh.schedule.lateness"] == 150.0


def test_a_delivery_pass_that_decides_nothing_leaves_no_span_and_no_metric(
    observed: Harness, otel: Otel
) -> None:
    observed.drive()  # nothing active
    observed.created("later", 60)
    observed.drive()  # not due
    observed.agent.begin_turn()
    observed.advance(MINUTE)  # due, but the agent is busy
    assert observed.agent.received == []

    assert [s.name for s in otel.spans()] == ["execute_tool schedule_create"]
    assert set(otel.units()) == {"dsh.schedule.creates"}
    observed.agent.end_turn()
    observed.settle()
    (span,) = otel.deliveries()
    assert outcome(span) == "delivered"
    assert span.start_time is not None and span.end_time is not None
    assert span.start_time <= span.end_time


def test_failed_delivery_flushes_count_as_dispatch_uncertain(observed: Harness, otel: Otel) -> None:
    observed.created("once", 1)
    observed.host.sessions.script(False)  # the delivery's preflight fails
    observed.advance(SECOND)
    observed.host.sessions.script(True, False)  # preflight ok, dispatch barrier rejected
    observed.drive()

    assert otel.counter("dsh.schedule.persistence_uncertain") == {
        attrs(operation="dispatch", phase="preflight"): 1,
        attrs(operation="dispatch", phase="barrier"): 1,
    }
    assert otel.counter("dsh.schedule.dispatches") == {attrs(kind="after"): 1}
    failed, delivered = otel.deliveries()  # the passes in between had nothing due
    assert outcome(failed) == "preflight_failed"
    assert outcome(delivered) == "delivered"  # dispatched, but not confirmed durable
    for span in (failed, delivered):
        assert span_attrs(span)["error.type"] == "persistence_uncertain"
        assert span.status.status_code is StatusCode.ERROR


def test_a_failed_followup_marks_the_delivery_span_and_dispatches_nothing(
    observed: Harness, otel: Otel
) -> None:
    observed.created("once", 1)
    observed.agent.fail_followups(RuntimeError("queue full"), times=1)
    observed.advance(SECOND)

    assert otel.counter("dsh.schedule.dispatches") == {}
    assert otel.histogram("dsh.schedule.delivery.lateness") == {}
    (span,) = otel.deliveries()
    assert outcome(span) == "followup_failed"
    assert span_attrs(span)["error.type"] == "followup_failed"
    assert span.status.status_code is StatusCode.ERROR


# --- contained failures, disposal, stop ----------------------------------------------------


class FlakyClock:
    """The host's fake wall clock, raising on as many calls as a test arms."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.failures = 0

    def __call__(self) -> int:
        if self.failures > 0:
            self.failures -= 1
            raise OSError("clock unavailable")
        return self.clock()


def test_contained_failures_are_counted_and_end_their_spans(
    host: FakeHost, runtime: Runtime, otel: Otel
) -> None:
    flaky = FlakyClock(host.clock)
    context = dataclasses.replace(host.context(), clock=flaky)
    harness = Harness(host, runtime=runtime, context=context, observer=otel.telemetry)
    harness.created("first", 1)
    flaky.failures = 1  # the delivery's decision raises
    harness.advance(SECOND)
    flaky.failures = 1  # the next create's record raises too (the owner is faulted by now)
    error("internal_error", harness.value(harness.create("second"), "create"))
    harness.settle()

    assert harness.status.contained_failures == 2
    assert sum(otel.counter("dsh.schedule.contained_failures").values()) == 2
    assert all(
        ("error.type", "OSError") in key and any(k == "dsh.schedule.owner.message" for k, _ in key)
        for key in otel.counter("dsh.schedule.contained_failures")
    )
    delivery = otel.deliveries()[-1]
    assert outcome(delivery) == "failed"
    assert span_attrs(delivery)["error.type"] == "OSError"
    assert delivery.status.status_code is StatusCode.ERROR
    tool = otel.tool_spans()[-1]
    assert outcome(tool) == "error"
    assert span_attrs(tool)["error.type"] == "internal_error"
    for span in (delivery, tool):
        (event,) = [e for e in span.events if e.name == "contained_failure"]
        assert event.attributes is not None
        assert event.attributes["exception.type"] == "OSError"
        assert "clock unavailable" not in str(dict(event.attributes))  # never the text


def test_dispose_ends_the_spans_of_the_call_in_flight_and_of_the_queued_ones(
    observed: Harness, otel: Otel
) -> None:
    observed.host.sessions.script(PENDING)  # the first create waits in its preflight
    first = observed.create("first")
    second = observed.create("second")
    disposed = observed.dispose()
    assert error("internal_error", observed.value(second, "create"))  # not_live
    assert not first.done()
    observed.host.sessions.release(True)
    disposed.result(timeout=5)

    error("internal_error", first.result(timeout=0))
    spans = otel.tool_spans()
    assert len(spans) == 2
    for span in spans:
        assert span_attrs(span)["error.type"] == "internal_error"
        assert span.status.status_code is StatusCode.ERROR


def test_a_stopped_owner_answers_and_ends_every_span_it_holds(
    observed: Harness, otel: Otel
) -> None:
    observed.host.sessions.script(True, PENDING)  # the first create waits in its barrier
    first = observed.create("first")
    second = observed.create("second")
    observed.owner.stop()

    value = observed.value(first, "create")
    assert (value["code"], value["operation"], value["id"]) == (
        "persistence_uncertain",
        "create",
        "schedule-1",
    )
    error("internal_error", observed.value(second, "create"))
    spans = otel.tool_spans()
    assert [span_attrs(s)["error.type"] for s in spans] == [
        "persistence_uncertain",
        "internal_error",
    ]
    assert span_attrs(spans[0])["dsh.schedule.id"] == "schedule-1"


# --- no SDK, no telemetry, broken telemetry ------------------------------------------------


def test_without_an_sdk_owners_get_the_do_nothing_observer(
    host: FakeHost, runtime: Runtime, mocker: MockerFixture
) -> None:
    assert not sdk_configured()  # the test process never sets global providers
    started = mocker.spy(ScheduleTelemetry, "transaction_started")
    plugin = install_schedule(host.context(), runtime=runtime)  # telemetry on by default
    agent = host.spawn_root("agent-1")
    tools = Tools(host, plugin, agent)
    tools.settle()
    tools.call("schedule_create", {"prompt": "stretch", "after_seconds": 1})
    host.timers.advance(SECOND)
    tools.settle()

    assert tools.call("schedule_list", {}) == {"schedules": []}  # delivered
    assert started.call_count == 0
    assert plugin.status().owners[0].deliveries == 1


def test_an_sdk_configured_later_reaches_owners_started_after_it(
    host: FakeHost, runtime: Runtime, mocker: MockerFixture
) -> None:
    started = mocker.spy(ScheduleTelemetry, "transaction_started")
    plugin = install_schedule(host.context(), runtime=runtime)
    before = Tools(host, plugin, host.spawn_root("agent-1"))
    mocker.patch.object(telemetry_module, "sdk_configured", return_value=True)
    after = Tools(host, plugin, host.spawn_root("agent-2"))
    for tools in (before, after):
        tools.settle()
        tools.call("schedule_list", {})
        tools.settle()

    agents = {call.args[2] for call in started.call_args_list}
    assert agents == {"agent-2"}


def test_sdk_configured_tells_an_sdk_provider_from_the_api_defaults(mocker: MockerFixture) -> None:
    assert not sdk_configured()
    provider = MeterProvider(shutdown_on_exit=False)
    mocker.patch("opentelemetry.metrics.get_meter_provider", return_value=provider)
    assert sdk_configured()
    mocker.patch("opentelemetry.metrics.get_meter_provider", return_value=NoOpMeterProvider())
    assert not sdk_configured()
    provider.shutdown()


def test_telemetry_can_be_turned_off(
    host: FakeHost, runtime: Runtime, mocker: MockerFixture
) -> None:
    for_owner = mocker.spy(ScheduleTelemetry, "for_owner")
    plugin = install_schedule(host.context(), runtime=runtime, telemetry=False)
    tools = Tools(host, plugin, host.spawn_root("agent-1"))
    tools.settle()
    assert tools.call("schedule_list", {}) == {"schedules": []}
    assert for_owner.call_count == 0


def test_a_telemetry_argument_that_is_no_observer_is_refused(host: FakeHost) -> None:
    with pytest.raises(TypeError, match="lacks transaction_started"):
        install_schedule(host.context(), telemetry=object())  # type: ignore[arg-type]


def test_no_op_providers_break_nothing(host: FakeHost, runtime: Runtime) -> None:
    telemetry = ScheduleTelemetry(
        meter_provider=NoOpMeterProvider(), tracer_provider=NoOpTracerProvider()
    )
    harness = Harness(host, runtime=runtime, observer=telemetry)
    harness.created("once", 1)
    harness.advance(SECOND)
    assert harness.changes() == [("create", "schedule-1"), ("dispatch", "schedule-1")]


class BrokenObserver:
    """An observer every report of which raises."""

    def __getattr__(self, name: str) -> Any:
        def fail(*args: object) -> None:
            raise RuntimeError(f"{name} is broken")

        return fail


def test_an_observer_that_raises_changes_nothing_the_owner_does(
    host: FakeHost, runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    broken: OwnerObserver = BrokenObserver()
    harness = Harness(host, runtime=runtime, observer=broken)
    with caplog.at_level(logging.DEBUG):
        harness.created("once", 1)
        harness.advance(SECOND)
        harness.settle()

    assert harness.changes() == [("create", "schedule-1"), ("dispatch", "schedule-1")]
    assert harness.status.contained_failures == 0
    assert harness.status.state == "running"
    warnings = [r for r in caplog.records if "observer failed" in r.getMessage()]
    assert [r.levelno for r in warnings][:1] == [logging.WARNING]
    assert all(r.levelno == logging.DEBUG for r in warnings[1:])
    assert len(warnings) > 1


def test_actors_never_import_opentelemetry() -> None:
    package = Path(actors.__file__).parent
    offenders = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("opentelemetry")]
    assert offenders == []
