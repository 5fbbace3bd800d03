"""The former home of the gevent runtime; it now lives in the package :mod:`actors.gevent`.

Kept so existing imports keep working: every name is re-exported unchanged.
New code imports :mod:`actors.gevent`.
"""

from __future__ import annotations

from actors.gevent import (
    GeventActor,
    GeventFuture,
    GeventHub,
    GeventInbox,
    GeventRuntime,
    GeventRuntimeError,
    GeventTimerHandle,
    GeventTimers,
    default_runtime,
)
from actors.gevent.inbox import StopFlag

__all__ = [
    "GeventActor",
    "GeventFuture",
    "GeventHub",
    "GeventInbox",
    "GeventRuntime",
    "GeventRuntimeError",
    "GeventTimerHandle",
    "GeventTimers",
    "StopFlag",
    "default_runtime",
]
