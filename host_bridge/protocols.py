"""The host contract: the protocols a host's objects satisfy, and the values they exchange.

A host embeds Schedule by handing :func:`host_bridge.install_schedule` a
:class:`HostContext` whose parts satisfy these structural protocols. This is
the one public place of the contract; the definitions live in
:mod:`actors._contract`, the bottom floor that the actors import too.
"""

from __future__ import annotations

from actors._contract import (
    DEFAULT_CLOCK_STEP_CONFIRM_MS,
    DEFAULT_CLOCK_WATCH_MS,
    DEFAULT_FLUSH_TIMEOUT_MS,
    Agent,
    AgentRegistry,
    AgentStatus,
    AppendGuard,
    Cancellable,
    ColdDelivery,
    ColdPass,
    DueSession,
    HostContext,
    Session,
    SessionActivation,
    SessionDemand,
    SessionDetachedError,
    SessionEvent,
    SessionHeader,
    SessionPassivation,
    SessionStore,
    SessionWithCheckpoint,
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

__all__ = [
    "DEFAULT_CLOCK_STEP_CONFIRM_MS",
    "DEFAULT_CLOCK_WATCH_MS",
    "DEFAULT_FLUSH_TIMEOUT_MS",
    "Agent",
    "AgentRegistry",
    "AgentStatus",
    "AppendGuard",
    "Cancellable",
    "ColdDelivery",
    "ColdPass",
    "DueSession",
    "HostContext",
    "Session",
    "SessionActivation",
    "SessionDemand",
    "SessionDetachedError",
    "SessionEvent",
    "SessionHeader",
    "SessionPassivation",
    "SessionStore",
    "SessionWithCheckpoint",
    "TextBlock",
    "Timers",
    "ToolCall",
    "ToolDefinition",
    "ToolRegistry",
    "ToolResult",
    "UserMessage",
    "monotonic_ms",
    "wall_clock_ms",
]
