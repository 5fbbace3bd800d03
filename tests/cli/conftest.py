"""Fixtures of the CLI tests: a data dir and a separate default home that must stay unused."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # A shell that starts the suite in the background ignores SIGINT for it, and every
    # command a test starts would inherit that: the Ctrl-C tests could not send one.
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
