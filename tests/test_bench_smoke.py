"""The benchmark scripts run end to end (``--quick``, tiny sizes) and write their JSON.

Nothing here is timed: the figures are the scripts' business (docs/benchmarks.md).
APScheduler is optional (the ``bench`` extra); its runs are skipped here unless installed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from bench import (
    _aps,
    _herd,
    asyncio_host,
    clock_faults,
    create_loop,
    create_throughput,
    cron_rules,
    delivery_precision,
    fleet_herd,
    fold_cost,
    group_commit,
    live_path,
    outage,
    public_surface,
    serve_soak,
    session_race,
    telemetry_cost,
    wake_crash,
    wake_scale,
)
from host_bridge.embedded.paths import store_path

Main = Callable[[Sequence[str] | None], dict[str, Any]]


def run(main: Main, name: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    results = tmp_path / "results"
    returned = main(
        ["--quick", "--data", str(tmp_path / "data"), "--results", str(results), *extra]
    )
    written = json.loads((results / f"{name}.json").read_text())
    assert written["benchmark"] == name
    assert {"machine", "targets"} <= written.keys()
    assert written["machine"]["filesystem"]["fstype"]
    assert not list((tmp_path / "data").iterdir())  # the data directories are removed
    assert returned["benchmark"] == name
    return dict(written)


def test_create_throughput(tmp_path: Path) -> None:
    out = run(create_throughput.main, "create_throughput", tmp_path, "--no-apscheduler")
    assert out["apscheduler_skipped"]
    assert [row["system"] for row in out["summary"]] == ["ours"]
    ours = out["summary"][0]
    assert ours["creates_per_s"] > 0
    assert ours["commits_per_create"] > 0
    assert out["fsync"]["rate_per_s"] > 0
    assert out["sqlite_commit"]["rate_per_s"] > 0
    assert set(out["targets"]) == {
        "fraction_of_sqlite_commit_rate",
        "context_switches_per_create",
        "ratio_vs_apscheduler_default",
        "ratio_vs_apscheduler_wal",
        "fraction_of_two_fsync_limit",
    }
    per_create = ours["per_create"]
    assert per_create["flush_requests"] >= 2  # a preflight and a barrier at least
    assert per_create["messages"] >= 1
    assert per_create["futures"] >= 1
    assert per_create["voluntary_switches"] >= 0
    assert out["targets"]["ratio_vs_apscheduler_default"]["met"] is None


@pytest.mark.skipif(_aps.unavailable() is not None, reason="APScheduler is not installed")
def test_create_throughput_against_apscheduler(tmp_path: Path) -> None:
    out = run(create_throughput.main, "create_throughput", tmp_path)
    assert [row["system"] for row in out["summary"]] == ["ours", "apscheduler", "apscheduler"]
    assert set(out["ratios"]) == {"default", "wal"}
    assert out["runs"]["apscheduler_wal"][0]["pragmas"]["journal_mode"] == "wal"


def test_live_path(tmp_path: Path) -> None:
    out = run(live_path.main, "live_path", tmp_path)
    assert out["summary"]["floor_cpu_us"] > 0
    for runtime in ("threading", "gevent"):
        assert out["summary"][runtime]["cpu_ratio"] > 0
        for burst in out["runs"][f"burst/{runtime}"]:
            assert burst["early"] == 0
            assert burst["lateness"]["count"] == 20
            assert 0 < burst["writer_cpu_us"] < burst["cpu_us"]  # the writer's share of it
    assert len(out["targets"]) == 10
    assert all(isinstance(t["met"], bool) for t in out["targets"].values())


def test_create_loop() -> None:
    assert create_loop.main(["--creates", "5"]) > 0


def test_group_commit(tmp_path: Path) -> None:
    out = run(group_commit.main, "group_commit", tmp_path)
    assert [row["agents"] for row in out["summary"]] == [1, 3]
    assert all(row["creates_per_s"] > 0 for row in out["summary"])
    assert out["summary"][0]["commits_per_create"] == 1.0
    assert out["summary"][0]["per_create"]["commits"] == 1.0
    assert out["sqlite_commit"]["rate_per_s"] > 0
    assert set(out["targets"]) == {"scale_most_vs_one_agent", "x_sqlite_writer"}


def test_fold_cost(tmp_path: Path) -> None:
    out = run(fold_cost.main, "fold_cost", tmp_path)
    assert [row["events"] for row in out["rows"]] == [100, 1000]
    assert all(row["active"] == 3 for row in out["rows"])
    assert all(row["list_ms_median"] > 0 for row in out["rows"])
    assert all(row["refold_ms_median"] > 0 for row in out["rows"])


def test_fold_cost_resume(tmp_path: Path) -> None:
    out = run(fold_cost.main, "fold_cost_resume", tmp_path, "--resume", "--sizes", "100,1000")
    cases = [(row["events"], row["checkpoint"]) for row in out["rows"]]
    assert cases == [(100, True), (100, False), (1000, True), (1000, False)]
    for row in out["rows"]:
        assert row["active"] == 3 and row["bounded"] is True
        assert len(row["runs"]) == len(row["anchor_runs"]) == 2
        assert all(run["events"] == row["events"] for run in row["runs"] + row["anchor_runs"])
        assert row["resume_ms_median"] > 0 and row["anchor_ms_median"] > 0
        assert row["ratio"] > 0 and row["held_mib"] > 0
        assert {"resume_us_per_event", "anchor_us_per_event", "peak_mib"} <= row.keys()
    assert out["targets"]["resumed_whole"]["met"] is True


def test_fold_cost_logs_have_the_asked_shape() -> None:
    items = fold_cost.build_log(1000, 0.03, 3, seed=1)
    changes = [data for type_, data in items if type_ == "schedule/change"]
    assert len(items) == 1000
    assert len(changes) == 29
    assert [c["operation"] for c in changes[-3:]] == ["create"] * 3


def test_delivery_precision(tmp_path: Path) -> None:
    out = run(delivery_precision.main, "delivery_precision", tmp_path, "--no-apscheduler")
    ours = out["ours"]
    assert ours["delivered"] == ours["reminders"] == 6
    assert ours["early"] == 0  # a reminder is never delivered before it is due
    assert ours["targets_outside_second"] == 0
    assert {"p50_ms", "p99_ms", "max_ms"} <= ours["delay"].keys()
    assert out["apscheduler"] == []


def test_clock_faults(tmp_path: Path) -> None:
    level = logging.getLogger("dsh_schedule").level
    out = run(clock_faults.main, "clock_faults", tmp_path)
    assert logging.getLogger("dsh_schedule").level == level  # later tests log as before
    results = out["results"]
    assert results["fault"]["late"]["count"] == 1  # delivered after the fault, no restart needed
    assert results["fault"]["restarts"] == [1]
    assert results["forward_jump"]["late"]["count"] == 2
    assert results["backward_jump"]["early"] == 0  # never early
    assert results["glitch"]["early"] == results["glitch"]["advanced"] == 0  # ignored
    assert results["glitch_steps_at_once"]["reminders"] == 4
    assert results["clock_jumps_noticed"] == 2  # the glitch was not one
    assert results["owners_faulted_at_end"] == 0
    assert out["load_average_at_end"] is not None


def test_session_race(tmp_path: Path) -> None:
    out = run(session_race.main, "session_race", tmp_path)
    [summary] = out["summary"]
    assert (summary["store"], summary["variant"], summary["trials"]) == ("sqlite", "race", 2)
    assert summary["double_deliveries"] == summary["losses"] == summary["errors"] == 0
    assert summary["refusals"] == 2  # one loser per trial
    assert out["targets"] == {"no_double_delivery": True, "every_trial_clean": True}


def test_outage(tmp_path: Path) -> None:
    out = run(outage.main, "outage", tmp_path)
    assert logging.root.manager.disable == logging.NOTSET  # later tests log as before
    totals = out["totals"]
    assert out["targets"]["exactly_once"]["met"] is True
    assert totals["reminders"] == 12
    assert totals["dispatched"] == totals["inbox_entries"] == totals["completed_turns"] == 12
    assert totals["model_runs"] == 12
    assert totals["lost"] == totals["duplicates"] == totals["early"] == 0
    assert totals["commits_refused"] > 0  # the outage really refused commits


def test_wake_scale(tmp_path: Path) -> None:
    out = run(wake_scale.main, "wake_scale", tmp_path)
    result = out["run"]
    assert result["all_presented"] and result["presented"] == result["reminders"] == 30
    assert result["presented_twice"] == 0
    assert result["store"]["completed_turns"] == 30
    assert result["store"]["index_rows_left"] == 0
    assert result["wake_lateness"]["count"] == 30
    assert [c["sessions"] for c in out["index_cost"]] == [100, 1000]
    assert out["targets"]["each_reminder_once"]["met"] is True


def test_wake_scale_herd(tmp_path: Path) -> None:
    args = ("--herd", "--sessions", "400", "--due", "40", "--spread", "1", "--lead", "1")
    out = run(wake_scale.main, "wake_scale_herd", tmp_path, *args)
    assert [case["case"] for case in out["cases"]] == ["herd", "spread"]
    for case in out["cases"]:
        assert case["reminders"] == 40
        for name in ("serve", "anchor"):
            result = case[name]
            assert result["contender"] == name
            assert result["delivered"] == 40 and result["all_presented"]
            assert result["presented_twice"] == result["early"] == 0
            assert result["lateness"]["count"] == 40
            assert result["wakeups_per_s"] > 0 and result["cpu_ms_per_wakeup"] >= 0
            assert result["usage"]["voluntary_switches"] >= 0
            store = result["store"]
            assert store["exactly_once"] == store["dispatches"] == store["completed_turns"] == 40
            assert store["sessions_without_reminder_touched"] == store["early_dispatches"] == 0
            assert store["index_rows_left"] == 0
            assert result["exact"] is True
        assert set(case["serve_vs_anchor"]) == {
            "wakeups_per_s",
            "cpu_per_wakeup",
            "switches_per_wakeup",
        }
        assert isinstance(case["anchor_rows_like_serve"], bool)
    assert all(target["met"] is True for target in out["targets"].values())


def test_herd_anchor_writes_the_rows_of_a_delivered_reminder(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    _herd.build_closed(store_path(closed), 5, {1, 3}, 0)
    _herd.add_reminders(store_path(closed), [1, 3], [1_000, 2_000])
    conn = _herd._anchor_connection(store_path(closed))
    try:
        assert _herd.anchor_deliver(conn, "s000001", lambda: 1_500) == [("schedule-1", 1_500)]
        assert _herd.anchor_deliver(conn, "s000001", lambda: 1_500) == []  # dispatched already
        assert _herd.anchor_deliver(conn, "s000003", lambda: 1_500) == []  # not due yet
    finally:
        conn.close()
    rows = _herd.appended_rows(store_path(closed), "s000001", 1)
    assert [type_ for type_, _ in rows] == [
        "inbox/queued",
        "schedule/change",
        "message",
        "message",
        "turn/completed",
    ]
    assert rows[4][1] == {"inbox": 2, "failed": False}
    counts = _herd.check_store(store_path(closed), {"s000001": 1_000})
    assert counts["exactly_once"] == 1 and counts["index_rows_left"] == 1  # s000003's


def test_wake_crash(tmp_path: Path) -> None:
    out = run(wake_crash.main, "wake_crash", tmp_path)
    assert [t["mode"] for t in out["trials"]] == ["commit", "turn", "random"]
    assert out["totals"]["lost"] == out["totals"]["dispatched_twice"] == 0
    assert out["targets"]["nothing_lost_nothing_twice"]["met"] is True


def test_serve_soak(tmp_path: Path) -> None:
    out = run(serve_soak.main, "serve_soak", tmp_path)
    assert [row["presented"] for row in out["waves"]] == [40, 80, 120]
    assert all(row["rss_bytes"] is None or row["rss_bytes"] > 0 for row in out["waves"])
    assert out["check"] == {"sessions": 120, "expected": 120, "wrong": 0, "still_owed": 0}
    assert out["targets"]["exactly_once"]["met"] is True


def test_public_surface_counts_public_modules_only() -> None:
    surface = {module.module: module.names for module in public_surface.count_surface()}
    assert surface["host_bridge.protocols"] > 0
    assert surface["messages"] > 0
    assert not any(part.startswith("_") for name in surface for part in name.split("."))
    assert "messages._fold" not in surface


def test_asyncio_host(tmp_path: Path) -> None:
    out = run(asyncio_host.main, "asyncio_host", tmp_path)
    assert [row["host"] for row in out["summary"]] == ["asyncio", "sync"]
    for row in out["summary"]:
        assert row["create_per_s"] > 0
        assert row["deliver_per_s"] > 0
    ours = out["summary"][0]
    assert ours["create_loop_max_lag_ms"] is not None and ours["create_loop_max_lag_ms"] >= 0
    assert out["ratios"]["create_rate_vs_sync"] > 0


def test_fleet_herd(pg_server: str, tmp_path: Path) -> None:
    out = fleet_herd.main(["--quick", "--store", pg_server, "--results", str(tmp_path)])
    written = json.loads((tmp_path / "fleet_herd.json").read_text())
    assert written["benchmark"] == out["benchmark"] == "fleet_herd"
    assert [r["hosts"] for r in out["runs"]] == [1, 3]
    for herd in out["runs"]:
        assert herd["presented_sessions"] == herd["sessions"] == 24
        assert len(herd["split"]) == herd["hosts"]
        assert sum(herd["split"]) == herd["presented"] >= 24
        assert herd["double_deliveries"] == herd["losses"] == herd["index_rows_left"] == 0
        assert herd["exit_codes"] == [0] * herd["hosts"]
        assert {"p50_ms", "p99_ms"} <= herd["lateness"].keys()
        assert herd["children_cpu_s"] > 0
    assert out["ratio"]["hosts"] == "3/1"
    assert out["targets"]["each_reminder_once"]["met"] is True


def test_cron_rules(tmp_path: Path) -> None:
    out = run(cron_rules.main, "cron_rules", tmp_path)
    assert out["anchor_every_occurrence_us"] > 0
    assert {(row["rule"], row["zone"]) for row in out["searches"]} == {
        (rule, zone) for rule in cron_rules.RULES for zone in cron_rules.ZONES
    }
    assert all(row["next_us"] > 0 and row["latest_us"] > 0 for row in out["searches"])
    assert out["folds"][0]["record"] == "every 300 s"
    assert len(out["batches"]) == 2


def test_telemetry_cost(tmp_path: Path) -> None:
    out = run(telemetry_cost.main, "telemetry_cost", tmp_path)
    assert [row["config"] for row in out["rows"]] == ["off", "api", "sdk"]
    assert all(row["create_us"] > 0 and row["deliver_us"] > 0 for row in out["rows"])
    assert out["rows"][0]["create_ratio"] == 1.0
