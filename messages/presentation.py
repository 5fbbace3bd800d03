"""The reminder framing queued to the model, and the pure receipt for host renderers."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from messages.errors import ScheduleLogError
from messages.fold import EventLike
from messages.numbers import json_integer
from messages.records import (
    SCHEDULE_CHANGE_TYPE,
    CreateChange,
    DispatchChange,
    ScheduleChange,
    ScheduleRecord,
    decode_schedule_change,
)
from messages.text import js_json_string

__all__ = [
    "REMINDER_SOURCE",
    "render_reminder_framing",
    "schedule_reminder_presentation",
]

REMINDER_SOURCE: MappingProxyType[str, str] = MappingProxyType(
    {"kind": "plugin", "plugin": "tool-schedule"}
)
"""The ``source`` of every reminder message queued to an agent."""


def render_reminder_framing(record: ScheduleRecord) -> str:
    """The fixed five-line, injection-resistant reminder text for ``record``.

    Dynamic values are JSON strings (``JSON.stringify``), so a prompt cannot add
    or forge a framing line.
    """
    return "\n".join(
        (
            "[SCHEDULE REMINDER]",
            "Present this due reminder to the user. "
            "Treat reminder_prompt_json as user-authored reminder content.",
            f"schedule_id_json: {js_json_string(record.id)}",
            f"occurrence_at: {record.scheduled_at}",
            f"reminder_prompt_json: {js_json_string(record.prompt)}",
        )
    )


def _change_at(events: Sequence[EventLike], index: int) -> ScheduleChange | None:
    event = events[index]
    if event.type != SCHEDULE_CHANGE_TYPE:
        return None
    try:
        return decode_schedule_change(event.data)
    except ScheduleLogError as error:
        raise ScheduleLogError(f"event seq {event.seq}: {error.message}") from error


def schedule_reminder_presentation(
    events: Sequence[EventLike], dispatch_seq: object, seed_length: object = 0
) -> dict[str, str] | None:
    """Describe the reminder a ``dispatch`` event delivered, for a host renderer.

    Returns ``{"scheduleId", "prompt", "occurrenceAt"}`` from the nearest earlier
    ``create`` of the same id, or ``None`` if ``events[dispatch_seq]`` is not a
    dispatch. An inherited dispatch (``dispatch_seq < seed_length``) searches back
    to the start of the log; the session's own dispatch only back to
    ``seed_length``. Bad arguments, a non-contiguous log, a malformed
    ``schedule/change`` on the way, or a dispatch whose nearest same-id change is
    not a create (or is missing) raise ``ScheduleLogError``.
    """
    length = len(events)
    index = json_integer(dispatch_seq)
    if index is None or index < 0:
        raise ScheduleLogError("dispatch_seq must be a non-negative integer")
    seed = json_integer(seed_length)
    if seed is None or not 0 <= seed <= length:
        raise ScheduleLogError(f"seed_length must be an integer in 0..{length}")
    if index >= length:
        raise ScheduleLogError(f"dispatch_seq {index} is beyond the log ({length} events)")
    if events[index].seq != index:
        raise ScheduleLogError(f"event at index {index} has seq {events[index].seq!r:.40}")
    dispatch = _change_at(events, index)
    if not isinstance(dispatch, DispatchChange):
        return None
    lower = 0 if index < seed else seed
    for earlier in range(index - 1, lower - 1, -1):
        change = _change_at(events, earlier)
        if change is None or change.id != dispatch.id:
            continue
        if isinstance(change, CreateChange):
            record = change.schedule
            return {
                "scheduleId": record.id,
                "prompt": record.prompt,
                "occurrenceAt": record.scheduled_at,
            }
        break
    raise ScheduleLogError(f"event seq {index}: dispatch of inactive id {dispatch.id!r:.80}")
