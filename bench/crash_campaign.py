"""Crash campaign: SIGKILL an embedded host at random moments, then count deliveries from the store.

A *trial* is one data directory and a few *incarnations* of a child process.
Each child runs the embedded host (real SQLite store, real actors, a fake clock
it moves itself) with a scripted model on several sessions: the model creates,
deletes and lists reminders through the real tools and receives the due ones
as turns. The parent kills the child with SIGKILL, either at a random point of
its work or at a point the child announces after pausing there on purpose:

* ``followup``: inside a reminder's follow-up, after its inbox entry was
  appended (staged) and before the ``dispatch`` record is appended;
* ``dispatch-append``: inside the session, while the ``dispatch`` append is
  being judged (the inbox entry is in the live log, staged, not in the store);
* ``dispatch-commit``: in the store's writer, before the ``COMMIT`` of the write
  round that carries a ``dispatch`` and its inbox entry;
* ``create-commit``: likewise for a ``create`` whose tool call is waiting for
  its barrier (the create is unconfirmed);
* ``in-turn``: inside the model's turn for a reminder, after a flush made the
  turn's start durable (its completion is not);
* ``random``: after a random number of journal lines (and, in the benchmark, a
  random extra delay).

The child writes a journal to a pipe, one JSON object per line, each with a
single ``write``: attempts and confirmed tool results, every reminder
follow-up and every reminder turn the model saw (with the clock and the inbox
entry), every turn completion that became durable, and pause markers. A
SIGKILL loses nothing already written to the pipe. The child also checks that
every reminder's inbox entry reaches the store in the same hand-over as its
``dispatch`` (a ``split`` line otherwise).

After every kill the parent reopens the store and checks it: it opens, every
session loads and passes the stream check, every create or delete a tool
confirmed is present, every stored create was attempted (nothing appears that
nobody asked for), and every durable ``dispatch`` has its inbox entry and every
reminder inbox entry its ``dispatch`` (they are committed together). After the
last incarnation the parent resumes every session in a fresh in-process host
whose clock is days later: unfinished inbox entries run again, everything due
is delivered. Deliveries are then counted **from the store**: a reminder that
was not deleted must have exactly one ``dispatch``, exactly one inbox entry
and exactly one completed turn (none: lost; more: a duplicate). The model may
have *run* a reminder's turn more than once only when a kill fell inside that
turn (it started and its completion was not yet durable); those re-runs are
counted apart from every other duplicate. A second resume must run nothing.

Run ``python bench/crash_campaign.py --trials 50`` (see ``--help``); the test
suite runs a small version (``tests/reliability/test_crash_campaign.py``).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import data_root
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.embedded.agents import EmbeddedAgent, Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.inbox import (
    INBOX_EVENT,
    TURN_COMPLETED_EVENT,
    completed_entry,
    message_of,
)
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.sessions import EmbeddedSession
from host_bridge.embedded.stores import EventStore, SqliteEventStore, StoreError
from host_bridge.protocols import Session, SessionEvent, SessionHeader, UserMessage
from host_bridge.testing import FakeClock, FakeTimers
from messages import (
    SCHEDULE_CHANGE_TYPE,
    ScheduleLogError,
    parse_instant,
    parse_reminder_framing,
    validate_schedule_stream,
)

__all__ = [
    "MODES",
    "CampaignReport",
    "TrialReport",
    "main",
    "run_campaign",
    "run_trial",
]

MODES = ("random", "followup", "dispatch-append", "dispatch-commit", "create-commit", "in-turn")
"""How an incarnation is killed (see the module docstring)."""

DAY_MS = 86_400_000
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z
REPO_ROOT = Path(__file__).resolve().parent.parent
CHILD_DEADLINE_S = 120.0
"""A child that was never killed exits by itself after this long."""

RESULTS_DIR = Path(__file__).resolve().parent / "results"


# =========================================================================================
# child
# =========================================================================================


class _Journal:
    """One JSON object per line on stdout, each written with one ``os.write`` (atomic on a pipe)."""

    def __init__(self, fd: int = 1) -> None:
        self._fd = fd

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps({"ev": event, **fields}, ensure_ascii=True, separators=(",", ":"))
        os.write(self._fd, (line + "\n").encode("ascii"))


def _block_forever() -> None:
    threading.Event().wait()


def _reminder_of(text: str) -> tuple[str, str] | None:
    """(schedule id, occurrence_at) of a one-shot reminder framing; ``None`` for other text."""
    found = parse_reminder_framing(text)
    return (found[0].schedule_id, found[0].occurrence_at) if len(found) == 1 else None


class _ObservedSessions:
    """A ``SessionStore`` wrapper that lets the child arm its commit pauses at barriers."""

    def __init__(self, inner: Any, on_barrier: Callable[[Session], None]) -> None:
        self._inner = inner
        self._on_barrier = on_barrier

    def get(self, session_id: str) -> Any:
        return self._inner.get(session_id)

    def list(self) -> Any:
        return self._inner.list()

    def flush(self, session: Session) -> Future[bool]:
        self._on_barrier(session)
        future: Future[bool] = self._inner.flush(session)
        return future


def _change_of(data: Mapping[str, Any]) -> tuple[str, str]:
    op = str(data.get("operation"))
    if op == "create":
        schedule = data.get("schedule")
        return op, str(schedule.get("id")) if isinstance(schedule, dict) else ""
    return op, str(data.get("id"))


class _HandOverCheck:
    """Wraps ``record_appends``: a reminder's inbox entry must travel with its dispatch."""

    def __init__(self, store: EventStore, journal: _Journal) -> None:
        self._real = store.record_appends
        self._journal = journal

    def __call__(
        self, session_id: str, rows: Sequence[tuple[SessionEvent, bytes]], **options: Any
    ) -> None:
        reminders = [
            event.seq
            for event, _ in rows
            if event.type == INBOX_EVENT and _reminder_of(_entry_text(event.data)) is not None
        ]
        dispatches = sum(
            1
            for event, _ in rows
            if event.type == SCHEDULE_CHANGE_TYPE and _change_of(event.data)[0] == "dispatch"
        )
        if reminders and dispatches < len(reminders):
            self._journal("split", session=session_id, entries=reminders)
        self._real(session_id, rows, **options)


def _entry_text(data: Any) -> str:
    message = message_of(data)
    return "" if message is None else message.text


def _child_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="crash_campaign --child")
    parser.add_argument("--child", type=Path, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--incarnation", type=int, required=True)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--mode", choices=MODES, default="random")
    parser.add_argument("--pause-at", type=int, default=1)
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    journal = _Journal()
    watchdog = threading.Timer(CHILD_DEADLINE_S, lambda: os._exit(3))
    watchdog.daemon = True
    watchdog.start()

    rng = random.Random(args.seed * 1000 + args.incarnation)
    clock = FakeClock(BASE_MS + args.incarnation * DAY_MS)
    timers = FakeTimers(clock)
    host = EmbeddedHost(args.child, clock=clock, timers=timers)
    counters: collections.Counter[str] = collections.Counter()
    counter_lock = threading.Lock()
    commit_pause = threading.Event()
    barriers_seen: set[tuple[str, str, str]] = set()
    confirmed_ids: dict[str, list[str]] = collections.defaultdict(list)
    reminder_entries: set[tuple[str, int]] = set()

    def count(kind: str) -> int:
        with counter_lock:
            counters[kind] += 1
            return counters[kind]

    def on_barrier(session: Session) -> None:
        """Arm the commit pause when this flush is the barrier of a dispatch or create."""
        if args.mode not in ("dispatch-commit", "create-commit") or commit_pause.is_set():
            return
        events = session.events
        if not events or events[-1].type != SCHEDULE_CHANGE_TYPE:
            return
        op, schedule_id = _change_of(events[-1].data)
        wanted = "dispatch" if args.mode == "dispatch-commit" else "create"
        key = (session.id, op, schedule_id)
        with counter_lock:
            first = key not in barriers_seen
            barriers_seen.add(key)
        if op == wanted and first and count(f"barrier-{op}") == args.pause_at:
            journal("arming", phase=args.mode, session=session.id, id=schedule_id)
            commit_pause.set()

    def fault_hook() -> None:
        if commit_pause.is_set():
            journal("paused", phase=args.mode)
            _block_forever()

    assert host.persistence is not None
    host.persistence.fault_hook = fault_hook  # the store's test seam, set before any write
    host.persistence.record_appends = _HandOverCheck(host.persistence, journal)  # type: ignore[method-assign]

    def dispatch_guard(
        header: SessionHeader, events: Sequence[SessionEvent], type_: str, data: Any
    ) -> None:
        """Pause inside the session while a dispatch append is judged (its entry is staged)."""
        if args.mode != "dispatch-append" or type_ != SCHEDULE_CHANGE_TYPE:
            return
        if _change_of(data)[0] == "dispatch" and count("dispatch-append") == args.pause_at:
            staged = bool(events) and events[-1].type == INBOX_EVENT
            journal("paused", phase="dispatch-append", session=header.id, staged=staged)
            _block_forever()

    host.sessions.add_append_guard(dispatch_guard)

    def wrap_followup(agent: Any) -> None:
        real = agent.followup
        session_id = agent.session.id

        def followup(message: UserMessage) -> None:
            if message.source.get("plugin") != "tool-schedule":
                real(message)  # a prompt of the driver, not a reminder
                return
            reminder = _reminder_of(message.text)
            assert reminder is not None, "Schedule queued a text that is not its framing"
            schedule_id, occurrence = reminder
            journal("followup", session=session_id, id=schedule_id, now=clock(), at=occurrence)
            try:
                real(message)
            except Exception:
                journal("followup-failed", session=session_id, id=schedule_id)
                raise
            if args.mode == "followup" and count("followup") == args.pause_at:
                journal("paused", phase="followup", session=session_id, id=schedule_id)
                _block_forever()

        agent.followup = followup

    def watch_completions(agent: Any) -> None:
        session: EmbeddedSession = agent.session
        seen = [session.durable_length]  # what a resume read is durable already
        lock = threading.Lock()

        def on_durable(length: int) -> None:
            events = session.events
            with lock:
                start, seen[0] = seen[0], max(seen[0], length)
            for event in events[start:length]:
                if event.type != TURN_COMPLETED_EVENT:
                    continue
                entry = completed_entry(event.data)
                with counter_lock:
                    known = (session.id, entry) in reminder_entries
                if entry is not None and known:
                    journal("completed", session=session.id, entry=entry)

        session.on_durable(on_durable)

    host.agents.on_created(wrap_followup)  # before install: runs before the owner starts
    host.agents.on_created(watch_completions)
    context = dataclasses.replace(
        host.context(), sessions=_ObservedSessions(host.sessions, on_barrier)
    )
    plugin = install_schedule(context)

    def model_for(session_id: str) -> Callable[[Turn], str | None]:
        def model(turn: Turn) -> str | None:
            text = turn.message.text
            reminder = _reminder_of(text)
            if reminder is not None:
                schedule_id, occurrence = reminder
                assert turn.inbox_seq is not None
                with counter_lock:
                    reminder_entries.add((session_id, turn.inbox_seq))
                journal(
                    "seen",
                    session=session_id,
                    id=schedule_id,
                    entry=turn.inbox_seq,
                    now=clock(),
                    at=occurrence,
                )
                if args.mode == "in-turn" and count("turn") == args.pause_at:
                    host.sessions.flush(turn.agent.session).result(timeout=30)  # started, durably
                    journal("paused", phase="in-turn", session=session_id, entry=turn.inbox_seq)
                    _block_forever()
                return None
            parts = text.split(" ")
            if parts[0] == "create":
                delay, prompt = int(parts[1]), parts[2]
                journal("attempt", op="create", session=session_id, prompt=prompt)
                value = turn.call_tool(
                    "schedule_create", {"prompt": prompt, "after_seconds": delay}
                )
                result = value.value
                if isinstance(result, dict) and "scheduledAt" in result:
                    confirmed_ids[session_id].append(str(result["id"]))
                    journal(
                        "confirmed",
                        op="create",
                        session=session_id,
                        id=result["id"],
                        prompt=prompt,
                        at=result["scheduledAt"],
                    )
                else:
                    journal("answer", op="create", session=session_id, value=result)
            elif parts[0] == "delete":
                journal("attempt", op="delete", session=session_id, id=parts[1])
                result = turn.call_tool("schedule_delete", {"id": parts[1]}).value
                if isinstance(result, dict) and "deleted" in result:
                    journal(
                        "confirmed",
                        op="delete",
                        session=session_id,
                        id=parts[1],
                        deleted=result["deleted"],
                    )
                else:
                    journal("answer", op="delete", session=session_id, value=result)
            elif parts[0] == "list":
                result = turn.call_tool("schedule_list", {}).value
                if not (isinstance(result, dict) and "schedules" in result):
                    journal("answer", op="list", session=session_id, value=result)
            return None

        return model

    session_ids = [f"s{n}" for n in range(1, args.sessions + 1)]
    agents = [host.spawn_root(session_id=sid, model=model_for(sid)) for sid in session_ids]
    journal("ready", sessions=session_ids)
    serial = 0
    for _step in range(args.steps):
        for agent, sid in zip(agents, session_ids, strict=True):
            roll = rng.random()
            if roll < 0.5:
                serial += 1
                prompt = f"r{args.incarnation}-{serial}"
                agent.prompt(f"create {rng.randint(1, 120)} {prompt}")
            elif roll < 0.7:
                ids = list(confirmed_ids[sid])
                if ids and rng.random() < 0.7:
                    agent.prompt(f"delete {rng.choice(ids)}")
                else:
                    agent.prompt(f"delete schedule-{rng.randint(1, 60)}")
            elif roll < 0.8:
                agent.prompt("list")
        timers.advance(rng.randint(0, 20_000))
        for agent in agents:
            _settle(plugin, agent)
    journal("done")
    _block_forever()


def _settle(plugin: SchedulePlugin, agent: EmbeddedAgent) -> None:
    """Wait until the agent and its owner are quiet (forever, if the child is paused).

    An owner still *waiting for idle* while the agent is idle has an idle
    notification on its way (it will drive again): not quiet yet. This matters
    on resume, where the agent first runs its re-queued inbox entries.
    """
    for _ in range(1000):
        try:
            plugin.wait_quiet(agent, timeout=30)
            agent.when_idle().result(timeout=30)
            status = plugin.wait_quiet(agent, timeout=30)
        except TimeoutError:
            continue
        if agent.status == "idle" and not status.busy and not status.waiting_for_idle:
            return


# =========================================================================================
# parent
# =========================================================================================


@dataclass
class Incarnation:
    """One child run and how it ended."""

    mode: str
    pause_at: int
    kill_after_lines: int
    journal: list[dict[str, Any]] = field(default_factory=list)
    paused: str | None = None  # the phase the child announced, if it paused
    phase: str = "?"  # where the kill fell, classified from the journal
    in_turn: set[tuple[str, int]] = field(default_factory=set)  # reminder turns it cut
    seconds: float = 0.0


@dataclass
class TrialReport:
    """The outcome of one trial."""

    trial: int
    seed: int
    incarnations: list[Incarnation]
    violations: list[str] = field(default_factory=list)
    corrupt_stores: int = 0
    lost_changes: int = 0  # confirmed creates/deletes missing from the store
    reminders_lost: int = 0  # dispatched (or due) but never completed a turn
    deliveries: int = 0  # completed reminder turns in the store
    reminders: int = 0
    deleted: int = 0
    reruns_after_kill: int = 0  # a reminder turn run again because a kill fell inside it
    duplicates_other: int = 0  # any other repeat: queued, dispatched, completed or run too often
    split_hand_overs: int = 0  # an inbox entry handed to the store without its dispatch
    unconfirmed_present: int = 0
    unconfirmed_absent: int = 0
    seconds: float = 0.0


@dataclass
class CampaignReport:
    """Everything a campaign measured; ``ok`` when no trial found a violation."""

    trials: list[TrialReport]
    seconds: float

    @property
    def violations(self) -> list[str]:
        return [f"trial {t.trial}: {v}" for t in self.trials for v in t.violations]

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> dict[str, Any]:
        """Totals over every trial (the figures of ``docs/reliability.md``)."""
        kills = [inc for t in self.trials for inc in t.incarnations]
        by_mode = collections.Counter(inc.mode for inc in kills)
        by_phase = collections.Counter(inc.phase for inc in kills)
        paused = collections.Counter(inc.paused for inc in kills if inc.paused is not None)

        def total(name: str) -> int:
            return sum(int(getattr(t, name)) for t in self.trials)

        return {
            "trials": len(self.trials),
            "kills": len(kills),
            "kills_by_mode": dict(sorted(by_mode.items())),
            "kills_by_phase": dict(sorted(by_phase.items())),
            "paused_kills": dict(sorted(paused.items())),
            "reminders": total("reminders"),
            "deleted": total("deleted"),
            "deliveries": total("deliveries"),
            "lost_changes": total("lost_changes"),
            "reminders_lost": total("reminders_lost"),
            "corrupt_stores": total("corrupt_stores"),
            "reruns_after_kill": total("reruns_after_kill"),
            "duplicates_other": total("duplicates_other"),
            "split_hand_overs": total("split_hand_overs"),
            "unconfirmed_creates_present": total("unconfirmed_present"),
            "unconfirmed_creates_absent": total("unconfirmed_absent"),
            "violations": self.violations,
            "seconds": round(self.seconds, 1),
        }


class _Reader:
    """Collects a child's journal lines on a thread; callers wait on predicates."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._eof = False
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream: Any) -> None:
        for raw in stream:
            try:
                entry = json.loads(raw)
            except ValueError:
                continue  # a torn last line cannot happen on a pipe, but never trust it
            with self._cond:
                self.lines.append(entry)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float) -> bool:
        """True once ``predicate(lines)`` holds; False on EOF or timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: predicate(self.lines) or self._eof, timeout
            ) and predicate(self.lines)

    def join(self) -> list[dict[str, Any]]:
        self._thread.join(timeout=30)
        with self._cond:
            return list(self.lines)


def _child_command(
    data_dir: Path, seed: int, index: int, incarnation: Incarnation, *, sessions: int, steps: int
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench.crash_campaign",
        "--child",
        str(data_dir),
        "--seed",
        str(seed),
        "--incarnation",
        str(index),
        "--mode",
        incarnation.mode,
        "--pause-at",
        str(incarnation.pause_at),
        "--sessions",
        str(sessions),
        "--steps",
        str(steps),
    ]


def _run_incarnation(
    data_dir: Path,
    seed: int,
    index: int,
    incarnation: Incarnation,
    *,
    sessions: int,
    steps: int,
    jitter_s: float,
    rng: random.Random,
) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    started = time.monotonic()
    with open(data_dir / f"child-{index}.stderr", "wb") as stderr:
        child = subprocess.Popen(
            _child_command(data_dir, seed, index, incarnation, sessions=sessions, steps=steps),
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO_ROOT,
            env=env,
            text=True,
        )
        try:
            assert child.stdout is not None
            reader = _Reader(child.stdout)
            if incarnation.mode == "random":
                target = incarnation.kill_after_lines
                reader.wait(lambda lines: len(lines) >= target or _has(lines, "done"), 60)
                if jitter_s > 0:
                    time.sleep(rng.uniform(0, jitter_s))  # the experiment's kill moment
            else:
                reader.wait(lambda lines: _has(lines, "paused") or _has(lines, "done"), 60)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
    incarnation.journal = reader.join()
    incarnation.seconds = time.monotonic() - started
    paused = [e for e in incarnation.journal if e["ev"] == "paused"]
    incarnation.paused = str(paused[0]["phase"]) if paused else None
    _classify(incarnation)


def _has(lines: list[dict[str, Any]], event: str) -> bool:
    return any(line.get("ev") == event for line in lines)


def _classify(incarnation: Incarnation) -> None:
    """Where did the kill fall? Also the reminder turns it cut (started, completion not durable)."""
    running: set[tuple[str, int]] = set()
    pending_tools: collections.Counter[str] = collections.Counter()
    ready = done = False
    for entry in incarnation.journal:
        kind = entry["ev"]
        if kind == "ready":
            ready = True
        elif kind == "done":
            done = True
        elif kind == "seen":
            running.add((entry["session"], entry["entry"]))
        elif kind == "completed":
            running.discard((entry["session"], entry["entry"]))
        elif kind == "attempt":
            pending_tools[entry["session"]] += 1
        elif kind in ("confirmed", "answer") and entry["op"] in ("create", "delete"):
            pending_tools[entry["session"]] -= 1
    incarnation.in_turn = running
    if incarnation.paused is not None:
        incarnation.phase = f"paused:{incarnation.paused}"
    elif not ready:
        incarnation.phase = "startup"
    elif running:
        incarnation.phase = "in-turn"
    elif any(n > 0 for n in pending_tools.values()):
        incarnation.phase = "tool-call"
    elif done:
        incarnation.phase = "idle"
    else:
        incarnation.phase = "between-steps"


@dataclass
class _Stored:
    creates: dict[tuple[str, str], str] = field(default_factory=dict)  # (session, id) -> prompt
    due: dict[tuple[str, str], int] = field(default_factory=dict)  # (session, id) -> ms
    deletes: set[tuple[str, str]] = field(default_factory=set)
    dispatches: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    entries: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # reminder inbox seqs
    started: collections.Counter[tuple[str, int]] = field(default_factory=collections.Counter)
    completed: collections.Counter[tuple[str, int]] = field(default_factory=collections.Counter)


def _check_store(path: Path, report: TrialReport, when: str) -> _Stored | None:
    """Open the store as a recovering host would; stream-check every session; read its ledger."""
    stored = _Stored()
    if not path.exists():
        return stored
    try:
        store = SqliteEventStore(path, create=False)
    except StoreError as error:
        report.corrupt_stores += 1
        report.violations.append(f"{when}: store does not open: {error}")
        return None
    try:
        for session_id in store.session_ids():
            loaded = store.load(session_id)
            if loaded is None:
                continue
            validate_schedule_stream(loaded.events, loaded.header.seed_length)
            _read_ledger(session_id, loaded.events, stored)
    except (StoreError, ScheduleLogError) as error:
        report.corrupt_stores += 1
        report.violations.append(f"{when}: {type(error).__name__}: {error}")
        return None
    finally:
        store.close()
    for key in sorted(stored.dispatches):
        if not stored.entries.get(key):
            report.split_hand_overs += 1
            report.violations.append(f"{when}: {key} is dispatched but has no inbox entry")
    for key, seqs in sorted(stored.entries.items()):
        if stored.dispatches[key] < len(seqs):
            report.split_hand_overs += 1
            report.violations.append(f"{when}: {key} has an inbox entry without its dispatch")
    return stored


def _read_ledger(session_id: str, events: Sequence[SessionEvent], stored: _Stored) -> None:
    reminder_of: dict[int, str] = {}
    for event in events:
        if event.type == SCHEDULE_CHANGE_TYPE:
            op, schedule_id = _change_of(event.data)
            key = (session_id, schedule_id)
            if op == "create":
                stored.creates[key] = str(event.data["schedule"]["prompt"])
                stored.due[key] = parse_instant(event.data["schedule"]["scheduledAt"])
            elif op == "delete":
                stored.deletes.add(key)
            else:
                stored.dispatches[key] += 1
        elif event.type == INBOX_EVENT:
            reminder = _reminder_of(_entry_text(event.data))
            if reminder is not None:
                schedule_id, _ = reminder
                reminder_of[event.seq] = schedule_id
                stored.entries.setdefault((session_id, schedule_id), []).append(event.seq)
        elif event.type == "message" and isinstance(event.data, dict):
            seq = event.data.get("inbox")
            if event.data.get("role") == "user" and seq in reminder_of:
                stored.started[(session_id, seq)] += 1
        elif event.type == TURN_COMPLETED_EVENT:
            seq = completed_entry(event.data)
            if seq in reminder_of:
                stored.completed[(session_id, seq)] += 1


def _check_confirmed(
    stored: _Stored, journals: Sequence[list[dict[str, Any]]], report: TrialReport, when: str
) -> None:
    attempted: set[tuple[str, str]] = set()
    for journal in journals:
        for entry in journal:
            if entry["ev"] == "attempt" and entry["op"] == "create":
                attempted.add((entry["session"], entry["prompt"]))
            if entry["ev"] != "confirmed":
                continue
            key = (entry["session"], entry["id"])
            if entry["op"] == "create" and stored.creates.get(key) != entry["prompt"]:
                report.lost_changes += 1
                report.violations.append(f"{when}: confirmed create {key} is not stored")
            if entry["op"] == "delete" and entry["deleted"] and key not in stored.deletes:
                report.lost_changes += 1
                report.violations.append(f"{when}: confirmed delete {key} is not stored")
    for (session_id, schedule_id), prompt in stored.creates.items():
        if (session_id, prompt) not in attempted:
            report.violations.append(
                f"{when}: stored create {session_id}/{schedule_id} ({prompt}) was never attempted"
            )


class _Counter:
    """A model that counts the reminder turns it runs, per inbox entry, and when it ran them."""

    def __init__(
        self, session_id: str, runs: list[dict[str, Any]], clock: Callable[[], int]
    ) -> None:
        self._session_id = session_id
        self._runs = runs
        self._clock = clock

    def __call__(self, turn: Turn) -> str | None:
        reminder = _reminder_of(turn.message.text)
        if reminder is not None:
            schedule_id, occurrence = reminder
            self._runs.append(
                {
                    "ev": "seen",
                    "session": self._session_id,
                    "id": schedule_id,
                    "entry": turn.inbox_seq,
                    "now": self._clock(),
                    "at": occurrence,
                }
            )
        return None


def _resume_and_deliver(data_dir: Path, now_ms: int) -> list[dict[str, Any]]:
    """Resume every stored session in a fresh host at ``now_ms``; the reminder turns it runs."""
    runs: list[dict[str, Any]] = []
    path = store_path(data_dir)
    if not path.exists():
        return runs
    clock = FakeClock(now_ms)
    host = EmbeddedHost(data_dir, clock=clock, timers=FakeTimers(clock))
    try:
        plugin = install_schedule(host.context())
        assert host.persistence is not None
        agents = [
            host.spawn_root(session_id=sid, model=_Counter(sid, runs, clock))
            for sid in host.persistence.session_ids()
        ]
        for agent in agents:
            _settle(plugin, agent)
        plugin.dispose().result(timeout=30)
    finally:
        host.close()
    return runs


def run_trial(
    trial: int,
    seed: int,
    root: Path,
    *,
    modes: Sequence[str],
    sessions: int = 3,
    steps: int = 80,
    jitter_s: float = 0.0,
) -> TrialReport:
    """One trial: ``len(modes)`` killed incarnations on one store, then recovery and accounting."""
    started = time.monotonic()
    rng = random.Random(seed)
    data_dir = root / f"trial-{trial:03d}"
    data_dir.mkdir(parents=True)
    incarnations = [
        Incarnation(mode, pause_at=rng.randint(1, 4), kill_after_lines=rng.randint(1, 900))
        for mode in modes
    ]
    report = TrialReport(trial, seed, incarnations)
    path = store_path(data_dir)
    journals: list[list[dict[str, Any]]] = []
    for index, incarnation in enumerate(incarnations):
        _run_incarnation(
            data_dir,
            seed,
            index,
            incarnation,
            sessions=sessions,
            steps=steps,
            jitter_s=jitter_s,
            rng=rng,
        )
        journals.append(incarnation.journal)
        stored = _check_store(path, report, f"after kill {index} ({incarnation.phase})")
        if stored is None:
            report.seconds = time.monotonic() - started
            return report
        _check_confirmed(stored, journals, report, f"after kill {index}")

    before = _check_store(path, report, "before resume")
    final_now = BASE_MS + (len(incarnations) + 1) * DAY_MS
    resumed = _resume_and_deliver(data_dir, final_now)
    after = _check_store(path, report, "after resume")
    again = _resume_and_deliver(data_dir, final_now + DAY_MS)
    if again:
        repeated = sorted((run["session"], run["id"]) for run in again)
        report.violations.append(f"a second resume ran reminder turns again: {repeated}")
    if before is None or after is None:
        report.seconds = time.monotonic() - started
        return report
    _account(report, journals, before, after, resumed)
    report.seconds = time.monotonic() - started
    return report


def _account(
    report: TrialReport,
    journals: Sequence[list[dict[str, Any]]],
    before: _Stored,
    after: _Stored,
    resumed: Sequence[dict[str, Any]],
) -> None:
    """Count deliveries from the store after recovery; explain every extra run by a kill."""
    runs: collections.Counter[tuple[str, int]] = collections.Counter()
    run_ids: dict[tuple[str, int], str] = {}
    allowed: collections.Counter[tuple[str, int]] = collections.Counter()
    confirmed_prompts: set[tuple[str, str]] = set()
    for incarnation in report.incarnations:
        for cut in incarnation.in_turn:
            allowed[cut] += 1  # a kill inside this turn may make it run once more
    for entry in [line for journal in journals for line in journal] + list(resumed):
        if entry["ev"] in ("followup", "seen") and entry["now"] < parse_instant(entry["at"]):
            report.violations.append(
                f"{(entry['session'], entry['id'])} was delivered before it was due"
            )
        if entry["ev"] == "seen":
            ran_key = (entry["session"], int(entry["entry"]))
            runs[ran_key] += 1
            run_ids[ran_key] = entry["id"]
        elif entry["ev"] == "split":
            report.split_hand_overs += 1
            report.violations.append(
                f"inbox entries {entry['entries']} of {entry['session']} were handed to the store "
                "without their dispatch"
            )
        elif entry["ev"] == "confirmed" and entry["op"] == "create":
            confirmed_prompts.add((entry["session"], entry["prompt"]))
    for key, prompt in before.creates.items():
        if (key[0], prompt) in confirmed_prompts:
            continue
        report.unconfirmed_present += 1
    attempted = sum(
        1 for journal in journals for e in journal if e["ev"] == "attempt" and e["op"] == "create"
    )
    confirmed = sum(
        1 for journal in journals for e in journal if e["ev"] == "confirmed" and e["op"] == "create"
    )
    report.unconfirmed_absent = max(0, attempted - confirmed - report.unconfirmed_present)
    report.reminders = len(after.creates)
    report.deleted = len(after.deletes)
    entry_owner: dict[tuple[str, int], tuple[str, str]] = {}
    for key in sorted(after.creates):
        session_id = key[0]
        deleted = key in after.deletes
        seqs = after.entries.get(key, [])
        dispatched = after.dispatches[key]
        for seq in seqs:
            entry_owner[(session_id, seq)] = key
        if deleted:
            if seqs or dispatched:
                report.violations.append(f"{key} was deleted yet queued or dispatched")
            continue
        if dispatched == 0:
            report.reminders_lost += 1
            report.violations.append(f"{key} is still active after recovery")
            continue
        if not seqs:
            report.reminders_lost += 1
            report.violations.append(f"{key} was dispatched but never queued to the model")
            continue
        if len(seqs) > 1:
            report.duplicates_other += len(seqs) - 1
            report.violations.append(f"{key} was queued {len(seqs)} times")
        completed = sum(after.completed[(session_id, seq)] for seq in seqs)
        report.deliveries += completed
        if completed == 0:
            report.reminders_lost += 1
            report.violations.append(f"{key} never completed a turn")
        elif completed > len(seqs):
            report.duplicates_other += completed - len(seqs)
            report.violations.append(f"{key} completed {completed} turns")
        for seq in seqs:
            ran, limit = runs[(session_id, seq)], 1 + allowed[(session_id, seq)]
            if ran == 0:
                report.violations.append(f"{key} (entry {seq}) completed but no model ran it")
            report.reruns_after_kill += max(0, min(ran, limit) - 1)
            if ran > limit:
                report.duplicates_other += ran - limit
                report.violations.append(
                    f"{key} (entry {seq}) ran {ran} times; kills inside its turn: {limit - 1}"
                )
    for entry_key in runs:
        if entry_key not in entry_owner:
            report.violations.append(
                f"{run_ids[entry_key]} of {entry_key[0]} ran from entry {entry_key[1]}, "
                "which the store does not hold"
            )


def run_campaign(
    trials: int,
    *,
    seed: int = 1,
    incarnations: int = 3,
    modes: Sequence[str] | None = None,
    sessions: int = 3,
    steps: int = 80,
    jitter_s: float = 0.02,
    data: Path | None = None,
    time_budget_s: float | None = None,
    progress: Callable[[TrialReport], None] | None = None,
) -> CampaignReport:
    """Run ``trials`` trials (fewer when ``time_budget_s`` runs out) and collect the figures.

    ``modes`` fixes the kill mode of each incarnation of every trial; by default
    each incarnation draws one (half random kills, the rest spread over the pauses).
    """
    started = time.monotonic()
    reports: list[TrialReport] = []
    with data_root(data, "dsh-crash-", keep_requested=True) as root:
        for trial in range(1, trials + 1):
            if time_budget_s is not None and time.monotonic() - started > time_budget_s:
                break
            trial_seed = seed * 100_003 + trial
            rng = random.Random(trial_seed)
            chosen = (
                list(modes)
                if modes is not None
                else [
                    rng.choice(("random", "random", "random", *MODES[1:]))
                    for _ in range(incarnations)
                ]
            )
            report = run_trial(
                trial,
                trial_seed,
                root,
                modes=chosen,
                sessions=sessions,
                steps=steps,
                jitter_s=jitter_s,
            )
            reports.append(report)
            if progress is not None:
                progress(report)
    return CampaignReport(reports, time.monotonic() - started)


def _print_trial(report: TrialReport) -> None:
    phases = ", ".join(inc.phase for inc in report.incarnations)
    status = "ok" if not report.violations else f"{len(report.violations)} VIOLATION(S)"
    print(
        f"trial {report.trial:3d}: {status:14s} kills: {phases}; reminders {report.reminders}, "
        f"deliveries {report.deliveries}, re-runs after a kill in the turn "
        f"{report.reruns_after_kill} ({report.seconds:.1f} s)",
        flush=True,
    )
    for violation in report.violations:
        print(f"    {violation}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of the campaign (``--child`` runs one child incarnation)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if "--child" in arguments:
        _child_main(arguments)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=50, help="trials to run (default 50)")
    parser.add_argument("--incarnations", type=int, default=3, help="kills per trial (default 3)")
    parser.add_argument("--sessions", type=int, default=3, help="sessions per host (default 3)")
    parser.add_argument("--steps", type=int, default=80, help="work steps per child (default 80)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--minutes", type=float, default=10.0, help="stop starting trials after this long"
    )
    parser.add_argument("--data", type=Path, help="keep the trial stores under this directory")
    parser.add_argument(
        "--results", type=Path, default=RESULTS_DIR, help=f"JSON results dir ({RESULTS_DIR})"
    )
    args = parser.parse_args(arguments)
    report = run_campaign(
        args.trials,
        seed=args.seed,
        incarnations=args.incarnations,
        sessions=args.sessions,
        steps=args.steps,
        data=args.data,
        time_budget_s=args.minutes * 60,
        progress=_print_trial,
    )
    summary = report.summary()
    print(json.dumps({k: v for k, v in summary.items() if k != "violations"}, indent=2))
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "crash_campaign.json").write_text(json.dumps(summary, indent=2) + "\n")
    if not report.ok:
        print(f"{len(report.violations)} violation(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
