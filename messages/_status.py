"""Status values the plugin reports about its owners."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OwnerState", "OwnerStatus"]

OwnerState = Literal["starting", "running", "restarting", "faulted", "disposing", "disposed"]
"""Lifecycle of a ScheduleOwner.

``restarting`` and ``faulted`` stop delivery only; the tools keep answering.
``restarting``: an unexpected error stopped delivery and the supervisor restarts
the owner after its back-off. ``faulted``: delivery stays stopped (a corrupt log,
a dispatch that could not be appended, an exhausted restart budget, or an
unexpected error with no supervisor).
"""


@dataclass(frozen=True, slots=True)
class OwnerStatus:
    """A snapshot of one owner, published after every mailbox message it handles."""

    agent_id: str
    state: OwnerState
    fault: str | None = None
    active: int | None = None
    timer_delay_ms: int | None = None
    waiting_for_idle: bool = False
    queued: int = 0
    deliveries: int = 0
    """Dispatches this owner appended (each member of a batch counts)."""
    contained_failures: int = 0
    restarts: int = 0
    """How many times the supervisor restarted this owner in place."""
    busy: bool = False
    """A transaction is in flight or work is queued behind it."""
