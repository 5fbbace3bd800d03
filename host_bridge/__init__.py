"""Host-facing surface of dsh-tool-schedule: the host contract and its adapters.

Heavier parts (the plugin, the embedded host) are imported lazily so that
``actors`` can depend on :mod:`host_bridge.protocols` without an import cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from host_bridge.admission import AdmissionClosedError, TurnAdmission
    from host_bridge.plugin import CompositionError, SchedulePlugin, WakePolicy, install_schedule

_LAZY = {
    "TurnAdmission": "host_bridge.admission",
    "AdmissionClosedError": "host_bridge.admission",
    "install_schedule": "host_bridge.plugin",
    "SchedulePlugin": "host_bridge.plugin",
    "CompositionError": "host_bridge.plugin",
    "WakePolicy": "host_bridge.plugin",
}


def __getattr__(name: str) -> object:
    """Import the plugin's and the admission helper's names on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'host_bridge' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
