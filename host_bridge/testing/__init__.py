"""A test kit for hosts embedding Schedule: fakes of every host protocol.

The fakes follow :mod:`host_bridge.protocols` exactly and record their calls in a
shared :class:`Journal`, so a test can assert the order of preflight, reservation,
follow-up, dispatch append, release and barrier. Time moves only when a test moves
it (:class:`FakeClock`, :class:`FakeTimers`); flush outcomes, append and follow-up
failures are scriptable; :func:`settle` waits for actors without sleeping.
This package does not depend on pytest.

:mod:`host_bridge.testing.conformance` (imported on its own; it needs pytest)
is a conformance kit for a host's *own* adapters: subclass its
``HostConformance`` in a test module to run a check of every host-contract rule.
"""

from __future__ import annotations

from host_bridge.testing.activation import FakeActivation
from host_bridge.testing.agents import FakeAgent
from host_bridge.testing.clock import DEFAULT_START_MS, FakeClock, FakeTimerHandle, FakeTimers
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
from host_bridge.testing.settle import settle, settle_all

__all__ = [
    "DEFAULT_START_MS",
    "PENDING",
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
    "settle",
    "settle_all",
]
