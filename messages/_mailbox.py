"""Mailbox message types of the actors.

Every step an actor takes is one of these frozen values arriving in its
mailbox; a reader sees a transaction as the sequence of its message types.
Replies travel in ``concurrent.futures.Future`` objects carried by the message,
so a sender never has to block on the actor.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from messages._tool_values import CreateSelector, FlushPhase

__all__ = [
    "ActivationSettled",
    "AgentActivity",
    "AgentGone",
    "AgentIdle",
    "AppendEvent",
    "BarrierSettled",
    "ClockJumped",
    "ColdPassSettled",
    "CreateSchedule",
    "DeleteSchedule",
    "DetachSession",
    "DisposeOwner",
    "DisposeWakeUp",
    "DueIndexMoved",
    "FlushPhase",
    "FlushSession",
    "FlushTimedOut",
    "ListSchedules",
    "PassivationSettled",
    "Ping",
    "PreflightSettled",
    "RequestDrive",
    "RestartOwner",
    "RestartWakeUp",
    "RunTurn",
    "StartOwner",
    "StartWakeUp",
    "TimerFired",
    "ToolRequest",
    "WakeUpTimerFired",
]


@dataclass(frozen=True, slots=True)
class Ping:
    """Asked of any actor to learn that every message queued before it was handled."""


# --- SessionActor -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppendEvent:
    """Append one event to the session log; the reply is the committed event.

    ``staged``: the event joins the live log now but reaches the persistence
    listener only with the session's next unstaged append or flush.
    """

    type: str
    data: Any
    reply: Future[Any]
    staged: bool = False


@dataclass(frozen=True, slots=True)
class FlushSession:
    """Flush barrier: the reply resolves once every earlier append is durable (or not)."""

    reply: Future[bool]


@dataclass(frozen=True, slots=True)
class DetachSession:
    """Detach the session: later appends and flushes are rejected."""

    reply: Future[None]


# --- AgentActor (embedded host) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class RunTurn:
    """Run one model turn for the queued user message ``message``."""

    message: Any


# --- ScheduleOwner ------------------------------------------------------------
#
# A management transaction is: CreateSchedule | ListSchedules | DeleteSchedule
# (admitted) -> PreflightSettled -> [append] -> BarrierSettled (create/delete).
# A delivery transaction is: RequestDrive | TimerFired | AgentIdle (a drive)
# -> PreflightSettled -> [reserve, follow-up, dispatch append(s), release]
# -> BarrierSettled (one follow-up and one dispatch for a due one-shot; one
# follow-up and one dispatch per member for a batch of due every reminders).
# DisposeOwner ends the owner once the step in flight settles.
# RestartOwner (from the plugin, its supervisor) resumes delivery after a contained
# failure; ClockJumped (from the plugin's clock watchdog) re-drives an armed timer.


@dataclass(frozen=True, slots=True)
class StartOwner:
    """The owner was installed: run the first drive."""


@dataclass(frozen=True, slots=True)
class RequestDrive:
    """Ask for a (coalesced) delivery drive; ``reason`` is for logs and tests."""

    reason: str


@dataclass(frozen=True, slots=True)
class CreateSchedule:
    """Admitted ``schedule_create`` with shape-checked input; the reply is the tool value.

    ``when`` is the one selector the call named (``after_seconds``, ``at`` or
    ``every_seconds``); an ``at`` value is judged only after the preflight.
    A ``reply`` the caller cancelled before the transaction starts (or before its
    append) stops the transaction there: no flush (or no append) happens.
    """

    prompt: str
    when: CreateSelector
    reply: Future[Any]


@dataclass(frozen=True, slots=True)
class ListSchedules:
    """Admitted ``schedule_list``; the reply is the tool value (cancelled: no flush)."""

    reply: Future[Any]


@dataclass(frozen=True, slots=True)
class DeleteSchedule:
    """Admitted ``schedule_delete`` with a shape-checked id; the reply is the tool value.

    Cancelling ``reply`` stops the transaction as for :class:`CreateSchedule`.
    """

    id: str
    reply: Future[Any]


ToolRequest = CreateSchedule | ListSchedules | DeleteSchedule
"""A management transaction waiting in the owner's queue."""


@dataclass(frozen=True, slots=True)
class PreflightSettled:
    """The preflight flush of transaction ``txn`` resolved; ``ok`` only when it resolved True."""

    txn: int
    ok: bool


@dataclass(frozen=True, slots=True)
class BarrierSettled:
    """The post-append barrier of transaction ``txn`` resolved; ``ok`` only when True."""

    txn: int
    ok: bool


@dataclass(frozen=True, slots=True)
class FlushTimedOut:
    """The flush of transaction ``txn`` in ``phase`` did not settle within the flush timeout."""

    txn: int
    phase: FlushPhase


@dataclass(frozen=True, slots=True)
class TimerFired:
    """The owner's timer of generation ``generation`` woke up."""

    generation: int


@dataclass(frozen=True, slots=True)
class AgentIdle:
    """The idle wait of generation ``generation`` resolved."""

    generation: int


@dataclass(frozen=True, slots=True)
class RestartOwner:
    """The supervisor restarts the owner in place after a contained failure.

    The owner rebuilds its delivery state as a fresh owner would (no fold cache,
    no fault, no timer, no idle wait) and drives; its mailbox, the tool requests
    it admitted and the transaction in flight are kept.
    """


@dataclass(frozen=True, slots=True)
class ClockJumped:
    """The wall clock moved ``jump_ms`` against the monotonic clock (a jump or a suspend).

    An owner whose timer is armed drives again at once: the timer was armed from
    a wall-clock reading that no longer holds.
    """

    jump_ms: int


@dataclass(frozen=True, slots=True)
class DisposeOwner:
    """Stop the owner: no new work; the reply resolves once it has finished."""

    reply: Future[None]


# --- WakeUpActor --------------------------------------------------------------
#
# One per installed plugin whose host can activate sessions. A *pass* re-reads
# the due index through the host's activation: it starts activations of due
# cold sessions (bounded in number), lets go of quiet activated agents, and arms
# one timer for the next due target. StartWakeUp, WakeUpTimerFired, DueIndexMoved,
# ClockJumped (from the clock watchdog), ActivationSettled and PassivationSettled
# each run a pass. AgentActivity and AgentGone (from the plugin) keep the quiet
# period of activated agents. DisposeWakeUp ends it once nothing is in flight.


@dataclass(frozen=True, slots=True)
class StartWakeUp:
    """The wake-up actor was started: subscribe to index changes and run the first pass."""


@dataclass(frozen=True, slots=True)
class WakeUpTimerFired:
    """The wake-up actor's timer of generation ``generation`` woke up."""

    generation: int


@dataclass(frozen=True, slots=True)
class DueIndexMoved:
    """A commit moved the due index of a session that is not live in this host."""


@dataclass(frozen=True, slots=True)
class ActivationSettled:
    """The activation of ``session_id`` finished.

    ``agent``: the live root agent it produced, or ``None`` when the host declined
    (live elsewhere, nothing due any more); ``failed``: the activation raised.
    """

    session_id: str
    agent: Any
    failed: bool = False


@dataclass(frozen=True, slots=True)
class ColdPassSettled:
    """A cold-delivery pass finished: ``result`` is its ``ColdPass``; ``failed``: it raised."""

    result: Any
    failed: bool = False


@dataclass(frozen=True, slots=True)
class PassivationSettled:
    """The host finished letting go of an activated agent (``released``: it did)."""

    agent_id: str
    released: bool
    failed: bool = False


@dataclass(frozen=True, slots=True)
class AgentActivity:
    """An agent reported a status: an activated agent's quiet period starts again."""

    agent_id: str


@dataclass(frozen=True, slots=True)
class AgentGone:
    """An agent was disposed by someone else: forget it."""

    agent_id: str


@dataclass(frozen=True, slots=True)
class RestartWakeUp:
    """The supervisor restarts the wake-up actor in place after a contained failure."""


@dataclass(frozen=True, slots=True)
class DisposeWakeUp:
    """Stop waking sessions; the reply resolves once activations in flight have settled."""

    reply: Future[None]
