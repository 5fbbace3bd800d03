"""Clocks and the default timer service, for hosts: re-exported from :mod:`actors.clock`.

``wall_clock_ms`` and ``monotonic_ms`` are the defaults of ``HostContext.clock``
and ``HostContext.monotonic``; :class:`ThreadTimers` is a ready-made
``Timers`` (one scheduler thread for every callback) that a host may pass as
``HostContext.timers``.
"""

from __future__ import annotations

from actors.clock import (
    DEFAULT_CLOCK_JUMP_TOLERANCE_MS,
    ThreadTimers,
    TimerHandle,
    clock_jump_ms,
    clock_offset_ms,
    default_timers,
    monotonic_ms,
    wall_clock_ms,
)

__all__ = [
    "DEFAULT_CLOCK_JUMP_TOLERANCE_MS",
    "ThreadTimers",
    "TimerHandle",
    "clock_jump_ms",
    "clock_offset_ms",
    "default_timers",
    "monotonic_ms",
    "wall_clock_ms",
]
