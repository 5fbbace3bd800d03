"""``dsh-schedule inspect``: active reminders and every dispatch with its receipt."""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from typing import Any

import click

from actors._contract import SessionEvent, wall_clock_ms
from host_bridge.cli._common import (
    EXIT_FAILED,
    READ_STORE_EXIT,
    StoreUnavailable,
    exit_codes_help,
    format_ms,
    location_options,
    open_store_readonly,
    resolve_data_dir,
    safe_json,
    show_text,
    visible,
)
from host_bridge.embedded.stores import StoreCorruptError, StoreError, StoreReader
from messages import (
    SCHEDULE_CHANGE_TYPE,
    ScheduleLogError,
    fold_schedule_events,
    schedule_reminder_presentation,
    schedule_view,
)
from messages._cron import parse_cron_expression
from messages._instant import parse_instant
from messages._records import REPEATING_KINDS, CronRecord
from messages._views import DELIVERY_MODE
from messages._zones import load_time_zone

__all__ = ["NEXT_OCCURRENCES", "cron_occurrences", "describe_session", "inspect_command"]

NEXT_OCCURRENCES = 3
"""How many occurrences of a ``cron`` reminder inspect shows: its target, then the rule's next."""

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_REPEATING = frozenset(kind.kind for kind in REPEATING_KINDS)


def _dispatch_seqs(events: Sequence[SessionEvent]) -> list[int]:
    return [
        event.seq
        for event in events
        if event.type == SCHEDULE_CHANGE_TYPE
        and isinstance(event.data, dict)
        and event.data.get("operation") == "dispatch"
    ]


def describe_session(store: StoreReader, session_id: str, now_ms: int) -> dict[str, Any]:
    """One session as a JSON-ready value: header, active reminders, dispatch receipts, error.

    Active reminders are their tool views; a repeating (``every`` or ``cron``)
    view also carries ``lastOccurrenceAt``, the occurrence its latest dispatch
    delivered (from that dispatch's receipt; ``None`` before the first). A
    ``cron`` view also carries ``description`` (the rule in plain words) and
    ``nextOccurrences`` (see :func:`cron_occurrences`). A receipt of a repeating
    dispatch also carries the dispatch's ``acceptedAt``. Rows of this session
    that do not read are its ``error``; any other store error is raised.
    """
    out: dict[str, Any] = {
        "id": session_id,
        "parentSession": None,
        "seedLength": None,
        "eventCount": None,
        "active": [],
        "dispatches": [],
        "error": None,
    }
    try:
        stored = store.load(session_id)
    except StoreCorruptError as error:
        if error.session_id is None:
            raise  # the store itself is damaged, not this session
        out["error"] = f"store: {error}"
        return out
    if stored is None:
        out["error"] = "store: the session is not stored"
        return out
    header, events = stored.header, stored.events
    seed = header.seed_length or 0
    out.update(
        parentSession=header.parent_session, seedLength=header.seed_length, eventCount=len(events)
    )
    try:
        folded = fold_schedule_events(events, seed)
        last_occurrence: dict[str, str] = {}  # of the session's own dispatches, by id
        for seq in _dispatch_seqs(events):
            receipt = schedule_reminder_presentation(events, seq, seed)
            if receipt is None:  # pragma: no cover - _dispatch_seqs picked a dispatch
                continue
            accepted = events[seq].data.get("acceptedAt")
            out["dispatches"].append(
                {
                    "seq": seq,
                    "time": format_ms(events[seq].time),
                    "inherited": seq < seed,
                    **receipt,
                    **({"acceptedAt": accepted} if accepted is not None else {}),
                    "deliveryMode": DELIVERY_MODE,
                }
            )
            if seq >= seed:
                last_occurrence[receipt["scheduleId"]] = receipt["occurrenceAt"]
        for record in folded.active:
            view = schedule_view(record, now_ms)
            if isinstance(record, REPEATING_KINDS):
                view["lastOccurrenceAt"] = last_occurrence.get(record.id)
            if isinstance(record, CronRecord):
                view["description"] = parse_cron_expression(record.expression).describe()
                view["nextOccurrences"] = [format_ms(ms) for ms in cron_occurrences(record)]
            out["active"].append(view)
    except ScheduleLogError as error:
        out["error"] = error.message
    return out


def cron_occurrences(record: CronRecord) -> tuple[int, ...]:
    """The next :data:`NEXT_OCCURRENCES` occurrences of ``record`` (epoch ms): its stored
    target first (the occurrence it delivers next), then the rule's occurrences after it.

    Fewer when the rule runs out before 9999-12-31T23:59:59.999Z.
    """
    target = record.target_ms
    return (target, *record.schedule.following(target, NEXT_OCCURRENCES - 1))


def _local(instant: str, zone: str) -> str:
    """A canonical UTC instant as wall-clock time in ``zone``: ``Fri 2026-08-07 09:00 +08:00``."""
    try:
        moment = (_EPOCH + datetime.timedelta(milliseconds=parse_instant(instant))).astimezone(
            load_time_zone(zone)
        )
    except (ValueError, OverflowError):
        return "-"  # past year 9999 in that zone
    offset = moment.strftime("%z")  # ±HHMM, or ±HHMMSS for an offset such as LMT's
    parts = [offset[:3], offset[3:5], *([offset[5:7]] if len(offset) > 5 else [])]
    return moment.strftime("%a %Y-%m-%d %H:%M") + f" {':'.join(parts)}"


def _cron_lines(active: list[dict[str, Any]]) -> list[str]:
    """Each ``cron`` reminder's rule, in words, and its next occurrences in UTC and local time."""
    crons = [v for v in active if v.get("kind") == "cron"]
    if not crons:
        return []
    lines = [
        f"  cron rules (next {NEXT_OCCURRENCES} occurrences: the stored target, then the "
        f"{NEXT_OCCURRENCES - 1} after it; UTC, local):"
    ]
    for view in crons:
        zone = str(view["timeZone"])
        lines.append(
            f"    {visible(view['id'])}: {show_text(str(view['expression']))} in "
            f"{visible(zone)}: {visible(str(view['description']))}"
        )
        lines += [
            f"      {visible(at)}  {visible(_local(at, zone))}" for at in view["nextOccurrences"]
        ]
    return lines


def _table(rows: list[list[str]], indent: str = "    ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (
            indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def _seconds(view: dict[str, Any]) -> str:
    """``after`` delay or ``every`` interval, e.g. ``60s``; ``-`` for ``at``."""
    seconds = view.get("afterSeconds", view.get("everySeconds"))
    return "-" if seconds is None else f"{seconds}s"


def _last_occurrence(view: dict[str, Any]) -> str:
    """For a repeating kind: the occurrence last delivered (``none yet`` before it); else ``-``."""
    if view.get("kind") not in _REPEATING:
        return "-"
    last = view.get("lastOccurrenceAt")
    return "none yet" if last is None else visible(str(last))


def _human(session: dict[str, Any]) -> list[str]:
    """The tables of one session; every stored string is escaped to stay on its line."""
    title = f"session {visible(session['id'])}"
    facts = []
    if session["eventCount"] is not None:
        facts.append(f"{session['eventCount']} events")
    if session["parentSession"] is not None:
        facts.append(f"fork of {visible(session['parentSession'])} at {session['seedLength']}")
    lines = [title + (f" ({', '.join(facts)})" if facts else "")]
    if session["error"] is not None:
        lines.append(f"  ERROR: {visible(session['error'])}")
    active, dispatches = session["active"], session["dispatches"]
    if active:
        lines.append("  active reminders:")
        rows = [["ID", "KIND", "STATE", "NEXT (UTC)", "SECONDS", "LAST OCCURRENCE", "PROMPT"]]
        rows += [
            [
                visible(v["id"]),
                visible(str(v["kind"])),
                v["state"],
                visible(v["scheduledAt"]),
                _seconds(v),
                _last_occurrence(v),
                show_text(v["prompt"]),
            ]
            for v in active
        ]
        lines += _table(rows)
        lines += _cron_lines(active)
    elif session["error"] is None:
        lines.append("  active reminders: none")
    if dispatches:
        lines.append("  dispatches (receipts):")
        rows = [["SEQ", "DISPATCHED (UTC)", "ID", "OCCURRENCE (UTC)", "MODE", "PROMPT"]]
        rows += [
            [
                str(d["seq"]) + (" (inherited)" if d["inherited"] else ""),
                d["time"],
                visible(d["scheduleId"]),
                visible(d["occurrenceAt"]),
                d["deliveryMode"],
                show_text(d["prompt"]),
            ]
            for d in dispatches
        ]
        lines += _table(rows)
    elif session["error"] is None:
        lines.append("  dispatches: none")
    return lines


@click.command(
    "inspect",
    short_help="Active reminders and every dispatch receipt.",
    epilog=exit_codes_help(
        (0, "every listed session was read and folded"),
        (1, "a session's rows are unreadable or its schedule/change stream is corrupt"),
        (2, READ_STORE_EXIT + ", or --session names no stored session"),
    ),
)
@click.option(
    "--session",
    "session_id",
    metavar="ID",
    default=None,
    help="Only this session (default: every stored session).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of tables.")
@location_options
def inspect_command(session_id: str | None, as_json: bool) -> None:
    """Show active reminders (with state) and every dispatch with its receipt.

    Each active reminder shows its kind (after, at, every or cron), its next
    due time and, for a repeating (every or cron) reminder, the occurrence its
    latest dispatch delivered; a cron reminder also its rule in plain words and
    its next three occurrences (its target, then the two after it) in UTC and
    in its time zone. The store is opened strictly read-only: nothing is
    created, migrated, locked or written, so it works on a read-only store,
    on one of an older schema, and while another process writes to it. States
    are computed against the wall clock:
    `overdue` means due but not yet delivered (its session is not live). Each
    dispatch is rendered with schedule_reminder_presentation. Exits 1 when a
    session's log cannot be read or folded. Stored strings are printed with
    control, format and separator characters escaped (in --json too, as
    \\uXXXX escapes of the same JSON value).
    """
    directory = resolve_data_dir()
    now = wall_clock_ms()
    with open_store_readonly(directory, verb="inspect") as store:
        try:
            if session_id is not None:
                if store.load_header(session_id) is None:
                    raise StoreUnavailable(f"no stored session {session_id!r} in {store.label}")
                session_ids = [session_id]
            else:
                session_ids = store.session_ids()
            sessions = [describe_session(store, sid, now) for sid in session_ids]
        except StoreError as error:
            raise StoreUnavailable(str(error)) from None
        path = store.label
    if as_json:
        document = {"store": str(path), "now": format_ms(now), "sessions": sessions}
        click.echo(safe_json(json.dumps(document, indent=2, ensure_ascii=False)))
    else:
        click.echo(f"store: {visible(str(path))}")
        click.echo(f"now:   {format_ms(now)}")
        if not sessions:
            click.echo("no stored sessions")
        for session in sessions:
            click.echo("")
            for line in _human(session):
                click.echo(line)
    failed = sum(1 for session in sessions if session["error"] is not None)
    if failed:
        click.echo(f"{failed} of {len(sessions)} session(s) could not be read or folded", err=True)
        click.get_current_context().exit(EXIT_FAILED)
