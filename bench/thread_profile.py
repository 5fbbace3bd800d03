"""Profile a benchmark across all its threads with cProfile, and say where the time goes.

Usage (from the repository root)::

    python -m bench.thread_profile [--top 25] bench.group_commit --agents 100 --rounds 1

Runs ``python -m MODULE ARGS...`` in this process with a ``cProfile.Profile``
enabled in every thread (actors, the store's writer, timers, callers), merges the
per-thread statistics and prints:

* the time by area (schedule owner and session actors, pykka and thread plumbing,
  the fold and other ``messages`` code, the SQLite store, blocking waits);
* the functions with the most self time outside blocking waits.

cProfile slows Python code down (roughly 2x), so read the shares, not the absolute
times. Sampling profilers (``py-spy record -- python -m bench.NAME``) disturb less
but attribute poorly with hundreds of threads; both are documented in
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import runpy
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BLOCKING = (
    "acquire' of '_thread.",
    "'__enter__' of '_thread.RLock'",
    "'_acquire_restore' of '_thread.RLock'",
    "time.sleep",
    "of 'select.epoll' objects",
    "select.select",
)
"""Built-ins where a thread waits (for another thread, a lock, a timer) instead of computing.

Acquiring a lock counts as waiting even when it is free (cProfile cannot tell).
"""

AREAS: tuple[tuple[str, str], ...] = (
    ("sqlite3.Connection", "SQLite calls (incl. COMMIT/fsync wait)"),
    ("/actors/schedule_owner.py", "ScheduleOwner actor"),
    ("/actors/session_actor.py", "SessionActor"),
    ("/actors/", "actors (other)"),
    ("/messages/fold.py", "fold"),
    ("/messages/", "messages (records, instants, values)"),
    ("/host_bridge/embedded/stores/", "session store (Python)"),
    ("/host_bridge/embedded/", "embedded host (sessions, agents, tools, codec)"),
    ("/host_bridge/", "host_bridge (tools, futures, timers)"),
    ("/pykka/", "pykka"),
    ("threading.py", "threading (locks, conditions)"),
    ("queue.py", "queue"),
    ("concurrent/futures", "concurrent.futures"),
    ("msgpack", "msgpack"),
    ("/bench/", "benchmark driver"),
)


def _area(filename: str, function: str) -> str:
    where = f"{filename}:{function}"
    for needle, name in AREAS:
        if needle in where:
            return name
    return "other"


_REPO_ROOT = str(Path(__file__).resolve().parent.parent) + "/"


def _label(key: tuple[str, int, str]) -> str:
    filename, line, function = key
    if filename == "~":
        return function
    return f"{filename.removeprefix(_REPO_ROOT)}:{line}({function})"


def profile(module: str, args: Sequence[str]) -> pstats.Stats:
    """Run ``module`` as ``__main__`` with ``args``, profiling every thread; merged stats."""
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()
    original_run: Callable[[threading.Thread], None] = threading.Thread.run

    def profiled_run(self: threading.Thread) -> None:
        profiler = cProfile.Profile()
        with lock:
            profiles.append(profiler)
        profiler.enable()
        try:
            original_run(self)
        finally:
            profiler.disable()

    setattr(threading.Thread, "run", profiled_run)  # noqa: B010 - patching a method
    main_profiler = cProfile.Profile()
    saved_argv = sys.argv
    sys.argv = [module, *args]
    main_profiler.enable()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        main_profiler.disable()
        sys.argv = saved_argv
        setattr(threading.Thread, "run", original_run)  # noqa: B010
    stats = pstats.Stats(main_profiler)
    with lock:
        for profiler in profiles:
            try:
                stats.add(profiler)
            except TypeError:  # a thread that never ran Python code
                continue
    return stats


def report(stats: pstats.Stats, top: int) -> dict[str, Any]:
    """Print time by area and the top functions by self time; return both."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    blocking = 0.0
    areas: Counter[str] = Counter()
    selfs: Counter[str] = Counter()
    for key, (_, _, tottime, _, _) in table.items():
        filename, _, function = key
        label = _label(key)
        if any(needle in label for needle in BLOCKING):
            blocking += tottime
            continue
        areas[_area(filename, function)] += tottime
        selfs[label] += tottime
    busy = sum(areas.values())
    print(f"\nprofiled time outside blocking waits: {busy:.2f} s (blocking waits {blocking:.2f} s)")
    print(f"{'area':<50} {'self s':>8} {'share':>7}")
    for name, seconds in areas.most_common():
        print(f"{name:<50} {seconds:8.2f} {seconds / busy:7.1%}")
    print(f"\ntop {top} functions by self time (blocking waits excluded)")
    for label, seconds in selfs.most_common(top):
        print(f"{seconds:8.3f} s {seconds / busy:6.1%}  {label}")
    return {
        "busy_s": busy,
        "blocking_s": blocking,
        "areas": dict(areas.most_common()),
        "top": dict(selfs.most_common(top)),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Profile ``MODULE ARGS...`` and print where its time went."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--top", type=int, default=25, help="functions to list (default 25)")
    parser.add_argument("module", help="the benchmark module, e.g. bench.group_commit")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    options = parser.parse_args(argv)
    return report(profile(options.module, options.args), options.top)


if __name__ == "__main__":
    main()
