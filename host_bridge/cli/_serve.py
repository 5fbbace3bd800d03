"""``dsh-schedule serve``: a long-lived host that delivers reminders of sessions nobody has open.

It opens the store (``--data`` or ``--store``) and delivers reminders of cold
sessions that came due in *cold passes*
(:class:`~host_bridge.embedded.cold.ColdActivation`): due sessions are taken
in batches, decided from their schedule checkpoints, their inbox entries and
dispatches written many sessions to a commit, and their reminder turns run
with a *notifier* without an agent each (a session owing a turn or holding a
person's message gets a live agent instead). Each reminder the turn presents
is printed (one line, escaped like every other CLI output) and, with
``--notify-command``, handed to that command as JSON on stdin. The turn records
the reminder as presented; the notification is a side effect of the turn, so
a command that fails is reported and serving goes on, and the reminder counts
as delivered once its turn completed (no lost or repeated dispatch because of
the command). The command runs in its own process group, stopped whole when it
overruns ``--notify-timeout``.

SIGTERM or SIGINT stops it (:meth:`Server.stop`): no session is woken any
more, turns in flight (their notify commands included) may finish within
``--stop-timeout`` and their completions are written; a turn still running
then is *cut* (its notify command's process group is stopped) and recorded as
unfinished, so its reminders are presented again at the next start. Each such
reminder is named on stderr, and the exit status is 3.

The JSON a notify command reads (one object per reminder, then EOF)::

    {"session_id": "chat", "schedule_id": "schedule-1", "prompt": "stretch",
     "occurrence_at": "2026-08-05T12:00:00.000Z", "presented_at": "2026-08-05T12:00:00.212Z"}
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import click

from actors._contract import Agent
from host_bridge._plugin import SchedulePlugin, WakePolicy, install_schedule
from host_bridge.aio import LoopThread, TurnRunner, TurnRunnerImportError, import_turn_runner
from host_bridge.aio._turn import LoopTurns
from host_bridge.cli._common import (
    SIGNAL_POLL_S,
    WRITE_STORE_EXIT,
    Seconds,
    allow_shared_store_option,
    close_host,
    describe_store,
    exit_codes_help,
    format_ms,
    location_options,
    open_host,
    resolve_data_dir,
    show_text,
    visible,
)
from host_bridge.embedded.agents import Turn, TurnInterrupted
from host_bridge.embedded.cold import ColdTurn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import SessionEvent
from messages import SCHEDULE_CHANGE_TYPE, ScheduleLogError, schedule_reminder_presentation

__all__ = [
    "EXIT_CUT",
    "CutTurn",
    "NotifierModel",
    "Presented",
    "RunnerModel",
    "Server",
    "WarningsOnStderr",
    "receipts_at",
    "reminders_of",
    "serve_command",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

NOTIFY_TIMEOUT_SECONDS = 30.0
"""How long a notify command may run before it is stopped (and reported as failed)."""

KILL_GRACE_SECONDS = 1.0
"""How long a stopped notify command's process group has between SIGTERM and SIGKILL."""

CUT_GRACE_SECONDS = 5.0
"""How long a stop waits, after cutting, for the cut turns to end (they end at once)."""

EXIT_CUT = 3
"""``serve``'s exit status when its stop cut turns whose reminders will be presented again."""


@dataclass(frozen=True)
class Presented:
    """One reminder a notifier turn presented."""

    session_id: str
    schedule_id: str
    prompt: str
    occurrence_at: str
    presented_at: str

    @classmethod
    def of(cls, session_id: str, receipt: dict[str, str], presented_at: str) -> Presented:
        """The item for one receipt of :func:`reminders_of`."""
        return cls(
            session_id,
            receipt["scheduleId"],
            receipt["prompt"],
            receipt["occurrenceAt"],
            presented_at,
        )

    def to_json(self) -> dict[str, str]:
        """The object a notify command reads."""
        return {
            "session_id": self.session_id,
            "schedule_id": self.schedule_id,
            "prompt": self.prompt,
            "occurrence_at": self.occurrence_at,
            "presented_at": self.presented_at,
        }


def reminders_of(turn: Turn) -> list[dict[str, str]]:
    """The receipts of the reminders a turn's message delivered, read from the session log.

    Empty for messages that are not reminders (see :func:`receipts_at`).
    """
    if turn.message.source.get("plugin") != "tool-schedule" or turn.inbox_seq is None:
        return []
    session = turn.agent.session
    return receipts_at(session.events, turn.inbox_seq, session.header.seed_length or 0)


def receipts_at(
    events: Sequence[SessionEvent], inbox_seq: int, seed: int
) -> list[dict[str, str]]:
    """The receipts of the reminders whose inbox entry is at ``inbox_seq`` of ``events``.

    A reminder's inbox entry is followed in the log by its ``dispatch`` records
    (one per member of a batch), written in the same commit; each receipt comes
    from :func:`messages.schedule_reminder_presentation` (``seed``: the session's
    seed length). Empty when no dispatch follows (not a reminder's entry).
    """
    receipts: list[dict[str, str]] = []
    for event in events[inbox_seq + 1 :]:
        if event.type != SCHEDULE_CHANGE_TYPE or not isinstance(event.data, dict):
            break
        if event.data.get("operation") != "dispatch":
            break
        try:
            receipt = schedule_reminder_presentation(events, event.seq, seed)
        except ScheduleLogError:
            break
        if receipt is None:
            break
        receipts.append(receipt)
    return receipts


@dataclass(frozen=True)
class CutTurn:
    """A reminder turn a stop cut short: its reminders are presented again at the next start.

    ``started`` tells whether the turn had begun presenting (a notify command
    was running or done) or was cut before it presented anything.
    """

    session_id: str
    schedule_ids: tuple[str, ...]
    started: bool


class _CutLog:
    """The turns a stop cut, noted by a model of activated sessions as they end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cut: list[CutTurn] = []

    @property
    def cut(self) -> tuple[CutTurn, ...]:
        """The turns cut since the stop began, in the order they ended."""
        with self._lock:
            return tuple(self._cut)

    def _note_cut(self, session_id: str, receipts: Sequence[dict[str, str]], started: bool) -> None:
        ids = tuple(receipt["scheduleId"] for receipt in receipts)
        with self._lock:
            self._cut.append(CutTurn(session_id, ids, started))


class NotifierModel(_CutLog):
    """The model of activated sessions: presents each reminder to ``present`` and records it.

    Returns the assistant reply the turn records (``Reminder presented: …``);
    other messages (a person's prompt re-queued from a crash) are not answered.
    Once ``stopping`` is set, a turn that starts, or whose ``present`` raises
    :class:`TurnInterrupted`, is cut: it raises :class:`TurnInterrupted` (so its
    completion is not recorded) and is listed in :attr:`cut`.
    """

    def __init__(
        self,
        present: Callable[[Presented], None],
        clock: Callable[[], int],
        *,
        stopping: threading.Event | None = None,
    ) -> None:
        super().__init__()
        self._present = present
        self._clock = clock
        self._stopping = stopping if stopping is not None else threading.Event()

    def __call__(self, turn: Turn) -> str | None:
        """Run one turn of a live agent."""
        receipts = reminders_of(turn)
        if not receipts:
            _log.info("a message that is not a reminder reached the notifier; not answered")
            return None
        return self._present_all(turn.agent.session.id, receipts)

    def cold(self, turn: ColdTurn) -> str | None:
        """Run one reminder turn of a cold delivery (no live agent)."""
        return self._present_all(turn.session_id, [r.receipt() for r in turn.reminders])

    def _present_all(self, session_id: str, receipts: Sequence[dict[str, str]]) -> str:
        """Present every receipt; the reply the turn records."""
        started = False
        try:
            if self._stopping.is_set():
                raise TurnInterrupted("the host is stopping")
            now = format_ms(self._clock())
            for receipt in receipts:
                started = True
                self._present(Presented.of(session_id, receipt, now))
        except TurnInterrupted:
            self._note_cut(session_id, receipts, started)
            raise
        prompts = "; ".join(receipt["prompt"] for receipt in receipts)
        return f"Reminder presented: {prompts}"


class RunnerModel(_CutLog):
    """The model of activated sessions when the host gives its own turn runner.

    Each turn runs with the runner on ``serve``'s loop (see
    :class:`~host_bridge.aio._turn.LoopTurns`); once it returned, the reminders
    it delivered are handed to ``present`` (printed). :meth:`cut_running`
    cancels the turns still running at a stop: they raise
    :class:`TurnInterrupted`, are listed in :attr:`cut` (a person's unfinished
    message taken over at activation too) and run again at the next start.
    A runner that raises is reported in one line (its exception's type, the
    session and the reminders); the turn is recorded as failed.
    """

    def __init__(
        self, turns: LoopTurns, present: Callable[[Presented], None], clock: Callable[[], int]
    ) -> None:
        super().__init__()
        self._turns = turns
        self._present = present
        self._clock = clock

    def cut_running(self) -> None:
        """Cancel the running turns and let no new one start."""
        self._turns.cut()

    def __call__(self, turn: Turn) -> str | None:
        """Run one turn with the runner, then present the reminders it delivered."""
        receipts = reminders_of(turn)
        session_id = turn.agent.session.id
        try:
            reply = self._turns(turn)
        except TurnInterrupted:
            self._note_cut(session_id, receipts, True)
            raise
        except Exception as error:
            ids = ", ".join(visible(receipt["scheduleId"]) for receipt in receipts)
            _log.error(
                "the turn runner failed (%s) in session %s%s; the turn is recorded as failed "
                "and not run again",
                type(error).__name__,
                visible(session_id),
                f" presenting reminder {ids}" if ids else "",
            )
            raise
        now = format_ms(self._clock())
        for receipt in receipts:
            self._present(Presented.of(session_id, receipt, now))
        return reply


class Server:
    """A running ``serve``: an activating host, the plugin, the printer and the notifier.

    :meth:`start` opens everything; :meth:`stop` stops waking sessions, lets
    turns in flight finish, cuts the rest and closes the host (it raises
    :class:`StoreUnavailable` when events could not be written). Usable from
    other code (the demo runs one in-process, for its own session only:
    ``accept``). It keeps no per-reminder state: what was presented is in the
    store, ``on_presented`` hears of each reminder and :attr:`presented_count`
    counts them. With ``turn_runner`` (the host's async turn, see
    :mod:`host_bridge.aio`) the reminder turns run with it, on a loop of the
    server's own, instead of the notifier; the deliveries are still written in
    cold passes, and their turns run on live agents (a runner's turn may call
    the tools, which need the session's owner). ``program`` is what the store's
    holder records name (the demo's server says ``demo``).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        notify_command: str | None = None,
        notify_timeout: float = NOTIFY_TIMEOUT_SECONDS,
        policy: WakePolicy | None = None,
        on_presented: Callable[[Presented], None] | None = None,
        echo: Callable[[str], None] = click.echo,
        accept: Callable[[str], bool] | None = None,
        turn_runner: TurnRunner | None = None,
        program: str = "serve",
    ) -> None:
        if turn_runner is not None and notify_command is not None:
            raise ValueError("a turn runner and a notify command cannot be combined")
        self._program = program
        self._turn_runner = turn_runner
        self._loop: LoopThread | None = None
        self._data_dir = data_dir
        self._notify_command = notify_command
        self._notify_timeout = notify_timeout
        self._policy = policy
        self._on_presented = on_presented
        self._echo = echo
        self._accept = accept
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._notifying: dict[subprocess.Popen[bytes], bool] = {}  # running -> killed by a stop
        self._model: NotifierModel | RunnerModel | None = None
        self.presented_count = 0
        self.notify_failures = 0
        self.host: EmbeddedHost | None = None
        self.plugin: SchedulePlugin | None = None

    def start(self) -> None:
        """Open the host on the store, enable activation, install Schedule."""
        host = open_host(self._data_dir, program=self._program)
        try:
            if self._turn_runner is not None:
                self._loop = LoopThread()
                turns = LoopTurns(self._turn_runner, self._loop.loop)
                self._model = RunnerModel(turns, self._present, host.clock)
                host.enable_activation(model=self._model, accept=self._accept, cold=True)
            else:
                notifier = NotifierModel(self._present, host.clock, stopping=self._stopping)
                self._model = notifier
                host.enable_activation(
                    model=notifier, accept=self._accept, cold=True, cold_turns=notifier.cold
                )
            self.plugin = install_schedule(host.context(), wake_policy=self._policy)
        except BaseException as error:
            close_host(host, failing=error)
            self._stop_loop()
            raise
        self.host = host

    def stop(self, timeout: float = 10.0) -> tuple[CutTurn, ...]:
        """Stop serving within about ``timeout`` seconds; the turns that had to be cut.

        1. Dispose the plugin: no session is woken and no reminder delivered any more.
        2. Wait until ``timeout`` for the agents to be idle: turns in flight,
           their notify commands included, finish and record their completion.
        3. Cut what still runs: new turns end at once, running notify commands
           are stopped (their whole process group); those turns record no
           completion, so their reminders are presented again at the next start.
        4. Close the host: every queued event, completions included, is written.
        """
        host, self.host = self.host, None
        if host is None:
            return ()
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        try:
            if self.plugin is not None:
                try:
                    self.plugin.dispose().result(timeout=left())
                except TimeoutError:
                    _log.warning("the Schedule plugin did not finish disposing in time")
                except Exception:  # disposing reports, never stops the stop; the host closes
                    _log.exception("disposing the Schedule plugin failed")
            busy = _not_idle(host.agents.roots(), left)
            self._cut_turns()  # always: once the wait is over, no notify command starts
            if busy:
                cut_deadline = time.monotonic() + CUT_GRACE_SECONDS
                still = _not_idle(busy, lambda: max(0.0, cut_deadline - time.monotonic()))
                if still:
                    _log.error("%d turn(s) did not end after they were cut", len(still))
        finally:  # the plugin's dispose was awaited and reported above
            try:
                close_host(host, None, timeout=max(0.1, left()))
            finally:
                self._stop_loop(max(0.1, left()))
        return () if self._model is None else self._model.cut

    def _stop_loop(self, timeout: float = 1.0) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and not loop.stop(timeout):
            _log.error("a turn runner task ignored its cancellation; exiting without it")

    def _cut_turns(self) -> None:
        """Let no notify command start, and stop the running ones (their process groups)."""
        with self._lock:
            self._stopping.set()
            running = list(self._notifying)
            for process in running:
                self._notifying[process] = True
        if isinstance(self._model, RunnerModel):
            self._model.cut_running()
        _stop_groups(running)

    def _present(self, item: Presented) -> None:
        """A notifier turn presented ``item``: print it, run the notify command."""
        with self._lock:
            self.presented_count += 1
            self._echo(
                f"{item.presented_at}  reminder {visible(item.schedule_id)} of session "
                f"{visible(item.session_id)} (due {visible(item.occurrence_at)}): "
                f"{show_text(item.prompt)}"
            )
        if self._notify_command is not None:
            self._notify(item, self._notify_command)
        if self._on_presented is not None:
            self._on_presented(item)

    def _notify(self, item: Presented, command: str) -> None:
        """Run the notify command with ``item`` as JSON on stdin; a failure is reported only.

        Raises :class:`TurnInterrupted` when a stop cut the command (or came
        before it started): the turn is then not complete.
        """
        payload = (json.dumps(item.to_json(), ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            if self._stopping.is_set():
                raise TurnInterrupted("the host is stopping")
            try:
                process = subprocess.Popen(
                    command,
                    shell=True,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # its own process group, stopped whole
                )
            except OSError as error:
                reason = error.strerror or type(error).__name__
                started: subprocess.Popen[bytes] | None = None
            else:
                started = process
                self._notifying[process] = False
        problem = None if started is not None else f"could not be started ({reason})"
        if started is not None:
            problem = self._wait_notified(started, payload)
        if problem is not None:
            with self._lock:
                self.notify_failures += 1
            _log.warning("the notify command %s for %s", problem, item.schedule_id)
            click.echo(
                f"notify: the command {problem} for {visible(item.schedule_id)} of session "
                f"{visible(item.session_id)}; the reminder was presented, serving goes on",
                err=True,
            )

    def _wait_notified(self, process: subprocess.Popen[bytes], payload: bytes) -> str | None:
        """Feed ``payload`` to a started notify command and wait; what went wrong, if anything."""
        problem: str | None = None
        try:
            try:
                process.communicate(payload, timeout=self._notify_timeout)
            except subprocess.TimeoutExpired:
                _stop_groups([process])
                problem = f"did not finish within {self._notify_timeout:g} s and was stopped"
        finally:
            with self._lock:
                cut = self._notifying.pop(process, False)
        if cut:
            raise TurnInterrupted("the stop cut the notify command")
        if problem is None and process.returncode != 0:
            problem = f"exited with status {process.returncode}"
        return problem


def _not_idle(agents: Sequence[Agent], left: Callable[[], float]) -> list[Agent]:
    """The ``agents`` not idle by the time ``left()`` runs out (disposed ones count as idle)."""
    busy: list[Agent] = []
    for agent in agents:
        try:
            agent.when_idle().result(timeout=left())
        except TimeoutError:
            busy.append(agent)
        except Exception:  # the agent was disposed meanwhile: it runs nothing more
            continue
    return busy


def _stop_groups(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """Stop each process and everything it started: SIGTERM to every group, one shared
    grace of :data:`KILL_GRACE_SECONDS`, then SIGKILL to every group (what a command
    started may outlive it), so stopping many takes as long as stopping one."""
    for process in processes:
        _signal_group(process, signal.SIGTERM)
    end = time.monotonic() + KILL_GRACE_SECONDS
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, end - time.monotonic()))
    for process in processes:
        _signal_group(process, signal.SIGKILL)
    end = time.monotonic() + KILL_GRACE_SECONDS
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, end - time.monotonic()))


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass  # the group is gone: nothing of it runs any more
    except OSError:
        _log.warning("could not signal the process group of a notify command")


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` while inside (the previous handlers come back after)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class WarningsOnStderr(logging.Handler):
    """Shows the library's warnings and errors on stderr, one line each, while ``serve`` runs.

    Without ``-v`` nothing else is logged, yet an operator must see a full disk
    or a database that went away. Tracebacks are left out (``-v`` logs them);
    the same message is shown again at most once per ``repeat_s`` seconds, with
    how often it came meanwhile.
    """

    def __init__(self, repeat_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(logging.WARNING)
        self._repeat_s = repeat_s
        self._clock = clock
        self._shown: dict[str, tuple[float, int]] = {}  # message -> (shown at, repeats since)

    def emit(self, record: logging.LogRecord) -> None:
        """Print ``record``'s message (escaped) unless it was shown in the last ``repeat_s``."""
        try:
            text = record.getMessage()
        except Exception:  # a bad format string in a log call: show the bare template
            text = str(record.msg)
        now = self._clock()
        with self.lock or contextlib.nullcontext():
            shown = self._shown.get(text)
            if shown is not None and now - shown[0] < self._repeat_s:
                self._shown[text] = (shown[0], shown[1] + 1)
                return
            repeats = 0 if shown is None else shown[1]
            if len(self._shown) > 256:  # keep it bounded: old messages may show again
                self._shown.clear()
            self._shown[text] = (now, 0)
        more = f" (and {repeats} more time(s) since it was last shown)" if repeats else ""
        click.echo(f"serve: {record.levelname.lower()}: {visible(text)}{more}", err=True)


@contextlib.contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    """Route the ``dsh_schedule`` loggers' warnings to stderr unless ``-v`` already logs them."""
    root = logging.getLogger("dsh_schedule")
    if logging.getLogger().isEnabledFor(logging.INFO) and logging.getLogger().handlers:
        yield  # -v or -vv: basicConfig prints everything already
        return
    handler = WarningsOnStderr()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def _report_cut(cut: Sequence[CutTurn], stop_timeout: float) -> None:
    """One stderr line per reminder a stop cut: it will be presented (again) at the next start."""
    for turn in cut:
        why = (
            f"its turn was still running after the stop timeout ({stop_timeout:g} s) and was cut"
            if turn.started
            else "its turn had not started when the stop cut the turns in flight"
        )
        again = "again " if turn.started else ""
        if not turn.schedule_ids:
            click.echo(
                f"cut: a turn of session {visible(turn.session_id)} (not a reminder's) will "
                f"run again at the next start: {why}",
                err=True,
            )
        for schedule_id in turn.schedule_ids:
            click.echo(
                f"cut: reminder {visible(schedule_id)} of session {visible(turn.session_id)} "
                f"will be presented {again}at the next start: {why}",
                err=True,
            )


@click.command(
    "serve",
    short_help="Deliver due reminders of sessions nobody has open, until stopped.",
    epilog=exit_codes_help(
        (0, "stopped by SIGTERM or SIGINT, every turn finished and every event written"),
        (1, "an internal error"),
        (2, WRITE_STORE_EXIT),
        (
            EXIT_CUT,
            "stopped, but turns still running after --stop-timeout were cut: their "
            "reminders (named on stderr) will be presented again at the next start",
        ),
    ),
)
@click.option(
    "--notify-command",
    metavar="CMD",
    default=None,
    help="Shell command run for each presented reminder, with the reminder as one JSON object "
    "on stdin: {session_id, schedule_id, prompt, occurrence_at, presented_at}. It runs in its "
    "own process group. A failing command is reported on stderr; serving goes on.",
)
@click.option(
    "--notify-timeout",
    type=Seconds(min=0, min_open=True),
    default=NOTIFY_TIMEOUT_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="How long a notify command may run; then its whole process group is stopped and "
    "the failure reported (the reminder counts as presented).",
)
@click.option(
    "--quiet-period",
    type=Seconds(min=0),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Let a woken session go once its agent was idle this long with nothing due in it; "
    "a `chat` that asks for the session gets it as soon as its turns are done.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Sessions woken at the same time.",
)
@click.option(
    "--stop-timeout",
    type=Seconds(min=0),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a stop waits for turns in flight (notify commands included) to finish; "
    "turns still running then are cut and their reminders presented again at the next start.",
)
@click.option(
    "--turn-runner",
    metavar="MODULE:ATTR",
    default=None,
    help="Run each reminder's turn with this async function of yours "
    "(async def run_turn(turn) -> str | None, as for the asyncio host) instead of the built-in "
    "notifier; the current directory is importable. Cannot be combined with --notify-command.",
)
@location_options
@allow_shared_store_option
def serve_command(
    *,
    turn_runner: str | None,
    notify_command: str | None,
    notify_timeout: float,
    quiet_period: float,
    concurrency: int,
    stop_timeout: float,
) -> None:
    """Wake sessions whose reminders came due while nobody had them open, and deliver them.

    Runs until SIGTERM or SIGINT. Each delivered reminder is printed on one line;
    with --notify-command it is also handed to that command as JSON on stdin (to
    wire it to a desktop notification or a chat webhook). Several serve processes
    may share one store: a session is woken by one of them at a time. Warnings
    (a full disk, a database that went away) are shown on stderr.
    """
    if turn_runner is not None and notify_command is not None:
        raise click.UsageError("--turn-runner and --notify-command cannot be combined")
    runner: TurnRunner | None = None
    if turn_runner is not None:
        try:
            runner = import_turn_runner(turn_runner)
        except TurnRunnerImportError as error:
            raise click.BadParameter(str(error), param_hint="--turn-runner") from None
    data_dir = resolve_data_dir()
    policy = WakePolicy(max_concurrent=concurrency, quiet_period_ms=int(quiet_period * 1000))
    server = Server(
        data_dir,
        notify_command=notify_command,
        notify_timeout=notify_timeout,
        policy=policy,
        turn_runner=runner,
    )
    stop = threading.Event()
    cut: tuple[CutTurn, ...] = ()
    with _stop_on_signals(stop), _warnings_on_stderr():
        server.start()
        click.echo(
            f"serving {visible(describe_store(data_dir))}: reminders of sessions nobody has "
            "open are delivered here (SIGTERM or Ctrl-C stops)"
        )
        try:
            # A signal the kernel hands to another thread does not interrupt a wait
            # without a timeout, and Python runs its handler only on the main
            # thread between bytecodes: so wake up now and then to let it run.
            while not stop.wait(SIGNAL_POLL_S):
                pass
        finally:
            click.echo(
                f"stopping: no session is woken any more; turns in flight may finish "
                f"within {stop_timeout:g} s, then every event is written"
            )
            cut = server.stop(timeout=stop_timeout)
    _report_cut(cut, stop_timeout)
    click.echo(f"stopped; {server.presented_count} reminder(s) presented")
    if cut:
        raise click.exceptions.Exit(EXIT_CUT)
