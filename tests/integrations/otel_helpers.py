"""Helpers of the integration tests' telemetry checks: private OTel providers, a traced host.

The spans go to an in-memory exporter on a private ``TracerProvider``; the
global providers are never touched.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from host_bridge._plugin import install_schedule
from host_bridge._telemetry import ScheduleTelemetry
from host_bridge.aio import AsyncHost, TurnRunner, wait
from host_bridge.testing import FakeClock, FakeTimers

CALL_ID = "gen_ai.tool.call.id"


class Spans:
    """A private tracer provider whose finished spans are kept in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracers = TracerProvider(shutdown_on_exit=False)
        self.tracers.add_span_processor(SimpleSpanProcessor(self.exporter))

    def finished(self) -> list[ReadableSpan]:
        """Every finished span, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def named(self, name: str, scope: str) -> list[ReadableSpan]:
        """The finished spans called ``name`` made by the instrumentation ``scope``."""
        return [
            span
            for span in self.finished()
            if span.name == name
            and span.instrumentation_scope is not None
            and span.instrumentation_scope.name == scope
        ]


def attributes(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes (never ``None``)."""
    assert span.attributes is not None
    return span.attributes


def is_child(span: ReadableSpan, parent: ReadableSpan) -> bool:
    """Whether ``span``'s parent is ``parent``."""
    assert parent.context is not None
    return span.parent is not None and (span.parent.trace_id, span.parent.span_id) == (
        parent.context.trace_id,
        parent.context.span_id,
    )


@asynccontextmanager
async def traced_host(
    run_turn: TurnRunner, data_dir: Path, traced: Spans | ScheduleTelemetry
) -> AsyncIterator[AsyncHost]:
    """An AsyncHost on fake time whose Schedule reports to ``traced``.

    ``traced`` is a ``ScheduleTelemetry`` or the :class:`Spans` it should trace to.
    """
    clock = FakeClock()
    async with AsyncHost(
        run_turn,
        data_dir=data_dir,
        wake=False,
        schedule=False,
        clock=clock,
        timers=FakeTimers(clock),
        clock_watch_ms=None,
    ) as host:
        telemetry = (
            traced
            if isinstance(traced, ScheduleTelemetry)
            else ScheduleTelemetry(tracer_provider=traced.tracers)
        )
        context = dataclasses.replace(host.embedded.context(), clock_watch_ms=None)
        plugin = await asyncio.to_thread(
            install_schedule, context, runtime=host.embedded.runtime, telemetry=telemetry
        )
        try:
            yield host
        finally:
            await wait(await asyncio.to_thread(plugin.dispose))
