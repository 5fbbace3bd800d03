"""Sequential durable creates and nothing else: a workload for profilers.

Usage (from the repository root)::

    python -m bench.thread_profile bench.create_loop [--creates 1800] [--runtime gevent]
    py-spy record --gil -o creates.svg -- python -m bench.create_loop

Runs ``--creates`` ``schedule_create`` calls through the real tool path of the
embedded host (a fresh agent every 900, below the per-session cap of active
reminders) after a short warm-up, and prints creates/s and CPU per create. No
probes, lists or deletes run, so a profile shows the create path alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench._common import open_host

PER_AGENT = 900
"""Creates per agent (one session holds at most 1,000 active reminders)."""


def main(argv: Sequence[str] | None = None) -> float:
    """Run the loop, print the rate; returns creates/s."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--creates", type=int, default=1800, help="creates (default 1800)")
    parser.add_argument("--runtime", choices=("threading", "gevent"), default="threading")
    args = parser.parse_args(argv)
    data = Path(tempfile.mkdtemp(prefix="dsh-create-loop-"))
    host = open_host(data, args.runtime)
    try:
        agents = [host.spawn() for _ in range(-(-args.creates // PER_AGENT))]
        for index in range(10):
            host.create(agents[0], f"warm-up {index}", 3600)
        times = os.times()
        started = time.perf_counter()
        for index in range(args.creates):
            host.create(agents[index // PER_AGENT], f"reminder {index}", 3600)
        elapsed = time.perf_counter() - started
        after = os.times()
    finally:
        host.close()
        shutil.rmtree(data, ignore_errors=True)
    cpu = (after.user + after.system) - (times.user + times.system)
    creates: int = args.creates
    rate = creates / elapsed
    each_us = cpu / args.creates * 1e6
    print(f"{args.creates} creates: {rate:,.0f} creates/s, {each_us:,.0f} µs CPU each")
    return rate


if __name__ == "__main__":
    main()
