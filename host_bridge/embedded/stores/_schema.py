"""The SQL both backends share, written once over a placeholder mark and column types.

The tables, the schema version check and migration loop, a round's rows with
their due index rows, and the index rebuilds; each backend runs them on its own connection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from host_bridge.embedded.stores._checkpoints import (
    build_checkpoints,
    checkpoint_table,
    read_session_state,
    write_checkpoints,
)
from host_bridge.embedded.stores._due import (
    WAKE_EVENT_TYPES,
    DueEntry,
    project_logs,
    project_session,
    write_due_changes,
)
from host_bridge.embedded.stores._errors import StoreCorruptError, StoreVersionError
from host_bridge.embedded.stores._reads import read_due_state
from host_bridge.embedded.stores._recorder import SideWrite, Stage
from host_bridge.embedded.stores._rows import EventRow, Op, SessionRow

__all__ = [
    "Migration",
    "build_checkpoints",
    "build_due_index",
    "checkpoint_table",
    "core_tables",
    "due_index_tables",
    "migrate",
    "read_version",
    "rewrite_index_row",
    "write_rows",
]

_C = TypeVar("_C")

Migration = str | Callable[[_C], None]
"""One migration step: an SQL statement, or a function run on the migrating connection."""


def core_tables(integer: str, blob: str, events_suffix: str = "") -> tuple[str, str, str]:
    """``meta``, ``sessions`` and ``events`` in a backend's column types."""
    return (
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)",
        f"CREATE TABLE sessions( id TEXT PRIMARY KEY, seed_length {integer},"
        f" parent_session TEXT, created_at {integer})",
        f"CREATE TABLE events( session_id TEXT, seq {integer}, type TEXT, time {integer},"
        f" data {blob}, PRIMARY KEY(session_id, seq)){events_suffix}",
    )


def due_index_tables(integer: str) -> tuple[str, str]:
    """The ``due_index`` table and its ``(due_ms, session_id)`` order."""
    return (
        f"CREATE TABLE due_index( session_id TEXT PRIMARY KEY, due_ms {integer} NOT NULL,"
        f" schedule_ms {integer}, inbox_ms {integer})",
        "CREATE INDEX due_index_by_due ON due_index(due_ms, session_id)",
    )


def read_version(
    conn: Any,
    label: str,
    tables: set[str],
    current: int,
    needs: Mapping[int, frozenset[str]],
    *,
    least: int,
) -> int:
    """The schema version in ``meta``: :class:`StoreCorruptError` unless a number of at least
    ``least`` with its tables (``needs``); :class:`StoreVersionError` above ``current``."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    value = None if row is None else row[0]
    if not (
        isinstance(value, str)
        and value.isascii()
        and value.isdigit()
        and len(value) <= 9  # (an absurd length is no version; int() would refuse it too)
        and int(value) >= least
    ):
        raise StoreCorruptError(f"{label} has no valid schema_version")
    version = int(value)
    if version > current:
        raise StoreVersionError(
            f"{label} has schema version {version}, newer than the {current} understood "
            "by this version of dsh-schedule; upgrade dsh-schedule to open it"
        )
    if not tables >= needs.get(version, frozenset()):
        raise StoreCorruptError(f"{label} is missing session tables")
    return version


def migrate(
    conn: _C,
    version: int,
    target: int,
    steps: Mapping[int, Sequence[Migration[_C]]],
    set_version: str,
) -> int:
    """Run ``steps`` from ``version`` up to ``target`` on ``conn``, noting each version reached."""
    while version < target:
        for step in steps[version]:
            if isinstance(step, str):
                conn.execute(step)  # type: ignore[attr-defined]
            else:
                step(conn)
        version += 1
        conn.execute(set_version, (str(version),))  # type: ignore[attr-defined]
    return version


def write_rows(
    cur: Any, rows: Sequence[Op], stage: Stage, mark: str, side: Sequence[SideWrite] = ()
) -> None:
    """Insert the ``sessions`` and ``events`` rows of ``rows`` on ``cur``, then run ``side``,
    then write the due index rows and schedule checkpoints ``stage`` plans for them (in the
    caller's transaction)."""
    sessions = [
        (op.session_id, op.seed_length, op.parent_session, op.created_at)
        for op in rows
        if isinstance(op, SessionRow)
    ]
    if sessions:
        cur.executemany(
            "INSERT INTO sessions(id, seed_length, parent_session, created_at)"
            f" VALUES ({mark}, {mark}, {mark}, {mark})",
            sessions,
        )
    events = [
        (op.session_id, op.seq, op.type, op.time, op.payload)
        for op in rows
        if isinstance(op, EventRow)
    ]
    if events:
        cur.executemany(
            "INSERT INTO events(session_id, seq, type, time, data)"
            f" VALUES ({mark}, {mark}, {mark}, {mark}, {mark})",
            events,
        )
    for statement, params in side:
        cur.execute(statement, params)
    plan = stage(rows, lambda sid: read_session_state(cur, sid, mark))
    write_due_changes(cur, plan.changes, mark)
    write_checkpoints(cur, plan.checkpoints, mark)


def build_due_index(select: Any, insert: Any, mark: str) -> None:
    """Fill ``due_index`` from the stored logs: read on cursor ``select``, written on ``insert``."""
    marks = ", ".join(mark for _ in WAKE_EVENT_TYPES)
    select.execute(
        "SELECT e.session_id, s.seed_length, e.seq, e.type, e.time, e.data"
        " FROM events e JOIN sessions s ON s.id = e.session_id"
        f" WHERE e.type IN ({marks}) ORDER BY e.session_id, e.seq",
        WAKE_EVENT_TYPES,
    )
    logs = ((*row[:5], bytes(r) if isinstance(r := row[5], memoryview) else r) for row in select)
    write_due_changes(insert, dict(project_logs(logs)), mark)


def rewrite_index_row(cur: Any, session_id: str, mark: str) -> DueEntry | None:
    """Rewrite one session's index row and schedule checkpoint from its whole log on ``cur``
    (in the caller's transaction); the index row written."""
    stored = read_due_state(cur, session_id, mark)
    if stored is None:
        write_due_changes(cur, {session_id: None}, mark)
        write_checkpoints(cur, {session_id: None}, mark)
        return None
    state = project_session(stored[0], stored[2])
    state.next_seq = stored[1]
    entry = state.entry()
    write_due_changes(cur, {session_id: entry}, mark)
    write_checkpoints(cur, {session_id: state}, mark)
    return entry
