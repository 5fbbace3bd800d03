"""Wait, without sleeping, until actors have handled everything queued to them."""

from __future__ import annotations

from typing import Any

import pykka

from messages.mailbox import Ping

__all__ = ["settle", "settle_all"]


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

    Repeatedly asks :class:`~messages.mailbox.Ping` (every
    :class:`actors.base.MailboxActor` answers it) until, right after a reply,
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
