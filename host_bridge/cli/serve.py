"""``dsh-schedule serve``: a long-lived host that delivers reminders of sessions nobody has open.

It opens the store (``--data`` or ``--store``), lets Schedule activate cold
sessions whose reminders came due (:class:`~host_bridge.embedded.activation.EmbeddedActivation`)
and runs their turns with a *notifier* model: each reminder the turn presents
is printed (one line, escaped like every other CLI output) and, with
``--notify-command``, handed to that command as JSON on stdin. The turn records
the reminder as presented; the notification is a side effect of the turn, so
a command that fails is reported and serving goes on, and the reminder counts
as delivered once its turn completed (no lost or repeated dispatch because of
the command). SIGTERM or SIGINT stops it: activations in flight settle, the
plugin is disposed and every queued event is written (bounded by ``--stop-timeout``).

The JSON a notify command reads (one object per reminder, then EOF)::

    {"session_id": "chat", "schedule_id": "schedule-1", "prompt": "stretch",
     "occurrence_at": "2026-08-05T12:00:00.000Z", "presented_at": "2026-08-05T12:00:00.212Z"}
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import click

from host_bridge.cli.common import (
    WRITE_STORE_EXIT,
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
from host_bridge.embedded.agents import Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.plugin import SchedulePlugin, WakePolicy, install_schedule
from messages import SCHEDULE_CHANGE_TYPE, ScheduleLogError, schedule_reminder_presentation

__all__ = ["NotifierModel", "Presented", "Server", "serve_command"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

NOTIFY_TIMEOUT_SECONDS = 30.0
"""How long a notify command may run before it is stopped (and reported as failed)."""


@dataclass(frozen=True)
class Presented:
    """One reminder a notifier turn presented."""

    session_id: str
    schedule_id: str
    prompt: str
    occurrence_at: str
    presented_at: str

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

    A reminder's inbox entry is followed in the log by its ``dispatch`` records
    (one per member of a batch), written in the same commit; each receipt comes
    from :func:`messages.schedule_reminder_presentation`. Empty for other messages.
    """
    if turn.message.source.get("plugin") != "tool-schedule" or turn.inbox_seq is None:
        return []
    session = turn.agent.session
    events = session.events
    seed = session.header.seed_length or 0
    receipts: list[dict[str, str]] = []
    for event in events[turn.inbox_seq + 1 :]:
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


class NotifierModel:
    """The model of activated sessions: presents each reminder to ``present`` and records it.

    Returns the assistant reply the turn records (``Reminder presented: …``);
    other messages (a person's prompt re-queued from a crash) are not answered.
    """

    def __init__(self, present: Callable[[Presented], None], clock: Callable[[], int]) -> None:
        self._present = present
        self._clock = clock

    def __call__(self, turn: Turn) -> str | None:
        """Run one turn."""
        receipts = reminders_of(turn)
        if not receipts:
            _log.info("a message that is not a reminder reached the notifier; not answered")
            return None
        now = format_ms(self._clock())
        for receipt in receipts:
            self._present(
                Presented(
                    turn.agent.session.id,
                    receipt["scheduleId"],
                    receipt["prompt"],
                    receipt["occurrenceAt"],
                    now,
                )
            )
        prompts = "; ".join(receipt["prompt"] for receipt in receipts)
        return f"Reminder presented: {prompts}"


class Server:
    """A running ``serve``: an activating host, the plugin, the printer and the notifier.

    :meth:`start` opens everything; :meth:`stop` disposes the plugin and closes
    the host (it raises :class:`StoreUnavailable` when events could not be
    written). Usable from other code (the demo runs one in-process, for its
    own session only: ``accept``).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        notify_command: str | None = None,
        policy: WakePolicy | None = None,
        on_presented: Callable[[Presented], None] | None = None,
        echo: Callable[[str], None] = click.echo,
        accept: Callable[[str], bool] | None = None,
    ) -> None:
        self._data_dir = data_dir
        self._notify_command = notify_command
        self._policy = policy
        self._on_presented = on_presented
        self._echo = echo
        self._accept = accept
        self._lock = threading.Lock()
        self.presented: list[Presented] = []
        self.notify_failures = 0
        self.host: EmbeddedHost | None = None
        self.plugin: SchedulePlugin | None = None

    def start(self) -> None:
        """Open the host on the store, enable activation, install Schedule."""
        host = open_host(self._data_dir)
        try:
            host.enable_activation(
                model=NotifierModel(self._present, host.clock), accept=self._accept
            )
            self.plugin = install_schedule(host.context(), wake_policy=self._policy)
        except BaseException as error:
            close_host(host, failing=error)
            raise
        self.host = host

    def stop(self, timeout: float = 10.0) -> None:
        """Dispose the plugin, let running turns finish, close the host (within ``timeout``).

        Disposing the plugin lets activations in flight settle and starts no
        new delivery; waiting for the agents to be idle lets a reminder turn
        that is running complete and be recorded, so it does not run again at
        the next start.
        """
        host, self.host = self.host, None
        if host is None:
            return
        deadline = time.monotonic() + timeout
        try:
            if self.plugin is not None:
                self.plugin.dispose().result(timeout=timeout)
            for agent in host.agents.roots():
                agent.when_idle().result(timeout=max(0.0, deadline - time.monotonic()))
        except Exception as error:  # a timeout, or an agent disposed meanwhile
            _log.warning("stopping without waiting for every turn: %s", type(error).__name__)
        close_host(host, self.plugin, timeout=max(0.1, deadline - time.monotonic()))

    def _present(self, item: Presented) -> None:
        """A notifier turn presented ``item``: print it, run the notify command."""
        with self._lock:
            self.presented.append(item)
            self._echo(
                f"{item.presented_at}  reminder {visible(item.schedule_id)} of session "
                f"{visible(item.session_id)} (due {visible(item.occurrence_at)}): "
                f"{show_text(item.prompt)}"
            )
        if self._notify_command is not None:
            self._notify(item)
        if self._on_presented is not None:
            self._on_presented(item)

    def _notify(self, item: Presented) -> None:
        """Run the notify command with ``item`` as JSON on stdin; a failure is reported only."""
        command = self._notify_command
        assert command is not None
        payload = json.dumps(item.to_json(), ensure_ascii=False) + "\n"
        problem: str | None = None
        try:
            done = subprocess.run(
                command,
                shell=True,
                input=payload.encode("utf-8"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=NOTIFY_TIMEOUT_SECONDS,
                check=False,
            )
            if done.returncode != 0:
                problem = f"exited with status {done.returncode}"
        except subprocess.TimeoutExpired:
            problem = f"did not finish within {NOTIFY_TIMEOUT_SECONDS:.0f} s"
        except OSError as error:
            problem = f"could not be started ({error.strerror or type(error).__name__})"
        if problem is not None:
            with self._lock:
                self.notify_failures += 1
            _log.warning("the notify command %s for %s", problem, item.schedule_id)
            click.echo(
                f"notify: the command {problem} for {visible(item.schedule_id)} of session "
                f"{visible(item.session_id)}; the reminder was presented, serving goes on",
                err=True,
            )


SIGNAL_POLL_S = 0.25
"""How often ``serve``'s main thread wakes up so a pending SIGTERM/SIGINT handler can run."""


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


@click.command(
    "serve",
    short_help="Deliver due reminders of sessions nobody has open, until stopped.",
    epilog=exit_codes_help(
        (0, "stopped by SIGTERM or SIGINT, every event written"),
        (1, "an internal error"),
        (2, WRITE_STORE_EXIT),
    ),
)
@click.option(
    "--notify-command",
    metavar="CMD",
    default=None,
    help="Shell command run for each presented reminder, with the reminder as one JSON object "
    "on stdin: {session_id, schedule_id, prompt, occurrence_at, presented_at}. A failing "
    "command is reported on stderr; serving goes on.",
)
@click.option(
    "--quiet-period",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Let a woken session go once its agent was idle this long with nothing due in it "
    "(until then `chat` cannot open it).",
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
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a stop waits for work in flight before closing the store.",
)
@location_options
@allow_shared_store_option
def serve_command(
    notify_command: str | None, quiet_period: float, concurrency: int, stop_timeout: float
) -> None:
    """Wake sessions whose reminders came due while nobody had them open, and deliver them.

    Runs until SIGTERM or SIGINT. Each delivered reminder is printed on one line;
    with --notify-command it is also handed to that command as JSON on stdin (to
    wire it to a desktop notification or a chat webhook). Several serve processes
    may share one store: a session is woken by one of them at a time.
    """
    data_dir = resolve_data_dir()
    policy = WakePolicy(max_concurrent=concurrency, quiet_period_ms=int(quiet_period * 1000))
    server = Server(data_dir, notify_command=notify_command, policy=policy)
    stop = threading.Event()
    with _stop_on_signals(stop):
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
            click.echo("stopping: letting work in flight settle and writing every event")
            server.stop(timeout=stop_timeout)
    click.echo(f"stopped; {len(server.presented)} reminder(s) presented")
