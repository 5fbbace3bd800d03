"""SupervisedActor: a mailbox actor whose handler failures are contained, with one timer."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

import pykka

from actors._base import MailboxActor
from actors._contract import Cancellable, Timers

__all__ = ["OwnerSupervisor", "SupervisedActor"]


class OwnerSupervisor(Protocol):
    """Who restarts a supervised actor after a contained failure (the plugin, for its actors)."""

    def owner_failed(self) -> int | None:
        """An unexpected error stopped the actor's work; decide whether it restarts.

        Called on the actor's thread (or greenlet), so it must not block. Returns
        the back-off in milliseconds after which a restart message will arrive,
        or ``None`` when the actor will not be restarted.
        """
        ...


class SupervisedActor(MailboxActor):
    """A :class:`MailboxActor` that contains handler failures and arms one timer.

    Runs on the actor's thread (or greenlet). Every message goes through
    :meth:`_handle_contained`: an ``Exception`` a handler raises never escapes to
    pykka (which would stop the actor); it goes to :meth:`_contain`, which the
    subclass defines (stop its work, answer what is in flight, ask
    :meth:`_ask_supervisor`). After each message :meth:`_publish` reports the
    actor's status. Callbacks from other threads reach the actor only by
    :meth:`_post`, which drops a message to an actor that has stopped.

    The one timer is generation-counted: :meth:`_arm_timer` cancels the armed
    timer and arms a new one whose message carries the next generation;
    :meth:`_cancel_timer` moves the generation on, so a wake-up already queued
    from an older timer never matches :meth:`_timer_fired`.
    """

    _log: logging.Logger
    _timers: Timers

    def __init__(self) -> None:
        super().__init__()
        self._supervisor: OwnerSupervisor | None = None
        self._timer: Cancellable | None = None
        self._timer_delay: int | None = None  # the delay the armed timer was armed with
        self._timer_generation = 0  # generations only grow, so a stale wake never matches

    # --- containment -----------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        """Handle one message with its failure contained, then publish the status."""
        try:
            return self._handle_contained(message)
        finally:
            self._publish()

    def _handle_contained(self, message: Any) -> Any:
        """Dispatch ``message``; an exception its handler raises goes to :meth:`_contain`."""
        try:
            return super().on_receive(message)
        except Exception as error:  # any handler bug: containing it is this class's job
            self._contain(message, error)
            return None

    def _contain(self, message: Any, error: Exception) -> None:
        """Handle an exception that escaped the handler of ``message`` (log it here)."""
        raise NotImplementedError

    def _publish(self) -> None:
        """Report the actor's status; runs after every message."""
        raise NotImplementedError

    def _ask_supervisor(self) -> int | None:
        """The supervisor's back-off before a restart; ``None`` for none (or no supervisor).

        A supervisor that raises is logged and counts as no restart.
        """
        supervisor = self._supervisor
        if supervisor is None:
            return None
        try:
            return supervisor.owner_failed()
        except Exception:  # a host's supervisor may fail any way; the actor must go on
            self._log.exception("the supervisor of %s failed", type(self).__name__)
            return None

    def _post(self, message: Any) -> None:
        """Send ``message`` to this actor from any thread; dropped once the actor stopped."""
        with contextlib.suppress(pykka.ActorDeadError):  # a late callback after the actor ended
            self.actor_ref.tell(message)

    # --- the one timer ---------------------------------------------------------------------

    def _arm_timer(self, delay_ms: int, fired: Callable[[int], Any]) -> None:
        """Replace the armed timer: in ``delay_ms`` it posts ``fired(generation)``."""
        self._cancel_timer()
        self._timer_generation += 1
        message = fired(self._timer_generation)
        post = self._post
        self._timer = self._timers.call_later(delay_ms, lambda: post(message))
        self._timer_delay = delay_ms

    def _cancel_timer(self) -> None:
        """Cancel the armed timer (if any) and move the generation on."""
        timer, self._timer = self._timer, None
        if timer is not None:
            self._timer_delay = None
            self._timer_generation += 1
            try:
                timer.cancel()
            except Exception:  # a host's timer may fail any way; its wake-up will not match
                self._log.warning("cancelling the timer of %s raised", type(self).__name__)

    def _timer_fired(self, generation: int) -> bool:
        """Whether a wake-up of ``generation`` is the armed timer's; if so it is disarmed."""
        if generation != self._timer_generation or self._timer is None:
            return False
        self._timer = None
        self._timer_delay = None
        return True
