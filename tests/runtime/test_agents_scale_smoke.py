"""bench/agents_scale.py runs end to end on both runtimes (a smoke test; no figure is checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import agents_scale


@pytest.mark.parametrize("runtime", ["threading", "gevent"])
def test_the_benchmark_runs_on_both_runtimes(tmp_path: Path, runtime: str) -> None:
    out = tmp_path / "scale.json"
    argv = ["--agents", "8", "--runtime", runtime, "--lead", "0.3", "--gc", "tuned"]
    assert agents_scale.main([*argv, "--timeout", "30", "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["completed"] is True, report
    assert report["early_deliveries"] == 0
    assert set(report["latency_ms"]) == {"p50", "p99", "max", "min", "mean"}


def test_an_oversized_threading_run_is_refused_up_front() -> None:
    report = agents_scale.run(
        agents_scale.build_parser().parse_args(["--agents", "100000", "--runtime", "threading"])
    )
    assert report["completed"] is False
    assert "not attempted" in report["error"]
