"""The fixtures reach any test session through the ``dsh_schedule`` pytest11 entry point."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from host_bridge.testing import FakeClock, FakeHost, call_tool_json

pytest_plugins = ["pytester"]


def test_the_plugin_is_registered_as_an_entry_point() -> None:
    (entry,) = [e for e in entry_points(group="pytest11") if e.name == "dsh_schedule"]
    assert entry.value == "host_bridge.testing._pytest_plugin"


def test_the_kit_itself_does_not_import_pytest() -> None:
    probe = "import sys, host_bridge.testing; print('pytest' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


def test_fixtures_are_there_in_our_own_run(fake_host: FakeHost, fake_clock: FakeClock) -> None:
    assert fake_host.clock is fake_clock
    agent = fake_host.spawn_root()
    assert fake_host.sessions.flush_count == 1  # spawn_root waited for the owner's start-up
    assert call_tool_json(fake_host, agent, "schedule_list", {}) == {"schedules": []}


def test_a_host_authors_test_file_uses_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from host_bridge.testing import assert_delivered_once, call_tool_json, settle_host

        plugins = []

        def test_delivery(fake_host, fake_clock):
            agent = fake_host.spawn_root("me")
            created = call_tool_json(
                fake_host, "me", "schedule_create", {"prompt": "tea", "after_seconds": 60}
            )
            fake_host.timers.advance(60_000)
            settle_host(fake_host, run_turns=True)
            dispatch = assert_delivered_once(agent.session, created["id"], presented=agent.received)
            assert dispatch.prompt == "tea"
            plugins.append(fake_host.plugin)

        def test_the_plugin_was_disposed_at_teardown():
            assert plugins[0].status().disposed

        def test_embedded(embedded_host, embedded_plugin, tmp_path):
            agent = embedded_host.spawn_root(agent_id="a")
            value = call_tool_json(
                embedded_host, agent, "schedule_create", {"prompt": "x", "after_seconds": 5}
            )
            assert value["id"] == "schedule-1"
            assert embedded_host.data_dir.parent == tmp_path
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_the_documented_example_passes(pytester: pytest.Pytester) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "host-integration.md"
    section = docs.read_text(encoding="utf-8").split("## 12. Testing with the kit", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    pytester.makepyfile(test_example=example)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
