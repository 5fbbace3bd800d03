"""Two host processes on one PostgreSQL session with a due reminder: exactly one delivers.

``race``: both open the session at once; one is refused. ``terminated``: the owner's
lease connection is terminated, another process takes the session over and
delivers; the first owner's next preflight finds the lease lost and delivers nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.session_race import run_trial

pytest.importorskip("psycopg")

TRIALS = 20


@pytest.mark.parametrize("variant", ["race", "terminated"])
def test_two_hosts_on_one_postgresql_session_deliver_its_reminder_once(
    pg_url: str, tmp_path: Path, variant: str
) -> None:
    trials = [run_trial(pg_url, tmp_path, index, variant) for index in range(TRIALS)]
    problems = {index: trial.problems() for index, trial in enumerate(trials) if trial.problems()}
    assert problems == {}
    if variant == "race":
        assert all("held by" in trial.refusals[0] for trial in trials)  # the holder is named
