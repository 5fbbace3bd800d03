"""Suite-wide fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pykka
import pytest

from actors._runtime import Runtime, get_runtime
from tests.cli.helpers import Proc

# PostgreSQL for every test that asks for it: one throwaway server, a database per test;
# and the host test kit's fixtures, which a suite enables itself (as users do).
pytest_plugins = ("tests.pg_server", "host_bridge.testing.pytest_plugin")


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    """Stop every actor a test left running, whatever runtime it was on."""
    yield
    pykka.ActorRegistry.stop_all()


@pytest.fixture(params=("threading", "gevent"))
def runtime(request: pytest.FixtureRequest) -> Runtime:
    """Each actor runtime in turn: a test that asks for it runs once on each."""
    return get_runtime(request.param)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    """Subprocesses a test started (``tests.cli.helpers.Proc``), killed at teardown if alive."""
    started: list[Proc] = []
    yield started
    for proc in started:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait()
