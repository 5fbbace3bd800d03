"""A ``serve`` host that stops dead at a chosen point, so a test can SIGKILL it there.

``python -m bench._serve_child DATA_DIR MODE`` runs :class:`host_bridge.cli._serve.Server`
on ``DATA_DIR`` and prints ``PAUSED <mode>`` when it reaches:

* ``commit``: the store's writer, just before the ``COMMIT`` of the round that
  carries a reminder's ``dispatch`` and its inbox entry (nothing of the delivery
  is durable yet);
* ``turn``: the notifier turn of a reminder, after its ``dispatch`` and inbox
  entry were committed and before anything was presented.

It then blocks until it is killed. Reminders it presents are printed as by ``serve``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from host_bridge._plugin import WakePolicy
from host_bridge.cli._serve import Presented, Server
from messages._records import SCHEDULE_CHANGE_TYPE

_NEVER = threading.Event()


def _pause(mode: str) -> None:
    print(f"PAUSED {mode}", flush=True)
    _NEVER.wait()


class PausingServer(Server):
    """Pauses inside the notifier turn before presenting anything."""

    def _present(self, item: Presented) -> None:
        _pause("turn")


def main(argv: Sequence[str]) -> None:
    data_dir, mode = Path(argv[0]), argv[1]
    policy = WakePolicy(quiet_period_ms=60_000)
    kind = PausingServer if mode == "turn" else Server
    server = kind(data_dir, policy=policy)
    if mode == "commit":
        _pause_before_the_dispatch_commit(server)
    server.start()
    print("READY", flush=True)
    _NEVER.wait()


def _pause_before_the_dispatch_commit(server: Server) -> None:
    """Arm the store's test seam (its fault hook) once the host is open."""
    carried = threading.Event()
    original_start = server.start

    def start() -> None:
        original_start()
        host = server.host
        assert host is not None and host.persistence is not None
        store: Any = host.persistence
        hand_over = store.record_appends

        def record_appends(session_id: str, rows: Sequence[Any], **options: Any) -> None:
            hand_over(session_id, rows, **options)
            for event, _ in rows:
                data = event.data
                if event.type == SCHEDULE_CHANGE_TYPE and data.get("operation") == "dispatch":
                    carried.set()

        def hook() -> None:
            if carried.is_set():
                _pause("commit")

        store.record_appends = record_appends
        store.fault_hook = hook  # the constructor's test seam, armed after opening

    server.start = start  # type: ignore[method-assign]


if __name__ == "__main__":
    main(sys.argv[1:])
