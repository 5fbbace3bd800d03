"""pykka actors of dsh-tool-schedule."""

from __future__ import annotations

from actors.base import MailboxActor

__all__ = ["MailboxActor"]
