"""Awaiting the module's futures on an asyncio loop without blocking it."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import TypeVar

__all__ = ["wait"]

_T = TypeVar("_T")


async def wait(future: Future[_T]) -> _T:
    """Await a ``concurrent.futures.Future`` of the module (a tool call, ``dispose``, …).

    No thread waits: the future's own completion wakes the loop. Cancelling
    the awaiting task cancels ``future``, which the contract allows for a
    tool call (cancelled before its transaction starts: no flush, no append).
    """
    return await asyncio.wrap_future(future)
