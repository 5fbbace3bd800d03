"""Two host processes race for one session with a due reminder: exactly one delivers (SQLite).

Each trial starts two real processes (embedded host + Schedule) on one store; the
PostgreSQL variants are in ``tests/postgres/test_session_race_postgres.py``.
"""

from __future__ import annotations

from pathlib import Path

from bench.session_race import run_trial

TRIALS = 20


def test_two_hosts_on_one_sqlite_session_deliver_its_reminder_once(tmp_path: Path) -> None:
    store = str(tmp_path / "sessions.sqlite3")
    trials = [run_trial(store, tmp_path, index, "race") for index in range(TRIALS)]
    problems = {index: trial.problems() for index, trial in enumerate(trials) if trial.problems()}
    assert problems == {}
    # The loser was refused with a lease error (a clear one-line message), never a traceback,
    # and its other session kept working (run_trial checks both).
    assert all("is live in another process or store" in t.refusals[0] for t in trials)
