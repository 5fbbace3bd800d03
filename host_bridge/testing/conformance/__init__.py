"""A conformance kit for host adapters: executable checks of every host-contract rule.

A host author subclasses :class:`HostConformance` in a test module and builds
their host in :meth:`~HostConformance.make_host`; pytest then runs one check
per rule of the host contract against that host::

    from host_bridge.testing.conformance import ConformanceHost, HostConformance

    class TestMyHost(HostConformance):
        def make_host(self, tmp_path):
            host = MyHost(tmp_path)
            return ConformanceHost(
                context=host.context(),
                spawn_root=lambda model: host.spawn(model=model),
                close=host.close,
            )

Every check is a ``test_...`` method whose docstring states its rule; a failure
is an ``AssertionError`` whose message starts with the protocol member the host
broke (``"SessionStore.flush: ..."``). Checks that need an optional hook of
:class:`ConformanceHost` are skipped when the host does not provide it. This
module needs pytest (``host_bridge.testing`` itself does not).
"""

from __future__ import annotations

from host_bridge.testing.conformance._activation import ActivationChecks
from host_bridge.testing.conformance._agents import AgentChecks
from host_bridge.testing.conformance._host import UNSTORABLE, ConformanceHost, TurnModel
from host_bridge.testing.conformance._inbox import InboxChecks
from host_bridge.testing.conformance._probes import ScriptedModel, StatusLog
from host_bridge.testing.conformance._services import ServiceChecks
from host_bridge.testing.conformance._sessions import SessionChecks

__all__ = [
    "UNSTORABLE",
    "ConformanceHost",
    "HostConformance",
    "ScriptedModel",
    "StatusLog",
    "TurnModel",
]


class HostConformance(SessionChecks, AgentChecks, ServiceChecks, InboxChecks, ActivationChecks):
    """Every host-contract check; subclass it and implement :meth:`make_host`.

    ``make_host(tmp_path)`` returns a fresh :class:`ConformanceHost` for each
    check (``tmp_path`` is an empty directory of its own); the kit closes it
    afterwards. Set :attr:`timeout` (seconds, default 5) for slow hosts.
    :meth:`run_check` runs one check by name outside pytest's collection.
    """
