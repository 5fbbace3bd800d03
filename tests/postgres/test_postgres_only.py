"""PostgreSQL-specific behaviour: schema versions, leases, fencing, several host processes."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from host_bridge._plugin import install_schedule  # noqa: E402
from host_bridge.embedded.agents import Turn  # noqa: E402
from host_bridge.embedded.host import EmbeddedHost  # noqa: E402
from host_bridge.embedded.sessions import SessionError  # noqa: E402
from host_bridge.embedded.stores import (  # noqa: E402
    PostgresEventStore,
    SessionLeaseError,
    StoreError,
    StoreWriteError,
)
from host_bridge.protocols import SessionHeader, wall_clock_ms  # noqa: E402
from host_bridge.testing import FakeClock, FakeTimers  # noqa: E402
from tests.postgres.helpers import append, open_pg  # noqa: E402
from tests.stores.case import Seam  # noqa: E402

TIMEOUT = 20.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_foreign_database_and_a_bad_url_are_clear_errors(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE events(x int)")
    with pytest.raises(StoreError, match="not a dsh-schedule store"):
        PostgresEventStore(pg_url)
    with pytest.raises(StoreError, match="cannot connect"):
        PostgresEventStore("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")


_DRIVER_TEXT = "driver-text-that-must-never-reach-a-diagnostic"


def _server_error(url: str, sqlstate: str) -> Exception:
    """An error the server really raised, with ``sqlstate`` and :data:`_DRIVER_TEXT` as text."""
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute(
                f"DO $$ BEGIN RAISE EXCEPTION '{_DRIVER_TEXT}' USING ERRCODE = '{sqlstate}'; END $$"
            )
        except psycopg.Error as error:
            raised: Exception = error
            return raised
    raise AssertionError("the server raised nothing")


def _diagnostics(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every message logged at INFO or above (what operators see)."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]


def test_a_commit_failure_names_its_sqlstate_and_never_the_driver_text(
    pg_url: str, stores: list[PostgresEventStore], caplog: pytest.LogCaptureFixture
) -> None:
    failure = _server_error(pg_url, "53100")
    assert getattr(failure, "sqlstate", None) == "53100"
    assert _DRIVER_TEXT in str(failure)
    failing = threading.Event()

    def hook() -> None:
        if failing.is_set():
            failing.clear()  # one failed commit
            raise failure

    store = open_pg(pg_url, stores, fault_hook=hook)
    store.acquire_session("s")
    store.create_session(SessionHeader("s"))
    assert store.flush("s").result(TIMEOUT) is True
    append(store, "s", 0)
    failing.set()
    with (
        caplog.at_level(logging.INFO, logger="dsh_schedule"),
        pytest.raises(StoreWriteError) as raised,
    ):
        store.flush("s").result(TIMEOUT)
    assert raised.value.category == "DiskFull 53100"
    assert "DiskFull 53100" in str(raised.value)
    assert _DRIVER_TEXT not in str(raised.value)
    logged = _diagnostics(caplog)
    assert any("commit failed (DiskFull 53100)" in message for message in logged)
    assert not any(_DRIVER_TEXT in message for message in logged)
    assert store.flush("s").result(TIMEOUT) is True  # the rows stayed queued: the retry commits
    stored = store.load("s")
    assert stored is not None and [event.seq for event in stored.events] == [0]


def test_writes_need_the_lease_and_a_second_owner_is_refused(
    pg_url: str, stores: list[PostgresEventStore]
) -> None:
    first = open_pg(pg_url, stores)
    second = open_pg(pg_url, stores)
    with pytest.raises(SessionLeaseError, match="does not hold the lease"):
        first.create_session(SessionHeader("s"))
    assert first.acquire_session("s") == 1
    first.create_session(SessionHeader("s"))
    append(first, "s", 0)
    assert first.flush("s").result(TIMEOUT) is True
    with pytest.raises(SessionLeaseError, match="live in another process"):
        second.acquire_session("s")
    first.release_session("s")
    assert second.acquire_session("s") == 2
    append(second, "s", 1)
    assert second.flush("s").result(TIMEOUT) is True
    with pytest.raises(SessionLeaseError):
        append(first, "s", 2)


def test_a_fenced_out_writer_can_never_append(
    pg_url: str, stores: list[PostgresEventStore]
) -> None:
    old = open_pg(pg_url, stores)
    old.acquire_session("s")
    old.create_session(SessionHeader("s"))
    append(old, "s", 0)
    assert old.flush("s").result(TIMEOUT) is True
    # The old owner loses its lease connection (a network cut) while it still runs.
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks"
            " WHERE locktype = 'advisory' AND granted AND database ="
            " (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
    new = open_pg(pg_url, stores, lease_wait=10)
    new.acquire_session("s")
    append(old, "s", 1)  # it still believes it owns the session...
    assert old.flush("s").result(TIMEOUT) is False  # ...but the write is refused
    assert old.lease_lost("s") and not old.holds_lease("s")
    with pytest.raises(SessionLeaseError, match="lost the lease"):
        append(old, "s", 1)
    stored = new.load("s")
    assert stored is not None and len(stored.events) == 1
    append(new, "s", 1)
    assert new.flush("s").result(TIMEOUT) is True


def test_a_flush_waiting_for_rows_a_lost_lease_dropped_never_answers_true(
    pg_url: str, stores: list[PostgresEventStore]
) -> None:
    seam = Seam()
    store = open_pg(pg_url, stores, fault_hook=seam)
    for session_id in ("a", "b"):
        store.acquire_session(session_id)
        store.create_session(SessionHeader(session_id))
    assert store.flush_all().result(TIMEOUT) is True
    seam.pause()
    append(store, "b", 0)
    store.flush("b")
    assert seam.entered.wait(TIMEOUT)  # a round is being written
    append(store, "a", 0)
    waiting = store.flush("a")  # for the next round
    with psycopg.connect(pg_url, autocommit=True) as admin:  # the lease connection is cut
        admin.execute("SELECT pg_terminate_backend(%s)", (store.lease_backend_pid,))
    store.acquire_session("c")  # replaces the lease connection: every held session is lost
    store.release_session("a")
    store.acquire_session("a")  # taken again before the next round
    append(store, "a", 0)
    again = store.flush("a")
    seam.unpause()
    assert waiting.result(TIMEOUT) is False  # its row was dropped with the lease
    assert again.result(TIMEOUT) is True
    stored = store.load("a")
    assert stored is not None and len(stored.events) == 1


_OWNER = textwrap.dedent(
    """
    import json, sys
    from host_bridge.embedded.host import EmbeddedHost
    from host_bridge._plugin import install_schedule

    host = EmbeddedHost(sys.argv[1], store=sys.argv[2])
    plugin = install_schedule(host.context())
    agent = host.spawn_root(session_id="shared")
    result = host.tools.execute(
        "schedule_create", {"prompt": "resume me elsewhere", "after_seconds": 3600},
        agent=agent, timeout=10,
    )
    print(json.dumps(result.value), flush=True)
    sys.stdin.read()  # stay alive, owning the session, until killed
    """
)


class Model:
    def __init__(self) -> None:
        self.reminders: list[str] = []

    def __call__(self, turn: Turn) -> str | None:
        if turn.message.text.startswith("[SCHEDULE REMINDER]"):
            self.reminders.append(turn.message.text)
            return "Presented."
        return None


def test_two_host_processes_share_one_database(pg_url: str, tmp_path: Any) -> None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(tmp_path / "a"), pg_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()  # the reminder is durable and the owner stays live
        assert json.loads(line)["id"] == "schedule-1"

        later = FakeClock(wall_clock_ms() + 2 * 3600_000)
        host = EmbeddedHost(tmp_path / "b", store=pg_url, clock=later, timers=FakeTimers(later))
        try:
            with pytest.raises(SessionError, match="live in another process"):
                host.sessions.resume("shared")  # the owner is alive: refused
        finally:
            host.close()
        owner.send_signal(signal.SIGKILL)
        owner.wait(TIMEOUT)

        host = EmbeddedHost(
            tmp_path / "b", store=pg_url, clock=later, timers=FakeTimers(later), lease_wait=10
        )
        plugin = install_schedule(host.context())
        model = Model()
        agent = host.spawn_root(model=model, session_id="shared")
        for _ in range(10):
            plugin.wait_quiet(agent)
            agent.when_idle().result(timeout=10)
            status = plugin.wait_quiet(agent)
            if agent.status == "idle" and not status.busy:
                break
        assert len(model.reminders) == 1
        assert 'reminder_prompt_json: "resume me elsewhere"' in model.reminders[0]
        plugin.dispose().result(timeout=10)
        host.close()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(TIMEOUT)


def test_the_cli_selects_the_store_by_url(pg_url: str, tmp_path: Any) -> None:
    from click.testing import CliRunner

    from host_bridge.cli import cli

    with EmbeddedHost(tmp_path, store=pg_url) as host:
        session = host.sessions.create("from-cli-test")
        session.append("note", "hello")
        assert host.sessions.flush(session).result(TIMEOUT) is True
    runner = CliRunner()
    verified = runner.invoke(cli, ["--store", pg_url, "verify", "--data", str(tmp_path)])
    assert verified.exit_code == 0, verified.output
    assert "from-cli-test" in verified.output
    assert not (tmp_path / "sessions.sqlite3").exists()  # nothing went to SQLite
    shown = runner.invoke(cli, ["inspect", "--json"], env={"DSH_SCHEDULE_STORE": pg_url})
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["store"] == pg_url
    bad = runner.invoke(cli, ["--store", "postgresql://nobody@127.0.0.1:1/x", "verify"])
    assert bad.exit_code == 2
    assert "cannot connect" in bad.output
