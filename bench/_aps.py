"""APScheduler 3 on a persistent SQLAlchemy job store (SQLite): the baseline of the benchmarks.

APScheduler and SQLAlchemy are optional (``pip install -e '.[bench]'``): import this
module freely, call :func:`unavailable` first, and skip the APScheduler runs when it
returns a reason.

Jobs must be importable functions for the SQLAlchemy job store (it pickles a
``module:function`` reference), hence the module-level job functions here.
"""

from __future__ import annotations

import datetime
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ApsRun",
    "delivery_job",
    "delivery_runs",
    "open_scheduler",
    "reminder_job",
    "reset_delivery_runs",
    "unavailable",
]

UTC = datetime.UTC

CONFIGS = ("default", "wal")
"""``default``: the job store's SQLite as SQLAlchemy opens it (rollback journal; the
library's ``synchronous`` default); ``wal``: tuned like our store (WAL, synchronous=FULL)."""

_runs_lock = threading.Lock()
_runs: list[tuple[int, int, int]] = []


def reminder_job(index: int) -> None:
    """The job of the create/list/delete benchmark (it never runs: its date is far ahead)."""


def delivery_job(index: int, target_ms: int) -> None:
    """Record ``(index, target_ms, start_ns)``: when the job started, for the delivery benchmark."""
    started = time.time_ns()
    with _runs_lock:
        _runs.append((index, target_ms, started))


def delivery_runs() -> list[tuple[int, int, int]]:
    """Every ``delivery_job`` start recorded since :func:`reset_delivery_runs`."""
    with _runs_lock:
        return list(_runs)


def reset_delivery_runs() -> None:
    """Forget the recorded job starts."""
    with _runs_lock:
        _runs.clear()


def unavailable() -> str | None:
    """Why APScheduler 3 with SQLAlchemy cannot be used here, or ``None`` when it can."""
    try:
        import apscheduler
        import sqlalchemy  # noqa: F401
    except ImportError as error:
        return (
            f"{error.name or 'apscheduler'} is not installed "
            "(pip install -e '.[bench]' installs APScheduler 3 and SQLAlchemy 2)"
        )
    version = str(getattr(apscheduler, "__version__", "3"))
    if not version.startswith("3."):
        return f"APScheduler {version} is installed; these benchmarks need APScheduler 3"
    return None


@dataclass
class ApsRun:
    """A started ``BackgroundScheduler`` on ``SQLAlchemyJobStore(sqlite:///<path>)``."""

    scheduler: Any
    engine: Any
    path: Path
    config: str
    pragmas: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        """Shut the scheduler down (without waiting for queued jobs) and dispose the engine."""
        try:
            self.scheduler.shutdown(wait=False)
        finally:
            self.engine.dispose()


def open_scheduler(path: Path, config: str, *, max_workers: int = 10) -> ApsRun:
    """Start a BackgroundScheduler whose default job store is SQLite at ``path``.

    ``config`` is one of :data:`CONFIGS`. Jobs never miss: ``misfire_grace_time``
    is ``None`` (APScheduler's default of 1 s would silently skip late jobs).
    """
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from sqlalchemy import create_engine, event, text

    if config not in CONFIGS:
        raise ValueError(f"unknown APScheduler configuration {config!r}")
    engine = create_engine(f"sqlite:///{path}")
    if config == "wal":

        @event.listens_for(engine, "connect")
        def _durable_wal(dbapi_connection: Any, connection_record: Any) -> None:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=FULL")
            finally:
                cursor.close()

    with engine.connect() as connection:
        pragmas = {
            "journal_mode": connection.execute(text("PRAGMA journal_mode")).scalar(),
            "synchronous": connection.execute(text("PRAGMA synchronous")).scalar(),
        }
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(engine=engine)},
        executors={"default": ThreadPoolExecutor(max_workers)},
        job_defaults={"misfire_grace_time": None, "coalesce": False},
        timezone=UTC,
    )
    scheduler.start()
    return ApsRun(scheduler, engine, path, config, pragmas)


def run_date(epoch_ms: int) -> datetime.datetime:
    """An aware UTC datetime for epoch milliseconds."""
    return datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
"""SQLite's ``PRAGMA synchronous`` values."""


def describe(pragmas: dict[str, Any]) -> str:
    """``journal_mode=..., synchronous=...`` for tables and the doc."""
    sync = pragmas.get("synchronous")
    name = SYNCHRONOUS_NAMES.get(sync, str(sync)) if isinstance(sync, int) else str(sync)
    return f"journal_mode={pragmas.get('journal_mode')}, synchronous={name}"
