"""The common base of this package's actors: typed dispatch of mailbox messages."""

from __future__ import annotations

import logging
from typing import Any

import pykka

from messages._mailbox import Ping

__all__ = ["MailboxActor"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")


class MailboxActor(pykka.ThreadingActor):
    """A pykka actor that routes each message to ``handle_<MessageType>``.

    Subclasses define one handler per message type they accept, so every state
    transition is a visible method. :class:`messages._mailbox.Ping` is answered by
    every actor (see :func:`host_bridge.testing._settle`).

    This class runs on pykka's threading runtime; bind it to another runtime with
    :meth:`actors._runtime.Runtime.bind` (e.g. ``get_runtime("gevent").bind(cls)``),
    which shares all of the class's code.
    """

    def on_receive(self, message: Any) -> Any:
        """Dispatch ``message`` to its handler; unknown messages are logged and dropped."""
        if isinstance(message, Ping):
            return None
        kind = type(message)
        name = _HANDLER_NAMES.get(kind)
        if name is None:
            name = _HANDLER_NAMES.setdefault(kind, f"handle_{kind.__name__}")
        handler = getattr(self, name, None)
        if handler is None:
            _log.warning("%s dropped an unexpected message %r", type(self).__name__, message)
            return None
        return handler(message)


_HANDLER_NAMES: dict[type[Any], str] = {}
"""Handler method name per message type (so dispatch does not format a string per message)."""
