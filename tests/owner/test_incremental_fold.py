"""The owner folds only the log suffix it has not seen."""

from __future__ import annotations

from pytest_mock import MockerFixture

import actors.schedule_owner as owner_module
from actors.runtime import Runtime
from host_bridge.testing import FakeHost
from messages._fold import fold_schedule_events
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
