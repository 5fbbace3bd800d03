"""A session's optional schedule checkpoint, read and checked where Schedule starts a fold.

See :class:`actors._contract.SessionWithCheckpoint`: a host may offer the fold
of a prefix of the log, and Schedule then folds only what follows it. This
module decides whether an offered checkpoint can be used for a log, and folds
a session from it (or from its start when there is none).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from actors._contract import Session, SessionEvent
from messages._fold import FoldedSchedules, continue_fold, fold_schedule_events

__all__ = ["checkpoint_problem", "fold_session", "offered_checkpoint"]

CHECKPOINT_ATTRIBUTE = "schedule_checkpoint"
"""The attribute a session offers its checkpoint under."""


def offered_checkpoint(
    session: Session, length: int, log: logging.Logger | None = None
) -> FoldedSchedules | None:
    """The session's schedule checkpoint if it can start a fold of a log of ``length`` events.

    ``None`` when the session offers none, and when the one offered cannot be
    used (logged on ``log`` at WARNING, without the error's text): see
    :func:`checkpoint_problem`, or an attribute that raised.
    """
    try:
        checkpoint = getattr(session, CHECKPOINT_ATTRIBUTE, None)
        seed = session.header.seed_length or 0
    except Exception:
        _warn(log, session, "could not be read")
        return None
    if checkpoint is None:
        return None
    problem = checkpoint_problem(checkpoint, seed, length)
    if problem is not None:
        _warn(log, session, problem)
        return None
    assert isinstance(checkpoint, FoldedSchedules)
    return checkpoint


def checkpoint_problem(checkpoint: object, seed_length: int, length: int) -> str | None:
    """Why ``checkpoint`` cannot start the fold of a log of ``length`` events (``None``: it can).

    It must be a :class:`FoldedSchedules` of the same ``seed_length`` whose
    ``end`` is within the log.
    """
    if not isinstance(checkpoint, FoldedSchedules):
        return f"is a {type(checkpoint).__name__}, not a fold"
    if checkpoint.seed_length != seed_length:
        return f"starts at {checkpoint.seed_length}, the session at {seed_length}"
    if checkpoint.end > length:
        return f"ends at {checkpoint.end}, beyond the log's {length} events"
    return None


def fold_session(
    session: Session,
    events: Sequence[SessionEvent] | None = None,
    log: logging.Logger | None = None,
) -> FoldedSchedules:
    """The fold of ``session``'s own schedule stream (``events``: a snapshot already taken).

    From its checkpoint when it offers a usable one (only the events after it
    are read), else from the start of its own stream. Equal to
    ``fold_schedule_events(events, seed_length)`` either way; a corrupt stream
    raises :class:`messages.ScheduleLogError`.
    """
    if events is None:
        events = session.events
    checkpoint = offered_checkpoint(session, len(events), log)
    if checkpoint is not None:
        return continue_fold(checkpoint, events)
    return fold_schedule_events(events, session.header.seed_length or 0)


def _warn(log: logging.Logger | None, session: Session, problem: str) -> None:
    if log is None:
        log = logging.getLogger("dsh_schedule.checkpoint")
    try:
        session_id: object = session.id
    except Exception:
        session_id = "?"
    log.warning(
        "the schedule checkpoint of session %r %s; folding its whole log", session_id, problem
    )
