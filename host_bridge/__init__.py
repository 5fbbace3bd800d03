"""Host-facing surface of dsh-tool-schedule: the host contract and its adapters.

Heavier parts (the plugin, the embedded host) are imported lazily so that
``actors`` can depend on :mod:`host_bridge.protocols` without an import cycle.
"""

from __future__ import annotations

from host_bridge.protocols import (
    Agent,
    AgentRegistry,
    Cancellable,
    HostContext,
    Session,
    SessionEvent,
    SessionHeader,
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
    "Agent",
    "AgentRegistry",
    "Cancellable",
    "HostContext",
    "Session",
    "SessionEvent",
    "SessionHeader",
    "SessionStore",
    "TextBlock",
    "Timers",
    "ToolCall",
    "ToolDefinition",
    "ToolRegistry",
    "ToolResult",
    "UserMessage",
]
