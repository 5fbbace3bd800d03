"""No password of a store spec reaches the output: errors, banners, hints and ``-vv`` logs.

Every command runs through the real entry point with the password in the
spec's query (``?password=``), given as ``--store`` or as ``$DSH_SCHEDULE_STORE``;
stdout and stderr must not contain it. The unreachable cases use a port nothing
listens on; ``serve``'s banner and ``chat``'s resume hint use the test server
with a role whose password is that secret (a server trusting local
connections ignores it, one checking passwords needs it).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from host_bridge.cli._common import STORE_ENV
from tests.cli.helpers import REPO, STORE_COMMANDS, Proc, Run, run_cli

SECRET = "Hunter2-" + uuid.uuid4().hex[:8]
UNREACHABLE = f"postgresql://u@127.0.0.1:1/db?password={SECRET}"
SHOWN = "postgresql://u@127.0.0.1:1/db"


def _no_secret(run: Run) -> None:
    assert SECRET not in run.out
    assert SECRET not in run.err


@pytest.mark.parametrize("given", ["option", "environment"])
@pytest.mark.parametrize("command", STORE_COMMANDS, ids=lambda command: command[0])
def test_an_unreachable_store_is_named_without_its_password(
    command: list[str], given: str, data_dir: Path, home: Path
) -> None:
    option = ["--store", UNREACHABLE] if given == "option" else []
    env = {STORE_ENV: UNREACHABLE} if given == "environment" else {}
    run = run_cli(["-vv", *command, *option, "--data", str(data_dir)], home, env=env)
    _no_secret(run)
    assert run.code == 2, run.err
    assert run.err.splitlines()[-1] == (
        f"Error: cannot connect to the session store {SHOWN} (OperationalError)"
    )


def test_a_passfile_is_named_but_never_read_into_the_output(
    tmp_path: Path, data_dir: Path, home: Path
) -> None:
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:1:*:u:{SECRET}\n")
    passfile.chmod(0o600)
    url = f"postgresql://u@127.0.0.1:1/db?passfile={passfile}"
    run = run_cli(["-vv", "chat", "--store", url, "--data", str(data_dir)], home)
    _no_secret(run)
    assert run.code == 2
    assert f"cannot connect to the session store {url} (OperationalError)" in run.err


@pytest.mark.parametrize(
    "spec",
    [f"host=127.0.0.1 port=1 password={SECRET}", f"POSTGRESQL://u:{SECRET}@127.0.0.1:1/db"],
)
@pytest.mark.parametrize("command", [["inspect"], ["chat", "--session", "s1"]], ids=str)
def test_a_connection_string_that_is_no_postgresql_url_is_refused_not_made_a_file(
    command: list[str], spec: str, data_dir: Path, home: Path
) -> None:
    """Regression: such a spec was taken for an SQLite path, created, and printed whole."""
    written = REPO / Path(spec).parts[0]  # what an SQLite store at that path would create
    assert not written.exists()
    try:
        run = run_cli([*command, "--store", spec, "--data", str(data_dir)], home)
    finally:
        made = written.exists()
        if written.is_dir():
            shutil.rmtree(written)
        elif made:
            written.unlink()
            written.with_name(f"{written.name}.locks").unlink(missing_ok=True)
    _no_secret(run)
    assert not made
    assert run.code == 2
    assert "looks like a connection string: a PostgreSQL store needs a postgresql://" in run.err
    assert len(run.err.splitlines()) == 1


@pytest.fixture
def secret_url(pg_server: str, pg_url: str) -> Iterator[str]:
    """``pg_url`` as a role whose password is :data:`SECRET`, given in the query."""
    import psycopg
    from psycopg import sql

    name = f"dsh_secret_{uuid.uuid4().hex[:8]}"
    role = sql.Identifier(name)
    parts = urlsplit(pg_url)
    database = sql.Identifier(parts.path.lstrip("/"))
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, sql.Literal(SECRET)))
        admin.execute(sql.SQL("GRANT ALL ON DATABASE {} TO {}").format(database, role))
    with psycopg.connect(pg_url, autocommit=True) as owner:
        owner.execute(sql.SQL("GRANT ALL ON SCHEMA public TO {}").format(role))
    host = parts.netloc.rpartition("@")[2]
    try:
        yield f"postgresql://{name}@{host}{parts.path}?password={SECRET}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as owner:
            owner.execute(sql.SQL("DROP OWNED BY {}").format(role))
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE {}").format(role))


def test_serve_banner_and_logs_name_a_reachable_store_without_its_password(
    secret_url: str, data_dir: Path, home: Path
) -> None:
    shown = secret_url.partition("?")[0]
    proc = Proc(
        ["-m", "host_bridge.cli", "-vv", "serve", "--data", str(data_dir)],
        home,
        env={STORE_ENV: secret_url},
    )
    try:
        banner = proc.wait_line("serving ")
        assert banner.startswith(f"serving {shown}: reminders of sessions nobody has open")
        assert proc.stop() == 0
    finally:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait()
    logs = "\n".join(proc.err)
    assert f"session store open at {shown}" in logs
    assert SECRET not in "\n".join(proc.out) + logs


def test_chat_hints_a_reachable_store_without_its_query_password(
    secret_url: str, data_dir: Path, home: Path
) -> None:
    run = run_cli(
        ["-vv", "chat", "--session", "s1", "--store", secret_url, "--data", str(data_dir)],
        home,
        stdin="/create 3600 hi\n/quit\n",
    )
    assert run.code == 0, run.err
    _no_secret(run)
    bye = next(line for line in run.out.splitlines() if line.startswith("bye: "))
    shown = secret_url.partition("?")[0]
    assert f"resume with: dsh-schedule chat --session s1 --data {data_dir} --store {shown}" in bye
