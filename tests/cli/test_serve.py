"""``dsh-schedule serve``: real subprocesses on a real store deliver reminders of closed sessions.

Waits are on the processes' output lines (read by a thread into a queue), never
on sleeps. Counts come from the store: each reminder must have exactly one
``dispatch``, one reminder inbox entry and one completed turn.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest
from pytest_mock import MockerFixture

from host_bridge.cli._serve import Server, WarningsOnStderr
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import wall_clock_ms
from tests.cli.helpers import (
    EOF_LINE,
    REPO,
    TIMEOUT,
    Proc,
    create,
    deliveries,
    message,
    run_cli,
    write_session,
)


def serve(procs: list[Proc], data_dir: Path, home: Path, *extra: str) -> Proc:
    proc = Proc(["-m", "host_bridge.cli", "serve", "--data", str(data_dir), *extra], home)
    procs.append(proc)
    proc.wait_line("serving ")
    return proc


def due_sessions(data_dir: Path, count: int, *, due_ms: int | None = None) -> list[str]:
    """Store ``count`` closed sessions, each with one reminder due at ``due_ms`` (default: now)."""
    due = wall_clock_ms() if due_ms is None else due_ms
    ids = [f"chat-{i:03d}" for i in range(count)]
    for session_id in ids:
        write_session(
            data_dir,
            session_id,
            [message("remind me"), create("schedule-1", f"stretch {session_id}", 1, due - 1000)],
        )
    return ids


def delivery_counts(data_dir: Path, *, owed: bool = False) -> dict[str, tuple[int, int, int]]:
    """Per session: dispatches, reminder inbox entries and their completed turns, from the store.

    Unless ``owed``, the due index must say nothing is owed any more.
    """
    store = SqliteEventStore(store_path(data_dir), create=False)
    try:
        counts: dict[str, tuple[int, int, int]] = {}
        for session_id in store.session_ids():
            stored = store.load(session_id)
            assert stored is not None
            counts[session_id] = deliveries(stored.events)
        assert owed or store.due_entries() == {}  # nothing owed any more
        return counts
    finally:
        store.close()


def test_serve_delivers_the_reminders_of_closed_sessions_prints_and_notifies_them(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    ids = due_sessions(data_dir, 2)
    notes = data_dir / "notes.jsonl"
    proc = serve(procs, data_dir, home, "--notify-command", f"cat >> '{notes}'")
    seen = {proc.wait_line("reminder schedule-1 of session"), proc.wait_line("reminder schedule-1")}
    assert {line.split(" of session ")[1].split(" ")[0] for line in seen} == set(ids)
    assert all('"stretch chat-' in line for line in seen)
    assert proc.stop() == 0
    assert proc.out[-1] == "stopped; 2 reminder(s) presented"
    objects = [json.loads(line) for line in notes.read_text("utf-8").splitlines()]
    assert sorted(o["session_id"] for o in objects) == ids
    assert all(
        set(o) == {"session_id", "schedule_id", "prompt", "occurrence_at", "presented_at"}
        for o in objects
    )
    assert delivery_counts(data_dir) == {session_id: (1, 1, 1) for session_id in ids}


def test_a_failing_notify_command_is_reported_and_serving_goes_on(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    ids = due_sessions(data_dir, 2)
    proc = serve(procs, data_dir, home, "--notify-command", "exit 3")
    proc.wait_line("reminder schedule-1")
    proc.wait_line("reminder schedule-1")
    assert proc.stop(signal.SIGINT) == 0
    failures = [line for line in proc.err if line.startswith("notify:")]
    assert len(failures) == 2 and all("exited with status 3" in f for f in failures)
    assert delivery_counts(data_dir) == {session_id: (1, 1, 1) for session_id in ids}


def test_serve_refuses_a_store_open_to_others_and_serves_it_with_the_flag(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    (session,) = due_sessions(data_dir, 1)
    db = store_path(data_dir)
    db.chmod(0o644)
    refused = run_cli(["serve", "--data", str(data_dir)], home)
    assert refused.code == 2
    assert refused.err == (
        f"Error: the session store file {db} (mode 0644) is accessible to other local users; "
        f"run chmod 600 {db}, or pass --allow-shared-store to accept it\n"
    )
    assert "serving" not in refused.out
    proc = serve(procs, data_dir, home, "--allow-shared-store")
    proc.wait_line(f"of session {session}")
    assert proc.stop() == 0
    db.chmod(0o600)  # (the counts are read by a store that refuses a shared one too)
    assert delivery_counts(data_dir) == {session: (1, 1, 1)}


def test_a_reminder_coming_due_while_serving_is_delivered(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    proc = serve(procs, data_dir, home)
    (session,) = due_sessions(data_dir, 1, due_ms=wall_clock_ms() + 1_500)
    proc.wait_line(f"of session {session}")  # the index is re-read every second
    assert proc.stop() == 0
    assert delivery_counts(data_dir) == {session: (1, 1, 1)}


def test_two_serve_processes_on_one_store_deliver_each_reminder_once(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    ids = due_sessions(data_dir, 30)
    store_path(data_dir).with_name("sessions.sqlite3.locks").touch(0o600)
    both = [serve(procs, data_dir, home, "--concurrency", "4") for _ in range(2)]
    merged: queue.Queue[str] = queue.Queue()
    for proc in both:
        threading.Thread(target=_forward, args=(proc, merged), daemon=True).start()
    printed = [merged.get(timeout=TIMEOUT) for _ in ids]
    assert all(proc.stop() == 0 for proc in both)
    sessions = [line.split(" of session ")[1].split(" ")[0] for line in printed]
    assert sorted(sessions) == ids  # each once, across both processes
    assert delivery_counts(data_dir) == {session_id: (1, 1, 1) for session_id in ids}


def _forward(proc: Proc, into: queue.Queue[str]) -> None:
    while True:
        try:
            line = proc.lines.get(timeout=TIMEOUT)
        except queue.Empty:
            return
        if line == EOF_LINE:
            return
        if " reminder " in line:
            into.put(line)


@pytest.mark.parametrize("mode", ["commit", "turn"])
def test_serve_killed_during_an_activation_loses_nothing_and_repeats_nothing(
    data_dir: Path, home: Path, procs: list[Proc], mode: str
) -> None:
    (session,) = due_sessions(data_dir, 1)
    child = Proc(["-m", "bench._serve_child", str(data_dir), mode], home)
    procs.append(child)
    child.wait_line(f"PAUSED {mode}")
    assert child.stop(signal.SIGKILL) == -signal.SIGKILL
    assert not [line for line in child.out if " reminder " in line]
    proc = serve(procs, data_dir, home)
    proc.wait_line(f"of session {session}")
    assert proc.stop() == 0
    assert delivery_counts(data_dir) == {session: (1, 1, 1)}
    assert os.path.exists(store_path(data_dir))


def test_serve_escapes_what_the_store_holds(data_dir: Path, home: Path, procs: list[Proc]) -> None:
    hostile = "red\x1b[31m\nforged line\u202e"
    write_session(
        data_dir,
        "chat\x1b]0;title\x07",
        [create("schedule-1", hostile, 1, wall_clock_ms() - 1000)],
    )
    proc = serve(procs, data_dir, home)
    line = proc.wait_line("reminder schedule-1")
    assert proc.stop() == 0
    assert "\x1b" not in "\n".join(proc.out) and "\u202e" not in "\n".join(proc.out)
    assert "of session chat\\x1b]0;title\\x07 (due " in line
    assert '"red\\u001b[31m\\nforged line\\u202e"' in line
    assert not any(out.startswith("forged line") for out in proc.out)


# --- stopping while a notify command runs ---------------------------------------------------


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


class SlowNotifier:
    """A notify command that signals a FIFO when it runs and starts a grandchild ``sleep``.

    ``started()`` blocks until the command runs (it writes to the FIFO);
    ``release()`` lets it finish; otherwise it runs until stopped. The
    grandchild's pid lands in ``pid_file``.
    """

    def __init__(self, where: Path) -> None:
        self.started_fifo = where / "started.fifo"
        self.release_fifo = where / "release.fifo"
        self.pid_file = where / "grandchild.pid"
        self.notes = where / "notes.jsonl"
        os.mkfifo(self.started_fifo)
        os.mkfifo(self.release_fifo)
        self.command = (
            f"cat >> '{self.notes}'; "
            f"sh -c 'echo $$ > \"{self.pid_file}\"; exec sleep 600' & "
            f"echo go > '{self.started_fifo}'; read line < '{self.release_fifo}'; kill $!"
        )

    def started(self) -> None:
        with open(self.started_fifo, encoding="utf-8") as fifo:  # blocks until it writes
            assert fifo.read().strip() == "go"

    def release(self) -> None:
        with open(self.release_fifo, "w", encoding="utf-8") as fifo:
            fifo.write("done\n")

    def grandchild(self) -> int:
        return int(self.pid_file.read_text().strip())


def notifying(
    procs: list[Proc], data_dir: Path, home: Path, *extra: str
) -> tuple[str, SlowNotifier, Proc]:
    """A ``serve`` whose slow notify command is running for the one due reminder."""
    (session,) = due_sessions(data_dir, 1)
    notifier = SlowNotifier(data_dir)
    proc = serve(procs, data_dir, home, "--notify-command", notifier.command, *extra)
    proc.wait_line(f"reminder schedule-1 of session {session}")
    notifier.started()
    return session, notifier, proc


def test_a_stop_that_cuts_a_running_notify_command_names_the_reminder_and_exits_3(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    session, notifier, proc = notifying(procs, data_dir, home, "--stop-timeout", "0.5")
    assert proc.stop() == 3
    assert proc.err[-1] == (
        f"cut: reminder schedule-1 of session {session} will be presented again at the next "
        "start: its turn was still running after the stop timeout (0.5 s) and was cut"
    )
    assert not _alive(notifier.grandchild())  # the notify command's whole group was stopped
    assert delivery_counts(data_dir, owed=True) == {session: (1, 1, 0)}  # turn not complete
    again = serve(procs, data_dir, home)
    again.wait_line(f"reminder schedule-1 of session {session}")
    assert again.stop() == 0
    assert delivery_counts(data_dir) == {session: (1, 1, 1)}


def test_a_stop_waits_for_a_notify_command_that_finishes_in_time_and_repeats_nothing(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    session, notifier, proc = notifying(procs, data_dir, home, "--stop-timeout", "60")
    proc.popen.send_signal(signal.SIGTERM)
    proc.wait_line("stopping: ")  # the stop waits for the turn in flight
    notifier.release()
    assert proc.stop() == 0
    assert not [line for line in proc.err if line.startswith("cut:")]
    assert delivery_counts(data_dir) == {session: (1, 1, 1)}  # its completion was written
    again = serve(procs, data_dir, home)
    assert again.stop() == 0
    assert not [line for line in again.out if " reminder " in line]


def test_a_notify_command_past_its_timeout_is_stopped_with_everything_it_started(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    session, notifier, proc = notifying(procs, data_dir, home, "--notify-timeout", "0.5")
    assert proc.stop() == 0  # the stop waits for the turn; the timeout ends the command first
    assert any("did not finish within 0.5 s and was stopped" in line for line in proc.err)
    assert not _alive(notifier.grandchild())
    assert delivery_counts(data_dir) == {session: (1, 1, 1)}  # presented; the failure reported


def test_serve_shows_each_warning_on_one_escaped_line_and_a_repeat_once_per_window(
    capsys: pytest.CaptureFixture[str],
) -> None:
    now = [100.0]
    handler = WarningsOnStderr(repeat_s=60.0, clock=lambda: now[0])
    log = logging.getLogger("dsh_schedule.test_serve_warnings")
    log.addHandler(handler)
    log.propagate = False
    try:
        try:
            raise OSError("backend detail")
        except OSError:
            log.error("session store commit failed (%s)", "SQLITE_FULL", exc_info=True)
        log.error("session store commit failed (%s)", "SQLITE_FULL")
        log.info("not shown")
        log.warning("session %r\nforged", "chat\x1b")
        now[0] += 61.0
        log.error("session store commit failed (%s)", "SQLITE_FULL")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    assert capsys.readouterr().err.splitlines() == [
        "serve: error: session store commit failed (SQLITE_FULL)",
        "serve: warning: session 'chat\\\\x1b'\\nforged",  # repr, then escaped
        "serve: error: session store commit failed (SQLITE_FULL) (and 1 more time(s) since it "
        "was last shown)",
    ]


def test_serve_holds_no_reminder_in_memory_after_presenting_it(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.serve_soak",
            "--quick",
            "--data",
            str(tmp_path / "data"),
            "--results",
            str(results),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads((results / "serve_soak.json").read_text())
    assert [row["presented"] for row in out["waves"]] == [40, 80, 120]
    assert [row["presented_alive"] for row in out["waves"]] == [0, 0, 0]
    assert out["check"]["wrong"] == out["check"]["still_owed"] == 0


@pytest.mark.parametrize("outcome", ["fails", "never finishes"])
def test_a_stop_closes_the_host_and_reports_whatever_disposing_the_plugin_does(
    tmp_path: Path, mocker: MockerFixture, outcome: str
) -> None:
    server = Server(tmp_path / "data", echo=lambda text: None)
    server.start()
    host, plugin = server.host, server.plugin
    assert host is not None and plugin is not None
    real_dispose = plugin.dispose
    disposing: Future[None] = Future()  # what dispose() returns, every time it is called
    if outcome == "fails":
        disposing.set_exception(RuntimeError("disposing failed"))
    mocker.patch.object(plugin, "dispose", return_value=disposing)
    close = mocker.spy(host, "close")
    assert server.stop(timeout=0.2) == ()  # nothing escapes, nothing was cut
    close.assert_called_once()
    assert host.persistence is None or host.persistence.closed
    real_dispose().result(timeout=TIMEOUT)
