"""Fault injection on the embedded host: the store fails, disappears or hangs under the tools.

Every tool answers with a closed value (``persistence_uncertain`` when durability
cannot be confirmed), nothing already durable is lost, and once the fault clears
the next ``schedule_list`` confirms the creates retained meanwhile and the owner
delivers them. The figures in docs/reliability.md come from these tests.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from host_bridge._futures import resolved
from host_bridge.embedded.agents import RETRY_FIRST_MS, EmbeddedAgent
from host_bridge.embedded.inbox import INBOX_EVENT, TURN_COMPLETED_EVENT
from host_bridge.embedded.stores import StoreWriteError
from host_bridge.embedded.stores import _sqlite as sqlite_store
from host_bridge.protocols import DEFAULT_FLUSH_TIMEOUT_MS, ToolResult
from host_bridge.testing import settle
from messages import SCHEDULE_CHANGE_TYPE
from tests.changes import reopened, reopened_changes
from tests.cli.helpers import write_locked
from tests.reliability.rig import Rig, durable_changes

HOUR = 3600


def uncertain(operation: str, schedule_id: str | None = None) -> dict[str, Any]:
    """The shape of a ``persistence_uncertain`` value (its message is checked separately)."""
    value: dict[str, Any] = {"code": "persistence_uncertain", "operation": operation}
    if schedule_id is not None:
        value["id"] = schedule_id
    return value


def without_message(value: dict[str, Any]) -> dict[str, Any]:
    assert isinstance(value.get("message"), str) and value["message"]
    return {k: v for k, v in value.items() if k != "message"}


class FailingCommit:
    """A ``fault_hook`` for the store's writer: raises ``error`` before COMMIT while set."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.error is not None:
            raise self.error


# --- the store refuses writes --------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "attempt to write a readonly database",  # read-only
        "database or disk is full",  # ENOSPC
        "database is locked",  # another writer
    ],
)
def test_a_failing_store_answers_persistence_uncertain_and_recovers(
    rig: Rig, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = rig.agent()
    assert rig.create(agent, "kept", 60)["id"] == "schedule-1"
    fault = FailingCommit()
    monkeypatch.setattr(rig.store, "fault_hook", fault)
    fault.error = sqlite3.OperationalError(message)

    assert without_message(rig.create(agent, "during", 120)) == uncertain("create", "schedule-2")
    assert without_message(rig.call(agent, "schedule_list", {})) == uncertain("list")
    assert without_message(rig.delete(agent, "schedule-1")) == uncertain("delete", "schedule-1")
    assert durable_changes(rig.path, "s1") == [("create", "schedule-1")]  # nothing durable lost
    rig.advance(60_000, agent)  # schedule-1 falls due while the store refuses writes
    assert rig.reminders(agent) == []  # no decision without a durable preflight

    fault.error = None  # the fault clears
    assert rig.list_ids(agent) == ["schedule-1", "schedule-2"]  # the retained create is confirmed
    rig.settle(agent)
    assert rig.reminders(agent) == ["schedule-1"]  # the list's recompute delivered the overdue one
    rig.advance(60_000, agent)
    assert rig.reminders(agent) == ["schedule-1", "schedule-2"]
    rig.close()
    assert reopened_changes(rig.path, "s1") == [
        ("create", "schedule-1"),
        ("create", "schedule-2"),
        ("dispatch", "schedule-1"),
        ("dispatch", "schedule-2"),
    ]


def test_a_store_locked_by_another_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 100)  # read when connections open
    rig = Rig(tmp_path / "data")
    try:
        agent = rig.agent()
        assert rig.create(agent, "kept", HOUR)["id"] == "schedule-1"
        with write_locked(rig.path):  # until the holder has exited
            created = rig.create(agent, "while locked", HOUR)
            assert without_message(created) == uncertain("create", "schedule-2")
            assert without_message(rig.call(agent, "schedule_list", {})) == uncertain("list")
            assert durable_changes(rig.path, "s1") == [("create", "schedule-1")]
        assert rig.list_ids(agent) == ["schedule-1", "schedule-2"]
    finally:
        rig.close()
    assert reopened_changes(rig.path, "s1") == [("create", "schedule-1"), ("create", "schedule-2")]


_MOUNT_TINY_FS = textwrap.dedent(
    """
    import json, os, subprocess, sys
    from pathlib import Path

    mount = Path(sys.argv[1])
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        print(json.dumps({"skip": made.stderr.decode(errors="replace")}))
        sys.exit(0)
    """
)


def on_a_tiny_file_system(script: str, tmp_path: Path) -> Any:
    """Run ``script`` on a 2 MiB tmpfs at ``mount``, in a private mount namespace; its last
    JSON line. The script may use ``json``, ``os``, ``subprocess``, ``sys``, ``Path``.

    Skips where the machine offers no such namespace or cannot mount a tmpfs.
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare(1) is not available")
    mount = tmp_path / "mnt"
    mount.mkdir()
    run = subprocess.run(
        [unshare, "-rm", sys.executable, "-c", _MOUNT_TINY_FS + script, str(mount)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if run.returncode != 0 and "unshare" in run.stderr:
        pytest.skip(f"no private mount namespace here: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(f"cannot mount a tmpfs: {out['skip']}")
    return out


_TINY_FS = textwrap.dedent(
    """
    from host_bridge.embedded.host import EmbeddedHost
    from host_bridge.embedded.stores import SqliteEventStore
    from host_bridge._plugin import install_schedule
    from host_bridge.testing import FakeClock, FakeTimers

    clock = FakeClock()
    host = EmbeddedHost(mount / "data", clock=clock, timers=FakeTimers(clock))
    plugin = install_schedule(host.context())
    agent = host.spawn_root(session_id="s1")

    def call(name, arguments):
        return host.tools.execute(name, arguments, agent=agent, timeout=30).value

    out = {"kept": call("schedule_create", {"prompt": "kept", "after_seconds": 3600})}
    ballast = mount / "ballast"
    with open(ballast, "wb", buffering=0) as sink:
        try:
            while True:
                sink.write(bytes(16384))
        except OSError as error:
            out["ballast_error"] = error.strerror
    answers = []
    for n in range(40):
        answers.append(call("schedule_create", {"prompt": f"during {n} " + "x" * 3000,
                                                "after_seconds": 3600}))
        if "code" in answers[-1]:
            break
    out["answers"] = answers
    out["list_while_full"] = call("schedule_list", {})
    os.unlink(ballast)  # the fault clears
    listed = call("schedule_list", {})
    out["list_after"] = [view["id"] for view in listed.get("schedules", [])]
    plugin.dispose().result(timeout=30)
    host.close()
    store = SqliteEventStore(mount / "data" / "sessions.sqlite3", create=False)
    stored = store.load("s1")
    store.close()
    out["stored_creates"] = [
        e.data["schedule"]["id"] for e in stored.events
        if e.type == "schedule/change" and e.data["operation"] == "create"
    ]
    print(json.dumps(out))
    """
)


def test_a_full_file_system(tmp_path: Path) -> None:
    """Real ENOSPC: the store lives on a tiny tmpfs (in a private mount namespace) that fills up."""
    out = on_a_tiny_file_system(_TINY_FS, tmp_path)
    assert out["kept"]["id"] == "schedule-1"
    assert out["ballast_error"] == "No space left on device"
    *accepted, refused = out["answers"]
    assert all("scheduledAt" in value for value in accepted)
    refused_id = f"schedule-{len(accepted) + 2}"
    assert without_message(refused) == uncertain("create", refused_id)
    assert without_message(out["list_while_full"]) == uncertain("list")
    retained = ["schedule-1", *(value["id"] for value in accepted), refused_id]
    assert out["list_after"] == retained
    assert out["stored_creates"] == retained


# --- a disk-full outage across a reminder's due time -----------------------------------------


def reminder_ledger(path: Path, session_id: str) -> dict[str, list[str]]:
    """Reopen the closed store and list, per reminder id, what its delivery left in the log.

    ``queued``: inbox entries carrying the reminder; ``started``/``completed``:
    turns of those entries; ``dispatched``: its ``dispatch`` records.
    """
    stored = reopened(path, session_id)
    ledger: dict[str, list[str]] = {"queued": [], "started": [], "completed": [], "dispatched": []}
    entry_ids: dict[int, str] = {}
    for event in stored.events:
        if event.type == INBOX_EVENT:
            text = "\n".join(event.data["content"])
            if text.startswith("[SCHEDULE REMINDER]"):
                line = text.split("schedule_id_json: ")[1].split("\n")[0]
                entry_ids[event.seq] = json.loads(line)
                ledger["queued"].append(entry_ids[event.seq])
        elif event.type == "message" and event.data.get("inbox") in entry_ids:
            ledger["started"].append(entry_ids[event.data["inbox"]])
        elif event.type == TURN_COMPLETED_EVENT and event.data["inbox"] in entry_ids:
            ledger["completed"].append(entry_ids[event.data["inbox"]])
        elif event.type == SCHEDULE_CHANGE_TYPE and event.data["operation"] == "dispatch":
            ledger["dispatched"].append(event.data["id"])
    return ledger


def owner_quiet(rig: Rig, agent: EmbeddedAgent) -> None:
    """Settle the owner and the session; the agent itself may be waiting for durability."""
    owner = rig.plugin.owner_of(agent)
    assert owner is not None
    for _ in range(3):
        settle(owner)
        rig.plugin.wait_quiet(agent)
        settle(agent.session.actor_ref)


@pytest.mark.parametrize("restart", ["after space returns", "while the disk is still full"])
def test_a_disk_full_outage_across_the_due_time_with_a_clean_restart_delivers_once(
    tmp_path: Path, restart: str
) -> None:
    data = tmp_path / "data"
    full = sqlite3.OperationalError("database or disk is full")
    rig = Rig(data)
    agent = rig.agent()
    assert rig.create(agent, "due soon", 60)["id"] == "schedule-1"
    fault = FailingCommit()
    rig.store.fault_hook = fault
    fault.error = full  # the disk fills up before the reminder is due

    rig.timers.advance(60_000)  # due: preflight passes (nothing queued), the dispatch commit fails
    owner_quiet(rig, agent)
    assert fault.calls >= 1
    assert rig.reminders(agent) == []  # the model never saw it: its inbox entry is not durable
    assert len(agent.queued) == 1  # held, not dropped
    assert not agent.when_idle().done()
    assert durable_changes(rig.path, "s1") == [("create", "schedule-1")]

    rig.plugin.dispose().result(timeout=10)  # a clean shutdown in the middle of the outage
    unwritten = rig.host.close()  # the unwritten entry and dispatch are reported, not acknowledged
    assert isinstance(unwritten, StoreWriteError) and unwritten.category == "OperationalError"
    rig.closed = True
    assert durable_changes(rig.path, "s1") == [("create", "schedule-1")]

    again = Rig(data)
    try:
        if restart == "while the disk is still full":
            again.store.fault_hook = fault
        agent = again.agent()
        again.timers.advance(60_000)
        owner_quiet(again, agent)
        if restart == "while the disk is still full":
            assert again.reminders(agent) == []
            fault.error = None  # space returns: the agent's back-off retry finds it
            again.timers.advance(RETRY_FIRST_MS)
        again.settle(agent)  # the reminder's turn starts once its entry is durable
        assert again.reminders(agent) == ["schedule-1"]
    finally:
        again.close()
    assert reminder_ledger(again.path, "s1") == {
        "queued": ["schedule-1"],
        "started": ["schedule-1"],
        "completed": ["schedule-1"],
        "dispatched": ["schedule-1"],
    }

    last = Rig(data)  # and nothing is repeated later
    try:
        agent = last.agent()
        last.timers.advance(3_600_000)
        last.settle(agent)
        assert last.reminders(agent) == []
    finally:
        last.close()


def test_a_disk_full_outage_that_clears_while_running_delivers_once(rig: Rig) -> None:
    agent = rig.agent()
    rig.create(agent, "due soon", 60)
    fault = FailingCommit()
    rig.store.fault_hook = fault
    fault.error = sqlite3.OperationalError("database or disk is full")
    rig.timers.advance(60_000)
    owner_quiet(rig, agent)
    rig.timers.advance(RETRY_FIRST_MS)  # a retry while the disk is still full
    owner_quiet(rig, agent)
    # The retry's flush fails on the writer thread, which then arms the doubled back-off;
    # a flush requested after it settles after it, so the back-off is armed by then.
    with contextlib.suppress(StoreWriteError):
        rig.store.flush_all().result(timeout=30)
    assert rig.reminders(agent) == []
    fault.error = None
    rig.advance(2 * RETRY_FIRST_MS, agent)  # the doubled back-off
    assert rig.reminders(agent) == ["schedule-1"]
    rig.close()
    assert reminder_ledger(rig.path, "s1") == {
        "queued": ["schedule-1"],
        "started": ["schedule-1"],
        "completed": ["schedule-1"],
        "dispatched": ["schedule-1"],
    }


_TINY_FS_OUTAGE = textwrap.dedent(
    """
    from host_bridge.embedded.host import EmbeddedHost
    from host_bridge.embedded.stores import StoreWriteError
    from host_bridge._plugin import install_schedule
    from host_bridge.testing import FakeClock, FakeTimers, settle

    out = {}

    def host_run(name, work):
        seen = []

        def model(turn):
            if turn.message.text.startswith("[SCHEDULE REMINDER]"):
                seen.append(turn.message.text.split("schedule_id_json: ")[1].split(chr(10))[0])

        clock = FakeClock()
        timers = FakeTimers(clock)
        host = EmbeddedHost(mount / "data", clock=clock, timers=timers)
        plugin = install_schedule(host.context())
        agent = host.spawn_root(session_id="s1", model=model)
        try:
            work(host, plugin, agent, timers)
        finally:
            plugin.dispose().result(timeout=30)
            unwritten = host.close()
            if isinstance(unwritten, StoreWriteError):
                out[name + "_close"] = unwritten.category
        out[name + "_seen"] = seen

    def quiet(plugin, agent):
        for _ in range(3):
            settle(plugin.owner_of(agent))
            plugin.wait_quiet(agent, timeout=30)

    def first(host, plugin, agent, timers):
        created = host.tools.execute(
            "schedule_create", {"prompt": "due " + "x" * 4000, "after_seconds": 60},
            agent=agent, timeout=30,
        ).value
        out["created"] = created.get("id")
        quiet(plugin, agent)  # the drive that follows a create has finished: nothing in flight
        with open(mount / "ballast", "wb", buffering=0) as sink:
            for size in (65536, 4096, 512, 64, 1):
                try:
                    while True:
                        sink.write(bytes(size))
                except OSError as error:
                    out["ballast_error"] = error.strerror
        timers.advance(60_000)
        quiet(plugin, agent)
        out["queued_while_full"] = len(agent.queued)

    def second(host, plugin, agent, timers):
        timers.advance(60_000)
        quiet(plugin, agent)
        agent.when_idle().result(timeout=30)

    host_run("first", first)
    os.unlink(mount / "ballast")  # space returns
    host_run("second", second)
    host_run("third", second)
    print(json.dumps(out))
    """
)


def test_a_real_disk_full_outage_with_a_clean_restart_delivers_once(tmp_path: Path) -> None:
    """Real ENOSPC on a tiny tmpfs: the dispatch commit fails, the host closes, space returns."""
    out = on_a_tiny_file_system(_TINY_FS_OUTAGE, tmp_path)
    assert out["created"] == "schedule-1"
    assert out["ballast_error"] == "No space left on device"
    assert out["first_seen"] == []  # due while full: never handed to the model
    assert out["queued_while_full"] == 1
    assert out["first_close"] == "SQLITE_FULL"  # the clean shutdown could not write it
    assert out["second_seen"] == ['"schedule-1"']  # after space returned: exactly once
    assert "second_close" not in out
    assert out["third_seen"] == []  # and never again


# --- the store disappears ----------------------------------------------------------------------


def test_store_files_deleted_under_the_host_are_rebuilt(rig: Rig) -> None:
    agent = rig.agent()
    assert rig.create(agent, "kept", 60)["id"] == "schedule-1"
    for name in ("sessions.sqlite3", "sessions.sqlite3-wal", "sessions.sqlite3-shm"):
        (rig.data_dir / name).unlink()

    created = rig.create(agent, "after the delete", 120)
    assert created["id"] == "schedule-2"  # confirmed only once it is in a file at the path
    assert rig.path.exists()
    assert durable_changes(rig.path, "s1") == [("create", "schedule-1"), ("create", "schedule-2")]
    rig.advance(120_000, agent)
    assert rig.reminders(agent) == ["schedule-1", "schedule-2"]
    rig.close()
    assert reopened_changes(rig.path, "s1") == [
        ("create", "schedule-1"),
        ("create", "schedule-2"),
        ("dispatch", "schedule-1"),
        ("dispatch", "schedule-2"),
    ]


def test_only_the_wal_deleted_under_the_host(rig: Rig) -> None:
    agent = rig.agent()
    rig.create(agent, "kept", HOUR)
    (rig.data_dir / "sessions.sqlite3-wal").unlink()  # the committed create lives only in it
    assert rig.create(agent, "next", HOUR)["id"] == "schedule-2"
    rig.close()
    assert reopened_changes(rig.path, "s1") == [("create", "schedule-1"), ("create", "schedule-2")]


def test_data_directory_removed_then_recreated(rig: Rig) -> None:
    agent = rig.agent()
    rig.create(agent, "kept", HOUR)
    shutil.rmtree(rig.data_dir)

    assert without_message(rig.create(agent, "lost dir", HOUR)) == uncertain("create", "schedule-2")
    assert without_message(rig.call(agent, "schedule_list", {})) == uncertain("list")
    rig.data_dir.mkdir()  # the fault clears
    assert rig.list_ids(agent) == ["schedule-1", "schedule-2"]
    rig.close()
    assert reopened_changes(rig.path, "s1") == [("create", "schedule-1"), ("create", "schedule-2")]


def test_store_replaced_by_another_file_is_never_written(rig: Rig) -> None:
    agent = rig.agent()
    rig.create(agent, "kept", HOUR)
    for name in ("sessions.sqlite3", "sessions.sqlite3-wal", "sessions.sqlite3-shm"):
        (rig.data_dir / name).unlink()
    foreign = sqlite3.connect(rig.path)
    foreign.execute("CREATE TABLE foreign_data(x)")
    foreign.commit()
    foreign.close()

    assert without_message(rig.create(agent, "x", HOUR)) == uncertain("create", "schedule-2")
    assert without_message(rig.call(agent, "schedule_list", {})) == uncertain("list")
    rig.plugin.dispose().result(timeout=10)
    unwritten = rig.host.close()  # the unflushed rows are reported, not silently dropped
    assert isinstance(unwritten, StoreWriteError)
    assert "STORE_FILE_REPLACED" in str(unwritten)
    assert rig.host.close() is None  # told once
    rig.closed = True
    check = sqlite3.connect(rig.path)
    tables = [row[0] for row in check.execute("SELECT name FROM sqlite_master")]
    check.close()
    assert tables == ["foreign_data"]  # the other file was left alone


# --- the persistence listener misbehaves -----------------------------------------------------


def expire(rig: Rig, agent: EmbeddedAgent, pending: Future[ToolResult]) -> ToolResult:
    """Let flush timeouts pass until ``pending`` answers.

    Transactions queued ahead of the call (e.g. the delivery drive a successful
    preflight requests) wait for their own flush timeout first.
    """
    owner = rig.plugin.owner_of(agent)
    assert owner is not None
    for _ in range(5):
        settle(owner)
        if pending.done():
            break
        rig.timers.advance(DEFAULT_FLUSH_TIMEOUT_MS)
    return pending.result(timeout=10)


class Listener:
    """Replaces the store's ``flush`` for one session with a scripted behaviour."""

    def __init__(self, real: Callable[[str], Future[bool]], session_id: str) -> None:
        self.real = real
        self.session_id = session_id
        self.script: list[str] = []
        self.default = "ok"
        self.hung: list[Future[bool]] = []

    def __call__(self, session_id: str) -> Future[bool]:
        if session_id != self.session_id:
            return self.real(session_id)
        mode = self.script.pop(0) if self.script else self.default
        if mode == "false":
            return resolved(False)
        if mode == "raise":
            raise OSError("the persistence listener broke")
        if mode == "hang":
            future: Future[bool] = Future()
            self.hung.append(future)
            return future
        return self.real(session_id)


@pytest.mark.parametrize("mode", ["false", "raise"])
def test_a_listener_that_answers_false_or_raises(
    rig: Rig, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = rig.agent()
    rig.create(agent, "kept", HOUR)
    listener = Listener(rig.store.flush, "s1")
    monkeypatch.setattr(rig.store, "flush", listener)
    listener.script = ["ok"]  # the preflight passes, the barrier does not
    listener.default = mode

    assert without_message(rig.create(agent, "during", HOUR)) == uncertain("create", "schedule-2")
    assert without_message(rig.call(agent, "schedule_list", {})) == uncertain("list")
    assert without_message(rig.delete(agent, "schedule-1")) == uncertain("delete", "schedule-1")
    listener.default = "ok"
    assert rig.list_ids(agent) == ["schedule-1", "schedule-2"]
    rig.close()
    assert reopened_changes(rig.path, "s1") == [("create", "schedule-1"), ("create", "schedule-2")]


def test_a_hanging_listener_times_out_leaves_other_agents_alone_and_dispose_finishes(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = rig.agent("s1")
    other = rig.agent("s2")
    rig.create(agent, "kept", HOUR)
    listener = Listener(rig.store.flush, "s1")
    monkeypatch.setattr(rig.store, "flush", listener)
    listener.script = ["ok"]
    listener.default = "hang"

    pending = rig.submit(agent, "schedule_create", {"prompt": "during", "after_seconds": HOUR})
    assert not pending.done()  # the barrier hangs
    assert rig.create(other, "unaffected", HOUR)["id"] == "schedule-1"  # another session works
    created = rig.value("schedule_create", expire(rig, agent, pending))
    assert without_message(created) == uncertain("create", "schedule-2")

    listed = rig.submit(agent, "schedule_list", {})
    assert without_message(rig.value("schedule_list", expire(rig, agent, listed))) == uncertain(
        "list"
    )

    listener.default = "ok"  # the fault clears
    assert rig.list_ids(agent) == ["schedule-1", "schedule-2"]

    listener.default = "hang"
    stuck = rig.submit(agent, "schedule_list", {})
    disposed = rig.plugin.dispose()
    assert not disposed.done()  # dispose waits for the preflight in flight ...
    rig.timers.advance(DEFAULT_FLUSH_TIMEOUT_MS)  # ... at most the flush timeout
    disposed.result(timeout=10)
    assert without_message(rig.value("schedule_list", stuck.result(timeout=10))) == uncertain(
        "list"
    )
    rig.host.close()
    rig.closed = True
    assert reopened_changes(rig.path, "s1") == [("create", "schedule-1"), ("create", "schedule-2")]
    assert reopened_changes(rig.path, "s2") == [("create", "schedule-1")]


def test_a_stuck_disk_times_out_then_commits_when_it_moves_again(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = rig.agent()
    rig.create(agent, "kept", HOUR)
    gate = threading.Event()
    stuck = threading.Event()

    def hook() -> None:
        stuck.set()
        gate.wait(timeout=60)

    monkeypatch.setattr(rig.store, "fault_hook", hook)
    pending = rig.submit(agent, "schedule_create", {"prompt": "during", "after_seconds": HOUR})
    assert stuck.wait(timeout=10)  # the writer is inside the commit of the barrier
    created = rig.value("schedule_create", expire(rig, agent, pending))
    assert without_message(created) == uncertain("create", "schedule-2")
    gate.set()  # the disk moves again
    monkeypatch.setattr(rig.store, "fault_hook", None)
    assert rig.list_ids(agent) == ["schedule-1", "schedule-2"]
    owner = rig.plugin.owner_of(agent)
    assert owner is not None
    settle(owner)
    rig.close()
    assert reopened_changes(rig.path, "s1") == [("create", "schedule-1"), ("create", "schedule-2")]


# --- serve tells the operator about a full disk ----------------------------------------------

_SERVE_THROUGH_A_FULL_DISK = textwrap.dedent(
    """
    import queue, signal, threading, time
    from host_bridge.protocols import wall_clock_ms
    from tests.cli.helpers import create, write_session

    data = mount / "data"
    write_session(data, "chat", [create("schedule-1", "pill", 1, wall_clock_ms() + 1_000)])
    serve = subprocess.Popen(
        [sys.executable, "-m", "host_bridge.cli", "serve", "--data", str(data)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines = queue.Queue()
    def read(stream, name):
        for line in stream:
            lines.put((name, line.rstrip("\\n")))
    for stream, name in ((serve.stdout, "out"), (serve.stderr, "err")):
        threading.Thread(target=read, args=(stream, name), daemon=True).start()
    seen = []
    def wait_for(name, text):
        while True:
            got = lines.get(timeout=60)
            seen.append(got)
            if got[0] == name and text in got[1]:
                return got[1]
    wait_for("out", "serving ")
    ballast = mount / "ballast"
    with open(ballast, "wb", buffering=0) as sink:
        try:
            while True:
                sink.write(bytes(4096))
        except OSError:
            pass
    warned = wait_for("err", "serve: ")  # the reminder came due: its commit cannot be written
    ballast.unlink()
    wait_for("out", "reminder schedule-1 of session chat")
    serve.send_signal(signal.SIGTERM)
    code = serve.wait(timeout=60)
    while not lines.empty():
        seen.append(lines.get())
    print(json.dumps({"code": code, "warned": warned, "seen": seen}))
    """
)


def test_serve_says_on_stderr_that_the_disk_is_full_and_delivers_once_space_returns(
    tmp_path: Path,
) -> None:
    out = on_a_tiny_file_system(_SERVE_THROUGH_A_FULL_DISK, tmp_path)
    assert out["code"] == 0, out["seen"]
    assert out["warned"].startswith("serve: error: ") and "SQLITE_FULL" in out["warned"], out
    errors = [text for name, text in out["seen"] if name == "err"]
    assert all(text.startswith("serve: ") for text in errors), errors  # one line each, no trace
    assert len(errors) == len(set(errors))  # a repeated message is shown once per minute
    presented = [text for name, text in out["seen"] if name == "out" and " reminder " in text]
    assert len(presented) == 1
