"""Suite-wide fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pykka
import pytest


@pytest.fixture(autouse=True)
def _stop_actors() -> Iterator[None]:
    """Stop every actor a test left running, whatever runtime it was on."""
    yield
    pykka.ActorRegistry.stop_all()
