"""EmbeddedHost: a complete agent host on SQLite for the demo, the CLI, tests and benchmarks."""

from __future__ import annotations

import functools
import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

from actors._clock import ThreadTimers
from actors._contract import HostContext, Timers, wall_clock_ms
from actors._runtime import Runtime, RuntimeSpec, get_runtime, run_blocking
from host_bridge.embedded.activation import EmbeddedActivation
from host_bridge.embedded.agents import EmbeddedAgent, EmbeddedAgentRegistry, Model
from host_bridge.embedded.cold import ColdActivation, ColdTurns
from host_bridge.embedded.paths import default_data_dir, store_path
from host_bridge.embedded.sessions import EmbeddedSession, EmbeddedSessionStore
from host_bridge.embedded.stores import EventStore, open_store
from host_bridge.embedded.tools import ScopedToolRegistry

__all__ = ["DEFAULT_CLOSE_TIMEOUT", "EmbeddedHost"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

DEFAULT_CLOSE_TIMEOUT = 30.0
"""Seconds :meth:`EmbeddedHost.close` may take to write what is queued, by default.

The same as the flush timeout a tool call or a dispose waits for
(``HostContext.flush_timeout_ms``, 30 s)."""


class EmbeddedHost:
    """Sessions on SQLite, agents with turn admission, scoped tools, a clock and timers.

    ``data_dir`` defaults to :func:`host_bridge.embedded.paths.default_data_dir`;
    ``durable=False`` runs without a persistence listener (every flush resolves
    ``False``). ``store`` overrides where sessions are kept: the path of an
    SQLite file, or a ``postgresql://`` URL for a database shared by many host
    processes (see :mod:`host_bridge.embedded.stores`). On either, a
    session is owned by one host at a time: opening one that is live elsewhere
    raises :class:`~host_bridge.embedded.sessions.SessionLeaseRefusedError`
    naming the holder (``lease_wait``: how many seconds a PostgreSQL store waits
    for such a lease before refusing). Close it with :meth:`close` or use it as
    a context manager.

    ``runtime`` chooses where the host's actors (one SessionActor per session,
    one TurnActor per agent) run: ``"threading"`` (the default: OS threads),
    ``"gevent"`` (greenlets on the gevent runtime's hub, see
    :mod:`actors.gevent`) or a runtime object. The default timers follow
    the runtime; SQLite work done on the caller's behalf (opening, session rows,
    resume reads, close) runs off the hub when called from a gevent hub thread,
    and commits always happen on the store's writer thread. Pass the same
    runtime to ``install_schedule(host.context(), runtime=host.runtime)`` to run
    the owners there too.

    ``close_timeout`` bounds :meth:`close`: how many seconds it may wait for
    the store to write what is queued (``None``: as long as that takes).

    The SQLite store is private (directory 0700, files 0600); one that other
    local users can reach is refused with
    :class:`~host_bridge.embedded.stores.SharedStoreError` unless
    ``allow_shared_store`` (see :func:`~host_bridge.embedded.stores.open_store`).

    ``program`` names this program in the store's holder records, so a process
    refused a session this host holds can say who holds it (``serve``, ``chat``;
    default ``library``; see :func:`~host_bridge.embedded.stores.new_owner`).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        durable: bool = True,
        clock: Callable[[], int] = wall_clock_ms,
        timers: Timers | None = None,
        logger: logging.Logger | None = None,
        runtime: RuntimeSpec = "threading",
        store: str | os.PathLike[str] | None = None,
        lease_wait: float = 0.0,
        close_timeout: float | None = DEFAULT_CLOSE_TIMEOUT,
        allow_shared_store: bool = False,
        program: str | None = None,
    ) -> None:
        if close_timeout is not None and (
            isinstance(close_timeout, bool)
            or not isinstance(close_timeout, int | float)
            or not math.isfinite(close_timeout)
            or close_timeout < 0
        ):
            raise ValueError(
                f"close_timeout must be None or a finite number of seconds >= 0, "
                f"not {close_timeout!r}"
            )
        self.close_timeout = close_timeout
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.clock = clock
        self.runtime: Runtime = get_runtime(runtime)
        self._own_timers = timers is None
        if timers is not None:
            self.timers: Timers = timers
        elif self.runtime.name == "threading":
            self.timers = ThreadTimers(name="dsh-embedded-timers")
        else:
            self.timers = self.runtime.timers()
        self.logger = logger if logger is not None else logging.getLogger("dsh_schedule")
        self.persistence: EventStore | None = (
            run_blocking(
                lambda: open_store(
                    store if store is not None else store_path(self.data_dir),
                    lease_wait=lease_wait,
                    allow_shared_store=allow_shared_store,
                    program=program,
                )
            )
            if durable
            else None
        )
        self.sessions = EmbeddedSessionStore(self.persistence, clock=clock, runtime=self.runtime)
        self.tools = ScopedToolRegistry()
        self.agents = EmbeddedAgentRegistry(self.tools, runtime=self.runtime, timers=self.timers)
        self.activation: EmbeddedActivation | None = None
        self._closed = False

    def context(self) -> HostContext:
        """The :class:`HostContext` to hand to ``install_schedule``."""
        return HostContext(
            sessions=self.sessions,
            agents=self.agents,
            tools=self.tools,
            session_persistence=self.persistence,
            clock=self.clock,
            timers=self.timers,
            logger=self.logger,
            activation=self.activation,
        )

    def enable_activation(
        self,
        *,
        model: Model | None = None,
        workers: int = 8,
        accept: Callable[[str], bool] | None = None,
        cold: bool = False,
        cold_turns: ColdTurns | None = None,
    ) -> EmbeddedActivation:
        """Let Schedule wake this host's cold sessions (call before :meth:`context`).

        Returns the :class:`~host_bridge.embedded.activation.EmbeddedActivation`
        that :meth:`context` then passes as ``HostContext.activation``: a plugin
        installed with that context activates stored sessions whose reminders
        came due (``model`` runs their agents' turns) and lets them go again
        once quiet; ``accept(session_id)`` limits which sessions are woken.
        With ``cold`` (or ``cold_turns``) it is a
        :class:`~host_bridge.embedded.cold.ColdActivation`: due sessions are
        delivered to in batches without an agent each, ``cold_turns`` running
        their reminder turns (``None``: a live agent runs them).
        Needs a durable store. Idempotent: a second call returns the same object.
        """
        if self.activation is None:
            if cold or cold_turns is not None:
                self.activation = ColdActivation(
                    self, turns=cold_turns, model=model, workers=workers, accept=accept
                )
            else:
                self.activation = EmbeddedActivation(
                    self, model=model, workers=workers, accept=accept
                )
        return self.activation

    def spawn_root(
        self,
        *,
        session: EmbeddedSession | None = None,
        session_id: str | None = None,
        model: Model | None = None,
        agent_id: str | None = None,
    ) -> EmbeddedAgent:
        """Start a root agent on ``session`` (or on ``session_id`` opened/resumed/created)."""
        if session is None:
            session = (
                self.sessions.open(session_id) if session_id is not None else self.sessions.create()
            )
        return self.agents.spawn(session, model=model, agent_id=agent_id)

    def spawn_child(self, parent: EmbeddedAgent, *, model: Model | None = None) -> EmbeddedAgent:
        """Start a child agent of ``parent`` on a fork of its session."""
        child_session = self.sessions.fork(parent.session)
        return self.agents.spawn(child_session, model=model, parent=parent)

    def close(self) -> Exception | None:
        """Dispose every agent, detach every session, close the store and the timers.

        Reports rather than raises what the store could not write: when its last
        write fails (a read-only file, a full disk, a lock held by another
        process), the events still queued are not durable. That error is logged
        on ``dsh_schedule.host`` and returned (a ``StoreError`` whose message
        says how many events were not written and why), so a caller can report
        it in one line; ``None`` means everything queued was written. The store
        and the timers are closed even when disposing an agent or a session
        raised. Idempotent: later calls return ``None``.

        Bounded by ``close_timeout`` seconds from the call: detaching a session
        waits for its rows and the store for its last write only until then.
        A store whose writer is stuck in a commit past it (a hung disk or
        database) is closed without it, and the returned ``StoreWriteError``
        (category ``CLOSE_TIMEOUT``) says how many rows are not confirmed
        durable; those sessions stay locked until that write ends or the
        process exits (see :meth:`EventStore.close`).
        """
        from host_bridge.embedded.stores import StoreError

        if self._closed:
            return None
        self._closed = True
        started = time.monotonic()
        unwritten: Exception | None = None
        try:
            if self.persistence is not None:  # first: a pass still running waits only so long
                self.persistence.start_closing(self.close_timeout)
            if self.activation is not None:
                self.activation.close()
            self.agents.dispose_all()
            self.sessions.close()
        finally:
            try:
                if self.persistence is not None:
                    left = (
                        None
                        if self.close_timeout is None
                        else max(0.0, self.close_timeout - (time.monotonic() - started))
                    )
                    run_blocking(functools.partial(self.persistence.close, left))
            except StoreError as error:
                _log.error("closing the host: %s", error)
                unwritten = error
            finally:
                close_timers = getattr(self.timers, "close", None)
                if self._own_timers and callable(close_timers):
                    close_timers()
        return unwritten

    def __enter__(self) -> EmbeddedHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
