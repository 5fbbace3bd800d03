"""AsyncHost on PostgreSQL and on the gevent runtime: the same turns, the same guarantees."""

from __future__ import annotations

from pathlib import Path

from host_bridge.aio import AsyncHost
from host_bridge.testing import FakeClock, FakeTimers, advance_async, settle_async
from tests.aio.test_async_host import TIMEOUT, Runner


async def test_on_postgresql_a_second_host_wakes_the_session_the_first_one_closed(
    tmp_path: Path, pg_url: str
) -> None:
    clock = FakeClock()
    first, second = Runner(), Runner()
    timers = FakeTimers(clock)
    # The first host wakes nothing itself, so the second one alone delivers.
    async with AsyncHost(first, store=pg_url, data_dir=tmp_path, clock=clock, wake=False) as one:
        chat = await one.open("u-1")
        assert await chat.send("remind 60 stretch") == "schedule-1"
        await chat.close()
        async with AsyncHost(
            second, store=pg_url, data_dir=tmp_path, clock=clock, timers=timers
        ) as two:
            await advance_async(two, timers, 60_000, timeout=TIMEOUT)
            assert len(second.reminders) == 1  # woken and delivered by the other host
            assert first.reminders == []
    async with AsyncHost(first, store=pg_url, data_dir=tmp_path, clock=clock) as again:
        chat = await again.open("u-1")
        assert await chat.send("remind 60 water") == "schedule-2"  # the log went on from there


async def test_on_the_gevent_runtime_turns_still_run_on_the_hosts_loop(tmp_path: Path) -> None:
    clock = FakeClock()
    timers = FakeTimers(clock)
    runner = Runner()
    async with AsyncHost(
        runner, data_dir=tmp_path, clock=clock, timers=timers, runtime="gevent"
    ) as host:
        chat = await host.open("u-1")
        assert await chat.send("remind 60 stretch") == "schedule-1"
        timers.advance(60_000)
        await settle_async(host, timeout=TIMEOUT)
        assert len(runner.reminders) == 1
        assert len(runner.loops) == 1
