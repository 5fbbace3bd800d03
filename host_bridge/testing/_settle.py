"""Wait, without sleeping, until actors (and a whole host) have handled everything queued."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pykka

from actors._contract import Agent, AgentRegistry
from actors._runtime import wait_for
from host_bridge.testing._agents import FakeAgent
from host_bridge.testing._sessions import FakeSessionStore
from messages._mailbox import Ping

if TYPE_CHECKING:
    from host_bridge._plugin import SchedulePlugin

__all__ = ["settle", "settle_all", "settle_host"]


def _ping(ref: pykka.ActorRef[Any], timeout: float) -> bool:
    """Ask ``ref`` a Ping; False if the actor is (or became) dead."""
    if not ref.is_alive():
        return False
    try:
        ref.ask(Ping(), timeout=timeout)
    except pykka.ActorDeadError:
        return False
    return True


def _puts(ref: pykka.ActorRef[Any]) -> int | None:
    """How many messages were ever put in the inbox, if the inbox can tell.

    A ``queue.Queue`` (threading runtime) counts puts in ``unfinished_tasks`` and
    pykka never calls ``task_done``; the gevent runtime's inbox keeps the same
    counter, so settling is exact on both runtimes. Other inboxes return None.
    """
    count = getattr(ref.actor_inbox, "unfinished_tasks", None)
    return count if isinstance(count, int) else None


def settle(
    actor_ref: pykka.ActorRef[Any], *, timeout: float = 5.0, max_rounds: int = 10_000
) -> None:
    """Return once ``actor_ref`` has no queued or in-progress work.

    Repeatedly asks :class:`~messages._mailbox.Ping` (every
    :class:`actors._base.MailboxActor` answers it) until, right after a reply,
    the inbox is empty and nothing but that ping was put in it since the round
    began; so messages the actor posts to itself are drained too. A dead actor
    counts as settled. Raises ``RuntimeError`` after ``max_rounds`` pings and
    ``pykka.Timeout`` if one reply takes longer than ``timeout`` seconds.
    """
    settle_all(actor_ref, timeout=timeout, max_rounds=max_rounds)


def settle_all(
    *actor_refs: pykka.ActorRef[Any], timeout: float = 5.0, max_rounds: int = 10_000
) -> None:
    """Return once every actor is quiescent in one full pass.

    A pass pings each actor in turn; it is quiet when every inbox is empty right
    after its reply and no actor received any message other than the pass's own
    ping (so neither a message an actor was still handling when its inbox looked
    empty, nor work posted to an actor pinged earlier in the pass, is missed).
    Messages are counted with the inbox's ``queue.Queue`` put counter; for an
    inbox that cannot count, two consecutive passes with empty inboxes are
    required instead (best effort). Raises ``RuntimeError`` after ``max_rounds``
    passes and ``pykka.Timeout`` if one reply takes longer than ``timeout`` seconds.
    """
    countable = all(_puts(ref) is not None for ref in actor_refs)
    quiet_needed = 1 if countable else 2
    quiet_passes = 0
    for _ in range(max_rounds):
        before = [_puts(ref) for ref in actor_refs]
        quiet = True
        expected: list[int | None] = []
        for ref, count in zip(actor_refs, before, strict=True):
            alive = _ping(ref, timeout)
            if alive and not ref.actor_inbox.empty():
                quiet = False
            expected.append(None if not alive or count is None else count + 1)
        for ref, want in zip(actor_refs, expected, strict=True):
            if want is not None and _puts(ref) != want:
                quiet = False
        quiet_passes = quiet_passes + 1 if quiet else 0
        if quiet_passes >= quiet_needed:
            return
    raise RuntimeError(f"actors did not settle within {max_rounds} passes")


def _registry(host: object) -> AgentRegistry:
    agents = getattr(host, "agents", None)
    if agents is not None and callable(getattr(agents, "roots", None)):
        return agents  # type: ignore[no-any-return]
    if callable(getattr(host, "roots", None)) and callable(getattr(host, "get", None)):
        return host  # type: ignore[return-value]
    raise TypeError(f"{type(host).__name__} is neither an AgentRegistry nor a host with .agents")


def _live_agents(registry: AgentRegistry, plugins: Sequence[SchedulePlugin]) -> list[Agent]:
    """The registry's roots, then agents with Schedule that are not among them; by id once."""
    seen: dict[str, Agent] = {}
    for agent in (*registry.roots(), *(a for p in plugins for a in p.agents())):
        if registry.get(agent.id) is agent:
            seen.setdefault(agent.id, agent)
    return list(seen.values())


def _fingerprint(
    host: object, registry: AgentRegistry, plugins: Sequence[SchedulePlugin]
) -> tuple[Any, ...]:
    """What a round of work changes: agents, their logs and turns, owners, flushes."""
    agents: list[tuple[Any, ...]] = []
    for agent in _live_agents(registry, plugins):
        state: tuple[Any, ...] = (agent.id, len(agent.session.events))
        if isinstance(agent, FakeAgent):
            state += (len(agent.received), len(agent.turns), agent.status, agent.reserved)
        else:
            state += (getattr(agent, "status", None),)
        agents.append(state)
    sessions = getattr(host, "sessions", None)
    flushes = sessions.flush_count if isinstance(sessions, FakeSessionStore) else None
    return (tuple(agents), tuple(p.status() for p in plugins), flushes)


def settle_host(
    host: Any,
    *plugins: SchedulePlugin,
    run_turns: bool = False,
    timeout: float = 10.0,
    max_rounds: int = 1_000,
) -> None:
    """Return once the host's agents and Schedule's owners have nothing left to do.

    ``host`` is a ``FakeHost``, an ``EmbeddedHost``, a ``HostContext`` or any
    object with an ``AgentRegistry`` in ``.agents`` (or the registry itself);
    ``plugins`` are the installed ``SchedulePlugin`` values (default: the
    host's ``plugins``, which ``FakeHost.install_schedule`` fills). Rounds are
    repeated until one changes nothing (a fixed point). Each round:

    1. waits for every live root agent (and every agent with Schedule) to be
       idle through its ``when_idle()`` future; a :class:`FakeAgent` is never
       asked (that would journal a call): its turns run only when the test
       says so, or here with ``run_turns=True`` (each queued follow-up runs as a
       turn, whose end reports ``"idle"`` like a real host);
    2. settles every owner and the wake-up actor through their mailboxes (:func:`settle_all`);
    3. waits until every owner is quiet (``SchedulePlugin.wait_quiet``: nothing
       in flight), except on a :class:`FakeSessionStore`, whose flushes either
       resolve at once or stay pending until the test releases them;
    4. waits until no activation of a cold session is in flight
       (``SchedulePlugin.wait_activations``): the host's ``activate`` future
       must resolve, and the agent it brings back is settled in the next round.

    A round changed something if an agent appeared or went, a log grew, a fake
    agent received or ran a turn, an owner's or the wake-up actor's status
    changed or (on a fake store) a flush was made. Raises ``TimeoutError``
    naming the agent, owner or activation that did not finish within
    ``timeout`` seconds, ``RuntimeError`` after
    ``max_rounds`` rounds.
    """
    registry = _registry(host)
    chosen: Sequence[SchedulePlugin] = plugins or tuple(getattr(host, "plugins", ()))
    fake_store = isinstance(getattr(host, "sessions", None), FakeSessionStore)
    for _ in range(max_rounds):
        before = _fingerprint(host, registry, chosen)
        for agent in _live_agents(registry, chosen):
            if isinstance(agent, FakeAgent):
                if run_turns:
                    agent.run_queued_turns()
                continue
            try:
                wait_for(agent.when_idle(), timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"agent {agent.id!r} did not become idle within {timeout} seconds"
                ) from None
            except Exception:
                if registry.get(agent.id) is agent:
                    raise  # disposed meanwhile: its future failed, nothing to wait for
        refs: list[pykka.ActorRef[Any]] = []
        for plugin in chosen:
            refs += [ref for a in plugin.agents() if (ref := plugin.owner_of(a)) is not None]
            if plugin.wake_up is not None:
                refs.append(plugin.wake_up)
        settle_all(*refs, timeout=timeout)
        if not fake_store:
            for plugin in chosen:
                for agent in plugin.agents():
                    with contextlib.suppress(KeyError):  # disposed meanwhile
                        plugin.wait_quiet(agent, timeout)
        for plugin in chosen:
            try:
                plugin.wait_activations(timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"an activation of a cold session did not finish within {timeout} seconds"
                ) from None
        if _fingerprint(host, registry, chosen) == before:
            return
    raise RuntimeError(f"the host did not settle within {max_rounds} rounds")
