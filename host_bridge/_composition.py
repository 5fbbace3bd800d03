"""Install-time checks of a :class:`HostContext`, and Schedule's view of the host's flush.

:func:`compose` runs inside :func:`host_bridge.install_schedule`, before anything
is started. It checks every part of the context against its protocol in
:mod:`host_bridge` and raises **one** :class:`CompositionError` that
names every problem, one line per part, with the protocol it belongs to::

    HostContext.agents (AgentRegistry): missing on_status; roots is not callable
    HostContext.tools (ToolRegistry): missing register, execute; get cannot be called
    as get(name, *, agent)

(the second line is one line in the message).

The checks only look: members are read with ``getattr`` and their signatures
with :mod:`inspect`; no method with side effects is called (``flush`` never is).
The one exception is sampling: ``clock()`` and ``monotonic()`` are each called
once, since what they return is the whole point.

What only shows at run time is handled by
:class:`~host_bridge._checked_sessions.CheckedSessionStore`, the adapter
Schedule's owners use instead of the host's ``SessionStore`` (see
:mod:`host_bridge._checked_sessions`).
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from actors import _contract as protocols
from actors._contract import HostContext
from host_bridge._checked_sessions import FALSE_FLUSH_WARNING_AFTER, CheckedSessionStore

__all__ = [
    "CompositionError",
    "compose",
    "composition_problems",
]


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
    from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS, format_instant

    rule = (
        "HostContext.clock must return the wall clock as whole epoch milliseconds: an int "
        f"from {MIN_INSTANT_MS} ({format_instant(MIN_INSTANT_MS)}) to {MAX_INSTANT_MS} "
        f"({format_instant(MAX_INSTANT_MS)}), e.g. host_bridge.wall_clock_ms"
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
        "timers measure delays on, e.g. host_bridge.monotonic_ms"
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
    timer_problems = [] if timers is None else _shape_problems(timers, protocols.Timers)
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
            _milliseconds_problem(
                host, "clock_step_confirm_ms", "how long a forward clock step must hold"
            ),
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
    :class:`~host_bridge._checked_sessions.CheckedSessionStore` around the host's
    own (``host`` is not changed); ``false_flush_warning_after`` is its
    :class:`~host_bridge._checked_sessions.FlushMonitor`'s threshold.
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
