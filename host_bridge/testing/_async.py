"""Settling an :class:`~host_bridge.aio.AsyncHost` and moving its fake time, from its loop."""

from __future__ import annotations

import asyncio

from host_bridge.aio import AsyncHost
from host_bridge.testing._clock import FakeTimers
from host_bridge.testing._settle import settle_host

__all__ = ["advance_async", "settle_async"]


async def settle_async(host: AsyncHost, *, timeout: float = 10.0) -> None:
    """:func:`settle_host` for an async host, waited for in a worker thread.

    The loop stays free meanwhile, so the turns the host runs on it can finish.
    """
    await asyncio.to_thread(settle_host, host.embedded, host.plugin, timeout=timeout)


async def advance_async(
    host: AsyncHost, timers: FakeTimers, ms: int, *, timeout: float = 10.0, max_timers: int = 1_000
) -> None:
    """Let ``ms`` of fake time pass timer by timer, settling the host after each.

    So what one timer starts (a wake-up activating a cold session, a delivery
    arming the next timer) has happened before the next one fires, as in real
    time. Raises ``RuntimeError`` when more than ``max_timers`` fire.
    """
    await settle_async(host, timeout=timeout)  # what the host is about to arm is armed first
    clock = timers.clock
    target = clock.monotonic() + ms
    for _ in range(max_timers):
        armed = timers.armed()
        if not armed or clock.monotonic() + armed[0] > target:
            break
        timers.advance(armed[0])
        await settle_async(host, timeout=timeout)
    else:
        raise RuntimeError(f"more than {max_timers} timers fired")
    timers.advance(target - clock.monotonic())
    await settle_async(host, timeout=timeout)
