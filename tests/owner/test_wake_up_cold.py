"""The wake-up actor with a host that delivers cold: passes instead of one activation each.

Mailbox level, both runtimes, fake time, through the kit's
:class:`~host_bridge.testing.FakeColdActivation`: one pass per herd, passes
back to back while they take sessions, none while nothing is due (no busy
loop), the sessions a pass hands back activated a bounded number at a time,
what the actor manages skipped, a session a pass cannot deliver backed off, a
failed pass or a failed commit retried on the timer, and dispose waiting for
the pass in flight.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future

import pykka
import pytest

from actors._runtime import Runtime
from host_bridge._plugin import WakePolicy
from host_bridge.testing import FakeColdActivation, FakeHost
from host_bridge.testing._settle import settle_all
from tests.owner.test_wake_up import START, Waker, reminder


def cold_waker(
    runtime: Runtime,
    policy: WakePolicy | None = None,
    *,
    hold_passes: bool = False,
    hold: bool = False,
    stored: dict[str, list[tuple[str, object]]] | None = None,
    owing: tuple[str, ...] = (),
) -> tuple[Waker, FakeColdActivation]:
    made: list[FakeColdActivation] = []

    def build(host: FakeHost) -> FakeColdActivation:
        activation = FakeColdActivation(host, hold=hold, hold_passes=hold_passes)
        for session_id in owing:
            activation.owe_turn(session_id)
        made.append(activation)
        return activation

    w = Waker(runtime, policy, stored=stored, activation=build)
    return w, made[0]


def passes(w: Waker) -> list[tuple[object, ...]]:
    return w.host.journal.of("cold-pass")


def delivered(w: Waker) -> list[str]:
    return [e[1] for e in w.host.journal.of("cold-delivered")]


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


def test_a_herd_due_at_once_is_delivered_in_one_pass_without_activations(
    runtime: Runtime,
) -> None:
    stored = {f"s{i}": [reminder("schedule-1", START + 60_000)] for i in range(5)}
    w, _ = cold_waker(runtime, stored=stored)
    assert passes(w) == []  # nothing due: no pass at all
    assert w.host.timers.armed() == [60_000]
    w.advance(59_999)
    assert passes(w) == []  # never early
    w.advance(1)
    assert len(passes(w)) == 1
    assert sorted(delivered(w)) == [f"s{i}" for i in range(5)]
    assert w.activated() == []  # no agent for any of them
    status = w.plugin.status().wake_up
    assert status is not None and (status.cold_passes, status.cold_deliveries) == (1, 5)
    assert status.activations == 0
    w.advance(600_000)
    assert len(passes(w)) == 1  # nothing due any more: no busy loop, no empty passes


def test_passes_follow_each_other_while_they_take_a_full_batch(runtime: Runtime) -> None:
    stored = {f"s{i}": [reminder("schedule-1", START + 1_000)] for i in range(5)}
    w, _ = cold_waker(runtime, WakePolicy(rescan_ms=60_000, cold_batch=2), stored=stored)
    w.advance(1_000)
    assert [p[1] for p in passes(w)] == [2, 2, 2]  # 2 + 2 + 1, back to back
    assert sorted(delivered(w)) == [f"s{i}" for i in range(5)]
    assert w.activated() == []


def test_sessions_a_pass_hands_back_are_activated_a_bounded_number_at_a_time(
    runtime: Runtime,
) -> None:
    stored = {f"s{i}": [reminder("schedule-1", START + 1_000)] for i in range(4)}
    policy = WakePolicy(rescan_ms=60_000, max_concurrent=2)
    w, cold = cold_waker(runtime, policy, hold=True, stored=stored, owing=("s0", "s1", "s2"))
    w.advance(1_000)
    assert delivered(w) == ["s3"]
    assert [e[1] for e in w.host.journal.of("cold-handed-back")] == ["s0", "s1", "s2"]
    assert w.activated() == ["s0", "s1"]  # max_concurrent
    assert passes(w)[-1][2] == ("s0", "s1", "s2")  # the next pass skipped what is queued
    cold.complete("s0")
    w.settle()
    assert w.activated() == ["s0", "s1", "s2"]
    cold.complete("s1")
    cold.complete("s2")
    w.settle()
    assert sorted(w.dispatched(a)[0] for a in cold.activated) == ["schedule-1"] * 3


def test_a_pass_skips_the_sessions_the_actor_manages_live(runtime: Runtime) -> None:
    policy = WakePolicy(rescan_ms=60_000, quiet_period_ms=3_600_000)
    stored = {
        "owed": [reminder("schedule-1", START + 1_000), reminder("schedule-2", START + 9_000)]
    }
    w, cold = cold_waker(runtime, policy, stored=stored, owing=("owed",))
    w.advance(1_000)
    assert w.activated() == ["owed"]  # live now, its owner delivers
    cold.store("other", [reminder("schedule-1", START + 5_000)])
    cold.moved()
    w.advance(4_000)
    assert passes(w)[-1][2] == ("owed",)  # live here: its owner delivers, not a pass
    assert delivered(w) == ["other"]
    assert w.dispatched(w.woken()) == ["schedule-1"]


def test_a_session_a_pass_reports_stuck_is_backed_off_and_does_not_fill_the_batches(
    runtime: Runtime,
) -> None:
    stored = {name: [reminder("schedule-1", START + 1_000)] for name in ("a-stuck", "b-fine")}
    policy = WakePolicy(rescan_ms=600_000, cold_batch=1, retry_ms=5_000)
    w, cold = cold_waker(runtime, policy, stored=stored)
    cold.stick("a-stuck")
    w.advance(1_000)
    assert [e[1] for e in w.host.journal.of("cold-stuck")] == ["a-stuck"]  # once: then skipped
    assert delivered(w) == ["b-fine"]  # the stuck one did not take every batch
    assert passes(w)[-1][2] == ("a-stuck",)
    status = w.plugin.status().wake_up
    assert status is not None and status.backing_off == 1
    cold.stick("a-stuck", False)
    w.advance(4_999)
    assert delivered(w) == ["b-fine"]
    w.advance(1)  # the back-off ends: a pass takes it again
    assert delivered(w) == ["b-fine", "a-stuck"]
    assert len(w.host.journal.of("cold-stuck")) == 1


def test_a_session_that_stays_stuck_is_backed_off_longer_each_time(runtime: Runtime) -> None:
    stored = {"stuck": [reminder("schedule-1", START + 1_000)]}
    policy = WakePolicy(rescan_ms=600_000, retry_ms=1_000, max_retry_ms=4_000)
    w, cold = cold_waker(runtime, policy, stored=stored)
    cold.stick("stuck")

    def reports() -> int:
        return len(w.host.journal.of("cold-stuck"))

    w.advance(1_000)
    counts = [reports()]
    for step in (1_000, 2_000, 4_000, 4_000):  # doubling, up to max_retry_ms
        w.advance(step - 1)
        assert reports() == counts[-1]  # not before its back-off ends
        w.advance(1)
        counts.append(reports())
    assert counts == [1, 2, 3, 4, 5]


def test_a_failed_pass_is_tried_again_on_the_timer(runtime: Runtime) -> None:
    stored = {"s1": [reminder("schedule-1", START + 1_000)]}
    w, cold = cold_waker(runtime, WakePolicy(rescan_ms=5_000), stored=stored)
    cold.fail_passes = 1
    w.advance(1_000)
    assert len(passes(w)) == 1 and delivered(w) == []
    status = w.plugin.status().wake_up
    assert status is not None and status.failures == 1
    w.advance(4_999)
    assert len(passes(w)) == 1  # no retry loop
    w.advance(1)
    assert delivered(w) == ["s1"]


def test_a_pass_holding_uncommitted_deliveries_is_followed_by_another_on_the_timer(
    runtime: Runtime,
) -> None:
    stored = {"s1": [reminder("schedule-1", START + 1_000)]}
    w, cold = cold_waker(runtime, WakePolicy(rescan_ms=5_000), stored=stored)
    cold.report_waiting(1)  # its commit failed: the pass keeps it and asks for another
    w.advance(1_000)
    count = len(passes(w))
    w.advance(5_000)
    assert len(passes(w)) == count + 1  # nothing is due, yet a pass retries the commit
    cold.report_waiting(0)
    w.advance(5_000)
    after = len(passes(w))
    w.advance(60_000)
    assert len(passes(w)) == after  # committed: no more passes


def test_one_pass_at_a_time_and_dispose_waits_for_it(runtime: Runtime) -> None:
    stored = {"s1": [reminder("schedule-1", START + 1_000)]}
    w, cold = cold_waker(runtime, WakePolicy(rescan_ms=1_000), hold_passes=True, stored=stored)
    w.advance(5_000)  # timers fire while the pass is held
    assert len(passes(w)) == 1 and cold.pending_passes == 1
    wake = w.plugin.wake_up
    assert wake is not None
    disposed: Future[None] = w.plugin.dispose()
    settle_all(wake)
    assert not disposed.done()
    cold.finish_pass()
    disposed.result(timeout=5)
    assert delivered(w) == ["s1"]
    assert len(passes(w)) == 1  # none after dispose
