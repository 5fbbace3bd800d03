"""Two host processes, one session, one due reminder: count deliveries, refusals and errors.

A *trial* seeds one session of a store with a reminder and starts two child
processes, each an embedded host with the Schedule plugin on that store. Each
child first makes a *side* session of its own (one reminder, made durable), then
both wait at a barrier; the parent releases them together.

* ``race`` (SQLite and PostgreSQL): the reminder is already overdue. Both
  children open the shared session at once and settle. The one that owns the
  session delivers the reminder; the other must be refused (a
  ``SessionLeaseError`` naming the holder). Both then keep the session (or
  their refusal) until the parent lets them finish, so the refusal is a real
  overlap and not a late resume.
* ``terminated`` (PostgreSQL only): the first child opens the session while the
  reminder is not due yet (its clock is a fake one it moves when told to).
  The parent then terminates that child's lease connection with
  ``pg_terminate_backend`` (a network cut or failover does that), and starts
  the second child with a clock past the due time: it takes the session over
  and delivers. Then the first child's clock jumps past the due time too; its
  owner must not deliver again: the preflight finds the lease lost.

After both children finished, the parent counts the ``dispatch`` records of the
shared session in the store and the reminders both models received. A trial is
a *double delivery* when more than one reminder reached a model or more than one
dispatch is stored, a *loss* when none did. A refusal that names a holder is
expected in the ``race`` variant. An *error* is anything else: a child that
exits non-zero, prints a Python traceback, cannot use its side session
afterwards, or fails to close its host cleanly.

Usage (from the repository root)::

    python -m bench.session_race [--trials 100]                   # SQLite
    python -m bench.session_race --store postgresql://user@127.0.0.1:5432/db \\
        [--variants race,terminated]

Prints one line per variant and writes ``bench/results/session_race[_postgresql].json``.
Every trial of a PostgreSQL run uses new session ids in the given database.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import data_root, header, load_average, machine_info, write_results

__all__ = ["VARIANTS", "RaceReport", "Trial", "main", "run_race", "run_trial"]

NAME = "session_race"
VARIANTS = ("race", "terminated")
"""The kinds of trial (see the module docstring)."""

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
HOUR_MS = 3_600_000
STEP_TIMEOUT_S = 60.0
"""How long the parent waits for one line of a child."""
CHILD_DEADLINE_S = 180.0
"""A child exits by itself after this long, whatever happens."""


# =========================================================================================
# child
# =========================================================================================


class _Model:
    """The agent's model: counts the reminder turns it receives."""

    def __init__(self) -> None:
        self.reminders = 0
        self._lock = threading.Lock()

    def __call__(self, turn: Any) -> str | None:
        if turn.message.text.startswith("[SCHEDULE REMINDER]"):
            with self._lock:
                self.reminders += 1
            return "Presented."
        return None


def _say(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def _wait_for(word: str) -> None:
    line = sys.stdin.readline()
    if line.strip() != word:
        raise SystemExit(f"expected {word!r} from the parent, got {line!r}")


def _child_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="session_race --child")
    parser.add_argument("--child", required=True, help="the store (path or URL)")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--side", required=True)
    parser.add_argument("--clock-ms", type=int, help="a fake clock starting here (else the wall)")
    parser.add_argument("--lease-wait", type=float, default=0.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    watchdog = threading.Timer(CHILD_DEADLINE_S, lambda: os._exit(3))
    watchdog.daemon = True
    watchdog.start()

    from host_bridge._plugin import install_schedule
    from host_bridge.cli._common import settle
    from host_bridge.embedded.host import EmbeddedHost
    from host_bridge.embedded.sessions import SessionError
    from host_bridge.embedded.stores import SessionLeaseError, StoreError
    from host_bridge.testing import FakeClock, FakeTimers

    timers: FakeTimers | None = None
    if args.clock_ms is not None:
        clock = FakeClock(args.clock_ms)
        timers = FakeTimers(clock)
        host = EmbeddedHost(
            args.data, store=args.child, lease_wait=args.lease_wait, clock=clock, timers=timers
        )
    else:
        host = EmbeddedHost(args.data, store=args.child, lease_wait=args.lease_wait)
    context = host.context()
    if timers is not None:
        # Fake time advances in one call: the clock watchdog's ticks would move fake time
        # past the flush timeout while a real database round trip is still running.
        context = dataclasses.replace(context, clock_watch_ms=None)
    plugin = install_schedule(context)

    def create(agent: Any, prompt: str) -> bool:
        result = host.tools.execute(
            "schedule_create",
            {"prompt": prompt, "after_seconds": 24 * 3600},
            agent=agent,
            timeout=STEP_TIMEOUT_S,
        )
        return isinstance(result.value, dict) and "scheduledAt" in result.value

    side = host.spawn_root(session_id=args.side, model=_Model())
    side_ok = create(side, "side before")
    _say(ready=True, side_ok=side_ok)

    _wait_for("go")
    model = _Model()
    agent = None
    refused: str | None = None
    lease_error = named = False
    try:
        agent = host.spawn_root(session_id=args.session, model=model)
        settle(plugin, agent, STEP_TIMEOUT_S)
    except (SessionError, StoreError) as error:
        refused = f"{type(error).__name__}: {error}"
        lease_error = isinstance(error, SessionLeaseError)
        named = lease_error and getattr(error, "holder", None) is not None
    _say(
        raced=True,
        deliveries=model.reminders,
        refused=refused,
        lease_error=lease_error,
        holder_named=named,
    )

    command = sys.stdin.readline().strip()
    if command.startswith("advance ") and agent is not None and timers is not None:
        timers.advance(int(command.split()[1]))
        settle(plugin, agent, STEP_TIMEOUT_S)
        command = sys.stdin.readline().strip()
    lease_lost = bool(agent is not None and getattr(agent.session, "lease_lost", False))
    if command != "finish":
        raise SystemExit(f"expected 'finish' from the parent, got {command!r}")
    side_after = create(side, "side after")
    close_error: str | None = None
    try:
        plugin.dispose().result(timeout=STEP_TIMEOUT_S)
        host.close()
    except Exception as error:  # reported to the parent: a close must not fail
        close_error = f"{type(error).__name__}: {error}"
    _say(
        done=True,
        deliveries=model.reminders,
        lease_lost=lease_lost,
        side_before=side_ok,
        side_after=side_after,
        close_error=close_error,
    )


# =========================================================================================
# parent
# =========================================================================================


@dataclass
class Trial:
    """What one trial observed."""

    variant: str
    deliveries: int = 0
    dispatches: int = 0
    refusals: list[str] = field(default_factory=list)
    holders_named: int = 0
    errors: list[str] = field(default_factory=list)
    lease_lost: list[bool] = field(default_factory=list)

    @property
    def double(self) -> bool:
        """More than one delivery or dispatch of the one reminder."""
        return self.deliveries > 1 or self.dispatches > 1

    @property
    def lost(self) -> bool:
        """The reminder was never delivered."""
        return self.deliveries == 0 and self.dispatches == 0

    def problems(self) -> list[str]:
        """What departs from one owner and exactly one delivery (empty: a clean trial)."""
        found = list(self.errors)
        if self.deliveries != 1 or self.dispatches != 1:
            found.append(f"{self.deliveries} deliveries and {self.dispatches} dispatches")
        if self.variant == "race" and len(self.refusals) != 1:
            found.append(f"{len(self.refusals)} refusals instead of one")
        if self.variant == "terminated" and self.lease_lost != [True, False]:
            found.append(f"lease_lost per child is {self.lease_lost}, not [True, False]")
        return found


@dataclass
class RaceReport:
    """Totals over the trials of one variant on one store."""

    store: str
    variant: str
    trials: list[Trial] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """Counts for printing and for the JSON results."""
        return {
            "store": self.store,
            "variant": self.variant,
            "trials": len(self.trials),
            "double_deliveries": sum(t.double for t in self.trials),
            "losses": sum(t.lost for t in self.trials),
            "refusals": sum(len(t.refusals) for t in self.trials),
            "refusals_naming_the_holder": sum(t.holders_named for t in self.trials),
            "errors": sum(bool(t.errors) for t in self.trials),
            "unclean_trials": sum(bool(t.problems()) for t in self.trials),
            "first_errors": [e for t in self.trials for e in t.errors][:5],
            "refusal_example": next((r for t in self.trials for r in t.refusals), None),
            "seconds": round(self.seconds, 1),
        }


class _Child:
    """One child host process and its line protocol."""

    def __init__(self, store: str, data: Path, session: str, side: str, *extra: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.session_race",
                "--child",
                store,
                "--data",
                str(data),
                "--session",
                session,
                "--side",
                side,
                *extra,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO_ROOT,
        )
        self._stderr: list[str] = []
        self._lines: queue.Queue[str] = queue.Queue()
        assert self.process.stdout is not None and self.process.stderr is not None
        self._drains = [
            threading.Thread(target=self._drain, args=(stream, sink), daemon=True)
            for stream, sink in (
                (self.process.stdout, self._lines.put),
                (self.process.stderr, self._stderr.append),
            )
        ]
        for drain in self._drains:
            drain.start()

    @staticmethod
    def _drain(stream: IO[str], sink: Callable[[str], None]) -> None:
        for line in stream:
            sink(line)
        sink("")  # end of the stream

    def read(self) -> dict[str, Any]:
        """The child's next JSON line (an error when it exits or stays silent)."""
        try:
            line = self._lines.get(timeout=STEP_TIMEOUT_S)
        except queue.Empty:
            line = ""
        if not line:
            raise RuntimeError(
                f"child said nothing (exit {self.process.poll()}): "
                f"{''.join(self._stderr).strip()[-300:]}"
            )
        value: dict[str, Any] = json.loads(line)
        return value

    def tell(self, line: str) -> None:
        """Send one command line."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def finish(self) -> list[str]:
        """Wait for the exit; the problems seen on the way (exit code, tracebacks)."""
        problems: list[str] = []
        try:
            code = self.process.wait(STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        for drain in self._drains:
            drain.join(STEP_TIMEOUT_S)
        text = "".join(self._stderr)
        if code != 0:
            problems.append(f"child exited {code}: {text.strip()[-300:]}")
        elif "Traceback" in text:
            problems.append(f"child printed a traceback: {text.strip()[-300:]}")
        return problems

    def kill(self) -> None:
        """Stop the child if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _seed(store: str, data: Path, session: str, clock_ms: int) -> None:
    """Make ``session`` with one reminder due one hour after ``clock_ms``."""
    from host_bridge._plugin import install_schedule
    from host_bridge.embedded.host import EmbeddedHost
    from host_bridge.testing import FakeClock, FakeTimers

    clock = FakeClock(clock_ms)
    host = EmbeddedHost(data, store=store, clock=clock, timers=FakeTimers(clock))
    try:
        plugin = install_schedule(host.context())
        agent = host.spawn_root(session_id=session)
        result = host.tools.execute(
            "schedule_create",
            {"prompt": "the shared reminder", "after_seconds": 3600},
            agent=agent,
            timeout=STEP_TIMEOUT_S,
        )
        if not (isinstance(result.value, dict) and "scheduledAt" in result.value):
            raise RuntimeError(f"seeding failed: {result.content}")
        plugin.dispose().result(timeout=STEP_TIMEOUT_S)
    finally:
        host.close()


def _dispatches(store: str, session: str) -> int:
    from host_bridge.embedded.stores import open_store

    reader = open_store(store, create=False)
    try:
        stored = reader.load(session)
    finally:
        reader.close()
    if stored is None:
        return 0
    return sum(
        1
        for event in stored.events
        if event.type == "schedule/change"
        and isinstance(event.data, dict)
        and event.data.get("operation") == "dispatch"
    )


def _lease_backend(url: str, session: str) -> int | None:
    """The backend pid holding the advisory lock of ``session`` (its owner's lease connection)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND objsubid = 1 AND database ="
            " (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, 0)",
            (session,),
        ).fetchone()
    return None if row is None else int(row[0])


def _terminate(url: str, pid: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))


def run_trial(store: str, data: Path, index: int, variant: str = "race") -> Trial:
    """Run one trial of ``variant`` on ``store`` (an SQLite path or a PostgreSQL URL)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}")
    postgres = store.startswith(("postgresql://", "postgres://"))
    if variant == "terminated" and not postgres:
        raise ValueError("the terminated variant needs a PostgreSQL store")
    tag = f"{variant}-{index}-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
    session = f"shared-{tag}"
    now = int(time.time() * 1000)
    trial = Trial(variant)
    children: list[_Child] = []
    try:
        if variant == "race":
            _seed(store, data, session, now - 2 * HOUR_MS)  # overdue for an hour
            children = [_Child(store, data, session, f"side-{tag}-{n}") for n in (0, 1)]
            for child in children:
                _check_ready(child.read(), trial)
            for child in children:
                child.tell("go")
            raced = [child.read() for child in children]
        else:
            _seed(store, data, session, now)  # due at now + 1 h
            first = _Child(store, data, session, f"side-{tag}-0", "--clock-ms", str(now + 60_000))
            children = [first]
            _check_ready(first.read(), trial)
            first.tell("go")
            raced = [first.read()]
            pid = _lease_backend(store, session)
            if pid is None:
                raise RuntimeError("the first child holds no lease of the shared session")
            _terminate(store, pid)
            second = _Child(
                store,
                data,
                session,
                f"side-{tag}-1",
                "--clock-ms",
                str(now + 2 * HOUR_MS),
                "--lease-wait",
                "30",
            )
            children.append(second)
            _check_ready(second.read(), trial)
            second.tell("go")
            raced.append(second.read())
            first.tell(f"advance {2 * HOUR_MS}")
        for answer in raced:
            if answer.get("refused") is not None:
                if not answer.get("lease_error"):
                    trial.errors.append(f"refused without a lease error: {answer['refused']}")
                trial.refusals.append(str(answer["refused"]))
                trial.holders_named += bool(answer.get("holder_named"))
        for child in children:
            child.tell("finish")
        for number, child in enumerate(children):
            done = child.read()
            trial.deliveries += int(done["deliveries"])
            trial.lease_lost.append(bool(done["lease_lost"]))
            # (a terminated lease connection takes every lease of the first child with it)
            lost_everything = variant == "terminated" and number == 0
            if not (done["side_after"] or lost_everything):
                trial.errors.append(f"child {number}: its other session stopped working")
            if done["close_error"]:
                trial.errors.append(f"child {number}: closing failed: {done['close_error']}")
        for child in children:
            trial.errors.extend(child.finish())
        trial.dispatches = _dispatches(store, session)
    except Exception as error:
        trial.errors.append(f"{type(error).__name__}: {error}")
    finally:
        for child in children:
            child.kill()
    return trial


def _check_ready(answer: dict[str, Any], trial: Trial) -> None:
    if not answer.get("ready"):
        raise RuntimeError(f"child not ready: {answer}")
    if not answer.get("side_ok"):
        trial.errors.append("a side session did not work before the race")


def run_race(
    store: str | None,
    trials: int,
    variant: str,
    *,
    data: Path | None = None,
    progress: Callable[[int, Trial], None] | None = None,
) -> RaceReport:
    """``trials`` trials of ``variant``; ``store=None`` is a fresh SQLite file under ``data``."""
    with data_root(data, "dsh-race-") as root:
        spec = store if store is not None else str(root / "sessions.sqlite3")
        label = "postgresql" if store is not None else "sqlite"
        report = RaceReport(label, variant)
        started = time.monotonic()
        for index in range(trials):
            trial = run_trial(spec, root, index, variant)
            report.trials.append(trial)
            if progress is not None:
                progress(index, trial)
        report.seconds = time.monotonic() - started
    return report


def _print_summary(summary: dict[str, Any]) -> None:
    print(
        f"{summary['store']:<10} {summary['variant']:<10} trials {summary['trials']:>4}  "
        f"double deliveries {summary['double_deliveries']:>3}  losses {summary['losses']:>3}  "
        f"refusals {summary['refusals']:>4} (holder named in "
        f"{summary['refusals_naming_the_holder']})  errors {summary['errors']:>3}  "
        f"unclean trials {summary['unclean_trials']:>3}  ({summary['seconds']} s)"
    )
    if summary["refusal_example"]:
        print(f"  refusal: {summary['refusal_example']}")
    for error in summary["first_errors"]:
        print(f"  error: {error}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Command line; returns the JSON results it wrote."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if "--child" in arguments:
        _child_main(arguments)
        return {}
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=100, help="trials per variant (100)")
    parser.add_argument("--store", help="a postgresql:// URL (default: a fresh SQLite file)")
    parser.add_argument(
        "--variants",
        default=None,
        help="comma-separated, from: race, terminated (default: race on SQLite, both on "
        "PostgreSQL)",
    )
    parser.add_argument("--data", type=Path, help="parent directory for the data directory")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--quick", action="store_true", help="2 trials per variant")
    args = parser.parse_args(arguments)
    postgres = args.store is not None
    variants = (
        args.variants.split(",") if args.variants else (list(VARIANTS) if postgres else ["race"])
    )
    trials = 2 if args.quick else args.trials
    load = load_average()
    print(f"load average at start: {load}")
    summaries = []
    for variant in variants:
        report = run_race(args.store, trials, variant, data=args.data)
        summary = report.summary()
        _print_summary(summary)
        summaries.append(summary)
    print(f"load average at end: {load_average()}")
    with data_root(args.data, "dsh-race-machine-") as probe:
        machine = machine_info(probe)
    payload = {
        **header(NAME, argv),
        "machine": machine,
        "targets": {
            "no_double_delivery": all(s["double_deliveries"] == 0 for s in summaries),
            "every_trial_clean": all(s["unclean_trials"] == 0 for s in summaries),
        },
        "summary": summaries,
        "load_average_at_end": load_average(),
    }
    write_results(args.results, NAME + ("_postgresql" if postgres else ""), payload)
    return payload


if __name__ == "__main__":
    result = main()
    sys.exit(0 if not result or result["targets"]["every_trial_clean"] else 1)
