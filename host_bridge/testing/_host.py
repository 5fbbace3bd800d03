"""A complete fake host: every fake wired to one clock and one journal."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from actors._contract import HostContext, SessionEvent
from host_bridge.embedded.tools import ScopedToolRegistry
from host_bridge.testing._agents import FakeAgent
from host_bridge.testing._clock import DEFAULT_START_MS, FakeClock, FakeTimers
from host_bridge.testing._journal import Journal
from host_bridge.testing._registry import FakeAgentRegistry
from host_bridge.testing._sessions import FakeSession, FakeSessionStore
from host_bridge.testing._settle import settle

if TYPE_CHECKING:
    from host_bridge._plugin import SchedulePlugin

__all__ = ["FakeHost", "FakePersistence"]


class FakePersistence:
    """A marker standing in for the host's durability service."""

    def __repr__(self) -> str:
        return "FakePersistence()"


class FakeHost:
    """A :class:`FakeClock`, :class:`FakeTimers`, :class:`FakeSessionStore`,
    :class:`FakeAgentRegistry` and :class:`~host_bridge.embedded.tools.ScopedToolRegistry`
    sharing one :class:`Journal`.

    ``clock_watch_ms`` is passed on in :meth:`context`. It defaults to ``None``
    (Schedule's clock watchdog off), unlike a real ``HostContext``: a watchdog
    ticking every second of fake time would fire millions of times when a test
    advances ``FakeTimers`` by weeks, and its ticks would show among the armed
    timers. Tests of clock jumps and suspends pass e.g. ``clock_watch_ms=1000``
    and move time with ``clock.set``/``clock.suspend`` and ``timers.advance``.
    ``clock_step_confirm_ms`` keeps its real default: a forward ``clock.set``
    or ``suspend`` after install counts only once it held for 5 s of fake time,
    so set a test's start time before installing (``start_ms``).

    **The start-up flush.** Schedule starts an owner for every root agent it
    sees created, and the owner's first act is a drive, whose preflight is a
    ``flush``. That flush takes the next outcome scripted on :attr:`sessions`.
    With ``install_schedule(host.context())`` the owner runs on its own thread,
    so an outcome scripted right after :meth:`spawn_root` may be consumed by
    the start-up flush instead of the flush the test meant. Install through
    :meth:`install_schedule` instead: then :meth:`spawn_root` returns only once
    each new owner has settled its start-up, so an outcome scripted after it
    goes to the next flush the test causes (and one scripted before it, to the
    start-up flush, deterministically).

    ``clock`` lets several fakes share one :class:`FakeClock` (a new one
    starting at ``start_ms`` by default).
    """

    def __init__(
        self,
        *,
        start_ms: int = DEFAULT_START_MS,
        clock_watch_ms: int | None = None,
        clock: FakeClock | None = None,
    ) -> None:
        self.clock_watch_ms = clock_watch_ms
        self.journal = Journal()
        self.clock = clock if clock is not None else FakeClock(start_ms)
        self.timers = FakeTimers(self.clock, self.journal)
        self.sessions = FakeSessionStore(self.journal)
        self.agents = FakeAgentRegistry(self.journal)
        self.tools = ScopedToolRegistry()
        self.persistence = FakePersistence()
        self.plugins: list[SchedulePlugin] = []
        """The plugins installed through :meth:`install_schedule`, oldest first."""

    def context(self) -> HostContext:
        """A ``HostContext`` over these fakes (``session_persistence`` is a marker).

        ``monotonic`` is the fake clock's elapsed time (what ``FakeTimers`` measure);
        ``clock_watch_ms`` is this host's (off unless given to the constructor).
        """
        return HostContext(
            sessions=self.sessions,
            agents=self.agents,
            tools=self.tools,
            session_persistence=self.persistence,
            clock=self.clock,
            timers=self.timers,
            monotonic=self.clock.monotonic,
            clock_watch_ms=self.clock_watch_ms,
        )

    def install_schedule(self, **options: Any) -> SchedulePlugin:
        """``install_schedule(self.context(), **options)``, remembered in :attr:`plugins`.

        Root agents spawned afterwards by :meth:`spawn_root` return with their
        owner's start-up settled; :func:`~host_bridge.testing.settle_host` and
        :meth:`dispose_plugins` find the plugin here.
        """
        from host_bridge._plugin import install_schedule

        plugin = install_schedule(self.context(), **options)
        self.plugins.append(plugin)
        return plugin

    @property
    def plugin(self) -> SchedulePlugin:
        """The plugin installed last through :meth:`install_schedule` (``LookupError`` if none)."""
        if not self.plugins:
            raise LookupError("no plugin was installed through FakeHost.install_schedule")
        return self.plugins[-1]

    def dispose_plugins(self, timeout: float = 10.0) -> None:
        """Dispose every plugin of :attr:`plugins` (newest first) and wait for each."""
        while self.plugins:
            self.plugins.pop().dispose().result(timeout=timeout)

    def new_session(
        self,
        session_id: str,
        *,
        seed_events: Iterable[SessionEvent | tuple[str, Any]] = (),
        seed_length: int | None = None,
        parent_session: str | None = None,
    ) -> FakeSession:
        """Create a :class:`FakeSession` on this host's clock and journal and add it."""
        session = FakeSession(
            session_id,
            seed_events=seed_events,
            seed_length=seed_length,
            parent_session=parent_session,
            clock=self.clock,
            journal=self.journal,
        )
        return self.sessions.add(session)

    def spawn_root(
        self,
        agent_id: str = "agent-1",
        session_id: str | None = None,
        *,
        seed_events: Iterable[SessionEvent | tuple[str, Any]] = (),
        seed_length: int | None = None,
        parent_session: str | None = None,
    ) -> FakeAgent:
        """Create a session (id ``session_id`` or ``"<agent_id>/session"``) and a root agent.

        ``on_created`` listeners run before this returns, and the owner each
        plugin of :attr:`plugins` started for the agent has settled its
        start-up (its first drive and that drive's flush; see the class docstring).
        """
        session = self.new_session(
            session_id if session_id is not None else f"{agent_id}/session",
            seed_events=seed_events,
            seed_length=seed_length,
            parent_session=parent_session,
        )
        agent = self.agents.create_root(agent_id, session)
        for plugin in self.plugins:
            owner = plugin.owner_of(agent)
            if owner is not None:
                settle(owner)
        return agent

    def spawn_child(self, agent_id: str, session_id: str | None = None) -> FakeAgent:
        """Create a session and a non-root agent; ``on_created`` listeners run."""
        session = self.new_session(session_id if session_id is not None else f"{agent_id}/session")
        return self.agents.create_child(agent_id, session)
