"""Pure values of dsh-tool-schedule: the durable ``schedule/change`` protocol.

Stdlib (plus the ``tzdata`` package's zone data) only, no clocks. This package
exports what a host or another implementation of the protocol needs: decoding,
encoding and folding a session's ``schedule/change`` events, encoding a fold's
state, id allocation, record creation for ``after``, ``at``, ``every`` and
``cron`` reminders, occurrence arithmetic, views, the reminder framing and its
presentation receipt, and the closed error codes. The rest (the tools' input
and value shapes, the delivery decision, the actors' mailbox messages) lives in
private modules that the ``actors`` and ``host_bridge`` packages import directly.
``__distribution__`` marks it as the package of dsh-tool-schedule (the name is
generic; see :mod:`dsh_schedule`).
"""

__distribution__ = "dsh-tool-schedule"

from messages._checkpoint import decode_schedule_state, encode_schedule_state
from messages._creation import (
    create_after_schedule_record,
    create_at_schedule_record,
    create_cron_schedule_record,
    create_every_schedule_record,
)
from messages._errors import (
    ERROR_CODES,
    ErrorCode,
    ScheduleError,
    ScheduleInputError,
    ScheduleLogError,
)
from messages._fold import (
    EventLike,
    FoldedSchedules,
    allocate_schedule_id,
    fold_schedule_events,
    validate_schedule_stream,
)
from messages._instant import format_instant, parse_instant
from messages._occurrence import resolve_every_occurrence
from messages._presentation import (
    REMINDER_SOURCE,
    PresentedReminder,
    parse_reminder_framing,
    render_reminder_batch_framing,
    render_reminder_framing,
    schedule_reminder_presentation,
)
from messages._records import (
    PROTOCOL_VERSION,
    SCHEDULE_CHANGE_TYPE,
    AfterRecord,
    AtRecord,
    CreateChange,
    CronRecord,
    DeleteChange,
    DispatchChange,
    EveryRecord,
    ScheduleChange,
    ScheduleRecord,
    decode_schedule_change,
    encode_schedule_change,
)
from messages._views import schedule_view
from messages._zones import canonicalize_time_zone

__all__ = [
    "ERROR_CODES",
    "PROTOCOL_VERSION",
    "REMINDER_SOURCE",
    "SCHEDULE_CHANGE_TYPE",
    "AfterRecord",
    "AtRecord",
    "CreateChange",
    "CronRecord",
    "DeleteChange",
    "DispatchChange",
    "ErrorCode",
    "EventLike",
    "EveryRecord",
    "FoldedSchedules",
    "PresentedReminder",
    "ScheduleChange",
    "ScheduleError",
    "ScheduleInputError",
    "ScheduleLogError",
    "ScheduleRecord",
    "allocate_schedule_id",
    "canonicalize_time_zone",
    "create_after_schedule_record",
    "create_at_schedule_record",
    "create_cron_schedule_record",
    "create_every_schedule_record",
    "decode_schedule_change",
    "decode_schedule_state",
    "encode_schedule_change",
    "encode_schedule_state",
    "fold_schedule_events",
    "format_instant",
    "parse_instant",
    "parse_reminder_framing",
    "render_reminder_batch_framing",
    "render_reminder_framing",
    "resolve_every_occurrence",
    "schedule_reminder_presentation",
    "schedule_view",
    "validate_schedule_stream",
]
