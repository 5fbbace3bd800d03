"""The due index: a projection of the session logs that says when each stored session is due.

One row per session with something to deliver::

    due_index(session_id, due_ms, schedule_ms, inbox_ms)

``schedule_ms`` is the earliest target of the session's active reminders,
``inbox_ms`` the queue time of the oldest reminder inbox entry whose turn never
completed, ``due_ms`` the earlier of the two. :class:`SessionProjection` folds
one session's events; :class:`DueProjection` is the writer's projection
object, told the decoded rows it commits. The rules: docs/storage.md.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, groupby
from typing import Any

from host_bridge.embedded.codec import PayloadError, decode_payload
from host_bridge.embedded.inbox import (
    INBOX_EVENT,
    TURN_COMPLETED_EVENT,
    completed_entry,
    message_of,
)
from host_bridge.embedded.stores._errors import StoreCorruptError
from host_bridge.embedded.stores._rows import UNTOLD, EventRow, Op, is_whole, show_id
from messages._errors import ScheduleLogError
from messages._fold import FoldedSchedules, check_schedule_candidate
from messages._instant import format_instant
from messages._presentation import REMINDER_SOURCE
from messages._records import SCHEDULE_CHANGE_TYPE

_log = logging.getLogger(f"dsh_schedule.{__name__}")

__all__ = [
    "DEFAULT_CACHE_SESSIONS",
    "WAKE_EVENT_TYPES",
    "CheckpointWarnings",
    "DueEntry",
    "DueProjection",
    "IndexPlan",
    "IndexRow",
    "SessionProjection",
    "StoredRow",
    "decode_due_entry",
    "describe_due",
    "index_problem",
    "project_logs",
    "project_session",
    "write_due_changes",
]

WAKE_EVENT_TYPES: tuple[str, ...] = (SCHEDULE_CHANGE_TYPE, INBOX_EVENT, TURN_COMPLETED_EVENT)
"""The event types that can move a session's due index row."""

DEFAULT_CACHE_SESSIONS = 4096
"""How many sessions' projection state a store's writer keeps between commits."""

StoredRow = tuple[int, str, int, Any]
"""``(seq, type, time, data)`` of one stored event; ``data`` is decoded or payload bytes."""


@dataclass(frozen=True, slots=True)
class DueEntry:
    """One session's due index row: see the module docstring.

    ``due_ms`` is the earlier of ``schedule_ms`` and ``inbox_ms`` (never both None).
    """

    schedule_ms: int | None
    inbox_ms: int | None

    @property
    def due_ms(self) -> int:
        """When the session is due: the earlier of its reminder target and its owed turn."""
        values = [v for v in (self.schedule_ms, self.inbox_ms) if v is not None]
        return min(values)

    @staticmethod
    def of(schedule_ms: int | None, inbox_ms: int | None) -> DueEntry | None:
        """The entry, or ``None`` when there is nothing to wake the session for."""
        if schedule_ms is None and inbox_ms is None:
            return None
        return DueEntry(schedule_ms, inbox_ms)


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One due index row as the store holds it: ``(due_ms, schedule_ms, inbox_ms)``, unchecked.

    The store's writer only ever writes rows of :class:`DueEntry`; a row
    damaged by other means may hold anything (SQLite keeps text in an
    ``INTEGER`` column), so the values are whatever was read.
    """

    due_ms: object
    schedule_ms: object
    inbox_ms: object

    def defect(self) -> str | None:
        """What is wrong with the row in itself, or ``None`` (then :meth:`entry` is its value).

        A column that is not an integer makes it *unreadable*; a ``due_ms``
        that is not the earlier of ``schedule_ms`` and ``inbox_ms``, or neither
        of those set, makes it *inconsistent*.
        """
        checked = self._checked()
        return checked if isinstance(checked, str) else None

    def entry(self) -> DueEntry | None:
        """The row's value when it is sound (see :meth:`defect`), else ``None``."""
        checked = self._checked()
        return None if isinstance(checked, str) else checked

    @property
    def wake_ms(self) -> int:
        """When a waking host should look at the session: ``due_ms``, or 0 (at once) if unsound.

        An unsound row says nothing reliable, so the session's log decides.
        """
        entry = self.entry()
        return 0 if entry is None else entry.due_ms

    def _checked(self) -> DueEntry | str:
        """The row's entry, or what is wrong with it."""
        due = _as_int(self.due_ms)
        if due is None:
            return _unreadable("due_ms", self.due_ms)
        schedule, inbox = _as_int(self.schedule_ms), _as_int(self.inbox_ms)
        if schedule is None and self.schedule_ms is not None:
            return _unreadable("schedule_ms", self.schedule_ms)
        if inbox is None and self.inbox_ms is not None:
            return _unreadable("inbox_ms", self.inbox_ms)
        entry = DueEntry.of(schedule, inbox)
        if entry is None:
            return "inconsistent: neither its schedule_ms nor its inbox_ms is set"
        if due != entry.due_ms:
            return (
                f"inconsistent: its due_ms says {_when(due)}, its schedule_ms and "
                f"inbox_ms say {_when(entry.due_ms)}"
            )
        return entry


def index_problem(row: IndexRow | None, expected: DueEntry | None) -> str | None:
    """How a session's stored index row disagrees with ``expected`` (its log's projection).

    ``row`` is ``None`` when the session has no row. Every column counts, its
    type and its value; ``None`` means the row is exactly what the log says.
    """
    if row is not None:
        defect = row.defect()
        if defect is not None:
            return f"the due index row is {defect}"
    stored = None if row is None else row.entry()
    if stored == expected:
        return None
    return f"the due index says {describe_due(stored)}, the log says {describe_due(expected)}"


def describe_due(entry: DueEntry | None) -> str:
    """A due index entry in words."""
    if entry is None:
        return "nothing due"
    parts = []
    if entry.schedule_ms is not None:
        parts.append(f"a reminder due {_when(entry.schedule_ms)}")
    if entry.inbox_ms is not None:
        parts.append(f"a reminder turn owed since {_when(entry.inbox_ms)}")
    return " and ".join(parts)


def _as_int(value: object) -> int | None:
    return value if is_whole(value) else None


def _unreadable(column: str, value: object) -> str:
    kinds = {str: "text", bytes: "a blob", float: "a real number", type(None): "nothing"}
    kind = kinds.get(type(value), f"a {type(value).__name__}")
    return f"unreadable: its {column} holds {kind}, not an integer"


def _when(ms: int) -> str:
    """Epoch milliseconds as a canonical instant, or as a number outside the years 1–9999."""
    try:
        return format_instant(ms)
    except ValueError:
        return f"{ms} ms"


@dataclass(slots=True)
class SessionProjection:
    """The due-index state of one session, folded event by event in log order.

    ``next_seq`` is the seq the next event must have; events before
    ``seed_length`` (a fork's inherited ones) are skipped. ``pending`` holds the
    reminder inbox entries whose turn never completed, ``unfinished`` the other
    well-formed ones (a person's message), each ``seq -> queue time``; only
    ``pending`` moves the due index row.
    """

    seed_length: int = 0
    next_seq: int = 0
    folded: FoldedSchedules | None = field(default_factory=FoldedSchedules)  # None: corrupt
    pending: dict[int, int] = field(default_factory=dict)  # reminder inbox seq -> queue time
    told: bool = False  # the schedule target was told (``told_ms``), ``folded`` is stale
    told_ms: int | None = None
    unfinished: dict[int, int] = field(default_factory=dict)  # other inbox seq -> queue time

    def copy(self) -> SessionProjection:
        """An independent copy (the fold is immutable; the inbox maps are copied)."""
        return SessionProjection(
            self.seed_length,
            self.next_seq,
            self.folded,
            dict(self.pending),
            self.told,
            self.told_ms,
            dict(self.unfinished),
        )

    def apply(self, seq: int, type_: str, time_ms: int, data: Any, *, fold: bool = True) -> None:
        """Fold one event (``data`` decoded, or stored msgpack bytes decoded here).

        ``fold=False`` skips a schedule change (its effect is told instead).
        """
        self.next_seq = seq + 1
        if seq < self.seed_length or type_ not in WAKE_EVENT_TYPES:
            return
        if type_ == SCHEDULE_CHANGE_TYPE and not fold:
            return
        if isinstance(data, bytes | bytearray | memoryview):
            try:
                data = decode_payload(bytes(data))
            except PayloadError:
                data = None  # an unreadable payload: corrupt for the fold, ignored by the inbox
        if type_ == SCHEDULE_CHANGE_TYPE:
            if self.folded is not None:
                try:
                    self.folded = check_schedule_candidate(self.folded, data)
                except ScheduleLogError:
                    self.folded = None  # corrupt: the owner delivers nothing, nor do we wake it
        elif type_ == INBOX_EVENT:
            if _is_reminder_entry(data):
                self.pending[seq] = time_ms
            elif message_of(data) is not None:
                self.unfinished[seq] = time_ms
        else:
            done = completed_entry(data)
            if done is not None:
                self.pending.pop(done, None)
                self.unfinished.pop(done, None)

    def entry(self) -> DueEntry | None:
        """The session's due index row now (``None``: no row)."""
        if self.told:
            schedule_ms = self.told_ms
        else:
            earliest = None if self.folded is None else self.folded.earliest()
            schedule_ms = None if earliest is None else earliest.target_ms
        inbox_ms = min(self.pending.values()) if self.pending else None
        return DueEntry.of(schedule_ms, inbox_ms)


_REMINDER_SOURCE = dict(REMINDER_SOURCE)


def _is_reminder_entry(data: Any) -> bool:
    """Whether ``data`` is a well-formed ``inbox/queued`` entry of a reminder.

    The checks of :func:`~host_bridge.embedded.inbox.message_of`, without
    building the message.
    """
    if type(data) is not dict:
        return message_of(data) is not None and dict(data["source"]) == _REMINDER_SOURCE
    if len(data) != 2 or "content" not in data or "source" not in data:
        return False
    content, source = data["content"], data["source"]
    if not isinstance(content, list | tuple) or not all(isinstance(t, str) for t in content):
        return False
    return isinstance(source, Mapping) and dict(source) == _REMINDER_SOURCE


def project_session(seed_length: int | None, rows: Iterable[StoredRow]) -> SessionProjection:
    """Fold a session's stored events (in seq order) into its projection."""
    state = SessionProjection(seed_length=seed_length or 0)
    for seq, type_, time_ms, data in rows:
        state.apply(seq, type_, time_ms, data)
    return state


def project_logs(
    rows: Iterable[tuple[str, int | None, int, str, int, Any]],
) -> Iterator[tuple[str, DueEntry]]:
    """The index rows of many sessions, from ``(session_id, seed_length, seq, type, time, data)``.

    ``rows`` are the wake-relevant events (:data:`WAKE_EVENT_TYPES`) of every
    session, grouped by session and in seq order within one; sessions without
    an entry are not yielded. Used to build the index (migration, reindex).
    """
    for session_id, group in groupby(rows, key=lambda row: row[0]):
        first = next(group)
        entry = project_session(first[1], (row[2:] for row in chain((first,), group))).entry()
        if entry is not None:
            yield session_id, entry


ReadSession = Callable[[str], tuple[SessionProjection, str | None] | None]
"""Reads a session's projection inside the write transaction (so it includes the rows
just inserted), from its schedule checkpoint and the rows after it, with what is wrong
with that checkpoint (``None``: nothing; else it was folded from its log); ``None``
when the session is not stored."""


@dataclass(slots=True)
class IndexPlan:
    """What one write transaction changes in the due index, and the state to keep after it.

    ``changes`` maps each session whose row must be written to its new entry
    (``None``: delete the row); ``checkpoints`` each session whose schedule
    checkpoint must be written to its state (``None``: delete it). Keep
    ``states`` only once the transaction committed.
    """

    changes: dict[str, DueEntry | None]
    states: dict[str, SessionProjection]
    checkpoints: dict[str, SessionProjection | None] = field(default_factory=dict)


class CheckpointWarnings:
    """Logs a session's unusable schedule checkpoint once (at WARNING), whoever finds it."""

    _LIMIT = 65_536  # sessions remembered; then it starts over

    def __init__(self) -> None:
        """Nothing warned yet."""
        self._warned: set[str] = set()
        self._mutex = threading.Lock()

    def warn(self, session_id: str, problem: str) -> None:
        """Say that ``session_id``'s checkpoint has ``problem`` and is folded from its log."""
        with self._mutex:
            if session_id in self._warned:
                return
            if len(self._warned) >= self._LIMIT:
                self._warned.clear()
            self._warned.add(session_id)
        _log.warning(
            "session %s: its schedule checkpoint %s; folding its log instead "
            "(the next write of the session or dsh-schedule reindex rewrites it)",
            show_id(session_id),
            problem,
        )


class DueProjection:
    """The due index as the writer's projection: per-session state kept across commits.

    Told, not re-derived: it folds the *decoded* events of the rows being
    written (never their payload bytes), and a row's ``schedule_due_ms`` (the
    appender's earliest schedule target after it) replaces folding the
    session's schedule changes. A session whose state is not cached (LRU
    bounded), not contiguous with its rows, or whose schedule was told and then
    changed untold, is read inside the write transaction and folded from its log.
    """

    def __init__(
        self,
        cache_sessions: int = DEFAULT_CACHE_SESSIONS,
        warnings: CheckpointWarnings | None = None,
    ) -> None:
        """Keep the state of at most ``cache_sessions`` sessions between commits;
        ``warnings`` hears of unusable checkpoints found inside a write transaction."""
        self._cache: OrderedDict[str, SessionProjection] = OrderedDict()
        self._limit = max(0, cache_sessions)
        self._mutex = threading.Lock()  # the writer plans and adopts; any thread may forget
        self._listeners: list[Callable[[dict[str, int | None]], None]] = []
        self._rewrite: set[str] = set()  # sessions whose stored checkpoint is known unusable
        self.warnings = warnings if warnings is not None else CheckpointWarnings()
        self.reads = 0  # sessions re-read inside a write transaction (cache misses)

    def plan(self, rows: Sequence[Op], read: ReadSession) -> IndexPlan:
        """The index and checkpoint changes of rows about to be committed (inside the
        transaction).

        ``read`` is called for a session whose state cannot be carried on from
        the cache and that has a wake-relevant row. A session's checkpoint is
        written with its state when that state is a full fold (not told) and was
        just created or read, moved by a wake-relevant row, or replaces a stored
        checkpoint known to be unusable; a told state only deletes such a one.
        """
        created: dict[str, int | None] = {}
        groups: dict[str, list[EventRow]] = {}
        for op in rows:
            if isinstance(op, EventRow):
                groups.setdefault(op.session_id, []).append(op)
            else:
                created[op.session_id] = op.seed_length
        changes: dict[str, DueEntry | None] = {}
        states: dict[str, SessionProjection] = {}
        checkpoints: dict[str, SessionProjection | None] = {}
        for session_id, group in groups.items():
            with self._mutex:
                cached = self._cache.get(session_id)
                rewrite = session_id in self._rewrite
            relevant = any(row.type in WAKE_EVENT_TYPES for row in group)
            if session_id in created:
                before: DueEntry | None = None
                state = SessionProjection(seed_length=created[session_id] or 0)
            elif cached is not None and cached.next_seq == group[0].seq:
                before = cached.entry()
                state = cached.copy()
            elif not relevant:
                continue  # nothing here moves the row; the state is read when something does
            else:
                state = None
            if state is None or not _apply_told(state, group):
                stored = read(session_id)
                self.reads += 1
                if stored is None:
                    continue
                state, problem = stored
                if problem is not None:
                    self.warnings.warn(session_id, problem)
                changes[session_id] = state.entry()
                states[session_id] = state
                checkpoints[session_id] = state
                continue
            after = state.entry()
            if after != before:
                changes[session_id] = after
            states[session_id] = state
            if state.told:
                if rewrite:
                    checkpoints[session_id] = None  # stale fold: no checkpoint beats a bad one
            elif relevant or rewrite or session_id in created:
                checkpoints[session_id] = state
        for session_id in created.keys() - groups.keys():  # a new session without events
            state = SessionProjection(seed_length=created[session_id] or 0)
            states[session_id] = checkpoints[session_id] = state
        return IndexPlan(changes, states, checkpoints)

    def committed(self, plan: IndexPlan) -> None:
        """After ``COMMIT``: keep the plan's states and tell the listeners; never raises."""
        with self._mutex:
            cache = self._cache
            for session_id, state in plan.states.items():
                cache[session_id] = state
                cache.move_to_end(session_id)
            self._trim()
            self._rewrite.difference_update(plan.checkpoints)
            listeners = tuple(self._listeners)
        if not plan.changes or not listeners:
            return
        moved = {sid: None if e is None else e.due_ms for sid, e in plan.changes.items()}
        for listener in listeners:
            try:
                listener(dict(moved))
            except Exception:  # a listener's bug must not fail the writer: log it
                _log.warning("a due index listener failed", exc_info=True)

    def add_listener(self, listener: Callable[[dict[str, int | None]], None]) -> Callable[[], None]:
        """Hear of every commit that moved the index; returns ``remove``."""
        with self._mutex:
            self._listeners.append(listener)

        def remove() -> None:
            with self._mutex:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def prime(self, states: Mapping[str, SessionProjection], rewrite: Iterable[str] = ()) -> None:
        """Keep durable ``states`` (read outside the writer) for sessions with none kept.

        A state kept already is never replaced: it is at least as new. A primed
        state older than the log is never used, as a round carries a state on
        only when its rows start at the state's ``next_seq``. ``rewrite`` names
        sessions whose stored checkpoint is unusable: their next round rewrites it.
        """
        with self._mutex:
            cache = self._cache
            for session_id, state in states.items():
                if session_id not in cache and not state.told:
                    cache[session_id] = state.copy()
            self._trim()
            self._rewrite.update(rewrite)

    def forget(self, session_id: str) -> None:
        """Drop a session's state (it went offline; the next write re-reads it)."""
        with self._mutex:
            self._cache.pop(session_id, None)
            self._rewrite.discard(session_id)

    def clear(self) -> None:
        """Drop every session's state."""
        with self._mutex:
            self._cache.clear()
            self._rewrite.clear()

    @property
    def cached(self) -> int:
        """How many sessions' state is kept."""
        with self._mutex:
            return len(self._cache)

    def cached_state(self, session_id: str) -> SessionProjection | None:
        """A copy of the state kept for ``session_id`` (for diagnostics and tests)."""
        with self._mutex:
            state = self._cache.get(session_id)
        return None if state is None else state.copy()

    def _trim(self) -> None:
        """Mutex held: drop the least recently used states beyond the bound."""
        while len(self._cache) > self._limit:
            self._cache.popitem(last=False)


def _apply_told(state: SessionProjection, group: Sequence[EventRow]) -> bool:
    """Fold ``group`` (decoded) into ``state``; False when only the log can tell.

    Schedule changes up to the last row that tells ``schedule_due_ms`` are not
    folded: that value is taken. An untold schedule change after a told one
    (or after the state was told earlier) cannot be folded onto a stale fold.
    """
    told = max((i for i, row in enumerate(group) if row.schedule_due_ms is not UNTOLD), default=-1)
    for index, row in enumerate(group):
        if index > told and row.type == SCHEDULE_CHANGE_TYPE and (state.told or told >= 0):
            return False
        state.apply(row.seq, row.type, row.time, row.data, fold=index > told)
    if told >= 0:
        hint = group[told].schedule_due_ms
        state.told = True
        state.told_ms = None if hint is UNTOLD else hint
    return True


def write_due_changes(conn: Any, changes: Mapping[str, DueEntry | None], mark: str) -> None:
    """Write index rows on ``conn`` (``None``: delete the row; ``mark``: the placeholder)."""
    upserts = [
        (session_id, entry.due_ms, entry.schedule_ms, entry.inbox_ms)
        for session_id, entry in changes.items()
        if entry is not None
    ]
    deletes = [(session_id,) for session_id, entry in changes.items() if entry is None]
    if upserts:
        conn.executemany(
            "INSERT INTO due_index(session_id, due_ms, schedule_ms, inbox_ms)"
            f" VALUES ({mark}, {mark}, {mark}, {mark})"
            " ON CONFLICT (session_id) DO UPDATE SET due_ms = EXCLUDED.due_ms,"
            " schedule_ms = EXCLUDED.schedule_ms, inbox_ms = EXCLUDED.inbox_ms",
            upserts,
        )
    if deletes:
        conn.executemany(f"DELETE FROM due_index WHERE session_id = {mark}", deletes)


def decode_due_entry(session_id: str, row: IndexRow) -> DueEntry:
    """A due index row's value; :class:`StoreCorruptError` when it is unsound (see ``defect``)."""
    entry = row.entry()
    if entry is None:
        raise StoreCorruptError(
            f"the due index row of session {show_id(session_id)} is {row.defect()}"
        )
    return entry
