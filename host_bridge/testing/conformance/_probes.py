"""Instruments the checks observe a host with: a gated model and a status log."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError

from actors._contract import Agent, UserMessage

__all__ = ["ScriptedModel", "StatusLog"]


class ScriptedModel:
    """The kit's model: records each message a turn took and can hold turns open.

    Open by default (a call returns at once). While :meth:`hold` is in force a
    call blocks until :meth:`open`, at most ``timeout`` seconds (then it returns,
    so a broken check cannot wedge the host). ``on_enter`` callbacks run in the
    turn's thread with the message's index before it may block.
    """

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._lock = threading.Lock()
        self._gate = threading.Event()
        self._gate.set()
        self._messages: list[UserMessage] = []
        self._entered: dict[int, Future[UserMessage]] = {}
        self.on_enter: list[Callable[[int, UserMessage], None]] = []

    def __call__(self, message: UserMessage) -> None:
        with self._lock:
            index = len(self._messages)
            self._messages.append(message)
            future = self._entered.setdefault(index, Future())
            hooks = list(self.on_enter)
        for hook in hooks:
            hook(index, message)
        with contextlib.suppress(InvalidStateError):
            future.set_result(message)
        self._gate.wait(self._timeout)

    def hold(self) -> None:
        """Make later calls block until :meth:`open`."""
        self._gate.clear()

    def open(self) -> None:
        """Let held and later calls return."""
        self._gate.set()

    def entered(self, index: int) -> Future[UserMessage]:
        """Resolves with message ``index`` (0-based) once a turn passed it to the model."""
        with self._lock:
            return self._entered.setdefault(index, Future())

    @property
    def messages(self) -> list[UserMessage]:
        """Every message the model saw, in order (a copy)."""
        with self._lock:
            return list(self._messages)


class StatusLog:
    """An ``on_status`` listener recording one agent's notifications, with waitable counts."""

    def __init__(self, agent_id: str | None = None) -> None:
        self._agent_id = agent_id
        self._lock = threading.Lock()
        self._seen: list[str] = []
        self._waiters: list[tuple[str, int, Future[None]]] = []

    def watch(self, agent_id: str) -> None:
        """Record only notifications of ``agent_id`` from now on."""
        with self._lock:
            self._agent_id = agent_id

    def __call__(self, agent: Agent, status: str) -> None:
        with self._lock:
            if self._agent_id is None or agent.id != self._agent_id:
                return
            self._seen.append(status)
            count = self._seen.count(status)
            ready = [f for s, n, f in self._waiters if s == status and count >= n]
            self._waiters = [w for w in self._waiters if w[2] not in ready]
        for future in ready:
            with contextlib.suppress(InvalidStateError):
                future.set_result(None)

    def reached(self, status: str, count: int) -> Future[None]:
        """Resolves once ``status`` was reported ``count`` times."""
        future: Future[None] = Future()
        with self._lock:
            if self._seen.count(status) >= count:
                future.set_result(None)
            else:
                self._waiters.append((status, count, future))
        return future

    @property
    def seen(self) -> list[str]:
        """The statuses reported so far, in order (a copy)."""
        with self._lock:
            return list(self._seen)
