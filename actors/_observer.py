"""OwnerObserver: what a ScheduleOwner reports about its work, for metrics and traces.

The owner reports each transaction it runs (a tool call from admission to its
answer, a delivery from its preflight to its barrier), every delivery it made,
every flush that failed and every failure it contained. This module names those
reports and depends on no telemetry library: :mod:`host_bridge._telemetry`
implements them with OpenTelemetry. :data:`NO_OBSERVER`, whose methods do
nothing, is the default, so an owner that nobody observes pays one method call
per report and nothing else.

Every method is called on the owner's own thread (or greenlet), one transaction
at a time, and must not block. The owner calls an observer other than
:data:`NO_OBSERVER` through :func:`guarded`: an exception it raises is logged
(the first at warning level) and otherwise ignored, so observing never changes
what the owner does. The owner hands every value as it has it; anything an
observer derives (a lateness, an outcome name) is derived by the observer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, Literal, Protocol

from messages._delivery import DeliverBatch, DeliverNow
from messages._mailbox import FlushPhase
from messages._tool_values import Operation, ToolError

__all__ = [
    "NO_OBSERVER",
    "DeliveryOutcome",
    "NullObserver",
    "OwnerObserver",
    "ToolOutcome",
    "TxnKind",
    "guarded",
]

TxnKind = Literal["create", "list", "delete", "deliver"]
"""The owner's transaction kinds: the three tools and a delivery."""

DeliveryOutcome = Literal[
    "delivered",
    "not_due",
    "nothing_active",
    "agent_busy",
    "preflight_failed",
    "followup_failed",
    "dispatch_failed",
    "failed",
]
"""How a delivery transaction ended, when the owner knows more than "skipped".

``delivered``: at least one dispatch was appended after its follow-up (its
barrier is reported apart); ``not_due``: a timer was armed; ``nothing_active``:
the log holds no active reminder; ``agent_busy``: the agent was not idle, the
owner waits for it; ``preflight_failed``: the first flush failed;
``followup_failed``: the follow-up raised, nothing was dispatched;
``dispatch_failed``: a dispatch append failed after its follow-up (the owner
stopped delivering); ``failed``: an unexpected error was contained. ``None``
(skipped): the owner is faulted, not live or disposing, or no decision could be
made (logged).
"""

ToolOutcome = Literal["cancelled"]
"""How a tool transaction ended without an answer: its caller cancelled it."""


class OwnerObserver(Protocol):
    """Receives a ScheduleOwner's reports (see the module docstring for the rules)."""

    def transaction_started(
        self, kind: TxnKind, agent_id: str, session_id: str, reply: Future[Any] | None
    ) -> object:
        """A transaction starts: a tool call was admitted, or a delivery's preflight begins.

        ``reply`` is the tool call's reply future as its request carries it
        (``None`` for a delivery): what the host side attached to the call
        when it made it (the caller's context, the call id) is found there.
        Returns a token the owner hands back with every later report about
        this transaction (``None`` is a fine token).
        """
        ...

    def transaction_finished(
        self,
        token: object,
        outcome: DeliveryOutcome | ToolOutcome | None,
        answer: ToolError | Mapping[str, object] | None,
        schedule_id: str | None,
        dispatched: tuple[str, ...],
    ) -> None:
        """The transaction of ``token`` finished; called exactly once per token.

        ``answer`` is the tool value it answered (``None`` for a delivery or an
        unanswered call); ``schedule_id`` the reminder a create allocated or a
        delete named; ``dispatched`` the ids a delivery dispatched, in order.
        """
        ...

    def delivered(
        self, token: object, plan: DeliverNow | DeliverBatch, decided_ms: int, dispatched: int
    ) -> None:
        """The follow-up of ``plan`` was queued to the agent, then ``dispatched`` appends made.

        ``decided_ms`` is the clock sample the delivery was decided at (inside
        the turn reservation, just before the follow-up): a reminder's lateness
        is ``decided_ms`` minus its target (a one-shot) or its occurrence (a
        batch member). ``dispatched`` is below the plan's size only when a
        dispatch append failed.
        """
        ...

    def persistence_uncertain(self, token: object, operation: Operation, phase: FlushPhase) -> None:
        """A flush of the transaction's ``phase`` failed, timed out or raised.

        ``operation`` is the tool's (``create``, ``list``, ``delete``), or
        ``dispatch`` for a delivery's flushes.
        """
        ...

    def contained_failure(self, token: object | None, message_type: str, error: Exception) -> None:
        """An unexpected ``error`` escaped the handler of a ``message_type`` message.

        ``token`` is the transaction in flight, if any (it finishes right after).
        """
        ...


class NullObserver:
    """An :class:`OwnerObserver` that does nothing (the owner's default)."""

    __slots__ = ()

    def transaction_started(
        self, kind: TxnKind, agent_id: str, session_id: str, reply: Future[Any] | None
    ) -> object:
        """Nothing to start; the token is ``None``."""
        return None

    def transaction_finished(
        self,
        token: object,
        outcome: DeliveryOutcome | ToolOutcome | None,
        answer: ToolError | Mapping[str, object] | None,
        schedule_id: str | None,
        dispatched: tuple[str, ...],
    ) -> None:
        """Nothing to finish."""

    def delivered(
        self, token: object, plan: DeliverNow | DeliverBatch, decided_ms: int, dispatched: int
    ) -> None:
        """Nothing to record."""

    def persistence_uncertain(self, token: object, operation: Operation, phase: FlushPhase) -> None:
        """Nothing to record."""

    def contained_failure(self, token: object | None, message_type: str, error: Exception) -> None:
        """Nothing to record."""


NO_OBSERVER: OwnerObserver = NullObserver()
"""The shared do-nothing observer."""


class _Guarded:
    """An observer whose exceptions are logged and dropped (see :func:`guarded`)."""

    __slots__ = ("_inner", "_log", "_warned")

    def __init__(self, inner: OwnerObserver, log: logging.Logger) -> None:
        self._inner = inner
        self._log = log
        self._warned = False

    def _failed(self, report: str) -> None:
        if self._warned:
            self._log.debug("the owner's observer failed on %s", report, exc_info=True)
            return
        self._warned = True
        self._log.warning(
            "the owner's observer failed on %s; its reports are dropped (later failures "
            "are logged at debug level)",
            report,
            exc_info=True,
        )

    def transaction_started(
        self, kind: TxnKind, agent_id: str, session_id: str, reply: Future[Any] | None
    ) -> object:
        """Forward; ``None`` when the observer raised."""
        try:
            return self._inner.transaction_started(kind, agent_id, session_id, reply)
        except Exception:
            self._failed("transaction_started")
            return None

    def transaction_finished(
        self,
        token: object,
        outcome: DeliveryOutcome | ToolOutcome | None,
        answer: ToolError | Mapping[str, object] | None,
        schedule_id: str | None,
        dispatched: tuple[str, ...],
    ) -> None:
        """Forward."""
        try:
            self._inner.transaction_finished(token, outcome, answer, schedule_id, dispatched)
        except Exception:
            self._failed("transaction_finished")

    def delivered(
        self, token: object, plan: DeliverNow | DeliverBatch, decided_ms: int, dispatched: int
    ) -> None:
        """Forward."""
        try:
            self._inner.delivered(token, plan, decided_ms, dispatched)
        except Exception:
            self._failed("delivered")

    def persistence_uncertain(self, token: object, operation: Operation, phase: FlushPhase) -> None:
        """Forward."""
        try:
            self._inner.persistence_uncertain(token, operation, phase)
        except Exception:
            self._failed("persistence_uncertain")

    def contained_failure(self, token: object | None, message_type: str, error: Exception) -> None:
        """Forward."""
        try:
            self._inner.contained_failure(token, message_type, error)
        except Exception:
            self._failed("contained_failure")


def guarded(observer: OwnerObserver, log: logging.Logger) -> OwnerObserver:
    """``observer`` with its exceptions logged to ``log`` and dropped.

    A :class:`NullObserver` is returned as it is: it cannot raise, and an owner
    nobody observes keeps one plain call per report.
    """
    if isinstance(observer, NullObserver):
        return observer
    return _Guarded(observer, log)
