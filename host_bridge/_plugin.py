"""``install_schedule``: give every future live root agent its owner and three tools.

An ``"idle"`` status drives an agent's owner only once its session holds a
``schedule/change`` event (anywhere in its log, inherited ones included), so an
agent that never used Schedule is never checkpointed on idle.

Each owner reports what it does to the plugin's telemetry
(:mod:`host_bridge._telemetry`: OpenTelemetry metrics and spans, emitted only
when the host configured an OpenTelemetry SDK).

The plugin is also its owners' supervisor (:mod:`host_bridge._supervision`: an
owner stopped by an unexpected error restarts in place after a back-off, within
a restart budget) and runs one clock watchdog (:mod:`host_bridge._watchdog`)
while it has owners, so a wall-clock jump or a suspend re-times armed reminders.
Owners, the wake-up actor and the watchdog read the host's clock through one
:class:`~host_bridge._steady_clock.SteadyClock`: a forward step counts only once
it held for ``HostContext.clock_step_confirm_ms``.

When the host offers :class:`~host_bridge.SessionActivation`, the
plugin also runs one wake-up actor (:mod:`actors._wake_up`), supervised like the
owners, that activates cold sessions whose reminders came due and lets them go
again once quiet; its timer is re-timed by the clock watchdog too.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pykka

from actors._checkpoint import offered_checkpoint
from actors._contract import Agent, HostContext, Timers
from actors._observer import NO_OBSERVER, OwnerObserver
from actors._runtime import Runtime, RuntimeSpec, get_runtime
from actors._schedule_owner import OwnerStatusBox, ScheduleOwner
from actors._supervised import OwnerSupervisor
from actors._teardown import TeardownCause, TeardownGate, await_passages
from actors._wake_up import WakePolicy, WakeUpActor, WakeUpBoard, WakeUpStatus
from host_bridge._composition import CompositionError, compose
from host_bridge._futures import resolved
from host_bridge._steady_clock import SteadyClock
from host_bridge._supervision import OwnerSupervision, RestartPolicy
from host_bridge._telemetry import ScheduleTelemetry
from host_bridge._tools import schedule_tools
from host_bridge._watchdog import ClockWatchdog
from messages._mailbox import (
    AgentActivity,
    AgentGone,
    ClockJumped,
    DisposeOwner,
    DisposeWakeUp,
    RequestDrive,
    RestartWakeUp,
    StartOwner,
    StartWakeUp,
)
from messages._records import SCHEDULE_CHANGE_TYPE
from messages._status import OwnerStatus

__all__ = [
    "CompositionError",
    "PluginStatus",
    "RestartPolicy",
    "SchedulePlugin",
    "WakePolicy",
    "install_schedule",
]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


@dataclass(frozen=True)
class PluginStatus:
    """What the plugin is doing: one :class:`OwnerStatus` per installed agent.

    ``clock_watch`` tells whether the clock watchdog is ticking (it runs while at
    least one owner is installed); ``clock_jumps`` counts the jumps it noticed.
    ``wake_up`` is the wake-up actor's status when the host can activate
    sessions (``None`` otherwise).
    """

    disposed: bool
    owners: tuple[OwnerStatus, ...]
    clock_watch: bool = False
    clock_jumps: int = 0
    wake_up: WakeUpStatus | None = None

    @property
    def faulted(self) -> tuple[OwnerStatus, ...]:
        """The owners whose delivery stopped for good."""
        return tuple(o for o in self.owners if o.state == "faulted")

    @property
    def restarting(self) -> tuple[OwnerStatus, ...]:
        """The owners whose delivery waits for a supervised restart."""
        return tuple(o for o in self.owners if o.state == "restarting")


@dataclass
class _Installed:
    agent: Agent
    owner: pykka.ActorRef[ScheduleOwner]
    status: OwnerStatusBox
    supervision: OwnerSupervision
    gate: TeardownGate
    unregister: list[Callable[[], None]] = field(default_factory=list)
    uses_schedule: bool = False  # the session holds a schedule/change (stays true: append-only)
    scanned: int = 0  # how much of the log was searched for one without finding it

    def holds_schedule_events(self) -> bool:
        """Whether the agent's session holds a ``schedule/change`` event anywhere.

        Searches only what the log gained since the last search; a session's
        schedule checkpoint (see :class:`~actors._contract.SessionWithCheckpoint`)
        answers for the log before its end, so a long log is never walked. A log
        that cannot be read counts as holding one (the drive then reports it).
        """
        if self.uses_schedule:
            return True
        try:
            session = self.agent.session
            events = session.events
            if self.scanned == 0:
                checkpoint = offered_checkpoint(session, len(events), _log)
                if checkpoint is not None:
                    if checkpoint.seen_ids:
                        self.uses_schedule = True
                        return True
                    # Nothing created before its end: a drive could find nothing there.
                    self.scanned = checkpoint.end
            fresh = events[self.scanned :]
            found = any(event.type == SCHEDULE_CHANGE_TYPE for event in fresh)
            scanned = self.scanned + len(fresh)
        except Exception:
            _log.debug("the log of agent %r could not be read on idle", self.agent.id)
            return True
        if found:
            self.uses_schedule = True
        else:
            self.scanned = scanned
        return found


class SchedulePlugin:
    """An installed Schedule plugin. Create it with :func:`install_schedule`."""

    def __init__(
        self,
        host: HostContext,
        runtime: RuntimeSpec = "threading",
        restart_policy: RestartPolicy | None = None,
        wake_policy: WakePolicy | None = None,
        *,
        telemetry: OwnerObserver | bool = True,
        calendar_rules: bool = True,
    ) -> None:
        if type(calendar_rules) is not bool:
            raise TypeError(
                f"calendar_rules must be True or False, not {type(calendar_rules).__name__}"
            )
        self._calendar_rules = calendar_rules
        self._runtime = get_runtime(runtime)
        self._own_timers: Timers | None = None
        host = copy.copy(host)  # the owners and the wake-up actor read the steady clock
        confirm_ms = host.clock_step_confirm_ms
        self._clock = SteadyClock(
            host.clock,
            host.monotonic,
            confirm_ms if confirm_ms is not None else 0,
            log=host.logger.getChild("clock"),
        )
        host.clock = self._clock
        timers = host.timers
        if timers is None:  # the runtime supplies them; closed when the plugin is disposed
            timers = self._own_timers = self._runtime.timers()
            host.timers = timers
        self._host = host
        self._timers = timers
        self._telemetry = _telemetry(telemetry)
        self._restart_policy = restart_policy if restart_policy is not None else RestartPolicy()
        self._wake_policy = wake_policy if wake_policy is not None else WakePolicy()
        self._watchdog = (
            ClockWatchdog(
                self._clock,
                self._timers,
                host.clock_watch_ms,
                self._on_clock_jump,
                log=host.logger.getChild("watchdog"),
            )
            if host.clock_watch_ms is not None
            else None
        )
        self._owner_class = self._runtime.bind(ScheduleOwner)
        self._lock = threading.Lock()
        self._installed: dict[str, _Installed] = {}
        self._disposed = False
        self._dispose_future: Future[None] | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self._wake: pykka.ActorRef[WakeUpActor] | None = None
        self._wake_supervision: OwnerSupervision | None = None
        self._wake_board = WakeUpBoard()

    def _listen(self) -> None:
        agents = self._host.agents
        assert agents is not None
        self._unsubscribe = [
            agents.on_created(self._on_created),
            agents.on_status(self._on_status),
            agents.on_disposed(self._on_disposed),
        ]
        self._start_wake_up()

    def _start_wake_up(self) -> None:
        """With a host that can activate sessions: start the supervised wake-up actor."""
        host = self._host
        activation = host.activation
        if activation is None:
            return
        supervision = OwnerSupervision(
            "wake-up",
            self._restart_policy,
            self._timers,
            host.monotonic,
            host.logger.getChild("supervision"),
            subject="the wake-up actor",
            restart=RestartWakeUp,
            stopped="cold sessions are no longer woken",
        )
        supervisor: OwnerSupervisor = supervision
        wake = self._runtime.bind(WakeUpActor).start(
            activation,
            host,
            self._wake_policy,
            self._owner_quiet,
            self._wake_board,
            supervisor=supervisor,
        )
        supervision.bind(wake)
        with self._lock:
            self._wake = wake
            self._wake_supervision = supervision
            if self._watchdog is not None:
                self._watchdog.start()  # it re-times the wake-up timer too
        _tell(wake, StartWakeUp())

    def _owner_quiet(self, agent: Agent) -> bool:
        """Whether ``agent``'s owner has nothing in flight, queued or waiting for idleness."""
        installed = self._installed.get(agent.id)
        if installed is None or installed.agent is not agent:
            return True
        status = installed.status.current
        return not status.busy and not status.waiting_for_idle

    # --- public ------------------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        """The actor runtime the owners run on."""
        return self._runtime

    @property
    def calendar_rules(self) -> bool:
        """Whether the tools offer the ``cron`` selector (see :func:`install_schedule`)."""
        return self._calendar_rules

    def owner_of(self, agent: Agent) -> pykka.ActorRef[ScheduleOwner] | None:
        """The owner actor installed for ``agent`` (for diagnostics and tests)."""
        installed = self._installed.get(agent.id)
        return installed.owner if installed is not None and installed.agent is agent else None

    def wait_quiet(self, agent: Agent, timeout: float = 10.0) -> OwnerStatus:
        """Block until ``agent``'s owner has nothing in flight or queued (demos, tests, shutdown).

        Raises ``KeyError`` if the agent has no owner and ``TimeoutError`` on timeout.
        """
        installed = self._installed.get(agent.id)
        if installed is None or installed.agent is not agent:
            raise KeyError(agent.id)
        return installed.status.wait_quiet(timeout)

    def agents(self) -> Sequence[Agent]:
        """Agents that currently have Schedule."""
        with self._lock:
            return tuple(i.agent for i in self._installed.values())

    def status(self) -> PluginStatus:
        """A snapshot of every owner's state (faults are visible here)."""
        watchdog = self._watchdog
        with self._lock:
            owners = tuple(i.status.current for i in self._installed.values())
            wake = self._wake
        wake_status = self._wake_board.status if wake is not None else None
        if watchdog is None:
            return PluginStatus(self._disposed, owners, wake_up=wake_status)
        return PluginStatus(
            self._disposed, owners, watchdog.running, watchdog.jumps, wake_up=wake_status
        )

    def wait_activations(self, timeout: float = 10.0) -> WakeUpStatus | None:
        """Block until the wake-up actor has no activation in flight (demos, tests).

        Returns its status then, or ``None`` without host activation (no wake-up
        actor). An activation is in flight from the actor's call of
        ``activation.activate`` until it has handled the future's outcome; a
        host that never resolves that future makes this raise ``TimeoutError``.
        """
        with self._lock:
            wake = self._wake
        if wake is None:
            return None
        return self._wake_board.wait_for(
            lambda s: s.in_flight == 0 or s.state == "disposed", timeout
        )

    @property
    def wake_up(self) -> pykka.ActorRef[WakeUpActor] | None:
        """The wake-up actor (for diagnostics and tests); None without host activation."""
        return self._wake

    def dispose(self) -> Future[None]:
        """Stop listening and dispose every owner; resolves once all have finished.

        Teardown begins here, not when the owners reach the request: once this
        returns no owner appends anything (an append or delivery under way is
        waited for, at most ``flush_timeout_ms``), and every tool call that did
        not append answers ``internal_error`` (``shutting_down``).
        """
        with self._lock:
            if self._dispose_future is not None:
                return self._dispose_future
            self._disposed = True
            self._dispose_future = Future()
            unsubscribe, self._unsubscribe = self._unsubscribe, []
            installed = list(self._installed.values())
            self._installed.clear()
            if self._watchdog is not None:
                self._watchdog.stop()
            wake, self._wake = self._wake, None
            wake_supervision = self._wake_supervision
        # First: from here on no owner appends anything. Every gate closes at once, then
        # the steps under way are waited for together, within one flush timeout.
        under_way = [entry.gate.close("shutting_down", wait=False) for entry in installed]
        await_passages(
            [left for left in under_way if left is not None], self._host.flush_timeout_ms
        )
        for stop in unsubscribe:
            stop()
        finished = [self._retire(entry, wait=False) for entry in installed]
        if wake is not None:
            if wake_supervision is not None:
                wake_supervision.close()
            reply: Future[None] = Future()
            try:
                wake.tell(DisposeWakeUp(reply))
                finished.append(reply)
            except pykka.ActorDeadError:
                pass
        own_timers = self._own_timers
        if own_timers is None:
            _when_all(finished, self._dispose_future)
            return self._dispose_future
        all_finished: Future[None] = Future()
        done = self._dispose_future

        def close_then_resolve(_: Future[None]) -> None:
            _close_timers(own_timers)
            done.set_result(None)

        all_finished.add_done_callback(close_then_resolve)
        _when_all(finished, all_finished)
        return done

    # --- host events ---------------------------------------------------------------------

    def _on_created(self, agent: Agent) -> None:
        agents = self._host.agents
        assert agents is not None
        if self._disposed or agent not in agents.roots():
            return
        with self._lock:
            if agent.id in self._installed:
                return
        self._install(agent)

    def _on_status(self, agent: Agent, status: str) -> None:
        """An idle agent whose session uses Schedule gets a drive; never raises.

        Every status of an agent the wake-up actor activated restarts its quiet period.
        """
        self._tell_wake_up(agent, AgentActivity)
        try:
            if status != "idle":
                return
            installed = self._installed.get(agent.id)
            if installed is None or installed.agent is not agent:
                return
            if installed.holds_schedule_events():
                _tell(installed.owner, RequestDrive("idle"))
        except Exception:
            _log.warning("the idle drive of an agent could not be requested", exc_info=True)

    def _tell_wake_up(self, agent: Agent, message: Callable[[str], Any]) -> None:
        """Forward a report about an agent the wake-up actor manages; never raises."""
        try:
            wake = self._wake
            if wake is not None and agent.id in self._wake_board:
                _tell(wake, message(agent.id))
        except Exception:
            _log.warning("the wake-up actor could not be told about an agent", exc_info=True)

    def _on_disposed(self, agent: Agent) -> None:
        with self._lock:
            installed = self._installed.get(agent.id)
            if installed is None or installed.agent is not agent:
                return
            del self._installed[agent.id]
            if not self._installed and self._watchdog is not None and self._wake is None:
                self._watchdog.stop()  # it runs only while there are owners (or a wake-up actor)
        self._tell_wake_up(agent, AgentGone)
        self._retire(installed, "not_live")

    def _on_clock_jump(self, jump_ms: int) -> None:
        """The watchdog saw the wall clock jump: owners with an armed timer re-drive."""
        with self._lock:
            owners = [entry.owner for entry in self._installed.values()]
            wake = self._wake
        message = ClockJumped(jump_ms)
        for owner in owners:
            _tell(owner, message)
        if wake is not None:
            _tell(wake, message)

    # --- install / retire --------------------------------------------------------------------

    def _install(self, agent: Agent) -> None:
        tools = self._host.tools
        assert tools is not None
        host = self._host
        status = OwnerStatusBox(agent.id)
        supervision = OwnerSupervision(
            agent.id,
            self._restart_policy,
            self._timers,
            host.monotonic,
            host.logger.getChild("supervision"),
        )
        supervisor: OwnerSupervisor = supervision
        gate = TeardownGate(host.flush_timeout_ms)
        observer = self._owner_observer()
        origin = observer.call_origin if isinstance(observer, ScheduleTelemetry) else None
        owner = self._owner_class.start(agent, host, status, supervisor, observer, gate=gate)
        supervision.bind(owner)
        entry = _Installed(agent, owner, status, supervision, gate)
        try:
            for tool in schedule_tools(
                agent, owner, gate, calendar_rules=self._calendar_rules, origin=origin
            ):
                entry.unregister.append(tools.register(tool, agent=agent))
        except Exception:
            for unregister in reversed(entry.unregister):
                _quietly(unregister)
            supervision.close()
            owner.stop()
            raise
        with self._lock:
            if self._disposed:
                race = True
            else:
                race = False
                self._installed[agent.id] = entry
                if self._watchdog is not None:
                    self._watchdog.start()
        if race:
            self._retire(entry)
            return
        _tell(owner, StartOwner())
        _log.debug("Schedule installed on agent %r", agent.id)

    def _owner_observer(self) -> OwnerObserver:
        """What a new owner reports to: OpenTelemetry only if an SDK would record it."""
        telemetry = self._telemetry
        return telemetry.for_owner() if isinstance(telemetry, ScheduleTelemetry) else telemetry

    def _retire(
        self, entry: _Installed, cause: TeardownCause = "shutting_down", *, wait: bool = True
    ) -> Future[None]:
        """Dispose one owner: close its gate (teardown begins), unregister its tools, tell it.

        ``wait=False`` when the caller already waited for the step under way.
        """
        entry.gate.close(cause, wait=wait)
        entry.supervision.close()  # a pending restart is cancelled
        for unregister in reversed(entry.unregister):
            _quietly(unregister)
        entry.unregister.clear()
        reply: Future[None] = Future()
        try:
            entry.owner.tell(DisposeOwner(reply))
        except pykka.ActorDeadError:
            return resolved(None)
        return reply


def install_schedule(
    host: HostContext,
    *,
    runtime: RuntimeSpec = "threading",
    telemetry: OwnerObserver | bool = True,
    restart_policy: RestartPolicy | None = None,
    wake_policy: WakePolicy | None = None,
    calendar_rules: bool = True,
) -> SchedulePlugin:
    """Install Schedule: every live root agent created from now on gets an owner and three tools.

    ``telemetry`` chooses what owners report to: ``True`` (the default)
    OpenTelemetry metrics and spans on the global providers, which emit
    nothing unless the host configured an SDK before the agent's owner
    started; a :class:`~host_bridge._telemetry.ScheduleTelemetry` on providers
    of the host's choosing, or any :class:`~actors._observer.OwnerObserver`;
    ``False`` nothing.

    ``runtime`` chooses where the owners run: ``"threading"`` (the default, one
    OS thread per owner), ``"gevent"`` (greenlets on the gevent runtime's hub,
    see :mod:`actors.gevent`) or a runtime object from
    :func:`actors._runtime.get_runtime`. ``restart_policy`` sets the back-off
    and budget with which owners stopped by an unexpected error are restarted
    (default :class:`RestartPolicy`: 1 s doubling to 60 s, 5 restarts per 10
    minutes). When ``host.activation`` is set, a wake-up actor activates cold
    sessions whose reminders came due and lets them go again once quiet, as
    ``wake_policy`` says (default :class:`WakePolicy`: 8 activations at a time,
    the index re-read every second, a 30 s quiet period).

    ``calendar_rules`` chooses whether ``schedule_create`` offers the ``cron``
    selector (the default ``True``). A ``cron`` record is an extension of the
    version-1 stream that readers without calendar rules reject, so a host
    that shares its logs with such an implementation passes ``False``: the
    tools' definitions then mention ``cron`` nowhere (parameters,
    descriptions, output schemas: :func:`host_bridge._schemas.tool_specs`
    ``(calendar_rules=False)``) and a call with a ``cron`` key answers
    ``invalid_selector`` as for any unknown key, appending nothing. Records
    already in a log are delivered either way. Anything but a ``bool`` is a
    ``TypeError``.

    The host is checked first (:func:`host_bridge._composition.compose`): every
    part against its protocol, by looking, not by calling (only ``clock`` and
    ``monotonic`` are sampled once). One :class:`CompositionError` names every
    problem, one line per part with its protocol, e.g. ``HostContext.agents
    (AgentRegistry): missing on_status; roots is not callable``; a missing
    ``sessions``, ``agents``, ``tools`` or ``session_persistence``, a
    ``clock_watch_ms``, ``clock_step_confirm_ms`` or ``flush_timeout_ms`` that
    is not a positive ``int`` or None, and a ``logger`` that is not a
    ``logging.Logger`` are among them.

    ``host.clock`` must return the wall clock as whole epoch milliseconds, an
    ``int`` (not a ``bool``) from 0001-01-01T00:00:00.000Z to
    9999-12-31T23:59:59.999Z. Anything else (a float such as
    ``time.time() * 1000``, a clock that raises) is a :class:`CompositionError`
    saying what it returned, instead of every later create failing with
    ``time_out_of_range``.

    The owners use the host's ``SessionStore`` through a
    :class:`~host_bridge._checked_sessions.CheckedSessionStore`: a pykka future
    returned by ``flush`` is adapted, anything else that is not a
    ``concurrent.futures.Future`` fails that flush with a logged error, and a
    session whose flushes keep resolving ``False`` is reported once.
    """
    checked = compose(host)
    plugin = SchedulePlugin(
        checked,
        runtime,
        restart_policy,
        wake_policy,
        telemetry=telemetry,
        calendar_rules=calendar_rules,
    )
    plugin._listen()
    return plugin


def _tell(owner: pykka.ActorRef[Any], message: Any) -> None:
    with contextlib.suppress(pykka.ActorDeadError):
        owner.tell(message)


def _quietly(action: Callable[[], None]) -> None:
    try:
        action()
    except Exception:
        _log.warning("a Schedule tool could not be unregistered")


def _close_timers(timers: Timers) -> None:
    """Close timers the runtime supplied for this plugin (nothing is armed on them any more)."""
    close = getattr(timers, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            _log.warning("the plugin's timers could not be closed")


def _when_all(futures: list[Future[None]], target: Future[None]) -> None:
    remaining = len(futures)
    if remaining == 0:
        target.set_result(None)
        return
    lock = threading.Lock()

    def one_done(_: Future[None]) -> None:
        nonlocal remaining
        with lock:
            remaining -= 1
            last = remaining == 0
        if last:
            target.set_result(None)

    for future in futures:
        future.add_done_callback(one_done)


def _telemetry(telemetry: OwnerObserver | bool) -> OwnerObserver:
    """The plugin's observer for a ``telemetry`` argument; ``TypeError`` for anything else."""
    if telemetry is True:
        return ScheduleTelemetry()
    if telemetry is False:
        return NO_OBSERVER
    missing = [name for name in _OBSERVER_METHODS if not callable(getattr(telemetry, name, None))]
    if missing:
        raise TypeError(
            "telemetry must be True, False, a ScheduleTelemetry or an OwnerObserver; "
            f"{type(telemetry).__name__} lacks {', '.join(missing)}"
        )
    return telemetry


_OBSERVER_METHODS = (
    "transaction_started",
    "transaction_finished",
    "delivered",
    "persistence_uncertain",
    "contained_failure",
)
