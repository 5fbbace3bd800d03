"""EmbeddedHost.close() is bounded: a commit stuck on a hung disk cannot hold the shutdown.

The store's ``fault_hook`` blocks the writer inside its commit (as a disk that
stopped answering would) until the test releases it; the host's close must
return meanwhile and report what is not durable, instead of waiting for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from host_bridge.embedded.host import DEFAULT_CLOSE_TIMEOUT, EmbeddedHost
from host_bridge.embedded.stores import SqliteEventStore, SqliteStoreReader, StoreWriteError
from host_bridge.testing import FakeClock

TIMEOUT = 20.0


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


class StuckDisk:
    """A ``fault_hook`` that holds every commit until :meth:`move` is called."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self._moved = threading.Event()

    def __call__(self) -> None:
        self.entered.set()
        assert self._moved.wait(TIMEOUT), "the test never released the stuck disk"

    def move(self) -> None:
        self._moved.set()


@pytest.mark.parametrize("runtime", ["threading", "gevent"])
def test_close_returns_while_a_commit_is_blocked_and_reports_what_is_not_durable(
    tmp_path: Path, runtime: str
) -> None:
    disk = StuckDisk()
    host = EmbeddedHost(tmp_path / "data", clock=FakeClock(5_000), close_timeout=0, runtime=runtime)
    assert host.persistence is not None
    writer = host.persistence._writer._thread
    try:
        durable = host.sessions.create("durable")
        assert durable.request_flush().result(TIMEOUT) is True
        host.persistence.fault_hook = disk
        stuck = host.sessions.create("stuck")
        stuck.append("note", {"n": 1})
        flushed = stuck.request_flush()
        assert disk.entered.wait(TIMEOUT)
        error = host.close()
        assert isinstance(error, StoreWriteError)
        assert error.category == "CLOSE_TIMEOUT"
        assert str(error).startswith("closing the session store timed out after 0 s")
        assert "2 unflushed rows of sessions 'stuck' are not confirmed durable" in str(error)
        with pytest.raises(StoreWriteError, match="timed out"):
            flushed.result(TIMEOUT)  # failed by the close, not left pending
        assert host.persistence.closed
        assert host.close() is None  # idempotent
    finally:
        disk.move()
    writer.join(TIMEOUT)
    assert not writer.is_alive()
    assert isinstance(host.persistence, SqliteEventStore)
    with SqliteStoreReader(host.persistence.path) as reader:
        assert reader.session_ids() == ["durable", "stuck"]  # the commit ended after all


def test_a_healthy_close_within_the_timeout_reports_nothing(tmp_path: Path) -> None:
    host = EmbeddedHost(tmp_path / "data", clock=FakeClock(5_000))
    assert host.close_timeout == DEFAULT_CLOSE_TIMEOUT == 30.0
    session = host.sessions.create("s")
    session.append("note", {"n": 1})
    assert host.close() is None
    with SqliteStoreReader(tmp_path / "data" / "sessions.sqlite3") as reader:
        stored = reader.load("s")
        assert stored is not None and len(stored.events) == 1


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), True, "30"])
def test_close_timeout_must_be_seconds_or_none(tmp_path: Path, value: Any) -> None:
    with pytest.raises(ValueError, match="close_timeout must be None or a finite number"):
        EmbeddedHost(tmp_path / "data", close_timeout=value)
    assert not (tmp_path / "data").exists()
