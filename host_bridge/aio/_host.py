"""AsyncHost: the embedded host for asyncio programs that bring their own agent loop."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

from actors._contract import (
    DEFAULT_CLOCK_WATCH_MS,
    TextBlock,
    Timers,
    UserMessage,
    wall_clock_ms,
)
from actors._runtime import RuntimeSpec
from actors._wake_policy import WakePolicy
from host_bridge._plugin import SchedulePlugin, install_schedule
from host_bridge.aio._futures import wait
from host_bridge.aio._turn import LoopTurns, TurnRunner
from host_bridge.embedded.agents import EmbeddedAgent, TurnRecord
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.sessions import new_session_id

__all__ = ["AsyncHost", "Conversation"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

_T = TypeVar("_T")


class Conversation:
    """One open session of an :class:`AsyncHost` and its root agent: a person's chat.

    Its turns (the person's and the reminders that fall due while it is open)
    run one at a time through the durable inbox and turn admission, with the
    host's turn runner. Get one with :meth:`AsyncHost.open`.
    """

    def __init__(self, host: AsyncHost, agent: EmbeddedAgent) -> None:
        self._host = host
        self._agent = agent
        self._closing: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Future[TurnRecord]] = set()  # submitted, not yet answered

    @property
    def session_id(self) -> str:
        """The session's id (the key to open it again, here or after a restart)."""
        return self._agent.session.id

    @property
    def agent(self) -> EmbeddedAgent:
        """The embedded agent underneath (its ``turns``, ``status``, session log)."""
        return self._agent

    async def send(self, text: str) -> str | None:
        """Run a person's turn for ``text``; the runner's reply once the turn is complete.

        The message is first recorded in the session's inbox; the turn starts
        when no other turn (a reminder's, say) runs and the entry is durable.
        Raises what the runner raised; ``TurnInterrupted`` or
        ``AgentDisposedError`` when the host stopped first (the message then
        runs at the next start); ``RuntimeError`` once the conversation is
        closing. Cancelling ``send`` stops the wait, not the turn.
        """
        if self._closing is not None:
            raise RuntimeError(f"conversation {self.session_id!r} is closed")
        message = UserMessage((TextBlock(text),), {"kind": "user"})
        answer = asyncio.ensure_future(wait(self._agent.submit(message)))
        self._sends.add(answer)  # a close waits for it, even once this caller stopped waiting
        answer.add_done_callback(self._answered)
        record = await asyncio.shield(answer)
        if record.error is not None:
            raise record.error
        return record.reply

    async def when_idle(self) -> None:
        """Return once no turn runs or waits in this conversation."""
        await wait(self._agent.when_idle())

    def _answered(self, answer: asyncio.Future[TurnRecord]) -> None:
        """A send's answer settled: no close waits for it any more (its error is retrieved)."""
        self._sends.discard(answer)
        if not answer.cancelled():
            answer.exception()  # the caller may have stopped waiting; it was not lost

    async def close(self) -> None:
        """Let the session go once its turns are done; its reminders then reach it cold.

        A reminder falling due later wakes the session by activation (this
        host's, or ``dsh-schedule serve``'s) and runs its turn with the runner.
        Idempotent; the closing goes on when the caller is cancelled, and an
        ``open`` of the session meanwhile waits for it.
        """
        if self._closing is None:
            self._closing = self._host._serialized(self.session_id, self._close_now)
        await asyncio.shield(self._closing)

    async def _close_now(self) -> None:
        if self._sends:  # submitted before the close: their turns are this session's too
            await asyncio.wait(set(self._sends))
        with contextlib.suppress(Exception):  # disposed by the host's close meanwhile
            await self.when_idle()
        self._host._forget(self)
        await asyncio.to_thread(self._host._let_go, self._agent)


class AsyncHost:
    """The embedded store, inbox, turn admission and activation around an async turn runner.

    For asyncio hosts without a durable session log of their own: the embedded
    store (SQLite by default, or ``store=`` a path or a ``postgresql://`` URL)
    keeps each session's log and inbox, Schedule is installed on it, and every
    turn, a person's (:meth:`Conversation.send`) or a reminder's, runs through
    turn admission and calls ``run_turn`` on the loop that started the host.
    The module records each turn's completion. With ``wake`` (the default),
    reminders of sessions nobody has open wake them here; ``dsh-schedule serve
    --turn-runner MODULE:ATTR`` does the same in a process of its own.

    Use it as ``async with AsyncHost(run_turn) as host:``. Nothing blocks the
    loop: store work runs in worker threads, every future is awaited.
    ``clock`` and ``timers`` replace the wall clock and the timer service (the
    test kit's fakes); ``stop_timeout`` bounds how long :meth:`aclose` lets
    running turns finish before cancelling them (cancelled turns run again at
    the next start). ``clock_watch_ms`` is the tick of Schedule's clock
    watchdog (``None``: off, as tests on fake time may want).
    ``calendar_rules=False`` installs Schedule without the ``cron`` selector
    (see :func:`host_bridge.install_schedule`); give the framework tools the
    same option. ``schedule=False`` leaves Schedule out: the bare host, to
    check its adapters with the conformance kit or to install Schedule with
    options of one's own on :attr:`embedded`.
    """

    def __init__(
        self,
        run_turn: TurnRunner,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        store: str | os.PathLike[str] | None = None,
        wake: bool = True,
        wake_policy: WakePolicy | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        timers: Timers | None = None,
        runtime: RuntimeSpec = "threading",
        lease_wait: float = 0.0,
        stop_timeout: float = 10.0,
        schedule: bool = True,
        clock_watch_ms: int | None = DEFAULT_CLOCK_WATCH_MS,
        calendar_rules: bool = True,
    ) -> None:
        self._run_turn = run_turn
        self._data_dir = data_dir
        self._store = store
        self._wake = wake
        self._wake_policy = wake_policy
        self._clock = clock
        self._timers = timers
        self._runtime: RuntimeSpec = runtime
        self._lease_wait = lease_wait
        self.stop_timeout = stop_timeout
        self._schedule = schedule
        self._clock_watch_ms = clock_watch_ms
        self._calendar_rules = calendar_rules
        self._turns: LoopTurns | None = None
        self._embedded: EmbeddedHost | None = None
        self._plugin: SchedulePlugin | None = None
        self._open: dict[str, Conversation] = {}
        self._work: dict[str, asyncio.Task[Any]] = {}  # the open or close in flight per session
        self._closing = False
        self._closed: asyncio.Task[None] | None = None

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> AsyncHost:
        """Open the store and install Schedule (``async with`` calls it)."""
        if self._embedded is not None:
            return self
        self._turns = LoopTurns(self._run_turn, asyncio.get_running_loop())
        self._embedded, self._plugin = await asyncio.to_thread(self._build, self._turns)
        return self

    def _build(self, turns: LoopTurns) -> tuple[EmbeddedHost, SchedulePlugin | None]:
        host = EmbeddedHost(
            self._data_dir,
            store=self._store,
            clock=self._clock,
            timers=self._timers,
            runtime=self._runtime,
            lease_wait=self._lease_wait,
        )
        try:
            if self._wake:
                host.enable_activation(model=turns)
            plugin = (
                install_schedule(
                    dataclasses.replace(host.context(), clock_watch_ms=self._clock_watch_ms),
                    runtime=host.runtime,
                    wake_policy=self._wake_policy,
                    calendar_rules=self._calendar_rules,
                )
                if self._schedule
                else None
            )
        except BaseException:
            host.close()
            raise
        return host, plugin

    async def aclose(self) -> None:
        """Stop delivering, let running turns finish (``stop_timeout``), write everything, close.

        Opens and closes in flight finish first (within the same timeout).
        Turns still running then are cancelled: their messages stay unfinished
        in the inbox and run again at the next start. Raises the store's error
        when queued events could not be written. Idempotent: a second call
        waits for the first; cancelling the caller does not stop the closing.
        """
        if self._embedded is None or self._turns is None:
            return
        if self._closed is None:
            self._closing = True
            self._closed = asyncio.ensure_future(self._close_now())
        await asyncio.shield(self._closed)

    async def _close_now(self) -> None:
        host, plugin, turns = self.embedded, self._plugin, self._turns
        assert turns is not None
        deadline = time.monotonic() + self.stop_timeout
        if self._work:
            await asyncio.wait(list(self._work.values()), timeout=self._left(deadline))
        if plugin is not None:
            disposing = await asyncio.to_thread(plugin.dispose)  # its first step may wait briefly
            try:  # shielded: the plugin's one dispose future is everyone's, never cancel it
                await asyncio.wait_for(asyncio.shield(wait(disposing)), self._left(deadline))
            except TimeoutError:
                _log.warning("Schedule did not finish disposing within the stop timeout")
        idle = [asyncio.ensure_future(wait(a.when_idle())) for a in host.agents.roots()]
        if idle:
            _done, pending = await asyncio.wait(idle, timeout=self._left(deadline))
            for waiting in pending:
                waiting.cancel()
        cut = turns.cut()
        if cut:
            _log.warning("%d turn(s) still running at close were cut; they run again", cut)
        self._open.clear()
        error = await asyncio.to_thread(host.close)
        if error is not None:
            raise error

    @staticmethod
    def _left(deadline: float) -> float:
        return max(0.0, deadline - time.monotonic())

    async def __aenter__(self) -> AsyncHost:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- conversations ------------------------------------------------------------------

    @property
    def embedded(self) -> EmbeddedHost:
        """The :class:`EmbeddedHost` underneath (its store, sessions, agents)."""
        if self._embedded is None:
            raise RuntimeError("the host is not started")
        return self._embedded

    @property
    def plugin(self) -> SchedulePlugin:
        """The installed :class:`~host_bridge.SchedulePlugin`."""
        if self._plugin is None:
            raise RuntimeError("the host is not started, or was started without Schedule")
        return self._plugin

    async def open(self, session_id: str | None = None) -> Conversation:
        """The conversation on ``session_id``: resumed from the store, or new (a fresh id if None).

        Opening a session twice gives the same conversation; opens and closes
        of one session run one after another, and an open goes on when its
        caller is cancelled (the conversation is then there for the next one).
        A session a reminder woke here is taken over as it is (its running
        turn goes on). Raises
        :class:`~host_bridge.embedded.sessions.SessionLeaseRefusedError` when
        another process (a ``serve``) has the session live.
        """
        if self._closing:
            raise RuntimeError("the host is closing")
        key = session_id if session_id is not None else new_session_id()
        opened = self._current(key)
        if opened is not None and opened._closing is None:
            return opened
        return await asyncio.shield(self._serialized(key, lambda: self._open_now(key)))

    def _current(self, session_id: str) -> Conversation | None:
        """The open conversation on ``session_id`` whose agent is still live here."""
        opened = self._open.get(session_id)
        if opened is not None and self.embedded.agents.get(opened.agent.id) is not opened.agent:
            del self._open[session_id]  # its agent was disposed behind its back
            return None
        return opened

    async def _open_now(self, session_id: str) -> Conversation:
        opened = self._current(session_id)
        if opened is not None:
            return opened
        if self._closing:
            raise RuntimeError("the host is closing")
        agent = await asyncio.to_thread(self._spawn, session_id)
        conversation = Conversation(self, agent)
        self._open[session_id] = conversation
        return conversation

    def _serialized(
        self, session_id: str, work: Callable[[], Coroutine[Any, Any, _T]]
    ) -> asyncio.Task[_T]:
        """Run ``work`` as a task after the open or close of ``session_id`` in flight, if any."""
        before = self._work.get(session_id)

        async def after_before() -> _T:
            if before is not None:
                with contextlib.suppress(Exception):
                    await before
            return await work()

        task = asyncio.ensure_future(after_before())
        self._work[session_id] = task

        def done(_: asyncio.Task[_T]) -> None:
            if self._work.get(session_id) is task:
                del self._work[session_id]

        task.add_done_callback(done)
        return task

    async def when_idle(self) -> None:
        """Return once no turn runs or waits in any live session of this host."""
        for agent in self.embedded.agents.roots():
            await wait(agent.when_idle())

    def _spawn(self, session_id: str) -> EmbeddedAgent:
        """Worker thread: take over the agent a reminder woke here, or start a root agent."""
        host = self.embedded
        activation = host.activation
        if activation is None:
            return host.spawn_root(session_id=session_id, model=self._turns)
        with activation.opening(session_id) as woken:
            if woken is not None:
                return woken
            return host.spawn_root(session_id=session_id, model=self._turns)

    def _forget(self, conversation: Conversation) -> None:
        if self._open.get(conversation.session_id) is conversation:
            del self._open[conversation.session_id]

    def _let_go(self, agent: EmbeddedAgent) -> None:
        """Worker thread: dispose ``agent`` and detach its session unless another root uses it."""
        host = self._embedded
        if host is None or self._closing:
            return  # aclose disposes and detaches everything
        session = agent.session
        host.agents.dispose(agent)
        if not any(other.session is session for other in host.agents.roots()):
            host.sessions.detach(session)
