"""Delivery after clock faults: a clock that raises, jumps forward or back, or glitches ahead.

Usage (from the repository root)::

    python -m bench.clock_faults [--agents 20] [--trials 3] [--quick]

One embedded host (real threads, real timers, SQLite with ``synchronous=FULL``)
with Schedule installed at its defaults: owners restart after 1 s, 2 s, ... (5
restarts per 10 minutes), the clock watchdog ticks every second and a forward
clock step is acted on once it held for 5 s (``clock_step_confirm_ms``). The host's
wall clock is a :class:`ShiftableClock`: the real wall clock plus an offset the
script jumps, which can also raise on the next read made by a ScheduleOwner.
Each agent's ``followup`` is wrapped to record when a reminder reached it.

1. **fault** (``--trials`` times, a fresh agent each): a reminder due in 2 s; once
   the host is quiet, the owner's next clock read (its decision at the due time)
   raises. The owner contains it and is restarted after its back-off; *late* is
   ``followup()`` time minus ``scheduledAt``. Without supervision it would never
   be delivered until the process restarted.
2. **forward jump** (``--trials`` times): every agent has a reminder 1 h out; the
   wall clock jumps +2 h and stays. *late* is ``followup()`` minus the jump, on
   the monotonic clock: the confirmation interval, up to one tick, and the work.
   Without the watchdog the reminders would wait an hour.
3. **backward jump** (once): every agent has a reminder 4 s out; the wall clock
   jumps back 3 s (``--quick``: 2 s out, back 1 s). *early* counts deliveries
   before ``scheduledAt`` on the (jumped) wall clock; *late* is ``followup()``
   minus ``scheduledAt``.
4. **glitch** (once, then once more on a host that takes every step at once, as
   before the confirmation existed): every agent has a one-shot 1 h out and a
   5-minute ``every`` reminder; the wall clock jumps a day ahead for 3 s and is
   set back. *early* counts the reminders delivered within the next 8 s (none
   is due); *advanced* the ``every`` reminders whose next occurrence moved.

The owners' own warnings (the contained failure, the restart) are silenced;
the table and the owners' status say what happened. Prints a table and writes
``bench/results/clock_faults.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from actors._contract import DEFAULT_CLOCK_STEP_CONFIRM_MS
from bench._common import (
    TOOL_TIMEOUT_S,
    BenchError,
    Host,
    add_common_arguments,
    data_root,
    distribution,
    fmt,
    header,
    load_average,
    machine_info,
    print_machine,
    print_table,
    verdict,
    write_results,
)
from host_bridge._plugin import install_schedule
from host_bridge.embedded.agents import EmbeddedAgent, Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import UserMessage, wall_clock_ms
from messages import SCHEDULE_CHANGE_TYPE, parse_instant, parse_reminder_framing

NAME = "clock_faults"
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
TARGET_JUMP_LATE_MS = DEFAULT_CLOCK_STEP_CONFIRM_MS + 2_000.0
"""A forward jump must deliver what it made due within this long (confirmation, tick, work)."""
GLITCH_S = 3.0
"""How long the glitch scenario's clock stays a day ahead."""
GLITCH_WATCH_S = 8.0
"""How long after the glitch began its deliveries are counted (longer than the confirmation)."""
WAIT_S = 30.0
"""How long a scenario waits for its deliveries before giving up."""


class ShiftableClock:
    """The real wall clock plus a jumpable offset; it can raise on an owner's next read.

    Only reads made from :mod:`actors._schedule_owner` can fail, so the fault hits
    an owner's decision, not the session's event timestamps or the watchdog.
    """

    def __init__(self) -> None:
        self.offset_ms = 0
        self._lock = threading.Lock()
        self._fail_owner_reads = 0

    def __call__(self) -> int:
        if self._fail_owner_reads and _caller_module() == "actors._schedule_owner":
            with self._lock:
                if self._fail_owner_reads:
                    self._fail_owner_reads -= 1
                    raise OSError("the clock is unavailable")
        return wall_clock_ms() + self.offset_ms

    def jump(self, ms: int) -> None:
        """Step the wall clock by ``ms`` (negative: back)."""
        self.offset_ms += ms

    def fail_next_owner_read(self) -> None:
        """The next read by an owner raises."""
        with self._lock:
            self._fail_owner_reads = 1


def _caller_module() -> str | None:
    """Who reads the clock, directly or through the plugin's steady clock."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") == "host_bridge._steady_clock":
        frame = frame.f_back
    return None if frame is None else frame.f_globals.get("__name__")


class Deliveries:
    """Records, per reminder, when ``followup`` was called (monotonic ns, host wall ms)."""

    def __init__(self, clock: ShiftableClock) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self.seen: list[tuple[str, int, int, int]] = []  # agent id, target, mono ns, wall ms

    def watch(self, agent: EmbeddedAgent) -> None:
        original = agent.followup

        def followup(message: UserMessage) -> None:
            mono_ns, wall = time.monotonic_ns(), self._clock()
            if message.text.startswith("[SCHEDULE REMINDER]"):
                target = _occurrence(message.text)
                with self._cond:
                    self.seen.append((agent.id, target, mono_ns, wall))
                    self._cond.notify_all()
            original(message)

        setattr(agent, "followup", followup)  # noqa: B010 - wrap this instance only

    def wait_for(self, count: int) -> list[tuple[str, int, int, int]]:
        """Block until ``count`` reminders have arrived in total; return every one so far."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.seen) >= count, timeout=WAIT_S):
                raise BenchError(f"only {len(self.seen)} of {count} reminders arrived in time")
            return list(self.seen)


def _occurrence(text: str) -> int:
    found = parse_reminder_framing(text)
    if len(found) != 1:
        raise BenchError("a follow-up that is not one reminder's framing")
    return parse_instant(found[0].occurrence_at)


def _silent(turn: Turn) -> str | None:
    return None


def _quiet(host: Host, agents: Sequence[EmbeddedAgent]) -> None:
    """Wait until every owner and agent is idle (so no owner reads the clock unasked)."""
    for _ in range(20):
        busy = False
        for agent in agents:
            host.plugin.wait_quiet(agent, timeout=TOOL_TIMEOUT_S)
            agent.when_idle().result(timeout=TOOL_TIMEOUT_S)
            status = host.plugin.wait_quiet(agent, timeout=TOOL_TIMEOUT_S)
            busy = busy or agent.status != "idle" or status.busy
        if not busy:
            return
    raise BenchError("the host never became quiet")


def _open(root: Path, runtime: str, *, confirm: bool = True) -> tuple[Host, ShiftableClock]:
    """A host on a fresh data directory under ``root`` (``confirm=False``: steps at once)."""
    data = Path(tempfile.mkdtemp(prefix="clock-", dir=root))
    clock = ShiftableClock()
    embedded = EmbeddedHost(data, clock=clock, runtime=runtime)
    context = embedded.context()
    if not confirm:
        context = dataclasses.replace(context, clock_step_confirm_ms=None)
    try:
        plugin = install_schedule(context, runtime=embedded.runtime)
    except BaseException:
        embedded.close()
        shutil.rmtree(data, ignore_errors=True)
        raise
    return Host(embedded, plugin), clock


def _close(host: Host) -> None:
    data = host.host.data_dir
    try:
        host.close()
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _dispatches(fleet: Sequence[EmbeddedAgent]) -> int:
    """``dispatch`` records in the agents' logs: one per delivered reminder, batches too."""
    return sum(
        1
        for agent in fleet
        for event in agent.session.events
        if event.type == SCHEDULE_CHANGE_TYPE and event.data.get("operation") == "dispatch"
    )


def glitch(host: Host, clock: ShiftableClock, fleet: Sequence[EmbeddedAgent]) -> dict[str, int]:
    """A day-ahead glitch for 3 s over a one-shot 1 h out and a 5-minute every per agent."""
    before = _dispatches(fleet)
    created: dict[str, str] = {}
    for agent in fleet:
        host.create(agent, "an hour from now", 3600)
        arguments = {"prompt": "every five minutes", "every_seconds": 300}
        every = host.call(agent, "schedule_create", arguments).value
        created[agent.id] = every["scheduledAt"]
    _quiet(host, fleet)
    clock.jump(DAY_MS)
    time.sleep(GLITCH_S)
    clock.jump(-DAY_MS)
    time.sleep(GLITCH_WATCH_S - GLITCH_S)
    _quiet(host, fleet)
    advanced = 0
    for agent in fleet:
        views = host.list(agent)["schedules"]
        advanced += sum(
            1 for v in views if v["kind"] == "every" and v["scheduledAt"] != created[agent.id]
        )
    early = _dispatches(fleet) - before
    return {"reminders": 2 * len(fleet), "early": early, "advanced": advanced}


def run(
    root: Path, agents: int, trials: int, runtime: str, *, back: tuple[int, int] = (4, 3_000)
) -> dict[str, Any]:
    """Run the four scenarios on one host, and the glitch on a second; return their figures.

    ``back`` is the backward scenario's (reminder delay in s, jump back in ms).
    """
    host, clock = _open(root, runtime)
    deliveries = Deliveries(clock)
    try:
        fleet = [host.spawn(model=_silent) for _ in range(agents)]
        for agent in fleet:
            deliveries.watch(agent)
        expected = 0

        fault_late: list[float] = []
        restarts: list[int] = []
        for _ in range(trials):
            agent = host.spawn(model=_silent)
            deliveries.watch(agent)
            host.create(agent, "a clock fault at the due time", 2)
            _quiet(host, [agent, *fleet])
            clock.fail_next_owner_read()
            expected += 1
            _, target, _, wall = deliveries.wait_for(expected)[-1]
            fault_late.append(float(wall - target))
            owner = host.plugin.wait_quiet(agent, timeout=TOOL_TIMEOUT_S)
            if owner.state != "running" or owner.contained_failures != 1:
                raise BenchError(f"unexpected owner status after the fault: {owner}")
            restarts.append(owner.restarts)

        jump_late: list[float] = []
        for _ in range(trials):
            for agent in fleet:
                host.create(agent, "an hour from now", 3600)
            _quiet(host, fleet)
            jumped_ns = time.monotonic_ns()
            clock.jump(2 * HOUR_MS)
            expected += len(fleet)
            arrived = deliveries.wait_for(expected)[-len(fleet) :]
            jump_late.extend((mono - jumped_ns) / 1e6 for _, _, mono, _ in arrived)
            _quiet(host, fleet)

        after_s, back_ms = back
        for agent in fleet:
            host.create(agent, "a few seconds from now", after_s)
        _quiet(host, fleet)
        clock.jump(-back_ms)
        expected += len(fleet)
        arrived = deliveries.wait_for(expected)[-len(fleet) :]
        late_back = [float(wall - target) for _, target, _, wall in arrived]
        _quiet(host, fleet)
        glitched = glitch(host, clock, fleet)
        status = host.plugin.status()
    finally:
        _close(host)
    at_once, at_once_clock = _open(root, runtime, confirm=False)
    try:
        unconfirmed = glitch(
            at_once, at_once_clock, [at_once.spawn(model=_silent) for _ in range(agents)]
        )
    finally:
        _close(at_once)
    return {
        "fault": {"late": distribution(fault_late), "restarts": restarts},
        "forward_jump": {"late": distribution(jump_late), "jump_ms": 2 * HOUR_MS},
        "backward_jump": {
            "late": distribution(late_back),
            "early": sum(1 for d in late_back if d < 0),
            "jump_ms": -back_ms,
        },
        "glitch": glitched | {"jump_ms": DAY_MS, "held_ms": int(GLITCH_S * 1000)},
        "glitch_steps_at_once": unconfirmed,
        "clock_jumps_noticed": status.clock_jumps,
        "owners_faulted_at_end": len(status.faulted) + len(status.restarting),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write the JSON; returns what it wrote."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--agents", type=int, default=20, help="agents in the jumps (default 20)")
    parser.add_argument("--trials", type=int, default=3, help="faults and jumps (default 3)")
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.agents, args.trials = min(args.agents, 2), 1
    if args.agents < 1 or args.trials < 1:
        parser.error("--agents and --trials must be at least 1")

    logger = logging.getLogger("dsh_schedule")
    level = logger.level
    logger.setLevel(logging.ERROR)  # the faults' warnings are expected; keep the table clean
    try:
        with data_root(args.data, "dsh-bench-clock-") as root:
            info = machine_info(root)
            back = (2, 1_000) if args.quick else (4, 3_000)
            ours = run(root, args.agents, args.trials, args.runtime, back=back)
    finally:
        logger.setLevel(level)  # run in-process (the smoke tests), later code logs as before
    load_at_end = load_average()

    jump_max = ours["forward_jump"]["late"]["max_ms"]
    targets: dict[str, Any] = {
        "fault_delivered_without_restart": {
            "value": ours["fault"]["late"]["count"],
            "target": f"{args.trials} of {args.trials} delivered after the fault",
            "met": ours["fault"]["late"]["count"] == args.trials,
        },
        "forward_jump_late": {
            "value": jump_max,
            "target": f"max <= {TARGET_JUMP_LATE_MS:g} ms after the jump",
            "met": jump_max <= TARGET_JUMP_LATE_MS,
        },
        "backward_jump_never_early": {
            "value": ours["backward_jump"]["early"],
            "target": "0 early",
            "met": ours["backward_jump"]["early"] == 0,
        },
        "glitch_never_early": {
            "value": ours["glitch"]["early"] + ours["glitch"]["advanced"],
            "target": "0 early, 0 every advanced",
            "met": ours["glitch"]["early"] == ours["glitch"]["advanced"] == 0,
        },
    }
    print_machine(info)
    print(
        f"embedded host, {args.runtime}; clock watchdog tick 1 s; forward steps confirmed "
        f"after {DEFAULT_CLOCK_STEP_CONFIRM_MS / 1000:g} s; restart back-off from 1 s; "
        f"{args.agents} agents in the jumps, {args.trials} trial(s)"
    )
    rows = [
        ("fault (clock raises once)", "after scheduledAt", ours["fault"]["late"], None),
        ("forward jump +2 h", "after the jump", ours["forward_jump"]["late"], None),
        (
            f"backward jump {ours['backward_jump']['jump_ms'] / 1000:+g} s",
            "after scheduledAt",
            ours["backward_jump"]["late"],
            ours["backward_jump"]["early"],
        ),
    ]
    print_table(
        ["scenario", "late, measured", "delivered", "p50 ms", "max ms", "min ms", "early"],
        [
            [
                name,
                basis,
                fmt(late["count"]),
                fmt(late["p50_ms"], 1),
                fmt(late["max_ms"], 1),
                fmt(late["min_ms"], 1),
                fmt(early),
            ]
            for name, basis, late, early in rows
        ],
    )
    print(f"restarts per faulted owner: {ours['fault']['restarts']}")
    for label, key in (("confirmed", "glitch"), ("steps taken at once", "glitch_steps_at_once")):
        g = ours[key]
        print(
            f"glitch +1 day for {GLITCH_S:g} s ({label}): {g['early']} of {g['reminders']} "
            f"reminders delivered early, {g['advanced']} every reminders advanced"
        )
    for key, target in targets.items():
        print(
            f"target {key}: {target['target']}: {fmt(target['value'], 1)} -> "
            f"{verdict(target['met'])}"
        )
    load = load_at_end
    print("load average at end: " + ("?" if load is None else " ".join(f"{x:.2f}" for x in load)))

    payload = header(NAME, argv) | {
        "machine": info,
        "load_average_at_end": load_at_end,
        "parameters": {"agents": args.agents, "trials": args.trials, "runtime": args.runtime},
        "results": ours,
        "targets": targets,
    }
    path = write_results(args.results, NAME, payload)
    print(f"results: {os.path.relpath(path)}")
    return payload


if __name__ == "__main__":
    main()
