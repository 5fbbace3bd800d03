"""What the OpenTelemetry reports cost: CPU per create and per delivery, off, API only, SDK.

Usage (from the repository root)::

    python -m bench.telemetry_cost [--creates 500] [--rounds 3] [--quick]

One owner on the host test kit (``FakeHost``: in-memory sessions, fake clock
and timers, so no disk and no waiting decide the figures). Each round runs
three configurations, alternating, and measures ``time.process_time()`` of
``--creates`` ``schedule_create`` calls and then of delivering them (the fake
clock moved past every target, the host settled):

* ``off``: ``install_schedule(..., telemetry=False)``, the anchor;
* ``api``: the default, with no OpenTelemetry SDK configured (each report is
  one call to an empty method);
* ``sdk``: a :class:`~host_bridge.ScheduleTelemetry` on private SDK providers
  recording everything (a ``BatchSpanProcessor`` to an in-memory exporter, a
  ``MeterProvider`` with an in-memory reader).

Prints CPU µs per operation, its ratio to ``off`` in the same round and the
1-minute load average, and writes ``bench/results/telemetry_cost.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench._common import (
    BenchError,
    add_common_arguments,
    data_root,
    fmt,
    header,
    load_average,
    machine_info,
    print_machine,
    print_table,
    write_results,
)
from host_bridge._telemetry import ScheduleTelemetry
from host_bridge.testing import FakeHost, call_tool_json, dispatches, settle_host

HOUR_MS = 3_600_000
CONFIGS = ("off", "api", "sdk")


def _telemetry(config: str) -> tuple[Any, Callable[[], None]]:
    """The ``telemetry`` argument of a configuration and how to shut its providers down."""
    if config == "off":
        return False, lambda: None
    if config == "api":
        return True, lambda: None
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)
    tracers = TracerProvider(shutdown_on_exit=False)
    tracers.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))

    def shutdown() -> None:
        meters.shutdown()
        tracers.shutdown()

    return ScheduleTelemetry(meter_provider=meters, tracer_provider=tracers), shutdown


def measure(config: str, creates: int) -> dict[str, float]:
    """CPU µs per create and per delivery of one configuration (one fresh host)."""
    telemetry, shutdown = _telemetry(config)
    host = FakeHost()
    try:
        host.install_schedule(telemetry=telemetry)
        agent = host.spawn_root("agent-1")
        started = time.process_time()
        for index in range(creates):
            value = call_tool_json(
                host,
                agent,
                "schedule_create",
                {"prompt": f"reminder {index}", "after_seconds": 60 + index},
            )
            if "error" in value:
                raise BenchError(f"create {index} failed: {value['error']}")
        create_s = time.process_time() - started
        started = time.process_time()
        host.timers.advance(HOUR_MS)
        settle_host(host, run_turns=True, timeout=120.0)
        deliver_s = time.process_time() - started
        session = host.sessions.get(agent.session.id)
        delivered = 0 if session is None else len(dispatches(session))
        if delivered != creates:
            raise BenchError(f"{config}: {delivered} of {creates} reminders were delivered")
        return {
            "create_us": create_s / creates * 1e6,
            "deliver_us": deliver_s / creates * 1e6,
        }
    finally:
        host.dispose_plugins()
        shutdown()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the rounds, print the tables and return what was written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=500, help="reminders per run (≤ 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    creates, rounds = (50, 1) if args.quick else (args.creates, args.rounds)
    with data_root(args.data, "telemetry-cost-") as data_dir:
        info = machine_info(data_dir)
    print_machine(info)
    rows: list[dict[str, Any]] = []
    for round_no in range(1, rounds + 1):
        figures = {config: measure(config, creates) for config in CONFIGS}
        load = load_average()
        for config in CONFIGS:
            row = {
                "round": round_no,
                "config": config,
                "load": None if load is None else load[0],
                **figures[config],
            }
            for key in ("create_us", "deliver_us"):
                row[key.replace("_us", "_ratio")] = figures[config][key] / figures["off"][key]
            rows.append(row)
    print_table(
        ["round", "config", "create µs", "÷ off", "delivery µs", "÷ off", "load"],
        [
            [
                str(r["round"]),
                r["config"],
                fmt(r["create_us"]),
                f"{r['create_ratio']:.2f}",
                fmt(r["deliver_us"]),
                f"{r['deliver_ratio']:.2f}",
                "?" if r["load"] is None else f"{r['load']:.2f}",
            ]
            for r in rows
        ],
    )
    medians = {
        config: {
            key: statistics.median(r[key] for r in rows if r["config"] == config)
            for key in ("create_us", "deliver_us", "create_ratio", "deliver_ratio")
        }
        for config in CONFIGS
    }
    print_table(
        ["config", "median create µs", "÷ off", "median delivery µs", "÷ off"],
        [
            [
                config,
                fmt(m["create_us"]),
                f"{m['create_ratio']:.2f}",
                fmt(m["deliver_us"]),
                f"{m['deliver_ratio']:.2f}",
            ]
            for config, m in medians.items()
        ],
    )
    payload = {
        **header("telemetry_cost", argv),
        "machine": info,
        "creates": creates,
        "rows": rows,
        "medians": medians,
        "targets": {},
    }
    write_results(args.results, "telemetry_cost", payload)
    return payload


if __name__ == "__main__":
    main()
