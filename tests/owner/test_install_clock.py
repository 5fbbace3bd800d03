"""install_schedule samples the host's clock once and refuses one it cannot use."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import pytest

from host_bridge._plugin import CompositionError, install_schedule
from host_bridge.protocols import wall_clock_ms
from host_bridge.testing import FakeHost, settle
from messages._instant import MAX_INSTANT_MS, MIN_INSTANT_MS


def _broken() -> int:
    raise OSError("no clock here: secret backend detail")


@pytest.mark.parametrize(
    ("clock", "says"),
    [
        (lambda: time.time() * 1000, "it returned a float"),  # the reported case
        (lambda: 1_767_225_600_000.0, "lambda: int(time.time() * 1000)"),
        (lambda: math.nan, "it returned a float nan"),
        (lambda: True, "it returned a bool"),
        (lambda: "1767225600000", "it returned a str"),
        (lambda: None, "it returned a NoneType"),
        (lambda: MAX_INSTANT_MS + 1, "an int after year 9999"),
        (lambda: MIN_INSTANT_MS - 1, "an int before year 1"),
        (lambda: 10**100_000, "an int after year 9999"),
        (_broken, "calling it raised OSError"),
        (42, "it is not callable (int)"),
    ],
    ids=[
        "time-times-1000",
        "integral-float",
        "nan",
        "bool",
        "string",
        "none",
        "past-9999",
        "before-year-1",
        "huge",
        "raises",
        "not-callable",
    ],
)
def test_an_unusable_clock_is_a_composition_error_saying_what_is_wrong(
    clock: Callable[[], object], says: str
) -> None:
    host = FakeHost()
    context = dataclasses.replace(host.context(), clock=clock)  # type: ignore[arg-type]
    with pytest.raises(CompositionError) as raised:
        install_schedule(context)
    message = str(raised.value)
    assert message.startswith("HostContext.clock must return the wall clock as whole epoch")
    assert says in message
    assert "secret backend detail" not in message
    assert host.agents.listener_counts() == {"created": 0, "status": 0, "disposed": 0}


@pytest.mark.parametrize("now", [MIN_INSTANT_MS, 0, MAX_INSTANT_MS - 60_000])
def test_a_clock_in_range_installs_and_creates(now: int) -> None:
    host = FakeHost()
    host.clock.set(now)
    plugin = install_schedule(host.context())
    agent = host.spawn_root("agent-1")
    owner = plugin.owner_of(agent)
    assert owner is not None
    settle(owner)
    value = host.tools.execute(
        "schedule_create", {"prompt": "p", "after_seconds": 1}, agent=agent, timeout=10
    ).value
    assert value["state"] == "scheduled"
    plugin.dispose().result(timeout=10)


def test_the_wall_clock_passes() -> None:
    host = FakeHost()
    install_schedule(dataclasses.replace(host.context(), clock=wall_clock_ms)).dispose().result(10)
