"""The fixtures are an opt-in pytest plugin: a suite enables it, nothing else sees it."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

from host_bridge.testing import FakeClock, FakeHost, call_tool_json

pytest_plugins = ["pytester"]

PLUGIN = "host_bridge.testing.pytest_plugin"
OPT_IN = f'pytest_plugins = ["{PLUGIN}"]\n'
DOCS = Path(__file__).resolve().parents[2] / "docs" / "host-integration.md"

_SEES_THE_FIXTURES = """
def test_sees_the_fixtures(request):
    request.getfixturevalue("fake_host")
"""


def test_the_distribution_registers_no_pytest_plugin() -> None:
    entries = distribution("dsh-tool-schedule").entry_points
    assert [entry for entry in entries if entry.group == "pytest11"] == []


def _run_pytest(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh pytest process in ``where`` (not in-process: plugins would carry over)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=where,
        check=False,
    )


def test_a_session_without_the_opt_in_does_not_see_the_fixtures(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(_SEES_THE_FIXTURES, encoding="utf-8")
    done = _run_pytest(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fixture 'fake_host' not found" in done.stdout
    assert PLUGIN not in done.stdout


@pytest.mark.parametrize("how", ["conftest", "-p"])
def test_a_session_with_the_opt_in_sees_the_fixtures(tmp_path: Path, how: str) -> None:
    (tmp_path / "test_probe.py").write_text(_SEES_THE_FIXTURES, encoding="utf-8")
    if how == "conftest":
        (tmp_path / "conftest.py").write_text(OPT_IN, encoding="utf-8")
        done = _run_pytest(tmp_path)
    else:
        done = _run_pytest(tmp_path, "-p", PLUGIN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


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


HOST_INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""
"""The host author's pytest settings: pytest-asyncio (installed here) warns without a loop scope."""


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
    pytester.makeconftest(OPT_IN)
    pytester.makeini(HOST_INI)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_the_documented_example_passes(pytester: pytest.Pytester) -> None:
    section = DOCS.read_text(encoding="utf-8").split("## 12. Testing with the kit", 1)[1]
    conftest = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert conftest == OPT_IN  # the opt-in the section shows first
    example = section.split("An example test", 1)[1].split("```python\n", 1)[1]
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_example=example.split("```", 1)[0])
    pytester.makeini(HOST_INI)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
