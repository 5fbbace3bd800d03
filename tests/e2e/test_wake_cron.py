"""Waking stored sessions for their ``cron`` records: real SQLite, real actors, fake time.

On both runtimes. The due index holds a cron record's target; a host whose
activation delivers cold (:class:`~host_bridge.embedded.cold.ColdActivation`)
delivers each due session once, never early, in one batch turn with its
``every`` records (stored target, then create order), after an outage only the
latest due occurrence, and indexes the next occurrence; a session whose
checkpoint holds an advanced cron record is delivered as a full fold of its
log decides. A host that activates instead wakes the session at the target and
its owner delivers.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors._runtime import Runtime
from host_bridge._plugin import WakePolicy, install_schedule
from host_bridge.embedded.agents import Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.inbox import INBOX_EVENT
from host_bridge.embedded.paths import store_path
from host_bridge.embedded.stores import DueEntry, EventStore
from host_bridge.testing import FakeClock, FakeTimers, assert_delivered_once
from messages._delivery import DeliverBatch, plan_delivery, reminder_delivery
from messages._fold import fold_schedule_events
from messages._instant import format_instant
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.changes import reopened
from tests.cli.helpers import deliveries, message, write_session
from tests.cron_records import (
    cron_create,
    cron_dispatch,
    cron_event,
    latest_between,
    next_after,
)
from tests.e2e.test_wake_cold import MINUTE, Rig, every, open_rig
from tests.e2e.test_wake_embedded import quiet

HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEKDAYS, SHANGHAI = "0 9 * * 1-5", "Asia/Shanghai"


class Recorder:
    """The model of activated sessions: records ``(session id, text)`` of each reminder turn."""

    def __init__(self) -> None:
        self.reminders: list[tuple[str, str]] = []

    def __call__(self, turn: Turn) -> str | None:
        if turn.message.text.startswith("[SCHEDULE REMINDER"):
            self.reminders.append((turn.agent.session.id, turn.message.text))
            return "Presented."
        return None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rigs() -> Iterator[list[Rig]]:
    made: list[Rig] = []
    yield made
    for rig in made:
        if rig.host.persistence is not None:
            rig.close()


def store_of(rig: Rig) -> EventStore:
    store = rig.host.persistence
    assert store is not None
    return store


def dispatched(data: Path, session_id: str) -> list[object]:
    log = reopened(store_path(data), session_id).events
    return [
        e.data
        for e in log
        if e.type == SCHEDULE_CHANGE_TYPE and e.data.get("operation") == "dispatch"
    ]


def test_the_due_index_holds_cron_targets_and_a_cold_pass_delivers_each_once(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    rules = {
        "weekdays": (WEEKDAYS, SHANGHAI),
        "mornings": ("0 8 * * *", "Europe/London"),
        "tea": ("30 9 * * *", "Asia/Kolkata"),  # 04:00 UTC
    }
    targets = {sid: next_after(e, z, now) for sid, (e, z) in rules.items()}
    for session_id, (expression, zone) in rules.items():
        created = cron_create("schedule-1", session_id, expression, zone, targets[session_id])
        write_session(data, session_id, [message("hi"), cron_event(created)])
    rig = open_rig(rigs, data, runtime, clock, rescan_ms=30 * DAY)
    store = store_of(rig)
    assert store.due_entries() == {sid: DueEntry(t, None) for sid, t in targets.items()}

    for session_id in sorted(rules, key=targets.__getitem__):
        target = targets[session_id]
        rig.advance(target - clock.now() - 1)
        assert session_id not in [s for s, _ in rig.turns.prompts()]  # never early
        rig.advance(1)
        assert [s for s, _ in rig.turns.prompts()].count(session_id) == 1
        expression, zone = rules[session_id]
        following = next_after(expression, zone, target)
        assert store.due_entry(session_id) == DueEntry(following, None)  # the next one indexed
        (turn,) = [t for t in rig.turns.turns if t.session_id == session_id]
        assert turn.message.text.splitlines()[0] == "[SCHEDULE REMINDER BATCH]"
        assert [r.occurrence_at for r in turn.reminders] == [format_instant(target)]
    assert rig.host.agents.roots() == () and rig.activation.activated == 0
    assert len(rig.turns.turns) == len(rules)  # none came due twice meanwhile
    rig.close()
    for session_id in rules:
        log = reopened(store_path(data), session_id).events
        assert deliveries(log) == (1, 1, 1)
        assert dispatched(data, session_id) == [cron_dispatch("schedule-1", targets[session_id])]


def test_a_cold_cron_and_every_batch_after_an_outage_is_one_turn_of_the_latest_occurrences(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    then = now - 10 * HOUR - 7_000  # the host was down for ten hours
    hourly = ("0 * * * *", "UTC")
    first_hour = next_after(*hourly, then)
    events = [
        every("schedule-1", "water", 3600, then),  # due an hour after `then`
        cron_event(cron_create("schedule-2", "pumps", *hourly, first_hour)),  # due before it
    ]
    write_session(data, "s1", events)
    rig = open_rig(rigs, data, runtime, clock, rescan_ms=30 * DAY)
    (turn,) = rig.turns.turns  # one turn, one occurrence each, no backlog
    assert [(r.schedule_id, r.occurrence_at) for r in turn.reminders] == [
        ("schedule-2", format_instant(latest_between(*hourly, first_hour, now))),
        ("schedule-1", format_instant(then + 10 * 3600_000)),
    ]
    following = min(next_after(*hourly, now), then + 11 * 3600_000)
    assert store_of(rig).due_entry("s1") == DueEntry(following, None)
    rig.close()
    again = open_rig(rigs, data, runtime, clock, rescan_ms=30 * DAY)  # a restart: nothing owed
    assert again.turns.turns == []
    again.close()
    assert dispatched(data, "s1") == [
        cron_dispatch("schedule-2", now),
        cron_dispatch("schedule-1", now),
    ]
    log = reopened(store_path(data), "s1").events
    assert [e.type for e in log].count(INBOX_EVENT) == 1


def test_a_cold_pass_from_a_checkpoint_with_an_advanced_cron_record_delivers_as_a_full_fold(
    tmp_path: Path, runtime: Runtime, clock: FakeClock, rigs: list[Rig]
) -> None:
    data, now = tmp_path / "data", clock.now()
    expression, zone = WEEKDAYS, SHANGHAI
    created = next_after(expression, zone, now - 2 * DAY)  # three weekdays: the last is ahead
    second = next_after(expression, zone, created + 3 * HOUR)
    events = [
        cron_event(cron_create("schedule-1", "standup", expression, zone, created)),
        message("thanks"),
        cron_event(cron_dispatch("schedule-1", created + 3 * HOUR)),  # accepted late
        cron_event(cron_dispatch("schedule-1", second)),
    ]
    write_session(data, "s1", events)
    with sqlite3.connect(store_path(data)) as db:
        ((next_seq,),) = db.execute(
            "SELECT next_seq FROM schedule_checkpoints WHERE session_id = 's1'"
        )
    assert next_seq == len(events)  # the cold pass starts from the checkpoint, not the log
    target = next_after(expression, zone, second)
    folded = fold_schedule_events(reopened(store_path(data), "s1").events)
    assert [r.target_ms for r in folded.active] == [target]
    rig = open_rig(rigs, data, runtime, clock, rescan_ms=30 * DAY)
    assert store_of(rig).due_entry("s1") == DueEntry(target, None)
    rig.advance(target - clock.now())
    plan = plan_delivery(folded, target)
    assert isinstance(plan, DeliverBatch)
    (turn,) = rig.turns.turns
    assert turn.message.text == reminder_delivery(plan).framing  # as the full fold decides
    rig.close()
    assert dispatched(data, "s1")[-1] == cron_dispatch("schedule-1", target)


def test_an_activating_host_wakes_a_cron_session_at_its_target_and_its_owner_delivers(
    tmp_path: Path, runtime: Runtime, clock: FakeClock
) -> None:
    data, now = tmp_path / "data", clock.now()
    target = next_after(WEEKDAYS, SHANGHAI, now)
    write_session(
        data, "s1", [cron_event(cron_create("schedule-1", "standup", WEEKDAYS, SHANGHAI, target))]
    )
    timers = FakeTimers(clock)
    host = EmbeddedHost(data, clock=clock, timers=timers, runtime=runtime)
    model = Recorder()
    host.enable_activation(model=model)
    context = dataclasses.replace(host.context(), clock_watch_ms=None)
    policy = WakePolicy(rescan_ms=30 * DAY, quiet_period_ms=60_000)
    plugin = install_schedule(context, runtime=runtime, wake_policy=policy)
    try:
        quiet(plugin, host)
        assert timers.armed() == [target - now]  # the wake-up actor's one timer
        timers.advance(target - now - 1)
        quiet(plugin, host)
        assert model.reminders == []
        timers.advance(1)
        quiet(plugin, host)
        ((session_id, text),) = model.reminders
        assert session_id == "s1"
        assert text.splitlines()[0] == "[SCHEDULE REMINDER BATCH]"
        assert text.splitlines()[-1] == (
            'reminders_json: [{"schedule_id":"schedule-1",'
            f'"occurrence_at":"{format_instant(target)}",'
            '"reminder_prompt":"standup"}]'
        )
        (agent,) = plugin.agents()
        assert_delivered_once(agent.session, "schedule-1")
        following = next_after(WEEKDAYS, SHANGHAI, target)
        (status,) = plugin.status().owners
        assert status.timer_delay_ms == following - target
        store = host.persistence
        assert store is not None
        assert store.due_entry("s1") == DueEntry(following, None)
    finally:
        plugin.dispose().result(timeout=10)
        assert host.close() is None
