"""Host-facing surface of dsh-tool-schedule: the host contract, the plugin and adapters.

A host builds a :class:`HostContext` whose parts satisfy the protocols of the
contract (defined in :mod:`actors.contract`), calls :func:`install_schedule`
and keeps the :class:`SchedulePlugin` it returns. :class:`TurnAdmission` is a
ready-made turn-admission state machine for a host's agent adapter;
:class:`RestartPolicy` and :class:`WakePolicy` tune supervision and the waking
of cold sessions; :class:`ThreadTimers`, :class:`SteadyClock` and the clock
functions are the defaults a host may pass; :func:`from_pykka` and its siblings
adapt futures; :func:`openai_tools` and :func:`normalize_strict_arguments` serve
LLM APIs; :func:`install_schedule_invariant` checks a host's own store and
:class:`ScheduleTelemetry` reports through OpenTelemetry. The embedded reference
host is :mod:`host_bridge.embedded`, the test kit for hosts :mod:`host_bridge.testing`.
"""

from __future__ import annotations

from actors.clock import ThreadTimers
from actors.contract import (
    Agent,
    AgentRegistry,
    AgentStatus,
    AppendGuard,
    Cancellable,
    DueSession,
    HostContext,
    Session,
    SessionActivation,
    SessionDetachedError,
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
    monotonic_ms,
    wall_clock_ms,
)
from actors.wake_policy import WakePolicy
from host_bridge._admission import AdmissionClosedError, TurnAdmission
from host_bridge._catalog import openai_tools
from host_bridge._composition import CompositionError
from host_bridge._futures import chain, failed, from_pykka, resolved
from host_bridge._invariant import ScheduleInvariantError, install_schedule_invariant
from host_bridge._openai_strict import normalize_strict_arguments
from host_bridge._plugin import PluginStatus, SchedulePlugin, install_schedule
from host_bridge._steady_clock import SteadyClock
from host_bridge._supervision import RestartPolicy
from host_bridge._telemetry import ScheduleTelemetry

__all__ = [
    "AdmissionClosedError",
    "Agent",
    "AgentRegistry",
    "AgentStatus",
    "AppendGuard",
    "Cancellable",
    "CompositionError",
    "DueSession",
    "HostContext",
    "PluginStatus",
    "RestartPolicy",
    "ScheduleInvariantError",
    "SchedulePlugin",
    "ScheduleTelemetry",
    "Session",
    "SessionActivation",
    "SessionDetachedError",
    "SessionEvent",
    "SessionHeader",
    "SessionPassivation",
    "SessionStore",
    "SteadyClock",
    "TextBlock",
    "ThreadTimers",
    "Timers",
    "ToolCall",
    "ToolDefinition",
    "ToolRegistry",
    "ToolResult",
    "TurnAdmission",
    "UserMessage",
    "WakePolicy",
    "chain",
    "failed",
    "from_pykka",
    "install_schedule",
    "install_schedule_invariant",
    "monotonic_ms",
    "normalize_strict_arguments",
    "openai_tools",
    "resolved",
    "wall_clock_ms",
]
