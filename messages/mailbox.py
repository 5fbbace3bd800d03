"""Mailbox message types of the actors.

Every step an actor takes is one of these frozen values arriving in its
mailbox; a reader sees a transaction as the sequence of its message types.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Ping"]


@dataclass(frozen=True, slots=True)
class Ping:
    """Asked of any actor to learn that every message queued before it was handled."""
