"""Schedule checkpoints: each session's projection state, stored beside its log.

One row per session::

    schedule_checkpoints(session_id PRIMARY KEY, next_seq, state)

``state`` is the msgpack of ``{"version": 1, "seed_length", "next_seq",
"schedule", "pending", "unfinished"}``: the
:class:`~host_bridge.embedded.stores._due.SessionProjection` of the log prefix
``[0, next_seq)`` (``schedule``: the encoded fold, ``None`` when the stream is
corrupt; the inbox maps as ``[[seq, ms], ...]``). A checkpoint as of ``N`` plus the
wake-relevant rows from ``N`` is the session's state, so reads cost the tail, not
the log. It is a projection: anything unusable is folded from the log instead, and
``reindex`` rebuilds it. The rules: docs/storage.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from host_bridge.embedded.codec import PayloadError, decode_payload, encode_payload
from host_bridge.embedded.stores._due import (
    WAKE_EVENT_TYPES,
    SessionProjection,
    StoredRow,
    project_session,
)
from host_bridge.embedded.stores._rows import INT64_MAX, INT64_MIN, is_whole
from messages._checkpoint import decode_schedule_state, encode_schedule_state
from messages._errors import ScheduleLogError

__all__ = [
    "CHECKPOINT_VERSION",
    "CheckpointError",
    "SessionHead",
    "build_checkpoints",
    "checkpoint_problem",
    "checkpoint_table",
    "decode_checkpoint",
    "encode_checkpoint",
    "finish_state",
    "head_sql",
    "read_schedule_states",
    "read_session_state",
    "resume_state",
    "session_head",
    "tail_sql",
    "tail_start",
    "write_checkpoints",
]

CHECKPOINT_VERSION = 1
"""The only ``version`` of a stored checkpoint state."""

_KEYS = frozenset({"version", "seed_length", "next_seq", "schedule", "pending", "unfinished"})

_WRITE_BATCH = 1000
"""Checkpoints a rebuild encodes before writing them."""


class CheckpointError(ValueError):
    """A stored checkpoint is unusable; the message says why (never backend text)."""


def checkpoint_table(integer: str, blob: str) -> str:
    """The ``schedule_checkpoints`` table in a backend's column types."""
    return (
        "CREATE TABLE schedule_checkpoints( session_id TEXT PRIMARY KEY,"
        f" next_seq {integer} NOT NULL, state {blob} NOT NULL)"
    )


def encode_checkpoint(state: SessionProjection) -> bytes:
    """The stored ``state`` column of a full fold (``ValueError`` for a told one;
    ``PayloadError`` when it cannot be a payload)."""
    if state.told:
        raise ValueError("a told projection has a stale fold and is never checkpointed")
    schedule = None if state.folded is None else encode_schedule_state(state.folded)
    return encode_payload(
        {
            "version": CHECKPOINT_VERSION,
            "seed_length": state.seed_length,
            "next_seq": state.next_seq,
            "schedule": schedule,
            "pending": [[seq, ms] for seq, ms in sorted(state.pending.items())],
            "unfinished": [[seq, ms] for seq, ms in sorted(state.unfinished.items())],
        }
    )


def decode_checkpoint(next_seq: object, blob: object) -> SessionProjection:
    """The projection a stored checkpoint row holds; :class:`CheckpointError` unless it
    decodes strictly and agrees with itself (its ``next_seq`` column included)."""
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise CheckpointError("is unreadable: its state is not a blob")
    try:
        value = decode_payload(bytes(blob))
    except PayloadError:
        raise CheckpointError("is unreadable: its state is not a valid payload") from None
    if not isinstance(value, dict) or set(value) != _KEYS:
        raise CheckpointError("is malformed: its state does not have the checkpoint's keys")
    if value["version"] != CHECKPOINT_VERSION or not is_whole(value["version"]):
        raise CheckpointError("is malformed: its version is not 1")
    seed, end = value["seed_length"], value["next_seq"]
    if not (is_whole(seed) and is_whole(end) and seed >= 0 and 0 <= end <= INT64_MAX):
        raise CheckpointError("is malformed: its seed_length or next_seq is no count")
    if next_seq != end or not is_whole(next_seq):
        raise CheckpointError("is inconsistent: its next_seq column disagrees with its state")
    schedule = value["schedule"]
    try:
        folded = None if schedule is None else decode_schedule_state(schedule)
    except ScheduleLogError as error:
        raise CheckpointError(f"is malformed: {error.message}") from None
    pending = _entries(value["pending"], "pending", seed, end)
    unfinished = _entries(value["unfinished"], "unfinished", seed, end)
    if pending.keys() & unfinished.keys():
        raise CheckpointError("is inconsistent: an inbox entry is both pending and unfinished")
    return SessionProjection(seed, end, folded, pending, unfinished=unfinished)


def _entries(value: object, name: str, seed: int, end: int) -> dict[int, int]:
    """``[[seq, ms], ...]`` in seq order, each seq of the checkpoint's own log prefix."""
    if not isinstance(value, list):
        raise CheckpointError(f"is malformed: its {name} entries are not a list")
    entries: dict[int, int] = {}
    last = seed - 1
    for item in value:
        if not (isinstance(item, list) and len(item) == 2):
            raise CheckpointError(f"is malformed: a {name} entry is not a [seq, ms] pair")
        seq, ms = item
        if not (is_whole(seq) and is_whole(ms) and INT64_MIN <= ms <= INT64_MAX):
            raise CheckpointError(f"is malformed: a {name} entry is not a [seq, ms] pair")
        if not last < seq < end:
            raise CheckpointError(f"is inconsistent: its {name} entries are out of order or range")
        entries[seq] = ms
        last = seq
    return entries


@dataclass(frozen=True, slots=True)
class SessionHead:
    """What a session's state is read from: its header's seed, stored length, checkpoint."""

    seed_length: int
    next_seq: int
    checkpoint: tuple[object, object] | None  # (next_seq column, state column) as stored


def resume_state(head: SessionHead) -> tuple[SessionProjection | None, str | None]:
    """The checkpoint's state when it is usable for this session (else ``None``), and what
    is wrong with it (``None``: nothing, or there is none)."""
    if head.checkpoint is None:
        return None, None
    try:
        state = decode_checkpoint(*head.checkpoint)
    except CheckpointError as error:
        return None, str(error)
    if state.seed_length != head.seed_length:
        return None, (
            f"is inconsistent: its seed_length {state.seed_length} is not the session's "
            f"{head.seed_length}"
        )
    if state.next_seq > head.next_seq:
        return None, (
            f"is beyond its log: it is as of seq {state.next_seq}, "
            f"{head.next_seq} events are stored"
        )
    return state, None


def finish_state(
    head: SessionHead, state: SessionProjection | None, tail: Iterable[StoredRow]
) -> SessionProjection:
    """Fold the wake-relevant rows after the checkpoint (or the whole log without one)."""
    if state is None:
        state = SessionProjection(seed_length=head.seed_length)
    for seq, type_, time_ms, data in tail:
        state.apply(seq, type_, time_ms, data)
    state.next_seq = head.next_seq
    return state


def tail_start(head: SessionHead, state: SessionProjection | None) -> int:
    """The first seq whose wake-relevant rows must still be folded."""
    return head.seed_length if state is None else max(head.seed_length, state.next_seq)


def head_sql(mark: str, count: int, *, checkpoints: bool = True) -> str:
    """``(id, seed_length, stored length, checkpoint next_seq, checkpoint state)`` of
    ``count`` sessions (``checkpoints=False``: a schema without them, NULLs)."""
    marks = ", ".join(mark for _ in range(count))
    length = "(SELECT COALESCE(MAX(e.seq) + 1, 0) FROM events e WHERE e.session_id = s.id)"
    where = f" WHERE s.id IN ({marks})"
    if not checkpoints:
        return f"SELECT s.id, s.seed_length, {length}, NULL, NULL FROM sessions s" + where
    return (
        f"SELECT s.id, s.seed_length, {length}, c.next_seq, c.state FROM sessions s"
        " LEFT JOIN schedule_checkpoints c ON c.session_id = s.id" + where
    )


def tail_sql(mark: str, count: int) -> str:
    """The wake-relevant rows of ``count`` ``(session_id, from_seq)`` pairs, by session and
    seq; parameters: the pairs flattened, then :data:`WAKE_EVENT_TYPES`."""
    pairs = ", ".join(f"({mark}, {mark})" for _ in range(count))
    types = ", ".join(mark for _ in WAKE_EVENT_TYPES)
    return (
        f"WITH t(sid, from_seq) AS (VALUES {pairs})"
        " SELECT e.session_id, e.seq, e.type, e.time, e.data FROM t"
        " JOIN events e ON e.session_id = t.sid AND e.seq >= t.from_seq"
        f" WHERE e.type IN ({types}) ORDER BY e.session_id, e.seq"
    )


def session_head(row: Sequence[Any]) -> SessionHead:
    """A :class:`SessionHead` from a :func:`head_sql` row (without its id)."""
    seed, length, next_seq, blob = row
    checkpoint = None if next_seq is None and blob is None else (next_seq, blob)
    return SessionHead(seed if is_whole(seed) else 0, int(length), checkpoint)


def read_session_state(
    conn: Any, session_id: str, mark: str
) -> tuple[SessionProjection, str | None] | None:
    """A session's projection from its checkpoint and the rows after it, read on ``conn``
    (a cursor, inside the write transaction), and what is wrong with its checkpoint."""
    row = conn.execute(head_sql(mark, 1), (session_id,)).fetchone()
    if row is None:
        return None
    head = session_head(tuple(row)[1:])
    state, problem = resume_state(head)
    types = ", ".join(mark for _ in WAKE_EVENT_TYPES)
    rows = conn.execute(
        f"SELECT seq, type, time, data FROM events WHERE session_id = {mark} AND seq >= {mark}"
        f" AND type IN ({types}) ORDER BY seq",
        (session_id, tail_start(head, state), *WAKE_EVENT_TYPES),
    ).fetchall()
    return finish_state(head, state, (_blob(r) for r in rows)), problem


def _blob(row: Sequence[Any]) -> StoredRow:
    seq, type_, time_ms, data = row
    return seq, type_, time_ms, bytes(data) if isinstance(data, memoryview) else data


def write_checkpoints(
    conn: Any, checkpoints: Mapping[str, SessionProjection | None], mark: str
) -> None:
    """Write checkpoint rows on ``conn`` (``None``, or a state that is no payload: delete)."""
    upserts: list[tuple[str, int, bytes]] = []
    deletes: list[tuple[str]] = []
    for session_id, state in checkpoints.items():
        try:
            blob = None if state is None else encode_checkpoint(state)
        except PayloadError:  # (too large): no checkpoint is always right
            blob = None
        if state is None or blob is None:
            deletes.append((session_id,))
        else:
            upserts.append((session_id, state.next_seq, blob))
    if upserts:
        conn.executemany(
            "INSERT INTO schedule_checkpoints(session_id, next_seq, state)"
            f" VALUES ({mark}, {mark}, {mark}) ON CONFLICT (session_id) DO UPDATE"
            " SET next_seq = EXCLUDED.next_seq, state = EXCLUDED.state",
            upserts,
        )
    if deletes:
        conn.executemany(f"DELETE FROM schedule_checkpoints WHERE session_id = {mark}", deletes)


def build_checkpoints(select: Any, insert: Any, mark: str) -> int:
    """Write every stored session's checkpoint, folded from its whole log: read on cursor
    ``select`` (streamed), written on ``insert``; the checkpoints written."""
    insert.execute(
        "SELECT s.id, s.seed_length,"
        " (SELECT COALESCE(MAX(e.seq) + 1, 0) FROM events e WHERE e.session_id = s.id)"
        " FROM sessions s"
    )
    heads = {
        row[0]: (row[1] if is_whole(row[1]) else 0, int(row[2]))
        for row in insert.fetchall()
        if isinstance(row[0], str)
    }
    marks = ", ".join(mark for _ in WAKE_EVENT_TYPES)
    select.execute(
        "SELECT session_id, seq, type, time, data FROM events"
        f" WHERE type IN ({marks}) ORDER BY session_id, seq",
        WAKE_EVENT_TYPES,
    )
    batch: dict[str, SessionProjection | None] = {}
    written = 0
    for session_id, state in _folded(_stream(select), heads):
        batch[session_id] = state
        if len(batch) >= _WRITE_BATCH:
            write_checkpoints(insert, batch, mark)
            written += len(batch)
            batch = {}
    for session_id, (seed, length) in heads.items():  # those without a wake-relevant row
        batch[session_id] = SessionProjection(seed_length=seed, next_seq=length)
        if len(batch) >= _WRITE_BATCH:
            write_checkpoints(insert, batch, mark)
            written += len(batch)
            batch = {}
    write_checkpoints(insert, batch, mark)
    return written + len(batch)


def _stream(select: Any) -> Iterator[tuple[Any, ...]]:
    for row in select:
        data = row[4]
        yield (*row[:4], bytes(data) if isinstance(data, memoryview) else data)


def _folded(
    rows: Iterable[tuple[Any, ...]], heads: dict[str, tuple[int, int]]
) -> Iterator[tuple[str, SessionProjection]]:
    """Each stored session's full fold from its wake-relevant rows; ``heads`` loses it."""
    for session_id, group in groupby(rows, key=lambda row: row[0]):
        head = heads.pop(session_id, None)
        if head is None:
            continue  # rows of a session without a header: not a session
        state = project_session(head[0], (row[1:] for row in group))
        state.next_seq = head[1]
        yield session_id, state


def checkpoint_problem(
    checkpoint: tuple[object, object] | None, seed_length: int | None, events: Sequence[Any]
) -> str | None:
    """How a session's stored checkpoint disagrees with its log (``events``, decoded
    :class:`SessionEvent` values); ``None``: it agrees, or there is none."""
    if checkpoint is None:
        return None
    head = SessionHead(seed_length or 0, len(events), checkpoint)
    state, problem = resume_state(head)
    if state is None:
        return f"the schedule checkpoint {problem}"
    prefix = events[: state.next_seq]
    truth = project_session(seed_length, ((e.seq, e.type, e.time, e.data) for e in prefix))
    wrong = [
        part
        for part, stored, expected in (
            ("its reminders", state.folded, truth.folded),
            ("its owed reminder turns", state.pending, truth.pending),
            ("its unfinished inbox entries", state.unfinished, truth.unfinished),
        )
        if stored != expected
    ]
    if not wrong:
        return None
    return (
        f"the schedule checkpoint as of seq {state.next_seq} disagrees with the log on "
        + " and ".join(wrong)
    )


def read_schedule_states(
    conn: Any, session_ids: Sequence[str], mark: str, *, checkpoints: bool
) -> dict[str, tuple[SessionProjection, str | None]]:
    """The projections of those of ``session_ids`` that are stored, each with what is wrong
    with its checkpoint: two statements on ``conn`` (run them in one snapshot)."""
    if not session_ids:
        return {}
    sql = head_sql(mark, len(session_ids), checkpoints=checkpoints)
    heads: dict[str, SessionHead] = {}
    for row in conn.execute(sql, tuple(session_ids)).fetchall():
        if isinstance(row[0], str):
            heads[row[0]] = session_head(tuple(row)[1:])
    if not heads:
        return {}
    resumed = {session_id: resume_state(head) for session_id, head in heads.items()}
    pairs = [
        value
        for session_id, (state, _) in resumed.items()
        for value in (session_id, tail_start(heads[session_id], state))
    ]
    tails: dict[str, list[StoredRow]] = {}
    rows = conn.execute(tail_sql(mark, len(heads)), (*pairs, *WAKE_EVENT_TYPES)).fetchall()
    for row in rows:
        tails.setdefault(row[0], []).append(_blob(tuple(row)[1:]))
    return {
        session_id: (finish_state(heads[session_id], state, tails.get(session_id, ())), problem)
        for session_id, (state, problem) in resumed.items()
    }
