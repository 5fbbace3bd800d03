"""The wake-up actor's settings and what it shares with the plugin (:mod:`actors._wake_up`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from actors._status_box import StatusBox

__all__ = ["WakePolicy", "WakeState", "WakeUpBoard", "WakeUpStatus"]


QUIET_RECHECK_MS = 250
"""The least time before a managed session that was not quiet is looked at again."""

HANDOVER_MARGIN_MS = 5_000
"""How far ahead a wanted session must have nothing due to be handed over.

Letting a session go is decided here and done later by the host (another
thread); a reminder coming due in between would start a turn the let-go then
cuts, and the next holder would present it again. Like the quiet period's own
margin, this makes that need a let-go slower than the margin.
"""


@dataclass(frozen=True, slots=True)
class WakePolicy:
    """How the wake-up actor works.

    ``max_concurrent``: activations in flight at once. ``rescan_ms``: the index
    is re-read at least this often (it is how commits of other processes are
    seen). ``retry_ms``: a session whose activation was declined or failed is
    not tried again before this (doubling per failure up to ``max_retry_ms``).
    ``quiet_period_ms``: an activated agent idle this long, with nothing due
    within this long, is let go (``None``: never). ``cold_batch``: how many
    sessions one cold-delivery pass may take (a host that offers cold delivery).
    ``demand_poll_ms``: while it manages activated agents, how often the actor asks
    a host that offers :class:`~actors._contract.SessionDemand` which of their
    sessions another process wants; such a session is let go once it is idle
    and nothing in it is due within :data:`HANDOVER_MARGIN_MS` (or the quiet
    period, when that is shorter), before its quiet period ends (``None``:
    never asked).
    """

    max_concurrent: int = 8
    rescan_ms: int = 1_000
    retry_ms: int = 5_000
    max_retry_ms: int = 60_000
    quiet_period_ms: int | None = 30_000
    cold_batch: int = 512
    demand_poll_ms: int | None = 500

    def __post_init__(self) -> None:
        for name in ("max_concurrent", "rescan_ms", "retry_ms", "max_retry_ms", "cold_batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"WakePolicy.{name} must be a positive integer")
        poll = self.demand_poll_ms
        bad_poll = isinstance(poll, bool) or not isinstance(poll, int) or poll <= 0
        if poll is not None and bad_poll:
            raise ValueError("WakePolicy.demand_poll_ms must be a positive integer or None")
        quiet = self.quiet_period_ms
        bad = isinstance(quiet, bool) or not isinstance(quiet, int) or quiet < 0
        if quiet is not None and bad:
            raise ValueError("WakePolicy.quiet_period_ms must be a non-negative integer or None")


WakeState = Literal["running", "restarting", "faulted", "disposing", "disposed"]


@dataclass(frozen=True, slots=True)
class WakeUpStatus:
    """What the wake-up actor is doing (a snapshot, see ``plugin.status().wake_up``).

    ``next_wake_ms``: the delay its timer was armed with; the counters count
    since install (``cold_passes`` and ``cold_deliveries``: the passes of a host
    offering cold delivery and the reminder messages they delivered;
    ``handovers``: the passivations among them of sessions another process wanted).
    """

    state: WakeState = "running"
    in_flight: int = 0
    activated: int = 0
    backing_off: int = 0
    next_wake_ms: int | None = None
    activations: int = 0
    declined: int = 0
    failures: int = 0
    passivations: int = 0
    passes: int = 0
    contained_failures: int = 0
    restarts: int = 0
    cold_passes: int = 0
    cold_deliveries: int = 0
    handovers: int = 0


class WakeUpBoard:
    """What a wake-up actor shares with the plugin (thread-safe).

    The ids of the agents it activated and still manages (the plugin forwards
    status reports of those only) and its last published :class:`WakeUpStatus`,
    which anyone may wait for (:meth:`wait_for`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: set[str] = set()
        self._status = StatusBox(WakeUpStatus(), "wake-up")

    def __contains__(self, agent_id: object) -> bool:
        with self._lock:
            return agent_id in self._ids

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)

    @property
    def status(self) -> WakeUpStatus:
        """The actor's last published status."""
        return self._status.current

    def publish(self, status: WakeUpStatus) -> None:
        """Replace the status (the actor, after each message) and wake its waiters."""
        self._status.publish(status)

    def wait_for(self, predicate: Callable[[WakeUpStatus], bool], timeout: float) -> WakeUpStatus:
        """Block until a published status satisfies ``predicate``; ``TimeoutError`` otherwise."""
        return self._status.wait_for(predicate, timeout)

    def add(self, agent_id: str) -> None:
        """Manage ``agent_id``."""
        with self._lock:
            self._ids.add(agent_id)

    def discard(self, agent_id: str) -> None:
        """Stop managing ``agent_id``."""
        with self._lock:
            self._ids.discard(agent_id)
