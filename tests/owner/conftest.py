"""Fixtures of the owner tests: one ScheduleOwner on the host test kit, on every actor runtime.

Every test that uses the ``runtime`` fixture (directly or through ``host``,
``harness`` or the plugin) runs twice: on the threading runtime and on the
gevent runtime, so each SPEC §5 rule is proven on both.
"""

from __future__ import annotations

from collections.abc import Iterator

import pykka
import pytest

from actors._runtime import Runtime
from host_bridge.testing import FakeHost
from tests.owner.harness import Harness
from tests.owner.helpers import Tools


@pytest.fixture
def host(runtime: Runtime) -> Iterator[FakeHost]:
    fake = FakeHost()
    yield fake
    pykka.ActorRegistry.stop_all()


@pytest.fixture
def harness(host: FakeHost, runtime: Runtime) -> Harness:
    return Harness(host, runtime=runtime)


@pytest.fixture
def tools(host: FakeHost, runtime: Runtime) -> Tools:
    """Schedule installed on ``host``, one root agent whose owner has started."""
    plugin = host.install_schedule(runtime=runtime)
    return Tools(host, plugin, host.spawn_root("agent-1"))
