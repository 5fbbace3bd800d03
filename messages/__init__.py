"""Pure values of dsh-tool-schedule: the durable protocol and the actors' message types.

Stdlib only, no I/O, no clocks: the ``schedule/change`` protocol (decode, fold,
id allocation, record creation, views, framing, presentation), the closed error
codes, and (in :mod:`messages.mailbox`) the mailbox message types of the actors.
"""

from messages.errors import (
    ERROR_CODES,
    ErrorCode,
    ScheduleError,
    ScheduleInputError,
    ScheduleLogError,
)
from messages.fold import (
    EventLike,
    FoldedSchedules,
    allocate_schedule_id,
    apply_schedule_change,
    check_schedule_candidate,
    continue_fold,
    fold_schedule_events,
    validate_schedule_stream,
)
from messages.instant import MAX_INSTANT_MS, MIN_INSTANT_MS, format_instant, parse_instant
from messages.numbers import MAX_SAFE_INTEGER, json_integer
from messages.presentation import (
    REMINDER_SOURCE,
    render_reminder_framing,
    schedule_reminder_presentation,
)
from messages.records import (
    PROTOCOL_VERSION,
    SCHEDULE_CHANGE_TYPE,
    CreateChange,
    DeleteChange,
    DispatchChange,
    ScheduleChange,
    ScheduleRecord,
    create_after_schedule_record,
    decode_schedule_change,
    encode_schedule_change,
)
from messages.text import (
    ECMASCRIPT_WHITESPACE,
    canonical_json,
    ecma_trim,
    has_lone_surrogate,
    is_ecma_trimmed,
    js_json_string,
)
from messages.views import DELIVERY_MODE, schedule_view

from messages import mailbox  # isort: skip  (last: it may import the values above)

__all__ = [
    "DELIVERY_MODE",
    "ECMASCRIPT_WHITESPACE",
    "ERROR_CODES",
    "MAX_INSTANT_MS",
    "MAX_SAFE_INTEGER",
    "MIN_INSTANT_MS",
    "PROTOCOL_VERSION",
    "REMINDER_SOURCE",
    "SCHEDULE_CHANGE_TYPE",
    "CreateChange",
    "DeleteChange",
    "DispatchChange",
    "ErrorCode",
    "EventLike",
    "FoldedSchedules",
    "ScheduleChange",
    "ScheduleError",
    "ScheduleInputError",
    "ScheduleLogError",
    "ScheduleRecord",
    "allocate_schedule_id",
    "apply_schedule_change",
    "canonical_json",
    "check_schedule_candidate",
    "continue_fold",
    "create_after_schedule_record",
    "decode_schedule_change",
    "ecma_trim",
    "encode_schedule_change",
    "fold_schedule_events",
    "format_instant",
    "has_lone_surrogate",
    "is_ecma_trimmed",
    "js_json_string",
    "json_integer",
    "mailbox",
    "parse_instant",
    "render_reminder_framing",
    "schedule_reminder_presentation",
    "schedule_view",
    "validate_schedule_stream",
]
