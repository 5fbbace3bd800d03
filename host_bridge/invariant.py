"""Invariant companion: the Schedule fold policy applied by the host's session layer.

Installed beside (or without) the plugin, it judges every existing session's
owned stream once at install time, every session created later (a new, seeded
or forked session) before it goes live, and every candidate ``schedule/change``
before it is appended, so nothing — a buggy plugin, a forged host call, a seed
copied from a broken log — can bring in a stream that the fold would reject.
Events before a fork's ``seed_length`` belong to the parent and are never judged.

A bounded session (one resumed from its schedule checkpoint, whose early events
are read from the store on demand) is judged from that checkpoint: only the
events after it are folded, as the owner folds them. The checkpoint itself is
trusted (the store writes it with the rows it folds, and ``verify`` checks it
against them), so the prefix it covers is not judged again here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from actors._checkpoint import CHECKPOINT_ATTRIBUTE, checkpoint_problem
from actors._contract import AppendGuard, Session, SessionEvent, SessionHeader
from messages import (
    SCHEDULE_CHANGE_TYPE,
    FoldedSchedules,
    ScheduleLogError,
    validate_schedule_stream,
)
from messages._fold import check_schedule_candidate, continue_fold

__all__ = ["ScheduleInvariant", "ScheduleInvariantError", "install_schedule_invariant"]

_log = logging.getLogger(f"dsh_schedule.{__name__}")

CreationGuard = Callable[[SessionHeader, Sequence[SessionEvent]], None]


class GuardedSessionStore(Protocol):
    """A session store that lets a companion judge new sessions and appends before they commit."""

    def list(self) -> Sequence[Session]:
        """Every live session."""
        ...

    def add_append_guard(self, guard: AppendGuard) -> Callable[[], None]:
        """Call ``guard(header, events, type, data)`` before each append; returns ``remove``."""
        ...

    def add_creation_guard(self, guard: CreationGuard) -> Callable[[], None]:
        """Call ``guard(header, events)`` before a new session goes live; returns ``remove``.

        A guard that raises refuses the session: nothing of it is stored or live.
        """
        ...


class ScheduleInvariantError(ScheduleLogError):
    """A session's Schedule stream, or a candidate for it, breaks the fold policy."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id!r}: {reason}")
        self.session_id = session_id
        self.reason = reason


@dataclass(frozen=True, slots=True)
class _CachedFold:
    """A fold of one log: continued only for the same header and the same log."""

    header: SessionHeader
    last: SessionEvent | None  # the last folded event, compared by identity
    folded: FoldedSchedules

    def continues(self, header: SessionHeader, events: Sequence[SessionEvent]) -> bool:
        end = self.folded.end
        if self.header != header or end > len(events):
            return False
        # A session id may come back with another log (a store without persistence,
        # a fork reusing an id): only the very same event objects prove it is one log.
        return end == 0 or events[end - 1] is self.last


class ScheduleInvariant:
    """The installed companion. Keeps one incremental fold per session it has judged."""

    def __init__(self) -> None:
        self._folds: dict[str, _CachedFold] = {}
        self._lock = threading.Lock()
        self._removers: list[Callable[[], None]] = []

    def check_session(self, session: Session) -> FoldedSchedules:
        """Judge a session's owned stream; raises :class:`ScheduleInvariantError`.

        From the session's schedule checkpoint when it offers a usable one.
        """
        return self._fold(session.header, session.events, _checkpoint_of(session))

    def guard(
        self, header: SessionHeader, events: Sequence[SessionEvent], type_: str, data: Any
    ) -> None:
        """Append guard: reject a ``schedule/change`` candidate that the fold would refuse."""
        if type_ != SCHEDULE_CHANGE_TYPE:
            return
        folded = self._fold(header, events, _checkpoint_of(events))
        try:
            check_schedule_candidate(folded, data)
        except ScheduleLogError as error:
            _log.warning("rejected a schedule/change candidate for session %r", header.id)
            raise ScheduleInvariantError(
                header.id, f"candidate rejected: {error.message}"
            ) from None

    def creation_guard(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Creation guard: refuse a new session whose owned stream the fold would reject."""
        try:
            self._fold(header, events)
        except ScheduleInvariantError:
            _log.warning("refused to create session %r: its schedule stream is corrupt", header.id)
            raise

    def uninstall(self) -> None:
        """Stop judging appends and new sessions."""
        removers, self._removers = self._removers, []
        for remove in removers:
            remove()

    def _fold(
        self, header: SessionHeader, events: Sequence[SessionEvent], checkpoint: object = None
    ) -> FoldedSchedules:
        with self._lock:
            cached = self._folds.get(header.id)
        seed = header.seed_length or 0
        usable = (
            isinstance(checkpoint, FoldedSchedules)
            and checkpoint_problem(checkpoint, seed, len(events)) is None
            and (cached is None or checkpoint.end >= cached.folded.end)
        )
        try:
            if usable:
                assert isinstance(checkpoint, FoldedSchedules)
                folded = continue_fold(checkpoint, events)  # a bounded log: only its tail
            elif cached is not None and cached.continues(header, events):
                folded = continue_fold(cached.folded, events)
            else:
                folded = validate_schedule_stream(events, header.seed_length)
        except ScheduleLogError as error:
            raise ScheduleInvariantError(header.id, error.message) from None
        if folded is checkpoint:  # nothing after it: its last event is not held, read none
            return folded
        last = events[folded.end - 1] if folded.end else None
        with self._lock:
            self._folds[header.id] = _CachedFold(header, last, folded)
        return folded


def _checkpoint_of(source: object) -> object:
    """The schedule checkpoint ``source`` (a session, a log snapshot) offers; ``None``: none."""
    try:
        return getattr(source, CHECKPOINT_ATTRIBUTE, None)
    except Exception:  # a broken attribute: judge the whole stream
        _log.warning("a session's schedule checkpoint could not be read; folding its log")
        return None


def install_schedule_invariant(sessions: GuardedSessionStore) -> ScheduleInvariant:
    """Judge every live session now, then every later new session and ``schedule/change``.

    Raises :class:`ScheduleInvariantError` (and installs nothing) when an existing
    session's owned stream is corrupt. Later, creating (or forking) a session
    whose owned stream is corrupt raises :class:`ScheduleInvariantError` from the
    store's create call, and the session is not created.
    """
    invariant = ScheduleInvariant()
    for session in sessions.list():
        invariant.check_session(session)
    invariant._removers.append(sessions.add_creation_guard(invariant.creation_guard))
    invariant._removers.append(sessions.add_append_guard(invariant.guard))
    return invariant
