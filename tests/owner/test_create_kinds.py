"""``schedule_create`` with ``after_seconds``, ``at`` and ``every_seconds`` through the real tools.

Every example of the contract's create table runs through the host's tool
registry and the owner, on both runtimes. Shape errors are answered before the
queue (no flush at all); every ``at`` error, and the range errors of ``after``
and ``every``, only after the preflight and the fold, with nothing appended.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from actors._runtime import Runtime
from host_bridge.testing import PENDING, FakeClock, FakeHost
from messages._instant import parse_instant
from messages._records import SCHEDULE_CHANGE_TYPE
from messages._tool_values import AtSelector, EverySelector
from tests.messages.helpers import AT_EXAMPLES, REFUSED_ZONE_NAMES, local
from tests.owner.harness import Harness
from tests.owner.helpers import Tools, error
from tests.schema_check import checked

NOW = parse_instant("2026-08-05T12:00:00.000Z")
SAFE = 2**53 - 1


@pytest.fixture
def at_now(host: FakeHost, request: pytest.FixtureRequest) -> Tools:
    """The tools, installed with the host's wall clock at the contract's example time.

    The clock is set first: set after install, it would be a forward step that
    Schedule takes only once it held for the confirmation interval.
    """
    host.clock.set(NOW)
    tools: Tools = request.getfixturevalue("tools")
    return tools


def call_counted(tools: Tools, arguments: Any) -> tuple[Any, int, int]:
    """Call ``schedule_create``; the value, the flushes it caused and the events it appended."""
    tools.settle()
    flushes = tools.host.sessions.flush_count
    events = len(tools.agent.session.events)
    value = tools.call("schedule_create", arguments)
    tools.settle()
    return (
        value,
        tools.host.sessions.flush_count - flushes,
        len(tools.agent.session.events) - events,
    )


# --- the selector rule, before the queue --------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"prompt": "x"},
        {"prompt": "x", "cron": {"expression": "0 9 * * *", "time_zone": "UTC"}, "at": None},
        {"prompt": "x", "time_zone": "Asia/Shanghai"},
        {"prompt": "x", "after_seconds": 60, "at": "2026-08-06T09:00:00+08:00"},
        {"prompt": "x", "at": "2026-08-06T09:00:00+08:00", "every_seconds": 300},
        {"prompt": "x", "after_seconds": 60, "every_seconds": 300},
        {"prompt": "x", "after_seconds": 60, "at": "2026-08-06T09:00:00Z", "every_seconds": 300},
        {"prompt": "x", "at": None, "every_seconds": None},  # a present null counts
        {"prompt": "x", "after_seconds": None, "at": "2026-08-06T09:00:00Z"},
        {"prompt": "x", "every_seconds": 300, "time_zone": "UTC"},
        {"prompt": "", "every_seconds": 5, "cron": "x"},  # the selector is judged first
        {"prompt": "x", "calendar": "0 9 * * *"},
    ],
)
def test_selector_errors_are_answered_before_the_queue(at_now: Tools, arguments: Any) -> None:
    value, flushes, appended = call_counted(at_now, arguments)
    error("invalid_selector", value)
    assert (flushes, appended) == (0, 0)


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"prompt": "  ", "at": "not even a time"}, "invalid_prompt"),  # prompt before at
        ({"prompt": "\ud800", "every_seconds": 5}, "invalid_prompt"),  # prompt before the rule
        ({"at": "2026-08-06T09:00:00Z"}, "invalid_prompt"),
        ({"prompt": "x", "every_seconds": None}, "invalid_rule"),
        ({"prompt": "x", "every_seconds": "1800"}, "invalid_rule"),
        ({"prompt": "x", "every_seconds": 300.5}, "invalid_rule"),
        ({"prompt": "x", "every_seconds": True}, "invalid_rule"),
        ({"prompt": "x", "every_seconds": [300]}, "invalid_rule"),
        ({"prompt": "x", "every_seconds": math.nan}, "invalid_rule"),
        ({"prompt": "x", "every_seconds": math.inf}, "invalid_rule"),
        ({"prompt": "x", "every_seconds": SAFE + 1}, "invalid_rule"),
        ({"prompt": "x", "every_seconds": -SAFE - 1}, "invalid_rule"),
        ({"prompt": "x", "every_seconds": 299}, "frequency_too_high"),
        ({"prompt": "x", "every_seconds": 299.0}, "frequency_too_high"),
        ({"prompt": "x", "every_seconds": 60}, "frequency_too_high"),
        ({"prompt": "x", "every_seconds": 0}, "frequency_too_high"),
        ({"prompt": "x", "every_seconds": -300}, "frequency_too_high"),
        ({"prompt": "x", "every_seconds": -SAFE}, "frequency_too_high"),
        ({"prompt": "x", "after_seconds": 0}, "invalid_rule"),
        ({"prompt": "x", "cron": "*/5 * * * *"}, "invalid_rule"),  # an object, not the text
        (
            {"prompt": "x", "cron": {"expression": "*/4 * * * *", "time_zone": "UTC"}},
            "frequency_too_high",
        ),
        (
            {"prompt": "x", "cron": {"expression": "0 9 * * *", "time_zone": "EST"}},
            "invalid_time_zone",
        ),
    ],
)
def test_prompt_and_rule_errors_are_answered_before_the_queue(
    at_now: Tools, arguments: Any, code: str
) -> None:
    value, flushes, appended = call_counted(at_now, arguments)
    error(code, value)
    assert (flushes, appended) == (0, 0)


def test_pre_queue_messages_are_fixed_and_say_what_to_do(at_now: Tools) -> None:
    count = at_now.call("schedule_create", {"prompt": "x"})
    assert "exactly one of after_seconds, at, every_seconds or cron" in error(
        "invalid_selector", count
    )
    unknown = at_now.call("schedule_create", {"prompt": "x", "calendar": "* * * * *"})
    assert "one of after_seconds, at, every_seconds or cron" in error("invalid_selector", unknown)
    floor = at_now.call("schedule_create", {"prompt": "x", "every_seconds": 60})
    assert "at least 300" in error("frequency_too_high", floor)
    assert "60" not in error("frequency_too_high", floor).replace("600", "")  # nothing echoed


# --- every_seconds ------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "stored"), [(300, 300), (300.0, 300), (1800, 1800)])
def test_every_seconds_creates_a_record_one_interval_ahead(
    at_now: Tools, given: Any, stored: int
) -> None:
    value, flushes, appended = call_counted(at_now, {"prompt": " water ", "every_seconds": given})
    assert value == {
        "id": "schedule-1",
        "kind": "every",
        "prompt": "water",
        "everySeconds": stored,
        "scheduledAt": _instant(NOW + stored * 1000),
        "state": "scheduled",
        "deliveryMode": "session-local",
    }
    assert list(value) == [
        "id",
        "kind",
        "prompt",
        "everySeconds",
        "scheduledAt",
        "state",
        "deliveryMode",
    ]
    assert flushes >= 2 and appended == 1  # preflight and barrier
    (event,) = [e for e in at_now.agent.session.events if e.type == SCHEDULE_CHANGE_TYPE]
    assert event.data["schedule"] == {
        "id": "schedule-1",
        "kind": "every",
        "prompt": "water",
        "everySeconds": stored,
        "scheduledAt": _instant(NOW + stored * 1000),
    }
    assert type(event.data["schedule"]["everySeconds"]) is int


@pytest.mark.parametrize("seconds", [SAFE, 10**12])
def test_every_seconds_past_the_calendar_is_refused_after_the_preflight(
    at_now: Tools, seconds: int
) -> None:
    value, flushes, appended = call_counted(at_now, {"prompt": "x", "every_seconds": seconds})
    error("time_out_of_range", value)
    assert flushes >= 1 and appended == 0


# --- at: the contract's examples (now = 2026-08-05T12:00:00.000Z) -------------------------

AT_ACCEPTED = [
    *AT_EXAMPLES,
    ("2026-08-06T01:00:00+00:00", "2026-08-06T01:00:00.000Z"),
    (local("2026-08-06", "09:00:00", "Asia/Calcutta"), "2026-08-06T03:30:00.000Z"),
    (local("2026-08-06", "09:00:00", "US/Eastern"), "2026-08-06T13:00:00.000Z"),
    (local("2026-08-06", "09:00:00", "UTC"), "2026-08-06T09:00:00.000Z"),
]


@pytest.mark.parametrize(("at", "scheduled_at"), AT_ACCEPTED)
def test_at_examples_that_are_accepted(at_now: Tools, at: Any, scheduled_at: str) -> None:
    value, _, appended = call_counted(at_now, {"prompt": "call mom", "at": at})
    assert value == {
        "id": "schedule-1",
        "kind": "at",
        "prompt": "call mom",
        "scheduledAt": scheduled_at,
        "state": "scheduled",
        "deliveryMode": "session-local",
    }
    assert list(value) == ["id", "kind", "prompt", "scheduledAt", "state", "deliveryMode"]
    assert appended == 1
    event = at_now.agent.session.events[-1]
    assert event.data["schedule"] == {  # only the resolved instant is stored
        "id": "schedule-1",
        "kind": "at",
        "prompt": "call mom",
        "scheduledAt": scheduled_at,
    }


AT_REFUSED = [
    ("2026-08-06T09:00:00", "invalid_rule"),
    ("2026-08-06 01:00:00Z", "invalid_rule"),
    ("2026-08-06t01:00:00Z", "invalid_rule"),
    ("2026-08-06T01:00:00z", "invalid_rule"),
    ("2026-08-06T09:00:00+0800", "invalid_rule"),
    ("2026-08-06T09:00:00+08", "invalid_rule"),
    ("2026-08-06T01:00:00.1234Z", "invalid_rule"),
    ("2026-08-06T01:00:00,1Z", "invalid_rule"),
    ("2026-08-06T01:00:00.Z", "invalid_rule"),
    ("2026-08-06T01:00:00Z\n", "invalid_rule"),
    ("2026-02-29T01:00:00Z", "invalid_rule"),
    ("2026-08-06T24:00:00Z", "invalid_rule"),
    ("2026-08-06T01:00:60Z", "invalid_rule"),
    ("2026-08-06T01:00:00-00:00", "invalid_rule"),
    ("2026-08-06T01:00:00+24:00", "invalid_rule"),
    ("2026-08-06T01:00:00+01:60", "invalid_rule"),
    ("0000-01-01T00:00:00Z", "invalid_rule"),
    ("\uff12026-08-06T01:00:00Z", "invalid_rule"),  # only ASCII digits
    ("2026-08-06T01:00:00+14:00", "not_future"),
    ("2026-08-05T12:00:00Z", "not_future"),
    ("2026-08-05T20:00:00+08:00", "not_future"),
    ("2020-01-01T00:00:00Z", "not_future"),
    ("9999-12-31T23:59:59.999-23:59", "time_out_of_range"),
    ("0001-01-01T00:00:00+00:01", "time_out_of_range"),
    (local("2026-03-08", "02:30:00", "America/New_York"), "invalid_rule"),  # a gap
    (local("2026-03-29", "01:30:00", "Europe/London"), "invalid_rule"),  # a gap
    (local("2026-02-30", "09:00:00", "Bogus/Zone"), "invalid_rule"),  # date before zone
    (local("2026-02-30", 9, "Asia/Shanghai"), "invalid_rule"),
    (local(20260806, "09:00:00", "Asia/Shanghai"), "invalid_rule"),
    (local("2026-02-30", "09:00:00", 8), "invalid_time_zone"),  # zone type before grammar
    (local("2026-08-06", "9:00", "Asia/Shanghai"), "invalid_rule"),
    (local("2026-08-06", "09:00:00", None), "invalid_time_zone"),
    (local("9999-12-31", "23:59:59.999", "America/New_York"), "time_out_of_range"),
    (local("2026-08-05", "19:59:59", "Asia/Shanghai"), "not_future"),
    ({"date": "2026-08-06", "time": "09:00:00"}, "invalid_rule"),
    ({"date": "2026-08-06", "time": "09:00:00", "time_zone": "UTC", "x": 1}, "invalid_rule"),
    ({"date": "2026-08-06", "time": "09:00:00", "zone": "UTC"}, "invalid_rule"),
    (42, "invalid_rule"),
    (None, "invalid_rule"),  # a present null is the at selector, judged in the queue
    (["2026-08-06T09:00:00Z"], "invalid_rule"),
    (True, "invalid_rule"),
    ("", "invalid_rule"),
    ("2026-08-06T09:00:00+08:00" + " " * 100, "invalid_rule"),  # long: copied as ""
]
ZONES_REFUSED = [
    *REFUSED_ZONE_NAMES,
    "posix/Europe/London",
    "right/UTC",
    "Asia/Shanghai" + "/x" * 40,  # long: copied as ""
]


@pytest.mark.parametrize(("at", "code"), AT_REFUSED)
def test_at_examples_that_are_refused_after_the_preflight(
    at_now: Tools, at: Any, code: str
) -> None:
    value, flushes, appended = call_counted(at_now, {"prompt": "x", "at": at})
    error(code, value)
    assert flushes >= 1  # judged in the queue, after its preflight
    assert appended == 0


@pytest.mark.parametrize("zone", ZONES_REFUSED)
def test_zone_names_that_are_refused(at_now: Tools, zone: str) -> None:
    value, flushes, appended = call_counted(
        at_now, {"prompt": "x", "at": local("2026-08-06", "09:00:00", zone)}
    )
    assert "time_zone must be UTC" in error("invalid_time_zone", value)
    assert flushes >= 1 and appended == 0


def test_an_at_value_is_not_judged_when_the_preflight_fails(at_now: Tools) -> None:
    at_now.host.sessions.script(False)
    value, flushes, appended = call_counted(at_now, {"prompt": "x", "at": "garbage"})
    assert error("persistence_uncertain", value)
    assert value["operation"] == "create"
    assert flushes >= 1 and appended == 0


def test_a_frequency_error_needs_no_preflight(at_now: Tools) -> None:
    at_now.host.sessions.script(False)  # would fail any flush
    value, flushes, _ = call_counted(at_now, {"prompt": "x", "every_seconds": 30})
    error("frequency_too_high", value)
    assert flushes == 0
    assert at_now.host.sessions.scripted() == [False]


def test_at_error_messages_never_echo_the_input(at_now: Tools) -> None:
    secret = "2026-08-06T09:00:00+99:99-secret"
    rule = at_now.call("schedule_create", {"prompt": "x", "at": secret})
    zone = at_now.call(
        "schedule_create", {"prompt": "x", "at": local("2026-08-06", "09:00:00", "Secret/Zone")}
    )
    past = at_now.call("schedule_create", {"prompt": "x", "at": "2020-01-01T00:00:00Z"})
    for value in (rule, zone, past):
        assert "secret" not in value["message"].lower()
        assert "2020" not in value["message"]
    assert error("not_future", past) == "The reminder time must be later than now."


def test_the_three_kinds_list_in_create_order(at_now: Tools) -> None:
    at_now.call("schedule_create", {"prompt": "a", "every_seconds": 600})
    at_now.call("schedule_create", {"prompt": "b", "at": "2026-08-05T12:01:00Z"})
    at_now.call("schedule_create", {"prompt": "c", "after_seconds": 30})
    listed = at_now.call("schedule_list", {})["schedules"]
    assert [(v["id"], v["kind"], v["scheduledAt"]) for v in listed] == [
        ("schedule-1", "every", "2026-08-05T12:10:00.000Z"),
        ("schedule-2", "at", "2026-08-05T12:01:00.000Z"),
        ("schedule-3", "after", "2026-08-05T12:00:30.000Z"),
    ]
    assert at_now.host.timers.armed() == [30_000]  # the earliest target of any kind


def test_a_create_answers_with_a_view_from_a_fresh_sample_after_its_barrier(
    at_now: Tools,
) -> None:
    at_now.host.sessions.script(True, PENDING)  # the barrier waits
    pending = at_now.host.tools.submit(
        "schedule_create", {"prompt": "x", "at": "2026-08-05T12:00:00.005Z"}, agent=at_now.agent
    )
    at_now.settle()
    assert not pending.done()
    at_now.host.clock.advance(10)  # the target passes while the barrier is in flight
    at_now.host.sessions.release(True)
    value = checked("schedule_create", pending.result(timeout=5).value)
    assert value["scheduledAt"] == "2026-08-05T12:00:00.005Z"
    assert value["state"] == "overdue"


# --- one clock sample, judged after the preflight (mailbox level) -------------------------


class CountingClock:
    """The fake wall clock, counting how often it is read."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.reads = 0
        self.monotonic = clock.monotonic

    def __call__(self) -> int:
        self.reads += 1
        return self.clock()


@pytest.mark.parametrize(
    ("when", "code"),
    [
        (AtSelector("2026-08-05T11:00:00Z"), "not_future"),
        (AtSelector(local("2026-08-06", "09:00:00", "Mars/Olympus")), "invalid_time_zone"),
        (AtSelector("9999-12-31T23:59:59.999-23:59"), "time_out_of_range"),
        (AtSelector(None), "invalid_rule"),
        (EverySelector(SAFE), "time_out_of_range"),
    ],
)
def test_in_queue_errors_read_the_clock_once_and_append_nothing(
    host: FakeHost, runtime: Runtime, when: Any, code: str
) -> None:
    host.clock.set(NOW)
    counting = CountingClock(host.clock)
    harness = Harness(
        host, runtime=runtime, context=dataclasses.replace(host.context(), clock=counting)
    )
    harness.host.sessions.script(True, PENDING)  # the create's preflight; the recompute waits
    reads = counting.reads
    value = harness.value(harness.create_when("x", when), "create")
    error(code, value)
    assert counting.reads - reads == 1
    assert harness.changes() == []
    assert harness.steps()[-3:] == [("flush",), ("flushed", True), ("flush",)]


def _instant(ms: int) -> str:
    from messages._instant import format_instant

    return format_instant(ms)


class BadReadingAt:
    """The host's fake clock, except that read ``n`` (counted from :meth:`arm`) gives ``bad``."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self.monotonic = clock.monotonic
        self._n: int | None = None
        self._bad: Any = None
        self._reads = 0

    def arm(self, n: int, bad: Any) -> None:
        self._n, self._bad, self._reads = n, bad, 0

    def __call__(self) -> Any:
        self._reads += 1
        return self._bad if self._reads == self._n else self._clock()


@pytest.mark.parametrize("bad", [None, "x", 1.5, True])
def test_a_durable_create_is_answered_with_its_view_whatever_the_next_clock_reading(
    host: FakeHost, runtime: Runtime, bad: Any
) -> None:
    clock = BadReadingAt(host.clock)
    harness = Harness(
        host, runtime=runtime, context=dataclasses.replace(host.context(), clock=clock)
    )
    clock.arm(2, bad)  # read 1: the record's sample; read 2: the view after the barrier
    created = harness.created("stretch", 60)
    assert created["state"] == "scheduled"
    changes = [
        e.data["operation"] for e in harness.session.events if e.type == SCHEDULE_CHANGE_TYPE
    ]
    assert changes == ["create"]
    clock.arm(1, bad)
    listed = harness.value(harness.list_schedules(), "list")
    assert [view["id"] for view in listed["schedules"]] == [created["id"]]
