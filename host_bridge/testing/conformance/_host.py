"""What a host hands the conformance kit: its ``HostContext`` plus a few hooks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from actors._contract import Agent, HostContext, Session, SessionEvent, UserMessage

__all__ = ["UNSTORABLE", "ConformanceHost", "TurnModel"]

TurnModel = Callable[[UserMessage], None]
"""The kit's model: the host calls it once per message a turn of the agent takes.

It runs on the host's turn thread and may block (the kit holds turns open with
it); it returns nothing, and the host may record what it likes around it.
"""


class _Unstorable:
    """The default payload a host's ``append`` must refuse: neither JSON nor msgpack."""

    def __repr__(self) -> str:
        return "UNSTORABLE"


UNSTORABLE: Any = _Unstorable()
"""A payload no serialising host can store (the default ``rejected_payload``)."""


def _nothing() -> None:
    """The default ``close``: nothing to release."""


@dataclass
class ConformanceHost:
    """One host under test: its :class:`HostContext` and the hooks the protocols lack.

    Required:

    ``context``
        What ``install_schedule`` would get. The kit uses ``sessions``,
        ``agents``, ``tools``, ``clock``, ``monotonic``, ``timers`` (and
        ``activation`` when set); it never installs Schedule.
    ``spawn_root(model)``
        Create a **new session** and a **root agent** on it the way the host
        normally does (so ``on_created`` listeners run), and return the agent.
        Every turn of that agent must call ``model(message)`` once per message
        it takes, on the turn's thread; the turn ends when the calls returned.

    Optional (a check that needs a missing hook is skipped, saying which):

    ``close()``
        Release everything (agents, sessions, store, timers). Called once after
        each check, after the kit let every held turn finish.
    ``run_turns(agent)``
        Only for hosts whose agents do **not** start turns on their own (test
        fakes): start every turn the agent may start now, calling the model,
        and return when none is left. The kit calls it on a fresh thread after
        each ``followup`` and ``release()`` it makes. Real hosts leave it None.
    ``advance(ms)``
        Only for hosts on fake time: let ``ms`` milliseconds pass on the host's
        monotonic clock, firing due timers. None (real timers): the kit waits
        on real timers, bounded by :attr:`HostConformance.timeout`.
    ``durable_events(session_id)``
        Read the session's log back from durable storage, bypassing the live
        session (reopen the file, query the database on a new connection).
        Enables the durability checks of ``flush``.
    ``detach(session)``
        Take a live session offline the way the host does when a session is
        closed (its agent is disposed first when ``dispose`` is given).
    ``dispose(agent)``
        Dispose an agent through the registry (so ``on_disposed`` listeners run).
    ``spawn_child(parent, model)``
        Create a non-root agent spawned by ``parent`` (on a session of its own
        or a fork), like ``spawn_root``.
    ``rejected_payload``
        A payload ``Session.append`` must refuse (default :data:`UNSTORABLE`, an
        object no serialiser accepts).
    ``durable_inbox``
        True when the host implements the durable inbox of the integration
        guide (follow-ups persisted, turns started only after a covering flush).
        Needs ``durable_events``.
    ``resume_root(session_id, model)``
        Bring a stored session back (one ``detach`` took offline) and start a
        root agent on it the way the host does on resume, with ``model`` as
        for ``spawn_root``. With ``durable_inbox``, ``detach`` and ``dispose``
        it enables the checks of the inbox's completion and re-queue rules.
    """

    context: HostContext
    spawn_root: Callable[[TurnModel], Agent]
    close: Callable[[], None] = _nothing
    run_turns: Callable[[Agent], None] | None = None
    advance: Callable[[int], None] | None = None
    durable_events: Callable[[str], Sequence[SessionEvent]] | None = None
    detach: Callable[[Session], None] | None = None
    dispose: Callable[[Agent], None] | None = None
    spawn_child: Callable[[Agent, TurnModel], Agent] | None = None
    rejected_payload: Any = UNSTORABLE
    durable_inbox: bool = False
    resume_root: Callable[[str, TurnModel], Agent] | None = None
