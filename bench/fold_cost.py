"""Fold cost vs log length: ``schedule_list`` latency on sessions of 10² … 10⁵ events.

Usage (from the repository root)::

    python -m bench.fold_cost [--sizes 100,1000,10000,100000] [--reps 300] [--quick]

Each session is written straight into the embedded host's SQLite store: mostly
``message`` events shaped like the embedded agents' turns (user prompts,
assistant tool calls, tool results, replies) and a ``--share`` of
``schedule/change`` events (creates later dispatched or deleted, a few creates
still active at the end, the same number for every size so every
``schedule_list`` returns the same records). A host then resumes every session
with a root agent (the owner folds the whole log once when it starts) and:

* ``schedule_list`` through the real tool path (preflight flush, fold, views),
  timed ``--reps`` times round-robin across the sizes (median and p90);
* a full refold, ``fold_schedule_events(session.events, seed_length)``, of the
  same log (median of ``--fold-reps``).

Prints a table and writes ``bench/results/fold_cost.json``.

``--resume`` measures the resume instead, at 10³, 10⁴ and 10⁵ events unless
``--sizes`` says otherwise: per repetition (``--resume-reps``, round-robin
across the sizes) a new host opens the store, and the time to resume the
session (a root agent whose owner folded the log) and answer its first
``schedule_list`` is taken; then, on a host of its own with ``tracemalloc``
on, the memory the live session holds. Each size is stored twice: once with
the schedule checkpoint the store writes with the rows (the resume reads the
log after it), once with that checkpoint deleted before every resume (the
store folds the session's wake-relevant rows instead). Beside them the
anchor: a plain ``SELECT`` of the same rows on a new connection and a decode
of every payload. Writes ``bench/results/fold_cost_resume.json``.
"""

from __future__ import annotations

import argparse
import gc
import random
import sqlite3
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._common import (
    BenchError,
    add_common_arguments,
    data_root,
    fmt,
    header,
    load_average,
    machine_info,
    median,
    open_host,
    percentile,
    print_machine,
    print_table,
    verdict,
    write_results,
)
from host_bridge.embedded.codec import decode_payload, encode_payload
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import SessionEvent, SessionHeader
from messages import (
    SCHEDULE_CHANGE_TYPE,
    CreateChange,
    DeleteChange,
    DispatchChange,
    create_after_schedule_record,
    fold_schedule_events,
)

NAME = "fold_cost"
RESUME_NAME = "fold_cost_resume"

TARGET_RATIO = 2.0
"""``schedule_list`` on the longest log must be within this multiple of the shortest's."""

_DAY_MS = 86_400_000
_YEAR_S = 365 * 86_400


def _message(rng: random.Random, turn: int) -> dict[str, Any]:
    """One ``message`` event like an embedded agent's turn records."""
    kind = turn % 4
    if kind == 0:
        return {
            "role": "user",
            "content": f"Please look at item {rng.randrange(10_000)} and tell me what changed.",
            "source": {"kind": "user"},
        }
    if kind == 1:
        return {
            "role": "assistant",
            "toolCall": {"name": "search", "arguments": {"query": f"item {rng.randrange(10_000)}"}},
        }
    if kind == 2:
        return {
            "role": "tool",
            "name": "search",
            "isError": False,
            "content": "[" + ",".join(f'"result {rng.randrange(1000)}"' for _ in range(5)) + "]",
        }
    return {"role": "assistant", "content": "Here is a short summary of what changed. " * 3}


def build_log(size: int, share: float, active: int, seed: int) -> list[tuple[str, Any]]:
    """``size`` (type, data) items: ``share`` schedule changes, ``active`` creates left open.

    Closed reminders are created, then dispatched (70 %) or deleted (30 %) a few
    changes later, at most three open at a time; the ``active`` open ones come last
    and are due years ahead, so nothing is delivered while measuring.
    """
    rng = random.Random(seed)
    changes_total = max(active, round(size * share))
    pairs = (changes_total - active) // 2
    now_ms = int(time.time() * 1000)
    changes: list[dict[str, Any]] = []
    open_ids: list[str] = []
    number = 0

    def create(after_seconds: int, at_ms: int) -> str:
        nonlocal number
        number += 1
        record = create_after_schedule_record(
            f"schedule-{number}", f"follow up on task {number}", after_seconds, at_ms
        )
        changes.append(CreateChange(record).to_json())
        return record.id

    past = now_ms - 30 * _DAY_MS
    for index in range(pairs):
        open_ids.append(create(rng.randrange(60, 3600), past + index * 60_000))
        if len(open_ids) >= 3 or index == pairs - 1:
            while open_ids:
                closing = open_ids.pop(0)
                change = DispatchChange(closing) if rng.random() < 0.7 else DeleteChange(closing)
                changes.append(change.to_json())
    for _ in range(active):
        create(10 * _YEAR_S, now_ms)
    if len(changes) > size:
        raise BenchError(f"a log of {size} events cannot hold {len(changes)} schedule changes")
    positions = sorted(rng.sample(range(size), len(changes)))
    items: list[tuple[str, Any]] = []
    change_iter = iter(changes)
    next_position = iter(positions)
    upcoming = next(next_position, None)
    turn = 0
    for index in range(size):
        if index == upcoming:
            items.append((SCHEDULE_CHANGE_TYPE, next(change_iter)))
            upcoming = next(next_position, None)
        else:
            items.append(("message", _message(rng, turn)))
            turn += 1
    return items


def write_session(
    store: SqliteEventStore, session_id: str, items: Sequence[tuple[str, Any]]
) -> int:
    """Store a session with ``items`` as its log; returns the number of schedule changes."""
    base = int(time.time() * 1000) - len(items) * 1000
    seed = [
        (SessionEvent(type_, seq, base + seq * 1000, data), encode_payload(data))
        for seq, (type_, data) in enumerate(items)
    ]
    store.create_session(SessionHeader(session_id), seed)
    if store.flush(session_id).result(timeout=300) is not True:
        raise BenchError(f"session {session_id} was not stored durably")
    return sum(1 for type_, _ in items if type_ == SCHEDULE_CHANGE_TYPE)


def drop_checkpoint(root: Path, session_id: str) -> None:
    """Delete the stored schedule checkpoint of ``session_id`` (a session without one)."""
    conn = sqlite3.connect(store_path(root))
    try:
        with conn:
            conn.execute("DELETE FROM schedule_checkpoints WHERE session_id = ?", (session_id,))
    finally:
        conn.close()


def resume_once(root: Path, session_id: str, runtime: str) -> dict[str, Any]:
    """Open a host on ``root``, resume ``session_id`` and list its schedules; the timings."""
    opened = time.perf_counter()
    host = open_host(root, runtime)
    try:
        began = time.perf_counter()
        agent = host.spawn(session_id=session_id)
        spawned = time.perf_counter()
        listed = len(host.list(agent)["schedules"])
        answered = time.perf_counter()
        events = len(agent.session.events)
        bounded = bool(getattr(agent.session, "bounded", False))
    finally:
        host.close()
    return {
        "bounded": bounded,
        "open_host_ms": (began - opened) * 1000,
        "spawn_ms": (spawned - began) * 1000,
        "first_list_ms": (answered - spawned) * 1000,
        "resume_ms": (answered - began) * 1000,
        "events": events,
        "active": listed,
    }


def held_memory(root: Path, session_id: str, runtime: str) -> dict[str, float]:
    """MiB that resuming ``session_id`` allocated and still holds, and its peak (tracemalloc)."""
    host = open_host(root, runtime)
    try:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            agent = host.spawn(session_id=session_id)
            host.list(agent)
            gc.collect()
            held, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        host.close()
    return {"held_mib": (held - before) / 2**20, "peak_mib": (peak - before) / 2**20}


def anchor_once(root: Path, session_id: str) -> dict[str, Any]:
    """A new connection; ``SELECT`` the session's rows and decode every payload (timed)."""
    conn = sqlite3.connect(store_path(root))
    try:
        began = time.perf_counter()
        rows = conn.execute(
            "SELECT seq, type, time, data FROM events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        decoded = [(seq, type_, time_, decode_payload(data)) for seq, type_, time_, data in rows]
        ended = time.perf_counter()
    finally:
        conn.close()
    return {"anchor_ms": (ended - began) * 1000, "events": len(decoded)}


def resume_main(args: argparse.Namespace, argv: Sequence[str] | None) -> dict[str, Any]:
    """``--resume``: cold resumes and their first ``schedule_list`` against a plain read."""
    sizes = [int(part) for part in (args.sizes or "1000,10000,100000").split(",") if part]
    if args.quick:
        sizes = [size for size in sizes if size <= 1000] or sizes[:1]
        args.resume_reps = 2
    cases = [(size, checkpoint) for size in sizes for checkpoint in (True, False)]

    def session_name(size: int, checkpoint: bool) -> str:
        return f"log-{size}" if checkpoint else f"bare-{size}"

    def prepare(root: Path, size: int, checkpoint: bool) -> None:
        if not checkpoint:
            drop_checkpoint(root, session_name(size, checkpoint))

    with data_root(args.data, "dsh-bench-resume-") as root:
        info = machine_info(root)
        with SqliteEventStore(store_path(root)) as store:
            for size, checkpoint in cases:
                items = build_log(size, args.share, args.active, args.seed)
                write_session(store, session_name(size, checkpoint), items)
        runs: dict[tuple[int, bool], list[dict[str, Any]]] = {case: [] for case in cases}
        anchors: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
        for _ in range(args.resume_reps):  # round-robin: load drifts hit every size alike
            for size, checkpoint in cases:
                gc.collect()
                prepare(root, size, checkpoint)
                runs[size, checkpoint].append(
                    resume_once(root, session_name(size, checkpoint), args.runtime)
                )
                if checkpoint:
                    anchors[size].append(anchor_once(root, session_name(size, checkpoint)))
        memory: dict[tuple[int, bool], dict[str, float]] = {}
        for size, checkpoint in cases:
            prepare(root, size, checkpoint)
            memory[size, checkpoint] = held_memory(
                root, session_name(size, checkpoint), args.runtime
            )
        load = load_average()
    rows: list[dict[str, Any]] = []
    for size, checkpoint in cases:
        case = (size, checkpoint)
        if any(run["events"] != size for run in runs[case] + anchors[size]):
            raise BenchError(f"session {session_name(*case)} did not resume with {size} events")
        resume_ms = [run["resume_ms"] for run in runs[case]]
        anchor = [run["anchor_ms"] for run in anchors[size]]
        rows.append(
            {
                "events": size,
                "checkpoint": checkpoint,
                "bounded": all(run["bounded"] for run in runs[case]),
                "active": runs[case][0]["active"],
                "resume_ms_median": median(resume_ms),
                "resume_ms_max": max(resume_ms),
                "spawn_ms_median": median([run["spawn_ms"] for run in runs[case]]),
                "first_list_ms_median": median([run["first_list_ms"] for run in runs[case]]),
                "open_host_ms_median": median([run["open_host_ms"] for run in runs[case]]),
                "anchor_ms_median": median(anchor),
                "ratio": median(resume_ms) / max(1e-9, median(anchor)),
                "resume_us_per_event": median(resume_ms) * 1000 / size,
                "anchor_us_per_event": median(anchor) * 1000 / size,
                **memory[case],
                "held_bytes_per_event": memory[case]["held_mib"] * 2**20 / size,
                "runs": runs[case],
                "anchor_runs": anchors[size],
            }
        )
    print_machine(info)
    print(
        f"cold resume (a new host each time) + first schedule_list, median of "
        f"{args.resume_reps}; anchor: SELECT of the rows + decode of every payload; memory "
        "held by the live session (tracemalloc, one resume); checkpoint no: deleted before "
        "each resume"
    )
    print_table(
        [
            "events",
            "checkpoint",
            "bounded",
            "resume ms",
            "of it list ms",
            "anchor ms",
            "ratio",
            "MiB held",
            "resume µs/event",
            "anchor µs/event",
            "load 1m",
        ],
        [
            [
                fmt(row["events"]),
                "yes" if row["checkpoint"] else "no",
                "yes" if row["bounded"] else "no",
                fmt(row["resume_ms_median"], 1),
                fmt(row["first_list_ms_median"], 2),
                fmt(row["anchor_ms_median"], 1),
                fmt(row["ratio"], 1),
                fmt(row["held_mib"], 1),
                fmt(row["resume_us_per_event"], 1),
                fmt(row["anchor_us_per_event"], 2),
                "?" if load is None else f"{load[0]:.2f}",
            ]
            for row in rows
        ],
    )
    payload = header(RESUME_NAME, argv) | {
        "machine": info,
        "parameters": {
            "sizes": sizes,
            "share": args.share,
            "active": args.active,
            "reps": args.resume_reps,
            "seed": args.seed,
            "runtime": args.runtime,
        },
        "rows": rows,
        "load_average_at_end": load,
        "targets": {
            "resumed_whole": {"met": all(row["active"] == args.active for row in rows)},
        },
    }
    name = RESUME_NAME if args.runtime == "threading" else f"{RESUME_NAME}_{args.runtime}"
    path = write_results(args.results, name, payload)
    print(f"\nresults: {path}")
    return payload


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write the JSON; returns what it wrote."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--sizes", help="log lengths (default 100,1000,10000,100000; --resume 1000,10000,100000)"
    )
    parser.add_argument("--share", type=float, default=0.03, help="share of schedule changes")
    parser.add_argument("--active", type=int, default=3, help="active reminders at the end")
    parser.add_argument("--reps", type=int, default=300, help="schedule_list calls per size")
    parser.add_argument("--fold-reps", type=int, default=7, help="full refolds per size")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the logs")
    parser.add_argument(
        "--resume", action="store_true", help="cold resumes against a plain read of the rows"
    )
    parser.add_argument("--resume-reps", type=int, default=5, help="cold resumes per size")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.resume:
        return resume_main(args, argv)
    sizes_text = args.sizes or "100,1000,10000,100000"
    sizes = [int(part) for part in sizes_text.split(",") if part.strip()]
    if args.quick:
        sizes = [size for size in sizes if size <= 1000] or sizes[:1]
        args.reps, args.fold_reps = 5, 1

    with data_root(args.data, "dsh-bench-fold-") as root:
        info = machine_info(root)
        changes: dict[int, int] = {}
        build_s: dict[int, float] = {}
        with SqliteEventStore(store_path(root)) as store:
            for size in sizes:
                began = time.perf_counter()
                changes[size] = write_session(
                    store, f"log-{size}", build_log(size, args.share, args.active, args.seed)
                )
                build_s[size] = time.perf_counter() - began
        host = open_host(root, args.runtime)
        try:
            agents = {}
            resume_s: dict[int, float] = {}
            for size in sizes:
                began = time.perf_counter()
                agents[size] = host.spawn(session_id=f"log-{size}")
                resume_s[size] = time.perf_counter() - began
                if len(agents[size].session.events) != size:
                    raise BenchError(f"session log-{size} resumed with the wrong length")
            listed = {size: len(host.list(agents[size])["schedules"]) for size in sizes}
            for _ in range(3):  # warm-up
                for size in sizes:
                    host.list(agents[size])
            latencies: dict[int, list[float]] = {size: [] for size in sizes}
            for _ in range(args.reps):  # round-robin: load drifts hit every size alike
                for size in sizes:
                    began = time.perf_counter()
                    host.list(agents[size])
                    latencies[size].append((time.perf_counter() - began) * 1000)
            refold: dict[int, list[float]] = {size: [] for size in sizes}
            for _ in range(args.fold_reps):
                for size in sizes:
                    session = agents[size].session
                    events = session.events
                    began = time.perf_counter()
                    folded = fold_schedule_events(events, session.header.seed_length or 0)
                    refold[size].append((time.perf_counter() - began) * 1000)
                    if len(folded.active) != listed[size]:
                        raise BenchError("the full refold disagrees with schedule_list")
        finally:
            host.close()

    rows: list[dict[str, Any]] = []
    for size in sizes:
        rows.append(
            {
                "events": size,
                "schedule_changes": changes[size],
                "active": listed[size],
                "list_ms_median": median(latencies[size]),
                "list_ms_p90": percentile(latencies[size], 0.9),
                "refold_ms_median": median(refold[size]),
                "build_s": build_s[size],
                "resume_s": resume_s[size],
            }
        )
    base = rows[0]["list_ms_median"]
    for row in rows:
        row["list_vs_smallest"] = row["list_ms_median"] / base
    ratio = rows[-1]["list_vs_smallest"] if len(rows) > 1 else None
    target: dict[str, Any] = {
        "value": ratio,
        "target": f"<= {TARGET_RATIO}x ({sizes[-1]} events vs {sizes[0]})",
        "met": None if ratio is None else ratio <= TARGET_RATIO,
    }

    print_machine(info)
    print(
        f"schedule_list through the tool path, median of {args.reps} round-robin calls; "
        f"full refold median of {args.fold_reps}"
    )
    print_table(
        [
            "events",
            "changes",
            "active",
            "list p50 ms",
            "list p90 ms",
            "x smallest",
            "full refold ms",
            "resume s",
        ],
        [
            [
                fmt(row["events"]),
                fmt(row["schedule_changes"]),
                fmt(row["active"]),
                fmt(row["list_ms_median"], 3),
                fmt(row["list_ms_p90"], 3),
                fmt(row["list_vs_smallest"], 2),
                fmt(row["refold_ms_median"], 3),
                fmt(row["resume_s"], 2),
            ]
            for row in rows
        ],
    )
    print(f"target: {target['target']}: {fmt(ratio, 2)} -> {verdict(target['met'])}")

    payload = header(NAME, argv) | {
        "machine": info,
        "parameters": {
            "sizes": sizes,
            "share": args.share,
            "active": args.active,
            "reps": args.reps,
            "fold_reps": args.fold_reps,
            "seed": args.seed,
            "runtime": args.runtime,
        },
        "rows": rows,
        "targets": {"list_longest_vs_shortest": target},
    }
    name = NAME if args.runtime == "threading" else f"{NAME}_{args.runtime}"
    path = write_results(args.results, name, payload)
    print(f"\nresults: {path}")
    return payload


if __name__ == "__main__":
    main()
