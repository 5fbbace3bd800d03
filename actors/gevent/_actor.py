"""The gevent actor: pykka's actor loop as runner greenlets that end when the inbox is empty."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, ClassVar

import gevent
import pykka

from actors.gevent._future import GeventFuture
from actors.gevent._hub import GeventHub, GeventRuntimeError, default_hub
from actors.gevent._inbox import GeventInbox, StopFlag, answer_dead

if TYPE_CHECKING:
    from pykka._envelope import Envelope

__all__ = ["YIELD_EVERY", "GeventActor"]

_pykka_log = logging.getLogger("pykka")

YIELD_EVERY = 64
"""How many messages an actor handles in a row before it lets its hub run."""


class GeventActor(pykka.Actor):
    """A pykka actor that runs as a greenlet of a :class:`actors.gevent.GeventRuntime`'s hub.

    Subclass it directly to use :func:`actors.gevent.default_runtime`, or let
    :meth:`actors.gevent.GeventRuntime.bind` mix it into an existing actor class. ``start``,
    ``tell``, ``ask`` and ``stop`` work from any thread. The actor loop follows
    pykka's (same failure and stop semantics), but an idle actor parks no
    greenlet: a runner greenlet handles what is queued and ends when the inbox
    is empty; the next message starts another. A long run of messages yields
    to the hub every :data:`YIELD_EVERY` messages, so a busy actor cannot
    starve its neighbours.
    """

    _gevent_runtime: ClassVar[GeventHub | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stopped = StopFlag()
        self.actor_stopped = stopped  # type: ignore[assignment]
        self._actor_ref.actor_stopped = stopped  # type: ignore[assignment]
        inbox = self.actor_inbox
        assert isinstance(inbox, GeventInbox)
        inbox._runner = self._gevent_run

    @classmethod
    def gevent_runtime(cls) -> GeventHub:
        """The runtime this actor class runs on."""
        runtime = cls._gevent_runtime
        return runtime if runtime is not None else default_hub()

    @classmethod
    def _create_actor_inbox(cls) -> GeventInbox:
        return GeventInbox(cls.gevent_runtime())

    @classmethod
    def _create_future(cls) -> GeventFuture[Any]:
        return GeventFuture(cls.gevent_runtime())

    def _start_actor_loop(self) -> None:
        try:
            self.gevent_runtime().spawn(self._gevent_first_run)
        except BaseException:
            pykka.ActorRegistry.unregister(self.actor_ref)  # registered by start() already
            self.actor_stopped.set()
            raise

    def _actor_loop(self) -> None:
        raise GeventRuntimeError("a gevent actor runs through its runtime, not _actor_loop")

    def _gevent_first_run(self) -> None:
        self._actor_loop_setup()
        self._gevent_run()

    def _gevent_run(self) -> None:
        """Handle queued messages until the inbox is empty (idle) or the actor stopped."""
        inbox = self.actor_inbox
        assert isinstance(inbox, GeventInbox)
        handled = 0
        while not self.actor_stopped.is_set():
            envelope = inbox.take()
            if envelope is None:
                return  # idle: the next put starts a new runner
            self._gevent_handle(envelope)
            handled += 1
            if handled % YIELD_EVERY == 0:
                gevent.sleep(0)
        self._actor_loop_teardown()
        for envelope in inbox.close():
            answer_dead(envelope, "it has stopped")

    def _gevent_handle(self, envelope: Envelope[Any]) -> None:
        """One message, exactly as pykka's own actor loop handles it."""
        try:
            response = self._handle_receive(envelope.message)
            if envelope.reply_to is not None:
                envelope.reply_to.set(response)
        except Exception:
            if envelope.reply_to is not None:
                _pykka_log.info(f"Exception returned from {self} to caller:", exc_info=True)
                envelope.reply_to.set_exception()
            else:
                self._handle_failure(*sys.exc_info())
                try:
                    self.on_failure(*sys.exc_info())
                except Exception:
                    self._handle_failure(*sys.exc_info())
        except BaseException:
            _pykka_log.debug(f"{sys.exc_info()[1]!r} in {self}. Stopping all actors.")
            self._stop()
            pykka.ActorRegistry.stop_all()
