"""``dsh-schedule verify``: run the Schedule stream check over every stored session.

It also compares every column of each session's due index row (the store's
projection of its log, see :mod:`host_bridge.embedded.stores`) with what the
log says, and the session's schedule checkpoint with the fold of the log before
it, read in the same snapshot, and reports index rows of sessions that are not
stored. A damaged row is its session's problem, never the whole store's. When
the store's index was computed with other zone data than installed, a session
with a ``cron`` record whose row differs only in its reminder target gets a
note instead: new zone rules move cron targets, which is no corruption.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from host_bridge.cli._common import (
    EXIT_FAILED,
    READ_STORE_EXIT,
    StoreUnavailable,
    exit_codes_help,
    location_options,
    open_store_readonly,
    resolve_data_dir,
    visible,
)
from host_bridge.embedded.stores import (
    DueEntry,
    IndexRow,
    StoreCorruptError,
    StoreError,
    StoreReader,
    ZoneDataCheck,
    checkpoint_problem,
    index_problem,
    project_session,
)
from messages import (
    SCHEDULE_CHANGE_TYPE,
    CronRecord,
    FoldedSchedules,
    ScheduleLogError,
    validate_schedule_stream,
)

__all__ = ["REFRESH_HINT", "REINDEX_HINT", "SessionVerdict", "verify_command", "verify_session"]

REINDEX_HINT = "dsh-schedule reindex rebuilds the index"
"""What ends the line of a session whose due index row or schedule checkpoint is wrong."""

REFRESH_HINT = "a writing host or dsh-schedule reindex refreshes it"
"""What ends the note of a session whose due index row other zone data explains."""


@dataclass(frozen=True)
class SessionVerdict:
    """The outcome of checking one stored session: ``problem`` is ``None`` when it is valid.

    ``note`` says what is stale but no problem: a due index row computed with other
    zone data than installed.
    """

    session_id: str
    events: int = 0
    changes: int = 0
    active: int = 0
    problem: str | None = None
    note: str | None = None


def verify_session(
    store: StoreReader, session_id: str, zone_data: ZoneDataCheck | None = None
) -> SessionVerdict:
    """Load one session, apply the fold policy to its owned suffix, check its due index row
    and its schedule checkpoint.

    Rows of this session that do not read (a bad payload, a gap in its seq
    numbers, an index row of text) are its problem; any other store error (a
    damaged file, an I/O error) is raised: the store itself cannot be read. A
    store written before the due index existed has no row to compare; a session
    without a checkpoint is fine (reads fold its log). ``zone_data`` is the
    store's (read from it when not given): when the index was computed with
    other zone data, a row of a session with an active ``cron`` record that
    differs from the log only in its reminder target is a note, not a problem.
    """
    try:
        stored, indexed, checkpoint = store.load_checked(session_id)
    except StoreCorruptError as error:
        if error.session_id is None:
            raise
        return SessionVerdict(session_id, problem=f"store: {error}")
    if stored is None:
        return SessionVerdict(session_id, problem="store: the session disappeared while checking")
    events = stored.events
    changes = sum(1 for event in events if event.type == SCHEDULE_CHANGE_TYPE)
    try:
        folded = validate_schedule_stream(events, stored.header.seed_length)
    except ScheduleLogError as error:
        return SessionVerdict(session_id, len(events), changes, problem=error.message)
    expected = project_session(
        stored.header.seed_length, ((e.seq, e.type, e.time, e.data) for e in events)
    ).entry()
    index = index_problem(indexed, expected) if store.has_due_index else None
    note = None
    if index is not None and _zone_data_explains(indexed, expected, folded):
        check = zone_data if zone_data is not None else store.zone_data_check()
        if check.changed:
            note = (
                f"due index computed with zone data {check.recorded_text}, installed "
                f"{check.installed} ({index}); {REFRESH_HINT}"
            )
            index = None
    problems = [index, checkpoint_problem(checkpoint, stored.header.seed_length, events)]
    found = [problem for problem in problems if problem is not None]
    return SessionVerdict(
        session_id,
        len(events),
        changes,
        len(folded.active),
        problem=f"{'; '.join(found)} ({REINDEX_HINT})" if found else None,
        note=note,
    )


def _zone_data_explains(
    row: IndexRow | None, expected: DueEntry | None, folded: FoldedSchedules
) -> bool:
    """Whether other zone data can explain how ``row`` disagrees with ``expected``.

    Zone rules move only ``cron`` targets, so: the row exists and is sound, only its
    reminder target differs, a ``cron`` record is active, and the row's target is no
    later than the earliest target of the other records (which no zone data moves).
    """
    if row is None or row.defect() is not None or expected is None:
        return False
    stored = row.entry()
    if stored is None or stored.inbox_ms != expected.inbox_ms or stored.schedule_ms is None:
        return False
    others = [r.target_ms for r in folded.active if not isinstance(r, CronRecord)]
    if others and stored.schedule_ms > min(others):
        return False
    return len(others) < len(folded.active)


@click.command(
    "verify",
    short_help="Check the schedule/change stream of every session.",
    epilog=exit_codes_help(
        (0, "every stored session is valid (or none is stored)"),
        (
            1,
            "at least one session is invalid: its stream breaks a rule, its rows are unreadable, "
            "or its due index row is missing, unreadable or disagrees with its log (a row of a "
            "session that is not stored counts too; a cron session's reminder target computed "
            "with other zone data is only a note)",
        ),
        (2, READ_STORE_EXIT),
    ),
)
@location_options
def verify_command() -> None:
    """Check the schedule/change stream of every stored session.

    Each session's owned suffix (after a fork's seed_length) is folded with the
    same policy the plugin and the invariant companion use, and its due index
    row (when the session is due, kept by the store for `serve`) is compared
    with what the log says, column by column: due_ms, schedule_ms and inbox_ms
    must be integers equal to the log's (due_ms the earlier of the other two),
    a session with nothing due must have no row and a due one must have one;
    its schedule checkpoint, when it has one, must decode and equal the fold of
    the log before it (`dsh-schedule reindex` rebuilds both). When the store's
    index was computed with other zone data (tzdata) than installed, a
    session with a cron reminder whose row differs only in its reminder target
    is valid and gets a `note` line instead: a writing host or `dsh-schedule
    reindex` refreshes the index. The store is
    opened strictly read-only (nothing is created, migrated, locked or
    written), so it works while another process writes to it. Prints one line per
    session; an invalid one is listed as `SESSION-ID: RULE`. Exits 1 when any
    session is invalid. Session ids and problems are printed with control,
    format and separator characters escaped, so each session is one line.
    """
    directory = resolve_data_dir()
    with open_store_readonly(directory, verb="verify") as store:
        click.echo(f"store: {visible(store.label)}")
        try:
            session_ids = store.session_ids()
            zone_data = store.zone_data_check()
            verdicts = [verify_session(store, session_id, zone_data) for session_id in session_ids]
            stored_ids = set(session_ids)
            orphans = sorted(s for s in store.index_rows() if s not in stored_ids)
        except StoreError as error:
            raise StoreUnavailable(str(error)) from None
    verdicts += [
        SessionVerdict(
            s,
            problem="the due index has a row for this session, which is not stored "
            f"({REINDEX_HINT})",
        )
        for s in orphans
    ]
    invalid = [v for v in verdicts if v.problem is not None]
    for verdict in verdicts:
        if verdict.problem is None:
            click.echo(
                f"ok       {visible(verdict.session_id)} ({verdict.events} events, "
                f"{verdict.changes} schedule changes, {verdict.active} active)"
            )
        else:
            click.echo(f"INVALID  {visible(verdict.session_id)}: {visible(verdict.problem)}")
        if verdict.note is not None:
            click.echo(f"note     {visible(verdict.session_id)}: {visible(verdict.note)}")
    if not verdicts:
        click.echo("no stored sessions")
    elif not invalid:
        click.echo(f"all {len(verdicts)} session(s) valid")
    else:
        click.echo(f"{len(invalid)} of {len(verdicts)} session(s) invalid", err=True)
        click.get_current_context().exit(EXIT_FAILED)
