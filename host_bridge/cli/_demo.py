"""``dsh-schedule demo``: a scripted model uses the real tools on the embedded default store.

The run, on the real wall clock and the real timer thread:

1. a host starts, Schedule is installed, a root agent with a scripted model is spawned;
2. the user asks for three reminders (two ``after_seconds``, one ``at`` in Shanghai
   time), a list and a deletion (real tool calls);
3. the first reminder comes due and arrives as a ``[SCHEDULE REMINDER]`` follow-up turn;
4. the host is shut down with the ``at`` reminder still pending;
5. meanwhile a second host, on its own session in a temporary store of its own
   (removed when that part ends, so the user's store never holds times of the
   fast clock) and on a clock running many times
   faster than real time (``every_seconds`` has a 300-second floor), shows a
   repeating reminder delivered twice as ``[SCHEDULE REMINDER BATCH]`` turns,
   then a ``cron`` reminder (daily, at a Shanghai time a few minutes ahead on
   that clock) delivered once, listed with its next day's time and deleted;
   then the first session stays down until its ``at`` reminder is overdue;
6. a new host opens the same store, resumes the first session with a new agent,
   and the overdue reminder is delivered once; the user asks for one more
   reminder and closes the chat;
7. a ``serve`` host (:class:`host_bridge.cli._serve.Server`), which never had the
   session open, wakes it when that reminder is due and presents it;
8. both sessions' durable ``schedule/change`` records are printed and checked (the
   second one's as read from its temporary store before it was removed).

Every wait is on a future, a condition or the owner's status; the only timed
waits are the progress ticker's (an event wait with a timeout) and the
deliberate downtime, which waits for wall-clock time to pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pykka

from actors._clock import ThreadTimers, TimerHandle
from actors._contract import (
    DEFAULT_CLOCK_WATCH_MS,
    DEFAULT_FLUSH_TIMEOUT_MS,
    Session,
    wall_clock_ms,
)
from host_bridge._plugin import SchedulePlugin, WakePolicy, install_schedule
from host_bridge._tools import present_value
from host_bridge.cli._common import (
    WRITE_STORE_EXIT,
    CommandFailed,
    StoreUnavailable,
    allow_shared_store_option,
    close_host,
    describe_store,
    exit_codes_help,
    format_ms,
    location_args,
    location_options,
    open_host,
    open_store_readonly,
    resolve_data_dir,
    safe_json,
    settle,
    shell_words,
    show_text,
    visible,
)
from host_bridge.cli._serve import Presented, Server
from host_bridge.embedded.agents import EmbeddedAgent, Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.sessions import SessionError
from host_bridge.embedded.stores import StoredSession, StoreError, open_store
from messages import (
    SCHEDULE_CHANGE_TYPE,
    PresentedReminder,
    ScheduleLogError,
    fold_schedule_events,
    parse_reminder_framing,
    schedule_view,
    validate_schedule_stream,
)
from messages._cron import parse_cron_expression
from messages._instant import parse_instant
from messages._zones import load_time_zone

__all__ = ["DemoTiming", "demo_command", "run_demo"]

EVERY_SECONDS = 300
"""The repeating reminder's interval: the shortest ``every_seconds`` allows."""
AT_ZONE = "Asia/Shanghai"
"""The time zone the user names for the ``at`` reminder and the ``cron`` one."""
CRON_LEAD_MINUTES = 3
"""The ``cron`` reminder's daily time: this many minutes ahead on the compressed clock,
counted from the start of its current minute (so 120 to 180 s of that clock ahead)."""
DAY_MS = 86_400_000
"""A day: the cron reminder's next time after its first (Shanghai keeps one offset all year)."""
GRACE_SECONDS = 30.0
"""How long past its due time a reminder may take to arrive before the demo gives up."""
OVERDUE_MARGIN_MS = 500
"""How long the host stays down after the pending reminder came due."""


@dataclass(frozen=True)
class DemoTiming:
    """The three reminder delays (seconds), the progress tick and the compressed clock's speed.

    ``speed``: how many times faster than real time the clock of the repeating
    reminder's host runs (its part runs while the first session's host is down).
    """

    on_time: int
    deleted: int
    pending: int
    tick: float
    speed: int
    closed: int = 2

    @property
    def estimate(self) -> int:
        """Roughly how long the run takes, in seconds."""
        return self.pending + self.closed + 5


FAST = DemoTiming(on_time=2, deleted=3, pending=5, tick=0.5, speed=300, closed=2)
NORMAL = DemoTiming(on_time=8, deleted=12, pending=16, tick=2.0, speed=150, closed=4)


class CompressedClock:
    """A wall clock starting at the real time now and running ``speed`` times faster.

    ``monotonic`` is the compressed elapsed time, so the clock never looks like
    it jumped; :class:`CompressedTimers` measures delays on the same scale.
    """

    def __init__(self, speed: int) -> None:
        self.speed = speed
        self._start_wall = wall_clock_ms()
        self._start_ns = time.monotonic_ns()

    def monotonic(self) -> int:
        """Compressed milliseconds since creation."""
        return (time.monotonic_ns() - self._start_ns) * self.speed // 1_000_000

    def __call__(self) -> int:
        """The compressed wall clock (epoch ms)."""
        return self._start_wall + self.monotonic()


class CompressedTimers:
    """A timer service for a :class:`CompressedClock`: ``delay_ms`` of its time, never less."""

    def __init__(self, speed: int) -> None:
        self._speed = speed
        self._real = ThreadTimers(name="dsh-demo-compressed-timers")

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once the compressed clock moved ``delay_ms`` on (rounded up)."""
        return self._real.call_later(-(-max(0, delay_ms) // self._speed), callback)

    def close(self) -> None:
        """Stop the timer thread."""
        self._real.close()


class Transcript:
    """Timestamped, serialised output: ``[ +s.mmm] who  text`` lines."""

    def __init__(self, started: float) -> None:
        self._started = started
        self._lock = threading.Lock()

    def line(self, who: str, text: str) -> None:
        """One transcript line from ``who``."""
        elapsed = time.monotonic() - self._started
        with self._lock:
            click.echo(f"[{elapsed:7.3f}s] {who:<8} {text}")

    def block(self, text: str, indent: str = " " * 20) -> None:
        """A multi-line block of JSON-escaped text (the reminder framing), indented.

        What a terminal would act on is written as ``\\uXXXX``, as in JSON.
        """
        with self._lock:
            for row in text.splitlines():
                click.echo(f"{indent}{safe_json(row)}")

    def heading(self, text: str) -> None:
        """A section heading."""
        with self._lock:
            click.echo("")
            click.echo(f"== {text}")

    def plain(self, text: str = "") -> None:
        """An untimed line."""
        with self._lock:
            click.echo(text)


def _describe_change(data: Any) -> str:
    if not isinstance(data, dict):
        return "malformed"
    operation = data.get("operation")
    if operation == "create" and isinstance(data.get("schedule"), dict):
        schedule = data["schedule"]
        kind = schedule.get("kind")
        if kind == "every":
            rule = f"every {schedule.get('everySeconds')}s, first at {schedule.get('scheduledAt')}"
        elif kind == "cron":
            rule = (
                f'cron "{schedule.get("expression")}" {schedule.get("timeZone")}, '
                f"first at {schedule.get('scheduledAt')}"
            )
        elif kind == "at":
            rule = f"at {schedule.get('scheduledAt')}"
        else:
            rule = f"after {schedule.get('afterSeconds')}s at {schedule.get('scheduledAt')}"
        return visible(f"create {schedule.get('id')} {rule} ") + show_text(
            str(schedule.get("prompt"))
        )
    if "acceptedAt" in data:
        return visible(f"{operation} {data.get('id')} accepted at {data.get('acceptedAt')}")
    return visible(f"{operation} {data.get('id')}")


class LogWatch:
    """Prints the ``schedule/change`` records appended to a live session since last asked."""

    def __init__(self, session: Session, transcript: Transcript) -> None:
        self._session = session
        self._transcript = transcript
        self._next = len(session.events)
        self._lock = threading.Lock()

    def show_new(self) -> None:
        """Print every new ``schedule/change`` record (other events are counted, not shown)."""
        with self._lock:
            events = self._session.events
            fresh = events[self._next :]
            self._next = len(events)
        for event in fresh:
            if event.type == SCHEDULE_CHANGE_TYPE:
                self._transcript.line(
                    "log", f"+ #{event.seq} schedule/change {_describe_change(event.data)}"
                )


@dataclass(frozen=True)
class Step:
    """One scripted exchange: what the user says, the tool the model calls, how it answers."""

    user: str
    tool: str
    arguments: dict[str, Any]
    reply: Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class Reminder:
    """A reminder turn the scripted model received."""

    schedule_id: str
    occurrence_at: str
    prompt: str
    received_ms: int


@dataclass
class ScriptedModel:
    """A deterministic model: one scripted tool call per user line; presents every reminder."""

    name: str
    transcript: Transcript
    steps: dict[str, Step]
    watch: LogWatch | None = None
    clock: Callable[[], int] = wall_clock_ms
    results: list[dict[str, Any]] = field(default_factory=list)
    reminders: list[Reminder] = field(default_factory=list)
    _arrived: threading.Condition = field(default_factory=threading.Condition)

    def __call__(self, turn: Turn) -> str | None:
        """Run one turn."""
        text = turn.message.text
        reminders = parse_reminder_framing(text)
        if reminders:
            return self._reminder(text, reminders)
        step = self.steps.get(text)
        if step is None:
            reply = "I have no script for that."
        else:
            self.transcript.line(
                "model", f"-> {step.tool} {json.dumps(step.arguments, ensure_ascii=False)}"
            )
            result = turn.call_tool(step.tool, step.arguments)
            value = result.value if isinstance(result.value, dict) else {"value": result.value}
            self.results.append(value)
            self.transcript.line("tool", f"<- {visible(present_value(result.value))}")
            if self.watch is not None:
                self.watch.show_new()
            reply = step.reply(value)
        self.transcript.line("model", reply)  # the steps' replies escape what they quote
        return reply

    def _reminder(self, text: str, items: tuple[PresentedReminder, ...]) -> str:
        now = self.clock()
        late = _lateness(now, max(item.occurrence_at for item in items))
        self.transcript.line("reminder", f"follow-up turn for {self.name} ({late}):")
        self.transcript.block(text)
        with self._arrived:
            for item in items:
                self.reminders.append(
                    Reminder(item.schedule_id, item.occurrence_at, item.prompt, now)
                )
            self._arrived.notify_all()
        said = "; ".join(item.prompt for item in items)
        self.transcript.line("model", f"Reminder for you: {visible(said)}")
        return f"Reminder for you: {said}"

    def arrived(self, schedule_id: str) -> list[Reminder]:
        """The reminders for ``schedule_id`` received so far."""
        with self._arrived:
            return [r for r in self.reminders if r.schedule_id == schedule_id]

    def wait_for(self, schedule_id: str, timeout: float, count: int = 1) -> bool:
        """Block until ``count`` reminders for ``schedule_id`` arrived (``False`` on timeout)."""
        with self._arrived:
            return self._arrived.wait_for(
                lambda: sum(r.schedule_id == schedule_id for r in self.reminders) >= count,
                timeout,
            )


def _lateness(now_ms: int, occurrence: str) -> str:
    late = (now_ms - parse_instant(occurrence)) / 1000
    return f"due {occurrence}, arrived {late:.3f} s after its due time"


def _wait_for_reminder(
    model: ScriptedModel,
    schedule_id: str,
    due_ms: int,
    timing: DemoTiming,
    out: Transcript,
    *,
    count: int = 1,
    speed: int = 1,
) -> None:
    """Wait for the ``count``-th reminder of ``schedule_id``, due at ``due_ms`` (model's clock).

    ``speed`` is how much faster than real time that clock runs; the grace
    period is real time.
    """
    clock = model.clock
    deadline = time.monotonic() + max(0, due_ms - clock()) / 1000 / speed + GRACE_SECONDS
    while not model.wait_for(schedule_id, timing.tick, count):
        if time.monotonic() > deadline:
            raise CommandFailed(
                f"{schedule_id} never arrived: it was due at {format_ms(due_ms)} "
                f"and nothing came within {GRACE_SECONDS:.0f} s"
            )
        remaining = (due_ms - clock()) / 1000
        if remaining > 0:
            out.line("wait", f"... {schedule_id} is due in {remaining:.1f} s")
        else:
            out.line("wait", f"... {schedule_id} is {-remaining:.1f} s overdue, waiting for it")


def _wait_downtime(due_ms: int, schedule_id: str, timing: DemoTiming, out: Transcript) -> None:
    """The host is down: let wall-clock time pass until ``schedule_id`` is overdue."""
    until_ms = due_ms + OVERDUE_MARGIN_MS
    nothing = threading.Event()  # never set: the ticker waits on it with a timeout
    while (remaining := (until_ms - wall_clock_ms()) / 1000) > 0:
        to_due = (due_ms - wall_clock_ms()) / 1000
        state = f"due in {to_due:.1f} s" if to_due > 0 else f"overdue by {-to_due:.1f} s"
        out.line("wait", f"... no host running; {schedule_id} is {state}")
        nothing.wait(min(timing.tick, remaining))


def _local_at(target_ms: int) -> dict[str, str]:
    """The ``at`` object a model would produce for ``target_ms`` said in :data:`AT_ZONE` time."""
    moment = datetime.datetime.fromtimestamp(target_ms / 1000, load_time_zone(AT_ZONE))
    return {
        "date": moment.strftime("%Y-%m-%d"),
        "time": moment.strftime("%H:%M:%S"),
        "time_zone": AT_ZONE,
    }


def _created(value: dict[str, Any]) -> str:
    if "code" in value:
        return f"Sorry, that failed ({value['code']})."
    if value.get("kind") == "every":
        return (
            f"OK, {visible(value['id'])} repeats every {value['everySeconds']} s, "
            f"first at {visible(value['scheduledAt'])}."
        )
    if value.get("kind") == "cron":
        rule = parse_cron_expression(str(value["expression"])).describe()
        return (
            f"OK, {visible(value['id'])} repeats {rule} ({visible(str(value['timeZone']))} "
            f"time), first at {visible(value['scheduledAt'])}."
        )
    return f"OK, {visible(value['id'])} is set for {visible(value['scheduledAt'])}."


def _listed(value: dict[str, Any]) -> str:
    items = value.get("schedules", [])
    names = ", ".join(
        f"{visible(v['id'])} ({visible(str(v['kind']))}, {show_text(v['prompt'])})" for v in items
    )
    return f"You have {len(items)} reminder(s)" + (f": {names}." if names else ".")


def _deleted(value: dict[str, Any]) -> str:
    if not value.get("deleted"):
        return "Nothing to cancel."
    return f"Cancelled {visible(value['id'])}."


def _steps(timing: DemoTiming, started_ms: int) -> list[Step]:
    """The main session's script; the at reminder is due ``timing.pending`` s after the start."""
    at = _local_at(-(-(started_ms + timing.pending * 1000) // 1000) * 1000)  # a whole second
    return [
        Step(
            f"Remind me in {timing.on_time} seconds to stretch my legs.",
            "schedule_create",
            {"prompt": "stretch your legs", "after_seconds": timing.on_time},
            _created,
        ),
        Step(
            f"And in {timing.deleted} seconds to check the oven.",
            "schedule_create",
            {"prompt": "check the oven", "after_seconds": timing.deleted},
            _created,
        ),
        Step(
            f"And at {at['time']} Shanghai time today to call Alice back.",
            "schedule_create",
            {"prompt": "call Alice back", "at": at},
            _created,
        ),
        Step("Which reminders do I have?", "schedule_list", {}, _listed),
        Step(
            "Cancel the oven one, I turned it off.",
            "schedule_delete",
            {"id": "schedule-2"},
            _deleted,
        ),
        Step("What is left now?", "schedule_list", {}, _listed),
        Step(
            f"Remind me in {timing.closed} seconds to take a break. I'm closing the chat now.",
            "schedule_create",
            {"prompt": "take a break", "after_seconds": timing.closed},
            _created,
        ),
    ]


def _every_steps() -> list[Step]:
    """The repeating reminders' session: create the every one, stop it; list, stop the cron one.

    The cron reminder's own step depends on the clock when it is said (see :func:`_cron_step`).
    """
    return [
        Step(
            "Every 5 minutes, remind me to drink some water.",
            "schedule_create",
            {"prompt": "drink some water", "every_seconds": EVERY_SECONDS},
            _created,
        ),
        Step(
            "Twice is enough, stop the water reminders.",
            "schedule_delete",
            {"id": "schedule-1"},
            _deleted,
        ),
        Step("Which reminders do I have?", "schedule_list", {}, _listed),
        Step(
            "I got it; cancel the daily one for now.",
            "schedule_delete",
            {"id": "schedule-2"},
            _deleted,
        ),
        Step("What is left now?", "schedule_list", {}, _listed),
    ]


def _cron_step(now_ms: int) -> tuple[Step, int]:
    """A daily ``cron`` reminder at an :data:`AT_ZONE` time just ahead of ``now_ms``; its first.

    The time is :data:`CRON_LEAD_MINUTES` minutes after the start of the current
    minute, so the first occurrence is that instant (the zone has no clock change).
    """
    first = (now_ms // 60_000 + CRON_LEAD_MINUTES) * 60_000
    local = _local_at(first)
    hour, minute = int(local["time"][:2]), int(local["time"][3:5])
    step = Step(
        f"Every day at {hour:02d}:{minute:02d} Shanghai time, remind me to water the plants.",
        "schedule_create",
        {
            "prompt": "water the plants",
            "cron": {"expression": f"{minute} {hour} * * *", "time_zone": AT_ZONE},
        },
        _created,
    )
    return step, first


@dataclass
class _Live:
    host: EmbeddedHost
    plugin: SchedulePlugin
    agent: EmbeddedAgent
    model: ScriptedModel

    def show_log(self) -> None:
        """Print the records appended since the last look."""
        if self.model.watch is not None:
            self.model.watch.show_new()


def _start(
    data_dir: Path,
    session_id: str,
    agent_id: str,
    steps: list[Step],
    out: Transcript,
    *,
    clock: CompressedClock | None = None,
    timers: CompressedTimers | None = None,
    store: Path | None = None,
) -> _Live:
    """Open a host, install Schedule, open (create or resume) the session, spawn the agent.

    With a compressed ``clock`` (and its ``timers``), Schedule's flush timeout and
    clock watchdog keep their real-time length. ``store``: a temporary SQLite
    store to use instead of the user's.
    """
    host = open_host(data_dir, program="demo", clock=clock, timers=timers, store=store)
    plugin: SchedulePlugin | None = None
    try:
        context = host.context()
        if clock is not None:
            context = dataclasses.replace(
                context,
                flush_timeout_ms=DEFAULT_FLUSH_TIMEOUT_MS * clock.speed,
                clock_watch_ms=DEFAULT_CLOCK_WATCH_MS * clock.speed,
            )
        plugin = install_schedule(context)
        where = "a temporary store" if store is not None else visible(str(data_dir))
        out.line("host", f"EmbeddedHost on {where}; Schedule installed")
        try:
            session = host.sessions.open(session_id)
        except (SessionError, StoreError) as error:
            raise StoreUnavailable(str(error)) from None
        events = len(session.events)
        if events:
            out.line("host", f"resumed session {session_id} from the store ({events} events)")
            folded = fold_schedule_events(session.events, session.header.seed_length or 0)
            now = host.clock()
            for record in folded.active:
                view = schedule_view(record, now)
                out.line(
                    "host",
                    f"in its log: {visible(str(view['id']))} is active, state {view['state']}",
                )
        else:
            out.line("host", f"created session {session_id}")
        model = ScriptedModel(agent_id, out, {step.user: step for step in steps}, clock=host.clock)
        model.watch = LogWatch(session, out)
        out.line("host", f"spawning root agent {agent_id} with the scripted model")
        agent = host.spawn_root(session=session, model=model, agent_id=agent_id)
    except BaseException as error:
        close_host(host, plugin, failing=error)
        raise
    return _Live(host, plugin, agent, model)


def _stop(live: _Live, failing: BaseException | None = None) -> None:
    close_host(live.host, live.plugin, failing=failing)


def _say(live: _Live, step: Step, out: Transcript) -> dict[str, Any]:
    out.line("user", step.user)
    before = len(live.model.results)
    live.agent.prompt(step.user)
    settle(live.plugin, live.agent)
    if len(live.model.results) != before + 1:
        raise CommandFailed(f"the model did not answer {step.user!r}")
    value = live.model.results[-1]
    if "code" in value:
        raise CommandFailed(f"{step.tool} failed: {present_value(value)}")
    return value


def run_demo(data_dir: Path, timing: DemoTiming, *, fast: bool) -> None:
    """Run the whole demo, printing its transcript; raises :class:`CommandFailed` on failure."""
    started = time.monotonic()
    started_ms = wall_clock_ms()
    out = Transcript(started)
    session_id = f"demo-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:4]}"
    every_session = f"{session_id}-every"
    mode = "fast mode" if fast else "normal mode; --fast for a quicker run"
    out.plain(f"dsh-schedule demo ({mode}): takes about {timing.estimate} seconds.")
    out.plain(f"data dir: {visible(str(data_dir))}")
    out.plain(f"store:    {visible(describe_store(data_dir))}")
    out.plain(
        f"session:  {session_id} (and {every_session} for the repeating reminders, on a fast "
        "clock in a temporary store that is removed afterwards: only the first is kept)"
    )
    out.plain(f"started:  {format_ms(started_ms)} (times below are seconds since start)")
    steps = _steps(timing, started_ms)

    out.heading("1. A host starts; Schedule is installed; a root agent gets the tools")
    live = _start(data_dir, session_id, "agent-1", steps, out)
    try:
        settle(live.plugin, live.agent)
        tools = ", ".join(tool.name for tool in live.host.tools.tools_for(live.agent))
        out.line("host", f"{live.agent.id} is live; its tools: {tools}")

        out.heading("2. The user asks for reminders; the model calls the real tools")
        created = [_say(live, step, out) for step in steps[:3]]
        _say(live, steps[3], out)
        _say(live, steps[4], out)
        remaining = _say(live, steps[5], out)
        on_time, pending = created[0], created[2]
        if [v["id"] for v in remaining.get("schedules", [])] != [on_time["id"], pending["id"]]:
            raise CommandFailed(f"unexpected reminders after the deletion: {remaining}")

        out.heading(f"3. {on_time['id']} comes due while the host is running")
        due = _target(on_time)
        _wait_for_reminder(live.model, on_time["id"], due, timing, out)
        settle(live.plugin, live.agent)
        live.show_log()
        if wall_clock_ms() >= _target(pending):
            raise CommandFailed(
                f"{pending['id']} came due before the shutdown; the machine is too slow "
                "for this timing (try without --fast)"
            )
        got = [r.schedule_id for r in live.model.reminders]
        if got != [on_time["id"]]:
            raise CommandFailed(f"expected only {on_time['id']} before the shutdown, got {got}")

        out.heading(f"4. Shutdown with {pending['id']} pending (due {pending['scheduledAt']})")
        out.line("host", "disposing the Schedule plugin and closing the host ...")
    except BaseException as error:
        _stop(live, error)
        raise
    _stop(live)
    out.line("host", "closed: no agent, no timer, the store is closed")

    out.heading("5. Meanwhile: repeating reminders (every, cron), on a compressed clock")
    every, cron, every_log = _run_every(data_dir, every_session, timing, out)
    out.line("host", f"back to {session_id}: its host stays down until {pending['id']} is overdue")
    _wait_downtime(_target(pending), pending["id"], timing, out)
    out.line("host", f"{pending['id']} is now overdue and nobody was running to deliver it")

    out.heading("6. Restart: a new host on the same store resumes the first session")
    live = _start(data_dir, session_id, "agent-2", steps, out)
    try:
        _wait_for_reminder(live.model, pending["id"], _target(pending), timing, out)
        settle(live.plugin, live.agent)
        live.show_log()
        final = _say(live, steps[5], out)
        got = [r.schedule_id for r in live.model.reminders]
        if got != [pending["id"]]:
            raise CommandFailed(f"expected {pending['id']} exactly once after restart, got {got}")
        if final.get("schedules"):
            raise CommandFailed(f"reminders still active at the end: {final}")
        later = _say(live, steps[6], out)
        out.line("host", "the user closes the chat: the host shuts down, nobody has the session")
    except BaseException as error:
        _stop(live, error)
        raise
    _stop(live)

    out.heading(f"7. No chat is open: a serve host delivers {later['id']} when it is due")
    _serve_one(data_dir, session_id, later, timing, out)

    out.heading("8. The durable log: every schedule/change record of both sessions")
    dispatched = _show_log(_stored(data_dir, session_id), out)
    if dispatched != [on_time["id"], pending["id"], later["id"]]:
        raise CommandFailed(
            f"expected one dispatch each of {on_time['id']}, {pending['id']} and {later['id']}:"
            f" {dispatched}"
        )
    out.plain(
        f"stream check: valid; {on_time['id']} (after), {pending['id']} (at) and "
        f"{later['id']} (after, delivered by serve) were each dispatched exactly once."
    )
    out.plain("")
    out.plain(f"({every_session}, as read from its temporary store before it was removed)")
    dispatched = _show_log(every_log, out)
    if dispatched != [every, every, cron]:
        raise CommandFailed(f"expected two dispatches of {every}, then one of {cron}: {dispatched}")
    out.plain(
        f"stream check: valid; {every} (every) was dispatched twice, then deleted; "
        f"{cron} (cron) once, then deleted."
    )
    out.plain("")
    out.plain(
        "Result: after, at, every and cron reminders were created, listed and deleted; "
        "delivered on time, repeatedly, on a calendar rule, after a restart (overdue, exactly "
        f"once) and with the chat closed (by serve) in {time.monotonic() - started:.1f} s."
    )
    again = ["dsh-schedule", "inspect", "--session", session_id, *location_args()]
    out.plain(f"Look again with: {shell_words(again)}")


def _serve_one(
    data_dir: Path, session_id: str, view: dict[str, Any], timing: DemoTiming, out: Transcript
) -> None:
    """Run a serve host (for this session only) until it presented ``view``'s reminder."""
    due = _target(view)
    arrived = threading.Event()
    presented: list[Presented] = []

    def on_presented(item: Presented) -> None:
        presented.append(item)
        arrived.set()

    server = Server(
        data_dir,
        policy=WakePolicy(quiet_period_ms=500),
        on_presented=on_presented,
        echo=lambda text: out.line("serve", text),
        accept=lambda candidate: candidate == session_id,
        program="demo",
    )
    server.start()
    out.line(
        "host",
        f"dsh-schedule serve runs on the store; it never had {session_id} open and wakes it "
        "from the store's due index",
    )
    try:
        deadline = time.monotonic() + max(0, due - wall_clock_ms()) / 1000 + GRACE_SECONDS
        while not arrived.wait(timing.tick):
            if time.monotonic() > deadline:
                raise CommandFailed(f"{view['id']} was not delivered by serve in time")
            remaining = (due - wall_clock_ms()) / 1000
            state = f"due in {remaining:.1f} s" if remaining > 0 else "overdue, waking"
            out.line("wait", f"... no chat open; {view['id']} is {state}")
    finally:
        server.stop()
    got = [(p.session_id, p.schedule_id) for p in presented]
    if got != [(session_id, view["id"])]:
        raise CommandFailed(f"expected serve to present {view['id']} once, got {got}")
    late = (parse_instant(presented[0].presented_at) - due) / 1000
    out.line(
        "host",
        f"serve woke the session, its owner delivered {view['id']} ({late:.3f} s after its "
        "due time), the turn presented it; serve let the session go and stopped",
    )


def _run_every(
    data_dir: Path, session_id: str, timing: DemoTiming, out: Transcript
) -> tuple[str, str, StoredSession]:
    """A host on a compressed clock: an every reminder delivered twice, then deleted; then a
    daily cron reminder delivered once, listed with its next day's time, then deleted.

    It runs on a temporary store, removed at the end, so the times of its fast
    clock (dispatches minutes ahead of the real time) never reach the user's
    store. Returns the two reminders' ids and the session as it was stored.
    """
    with tempfile.TemporaryDirectory(prefix="dsh-schedule-demo-") as folder:
        every, cron = _run_every_in(Path(folder), session_id, timing, out)
        with contextlib.closing(open_store(store_path(Path(folder)), read_only=True)) as reader:
            stored = reader.load(session_id)
    out.line("host", "its temporary store is removed: your store holds none of its times")
    if stored is None:
        raise CommandFailed(f"session {session_id} is not in its temporary store")
    return every, cron, stored


def _run_every_in(
    folder: Path, session_id: str, timing: DemoTiming, out: Transcript
) -> tuple[str, str]:
    """:func:`_run_every` on the temporary data directory ``folder``."""
    clock = CompressedClock(timing.speed)
    timers = CompressedTimers(timing.speed)
    interval = EVERY_SECONDS / timing.speed
    out.line(
        "host",
        f"a second host, for session {session_id}, on a temporary store of its own (removed "
        f"when this part ends); every_seconds is at least {EVERY_SECONDS}, so this host's "
        f"clock runs {timing.speed}x faster than real time ({EVERY_SECONDS} s of it pass in "
        f"{interval:g} s; its times and waits below are on that clock, as is the cron "
        "reminder's Shanghai time)",
    )
    steps = _every_steps()
    try:
        live = _start(
            folder,
            session_id,
            "agent-3",
            steps,
            out,
            clock=clock,
            timers=timers,
            store=store_path(folder),
        )
        try:
            settle(live.plugin, live.agent)
            created = _say(live, steps[0], out)
            every = str(created["id"])
            first = _target(created)
            for count, due in ((1, first), (2, first + EVERY_SECONDS * 1000)):
                _wait_for_reminder(
                    live.model, every, due, timing, out, count=count, speed=timing.speed
                )
                settle(live.plugin, live.agent)
                live.show_log()
            occurrences = [parse_instant(r.occurrence_at) for r in live.model.arrived(every)]
            if len(occurrences) != 2 or not first <= occurrences[0] < occurrences[1]:
                raise CommandFailed(f"expected two occurrences of {every}, got {occurrences}")
            if any((at - first) % (EVERY_SECONDS * 1000) for at in occurrences):
                raise CommandFailed(f"{every} was delivered off its grid: {occurrences}")
            _say(live, steps[1], out)
            cron = _run_cron(live, steps[2], timing, out)
            _say(live, steps[3], out)
            final = _say(live, steps[4], out)
            if final.get("schedules"):
                raise CommandFailed(f"reminders still active at the end: {final}")
            out.line("host", "shutting down the second host")
        except BaseException as error:
            _stop(live, error)
            raise
        _stop(live)
    finally:
        timers.close()
    return every, cron


def _run_cron(live: _Live, listing: Step, timing: DemoTiming, out: Transcript) -> str:
    """Create the daily cron reminder, wait for its delivery, list it (``listing``) with its
    next target; its id."""
    step, first = _cron_step(live.host.clock())
    live.model.steps[step.user] = step  # the agent is idle: it reads the script on the next turn
    created = _say(live, step, out)
    cron = str(created["id"])
    if _target(created) != first:
        raise CommandFailed(
            f"{cron} was created after {format_ms(first)} had passed; the machine is too slow "
            "for this timing (try without --fast)"
        )
    _wait_for_reminder(live.model, cron, first, timing, out, speed=timing.speed)
    settle(live.plugin, live.agent)
    live.show_log()
    occurrences = [parse_instant(r.occurrence_at) for r in live.model.arrived(cron)]
    if occurrences != [first]:
        raise CommandFailed(f"expected {cron} once, at {format_ms(first)}: {occurrences}")
    listed = _say(live, listing, out)
    views = [v for v in listed.get("schedules", []) if v.get("id") == cron]
    if [_target(v) for v in views] != [first + DAY_MS]:
        raise CommandFailed(f"expected {cron} next at {format_ms(first + DAY_MS)}: {listed}")
    out.line("host", f"{cron} moved on to the same {AT_ZONE} time tomorrow")
    return cron


def _target(view: dict[str, Any]) -> int:
    return parse_instant(view["scheduledAt"])


def _stored(data_dir: Path, session_id: str) -> StoredSession:
    """A session as the user's store holds it."""
    with open_store_readonly(data_dir, verb="show") as store:
        stored = store.load(session_id)
    if stored is None:
        raise CommandFailed(f"session {session_id} is not in the store")
    return stored


def _show_log(stored: StoredSession, out: Transcript) -> list[str]:
    """Print a session's stored ``schedule/change`` records and check them; its dispatched ids."""
    session_id = stored.header.id
    changes = [e for e in stored.events if e.type == SCHEDULE_CHANGE_TYPE]
    out.plain(
        f"{session_id}: {len(stored.events)} events stored, {len(changes)} of them "
        "schedule/change (the rest are the conversation's message events):"
    )
    for event in changes:
        out.plain(f"  #{event.seq:<3} {format_ms(event.time)}  {_describe_change(event.data)}")
    try:
        validate_schedule_stream(stored.events, stored.header.seed_length)
    except ScheduleLogError as error:
        raise CommandFailed(f"the stored stream is invalid: {error.message}") from None
    return [e.data["id"] for e in changes if e.data.get("operation") == "dispatch"]


@click.command(
    "demo",
    short_help="Start here: a scripted agent uses the tools and restarts.",
    epilog=(
        "\b\nThe run creates a fresh session demo-<UTC time>-<hex> in the data directory,\n"
        "so it can be repeated; inspect it afterwards with `dsh-schedule inspect`. The\n"
        "repeating reminders' session (<that>-every, on the fast clock) runs in a\n"
        "temporary store removed afterwards: no time of that clock reaches your store.\n\n"
        + exit_codes_help(
            (0, "every step happened: each reminder arrived once, on time or after the restart"),
            (
                1,
                "a step did not happen (a tool failed, a reminder did not arrive), "
                "or an internal error",
            ),
            (2, WRITE_STORE_EXIT),
        )
    ),
)
@click.option(
    "--fast",
    is_flag=True,
    help=f"Short delays ({FAST.on_time}-{FAST.pending} s, the repeating reminders on a clock "
    f"{FAST.speed}x faster than real time): about {FAST.estimate} s in total instead of about "
    f"{NORMAL.estimate} s.",
)
@location_options
@allow_shared_store_option
def demo_command(fast: bool) -> None:
    """Watch a scripted model create, list and delete reminders, and receive them.

    Runs an embedded host on the real store and wall clock: after and at
    reminders come due and arrive as [SCHEDULE REMINDER] follow-up turns; the
    host is shut down with the at reminder pending, restarted after it is
    overdue, and the overdue reminder is delivered exactly once. Meanwhile a
    second host shows a repeating (every) reminder delivered twice as
    [SCHEDULE REMINDER BATCH] turns, then a daily calendar (cron) reminder in
    Shanghai time delivered once; every_seconds is at least 300, so that host
    runs on a clock many times faster than real time, and says so. Last,
    a reminder is set and the chat closed: a serve host that never had the
    session open delivers it. Exits 1 if any of that does not happen.
    """
    try:
        run_demo(resolve_data_dir(), FAST if fast else NORMAL, fast=fast)
    except TimeoutError as error:
        raise CommandFailed(f"the demo timed out: {error}") from None
    finally:
        with contextlib.suppress(Exception):
            pykka.ActorRegistry.stop_all()
