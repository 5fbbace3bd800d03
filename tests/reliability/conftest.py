"""Fixtures of the reliability tests: an embedded host on real SQLite with fake time."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.rig import Rig


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path / "data")
    yield made
    with contextlib.suppress(Exception):  # a test that broke the store checks close() itself
        made.close()
