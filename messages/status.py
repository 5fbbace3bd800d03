"""Status values the plugin reports about its owners."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OwnerState", "OwnerStatus"]

OwnerState = Literal["starting", "running", "faulted", "disposing", "disposed"]
"""Lifecycle of a ScheduleOwner; ``faulted`` stops delivery only, tools keep answering."""


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
    contained_failures: int = 0
    busy: bool = False
    """A transaction is in flight or work is queued behind it."""
