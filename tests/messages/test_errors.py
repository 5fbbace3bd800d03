"""The closed error codes and the protocol exceptions."""

from __future__ import annotations

import pickle
from typing import get_args

import pytest

from messages import (
    ERROR_CODES,
    ErrorCode,
    ScheduleError,
    ScheduleInputError,
    ScheduleLogError,
)
from messages._tool_values import ErrorSituation, ToolError


def test_error_codes_are_the_closed_set_in_order() -> None:
    assert ERROR_CODES == (
        "invalid_prompt",
        "invalid_selector",
        "invalid_rule",
        "time_out_of_range",
        "corrupt_schedule_log",
        "persistence_uncertain",
        "internal_error",
        "invalid_time_zone",
        "not_future",
        "frequency_too_high",
    )
    assert all(type(code) is str for code in ERROR_CODES)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_error_code_is_its_wire_string(code: ErrorCode) -> None:
    assert code == code.value
    assert f"{code}" == code.value
    assert ErrorCode(code.value) is code


def test_log_error_always_carries_corrupt_schedule_log() -> None:
    error = ScheduleLogError("schedule/change: unknown key 'x'")
    assert isinstance(error, ScheduleError)
    assert error.code is ErrorCode.CORRUPT_SCHEDULE_LOG
    assert error.message == "schedule/change: unknown key 'x'"
    assert str(error) == error.message


def test_input_error_carries_its_code() -> None:
    error = ScheduleInputError(ErrorCode.INVALID_RULE, "bad rule")
    assert isinstance(error, ScheduleError)
    assert error.code is ErrorCode.INVALID_RULE
    assert error.message == "bad rule"


def test_input_error_normalises_a_code_string() -> None:
    error = ScheduleInputError("invalid_prompt", "bad")  # type: ignore[arg-type]
    assert error.code is ErrorCode.INVALID_PROMPT


@pytest.mark.parametrize(
    "error",
    [
        ScheduleLogError("broken"),
        ScheduleInputError(ErrorCode.TIME_OUT_OF_RANGE, "late"),
        ScheduleError(ErrorCode.INTERNAL_ERROR, "oops"),
    ],
)
def test_errors_survive_pickling(error: ScheduleError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert (copy.code, copy.message) == (error.code, error.message)


def test_every_error_situation_has_a_fixed_message_and_every_message_a_situation() -> None:
    from messages import _tool_values as tool_values

    situations = set(get_args(ErrorSituation))
    assert situations == set(tool_values._MESSAGES)
    for situation in sorted(situations):
        error = ToolError.of(ErrorCode.INTERNAL_ERROR, situation)
        assert error.message == tool_values._MESSAGES[situation]
        assert "{" not in error.message  # templates belong to persistence_uncertain only
