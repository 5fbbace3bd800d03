"""``dsh-schedule chat`` beside ``serve``: a held session is asked for and handed over, what
serve presented is listed once, and Ctrl-C ends a ``/wait`` only.

Real subprocesses on a real store; every wait is on an output line (read by a
thread into a queue) or on a process's exit, never on a sleep. ``serve`` runs
with a quiet period far longer than any test, so the session it woke comes to
``chat`` only by a hand-over (or when the test stops serve).
"""

from __future__ import annotations

import signal
import socket
from pathlib import Path

from host_bridge.cli._common import holder_phrase
from host_bridge.embedded.inbox import INBOX_EVENT, queued_data
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore, new_owner, parse_holder
from host_bridge.protocols import TextBlock, UserMessage, wall_clock_ms
from tests.cli.helpers import Proc, assert_one_line_error, create, run_cli, write_session
from tests.cli.test_serve import serve

PROMPT = "stretch\x1b[2J now"
SHOWN = '"stretch\\u001b[2J now"'  # the prompt as every CLI line shows it


def woken_by_serve(data_dir: Path, home: Path, procs: list[Proc]) -> Proc:
    """Session ``s1`` with a person's message and a due reminder, woken and held by serve.

    The person's message makes serve wake a live agent (a cold delivery holds
    nothing); with a quiet period of an hour it keeps the session until stopped.
    """
    write_session(
        data_dir,
        "s1",
        [
            (INBOX_EVENT, queued_data(UserMessage((TextBlock("hello"),), {"kind": "user"}))),
            create("schedule-1", PROMPT, 1, wall_clock_ms() - 1000),
        ],
    )
    proc = serve(procs, data_dir, home, "--quiet-period", "3600")
    proc.wait_line("reminder schedule-1 of session s1")
    return proc


def test_chat_names_the_serve_that_holds_the_session_and_says_what_to_do(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    server = woken_by_serve(data_dir, home, procs)
    run = run_cli(
        ["chat", "--session", "s1", "--data", str(data_dir), "--wait-for-holder", "0"],
        home,
        stdin="/quit\n",
    )
    assert_one_line_error(
        run,
        2,
        f"session s1 is held by `dsh-schedule serve` (pid {server.popen.pid} on host "
        f"{socket.gethostname()}), which did not let it go within 0 s",
        "--quiet-period",
        "retry in a moment, or stop that serve",
        "--wait-for-holder SECONDS waits longer",
    )
    assert "waiting up to" not in run.out  # no wait was asked for
    assert server.stop() == 0


def test_serve_hands_the_session_over_to_chat_long_before_its_quiet_period_ends(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    server = woken_by_serve(data_dir, home, procs)  # quiet period: an hour
    args = ["-m", "host_bridge.cli", "chat", "--session", "s1", "--data", str(data_dir)]
    chat = Proc(args, home, stdin=True)  # the default wait: 15 s
    procs.append(chat)
    waiting = chat.wait_line("session s1 is held by ")
    assert f"`dsh-schedule serve` (pid {server.popen.pid} on host " in waiting
    assert waiting.endswith(
        "; asked it to hand the session over, waiting up to 15 s (Ctrl-C stops waiting)"
    )
    chat.wait_line("serve handed the session over")
    chat.wait_line("session s1: resumed")
    header = chat.wait_line("presented by another process")
    assert header.endswith("while this chat was closed: 1 reminder(s)")
    listed = chat.wait_line("reminder schedule-1")
    assert listed.startswith("  ") and listed.endswith(f"): {SHOWN}")
    assert "(due " in listed
    assert chat.finish("/quit\n") == 0
    assert "\x1b" not in "\n".join(chat.out)
    assert server.popen.poll() is None  # serve let the session go and serves on
    assert server.stop() == 0

    again = run_cli(["chat", "--session", "s1", "--data", str(data_dir)], home, stdin="/quit\n")
    assert again.code == 0, again.err
    assert "session s1: resumed" in again.out
    assert "presented by another process" not in again.out  # listed once only


def waiting_chat(args: list[str], session: str, home: Path, procs: list[Proc]) -> Proc:
    """A chat on the new session ``session`` (run with ``args``), inside ``/wait 600``."""
    chat = Proc(args, home, stdin=True)
    procs.append(chat)
    chat.wait_line(f"session {session}: new")
    assert chat.popen.stdin is not None
    chat.popen.stdin.write("/wait 600\n")
    chat.popen.stdin.flush()
    chat.wait_line("waiting up to 600 s for reminders")
    return chat


def test_ctrl_c_during_wait_ends_the_wait_and_at_the_prompt_ends_the_chat(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    args = ["-m", "host_bridge.cli", "chat", "--session", "w", "--data", str(data_dir)]
    chat = waiting_chat(args, "w", home, procs)
    assert chat.popen.stdin is not None
    chat.popen.send_signal(signal.SIGINT)
    cancelled = chat.wait_line("wait cancelled")
    assert cancelled.endswith("; back to the prompt")
    chat.popen.stdin.write("/create 3600 water the plants\n")
    chat.popen.stdin.flush()
    chat.wait_line("created schedule-1 due ")  # the shell goes on after the cancelled wait
    assert chat.stop(signal.SIGINT) == 0  # at the prompt Ctrl-C leaves, as before
    assert chat.out[-1].startswith("bye: 0 reminder(s) shown this time, 1 reminder(s) still")
    assert not [line for line in chat.err if "Traceback" in line]


def test_a_holder_record_names_its_program_and_one_of_an_earlier_release_still_reads(
    tmp_path: Path,
) -> None:
    assert holder_phrase("vm:28724:1a2b3c4d") == "another process (pid 28724 on host vm)"
    assert holder_phrase("vm:28724:serve-1a2b3c4d") == (
        "`dsh-schedule serve` (pid 28724 on host vm)"
    )
    assert holder_phrase("vm:7:library-1a2b") == "a library host (pid 7 on host vm)"
    assert holder_phrase("vm:7:myapp-1a2b") == "the program 'myapp' (pid 7 on host vm)"
    assert holder_phrase("garbage") == "another process (garbage)"
    assert holder_phrase(None) == "another process"
    holder = parse_holder(new_owner("chat"))
    assert holder is not None and holder.program == "chat"
    store = SqliteEventStore(store_path(tmp_path), program="serve")
    try:
        recorded = parse_holder(store.owner)
        assert recorded is not None and recorded.program == "serve"
    finally:
        store.close()


def test_ctrl_c_while_waiting_for_another_chat_says_the_wait_was_stopped(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    args = ["-m", "host_bridge.cli", "chat", "--session", "c", "--data", str(data_dir)]
    first = Proc(args, home, stdin=True)
    procs.append(first)
    first.wait_line("session c: new")
    second = Proc([*args, "--wait-for-holder", "600"], home, stdin=True)
    procs.append(second)
    waiting = second.wait_line("session c is held by ")
    assert "`dsh-schedule chat` (pid " in waiting
    assert waiting.endswith(
        "waiting up to 600 s for it to let go (when that chat ends) (Ctrl-C stops waiting)"
    )
    assert second.stop(signal.SIGINT) == 2
    [line] = second.err
    assert line.startswith("Error: session c is held by `dsh-schedule chat` (pid ")
    assert ", and the wait was stopped after " in line
    assert line.endswith(" s; leave that chat (/quit), then retry")
    assert "within 600 s" not in line and "waits longer" not in line
    assert first.finish("/quit\n") == 0


def test_a_duration_that_is_not_a_finite_number_is_a_usage_error(
    data_dir: Path, home: Path
) -> None:
    for args in (
        ["chat", "--wait-for-holder", "nan"],
        ["chat", "--wait-for-holder", "inf"],
        ["serve", "--quiet-period", "nan"],
        ["serve", "--notify-timeout", "inf"],
        ["serve", "--stop-timeout", "nan"],
    ):
        run = run_cli([*args, "--data", str(data_dir)], home, stdin="")
        assert run.code == 2, (args, run.err)
        assert "is not a finite number of seconds" in run.err, args


SIGINT_TO_ANOTHER_THREAD = """
import signal, sys, threading
threading.Thread(target=threading.Event().wait, daemon=True).start()  # it alone takes SIGINT
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # threads started later inherit this
from dsh_schedule.cli import main
main(sys.argv[1:])
"""
"""Runs ``dsh-schedule`` where the kernel can hand SIGINT only to a thread that is not main."""


def test_ctrl_c_handed_to_another_thread_still_ends_the_wait_and_the_chat(
    data_dir: Path, home: Path, procs: list[Proc]
) -> None:
    """Regression: a wait without a timeout did not see a signal another thread received."""
    args = ["-c", SIGINT_TO_ANOTHER_THREAD, "chat", "--session", "t", "--data", str(data_dir)]
    chat = waiting_chat(args, "t", home, procs)
    assert chat.popen.stdin is not None
    chat.popen.send_signal(signal.SIGINT)
    chat.wait_line("wait cancelled")
    chat.popen.stdin.write("/list\n")
    chat.popen.stdin.flush()
    chat.wait_line("no active reminders")
    assert chat.stop(signal.SIGINT) == 0
    assert chat.out[-1].startswith("bye: ")
