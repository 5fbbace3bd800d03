"""The three tools through the host's tool registry: validation, every error code, recovery."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import pytest
from pytest_mock import MockerFixture

from actors._runtime import Runtime
from host_bridge._plugin import install_schedule
from host_bridge._schemas import tool_specs
from host_bridge._tools import _ToolReply, present_value
from host_bridge.protocols import ToolResult
from host_bridge.testing import PENDING, FakeHost
from messages._instant import MAX_INSTANT_MS
from tests.owner.helpers import Tools, error
from tests.schema_check import checked

SAFE = 2**53 - 1


# --- validation before the queue --------------------------------------------------------

NOT_OBJECTS = [None, [], ["prompt"], "x", 3, 1.5, True]


@pytest.mark.parametrize("name", ["schedule_create", "schedule_list", "schedule_delete"])
@pytest.mark.parametrize("arguments", NOT_OBJECTS)
def test_non_object_arguments_are_invalid_selector(tools: Tools, name: str, arguments: Any) -> None:
    flushes = tools.host.sessions.flush_count
    error("invalid_selector", tools.call(name, arguments))
    assert tools.host.sessions.flush_count == flushes


@pytest.mark.parametrize(
    "arguments",
    [
        {"prompt": "x", "after_seconds": 5, "at": "2030-01-01T00:00:00.000Z"},
        {"prompt": "x", "after_seconds": 5, "every_seconds": 60},
        {"prompt": "x", "after_seconds": 5, "cron": "* * * * *"},
        {"prompt": "x", "after_seconds": 5, "time_zone": "UTC"},
        {"prompt": "x", "at": "2030-01-01T00:00:00.000Z", "every_seconds": 300},
        {"prompt": "x", "every_seconds": 300, "cron": {"expression": "@daily", "time_zone": "UTC"}},
        {"prompt": "x", "time_zone": "UTC", "at": "2030-01-01T00:00:00Z"},
        {"prompt": "x", "cron": {"expression": "@daily", "time_zone": "UTC"}, "time_zone": "UTC"},
        {"prompt": "x"},
        {},
        {"after_seconds": 5, "afterSeconds": 5, "prompt": "x"},
    ],
)
def test_unsupported_selectors_are_rejected_without_flush(tools: Tools, arguments: Any) -> None:
    flushes = tools.host.sessions.flush_count
    error("invalid_selector", tools.call("schedule_create", arguments))
    assert tools.host.sessions.flush_count == flushes


@pytest.mark.parametrize("prompt", [None, 5, "", "   ", "\u3000\ufeff", "\ud800", ["x"], False])
def test_bad_prompts_are_invalid_prompt(tools: Tools, prompt: Any) -> None:
    error("invalid_prompt", tools.call("schedule_create", {"prompt": prompt, "after_seconds": 5}))


def test_missing_prompt_is_invalid_prompt(tools: Tools) -> None:
    error("invalid_prompt", tools.call("schedule_create", {"after_seconds": 5}))


@pytest.mark.parametrize(
    "after_seconds", [0, -1, 1.5, True, False, "5", None, math.nan, math.inf, SAFE + 1, [5]]
)
def test_bad_after_seconds_is_invalid_rule(tools: Tools, after_seconds: Any) -> None:
    value = tools.call("schedule_create", {"prompt": "x", "after_seconds": after_seconds})
    error("invalid_rule", value)
    assert tools.host.sessions.flush_count == 1  # only the owner's start-up drive flushed


def test_checks_run_in_order_selector_prompt_rule(tools: Tools) -> None:
    bad_all = {"prompt": "", "after_seconds": 0, "cron": "x"}
    error("invalid_selector", tools.call("schedule_create", bad_all))
    error("invalid_prompt", tools.call("schedule_create", {"prompt": "", "after_seconds": 0}))
    error("invalid_rule", tools.call("schedule_create", {"prompt": "ok", "after_seconds": 0}))


def test_integral_float_after_seconds_is_accepted(tools: Tools) -> None:
    value = tools.call("schedule_create", {"prompt": "x", "after_seconds": 5.0})
    assert value["afterSeconds"] == 5


@pytest.mark.parametrize("schedule_id", [None, 5, "", " schedule-1", "schedule-1\n", "\ufeffs"])
def test_bad_delete_ids_are_invalid_rule(tools: Tools, schedule_id: Any) -> None:
    error("invalid_rule", tools.call("schedule_delete", {"id": schedule_id}))


def test_delete_with_other_selectors_is_invalid_selector(tools: Tools) -> None:
    error("invalid_selector", tools.call("schedule_delete", {"id": "schedule-1", "all": True}))


def test_list_ignores_argument_keys(tools: Tools) -> None:
    assert tools.call("schedule_list", {"anything": 1}) == {"schedules": []}


# --- values ----------------------------------------------------------------------------


def test_create_list_delete_values_are_canonical(tools: Tools) -> None:
    now = tools.host.clock.now()
    created = tools.call("schedule_create", {"prompt": "  stretch  ", "after_seconds": 90})
    assert created == {
        "id": "schedule-1",
        "kind": "after",
        "prompt": "stretch",
        "afterSeconds": 90,
        "scheduledAt": _instant(now + 90_000),
        "state": "scheduled",
        "deliveryMode": "session-local",
    }
    assert list(created) == [
        "id",
        "kind",
        "prompt",
        "afterSeconds",
        "scheduledAt",
        "state",
        "deliveryMode",
    ]
    tools.call("schedule_create", {"prompt": "second", "after_seconds": 10})
    listed = tools.call("schedule_list", {})
    assert [v["id"] for v in listed["schedules"]] == ["schedule-1", "schedule-2"]  # create order
    assert tools.call("schedule_delete", {"id": "schedule-1"}) == {
        "id": "schedule-1",
        "deleted": True,
    }
    assert tools.call("schedule_delete", {"id": "schedule-1"}) == {
        "id": "schedule-1",
        "deleted": False,
        "code": "schedule_not_found",
    }
    assert tools.call("schedule_delete", {"id": "schedule-9"})["code"] == "schedule_not_found"
    # ids are never reused
    assert tools.call("schedule_create", {"prompt": "x", "after_seconds": 5})["id"] == "schedule-3"


def test_same_value_renders_the_same_bytes(tools: Tools) -> None:
    first = tools.host.tools.execute("schedule_list", {}, agent=tools.agent, timeout=5)
    second = tools.host.tools.execute("schedule_list", {"x": 1}, agent=tools.agent, timeout=5)
    assert first.content == second.content == '{"schedules":[]}'


def test_state_is_overdue_exactly_at_the_target(tools: Tools) -> None:
    tools.agent.begin_turn()  # keep the reminder from being delivered
    tools.call("schedule_create", {"prompt": "x", "after_seconds": 1})
    tools.host.clock.advance(999)
    assert tools.call("schedule_list", {})["schedules"][0]["state"] == "scheduled"
    tools.host.clock.advance(1)
    assert tools.call("schedule_list", {})["schedules"][0]["state"] == "overdue"


def test_dispatched_id_is_not_found(tools: Tools) -> None:
    tools.call("schedule_create", {"prompt": "x", "after_seconds": 1})
    tools.host.timers.advance(1000)
    tools.settle()
    assert len(tools.agent.received) == 1
    value = tools.call("schedule_delete", {"id": "schedule-1"})
    assert value == {"id": "schedule-1", "deleted": False, "code": "schedule_not_found"}


def test_time_out_of_range(host: FakeHost, request: pytest.FixtureRequest) -> None:
    host.clock.set(MAX_INSTANT_MS - 1000)  # before install: a start time, not a clock step
    tools: Tools = request.getfixturevalue("tools")
    before = len(tools.agent.session.events)
    error("time_out_of_range", tools.call("schedule_create", {"prompt": "x", "after_seconds": 2}))
    assert len(tools.agent.session.events) == before
    assert tools.call("schedule_create", {"prompt": "x", "after_seconds": 1})["scheduledAt"] == (
        "9999-12-31T23:59:59.999Z"
    )


# --- calendar rules (cron) ----------------------------------------------------------------

WEEKDAYS = {"expression": "0 9 * * mon-fri", "time_zone": "asia/shanghai"}


def test_a_cron_create_answers_its_view_writes_the_record_and_arms_the_first_occurrence(
    tools: Tools,
) -> None:
    created = tools.call("schedule_create", {"prompt": " standup ", "cron": WEEKDAYS})
    assert created == {
        "id": "schedule-1",
        "kind": "cron",
        "prompt": "standup",
        "expression": "0 9 * * MON-FRI",  # canonical text and zone name
        "timeZone": "Asia/Shanghai",
        "scheduledAt": "2026-01-01T01:00:00.000Z",  # 09:00 in Shanghai, on a Thursday
        "state": "scheduled",
        "deliveryMode": "session-local",
    }
    assert list(created) == [
        "id",
        "kind",
        "prompt",
        "expression",
        "timeZone",
        "scheduledAt",
        "state",
        "deliveryMode",
    ]
    (event,) = tools.agent.session.events
    assert event.data["schedule"] == {
        key: created[key]
        for key in ("id", "kind", "prompt", "expression", "timeZone", "scheduledAt")
    }
    assert tools.call("schedule_list", {}) == {"schedules": [created]}
    tools.settle()
    assert tools.host.timers.armed() == [3_600_000]
    tool = tools.host.tools.get("schedule_create", agent=tools.agent)
    assert tool is not None and tool.present is not None
    assert tool.present(created) == (
        "created schedule-1 cron 0 9 * * MON-FRI Asia/Shanghai, "
        "next 2026-01-01T01:00:00.000Z (scheduled)"
    )


@pytest.mark.parametrize(
    ("cron", "code"),
    [
        ("0 9 * * 1-5", "invalid_rule"),  # not an object
        (None, "invalid_rule"),
        ({"expression": "0 9 * * 1-5"}, "invalid_rule"),
        ({**WEEKDAYS, "seconds": 0}, "invalid_rule"),
        ({"expression": "0 9 * *", "time_zone": "UTC"}, "invalid_rule"),
        ({"expression": "0 9 31 4,6 *", "time_zone": "UTC"}, "invalid_rule"),  # never matches
        ({"expression": "0 9 * * 1-5 " + "x" * 128, "time_zone": "UTC"}, "invalid_rule"),
        ({"expression": "0 9 * * 1-5", "time_zone": 8}, "invalid_time_zone"),
        ({"expression": "0 9 * * 1-5", "time_zone": "EST"}, "invalid_time_zone"),
        ({"expression": "0 9 * * 1-5", "time_zone": "Mars/Olympus"}, "invalid_time_zone"),
        ({"expression": "*/4 * * * *", "time_zone": "UTC"}, "frequency_too_high"),
        ({"expression": "0,1 9 * * *", "time_zone": "UTC"}, "frequency_too_high"),
    ],
)
def test_a_refused_cron_is_answered_before_the_queue_and_appends_nothing(
    tools: Tools, cron: Any, code: str
) -> None:
    flushes = tools.host.sessions.flush_count
    error(code, tools.call("schedule_create", {"prompt": "x", "cron": cron}))
    assert tools.host.sessions.flush_count == flushes
    assert tools.agent.session.events == []


PRESENTED: list[tuple[Any, str]] = [
    (
        {
            "id": "schedule-1",
            "kind": "cron",
            "prompt": "standup",
            "expression": "0 9 * * 1-5",
            "timeZone": "Asia/Shanghai",
            "scheduledAt": "2026-08-06T01:00:00.000Z",
            "state": "scheduled",
            "deliveryMode": "session-local",
        },
        "created schedule-1 cron 0 9 * * 1-5 Asia/Shanghai, next 2026-08-06T01:00:00.000Z "
        "(scheduled)",
    ),
    (
        {
            "id": "schedule-2",
            "kind": "every",
            "prompt": "water",
            "everySeconds": 1800,
            "scheduledAt": "2026-08-05T12:30:00.000Z",
            "state": "overdue",
            "deliveryMode": "session-local",
        },
        "created schedule-2 every 1800s, next 2026-08-05T12:30:00.000Z (overdue)",
    ),
    (
        {
            "schedules": [
                {
                    "id": "schedule-1",
                    "kind": "cron",
                    "prompt": "p",
                    "expression": "@daily",
                    "timeZone": "UTC",
                    "scheduledAt": "2026-08-06T00:00:00.000Z",
                    "state": "scheduled",
                    "deliveryMode": "session-local",
                },
                {
                    "id": "schedule-3",
                    "kind": "at",
                    "prompt": "p",
                    "scheduledAt": "2026-08-07T00:00:00.000Z",
                    "state": "scheduled",
                    "deliveryMode": "session-local",
                },
            ]
        },
        "2 active reminder(s): schedule-1 scheduled cron @daily UTC, next "
        "2026-08-06T00:00:00.000Z, schedule-3 scheduled due 2026-08-07T00:00:00.000Z",
    ),
]


@pytest.mark.parametrize(("value", "summary"), PRESENTED)
def test_present_value_says_each_kinds_rule(value: Any, summary: str) -> None:
    checked("schedule_list" if "schedules" in value else "schedule_create", value)  # a real value
    assert present_value(value) == summary


@pytest.fixture
def without_cron(host: FakeHost, runtime: Runtime) -> Tools:
    """Schedule installed with ``calendar_rules=False``, one root agent whose owner started."""
    plugin = host.install_schedule(runtime=runtime, calendar_rules=False)
    return Tools(host, plugin, host.spawn_root("agent-1"))


def test_without_calendar_rules_the_registered_tools_never_mention_cron(
    without_cron: Tools,
) -> None:
    host, agent = without_cron.host, without_cron.agent
    assert without_cron.plugin.calendar_rules is False
    for spec in tool_specs(calendar_rules=False):
        tool = host.tools.get(spec.name, agent=agent)
        assert tool is not None
        offered = [tool.name, tool.description, tool.parameters, tool.output_schema]
        assert offered == [spec.name, spec.description, spec.parameters, spec.output_schema]
        assert "cron" not in json.dumps(offered).lower()


def test_with_calendar_rules_the_registered_create_tool_offers_cron(tools: Tools) -> None:
    assert tools.plugin.calendar_rules is True
    tool = tools.host.tools.get("schedule_create", agent=tools.agent)
    assert tool is not None
    assert "cron" in tool.parameters["properties"]
    assert "cronSchedule" in tool.output_schema["$defs"]


WITHOUT_CRON_KEYS = (
    "schedule_create accepts only prompt and one of after_seconds, at or every_seconds; "
    "cron and a time_zone outside at are not supported."
)


@pytest.mark.parametrize(
    "arguments",
    [
        {"prompt": "x", "cron": {"expression": "0 9 * * 1-5", "time_zone": "Asia/Shanghai"}},
        {"prompt": "x", "cron": None},
        {"prompt": "x", "cron": "* * * * *"},
        {"prompt": "x", "after_seconds": 5, "cron": None},
        '{"prompt": "x", "cron": {"expression": "@daily", "time_zone": "UTC"}}',
    ],
)
def test_without_calendar_rules_a_cron_key_is_invalid_selector_and_appends_nothing(
    without_cron: Tools, arguments: Any
) -> None:
    flushes = without_cron.host.sessions.flush_count
    value = without_cron.call("schedule_create", arguments)
    assert error("invalid_selector", value) == WITHOUT_CRON_KEYS
    assert without_cron.host.sessions.flush_count == flushes
    assert without_cron.agent.session.events == []


def test_without_calendar_rules_the_other_selectors_work_and_say_three(
    without_cron: Tools,
) -> None:
    message = error("invalid_selector", without_cron.call("schedule_create", {"prompt": "x"}))
    assert message == "schedule_create needs exactly one of after_seconds, at or every_seconds."
    created = without_cron.call("schedule_create", {"prompt": "x", "every_seconds": 300})
    assert (created["id"], created["kind"]) == ("schedule-1", "every")


def test_without_calendar_rules_a_cron_record_already_in_the_log_is_listed_and_delivered(
    host: FakeHost, runtime: Runtime
) -> None:
    """The option shapes the tools, not the fold: a log written with calendar rules still works."""
    record = {
        "id": "schedule-1",
        "kind": "cron",
        "prompt": "standup",
        "expression": "0 9 * * *",
        "timeZone": "UTC",
        "scheduledAt": "2026-01-01T09:00:00.000Z",
    }
    plugin = host.install_schedule(runtime=runtime, calendar_rules=False)
    created = ("schedule/change", {"version": 1, "operation": "create", "schedule": record})
    tools = Tools(host, plugin, host.spawn_root("agent-1", seed_events=(created,)))
    (listed,) = tools.call("schedule_list", {})["schedules"]
    assert (listed["kind"], listed["scheduledAt"]) == ("cron", "2026-01-01T09:00:00.000Z")
    tools.settle()
    host.timers.advance(9 * 3_600_000)
    tools.settle()
    assert len(tools.agent.received) == 1
    (listed,) = tools.call("schedule_list", {})["schedules"]
    assert listed["scheduledAt"] == "2026-01-02T09:00:00.000Z"  # the next occurrence


def test_calendar_rules_must_be_a_bool(host: FakeHost, runtime: Runtime) -> None:
    with pytest.raises(TypeError, match="calendar_rules must be True or False, not str"):
        install_schedule(host.context(), runtime=runtime, calendar_rules="no")  # type: ignore[arg-type]
    assert host.tools.get("schedule_create", agent=host.spawn_root("agent-1")) is None


# --- persistence uncertainty -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "operation", "schedule_id"),
    [
        ("schedule_create", {"prompt": "x", "after_seconds": 5}, "create", None),
        ("schedule_list", {}, "list", None),
        ("schedule_delete", {"id": "schedule-1"}, "delete", "schedule-1"),
    ],
)
@pytest.mark.parametrize("outcome", [False, OSError("listener down")])
def test_failed_preflight_is_persistence_uncertain_and_changes_nothing(
    tools: Tools,
    name: str,
    arguments: Any,
    operation: str,
    schedule_id: str | None,
    outcome: Any,
) -> None:
    before = len(tools.agent.session.events)
    tools.host.sessions.script(outcome)
    value = tools.call(name, arguments)
    error("persistence_uncertain", value)
    assert value["operation"] == operation
    assert value.get("id") == schedule_id
    assert "listener" not in value["message"]
    assert len(tools.agent.session.events) == before


def test_detached_session_preflight_is_persistence_uncertain(tools: Tools) -> None:
    session = tools.agent.session
    assert hasattr(session, "detach")
    session.detach()
    value = tools.call("schedule_list", {})
    assert value["code"] == "persistence_uncertain"


def test_create_barrier_failure_names_the_id_and_a_later_list_confirms_it(tools: Tools) -> None:
    tools.host.sessions.script(True, False)
    value = tools.call("schedule_create", {"prompt": "x", "after_seconds": 60})
    assert value["code"] == "persistence_uncertain"
    assert value["operation"] == "create"
    assert value["id"] == "schedule-1"
    listed = tools.call("schedule_list", {})
    assert [v["id"] for v in listed["schedules"]] == ["schedule-1"]
    session = tools.agent.session
    assert tools.host.sessions.durable_length(session) == len(session.events)
    tools.settle()
    assert tools.host.timers.armed() == [60_000]  # the recompute armed the retained record


def test_delete_barrier_failure_names_the_id(tools: Tools) -> None:
    tools.call("schedule_create", {"prompt": "x", "after_seconds": 60})
    tools.settle()
    tools.host.sessions.script(True, False)
    value = tools.call("schedule_delete", {"id": "schedule-1"})
    assert value["code"] == "persistence_uncertain"
    assert value["operation"] == "delete"
    assert value["id"] == "schedule-1"
    assert tools.call("schedule_list", {}) == {"schedules": []}
    tools.settle()
    assert tools.host.timers.armed() == []  # the recompute retired the record


def test_create_and_list_are_serialised_so_list_sees_the_create(tools: Tools) -> None:
    tools.host.sessions.script(True, PENDING)
    create = tools.host.tools.submit(
        "schedule_create", {"prompt": "x", "after_seconds": 60}, agent=tools.agent
    )
    listing = tools.host.tools.submit("schedule_list", {}, agent=tools.agent)
    tools.settle()
    assert not create.done()
    assert not listing.done()  # waits behind the create's barrier
    tools.host.sessions.release(False)
    created = checked("schedule_create", create.result(timeout=5).value)
    listed = checked("schedule_list", listing.result(timeout=5).value)
    assert created["code"] == "persistence_uncertain"
    assert [v["id"] for v in listed["schedules"]] == ["schedule-1"]


# --- internal errors ---------------------------------------------------------------------


def test_tool_of_another_agent_is_refused_without_side_effects(tools: Tools) -> None:
    other = tools.host.spawn_root("agent-2")
    tool = tools.host.tools.get("schedule_create", agent=tools.agent)
    assert tool is not None
    from host_bridge.protocols import ToolCall

    flushes = tools.host.sessions.flush_count
    result = tool.execute({"prompt": "x", "after_seconds": 5}, ToolCall("c1", other)).result(5)
    error("internal_error", checked("schedule_create", result.value))
    assert tools.host.sessions.flush_count == flushes
    assert len(tools.agent.session.events) == 0


def test_append_failure_is_internal_error(tools: Tools) -> None:
    session = tools.agent.session
    assert hasattr(session, "fail_appends")
    session.fail_appends(OSError("secret backend detail"), times=1)
    value = tools.call("schedule_create", {"prompt": "x", "after_seconds": 5})
    assert error("internal_error", value) == "An internal error stopped the schedule operation."
    assert "secret" not in str(value)
    assert tools.call("schedule_list", {}) == {"schedules": []}


def test_a_failed_reply_answers_the_fixed_internal_error_and_logs_the_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression: nothing called ``set_exception``; a leak of the exception's text went unseen."""
    secret = "postgresql://u:S3cr3t@db/app?password=S3cr3t"
    failure = RuntimeError(f"connection to {secret} failed")
    reply = _ToolReply()
    with caplog.at_level(logging.ERROR, logger="dsh_schedule.host_bridge._tools"):
        reply.set_exception(failure)
    message = "An internal error stopped the schedule operation."
    assert reply.result(timeout=0) == ToolResult(
        is_error=False,
        value={"code": "internal_error", "message": message},
        content=f'{{"code":"internal_error","message":"{message}"}}',
    )
    assert "S3cr3t" not in repr(reply.result(timeout=0))
    (record,) = [r for r in caplog.records if r.name == "dsh_schedule.host_bridge._tools"]
    assert record.exc_info is not None and record.exc_info[1] is failure


def test_corrupt_log_is_corrupt_schedule_log_for_every_tool(
    host: FakeHost, runtime: Runtime
) -> None:
    plugin = install_schedule(host.context(), runtime=runtime)
    agent = host.spawn_root(
        "agent-1", seed_events=(("schedule/change", {"version": 1, "operation": "delete"}),)
    )
    tools = Tools(host, plugin, agent)
    tools.settle()
    for name, arguments in [
        ("schedule_create", {"prompt": "x", "after_seconds": 5}),
        ("schedule_list", {}),
        ("schedule_delete", {"id": "schedule-1"}),
    ]:
        error("corrupt_schedule_log", tools.call(name, arguments))
    assert len(agent.session.events) == 1
    assert plugin.status().faulted[0].fault == "corrupt schedule log"


def test_unreadable_log_is_internal_error(tools: Tools, mocker: MockerFixture) -> None:
    session = tools.agent.session
    real = type(session).events
    reads: list[int] = []

    def events(self: Any) -> Any:
        reads.append(1)
        if len(reads) > 1:  # the preflight's read works; the fold's read fails
            raise OSError("unreadable")
        return real.__get__(self)

    mocker.patch.object(type(session), "events", property(events))
    value = tools.call("schedule_list", {})
    mocker.stopall()
    assert error("internal_error", value) == "An internal error stopped the schedule operation."
    assert tools.plugin.status().faulted == ()


def _instant(ms: int) -> str:
    from messages._instant import format_instant

    return format_instant(ms)
