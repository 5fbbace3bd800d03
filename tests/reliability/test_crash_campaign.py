"""A small crash campaign: SIGKILL the embedded host at every forced kill point and at random.

The full campaign is ``python bench/crash_campaign.py`` (docs/reliability.md).
Kills here are driven by the child's journal (after N lines, or once it
announces a pause), never by sleeping. Deliveries are counted from the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pykka
import pytest

from bench.crash_campaign import run_campaign

DELIVERY_WINDOW = ("followup", "dispatch-append", "in-turn")
COMMITS_AND_RANDOM = ("dispatch-commit", "create-commit", "random")


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root: Path = tmp_path_factory.mktemp("crash")
    found: dict[str, dict[str, Any]] = {}
    for name, modes in (("window", DELIVERY_WINDOW), ("commits", COMMITS_AND_RANDOM)):
        report = run_campaign(2, seed=7, modes=modes, steps=40, jitter_s=0.0, data=root / name)
        pykka.ActorRegistry.stop_all()
        found[name] = report.summary()
    return found


@pytest.mark.parametrize("name", ["window", "commits"])
def test_nothing_is_lost_corrupted_or_repeated(
    summaries: dict[str, dict[str, Any]], name: str
) -> None:
    summary = summaries[name]
    assert summary["violations"] == []
    assert summary["trials"] == 2
    assert summary["kills"] == 6
    assert summary["lost_changes"] == 0  # confirmed creates and deletes
    assert summary["corrupt_stores"] == 0
    assert summary["reminders_lost"] == 0  # every dispatched reminder completed a turn
    assert summary["duplicates_other"] == 0  # no reminder queued, dispatched or completed twice
    assert summary["split_hand_overs"] == 0  # every inbox entry traveled with its dispatch
    assert summary["reminders"] > 0
    assert summary["deliveries"] == summary["reminders"] - summary["deleted"]


def test_every_forced_kill_point_is_reached(summaries: dict[str, dict[str, Any]]) -> None:
    paused = {**summaries["window"]["paused_kills"], **summaries["commits"]["paused_kills"]}
    for mode in (*DELIVERY_WINDOW, "dispatch-commit", "create-commit"):
        assert paused.get(mode) == 2, mode


def test_only_a_turn_killed_while_it_ran_runs_again(summaries: dict[str, dict[str, Any]]) -> None:
    # Each in-turn kill left a durable turn start without its completion: the resumed
    # host runs that turn once more (counted apart); kills before the turn repeat nothing.
    assert summaries["window"]["reruns_after_kill"] >= 2
