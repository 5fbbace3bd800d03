"""A test kit for hosts embedding Schedule: fakes of every host protocol.

The fakes follow :mod:`host_bridge.protocols` exactly and record their calls in a
shared :class:`Journal`, so a test can assert the order of preflight, reservation,
follow-up, dispatch append, release and barrier. Time moves only when a test moves
it (:class:`FakeClock`, :class:`FakeTimers`); flush outcomes, append and follow-up
failures are scriptable; :func:`settle` waits for actors and
:func:`settle_host` for a whole host (agents and owners) without sleeping.
:func:`call_tool` runs a tool for an agent as a host does; :func:`dispatches`
and :func:`assert_delivered_once` read deliveries back from a session log.
Pytest fixtures (``fake_host``, ``fake_clock``, ``embedded_host``,
``embedded_plugin``) come with the package as the ``dsh_schedule`` pytest plugin
(:mod:`host_bridge.testing.pytest_plugin`); this package itself does not import pytest.

:mod:`host_bridge.testing.conformance` (imported on its own; it needs pytest)
is a conformance kit for a host's *own* adapters: subclass its
``HostConformance`` in a test module to run a check of every host-contract rule.
"""

from __future__ import annotations

from host_bridge.testing.activation import FakeActivation
from host_bridge.testing.agents import FakeAgent
from host_bridge.testing.calls import call_tool, call_tool_json
from host_bridge.testing.clock import DEFAULT_START_MS, FakeClock, FakeTimerHandle, FakeTimers
from host_bridge.testing.delivery import (
    Dispatch,
    assert_delivered_once,
    dispatches,
    reminder_mentions,
)
from host_bridge.testing.host import FakeHost, FakePersistence
from host_bridge.testing.journal import Journal
from host_bridge.testing.registry import FakeAgentRegistry
from host_bridge.testing.sessions import (
    PENDING,
    FakeSession,
    FakeSessionStore,
    FlushOutcome,
    FlushRecord,
    Pending,
    SessionDetachedError,
)
from host_bridge.testing.settle import settle, settle_all, settle_host

__all__ = [
    "DEFAULT_START_MS",
    "PENDING",
    "Dispatch",
    "FakeActivation",
    "FakeAgent",
    "FakeAgentRegistry",
    "FakeClock",
    "FakeHost",
    "FakePersistence",
    "FakeSession",
    "FakeSessionStore",
    "FakeTimerHandle",
    "FakeTimers",
    "FlushOutcome",
    "FlushRecord",
    "Journal",
    "Pending",
    "SessionDetachedError",
    "assert_delivered_once",
    "call_tool",
    "call_tool_json",
    "dispatches",
    "reminder_mentions",
    "settle",
    "settle_all",
    "settle_host",
]
