"""Benchmarks of dsh-tool-schedule: run each with ``python -m bench.NAME`` (docs/benchmarks.md)."""
