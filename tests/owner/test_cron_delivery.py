"""``cron`` reminders through the owner, message by message, on both runtimes, fake time.

A create answers the cron view with the rule's first occurrence after the
create's clock sample and the owner arms its timer for it; at the target (never
a millisecond before, never after the wall clock was set back) one batch turn
is delivered and one dispatch with ``acceptedAt`` appended, and the record
moves in place to the first occurrence after ``acceptedAt``. A cron record
joins the one batch with ``every`` records (stored target, then create order);
a due one-shot goes first, alone. After an outage only the latest due
occurrence is delivered. A stored target the current zone rules would not
compute is delivered where it stands. The wake-up actor wakes a cold session
for its cron record and a cold pass delivers it.
"""

from __future__ import annotations

from typing import Any

import pytest

from actors._runtime import Runtime
from host_bridge._plugin import WakePolicy
from host_bridge.protocols import SessionEvent
from host_bridge.testing import FakeColdActivation, FakeHost, assert_delivered_once
from messages._creation import check_cron
from messages._delivery import MAX_TIMER_DELAY_MS
from messages._fold import fold_schedule_events
from messages._instant import format_instant, parse_instant
from messages._records import SCHEDULE_CHANGE_TYPE
from messages._tool_values import AfterSelector, CronSelector, EverySelector
from tests.cron_records import (
    answer,
    cron_create,
    cron_dispatch,
    cron_event,
    cron_view,
    latest_between,
    next_after,
    zone_data_moved,
)
from tests.owner.harness import DELIVERY_STEPS, Harness
from tests.owner.helpers import batch, one_shot
from tests.owner.test_telemetry import Otel, attrs
from tests.owner.test_wake_up import Waker

NOW = parse_instant("2026-08-05T12:00:00.000Z")  # a Wednesday; 20:00 in Shanghai
SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEKDAYS = "0 9 * * 1-5"
SHANGHAI = "Asia/Shanghai"


def ms(instant: str) -> int:
    return parse_instant(instant)


def dispatches(harness: Harness) -> list[dict[str, Any]]:
    return [
        event.data
        for event in harness.session.events
        if event.type == SCHEDULE_CHANGE_TYPE and event.data["operation"] == "dispatch"
    ]


def listed(harness: Harness) -> list[dict[str, Any]]:
    value = answer(harness.list_schedules())
    return list(value["schedules"])


def targets(harness: Harness) -> list[tuple[str, str]]:
    return [(view["id"], view["scheduledAt"]) for view in listed(harness)]


def create_cron(harness: Harness, prompt: str, expression: str, zone: str) -> dict[str, Any]:
    selector = CronSelector(*check_cron({"expression": expression, "time_zone": zone}))
    value = answer(harness.create_when(prompt, selector))
    assert value.get("kind") == "cron", value
    return dict(value)


@pytest.fixture
def at_noon(harness: Harness) -> Harness:
    """The harness with the wall clock at 2026-08-05T12:00:00.000Z."""
    harness.host.clock.set(NOW)
    return harness


# --- create -------------------------------------------------------------------------------


CREATES = [  # (expression, zone) given, (expression, zone) stored, first target
    ((WEEKDAYS, SHANGHAI), (WEEKDAYS, SHANGHAI), "2026-08-06T01:00:00.000Z"),  # Thursday 09:00
    (
        ("0 9 * * mon-fri", "asia/shanghai"),
        ("0 9 * * MON-FRI", SHANGHAI),
        "2026-08-06T01:00:00.000Z",
    ),
    (("0 8 1 * *", "UTC"), ("0 8 1 * *", "UTC"), "2026-09-01T08:00:00.000Z"),
    (
        ("30 8 * * 1", "America/New_York"),
        ("30 8 * * 1", "America/New_York"),
        "2026-08-10T12:30:00.000Z",
    ),
    ((" @DAILY ", "Asia/Kolkata"), ("@daily", "Asia/Kolkata"), "2026-08-05T18:30:00.000Z"),
]


@pytest.mark.parametrize(("given", "stored", "first"), CREATES)
def test_a_cron_create_answers_its_view_and_arms_the_first_occurrence(
    at_noon: Harness, given: tuple[str, str], stored: tuple[str, str], first: str
) -> None:
    value = create_cron(at_noon, "standup", *given)
    assert value == cron_view("schedule-1", "standup", *stored, first)
    # (a target further than the longest timer is re-armed on the way: the first of September)
    assert at_noon.host.timers.armed() == [min(ms(first) - NOW, MAX_TIMER_DELAY_MS)]
    ((_, created),) = [(e.type, e.data) for e in at_noon.session.events]
    assert created == cron_create("schedule-1", "standup", *stored, first)
    assert listed(at_noon) == [value]


# --- delivery -----------------------------------------------------------------------------


def test_a_weekday_cron_reminder_is_delivered_once_at_each_occurrence_never_early(
    at_noon: Harness,
) -> None:
    create_cron(at_noon, "standup", WEEKDAYS, SHANGHAI)
    thursday = ms("2026-08-06T01:00:00.000Z")
    at_noon.journal.clear()

    at_noon.advance(thursday - NOW - 1)  # a millisecond before: nothing
    assert at_noon.agent.received == []
    assert dispatches(at_noon) == []
    at_noon.advance(1)

    assert at_noon.steps()[: len(DELIVERY_STEPS)] == list(DELIVERY_STEPS)
    (message,) = at_noon.agent.received
    assert message.text == batch(("schedule-1", format_instant(thursday), "standup"))
    assert dispatches(at_noon) == [cron_dispatch("schedule-1", thursday)]
    friday = thursday + DAY
    assert listed(at_noon) == [cron_view("schedule-1", "standup", WEEKDAYS, SHANGHAI, friday)]
    assert at_noon.host.timers.armed() == [DAY]

    at_noon.agent.run_queued_turns()
    at_noon.advance(DAY)  # Friday, then the weekend is skipped
    assert at_noon.agent.received[-1].text == batch(
        ("schedule-1", format_instant(friday), "standup")
    )
    monday = ms("2026-08-10T01:00:00.000Z")
    assert targets(at_noon) == [("schedule-1", format_instant(monday))]
    assert at_noon.host.timers.armed() == [monday - friday]
    for occurrence in (thursday, friday):
        assert_delivered_once(
            at_noon.session,
            "schedule-1",
            occurrence_at=format_instant(occurrence),
            presented=at_noon.agent.received,
        )
    with pytest.raises(AssertionError, match="it is a repeating reminder: pass occurrence_at="):
        assert_delivered_once(at_noon.session, "schedule-1")  # two occurrences, both counted
    assert at_noon.status.deliveries == 2


def test_a_clock_set_back_after_arming_never_fires_a_cron_reminder_early(
    at_noon: Harness,
) -> None:
    create_cron(at_noon, "standup", WEEKDAYS, SHANGHAI)
    target = ms("2026-08-06T01:00:00.000Z")
    assert at_noon.host.timers.armed() == [target - NOW]
    at_noon.host.clock.set(NOW - 2 * HOUR)  # the wall clock is set back two hours
    at_noon.advance(target - NOW)  # the timer wakes on elapsed time, at target - 2 h
    assert at_noon.agent.received == []
    assert dispatches(at_noon) == []
    assert at_noon.host.timers.armed() == [2 * HOUR]  # re-armed from the re-read clock
    at_noon.advance(2 * HOUR - 1)
    assert at_noon.agent.received == []
    at_noon.advance(1)
    (message,) = at_noon.agent.received
    assert message.text == batch(("schedule-1", format_instant(target), "standup"))
    assert dispatches(at_noon) == [cron_dispatch("schedule-1", target)]


def test_a_cron_and_an_every_record_due_together_are_one_batch_after_a_due_one_shot(
    at_noon: Harness,
) -> None:
    at_noon.created_every("hourly check", 3600)  # schedule-1, 13:00
    create_cron(at_noon, "lunch", "45 12 * * *", "UTC")  # schedule-2, 12:45
    create_cron(at_noon, "sync", "0 13 * * *", "UTC")  # schedule-3, 13:00: ties keep create order
    at_noon.created("call back", 50 * 60)  # schedule-4, a one-shot at 12:50
    at_noon.agent.begin_turn()  # busy: everything waits
    at_noon.advance(67 * MINUTE)
    assert at_noon.agent.received == []
    accepted = NOW + 67 * MINUTE  # 13:07:00

    at_noon.agent.end_turn()
    at_noon.settle()
    assert [m.text for m in at_noon.agent.received] == [
        one_shot("schedule-4", format_instant(NOW + 50 * MINUTE), "call back")  # alone, first
    ]
    at_noon.agent.run_queued_turns()
    at_noon.settle()

    assert at_noon.agent.received[-1].text == batch(
        ("schedule-2", format_instant(NOW + 45 * MINUTE), "lunch"),
        ("schedule-1", format_instant(NOW + HOUR), "hourly check"),
        ("schedule-3", format_instant(NOW + HOUR), "sync"),
    )
    assert len(at_noon.agent.received) == 2
    assert dispatches(at_noon) == [
        {"version": 1, "operation": "dispatch", "id": "schedule-4"},
        *(cron_dispatch(sid, accepted) for sid in ("schedule-2", "schedule-1", "schedule-3")),
    ]
    assert targets(at_noon) == [
        ("schedule-1", format_instant(NOW + 2 * HOUR)),
        ("schedule-2", format_instant(NOW + DAY + 45 * MINUTE)),
        ("schedule-3", format_instant(NOW + DAY + HOUR)),
    ]
    assert at_noon.host.timers.armed() == [NOW + 2 * HOUR - accepted]


def test_latest_only_catch_up_of_a_cron_record_after_a_long_outage(at_noon: Harness) -> None:
    create_cron(at_noon, "check the pumps", "0 * * * *", "Asia/Kolkata")  # hourly at :30 UTC
    assert targets(at_noon) == [("schedule-1", "2026-08-05T12:30:00.000Z")]
    at_noon.host.clock.suspend(10 * HOUR + 7 * SECOND)  # asleep: ten occurrences missed
    at_noon.drive()
    accepted = NOW + 10 * HOUR + 7 * SECOND  # 22:00:07
    (message,) = at_noon.agent.received  # one occurrence, the latest due, no backlog
    assert message.text == batch(("schedule-1", "2026-08-05T21:30:00.000Z", "check the pumps"))
    assert dispatches(at_noon) == [cron_dispatch("schedule-1", accepted)]
    assert targets(at_noon) == [("schedule-1", "2026-08-05T22:30:00.000Z")]
    assert at_noon.host.timers.armed() == [29 * MINUTE + 53 * SECOND]


def test_an_owner_starting_on_a_cron_record_overdue_by_many_occurrences_delivers_one(
    runtime: Runtime,
) -> None:
    expression, zone = "0 * * * *", "Europe/London"  # hourly on the hour (BST is whole hours)
    first = NOW - 10 * HOUR  # stored before a ten hour outage
    host = FakeHost(start_ms=NOW + 7 * SECOND)
    seeded = (cron_event(cron_create("schedule-1", "stand up", expression, zone, first)),)
    harness = Harness(host, seed_events=seeded, runtime=runtime)
    (message,) = harness.agent.received
    assert message.text == batch(("schedule-1", format_instant(NOW), "stand up"))
    assert dispatches(harness) == [cron_dispatch("schedule-1", NOW + 7 * SECOND)]
    assert targets(harness) == [("schedule-1", format_instant(NOW + HOUR))]
    assert host.timers.armed() == [HOUR - 7 * SECOND]
    harness.agent.run_queued_turns()
    harness.drive()
    assert len(harness.agent.received) == 1  # nothing else is due: no backlog


@pytest.mark.parametrize(
    ("expression", "zone", "stored"),
    [
        ("0 9 * * *", SHANGHAI, "2026-08-06T01:07:00.000Z"),  # 09:07, an odd minute
        ("0 9 * * *", SHANGHAI, "2026-08-06T00:00:00.000Z"),  # as if the zone were +09:00
        ("30 2 * * *", "America/New_York", "2026-08-06T06:29:59.999Z"),  # not even a minute
    ],
)
def test_a_stored_target_off_the_current_rules_is_delivered_there_then_moves_on(
    runtime: Runtime, expression: str, zone: str, stored: str
) -> None:
    """Zone rules changed between tzdata versions: the stored target stands, the next follows
    the installed rules."""
    host = FakeHost(start_ms=NOW)
    seeded = (cron_event(cron_create("schedule-1", "pills", expression, zone, stored)),)
    harness = Harness(host, seed_events=seeded, runtime=runtime)
    target = ms(stored)
    assert harness.status.fault is None
    assert listed(harness) == [cron_view("schedule-1", "pills", expression, zone, stored)]
    assert host.timers.armed() == [target - NOW]
    harness.advance(target - NOW - 1)
    assert harness.agent.received == []
    harness.advance(1)
    (message,) = harness.agent.received
    assert message.text == batch(("schedule-1", stored, "pills"))
    assert dispatches(harness) == [cron_dispatch("schedule-1", target)]
    following = next_after(expression, zone, target)
    assert latest_between(expression, zone, following, following) == following  # a real one
    assert targets(harness) == [("schedule-1", format_instant(following))]
    assert host.timers.armed() == [following - target]


def test_a_deleted_cron_record_disarms_the_timer_and_never_delivers(at_noon: Harness) -> None:
    create_cron(at_noon, "standup", WEEKDAYS, SHANGHAI)
    assert at_noon.host.timers.armed() != []
    deleted = answer(at_noon.delete("schedule-1"))
    assert deleted == {"id": "schedule-1", "deleted": True}
    at_noon.advance(7 * DAY)
    assert at_noon.agent.received == []
    assert at_noon.host.timers.armed() == []


def test_a_cron_record_past_its_last_occurrence_is_delivered_then_gone(
    runtime: Runtime,
) -> None:
    last = ms("9999-12-31T00:00:00.000Z")
    host = FakeHost(start_ms=last - MINUTE)
    seeded = (cron_event(cron_create("schedule-1", "the end", "0 0 31 12 *", "UTC", last)),)
    harness = Harness(host, seed_events=seeded, runtime=runtime)
    harness.advance(MINUTE)
    (message,) = harness.agent.received
    assert message.text == batch(("schedule-1", format_instant(last), "the end"))
    assert dispatches(harness) == [cron_dispatch("schedule-1", last)]
    assert listed(harness) == []  # exhausted: no occurrence by 9999-12-31T23:59:59.999Z
    assert host.timers.armed() == []
    assert harness.status.fault is None


# --- the wake-up actor --------------------------------------------------------------------


def test_a_cold_session_is_activated_at_its_cron_target_and_its_owner_delivers(
    runtime: Runtime,
) -> None:
    host_start = FakeHost().clock.now()
    target = next_after(WEEKDAYS, SHANGHAI, host_start)
    stored = {"s1": [cron_event(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, target))]}
    w = Waker(runtime, WakePolicy(rescan_ms=DAY), stored=stored)
    assert w.host.clock.now() == host_start
    assert w.host.timers.armed() == [target - host_start]  # one timer, at the cron target
    w.advance(target - host_start - 1)
    assert w.activated() == []
    w.advance(1)
    assert w.activated() == ["s1"]
    agent = w.woken()
    assert w.dispatched(agent) == ["schedule-1"]
    assert_delivered_once(agent.session, "schedule-1", presented=agent.received)
    (message,) = agent.received
    assert message.text == batch(("schedule-1", format_instant(target), "standup"))
    following = next_after(WEEKDAYS, SHANGHAI, target)
    (owner,) = w.plugin.status().owners
    assert owner.timer_delay_ms == following - target  # the next occurrence is armed


def test_a_cold_pass_delivers_a_cron_session_once_and_indexes_its_next_target(
    runtime: Runtime,
) -> None:
    made: list[FakeColdActivation] = []

    def build(host: FakeHost) -> FakeColdActivation:
        made.append(FakeColdActivation(host))
        return made[-1]

    host_start = FakeHost().clock.now()
    target = next_after("*/5 * * * *", "UTC", host_start)
    stored = {
        "s1": [cron_event(cron_create("schedule-1", "look up", "*/5 * * * *", "UTC", target))],
        "s2": [cron_event(cron_create("schedule-1", "look up", WEEKDAYS, SHANGHAI, target))],
    }
    w = Waker(runtime, WakePolicy(rescan_ms=DAY), stored=stored, activation=build)
    cold = made[0]
    w.advance(target - host_start - 1)
    assert cold.delivered == []  # never early
    w.advance(1)
    assert sorted(session for session, _ in cold.delivered) == ["s1", "s2"]
    assert w.activated() == []  # delivered cold, no agent
    for _, delivery in cold.delivered:
        (change,) = delivery.dispatches
        assert change.to_json() == cron_dispatch("schedule-1", target)
    assert cold.due_of("s1") == target + 5 * MINUTE
    assert cold.due_of("s2") == next_after(WEEKDAYS, SHANGHAI, target)
    w.advance(5 * MINUTE)
    assert [session for session, _ in cold.delivered].count("s1") == 2
    assert [session for session, _ in cold.delivered].count("s2") == 1


def test_an_every_selector_and_a_cron_selector_are_told_apart_in_one_session(
    at_noon: Harness,
) -> None:
    """The same prompt through three selectors: three records of three kinds, in create order."""
    at_noon.create_when("x", AfterSelector(60))
    at_noon.create_when("x", EverySelector(300))
    create_cron(at_noon, "x", "*/5 * * * *", "UTC")
    assert [view["kind"] for view in listed(at_noon)] == ["after", "every", "cron"]
    assert at_noon.host.timers.armed() == [MINUTE]


# --- telemetry ----------------------------------------------------------------------------


def test_telemetry_counts_cron_creates_and_dispatches_under_their_own_kind(
    host: FakeHost, runtime: Runtime
) -> None:
    otel = Otel()
    try:
        host.clock.set(NOW)
        observed = Harness(host, runtime=runtime, observer=otel.telemetry)
        observed.created_every("stretch", 3600)  # 13:00
        create_cron(observed, "sync", "0 13 * * *", "UTC")  # 13:00 too
        assert otel.counter("dsh.schedule.creates") == {
            attrs(kind="every"): 1,
            attrs(kind="cron"): 1,
        }
        observed.agent.begin_turn()
        observed.advance(HOUR + 3 * SECOND)
        observed.agent.end_turn()
        observed.settle()
        assert len(observed.agent.received) == 1  # one batch
        assert otel.counter("dsh.schedule.dispatches") == {
            attrs(kind="every"): 1,
            attrs(kind="cron"): 1,
        }
        lateness = otel.histogram("dsh.schedule.delivery.lateness")
        assert {key: (p.count, p.sum) for key, p in lateness.items()} == {
            attrs(kind="every"): (1, 3.0),  # seconds
            attrs(kind="cron"): (1, 3.0),
        }
    finally:
        otel.shutdown()


# --- zone data that changed under a log ----------------------------------------------------


def test_a_dispatch_written_under_other_zone_data_leaves_the_log_usable(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written on +08:00 rules, folded after a tzdata release moved Shanghai to +07:00.

    The Monday reminder was delivered two hours late, Tuesday's on time. Under the
    new rules the first 09:00 after Monday's delivery is Tuesday 02:00Z, after
    Tuesday's ``acceptedAt``: the log is what a correct owner wrote, not corrupt.
    """
    monday = ms("2026-08-10T01:00:00.000Z")
    seeded = (
        cron_event(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, monday)),
        cron_event(cron_dispatch("schedule-1", monday + 2 * HOUR)),
        cron_event(cron_dispatch("schedule-1", monday + DAY)),
    )
    written = [SessionEvent(t, seq, monday, data) for seq, (t, data) in enumerate(seeded)]
    assert len(fold_schedule_events(written).active) == 1  # sound under the rules it was written
    host = FakeHost(start_ms=monday + DAY + HOUR)
    zone_data_moved(monkeypatch, SHANGHAI, "Asia/Bangkok")
    harness = Harness(host, seed_events=seeded, runtime=runtime)
    assert harness.status.fault is None
    assert [view["id"] for view in listed(harness)] == ["schedule-1"]
