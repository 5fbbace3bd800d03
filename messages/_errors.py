"""The closed error codes and the exceptions of the durable protocol."""

from __future__ import annotations

import enum

__all__ = [
    "ERROR_CODES",
    "ErrorCode",
    "ScheduleError",
    "ScheduleInputError",
    "ScheduleLogError",
]


class ErrorCode(enum.StrEnum):
    """A closed domain error code; its value is the wire string.

    The first seven are the codes of the ``after``-only protocol; the last three
    came with absolute (``at``) and fixed-rate (``every``) reminders.
    """

    INVALID_PROMPT = "invalid_prompt"
    INVALID_SELECTOR = "invalid_selector"
    INVALID_RULE = "invalid_rule"
    TIME_OUT_OF_RANGE = "time_out_of_range"
    CORRUPT_SCHEDULE_LOG = "corrupt_schedule_log"
    PERSISTENCE_UNCERTAIN = "persistence_uncertain"
    INTERNAL_ERROR = "internal_error"
    INVALID_TIME_ZONE = "invalid_time_zone"
    NOT_FUTURE = "not_future"
    FREQUENCY_TOO_HIGH = "frequency_too_high"


ERROR_CODES: tuple[str, ...] = tuple(code.value for code in ErrorCode)
"""Every error code string, in declaration order (the seven ``after``-only codes first)."""


class ScheduleError(Exception):
    """A domain failure carrying one closed error ``code`` and a fixed ``message``."""

    code: ErrorCode
    message: str

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message

    def __reduce__(self) -> tuple[object, ...]:
        return (ScheduleError, (self.code, self.message))


class ScheduleLogError(ScheduleError):
    """The log (or a candidate for it) breaks a protocol rule; code ``corrupt_schedule_log``."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.CORRUPT_SCHEDULE_LOG, message)

    def __reduce__(self) -> tuple[object, ...]:
        return (ScheduleLogError, (self.message,))


class ScheduleInputError(ScheduleError):
    """A tool input was rejected with the given closed error ``code``."""

    def __reduce__(self) -> tuple[object, ...]:
        return (ScheduleInputError, (self.code, self.message))
