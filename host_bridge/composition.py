"""Install-time checks of a :class:`HostContext`, and Schedule's view of the host's flush.

:func:`compose` runs inside :func:`host_bridge.install_schedule`, before anything
is started. It checks every part of the context against its protocol in
:mod:`host_bridge.protocols` and raises **one** :class:`CompositionError` that
names every problem, one line per part, with the protocol it belongs to::

    HostContext.agents (AgentRegistry): missing on_status; roots is not callable
    HostContext.tools (ToolRegistry): missing register, execute; get cannot be called
    as get(name, *, agent)

(the second line is one line in the message).

The checks only look: members are read with ``getattr`` and their signatures
with :mod:`inspect`; no method with side effects is called (``flush`` never is).
The one exception is sampling: ``clock()`` and ``monotonic()`` are each called
once, since what they return is the whole point.

What only shows at run time is handled by :class:`CheckedSessionStore`, the
adapter Schedule's owners use instead of the host's ``SessionStore``: a pykka
future returned by ``flush`` is adapted; anything else that is not a
:class:`concurrent.futures.Future` fails that flush with a clear error (logged
once), instead of faulting the owner; and :class:`FlushMonitor` warns once per
session when its flushes keep resolving ``False``.
"""

from __future__ import annotations

import copy
import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import pykka

from host_bridge import protocols
from host_bridge.futures import failed, from_pykka, resolved
from host_bridge.protocols import HostContext, Session, SessionStore

__all__ = [
    "FALSE_FLUSH_WARNING_AFTER",
    "CheckedSessionStore",
    "CompositionError",
    "FlushMonitor",
    "compose",
    "composition_problems",
]

FALSE_FLUSH_WARNING_AFTER = 3
"""How many consecutive flushes of one session must resolve ``False`` before a warning."""

_MAX_TRACKED_SESSIONS = 4096
"""At most this many sessions in a ``False`` streak are remembered (the oldest is forgotten)."""


class CompositionError(RuntimeError):
    """The host lacks a part Schedule cannot work without, or a part has the wrong shape.

    ``problems`` holds one line per part at fault (the message joins them with
    newlines), each naming the part, its protocol and everything wrong with it.
    """

    problems: tuple[str, ...]

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems = (problems,) if isinstance(problems, str) else tuple(problems)
        super().__init__("\n".join(self.problems))

    def __reduce__(self) -> tuple[object, ...]:
        return (CompositionError, (self.problems,))


# --- install-time checks -------------------------------------------------------------------


@dataclass(frozen=True)
class _Member:
    """A method a protocol requires, and how Schedule calls it."""

    name: str
    positional: tuple[str, ...]
    keywords: tuple[str, ...]

    @property
    def call(self) -> str:
        """The call as Schedule makes it, e.g. ``register(tool, *, agent)``."""
        arguments = list(self.positional)
        if self.keywords:
            arguments += ["*", *self.keywords]
        return f"{self.name}({', '.join(arguments)})"


def _members(protocol: type) -> tuple[_Member, ...]:
    """The public methods of ``protocol``, in definition order, with their call shapes."""
    members = []
    for name, value in vars(protocol).items():
        if name.startswith("_") or not callable(value):
            continue
        parameters = list(inspect.signature(value).parameters.values())[1:]  # without self
        positional = tuple(
            p.name
            for p in parameters
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        )
        keywords = tuple(p.name for p in parameters if p.kind == p.KEYWORD_ONLY)
        members.append(_Member(name, positional, keywords))
    return tuple(members)


_MISSING = object()


def _shape_problems(part: object, protocol: type) -> list[str]:
    """What keeps ``part`` from having ``protocol``'s methods (empty when nothing does)."""
    missing: list[str] = []
    problems: list[str] = []
    for member in _members(protocol):
        try:
            value = getattr(part, member.name, _MISSING)
        except Exception as error:
            problems.append(f"reading {member.name} raised {type(error).__name__}")
            continue
        if value is _MISSING:
            missing.append(member.name)
        elif not callable(value):
            problems.append(f"{member.name} is not callable ({type(value).__name__})")
        elif not _accepts(value, member):
            problems.append(f"{member.name} cannot be called as {member.call}")
    if missing:
        problems.insert(0, f"missing {', '.join(missing)}")
    return problems


def _accepts(function: Callable[..., Any], member: _Member) -> bool:
    """Whether ``function``'s signature takes Schedule's call (unknown signatures pass)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*member.positional, **{name: None for name in member.keywords})
    except TypeError:
        return False
    return True


def _part(name: str, protocol: type | None, problems: Sequence[str]) -> str:
    label = f"HostContext.{name}" + (f" ({protocol.__name__})" if protocol is not None else "")
    return f"{label}: {'; '.join(problems)}"


_PROTOCOL_PARTS: tuple[tuple[str, type], ...] = (
    ("sessions", protocols.SessionStore),
    ("agents", protocols.AgentRegistry),
    ("tools", protocols.ToolRegistry),
)


def _clock_problem(host: HostContext) -> str | None:
    """Sample ``host.clock`` once: the problem unless it gives usable epoch milliseconds."""
    from messages.instant import MAX_INSTANT_MS, MIN_INSTANT_MS, format_instant

    rule = (
        "HostContext.clock must return the wall clock as whole epoch milliseconds: an int "
        f"from {MIN_INSTANT_MS} ({format_instant(MIN_INSTANT_MS)}) to {MAX_INSTANT_MS} "
        f"({format_instant(MAX_INSTANT_MS)}), e.g. host_bridge.clock.wall_clock_ms"
    )
    clock = getattr(host, "clock", None)
    if not callable(clock):
        return f"{rule}; it is not callable ({type(clock).__name__})"
    try:
        sample = clock()
    except Exception as error:
        return f"{rule}; calling it raised {type(error).__name__}"
    if isinstance(sample, bool) or not isinstance(sample, int):
        hint = ""
        if isinstance(sample, float):
            hint = f" {sample!r}; wrap it in int(...), e.g. lambda: int(time.time() * 1000)"
        return f"{rule}; it returned a {type(sample).__name__}{hint}"
    if not MIN_INSTANT_MS <= sample <= MAX_INSTANT_MS:
        side = "before year 1" if sample < MIN_INSTANT_MS else "after year 9999"
        return f"{rule}; it returned an int {side}"
    return None


def _monotonic_problem(host: HostContext) -> str | None:
    """Sample ``host.monotonic`` once: the problem unless it returns an int."""
    rule = (
        "HostContext.monotonic must return whole milliseconds (an int) of the clock the "
        "timers measure delays on, e.g. host_bridge.clock.monotonic_ms"
    )
    monotonic = getattr(host, "monotonic", None)
    if not callable(monotonic):
        return f"{rule}; it is not callable ({type(monotonic).__name__})"
    try:
        sample = monotonic()
    except Exception as error:
        return f"{rule}; calling it raised {type(error).__name__}"
    if isinstance(sample, bool) or not isinstance(sample, int):
        return f"{rule}; it returned a {type(sample).__name__}"
    return None


def _milliseconds_problem(host: HostContext, name: str, meaning: str) -> str | None:
    value = getattr(host, name, None)
    if value is None or (type(value) is int and value >= 1):
        return None
    shown = repr(value) if isinstance(value, int | float) else f"a {type(value).__name__}"
    return (
        f"HostContext.{name} must be a positive int of milliseconds ({meaning}) or None; "
        f"it is {shown}"
    )


def composition_problems(host: HostContext) -> list[str]:
    """Every problem of ``host``'s parts, one line per part; empty when Schedule can install.

    Looks only (``getattr`` and :mod:`inspect`), except that ``clock`` and
    ``monotonic`` are sampled once each.
    """
    lines: list[str] = []
    for name, protocol in _PROTOCOL_PARTS:
        part = getattr(host, name, None)
        if part is None:
            lines.append(_part(name, protocol, ["missing"]))
            continue
        problems = _shape_problems(part, protocol)
        if problems:
            lines.append(_part(name, protocol, problems))
    if getattr(host, "session_persistence", None) is None:
        lines.append(
            _part(
                "session_persistence",
                None,
                [
                    "missing: pass the host's durability service (the object that makes "
                    "appends durable); Schedule never runs on a host without one"
                ],
            )
        )
    lines += filter(None, [_clock_problem(host)])
    timers = getattr(host, "timers", None)
    timer_problems = ["missing"] if timers is None else _shape_problems(timers, protocols.Timers)
    if timer_problems:
        lines.append(_part("timers", protocols.Timers, timer_problems))
    logger = getattr(host, "logger", None)
    if not isinstance(logger, logging.Logger):
        kind = type(logger).__name__
        lines.append(f"HostContext.logger must be a logging.Logger; it is a {kind}")
    lines += filter(
        None,
        [
            _milliseconds_problem(host, "flush_timeout_ms", "how long a flush may take"),
            _monotonic_problem(host),
            _milliseconds_problem(host, "clock_watch_ms", "the clock watchdog's tick"),
        ],
    )
    lines += _activation_problems(host)
    return lines


def _activation_problems(host: HostContext) -> list[str]:
    """The optional ``activation`` part: checked against its protocols when it is set."""
    activation = getattr(host, "activation", None)
    if activation is None:
        return []
    problems: list[str] = []
    activation_protocol = getattr(protocols, "SessionActivation", None)
    if isinstance(activation_protocol, type):
        problems += _shape_problems(activation, activation_protocol)
    passivation_protocol = getattr(protocols, "SessionPassivation", None)
    if isinstance(passivation_protocol, type) and hasattr(activation, "passivate"):
        problems += _shape_problems(activation, passivation_protocol)
    if not problems:
        return []
    name = activation_protocol.__name__ if isinstance(activation_protocol, type) else None
    label = "HostContext.activation" + (f" ({name})" if name else "")
    return [f"{label}: {'; '.join(problems)}"]


def compose(
    host: HostContext, *, false_flush_warning_after: int = FALSE_FLUSH_WARNING_AFTER
) -> HostContext:
    """Check ``host`` and return the context Schedule runs on; raises :class:`CompositionError`.

    The returned context is a shallow copy of ``host`` whose ``sessions`` is a
    :class:`CheckedSessionStore` around the host's own (``host`` is not changed).
    """
    problems = composition_problems(host)
    if problems:
        raise CompositionError(problems)
    assert host.sessions is not None
    checked = copy.copy(host)
    checked.sessions = CheckedSessionStore(
        host.sessions,
        host.logger.getChild("sessions"),
        false_flush_warning_after=false_flush_warning_after,
    )
    return checked


# --- the flush, as Schedule sees it ----------------------------------------------------------


class FlushProtocolError(TypeError):
    """A ``SessionStore.flush`` returned something that is not a future Schedule can wait on."""


class CheckedSessionStore:
    """The host's ``SessionStore`` as Schedule's owners use it (one per installed plugin).

    ``get`` and ``list`` are the host's. ``flush`` calls the host's once and
    returns a :class:`concurrent.futures.Future`:

    - a ``Future`` is returned as is;
    - a pykka future (a ``pykka.Future``, or duck-typed: it has ``get()`` and
      no ``add_done_callback``) is adapted: one that has settled already is
      copied at once, one with done-callbacks (the gevent runtime's) from its
      callback, any other pending one is waited for by
      :func:`host_bridge.futures.from_pykka`;
    - anything else fails that flush with :class:`FlushProtocolError` naming
      the rule (logged at error level once per plugin), so the tool answers
      ``persistence_uncertain`` instead of the owner faulting.

    A ``flush`` that raises still raises (the owner counts it as failed).
    Every outcome is shown to a :class:`FlushMonitor`.
    """

    def __init__(
        self,
        store: SessionStore,
        log: logging.Logger,
        *,
        false_flush_warning_after: int = FALSE_FLUSH_WARNING_AFTER,
    ) -> None:
        self._store = store
        self._log = log
        self.monitor = FlushMonitor(log, false_flush_warning_after)
        self._lock = threading.Lock()
        self._reported: set[str] = set()

    @property
    def store(self) -> SessionStore:
        """The host's own store."""
        return self._store

    def get(self, session_id: str) -> Session | None:
        """The host's ``get``."""
        return self._store.get(session_id)

    def list(self) -> Sequence[Session]:
        """The host's ``list``."""
        return self._store.list()

    def flush(self, session: Session) -> Future[bool]:
        """The host's flush as a ``Future[bool]``; see the class docstring."""
        returned: Any = self._store.flush(session)
        if isinstance(returned, Future):
            future: Future[bool] = returned
        elif isinstance(returned, pykka.Future) or (
            callable(getattr(returned, "get", None)) and not hasattr(returned, "add_done_callback")
        ):
            self._once("pykka", logging.DEBUG, "flush returns pykka futures; Schedule adapts them")
            future = _from_pykka(returned)
        else:
            self._once(
                "not-a-future",
                logging.ERROR,
                "HostContext.sessions (SessionStore): flush returned a %s, not a "
                "concurrent.futures.Future[bool]; every such flush counts as failed, so "
                "Schedule's tools answer persistence_uncertain and nothing is delivered. "
                "Return a concurrent.futures.Future (host_bridge.futures.from_pykka adapts "
                "a pykka future)",
                type(returned).__name__,
            )
            future = failed(
                FlushProtocolError(
                    "SessionStore.flush must return a concurrent.futures.Future[bool]"
                )
            )
        self.monitor.watch(_session_id(session), future)
        return future

    def _once(self, key: str, level: int, message: str, *args: object) -> None:
        with self._lock:
            if key in self._reported:
                return
            self._reported.add(key)
        self._log.log(level, message, *args)


def _session_id(session: Session) -> str:
    try:
        return str(session.id)
    except Exception:
        return "?"


def _from_pykka(future: Any) -> Future[Any]:
    """A pykka future as a ``concurrent.futures.Future``, without a thread where possible.

    A pykka future that has settled is copied at once; one with done-callbacks
    (the gevent runtime's :class:`~actors.gevent_runtime.GeventFuture`) is
    copied from its callback; only a pending plain pykka future needs
    :func:`host_bridge.futures.from_pykka`'s waiting thread.
    """
    if not isinstance(future, pykka.Future):
        return from_pykka(future)
    try:
        return resolved(future.get(timeout=0))
    except pykka.Timeout:
        pass
    except Exception as error:
        return failed(error)
    add_done_callback = getattr(future, "add_done_callback", None)
    if not callable(add_done_callback):
        return from_pykka(future)
    adapted: Future[Any] = Future()

    def copy(done: Any) -> None:
        try:
            value = done.get(timeout=0)
        except Exception as error:
            adapted.set_exception(error)
        else:
            adapted.set_result(value)

    add_done_callback(copy)
    return adapted


@dataclass
class _Streak:
    count: int = 0
    warned: bool = False


class FlushMonitor:
    """Watches flush outcomes and says so when a session's flushes keep resolving ``False``.

    After ``warn_after`` consecutive flushes of one session resolved ``False``
    it logs one warning for that session (no persistence listener acknowledged
    durability, so tools answer ``persistence_uncertain`` and reminders wait);
    the first ``True`` after a warning logs one info line. A failed or
    cancelled flush neither extends nor ends a streak (the owner reports
    those). A flush that resolves something other than a ``bool`` is a broken
    ``SessionStore``, logged once at warning level. Callbacks run on whatever
    thread settles the flush; the state is behind a lock.
    """

    def __init__(self, log: logging.Logger, warn_after: int = FALSE_FLUSH_WARNING_AFTER) -> None:
        if warn_after < 1:
            raise ValueError("warn_after must be at least 1")
        self._log = log
        self._warn_after = warn_after
        self._lock = threading.Lock()
        self._streaks: OrderedDict[str, _Streak] = OrderedDict()
        self._odd_value_reported = False
        self.warnings = 0
        """How many sessions were warned about so far."""

    def watch(self, session_id: str, future: Future[bool]) -> None:
        """Observe the outcome of one flush of ``session_id``."""
        future.add_done_callback(lambda done: self._settled(session_id, done))

    def _settled(self, session_id: str, done: Future[bool]) -> None:
        if done.cancelled() or done.exception() is not None:
            return
        value = done.result()
        if value is True:
            self._succeeded(session_id)
        elif value is False:
            self._refused(session_id)
        else:
            with self._lock:
                report, self._odd_value_reported = not self._odd_value_reported, True
            if report:
                self._log.warning(
                    "HostContext.sessions (SessionStore): a flush of session %r resolved a %s "
                    "instead of True or False; it counts as failed",
                    session_id,
                    type(value).__name__,
                )

    def _succeeded(self, session_id: str) -> None:
        with self._lock:
            streak = self._streaks.pop(session_id, None)
        if streak is not None and streak.warned:
            self._log.info(
                "flushes of session %r resolve True again, after %d that resolved False",
                session_id,
                streak.count,
            )

    def _refused(self, session_id: str) -> None:
        with self._lock:
            streak = self._streaks.get(session_id)
            if streak is None:
                streak = self._streaks[session_id] = _Streak()
                if len(self._streaks) > _MAX_TRACKED_SESSIONS:
                    self._streaks.popitem(last=False)
            streak.count += 1
            warn = not streak.warned and streak.count >= self._warn_after
            if warn:
                streak.warned = True
                self.warnings += 1
            count = streak.count
        if warn:
            self._log.warning(
                "%d consecutive flushes of session %r resolved False: no persistence listener "
                "acknowledged durability (is the host's durability service attached to this "
                "session's store?). Until a flush resolves True, Schedule's tools answer "
                "persistence_uncertain and no reminder of this session is delivered",
                count,
                session_id,
            )
