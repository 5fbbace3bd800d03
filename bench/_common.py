"""Shared helpers of the benchmarks: machine facts, tables, JSON results, the embedded host."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.embedded.agents import EmbeddedAgent, Model
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import SessionEvent, ToolResult
from messages._instant import format_instant

RESULTS_DIR = Path(__file__).resolve().parent / "results"
"""Where each script writes ``<name>.json`` unless ``--results`` says otherwise (git-ignored)."""

TOOL_TIMEOUT_S = 60.0
"""How long one tool call may take before the benchmark gives up on it."""


class BenchError(RuntimeError):
    """A benchmark could not measure what it was asked to (a tool failed, a run timed out)."""


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """``--data``, ``--results``, ``--quick`` and ``--no-apscheduler``."""
    parser.add_argument(
        "--data",
        type=Path,
        help="parent directory for the data directories (default: a new temp dir under "
        f"{tempfile.gettempdir()}, removed afterwards)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS_DIR,
        help=f"directory for the JSON results (default: {RESULTS_DIR})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a seconds-long smoke run with tiny sizes"
    )
    parser.add_argument(
        "--no-apscheduler",
        action="store_true",
        help="skip the APScheduler runs even when APScheduler is installed",
    )
    parser.add_argument(
        "--runtime",
        choices=("threading", "gevent"),
        default="threading",
        help="actor runtime of the embedded host and the owners (default threading)",
    )


@contextmanager
def data_root(
    requested: Path | None, prefix: str, *, keep_requested: bool = False
) -> Iterator[Path]:
    """A fresh directory for one script's data: under ``requested`` if given, else under /tmp.

    It is removed afterwards, unless it lies under ``requested`` and ``keep_requested``
    is set (campaigns keep their stores there for inspection).
    """
    if requested is not None:
        requested.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=requested))
    try:
        yield root
    finally:
        if not (keep_requested and requested is not None):
            shutil.rmtree(root, ignore_errors=True)


def quiet_logs() -> None:
    """Keep library warnings (e.g. APScheduler's per-job INFO lines) off the table output."""
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


# --- machine -----------------------------------------------------------------------------


def filesystem_of(path: Path) -> dict[str, str]:
    """The mount point, device and file-system type holding ``path`` (from /proc/mounts)."""
    target = str(path.resolve())
    best: dict[str, str] = {"mount_point": "?", "device": "?", "fstype": "?"}
    best_length = -1
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        device, mount_point, fstype = parts[0], parts[1].replace("\\040", " "), parts[2]
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) > best_length:
            best = {"mount_point": mount_point, "device": device, "fstype": fstype}
            best_length = len(mount_point)
    return best


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError):
        pass
    return None


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages, if the platform has them."""
    try:
        return os.getloadavg()
    except OSError:
        return None


def _version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def machine_info(data_dir: Path) -> dict[str, Any]:
    """Facts about the machine and the data directory's disk, for the JSON and the doc."""
    return {
        "nproc": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "data_dir": str(data_dir),
        "filesystem": filesystem_of(data_dir),
        "load_average_at_start": load_average(),
        "versions": {
            name: _version(name)
            for name in ("dsh-tool-schedule", "pykka", "msgpack", "APScheduler", "SQLAlchemy")
        },
    }


def print_machine(info: dict[str, Any]) -> None:
    """One line about the machine, printed above each table."""
    fs = info["filesystem"]
    load = info["load_average_at_start"]
    load_text = "?" if load is None else f"{load[0]:.2f}"
    print(
        f"machine: {info['nproc']} cores, {info['memory_gib']} GiB, Python {info['python']}, "
        f"SQLite {info['sqlite']}; data dir on {fs['fstype']} ({fs['device']} at "
        f"{fs['mount_point']}); 1-min load {load_text}"
    )


# --- numbers and tables --------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile (0..1) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    """The median; NaN for no values."""
    return statistics.median(values) if values else math.nan


def distribution(values_ms: Sequence[float]) -> dict[str, float | int]:
    """count, min, p50, p90, p99, max and mean of millisecond values."""
    return {
        "count": len(values_ms),
        "min_ms": min(values_ms) if values_ms else math.nan,
        "p50_ms": percentile(values_ms, 0.50),
        "p90_ms": percentile(values_ms, 0.90),
        "p99_ms": percentile(values_ms, 0.99),
        "max_ms": max(values_ms) if values_ms else math.nan,
        "mean_ms": statistics.fmean(values_ms) if values_ms else math.nan,
    }


def fmt(value: object, digits: int = 0) -> str:
    """A number for a table cell: thousands separators, ``digits`` decimals, ``—`` for none."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        return f"{value:,.{digits}f}"
    return str(value)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """An aligned plain-text table: first column left-aligned, the others right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        out = [cells[0].ljust(widths[0])]
        out.extend(cell.rjust(widths[i + 1]) for i, cell in enumerate(cells[1:]))
        return "  ".join(out).rstrip()

    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


PER_OP_LABELS = {
    "messages": "messages",
    "futures": "futures",
    "notifications": "notifications",
    "voluntary_switches": "context switches (voluntary)",
    "involuntary_switches": "(involuntary)",
    "flush_requests": "flush requests",
    "commits": "commits",
}
"""How :func:`print_per_op` names each per-operation count (see :mod:`bench._counts`)."""


def print_per_op(title: str, counts: dict[str, float | None]) -> None:
    """One line of per-operation counts, in a fixed order; missing ones are skipped."""
    cells = [
        f"{label} {counts[key]:.2f}"
        for key, label in PER_OP_LABELS.items()
        if counts.get(key) is not None
    ]
    print(f"{title}: " + ", ".join(cells))


def verdict(met: bool | None) -> str:
    """``met``, ``MISSED`` or ``n/a``."""
    if met is None:
        return "n/a"
    return "met" if met else "MISSED"


def write_results(results_dir: Path, name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` as ``results_dir/<name>.json`` (NaN becomes null) and return the path."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.json"
    path.write_text(json.dumps(_finite(payload), indent=2, sort_keys=False) + "\n")
    return path


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def header(title: str, argv: Sequence[str] | None) -> dict[str, Any]:
    """The common head of every JSON result."""
    return {
        "benchmark": title,
        "argv": list(sys.argv[1:] if argv is None else argv),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


# --- the embedded host ---------------------------------------------------------------------


@dataclass
class Host:
    """An embedded host with Schedule installed, for one measurement."""

    host: EmbeddedHost
    plugin: SchedulePlugin

    @property
    def commit_count(self) -> int:
        """Durable commits of the host's SQLite store so far."""
        store = self.host.persistence
        return 0 if store is None else store.commit_count

    def spawn(self, *, model: Model | None = None, session_id: str | None = None) -> EmbeddedAgent:
        """A root agent with Schedule whose owner has finished its first drive."""
        agent = self.host.spawn_root(model=model, session_id=session_id)
        self.plugin.wait_quiet(agent, timeout=TOOL_TIMEOUT_S)
        return agent

    def call(self, agent: EmbeddedAgent, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run a Schedule tool through the host's registry (the real tool path) and wait."""
        return self.host.tools.execute(name, arguments, agent=agent, timeout=TOOL_TIMEOUT_S)

    def create(self, agent: EmbeddedAgent, prompt: str, after_seconds: int) -> dict[str, Any]:
        """``schedule_create``, returning its value; a domain error raises :class:`BenchError`."""
        arguments = {"prompt": prompt, "after_seconds": after_seconds}
        result = self.call(agent, "schedule_create", arguments)
        return _value(result, "schedule_create", "id")

    def list(self, agent: EmbeddedAgent) -> dict[str, Any]:
        """``schedule_list``, returning its value."""
        return _value(self.call(agent, "schedule_list", {}), "schedule_list", "schedules")

    def delete(self, agent: EmbeddedAgent, schedule_id: str) -> dict[str, Any]:
        """``schedule_delete``, returning its value (``deleted`` must be true)."""
        value = _value(
            self.call(agent, "schedule_delete", {"id": schedule_id}), "schedule_delete", "deleted"
        )
        if value["deleted"] is not True:
            raise BenchError(f"schedule_delete did not delete {schedule_id}: {value}")
        return value

    def close(self) -> None:
        """Dispose the plugin, then close the host (store, sessions, timers)."""
        try:
            self.plugin.dispose().result(timeout=TOOL_TIMEOUT_S)
        finally:
            self.host.close()


def _value(result: ToolResult, name: str, key: str) -> dict[str, Any]:
    value = result.value
    if result.is_error or not isinstance(value, dict) or key not in value:
        raise BenchError(f"{name} failed: {result.content}")
    return value


def open_host(data_dir: Path, runtime: str = "threading", store: str | None = None) -> Host:
    """An :class:`EmbeddedHost` on ``data_dir`` (wall clock, real timers) with Schedule.

    ``runtime`` (``"threading"`` or ``"gevent"``) runs the host's actors and the
    owners on that actor runtime; benchmark threads call the tools from outside it.
    ``store`` (a ``postgresql://`` URL or an SQLite path) replaces the SQLite file
    in ``data_dir``.
    """
    host = EmbeddedHost(data_dir, runtime=runtime, store=store)
    try:
        if runtime == "threading":
            plugin = install_schedule(host.context())
        else:
            plugin = install_schedule(host.context(), runtime=host.runtime)
    except BaseException:
        host.close()
        raise
    return Host(host, plugin)


def at_reminder(seq: int, schedule_id: str, prompt: str, due_ms: int, at_ms: int) -> SessionEvent:
    """A stored ``create`` of an ``at`` reminder due at ``due_ms``, logged at ``at_ms``."""
    schedule = {
        "id": schedule_id,
        "kind": "at",
        "prompt": prompt,
        "scheduledAt": format_instant(due_ms),
    }
    data = {"version": 1, "operation": "create", "schedule": schedule}
    return SessionEvent("schedule/change", seq, at_ms, data)


def delivery_counts(events: Sequence[SessionEvent]) -> tuple[int, int, int]:
    """A session's dispatches, inbox entries and inbox entries whose turn completed."""
    dispatches = sum(
        1 for e in events if e.type == "schedule/change" and e.data.get("operation") == "dispatch"
    )
    inbox = {e.seq for e in events if e.type == "inbox/queued"}
    done = {e.data["inbox"] for e in events if e.type == "turn/completed"}
    return dispatches, len(inbox), len(inbox & done)
