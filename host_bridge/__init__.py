"""Host-facing surface of dsh-tool-schedule: the host contract, the plugin and adapters.

A host builds a :class:`HostContext` whose parts satisfy the protocols of the
contract (defined in :mod:`actors.contract`), calls :func:`install_schedule`
and keeps the :class:`SchedulePlugin` it returns. :class:`TurnAdmission` is a
ready-made turn-admission state machine for a host's agent adapter;
:class:`RestartPolicy` and :class:`WakePolicy` tune supervision and the waking
of cold sessions. The embedded reference host is :mod:`host_bridge.embedded`,
the test kit for hosts :mod:`host_bridge.testing`.
"""

from __future__ import annotations

from host_bridge.admission import AdmissionClosedError, TurnAdmission
from host_bridge.plugin import (
    CompositionError,
    RestartPolicy,
    SchedulePlugin,
    WakePolicy,
    install_schedule,
)
from host_bridge.protocols import (
    Agent,
    AgentRegistry,
    Cancellable,
    DueSession,
    HostContext,
    Session,
    SessionActivation,
    SessionEvent,
    SessionHeader,
    SessionPassivation,
    SessionStore,
    TextBlock,
    Timers,
    ToolCall,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    UserMessage,
)

__all__ = [
    "AdmissionClosedError",
    "Agent",
    "AgentRegistry",
    "Cancellable",
    "CompositionError",
    "DueSession",
    "HostContext",
    "RestartPolicy",
    "SchedulePlugin",
    "Session",
    "SessionActivation",
    "SessionEvent",
    "SessionHeader",
    "SessionPassivation",
    "SessionStore",
    "TextBlock",
    "Timers",
    "ToolCall",
    "ToolDefinition",
    "ToolRegistry",
    "ToolResult",
    "TurnAdmission",
    "UserMessage",
    "WakePolicy",
    "install_schedule",
]
