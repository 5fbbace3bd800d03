"""Pytest fixtures of the host test kit: an opt-in pytest plugin.

Installing the package registers nothing with pytest. A test suite enables the
fixtures in its root ``conftest.py``::

    pytest_plugins = ["host_bridge.testing.pytest_plugin"]

or for one run with ``pytest -p host_bridge.testing.pytest_plugin``. The fixtures:

* ``fake_clock``: a :class:`~host_bridge.testing.FakeClock` (at
  :data:`~host_bridge.testing.DEFAULT_START_MS`);
* ``fake_host``: a :class:`~host_bridge.testing.FakeHost` on ``fake_clock``
  with Schedule installed through ``FakeHost.install_schedule`` (its plugin is
  ``fake_host.plugin``; spawned roots return with their owner's start-up
  settled); the plugin is disposed at teardown;
* ``embedded_host``: an :class:`~host_bridge.embedded.host.EmbeddedHost` on a
  durable SQLite store in ``tmp_path``, timed by ``fake_clock`` and
  :class:`~host_bridge.testing.FakeTimers` (``embedded_host.timers``); closed at teardown;
* ``embedded_plugin``: Schedule installed on ``embedded_host``, disposed at teardown.

Only pytest imports this module; the rest of :mod:`host_bridge.testing` does not need pytest.
The kit is imported when a fixture is first used, not when pytest loads the plugin.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from host_bridge._plugin import SchedulePlugin
    from host_bridge.embedded.host import EmbeddedHost
    from host_bridge.testing._clock import FakeClock
    from host_bridge.testing._host import FakeHost

__all__ = ["embedded_host", "embedded_plugin", "fake_clock", "fake_host"]

TEARDOWN_TIMEOUT = 10.0
"""Seconds a fixture waits for a plugin to dispose at teardown."""


@pytest.fixture
def fake_clock() -> FakeClock:
    """A fake wall clock that moves only when the test moves it."""
    from host_bridge.testing._clock import FakeClock

    return FakeClock()


@pytest.fixture
def fake_host(fake_clock: FakeClock) -> Iterator[FakeHost]:
    """A FakeHost on ``fake_clock`` with Schedule installed (``fake_host.plugin``)."""
    from host_bridge.testing._host import FakeHost

    host = FakeHost(clock=fake_clock)
    host.install_schedule()
    yield host
    host.dispose_plugins(TEARDOWN_TIMEOUT)


@pytest.fixture
def embedded_host(tmp_path: Path, fake_clock: FakeClock) -> Iterator[EmbeddedHost]:
    """An EmbeddedHost on SQLite in ``tmp_path``, on fake time (``embedded_host.timers``)."""
    from host_bridge.embedded.host import EmbeddedHost
    from host_bridge.testing._clock import FakeTimers

    host = EmbeddedHost(tmp_path / "dsh-schedule", clock=fake_clock, timers=FakeTimers(fake_clock))
    yield host
    host.close()


@pytest.fixture
def embedded_plugin(embedded_host: EmbeddedHost) -> Iterator[SchedulePlugin]:
    """Schedule installed on ``embedded_host`` (on its runtime); disposed before the host closes."""
    from host_bridge._plugin import install_schedule

    plugin = install_schedule(embedded_host.context(), runtime=embedded_host.runtime)
    yield plugin
    plugin.dispose().result(timeout=TEARDOWN_TIMEOUT)
