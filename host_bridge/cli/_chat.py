"""``dsh-schedule chat``: an interactive shell where the person plays the model.

One persistent session on the embedded store; each command is a real tool call
made by the session's root agent: ``/create`` (``after_seconds``), ``/at``,
``/every`` and ``/cron``. Due reminders arrive as ``[SCHEDULE REMINDER]`` follow-up turns of
that agent (``[SCHEDULE REMINDER BATCH]`` for repeating ones) and are printed
while the shell waits for input.

Input is read by a background thread that feeds a queue, so the main thread
can show reminders while no line is typed; with piped input the lines are
processed in order and the shell shuts down cleanly at ``/quit`` or end of input.
Ctrl-C during ``/wait`` ends the wait only; at the prompt it leaves the shell.

A session another process holds (``serve`` keeps a session it woke for its
quiet period) is waited for, up to ``--wait-for-holder`` seconds, naming the
holder; meanwhile ``chat`` asks it to hand the session over, which ``serve``
does as soon as its turns in the session are done. On opening, the reminders
another process presented (``serve``'s turns) since the session was last open
in ``chat`` are listed, one line each;
a :data:`SEEN_EVENT` record then marks them as shown.
"""

from __future__ import annotations

import contextlib
import io
import queue
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import click

from actors._contract import wall_clock_ms
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge._tools import present_value
from host_bridge.cli._common import (
    EXIT_FAILED,
    SIGNAL_POLL_S,
    WRITE_STORE_EXIT,
    Seconds,
    StoreUnavailable,
    allow_shared_store_option,
    close_host,
    describe_store,
    exit_codes_help,
    format_ms,
    holder_phrase,
    location_args,
    location_options,
    open_host,
    resolve_data_dir,
    safe_json,
    settle,
    shell_words,
    show_text,
    visible,
)
from host_bridge.cli._serve import receipts_at
from host_bridge.embedded.agents import MESSAGE_EVENT, EmbeddedAgent, Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT
from host_bridge.embedded.sessions import EmbeddedSession, SessionError, SessionLeaseRefusedError
from host_bridge.embedded.stores import StoreError, parse_holder
from host_bridge.protocols import SessionEvent
from messages import PresentedReminder, parse_reminder_framing
from messages._instant import parse_instant
from messages._presentation import REMINDER_BATCH_HEADER

__all__ = [
    "COMMANDS_HELP",
    "HOLDER_WAIT_SECONDS",
    "SEEN_EVENT",
    "ChatShell",
    "PresentedElsewhere",
    "chat_command",
    "presented_elsewhere",
]

DEFAULT_SESSION = "chat"
"""The session ``chat`` uses when no ``--session`` is given."""

MAX_WAIT_SECONDS = 86_400
TOOL_TIMEOUT_SECONDS = 30.0

HOLDER_WAIT_SECONDS = 15.0
"""How long ``chat`` waits for another process to let the session go (``--wait-for-holder``):
three times ``serve``'s default quiet period."""

SEEN_EVENT = "chat/seen"
"""The record ``chat`` appends once it showed what other processes presented
(``{"through": SEQ}``): those reminders are not listed again."""

MAX_SHOWN_ELSEWHERE = 20
"""How many reminders presented elsewhere ``chat`` lists on opening (the latest ones)."""

SCAN_LIMIT = 10_000
"""How many of the latest events ``chat`` reads for reminders presented elsewhere."""

COMMANDS_HELP = """\
  /create SECONDS TEXT  call schedule_create with after_seconds (TEXT in SECONDS seconds)
  /at WHEN TEXT         call schedule_create with at; WHEN is an instant with an offset
                        (2026-08-06T09:00:00+08:00, or ...Z for UTC) or DATE TIME ZONE
                        (2026-08-06 09:00:00 Asia/Shanghai)
  /every SECONDS TEXT   call schedule_create with every_seconds (repeats; at least 300)
  /cron "EXPR" ZONE TEXT
                        call schedule_create with cron (repeats on a calendar rule):
                        EXPR is "minute hour day month weekday", matched in ZONE
                        (/cron "0 9 * * 1-5" Asia/Shanghai stand-up: weekdays at 9)
  /list                 call schedule_list
  /delete ID            call schedule_delete
  /wait SECONDS         wait up to SECONDS for due reminders (returns once one arrives)
  /help                 show this list
  /quit                 leave (end of input does the same); come back to resume"""
"""The shell's commands, as shown by ``/help``."""

_CRON_USAGE = '/cron "EXPR" ZONE TEXT'
"""The ``/cron`` command's form, as its usage line shows it."""

_INTEGER = re.compile(r"[+-]?\d+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class _Line:
    text: str


@dataclass(frozen=True)
class _Eof:
    pass


@dataclass(frozen=True)
class _Reminder:
    text: str
    received_ms: int
    reminders: tuple[PresentedReminder, ...]

    @property
    def occurrences(self) -> list[str]:
        """The ``occurrence_at`` of each reminder the message carries."""
        return [reminder.occurrence_at for reminder in self.reminders]


_Item = _Line | _Eof | _Reminder


@dataclass(frozen=True)
class PresentedElsewhere:
    """A reminder whose turn another process ran and answered (``serve``'s notifier…)."""

    schedule_id: str
    prompt: str
    occurrence_at: str
    presented_at: str


def presented_elsewhere(events: Sequence[SessionEvent], seed: int) -> list[PresentedElsewhere]:
    """The reminders presented by another process since the last :data:`SEEN_EVENT`.

    Read from the log: a reminder turn that completed with an assistant reply
    (the notifier of ``serve`` records ``Reminder presented: …``; ``chat``'s
    own turns record none, the person reads them live). Only the latest
    :data:`SCAN_LIMIT` events are read, and none before one that cannot be read
    (damaged history a resume does not need). ``presented_at`` is the
    completion's time.
    """
    start = max(0, len(events) - SCAN_LIMIT)
    for seq in range(len(events) - 1, start - 1, -1):
        try:
            kind = events[seq].type
        except (SessionError, StoreError):
            kind = SEEN_EVENT  # nothing before it can be read: start after it
        if kind == SEEN_EVENT:
            start = seq + 1
            break
    found: list[PresentedElsewhere] = []
    inbox: dict[int, list[dict[str, str]]] = {}
    replied: set[int] = set()
    turn: int | None = None
    for seq in range(start, len(events)):
        event = events[seq]
        data = event.data if isinstance(event.data, dict) else {}
        if event.type == INBOX_EVENT:
            try:
                receipts = receipts_at(events, seq, seed)
            except (SessionError, StoreError):  # its create record is in damaged history
                receipts = []
            if receipts:
                inbox[seq] = receipts
        elif event.type == MESSAGE_EVENT:
            if isinstance(data.get("inbox"), int):
                turn = data["inbox"]
            elif data.get("role") == "assistant" and turn is not None:
                replied.add(turn)
        elif event.type == TURN_COMPLETED_EVENT:
            done = data.get("inbox")
            if isinstance(done, int) and done in replied and not data.get("failed"):
                at = format_ms(event.time)
                found += [
                    PresentedElsewhere(r["scheduleId"], r["prompt"], r["occurrenceAt"], at)
                    for r in inbox.get(done, [])
                ]
            turn = None
    return found


class _WaitInterruptedError(Exception):
    """Ctrl-C while ``chat`` waited for the holder ``refusal`` names."""

    def __init__(self, refusal: SessionLeaseRefusedError) -> None:
        super().__init__(refusal.holder)
        self.refusal = refusal


class ChatShell:
    """The shell's state: the host, the agent played by the person, and the input queue."""

    def __init__(
        self,
        data_dir: Path,
        session_id: str,
        *,
        interactive: bool,
        location: list[str] | None = None,
        holder_wait: float = HOLDER_WAIT_SECONDS,
    ) -> None:
        self._data_dir = data_dir
        self._holder_wait = holder_wait
        self._location = list(location or [])
        self._session_id = session_id
        self._interactive = interactive
        self._inbox: queue.Queue[_Item] = queue.Queue()
        self._deferred: deque[_Line | _Eof] = deque()
        self._prompt_shown = False
        self._shown = 0
        self._host: EmbeddedHost | None = None
        self._plugin: SchedulePlugin | None = None
        self._agent: EmbeddedAgent | None = None

    # --- the model the person plays ------------------------------------------------------

    def _model(self, turn: Turn) -> str | None:
        """The agent's model: queue every reminder turn for the shell to print."""
        text = turn.message.text
        reminders = parse_reminder_framing(text)
        if reminders:
            self._inbox.put(_Reminder(text, wall_clock_ms(), reminders))
        return None

    # --- running -----------------------------------------------------------------------------

    def run(self, stream: TextIO) -> None:
        """Open the session, process ``stream`` until ``/quit`` or its end, shut down cleanly.

        Ends with :class:`StoreUnavailable` (exit 2) when the session cannot be
        opened (unreadable rows, a gap in its seq numbers, live in another
        process) or when the store could not write every event by the end.
        """
        host = self._host = open_host(self._data_dir, program="chat")
        try:
            self._plugin = install_schedule(host.context())
            session = self._open_session(host)
            count = len(session.events)
            shown_id = visible(self._session_id)
            if count:
                click.echo(f"session {shown_id}: resumed ({count} events)")
            else:
                click.echo(f"session {shown_id}: new")
            click.echo(f"store: {visible(describe_store(self._data_dir))}")
            self._show_presented_elsewhere(session)
            self._agent = host.spawn_root(session=session, model=self._model, agent_id="person")
            self._settle_and_show()  # reminders that came due while nobody was here
            if self._interactive:
                click.echo("You play the model. Commands:")
                click.echo(COMMANDS_HELP)
            threading.Thread(
                target=self._read, args=(stream,), name="dsh-chat-input", daemon=True
            ).start()
            try:
                self._loop()
            except KeyboardInterrupt:
                click.echo("")
            self._settle_and_show()
            self._goodbye()
        except BaseException as error:
            close_host(host, self._plugin, failing=error)
            raise
        close_host(host, self._plugin)

    def _open_session(self, host: EmbeddedHost) -> EmbeddedSession:
        """Open the session; while another process holds it, wait (bounded) for it to let go.

        While it waits it asks the holder to hand the session over (the store's
        :meth:`~host_bridge.embedded.stores.EventStore.want`: a ``serve`` lets
        a wanted session go as soon as it is idle). Retries with a growing pause
        (up to 1 s) until ``holder_wait`` seconds passed (Ctrl-C gives up at
        once); then :class:`StoreUnavailable` names the holder and what to do.
        """
        with contextlib.ExitStack() as wanting:
            return self._open_asking(host, wanting)

    def _open_asking(self, host: EmbeddedHost, wanting: contextlib.ExitStack) -> EmbeddedSession:
        """:meth:`_open_session`'s loop; ``wanting`` holds the request to the holder.

        Ctrl-C once the session was found held, wherever it lands in the loop,
        ends the wait with the holder named; before that it propagates.
        """
        started = time.monotonic()
        try:
            return self._open_waiting(host, wanting, started)
        except _WaitInterruptedError as interrupted:
            owner = interrupted.refusal.holder
            stopped = time.monotonic() - started
            message = self._held(holder_phrase(owner), owner, interrupted_after=stopped)
        raise StoreUnavailable(message) from None

    def _open_waiting(
        self,
        host: EmbeddedHost,
        wanting: contextlib.ExitStack,
        started: float,
    ) -> EmbeddedSession:
        """Try to open, wait and retry until the deadline; see :meth:`_open_asking`."""
        deadline = started + self._holder_wait
        pause = 0.05
        asked: bool | None = None  # None: not held (yet); else whether the holder can see it
        program: str | None = None
        refusal: SessionLeaseRefusedError | None = None
        try:
            while True:
                try:
                    session = host.sessions.open(self._session_id)
                except SessionLeaseRefusedError as error:
                    refusal = error
                    holder = holder_phrase(error.holder)
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise StoreUnavailable(self._held(holder, error.holder)) from None
                    if asked is None:
                        asked = self._ask_holder(host, wanting)
                        program = _program(error.holder)
                        click.echo(visible(self._waiting_line(holder, error.holder, asked)))
                    time.sleep(min(pause, left))
                    pause = min(pause * 2, 1.0)
                except (SessionError, StoreError) as error:
                    raise StoreUnavailable(str(error)) from None
                else:
                    if asked and program == "serve":
                        click.echo("serve handed the session over")
                    return session
        except KeyboardInterrupt:
            if refusal is None:
                raise
            raise _WaitInterruptedError(refusal) from None

    def _ask_holder(self, host: EmbeddedHost, wanting: contextlib.ExitStack) -> bool:
        """Tell the holder that this chat wants the session; whether it can see that."""
        store = host.persistence
        if store is None:
            return False
        try:
            return wanting.enter_context(store.want(self._session_id))
        except StoreError:
            return False

    def _waiting_line(self, holder: str, owner: str | None, asked: bool) -> str:
        """The line ``chat`` shows once it waits for the holder ``owner``."""
        wait = f"waiting up to {self._holder_wait:g} s"
        if asked and _program(owner) == "serve":
            return (
                f"session {self._session_id} is held by {holder}; asked it to hand the session "
                f"over, {wait} (Ctrl-C stops waiting)"
            )
        return (
            f"session {self._session_id} is held by {holder}; {wait} for it to let go"
            f"{_why_held(owner)} (Ctrl-C stops waiting)"
        )

    def _held(
        self, holder: str, owner: str | None, *, interrupted_after: float | None = None
    ) -> str:
        """Why the session could not be opened, and what to do, in one line.

        ``interrupted_after``: the person stopped the wait (Ctrl-C) after that many seconds.
        """
        program = _program(owner)
        if interrupted_after is None:
            waited = f"which did not let it go within {self._holder_wait:g} s"
            longer = " (--wait-for-holder SECONDS waits longer)"
        else:
            waited = f"and the wait was stopped after {interrupted_after:.1f} s"
            longer = ""
        if program == "serve":
            todo = (
                "serve hands a session over once its turns in it are done and nothing is due "
                "within 5 s "
                "(a serve of an earlier release only after its --quiet-period, 5 s by "
                "default): retry in a moment, or stop that serve"
            )
        elif program == "chat":
            todo = "leave that chat (/quit), then retry"
        else:
            todo = "retry once it has closed the session"
        return f"session {self._session_id} is held by {holder}, {waited}; {todo}{longer}"

    def _show_presented_elsewhere(self, session: EmbeddedSession) -> None:
        """List what other processes presented since the last look; mark it as shown."""
        events = session.events
        found = presented_elsewhere(events, session.header.seed_length or 0)
        if not found:
            return
        click.echo(
            f"presented by another process (e.g. dsh-schedule serve) while this chat was "
            f"closed: {len(found)} reminder(s)"
        )
        if len(found) > MAX_SHOWN_ELSEWHERE:
            click.echo(f"  ... {len(found) - MAX_SHOWN_ELSEWHERE} earlier one(s) not listed")
        for item in found[-MAX_SHOWN_ELSEWHERE:]:
            click.echo(
                f"  {visible(item.presented_at)}  reminder {visible(item.schedule_id)} "
                f"(due {visible(item.occurrence_at)}): {show_text(item.prompt)}"
            )
        session.append(SEEN_EVENT, {"through": len(events) - 1})

    def _read(self, stream: Iterable[str]) -> None:
        try:
            for line in stream:
                self._inbox.put(_Line(line.rstrip("\r\n")))
        except (OSError, ValueError) as error:  # unreadable input (e.g. not UTF-8) ends it
            click.echo(f"input stopped: {visible(str(error))}", err=True)
        finally:
            self._inbox.put(_Eof())

    def _next(self) -> _Item:
        if self._deferred:
            return self._deferred.popleft()
        if self._interactive and not self._prompt_shown:
            click.echo("schedule> ", nl=False)
            self._prompt_shown = True
        return self._get(None)

    def _get(self, timeout: float | None) -> _Item:
        """The next item, waiting at most ``timeout`` s (``None``: as long as it takes).

        Waits in slices of :data:`SIGNAL_POLL_S`, so a Ctrl-C the kernel handed
        to another thread still interrupts it; ``queue.Empty`` when time is up.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = SIGNAL_POLL_S if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise queue.Empty
            try:
                return self._inbox.get(timeout=min(left, SIGNAL_POLL_S))
            except queue.Empty:
                continue

    def _loop(self) -> None:
        while True:
            item = self._next()
            if isinstance(item, _Reminder):
                self._show_reminder(item)
                continue
            if isinstance(item, _Eof):
                if self._prompt_shown:
                    click.echo("")  # end the prompt line (Ctrl-D at the prompt)
                self._prompt_shown = False
                return
            self._prompt_shown = False
            if not self._interactive:
                click.echo(f"> {visible(item.text)}")
            if not self._command(item.text.strip()):
                return

    # --- commands ------------------------------------------------------------------------------

    def _command(self, line: str) -> bool:
        """Run one input line; ``False`` means leave."""
        if not line:
            return True
        if not line.startswith("/"):
            click.echo("You play the model: act with a command (try /help).")
            return True
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            click.echo(COMMANDS_HELP)
        elif name == "/create":
            self._create(rest)
        elif name == "/at":
            self._at(rest)
        elif name == "/every":
            self._every(rest)
        elif name == "/cron":
            self._cron(rest)
        elif name == "/list":
            self._list()
        elif name == "/delete":
            if not rest:
                click.echo("usage: /delete ID")
            else:
                self._call("schedule_delete", {"id": rest})
        elif name == "/wait":
            self._wait(rest)
        else:
            click.echo(f"unknown command {visible(name)}; try /help")
        return True

    def _create(self, rest: str) -> None:
        seconds, _, text = rest.partition(" ")
        if not seconds or not text.strip():
            click.echo("usage: /create SECONDS TEXT")
            return
        # The person plays the model: a non-integer goes to the tool, which answers invalid_rule.
        after: Any = int(seconds) if _INTEGER.fullmatch(seconds) else seconds
        self._call("schedule_create", {"prompt": text.strip(), "after_seconds": after})

    def _at(self, rest: str) -> None:
        words = rest.split(None, 3)
        at: Any
        if words and _DATE.fullmatch(words[0]):  # DATE TIME ZONE TEXT
            if len(words) < 4:
                click.echo("usage: /at DATE TIME ZONE TEXT  or  /at INSTANT TEXT (try /help)")
                return
            at = {"date": words[0], "time": words[1], "time_zone": words[2]}
            text = words[3]
        else:  # INSTANT TEXT; the tool judges the instant, as it would a model's
            words = rest.split(None, 1)
            if len(words) < 2:
                click.echo("usage: /at INSTANT TEXT  or  /at DATE TIME ZONE TEXT (try /help)")
                return
            at, text = words
        self._call("schedule_create", {"prompt": text.strip(), "at": at})

    def _every(self, rest: str) -> None:
        seconds, _, text = rest.partition(" ")
        if not seconds or not text.strip():
            click.echo("usage: /every SECONDS TEXT")
            return
        every: Any = int(seconds) if _INTEGER.fullmatch(seconds) else seconds
        self._call("schedule_create", {"prompt": text.strip(), "every_seconds": every})

    def _cron(self, rest: str) -> None:
        parsed = _parse_cron(rest)
        if parsed is None:
            click.echo(f"usage: {_CRON_USAGE} (try /help)")
            return
        expression, zone, text = parsed
        cron = {"expression": expression, "time_zone": zone}
        self._call("schedule_create", {"prompt": text, "cron": cron})

    def _list(self) -> None:
        value = self._call("schedule_list", {}, echo=False)
        items = value.get("schedules") if isinstance(value, dict) else None
        if not isinstance(items, list):
            click.echo(visible(present_value(value)))
            return
        if not items:
            click.echo("no active reminders")
            return
        rows = [["ID", "KIND", "STATE", "NEXT (UTC)", "PROMPT"]]
        rows += [
            [
                visible(v["id"]),
                _kind(v),
                v["state"],
                visible(v["scheduledAt"]),
                show_text(v["prompt"]),
            ]
            for v in items
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

    def _call(self, tool: str, arguments: dict[str, Any], *, echo: bool = True) -> Any:
        assert self._host is not None and self._agent is not None
        result = self._host.tools.execute(
            tool, arguments, agent=self._agent, timeout=TOOL_TIMEOUT_SECONDS
        )
        if echo:
            click.echo(visible(present_value(result.value)))
        return result.value

    def _wait(self, rest: str) -> None:
        try:
            seconds = float(rest)
        except ValueError:
            seconds = -1.0
        if not 0 <= seconds <= MAX_WAIT_SECONDS:
            click.echo(f"usage: /wait SECONDS (a number from 0 to {MAX_WAIT_SECONDS})")
            return
        started = time.monotonic()
        arrived = False
        try:  # Ctrl-C ends the wait, not the shell
            click.echo(f"waiting up to {seconds:g} s for reminders (Ctrl-C ends the wait) ...")
            deadline = started + seconds
            while not arrived and (remaining := deadline - time.monotonic()) > 0:
                try:
                    item = self._get(remaining)
                except queue.Empty:
                    break
                if isinstance(item, _Reminder):
                    self._show_reminder(item)
                    arrived = True
                else:
                    self._deferred.append(item)  # input typed meanwhile runs after the wait
            if arrived:
                self._settle_and_show()  # others due at the same time follow at once
        except KeyboardInterrupt:
            click.echo("")  # after the ^C the terminal shows
            click.echo(
                f"wait cancelled after {time.monotonic() - started:.1f} s; back to the prompt"
            )
            return
        click.echo(
            f"waited {time.monotonic() - started:.1f} s"
            + ("" if arrived else "; no reminder arrived")
        )

    # --- output ---------------------------------------------------------------------------------

    def _settle_and_show(self) -> None:
        assert self._plugin is not None and self._agent is not None
        try:
            settle(self._plugin, self._agent)
        except TimeoutError:
            click.echo("warning: the host is still busy after 30 s; continuing", err=True)
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Reminder):
                self._show_reminder(item)
            else:
                self._deferred.append(item)

    def _show_reminder(self, reminder: _Reminder) -> None:
        if self._prompt_shown:
            click.echo("")
            self._prompt_shown = False
        occurrences = reminder.occurrences
        self._shown += len(occurrences)
        received = format_ms(reminder.received_ms)
        if reminder.text.startswith(REMINDER_BATCH_HEADER):
            header = f"reminder batch ({len(occurrences)} due) received at {received}"
        else:
            header = f"reminder received at {received}"
        try:
            late = (reminder.received_ms - max(map(parse_instant, occurrences))) / 1000
            header += f" ({late:.3f} s after its due time)"
        except ValueError:
            pass  # a framing Schedule wrote always holds canonical instants
        click.echo(header + ":")
        for row in reminder.text.splitlines():
            click.echo(f"  {safe_json(row)}")  # the framing's values are JSON strings

    def _goodbye(self) -> None:
        value = self._call("schedule_list", {}, echo=False)
        items = value.get("schedules") if isinstance(value, dict) else None
        if not isinstance(items, list):
            pending = f"pending reminders unknown ({visible(present_value(value))})"
        elif items:
            pending = f"{len(items)} reminder(s) still pending"
        else:
            pending = "no reminders pending"
        click.echo(
            f"bye: {self._shown} reminder(s) shown this time, {pending}; "
            f"resume with: {self.resume_command()}"
        )

    def resume_command(self) -> str:
        """The command line that comes back to this session on the same store."""
        return shell_words(["dsh-schedule", "chat", "--session", self._session_id, *self._location])


def _program(owner: str | None) -> str | None:
    """The program a holder record names, if any."""
    holder = None if owner is None else parse_holder(owner)
    return None if holder is None else holder.program


def _why_held(owner: str | None) -> str:
    """When the holder ``owner`` lets a session go, as a parenthesis for the waiting line."""
    program = _program(owner)
    if program == "serve":
        return " (serve lets a woken session go once nothing was due in it for its --quiet-period)"
    if program == "chat":
        return " (when that chat ends)"
    return ""


def _parse_cron(rest: str) -> tuple[str, str, str] | None:
    """``"EXPR" ZONE TEXT`` as ``(EXPR, ZONE, TEXT)``; ``None`` when a part or a quote is missing.

    The expression is taken as typed between the double quotes (the tool judges
    it, as it would a model's); the zone is the next word and the text the rest.
    """
    if not rest.startswith('"'):
        return None
    expression, closed, after = rest[1:].partition('"')
    words = after.split(None, 1)
    if not closed or len(words) < 2 or not words[1].strip():
        return None
    return expression, words[0], words[1].strip()


def _kind(view: dict[str, Any]) -> str:
    """A view's kind with its rule: ``after 60s``, ``at``, ``every 300s``, ``cron "EXPR" ZONE``."""
    kind = str(view.get("kind"))
    if kind == "cron":
        return visible(f'cron "{view.get("expression")}" {view.get("timeZone")}')
    seconds = view.get("afterSeconds", view.get("everySeconds"))
    return visible(kind if seconds is None else f"{kind} {seconds}s")


@click.command(
    "chat",
    short_help="Play the model yourself on one persistent session.",
    epilog=(
        "\b\nCommands inside the shell:\n"
        + COMMANDS_HELP
        + "\n\n"
        + exit_codes_help(
            (0, "the shell ended (/quit, /exit or end of input) and every event was written"),
            (EXIT_FAILED, "an internal error"),
            (2, WRITE_STORE_EXIT),
        )
    ),
)
@click.option(
    "--session",
    "session_id",
    metavar="ID",
    default=DEFAULT_SESSION,
    show_default=True,
    help="The session to create or resume.",
)
@click.option(
    "--wait-for-holder",
    "holder_wait",
    type=Seconds(min=0),
    default=HOLDER_WAIT_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for another process that holds the session to let it go (a serve "
    "is asked to hand it over, and does once its turns in it are done); then exit 2 naming it.",
)
@location_options
@allow_shared_store_option
def chat_command(session_id: str, holder_wait: float) -> None:
    """Play the model on one persistent session: create, list and delete reminders.

    Reminders are one-shot after a delay (/create), one-shot at a wall-clock
    time with an offset or a time zone (/at), or repeating: at a fixed rate
    (/every, at least every 300 seconds) or on a calendar rule in a time zone
    (/cron, e.g. weekdays at 9); missed repeats are skipped, only the latest is
    delivered.

    Due reminders are printed while the shell waits for input. Leaving and
    coming back resumes the session and delivers what came due meanwhile.
    Reads commands from a terminal or from piped input (one per line).
    Run one chat per session at a time; a session another process holds is
    waited for (--wait-for-holder). On opening, the reminders another process
    (serve) presented since the session was last open here are listed.
    Ctrl-C during /wait ends the wait; at the prompt it leaves.
    """
    if not session_id.strip() or session_id != session_id.strip():
        raise click.BadParameter(
            "must be non-empty, without leading or trailing spaces", param_hint="--session"
        )
    stream: TextIO = sys.stdin if sys.stdin is not None else io.StringIO()
    shell = ChatShell(
        resolve_data_dir(),
        session_id,
        interactive=stream.isatty(),
        location=location_args(),
        holder_wait=holder_wait,
    )
    shell.run(stream)
