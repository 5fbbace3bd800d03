"""Run ``dsh-schedule`` through its real entry point and build session stores for its tests."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import SqliteEventStore
from host_bridge.protocols import SessionEvent, SessionHeader
from messages import (
    CreateChange,
    DeleteChange,
    DispatchChange,
    ScheduleChange,
    create_after_schedule_record,
    encode_schedule_change,
)

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Run:
    """The outcome of one command run."""

    code: int
    out: str
    err: str


def cli_env(home: Path) -> dict[str, str]:
    """The environment for a command: the default data dir points into the test's tmp dir."""
    env = dict(os.environ)
    env["DSH_SCHEDULE_HOME"] = str(home)
    env["PYTHONIOENCODING"] = "utf-8"
    env.pop("XDG_DATA_HOME", None)
    return env


def run_cli(
    args: Sequence[str],
    home: Path,
    *,
    stdin: str | None = None,
    timeout: float = 60,
    script: bool = False,
    read_only: Path | None = None,
    env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> Run:
    """Run ``python -m host_bridge.cli ARGS`` (or the installed script) and capture it.

    ``read_only``: a file the command may read but not write (see :func:`read_only_prefix`).
    ``env``: extra environment variables. ``prefix``: a command to run it under.
    """
    if script:
        found = shutil.which("dsh-schedule", path=str(Path(sys.executable).parent))
        assert found is not None, "the dsh-schedule script is not installed next to python"
        command = [found, *args]
    else:
        command = [sys.executable, "-m", "host_bridge.cli", *args]
    if read_only is not None:
        command = [*read_only_prefix(read_only), *command]
    command = [*prefix, *command]
    environment = cli_env(home)
    environment.update(env or {})
    done = subprocess.run(
        command,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        env=environment,
        cwd=REPO,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


_BIND_READ_ONLY = (
    'f="$1"; shift; mount --bind "$f" "$f" && mount -o remount,bind,ro "$f" && exec "$@"'
)


def read_only_prefix(path: Path) -> list[str]:
    """A command prefix under which ``path`` cannot be written, even by root.

    ``path`` is a file or a directory. Not root: ``path`` loses its write
    bits (nothing to prefix; the caller restores them). Root ignores those, so
    the command runs in its own mount namespace with ``path`` bind-mounted
    read-only; the test is skipped where that is not allowed.
    """
    if os.geteuid() != 0:
        path.chmod(0o555 if path.is_dir() else 0o444)
        return []
    allowed = shutil.which("unshare") is not None and (
        subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False).returncode == 0
    )
    if not allowed:
        pytest.skip("a read-only file for root needs unshare -m (mount namespaces)")
    return ["unshare", "-m", "sh", "-c", _BIND_READ_ONLY, "sh", str(path)]


def without_file_privileges() -> list[str]:
    """A command prefix under which file permissions apply, even to root.

    Not root: nothing to prefix. Root runs the command without the
    capabilities that override file permissions (``setpriv`` drops
    ``CAP_DAC_OVERRIDE`` and ``CAP_DAC_READ_SEARCH`` from its bounding set);
    the test is skipped where that is not possible.
    """
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    allowed = shutil.which("setpriv") is not None and (
        subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode == 0
    )
    if not allowed:
        pytest.skip("an unreadable file for root needs setpriv (util-linux)")
    return prefix


_LOCK_HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    """
)


@contextlib.contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another process holds an exclusive write lock on the SQLite file ``path`` meanwhile."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _LOCK_HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline() == "locked\n"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def assert_one_line_error(run: Run, code: int, *fragments: str) -> str:
    """Assert ``run`` ended with exit ``code`` and one ``Error:`` line holding ``fragments``.

    Returns that line. Other stderr lines may come before it (a command's own
    error when the store then failed too), never a traceback.
    """
    assert run.code == code, (run.code, run.err)
    assert "Traceback" not in run.err
    lines = run.err.splitlines()
    assert lines, "nothing on stderr"
    last = lines[-1]
    assert last.startswith("Error: "), run.err
    for fragment in fragments:
        assert fragment in last, (fragment, last)
    return last


_UNSAFE = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def assert_printable(text: str) -> None:
    """Assert ``text`` has no character a terminal would act on, other than its newlines."""
    bad = [
        f"U+{ord(char):04X}"
        for char in text
        if char != "\n" and unicodedata.category(char) in _UNSAFE
    ]
    assert not bad, bad


def write_session(
    data_dir: Path,
    session_id: str,
    events: Sequence[tuple[str, object]],
    *,
    seed_length: int | None = None,
    parent: str | None = None,
    start_ms: int = 1_800_000_000_000,
) -> None:
    """Store a session with exactly these ``(type, data)`` events, bypassing every check."""
    store = SqliteEventStore(store_path(data_dir))
    try:
        rows = [
            (SessionEvent(kind, seq, start_ms + seq, data), encode_payload(data))
            for seq, (kind, data) in enumerate(events)
        ]
        store.create_session(SessionHeader(session_id, seed_length, parent), rows)
        assert store.flush_all().result(timeout=10) is True
    finally:
        store.close()


def change(value: ScheduleChange) -> tuple[str, object]:
    """A ``schedule/change`` event for :func:`write_session`."""
    return ("schedule/change", encode_schedule_change(value))


def create(schedule_id: str, prompt: str, after_seconds: int, now_ms: int) -> tuple[str, object]:
    """A create change made ``now_ms`` for ``after_seconds``."""
    record = create_after_schedule_record(schedule_id, prompt, after_seconds, now_ms)
    return change(CreateChange(record))


def dispatch(schedule_id: str) -> tuple[str, object]:
    """A dispatch change."""
    return change(DispatchChange(schedule_id))


def delete(schedule_id: str) -> tuple[str, object]:
    """A delete change."""
    return change(DeleteChange(schedule_id))


def message(text: str) -> tuple[str, object]:
    """An ordinary conversation event."""
    return ("message", {"role": "user", "content": text})


STORE_COMMANDS = [
    ["inspect"],
    ["verify"],
    ["chat", "--session", "s1"],
    ["serve"],
    ["reindex"],
    ["demo", "--fast"],
]
"""Every command that opens the store (``catalog`` does not), with the arguments it needs."""


# --- long-running commands ------------------------------------------------------------------

TIMEOUT = 60.0
"""How long a test waits for a line of a subprocess or for it to end."""
EOF_LINE = "\x00end of output"
"""Put on :attr:`Proc.lines` when the process's stdout ends."""


class Proc:
    """A subprocess whose stdout and stderr lines are collected by threads."""

    def __init__(
        self,
        args: Sequence[str],
        home: Path,
        env: dict[str, str] | None = None,
        *,
        stdin: bool = False,
    ) -> None:
        environment = cli_env(home)
        environment.update(env or {})
        self.popen = subprocess.Popen(
            [sys.executable, *args],
            cwd=REPO,
            env=environment,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.out: list[str] = []
        self.err: list[str] = []
        assert self.popen.stdout is not None and self.popen.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(self.popen.stdout, self.out, True)),
            threading.Thread(target=self._read, args=(self.popen.stderr, self.err, False)),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: IO[str], into: list[str], announce: bool) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))
            if announce:
                self.lines.put(line.rstrip("\n"))
        if announce:
            self.lines.put(EOF_LINE)

    def wait_line(self, predicate: str) -> str:
        """The next stdout line containing ``predicate`` (fails after the timeout)."""
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT)
            except queue.Empty:
                seen = f"{self.out} {self.err}"
                raise AssertionError(f"no line with {predicate!r}; got {seen}") from None
            if line == EOF_LINE:
                raise AssertionError(f"the process ended; no line with {predicate!r}: {self.out}")
            if predicate in line:
                return line

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait for the exit status (negative: killed by a signal)."""
        self.popen.send_signal(sig)
        return self._wait()

    def finish(self, stdin: str = "") -> int:
        """Write ``stdin`` (made with ``stdin=True``), close it and wait for the exit status."""
        assert self.popen.stdin is not None
        self.popen.stdin.write(stdin)
        self.popen.stdin.close()
        return self._wait()

    def kill(self) -> None:
        """Kill it if it still runs (a test's clean-up)."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        if self.popen.stdin is not None and not self.popen.stdin.closed:
            self.popen.stdin.close()

    def _wait(self) -> int:
        code = self.popen.wait(timeout=TIMEOUT)
        for reader in self._readers:
            reader.join(timeout=TIMEOUT)
        return code


def deliveries(events: Sequence[SessionEvent]) -> tuple[int, int, int]:
    """A session's dispatches, reminder inbox entries and their completed turns."""
    dispatches = sum(
        1
        for e in events
        if e.type == "schedule/change" and e.data.get("operation") == "dispatch"
    )
    inbox = [
        e.seq
        for e in events
        if e.type == INBOX_EVENT and e.data["source"].get("plugin") == "tool-schedule"
    ]
    done = Counter(e.data["inbox"] for e in events if e.type == TURN_COMPLETED_EVENT)
    return dispatches, len(inbox), sum(done[seq] for seq in inbox)


def round_trip(*options: str, prefix: str) -> list[dict[str, Any]]:
    """Run ``docs/examples/openai_round_trip.py`` with ``options``; its ``prefix`` JSON lines."""
    example = REPO / "docs" / "examples" / "openai_round_trip.py"
    done = subprocess.run(
        [sys.executable, str(example), *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [
        json.loads(line.removeprefix(prefix))
        for line in done.stdout.splitlines()
        if line.startswith(prefix)
    ]
