"""A small crash campaign: SIGKILL the embedded host in and out of the duplicate window.

The full campaign is ``python bench/crash_campaign.py`` (docs/reliability.md).
Kills here are driven by the child's journal (after N lines, or once it
announces a pause), never by sleeping.
"""

from __future__ import annotations

from pathlib import Path

import pykka
import pytest

from bench.crash_campaign import CampaignReport, run_campaign


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> CampaignReport:
    root: Path = tmp_path_factory.mktemp("crash")
    report = run_campaign(
        4,
        seed=7,
        modes=("followup", "dispatch-commit", "random"),
        steps=40,
        jitter_s=0.0,
        data=root,
    )
    pykka.ActorRegistry.stop_all()
    return report


def test_no_loss_no_corruption_and_duplicates_only_inside_the_window(
    campaign: CampaignReport,
) -> None:
    summary = campaign.summary()
    assert campaign.violations == []
    assert summary["trials"] == 4
    assert summary["kills"] == 12
    assert summary["losses"] == 0
    assert summary["corrupt_stores"] == 0
    assert summary["duplicates_outside_window"] == 0
    assert summary["reminders"] > 0
    assert summary["deliveries"] > 0


def test_pausing_inside_the_window_is_reached_and_repeats_the_reminder(
    campaign: CampaignReport,
) -> None:
    summary = campaign.summary()
    paused = summary["paused_kills"]
    assert paused.get("followup", 0) >= 3  # every trial reaches its follow-up pause
    # A kill after the follow-up and before the dispatch append loses the dispatch:
    # the reminder comes back after recovery, a visible duplicate inside the window.
    assert summary["duplicates_in_window"] >= 2  # (a guessed delete may retire one first)
