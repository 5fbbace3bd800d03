"""Pure values of dsh-tool-schedule: the durable protocol and the actors' message types.

Stdlib (plus the ``tzdata`` package's zone data) only, no clocks: the
``schedule/change`` protocol (decode, fold, id allocation, record creation for
``after``, ``at`` and ``every`` reminders, occurrence arithmetic, views, framing,
presentation, the delivery decision), the closed error codes, and (in
:mod:`messages.mailbox`) the mailbox message types of the actors.
"""

from messages.absolute import LOCAL_AT_KEYS, resolve_at
from messages.creation import (
    CREATE_ARGUMENT_KEYS,
    SELECTOR_KEYS,
    SelectorKey,
    check_after_seconds,
    check_every_seconds,
    create_after_schedule_record,
    create_at_schedule_record,
    create_every_schedule_record,
    create_selector,
)
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
from messages.occurrence import resolve_every_occurrence
from messages.presentation import (
    REMINDER_BATCH_HEADER,
    REMINDER_HEADER,
    REMINDER_SOURCE,
    PresentedReminder,
    parse_reminder_framing,
    render_reminder_batch_framing,
    render_reminder_framing,
    schedule_reminder_presentation,
)
from messages.records import (
    MAX_EVERY_SECONDS,
    MIN_EVERY_SECONDS,
    PROTOCOL_VERSION,
    SCHEDULE_CHANGE_TYPE,
    AfterRecord,
    AtRecord,
    CreateChange,
    DeleteChange,
    DispatchChange,
    EveryRecord,
    OneShotRecord,
    ScheduleChange,
    ScheduleKind,
    ScheduleRecord,
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
from messages.zones import canonicalize_time_zone

from messages import mailbox  # isort: skip  (last: it may import the values above)

__all__ = [
    "CREATE_ARGUMENT_KEYS",
    "DELIVERY_MODE",
    "ECMASCRIPT_WHITESPACE",
    "ERROR_CODES",
    "LOCAL_AT_KEYS",
    "MAX_EVERY_SECONDS",
    "MAX_INSTANT_MS",
    "MAX_SAFE_INTEGER",
    "MIN_EVERY_SECONDS",
    "MIN_INSTANT_MS",
    "PROTOCOL_VERSION",
    "REMINDER_BATCH_HEADER",
    "REMINDER_HEADER",
    "REMINDER_SOURCE",
    "SCHEDULE_CHANGE_TYPE",
    "SELECTOR_KEYS",
    "AfterRecord",
    "AtRecord",
    "CreateChange",
    "DeleteChange",
    "DispatchChange",
    "ErrorCode",
    "EventLike",
    "EveryRecord",
    "FoldedSchedules",
    "OneShotRecord",
    "PresentedReminder",
    "ScheduleChange",
    "ScheduleError",
    "ScheduleInputError",
    "ScheduleKind",
    "ScheduleLogError",
    "ScheduleRecord",
    "SelectorKey",
    "allocate_schedule_id",
    "apply_schedule_change",
    "canonical_json",
    "canonicalize_time_zone",
    "check_after_seconds",
    "check_every_seconds",
    "check_schedule_candidate",
    "continue_fold",
    "create_after_schedule_record",
    "create_at_schedule_record",
    "create_every_schedule_record",
    "create_selector",
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
    "parse_reminder_framing",
    "render_reminder_batch_framing",
    "render_reminder_framing",
    "resolve_at",
    "resolve_every_occurrence",
    "schedule_reminder_presentation",
    "schedule_view",
    "validate_schedule_stream",
]
