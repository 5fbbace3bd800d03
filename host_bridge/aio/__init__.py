"""The asyncio face of Schedule: awaitable calls and a host for your own agent loop.

:class:`AsyncHost` keeps each session's log, durable inbox, turn admission and
the waking of cold sessions in the embedded store and runs every turn with one
async callable of the host's (a :data:`TurnRunner`, receiving an
:class:`AgentTurn`); :class:`Conversation` is one open session. Framework
tools find the running turn with :func:`current_turn`. :func:`wait` awaits any
future of the module (a tool call, ``dispose``, ``when_idle``) without blocking
the loop, and :func:`admission_on_loop` gives a host's own agents a ``TurnAdmission``
whose turns run on the loop. :func:`import_turn_runner` loads a runner by its ``MODULE:ATTR`` path
and :class:`LoopThread` gives a program that is not async a loop to run it on
(``dsh-schedule serve --turn-runner`` uses both). The actors stay on their own
runtime (threads, or the gevent hub on its thread); nothing here blocks the loop.
"""

from __future__ import annotations

from host_bridge.aio._futures import wait
from host_bridge.aio._host import AsyncHost, Conversation
from host_bridge.aio._loop_thread import LoopThread, TurnRunnerImportError, import_turn_runner
from host_bridge.aio._turn import (
    RESERVED_PREFIXES,
    AgentTurn,
    RunnerCancelledError,
    TurnRunner,
    admission_on_loop,
    current_turn,
)

__all__ = [
    "RESERVED_PREFIXES",
    "AgentTurn",
    "AsyncHost",
    "Conversation",
    "LoopThread",
    "RunnerCancelledError",
    "TurnRunner",
    "TurnRunnerImportError",
    "admission_on_loop",
    "current_turn",
    "import_turn_runner",
    "wait",
]
