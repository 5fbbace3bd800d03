"""dispatches / assert_delivered_once / reminder_mentions, on built logs and on a fake host."""

from __future__ import annotations

from typing import Any

import pytest

from host_bridge.protocols import SessionEvent, TextBlock, UserMessage
from host_bridge.testing import (
    Dispatch,
    FakeHost,
    FakeSession,
    assert_delivered_once,
    call_tool,
    dispatches,
    settle_host,
)
from host_bridge.testing._delivery import reminder_mentions
from messages._creation import create_after_schedule_record, create_every_schedule_record
from messages._errors import ScheduleLogError
from messages._instant import format_instant
from messages._presentation import render_reminder_batch_framing, render_reminder_framing
from messages._records import SCHEDULE_CHANGE_TYPE, CreateChange, DispatchChange

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z
FIVE_MINUTES = 300_000


def log(*changes: Any, before: int = 0) -> list[SessionEvent]:
    """A contiguous log: ``before`` other events, then one schedule/change per change."""
    events = [SessionEvent("message", i, 0, {"text": i}) for i in range(before)]
    for change in changes:
        events.append(SessionEvent(SCHEDULE_CHANGE_TYPE, len(events), 0, change.to_json()))
    return events


AFTER = create_after_schedule_record("schedule-1", "tea", 60, T0)
EVERY = create_every_schedule_record("schedule-2", "stand up", 300, T0)


def test_dispatches_decode_one_shot_and_every_in_log_order() -> None:
    events = log(
        CreateChange(AFTER),
        CreateChange(EVERY),
        DispatchChange("schedule-1"),
        DispatchChange("schedule-2", format_instant(T0 + FIVE_MINUTES)),
        DispatchChange("schedule-2", format_instant(T0 + 3 * FIVE_MINUTES + 1234)),
        before=2,
    )
    assert dispatches(events) == [
        Dispatch(4, "schedule-1", AFTER.scheduled_at, "tea"),
        Dispatch(
            5,
            "schedule-2",
            format_instant(T0 + FIVE_MINUTES),
            "stand up",
            format_instant(T0 + FIVE_MINUTES),
        ),
        Dispatch(
            6,
            "schedule-2",
            format_instant(T0 + 3 * FIVE_MINUTES),
            "stand up",
            format_instant(T0 + 3 * FIVE_MINUTES + 1234),
        ),
    ]
    assert [d.every for d in dispatches(events)] == [False, True, True]


def test_a_fork_reports_only_its_own_dispatches() -> None:
    parent = log(CreateChange(AFTER), DispatchChange("schedule-1"))
    child_own = create_after_schedule_record("schedule-1", "again", 5, T0)
    seed = [SessionEvent(e.type, e.seq, e.time, e.data) for e in parent]
    session = FakeSession(
        "child",
        seed_events=[*seed, (SCHEDULE_CHANGE_TYPE, CreateChange(child_own).to_json())],
        seed_length=2,
    )
    session.append(SCHEDULE_CHANGE_TYPE, DispatchChange("schedule-1").to_json())
    assert dispatches(session) == [Dispatch(3, "schedule-1", child_own.scheduled_at, "again")]
    assert len(dispatches(session.events)) == 2  # a bare event list has no seed length


def test_a_malformed_change_raises() -> None:
    events = [SessionEvent(SCHEDULE_CHANGE_TYPE, 0, 0, {"operation": "dispatch"})]
    with pytest.raises(ScheduleLogError):
        dispatches(events)


def test_delivered_once_returns_the_dispatch() -> None:
    events = log(CreateChange(AFTER), DispatchChange("schedule-1"))
    shown = [UserMessage((TextBlock(render_reminder_framing(AFTER)),), {})]
    found = assert_delivered_once(events, "schedule-1", presented=shown)
    assert found == Dispatch(1, "schedule-1", AFTER.scheduled_at, "tea")


def test_no_dispatch_fails_with_what_was_found() -> None:
    events = log(CreateChange(AFTER), CreateChange(EVERY), DispatchChange("schedule-1"))
    with pytest.raises(AssertionError) as failure:
        assert_delivered_once(events, "schedule-2")
    assert str(failure.value) == (
        "expected exactly one dispatch of 'schedule-2', found 0: none; every dispatch in the "
        f"log: schedule-1 at seq 2 (occurrence {AFTER.scheduled_at})"
    )


def test_two_dispatches_fail_listing_both() -> None:
    # An id reused after its dispatch (a log the fold would reject) dispatched twice.
    events = log(
        CreateChange(AFTER),
        DispatchChange("schedule-1"),
        CreateChange(AFTER),
        DispatchChange("schedule-1"),
    )
    with pytest.raises(
        AssertionError,
        match=r"found 2: schedule-1 at seq 1 \(occurrence "
        r".*\), schedule-1 at seq 3",
    ):
        assert_delivered_once(events, "schedule-1")


def test_every_reminders_are_checked_per_occurrence() -> None:
    second = format_instant(T0 + 2 * FIVE_MINUTES)
    events = log(
        CreateChange(EVERY),
        DispatchChange("schedule-2", format_instant(T0 + FIVE_MINUTES)),
        DispatchChange("schedule-2", format_instant(T0 + 2 * FIVE_MINUTES + 5)),
    )
    with pytest.raises(AssertionError, match=r"found 2: .*pass occurrence_at= to check one"):
        assert_delivered_once(events, "schedule-2")
    assert assert_delivered_once(events, "schedule-2", occurrence_at=second).seq == 2
    with pytest.raises(
        AssertionError, match=r"of 'schedule-2' at 2026-01-01T00:15:00.000Z, found 0"
    ):
        assert_delivered_once(
            events, "schedule-2", occurrence_at=format_instant(T0 + 3 * FIVE_MINUTES)
        )


def test_presented_twice_or_never_fails() -> None:
    events = log(CreateChange(AFTER), DispatchChange("schedule-1"))
    text = render_reminder_framing(AFTER)
    with pytest.raises(AssertionError, match=r"presented 2 times \(messages \[0, 2\] of 3\)"):
        assert_delivered_once(events, "schedule-1", presented=[text, "hello", text])
    with pytest.raises(AssertionError, match=r"presented 0 times .* reminders presented: \[\]"):
        assert_delivered_once(events, "schedule-1", presented=["hello"])


def test_reminder_mentions_reads_both_framings() -> None:
    one_shot = render_reminder_framing(AFTER)
    assert reminder_mentions(one_shot) == (("schedule-1", AFTER.scheduled_at),)
    batch = render_reminder_batch_framing([(EVERY, "2026-01-01T00:05:00.000Z")])
    message = UserMessage((TextBlock(batch),), {})
    assert reminder_mentions(message) == (("schedule-2", "2026-01-01T00:05:00.000Z"),)
    assert reminder_mentions("[SCHEDULE REMINDER]\nschedule_id_json: {") == ()
    assert reminder_mentions("[SCHEDULE REMINDER BATCH]\nreminders_json: [1]") == ()
    assert reminder_mentions("remind me") == ()


def test_a_fake_host_delivery_reads_back_once(fake_host: FakeHost) -> None:
    agent = fake_host.spawn_root()
    call_tool(fake_host, agent, "schedule_create", {"prompt": "tea", "after_seconds": 60})
    fake_host.timers.advance(60_000)
    settle_host(fake_host)
    found = assert_delivered_once(agent.session, "schedule-1", presented=agent.received)
    assert found.prompt == "tea"
