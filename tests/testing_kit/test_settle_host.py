"""settle_host on the fake and the embedded host; FakeHost.install_schedule, the start-up flush."""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import Future

import pytest

from actors._runtime import Runtime
from host_bridge._plugin import SchedulePlugin, WakePolicy, install_schedule
from host_bridge.embedded.agents import Turn
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.protocols import Session
from host_bridge.testing import (
    PENDING,
    FakeActivation,
    FakeHost,
    FakeSession,
    assert_delivered_once,
    call_tool,
    call_tool_json,
    settle_host,
)
from host_bridge.testing._clock import DEFAULT_START_MS
from host_bridge.testing._settle import settle_all
from messages._instant import format_instant
from messages._records import SCHEDULE_CHANGE_TYPE

AT_START = format_instant(DEFAULT_START_MS)


@pytest.fixture
def host(runtime: Runtime) -> FakeHost:
    fake = FakeHost()
    fake.install_schedule(runtime=runtime)
    return fake


def test_spawn_root_returns_after_the_owner_started(host: FakeHost) -> None:
    agent = host.spawn_root()
    assert host.sessions.flush_count == 1  # the start-up drive's preflight, already done
    host.sessions.script(False)  # so this goes to the next flush: the tool's preflight
    value = call_tool_json(host, agent, "schedule_list", {})
    assert value["code"] == "persistence_uncertain"
    assert host.sessions.flush_count == 2
    host.dispose_plugins()


def test_an_outcome_scripted_before_spawn_root_goes_to_the_start_up_flush(host: FakeHost) -> None:
    host.sessions.script(False)
    agent = host.spawn_root()
    assert host.sessions.scripted() == []
    assert host.sessions.flushes[0].outcome is False
    assert "schedules" in call_tool_json(host, agent, "schedule_list", {})
    host.dispose_plugins()
    with pytest.raises(LookupError, match="no plugin was installed"):
        _ = host.plugin


def test_settle_host_runs_timers_work_and_optionally_turns(host: FakeHost) -> None:
    agent = host.spawn_root()
    call_tool(host, agent, "schedule_create", {"prompt": "tea", "after_seconds": 60})
    host.timers.advance(60_000)  # the owner delivers on its own thread
    settle_host(host)
    assert_delivered_once(agent.session, "schedule-1", presented=agent.received)
    assert len(agent.queued) == 1 and agent.turns == []  # a fake agent's turn waits for the test
    flushes = host.sessions.flush_count
    settle_host(host, run_turns=True)
    assert agent.queued == [] and len(agent.turns) == 1 and agent.settled
    # the turn's end reported "idle", which drove the owner once more (its log holds Schedule)
    assert host.sessions.flush_count == flushes + 1
    assert not host.plugin.status().owners[0].busy
    host.dispose_plugins()


def test_settle_host_does_not_wait_for_a_flush_the_test_holds(host: FakeHost) -> None:
    agent = host.spawn_root()
    host.sessions.script(PENDING)
    pending = host.tools.submit("schedule_list", {}, agent=agent)
    settle_host(host)  # returns: only the test can release that flush
    assert host.plugin.status().owners[0].busy and not pending.done()
    host.sessions.release(True)
    settle_host(host)
    assert "schedules" in pending.result(timeout=5).value
    host.dispose_plugins()


class StuckAgent:
    """A non-fake agent that never becomes idle, or whose log grows at every look."""

    def __init__(self, session: Session, *, growing: bool = False) -> None:
        self.id = "stuck"
        self.session = session
        self.growing = growing

    def followup(self, message: object) -> None:
        raise NotImplementedError

    def reserve_turn_admission(self) -> None:
        return None

    def when_idle(self) -> Future[None]:
        future: Future[None] = Future()
        if self.growing:
            self.session.append("tick", None)
            future.set_result(None)
        return future


def test_an_agent_that_never_idles_times_out_by_name() -> None:
    host = FakeHost()
    host.agents.create_root(StuckAgent(host.new_session("s")))
    with pytest.raises(TimeoutError, match=r"agent 'stuck' did not become idle within 0\.05"):
        settle_host(host, timeout=0.05)


def test_a_host_that_keeps_changing_gives_up_after_max_rounds() -> None:
    host = FakeHost()
    session: FakeSession = host.new_session("s")
    host.agents.create_root(StuckAgent(session, growing=True))
    with pytest.raises(RuntimeError, match="did not settle within 3 rounds"):
        settle_host(host.agents, max_rounds=3)  # an AgentRegistry works as the host too
    with pytest.raises(TypeError, match="neither an AgentRegistry"):
        settle_host(object())


class Model:
    """Records every reminder text it is shown, in the agent's turn thread."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, turn: Turn) -> str | None:
        if turn.message.text.startswith("[SCHEDULE REMINDER"):
            with self.lock:
                self.texts.append(turn.message.text)
            return "presented"
        return None


def test_settle_host_waits_for_embedded_turns(
    embedded_host: EmbeddedHost, embedded_plugin: SchedulePlugin
) -> None:
    model = Model()
    agent = embedded_host.spawn_root(model=model, agent_id="chat")
    value = call_tool_json(
        embedded_host, "chat", "schedule_create", {"prompt": "stand up", "every_seconds": 300}
    )
    embedded_host.timers.advance(300_000)  # type: ignore[attr-defined]
    settle_host(embedded_host, embedded_plugin)
    assert len(model.texts) == 1  # the reminder's turn has run: settle_host waited for it
    assert agent.status == "idle"
    first = assert_delivered_once(
        agent.session, "schedule-1", occurrence_at=value["scheduledAt"], presented=model.texts
    )
    embedded_host.timers.advance(300_000)  # type: ignore[attr-defined]
    settle_host(embedded_host, embedded_plugin)
    assert len(model.texts) == 2
    with pytest.raises(AssertionError, match="pass occurrence_at="):
        assert_delivered_once(agent.session, "schedule-1")
    assert first.every


def test_settle_host_waits_while_a_turn_is_running(
    embedded_host: EmbeddedHost, embedded_plugin: SchedulePlugin
) -> None:
    go_on = threading.Event()
    seen: list[str] = []

    def model(turn: Turn) -> str | None:
        go_on.wait(10)  # holds the turn until the test lets it finish
        seen.append(turn.message.text)
        return None

    agent = embedded_host.spawn_root(model=model, agent_id="busy")
    agent.prompt("hello")
    with pytest.raises(TimeoutError, match="agent 'busy' did not become idle"):
        settle_host(embedded_host, embedded_plugin, timeout=0.2)
    go_on.set()
    settle_host(embedded_host, embedded_plugin)
    assert seen == ["hello"]
    assert agent.status == "idle"


# --- activations of cold sessions -------------------------------------------------------------


def _cold_session_host(runtime: Runtime) -> tuple[FakeHost, FakeActivation, SchedulePlugin]:
    """A fake host whose activation holds every activation until the test completes it."""
    fake = FakeHost()
    activation = FakeActivation(fake, hold=True)
    schedule = {"id": "schedule-1", "kind": "at", "prompt": "tea", "scheduledAt": AT_START}
    change = {"version": 1, "operation": "create", "schedule": schedule}
    activation.store("cold", [(SCHEDULE_CHANGE_TYPE, change)])  # due now
    context = dataclasses.replace(fake.context(), activation=activation)
    plugin = install_schedule(context, runtime=runtime, wake_policy=WakePolicy(rescan_ms=60_000))
    return fake, activation, plugin


def test_settle_host_waits_for_an_activation_in_flight_and_names_it(runtime: Runtime) -> None:
    fake, activation, plugin = _cold_session_host(runtime)
    assert plugin.wake_up is not None
    settle_all(plugin.wake_up)
    assert activation.held == ["cold"]  # the wake-up actor is waiting for the host
    with pytest.raises(TimeoutError, match="activation of a cold session"):
        settle_host(fake, plugin, timeout=0.2)  # the held future never resolves by itself
    agent = activation.complete("cold")
    assert agent is not None
    settle_host(fake, plugin)
    assert_delivered_once(agent.session, "schedule-1")
    plugin.dispose().result(timeout=10)


def test_settle_host_returns_after_an_activation_resolved_on_another_thread(
    runtime: Runtime,
) -> None:
    fake, activation, plugin = _cold_session_host(runtime)
    assert plugin.wake_up is not None
    settle_all(plugin.wake_up)
    completer = threading.Thread(target=activation.complete, args=("cold",))
    completer.start()  # the host brings the session back while the test settles
    settle_host(fake, plugin)
    completer.join(timeout=10)
    (agent,) = activation.activated
    assert_delivered_once(agent.session, "schedule-1")
    status = plugin.wait_activations()
    assert status is not None and status.in_flight == 0 and status.activations == 1
    plugin.dispose().result(timeout=10)


def test_wait_activations_without_activation_is_none(host: FakeHost) -> None:
    assert host.plugin.wait_activations() is None
    host.dispose_plugins()
