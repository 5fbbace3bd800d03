"""The owner folds only the log suffix it has not seen."""

from __future__ import annotations

from pytest_mock import MockerFixture

import actors._schedule_owner as owner_module
import messages._fold as fold_module
from actors._runtime import Runtime
from host_bridge.testing import FakeHost
from messages._fold import fold_schedule_events
from messages._records import SCHEDULE_CHANGE_TYPE
from tests.owner.harness import Harness


def test_tool_calls_fold_only_new_events(
    host: FakeHost, runtime: Runtime, mocker: MockerFixture
) -> None:
    noise = tuple(("message", {"role": "user", "n": i}) for i in range(100_000))
    full = mocker.spy(owner_module, "fold_schedule_events")
    incremental = mocker.spy(owner_module, "continue_fold")
    harness = Harness(host, seed_events=noise, runtime=runtime)
    assert full.call_count == 1  # the first fold reads the whole log once
    for i in range(5):
        harness.created(f"r{i}", 60 + i)
    listed = harness.value(harness.list_schedules(), "list")
    assert full.call_count == 1
    assert incremental.call_count > 0
    for call, result in zip(incremental.call_args_list, incremental.spy_return_list, strict=True):
        folded, events = call.args
        assert len(events) - folded.end <= 1  # each fold saw at most the one new event
        assert result.end == len(events)
    # and the incremental result equals a full refold of the same log
    refolded = fold_schedule_events(harness.session.events)
    assert [r.id for r in refolded.active] == [v["id"] for v in listed["schedules"]]


def test_an_owner_folds_its_own_creates_and_deletes_without_decoding_them(
    host: FakeHost, runtime: Runtime, mocker: MockerFixture
) -> None:
    harness = Harness(host, runtime=runtime)
    decoded = mocker.spy(fold_module, "decode_schedule_change")
    for i in range(3):
        harness.created(f"r{i}", 60 + i)
    harness.value(harness.delete("schedule-2"), "delete")
    listed = harness.value(harness.list_schedules(), "list")
    owned = [e for e in harness.session.events if e.type == SCHEDULE_CHANGE_TYPE]
    assert len(owned) == 4
    assert decoded.call_count == 0  # the owner read none of its own four changes back
    refolded = fold_schedule_events(harness.session.events)
    assert [r.id for r in refolded.active] == ["schedule-1", "schedule-3"]
    assert [v["id"] for v in listed["schedules"]] == ["schedule-1", "schedule-3"]
    assert [v["scheduledAt"] for v in listed["schedules"]] == [
        r.scheduled_at for r in refolded.active
    ]
