"""A test kit for hosts embedding Schedule: fakes of every host protocol.

The fakes follow the host contract exactly and record their calls in a shared
:class:`Journal`, so a test can assert the order of preflight, reservation,
follow-up, dispatch append, release and barrier. Time moves only when a test
moves it (:class:`FakeClock`, :class:`FakeTimers`); flush outcomes (``PENDING``
holds one), append and follow-up failures are scriptable; :func:`settle` waits
for one actor and :func:`settle_host` for a whole host without sleeping;
:func:`settle_async` and :func:`advance_async` do the same for an
:class:`~host_bridge.aio.AsyncHost` from its loop.
:func:`call_tool` runs a tool for an agent as a host does; :func:`dispatches`
and :func:`assert_delivered_once` read deliveries back from a session log.
Pytest fixtures (``fake_host``, ``fake_clock``, ``embedded_host``,
``embedded_plugin``) are the opt-in pytest plugin
:mod:`host_bridge.testing.pytest_plugin` (enable it with
``pytest_plugins = ["host_bridge.testing.pytest_plugin"]`` in a root
``conftest.py``); this package itself does not import pytest.

:mod:`host_bridge.testing.conformance` (imported on its own; it needs pytest)
is a conformance kit for a host's *own* adapters: subclass its
``HostConformance`` in a test module to run a check of every host-contract rule.
"""

from __future__ import annotations

from host_bridge.testing._activation import FakeActivation, FakeColdActivation
from host_bridge.testing._agents import FakeAgent
from host_bridge.testing._async import advance_async, settle_async
from host_bridge.testing._calls import call_tool, call_tool_json
from host_bridge.testing._clock import FakeClock, FakeTimers
from host_bridge.testing._delivery import Dispatch, assert_delivered_once, dispatches
from host_bridge.testing._host import FakeHost
from host_bridge.testing._journal import Journal
from host_bridge.testing._sessions import PENDING, FakeSession, FakeSessionStore, FlushOutcome
from host_bridge.testing._settle import settle, settle_host

__all__ = [
    "PENDING",
    "Dispatch",
    "FakeActivation",
    "FakeAgent",
    "FakeClock",
    "FakeColdActivation",
    "FakeHost",
    "FakeSession",
    "FakeSessionStore",
    "FakeTimers",
    "FlushOutcome",
    "Journal",
    "advance_async",
    "assert_delivered_once",
    "call_tool",
    "call_tool_json",
    "dispatches",
    "settle",
    "settle_async",
    "settle_host",
]
