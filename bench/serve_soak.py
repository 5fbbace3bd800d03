"""``serve``'s memory over a soak: waves of cold reminders, resident memory after each wave.

One :class:`host_bridge.cli._serve.Server` (the class ``dsh-schedule serve``
runs) serves a real SQLite store. Each wave stores ``--per-wave`` new closed
sessions through the store API, each with one ``at`` reminder already due
(with a prompt of ``--prompt-bytes``), waits until the server presented all
of them and let every woken session go again, collects garbage and samples
the process's resident set. ``serve`` must remember nothing per reminder (what
was presented is in the store), so the resident set stays flat from wave to
wave once its caches are warm (SQLite's page caches, the allocator's arenas of
the worker threads): the figure to watch is the growth per reminder over the
second half of the waves, beside the growth from the first wave (the anchor).

Also printed per wave: the Python heap's allocated blocks (flat when nothing
is kept per reminder, whatever the C-level caches do), wake-ups per second,
CPU per wake-up, and the load average. At the end the store is checked:
every reminder has one ``dispatch``, one inbox entry and one completed turn,
and the due index is empty.

Usage: ``python -m bench.serve_soak`` (10 waves of 2,000, a few minutes) or
``--quick``. Writes ``bench/results/serve_soak.json``.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    BenchError,
    add_common_arguments,
    at_reminder,
    data_root,
    delivery_counts,
    fmt,
    header,
    load_average,
    machine_info,
    print_machine,
    print_table,
    verdict,
    write_results,
)
from bench.soak import rss_bytes
from host_bridge._plugin import WakePolicy
from host_bridge.cli._serve import Presented, Server
from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import SessionEvent, SessionHeader, wall_clock_ms

GROWTH_TARGET_BYTES = 64
"""Resident growth per reminder after the first wave that still counts as flat."""


def store_wave(path: Path, wave: int, count: int, prompt: str) -> None:
    """Store ``count`` closed sessions of ``wave``, each with one ``at`` reminder due now."""
    store = SqliteEventStore(path)
    now = wall_clock_ms()
    try:
        for index in range(count):
            session_id = f"w{wave:02d}-{index:05d}"
            rows = [
                SessionEvent("message", 0, now, {"role": "user", "content": "remind me"}),
                at_reminder(1, "schedule-1", f"{prompt} {session_id}", now - 1_000, now - 60_000),
            ]
            store.create_session(
                SessionHeader(session_id), [(e, encode_payload(e.data)) for e in rows]
            )
        store.flush_all().result(timeout=300)
        for index in range(count):
            store.release_session(f"w{wave:02d}-{index:05d}")
    finally:
        store.close()


class Counter:
    """Counts presented reminders; :meth:`wait` blocks until a number is reached."""

    def __init__(self) -> None:
        self._count = 0
        self._changed = threading.Condition()

    def __call__(self, item: Presented) -> None:
        with self._changed:
            self._count += 1
            self._changed.notify_all()

    @property
    def count(self) -> int:
        """How many were presented."""
        with self._changed:
            return self._count

    def wait(self, count: int, timeout: float) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self._count >= count, timeout):
                raise BenchError(f"only {self._count} of {count} reminders were presented")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _wait_let_go(server: Server, timeout: float) -> None:
    """Poll until the server has no woken session left (the benchmark may poll; tests may not)."""
    host = server.host
    assert host is not None and host.activation is not None
    deadline = time.monotonic() + timeout
    while host.activation.activated or host.sessions.list():
        if time.monotonic() > deadline:
            raise BenchError("woken sessions were not let go in time")
        time.sleep(0.05)


def run(
    data_dir: Path, waves: int, per_wave: int, prompt_bytes: int, timeout: float
) -> dict[str, Any]:
    """Serve ``waves`` waves; the per-wave samples and the final store check."""
    path = store_path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    SqliteEventStore(path).close()  # create the store before the server opens it
    counter = Counter()
    server = Server(
        data_dir,
        policy=WakePolicy(max_concurrent=8, quiet_period_ms=200),
        on_presented=counter,
        echo=lambda text: None,
    )
    prompt = "x" * prompt_bytes
    rows: list[dict[str, Any]] = []
    server.start()
    try:
        for wave in range(waves):
            store_wave(path, wave, per_wave, prompt)
            started, cpu = time.perf_counter(), _cpu_seconds()
            counter.wait((wave + 1) * per_wave, timeout)
            elapsed, used = time.perf_counter() - started, _cpu_seconds() - cpu
            _wait_let_go(server, timeout)
            gc.collect()
            rows.append(
                {
                    "wave": wave + 1,
                    "presented": counter.count,
                    "rss_bytes": rss_bytes(),
                    "python_blocks": sys.getallocatedblocks(),
                    "presented_alive": sum(isinstance(o, Presented) for o in gc.get_objects()),
                    "wakeups_per_s": per_wave / elapsed,
                    "cpu_ms_per_wakeup": used * 1000 / per_wave,
                    "load": load_average(),
                }
            )
    finally:
        server.stop()
    return {"waves": rows, "check": check_store(path, waves * per_wave)}


def check_store(path: Path, expected: int) -> dict[str, int]:
    """Per reminder one dispatch, one inbox entry, one completed turn; an empty due index."""
    store = SqliteEventStore(path, create=False)
    wrong = 0
    try:
        ids = store.session_ids()
        for session_id in ids:
            stored = store.load(session_id)
            if stored is None or delivery_counts(stored.events) != (1, 1, 1):
                wrong += 1
        owed = len(store.due_entries())
    finally:
        store.close()
    return {"sessions": len(ids), "expected": expected, "wrong": wrong, "still_owed": owed}


def growth_per_reminder(
    rows: Sequence[dict[str, Any]], per_wave: int, start: int = 0
) -> float | None:
    """Resident growth per reminder from the end of wave ``start + 1`` to the end of the last."""
    if len(rows) - start < 2:
        return None
    first, last = rows[start]["rss_bytes"], rows[-1]["rss_bytes"]
    if first is None or last is None:
        return None
    return float(last - first) / ((len(rows) - 1 - start) * per_wave)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the soak, print its table, write its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    add_common_arguments(parser)
    parser.add_argument("--waves", type=int, default=10, help="waves (10)")
    parser.add_argument("--per-wave", type=int, default=2_000, help="reminders a wave (2,000)")
    parser.add_argument("--prompt-bytes", type=int, default=200, help="prompt length (200)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a wave may take")
    args = parser.parse_args(argv)
    if args.quick:
        args.waves, args.per_wave = 3, 40
    result = header("serve_soak", argv)
    with data_root(args.data, "dsh-serve-soak-") as root:
        result["machine"] = machine_info(root)
        print_machine(result["machine"])
        measured = run(root / "data", args.waves, args.per_wave, args.prompt_bytes, args.timeout)
    rows = measured["waves"]
    print_table(
        [
            "wave",
            "presented",
            "RSS MiB",
            "growth KiB",
            "Python blocks",
            "wake-ups/s",
            "CPU ms/wake-up",
            "load 1m",
        ],
        [
            [
                str(row["wave"]),
                str(row["presented"]),
                fmt(None if row["rss_bytes"] is None else row["rss_bytes"] / 2**20, 1),
                fmt(
                    None
                    if row["rss_bytes"] is None or rows[0]["rss_bytes"] is None
                    else (row["rss_bytes"] - rows[0]["rss_bytes"]) / 1024,
                    0,
                ),
                fmt(row["python_blocks"], 0),
                fmt(row["wakeups_per_s"], 0),
                fmt(row["cpu_ms_per_wakeup"], 2),
                fmt(None if row["load"] is None else row["load"][0], 2),
            ]
            for row in rows
        ],
    )
    growth = growth_per_reminder(rows, args.per_wave)
    half = len(rows) // 2 - 1 if len(rows) >= 4 else 0
    steady = growth_per_reminder(rows, args.per_wave, half)
    check = measured["check"]
    flat = None if steady is None else steady <= GROWTH_TARGET_BYTES
    print(f"growth after wave 1: {fmt(growth, 1)} bytes per reminder")
    blocks = (rows[-1]["python_blocks"] - rows[half]["python_blocks"]) / max(
        1, (len(rows) - 1 - half) * args.per_wave
    )
    print(f"Python objects after wave {half + 1}: {blocks:+.3f} allocated blocks per reminder")
    print(
        f"growth after wave {half + 1} (caches warm): {fmt(steady, 1)} bytes per reminder "
        f"(flat: <= {GROWTH_TARGET_BYTES}) {verdict(flat)}"
    )
    alive = max(row["presented_alive"] for row in rows)
    print(f"reminders still held in memory after a wave: {alive} (none may be)")
    print(
        f"store: {check['sessions']} sessions, {check['wrong']} not delivered exactly once, "
        f"{check['still_owed']} still owed"
    )
    result.update(measured)
    result["growth_bytes_per_reminder"] = {"after_first_wave": growth, "second_half": steady}
    result["python_blocks_per_reminder_second_half"] = blocks
    result["targets"] = {
        "flat_memory": {"target": GROWTH_TARGET_BYTES, "value": steady, "met": flat},
        "nothing_held_per_reminder": {"target": 0, "value": alive, "met": alive == 0},
        "exactly_once": {
            "target": 0,
            "value": check["wrong"] + check["still_owed"],
            "met": check["wrong"] == 0 and check["still_owed"] == 0,
        },
    }
    path = write_results(args.results, "serve_soak", result)
    print(f"results: {path}")
    return result


if __name__ == "__main__":
    main()
