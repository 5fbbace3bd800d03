"""Run ``dsh-schedule`` through its real entry point and build session stores for its tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.sqlite_store import SqliteEventStore
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
) -> Run:
    """Run ``python -m host_bridge.cli ARGS`` (or the installed script) and capture it."""
    if script:
        found = shutil.which("dsh-schedule", path=str(Path(sys.executable).parent))
        assert found is not None, "the dsh-schedule script is not installed next to python"
        command = [found, *args]
    else:
        command = [sys.executable, "-m", "host_bridge.cli", *args]
    done = subprocess.run(
        command,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        env=cli_env(home),
        cwd=REPO,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


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
