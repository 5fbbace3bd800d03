"""Fixtures of the CLI tests: a data dir and a separate default home that must stay unused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The directory passed as ``--data``."""
    return tmp_path / "data"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """``$DSH_SCHEDULE_HOME`` of the subprocesses; no command given ``--data`` may touch it."""
    default = tmp_path / "default-home"
    yield default
    assert not default.exists(), "a command wrote to the default data dir despite --data"
