"""The conformance kit run against the fake, embedded, pykka example and asyncio hosts."""

from __future__ import annotations

from pathlib import Path

from host_bridge.testing.conformance import ConformanceHost, HostConformance
from tests.conformance.hosts import async_host, embedded_host, example_host, fake_host


class TestFakeHost(HostConformance):
    """``host_bridge.testing.FakeHost`` on fake time (turns run by a driver thread)."""

    def make_host(self, tmp_path: Path) -> ConformanceHost:
        return fake_host(tmp_path)


class TestEmbeddedHost(HostConformance):
    """``host_bridge.embedded.EmbeddedHost`` on SQLite, with its durable inbox."""

    def make_host(self, tmp_path: Path) -> ConformanceHost:
        return embedded_host(tmp_path)


class TestPykkaExampleHost(HostConformance):
    """``docs/examples/pykka_host.py``, the integration guide's example host."""

    def make_host(self, tmp_path: Path) -> ConformanceHost:
        return example_host(tmp_path)


class TestAsyncHost(HostConformance):
    """``host_bridge.aio.AsyncHost``: every turn through one async runner on a loop thread."""

    def make_host(self, tmp_path: Path) -> ConformanceHost:
        return async_host(tmp_path)
