"""PostgreSQL for the persistence tests: ``DSH_TEST_POSTGRES_URL``, else a throwaway server.

With ``DSH_TEST_POSTGRES_URL`` set (``.ci/run`` always sets it) the tests use
that server. Otherwise, when Debian's PostgreSQL binaries are installed, one
throwaway cluster is started on 127.0.0.1 for the test session and stopped
afterwards; without either, the PostgreSQL tests skip and say why. Each test
gets its own fresh database, dropped afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:
    from host_bridge.embedded.stores import PostgresEventStore

URL_ENV = "DSH_TEST_POSTGRES_URL"


def _bin_dir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() == 0:  # the server refuses to run as root
        return ["runuser", "-u", "postgres", "--", *command]
    return command


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A server URL (to its ``postgres`` database) for the whole test session."""
    url = os.environ.get(URL_ENV)
    if url:
        yield url
        return
    bin_dir = _bin_dir()
    if bin_dir is None or shutil.which("psql") is None:
        pytest.skip(f"PostgreSQL tests need {URL_ENV} or Debian's postgresql package installed")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("PostgreSQL tests need psycopg: pip install -e '.[postgres]'")
    root = Path(tempfile.mkdtemp(prefix="dsh-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    port = _free_port()
    try:
        subprocess.run(
            _as_server_user(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root}"
        subprocess.run(
            _as_server_user(
                [
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(root / "log"),
                    "-w",
                    "-o",
                    options,
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as error:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"could not start a throwaway PostgreSQL server ({error}); set {URL_ENV}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"]),
            check=False,
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A URL to a fresh, empty database on the test server (dropped after the test)."""
    import psycopg
    from psycopg import sql

    name = f"dsh_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(pg_server)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    finally:
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def stores(pg_url: str) -> Iterator[list[PostgresEventStore]]:
    """PostgreSQL stores a test opened (with ``helpers.open_pg``), closed at teardown."""
    opened: list[PostgresEventStore] = []
    yield opened
    for store in opened:
        if not store.closed:
            store.close()
