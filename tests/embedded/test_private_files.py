"""The SQLite store is private: 0700 directories, 0600 files, a shared store refused.

Every mode and owner here is one the store itself checks: the tests run as
root, who would get past the permissions anyway, so they look at the bits
(and, as root, give files to ``nobody`` to stand for another local user).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from host_bridge.embedded.codec import encode_payload
from host_bridge.embedded.host import EmbeddedHost
from host_bridge.embedded.private_files import make_private_dirs, open_private_file
from host_bridge.embedded.stores import (
    SessionLockFile,
    SharedStoreError,
    SqliteEventStore,
    SqliteStoreReader,
    open_store,
)
from host_bridge.protocols import SessionEvent, SessionHeader

TIMEOUT = 20.0
NOBODY = 65534

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a file to another user (chown) needs root"
)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def write_one(store: SqliteEventStore, session_id: str = "s1") -> None:
    """Store a session of one event, durably (this takes its lock: the lock file exists)."""
    item = SessionEvent("note", 0, 1_700_000_000_000, {"n": 0})
    store.create_session(SessionHeader(session_id), [(item, encode_payload(item.data))])
    assert store.flush_all().result(TIMEOUT) is True


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "sessions.sqlite3"


@pytest.fixture
def made(db: Path) -> Path:
    """A store written and closed: a private 0600 file in a 0700 directory, and its lock file."""
    with SqliteEventStore(db) as store:
        write_one(store)
    return db


def sidecar(db: Path, suffix: str) -> Path:
    return db.with_name(db.name + suffix)


def snapshot(directory: Path) -> dict[str, tuple[object, ...]]:
    """Each file's content, inode, mode, owner and modification time."""
    found: dict[str, tuple[object, ...]] = {}
    for path in directory.iterdir():
        info = os.stat(path)
        found[path.name] = (
            path.read_bytes(),
            info.st_ino,
            info.st_mode,
            info.st_uid,
            info.st_mtime_ns,
        )
    return found


# --- what the store creates ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [0o000, 0o022, 0o077], ids=["umask-000", "umask-022", "umask-077"]
)
def test_every_directory_and_file_the_store_creates_is_private_whatever_the_umask(
    tmp_path: Path, value: int
) -> None:
    db = tmp_path / "home" / "share" / "data" / "sessions.sqlite3"
    with umask(value), SqliteEventStore(db) as store:
        write_one(store)
        names = {path.name: mode(path) for path in db.parent.iterdir()}
        assert names == {
            "sessions.sqlite3": 0o600,
            "sessions.sqlite3-wal": 0o600,  # SQLite gives them the database file's mode
            "sessions.sqlite3-shm": 0o600,
            "sessions.sqlite3.locks": 0o600,
        }
    for directory in (tmp_path / "home", tmp_path / "home" / "share", db.parent):
        assert mode(directory) == 0o700, directory


def test_a_store_deleted_while_open_is_rebuilt_private(db: Path) -> None:
    with umask(0), SqliteEventStore(db) as store:
        write_one(store)
        for suffix in ("", "-wal", "-shm"):
            sidecar(db, suffix).unlink()
        write_one(store, "s2")  # the writer rebuilds the file from its open connection
        assert mode(db) == 0o600
        assert not sidecar(db, ".restore").exists()
        assert store.session_ids() == ["s1", "s2"]


def test_directories_that_exist_are_left_as_they_are(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    make_private_dirs(tmp_path)
    assert mode(tmp_path) == 0o755
    (tmp_path / "file").touch()
    with pytest.raises(FileExistsError):
        make_private_dirs(tmp_path / "file")


def test_a_private_file_is_made_with_its_mode_and_an_existing_one_opened_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f"
    with umask(0o777):  # would leave no bit at all
        os.close(open_private_file(path, mode=0o640))
    assert mode(path) == 0o640
    path.chmod(0o604)
    os.close(open_private_file(path))
    assert mode(path) == 0o604


# --- a store other users can reach is refused --------------------------------------------------


def _chmod(suffix: str, bits: int) -> Callable[[Path], None]:
    return lambda db: sidecar(db, suffix).chmod(bits)


def _give_away(suffix: str) -> Callable[[Path], None]:
    return lambda db: os.chown(sidecar(db, suffix), NOBODY, NOBODY)


def _give_away_directory(db: Path) -> None:
    os.chown(db.parent, NOBODY, NOBODY)


SHARED = [
    pytest.param(
        _chmod("", 0o644),
        "the session store file {db} (mode 0644) is accessible to other local users",
        "run chmod 600 {db}",
        id="store-0644",
    ),
    pytest.param(
        _chmod("", 0o660),
        "the session store file {db} (mode 0660) is accessible to other local users",
        "run chmod 600 {db}",
        id="store-0660",
    ),
    pytest.param(
        _chmod(".locks", 0o644),
        "the session store file {db}.locks (mode 0644) is accessible to other local users",
        "run chmod 600 {db}.locks",
        id="lock-file-0644",
    ),
    pytest.param(
        lambda db: sidecar(db, ".wants").touch(0o644),  # left by a chat that asked for a session
        "the session store file {db}.wants (mode 0644) is accessible to other local users",
        "run chmod 600 {db}.wants",
        id="wants-file-0644",
    ),
    pytest.param(
        lambda db: db.parent.chmod(0o777),
        "the directory {dir} of the session store is writable by other users (mode 0777)",
        "run chmod 700 {dir}",
        id="directory-0777",
    ),
    pytest.param(
        lambda db: db.parent.chmod(0o770),
        "the directory {dir} of the session store is writable by other users (mode 0770)",
        "run chmod 700 {dir}",
        id="directory-0770",
    ),
    pytest.param(
        lambda db: db.parent.chmod(0o1777),
        "the directory {dir} of the session store is writable by other users (mode 1777)",
        "keep the store in a directory of your own, not a shared one",
        id="sticky-directory-1777",
    ),
    pytest.param(
        _give_away(".locks"),
        f"the session store file {{db}}.locks (uid {NOBODY}) belongs to another user, "
        f"not to uid {os.geteuid()}",
        "move it aside",
        id="lock-file-of-another-user",
        marks=needs_root,
    ),
    pytest.param(
        _give_away(""),
        f"the session store file {{db}} (uid {NOBODY}) belongs to another user, "
        f"not to uid {os.geteuid()}",
        "move it aside",
        id="store-of-another-user",
        marks=needs_root,
    ),
    pytest.param(
        _give_away_directory,
        f"the directory {{dir}} of the session store belongs to another user (uid {NOBODY})",
        "keep the store in a directory of your own",
        id="directory-of-another-user",
        marks=needs_root,
    ),
]


@pytest.mark.parametrize(("share", "problem", "remedy"), SHARED)
def test_a_store_other_users_can_reach_is_refused_and_left_as_it_was(
    made: Path, share: Callable[[Path], None], problem: str, remedy: str
) -> None:
    share(made)
    before = snapshot(made.parent)
    fill = {"db": str(made), "dir": str(made.parent)}
    with pytest.raises(SharedStoreError) as refused:
        SqliteEventStore(made)
    assert refused.value.problem == problem.format(**fill)
    assert refused.value.remedy == remedy.format(**fill)
    assert str(refused.value) == (
        f"{refused.value.problem}; {refused.value.remedy}, "
        "or pass allow_shared_store=True to accept it"
    )
    assert snapshot(made.parent) == before  # nothing created or changed


@pytest.mark.parametrize(("share", "problem", "remedy"), SHARED)
def test_allow_shared_store_accepts_it_as_it_is(
    made: Path, share: Callable[[Path], None], problem: str, remedy: str
) -> None:
    share(made)
    with open_store(made, allow_shared_store=True) as store:
        assert isinstance(store, SqliteEventStore)
        store.acquire_session("s1")
        write_one(store, "s2")
        assert store.session_ids() == ["s1", "s2"]


def test_every_file_open_to_others_is_named_with_one_command_that_fixes_them(made: Path) -> None:
    with SqliteEventStore(made, allow_shared_store=True) as store:
        store.acquire_session("s1")  # the -wal and -shm exist while it is open
        for suffix in ("", "-wal", ".locks"):
            sidecar(made, suffix).chmod(0o644)
        with pytest.raises(SharedStoreError) as refused:
            SqliteEventStore(made)
    names = f"{made} (mode 0644), {made}-wal (mode 0644), {made}.locks (mode 0644)"
    assert (
        refused.value.problem
        == f"the session store files {names} are accessible to other local users"
    )
    assert refused.value.remedy == f"run chmod 600 {made} {made}-wal {made}.locks"


def test_a_lock_file_made_for_a_shared_store_follows_the_store_file_mode(db: Path) -> None:
    with SqliteEventStore(db) as store:
        write_one(store)
    sidecar(db, ".locks").unlink()
    db.chmod(0o640)
    with umask(0o077), SqliteEventStore(db, allow_shared_store=True) as store:
        store.acquire_session("s1")
        assert mode(sidecar(db, ".locks")) == 0o640  # as SQLite does for its own files


def test_embedded_host_refuses_a_shared_store_unless_allowed(made: Path) -> None:
    made.chmod(0o644)
    with pytest.raises(SharedStoreError):
        EmbeddedHost(made.parent)
    host = EmbeddedHost(made.parent, allow_shared_store=True)
    try:
        assert host.persistence is not None
        assert host.persistence.session_ids() == ["s1"]
    finally:
        assert host.close() is None


# --- the lock file -------------------------------------------------------------------------


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.sqlite3.locks"


def test_a_lock_file_is_created_private_whatever_the_umask(lock_path: Path) -> None:
    with umask(0):
        locks = SessionLockFile(lock_path)
    try:
        assert mode(lock_path) == 0o600
        assert locks.try_lock("s1")
    finally:
        locks.close()


@pytest.mark.parametrize(
    "prepare",
    [
        pytest.param(lambda path: path.chmod(0o644), id="0644"),
        pytest.param(lambda path: path.chmod(0o606), id="0606"),
        pytest.param(
            lambda path: os.chown(path, NOBODY, NOBODY), id="of-another-user", marks=needs_root
        ),
    ],
)
def test_a_lock_file_others_can_open_is_not_used(
    lock_path: Path, prepare: Callable[[Path], None]
) -> None:
    os.close(os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600))  # made by someone else
    prepare(lock_path)
    with pytest.raises(SharedStoreError, match=r"move it aside|run chmod 600"):
        SessionLockFile(lock_path)
    accepted = SessionLockFile(lock_path, allow_shared=True)
    try:
        assert accepted.try_lock("s1")
    finally:
        accepted.close()


def test_a_lock_file_planted_after_ours_was_deleted_is_not_used(lock_path: Path) -> None:
    mine = SessionLockFile(lock_path)
    try:
        assert mine.try_lock("kept")
        lock_path.unlink()
        os.close(os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600))
        lock_path.chmod(0o666)  # someone else's file, open to everybody
        assert mine.ensure_current() == []  # keeps its locks where they are
        assert mine.holds("kept")
        assert mode(lock_path) == 0o666  # and leaves that file alone
        planted = SessionLockFile(lock_path, allow_shared=True)
        try:
            assert planted.try_lock("kept")  # nothing of ours was locked in it
        finally:
            planted.close()
    finally:
        mine.close()


# --- reading a shared store ------------------------------------------------------------------


def test_a_reader_reads_a_shared_store_and_warns(
    made: Path, caplog: pytest.LogCaptureFixture
) -> None:
    made.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="dsh_schedule"):
        reader = open_store(made, read_only=True)
    with reader:
        assert isinstance(reader, SqliteStoreReader)
        assert reader.session_ids() == ["s1"]
        assert reader.exposure is not None
        assert reader.exposure.remedy.startswith(f"run chmod 600 {made}")
    assert [record.levelno for record in caplog.records] == [logging.WARNING]
    assert "accessible to other local users" in caplog.records[0].getMessage()


@needs_root
def test_a_reader_does_not_report_a_private_store_of_another_user(made: Path) -> None:
    for path in made.parent.iterdir():
        os.chown(path, NOBODY, NOBODY)
    with open_store(made, read_only=True) as reader:
        assert isinstance(reader, SqliteStoreReader)
        assert reader.exposure is None
        assert reader.session_ids() == ["s1"]
