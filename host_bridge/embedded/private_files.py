"""Private files of the SQLite store: made 0600 in a 0700 directory, checked before use.

A session store holds every prompt of every conversation, and its lock file
decides which process may write each session: a local user who can read the
files reads the prompts, and one who can open the lock file can hold locks in
it and block every session. So what the store creates is private to its owner
whatever the umask: missing directories are made ``0700``, the database and
lock files ``0600`` (created here with that mode and ``fchmod``-ed before
SQLite or anyone else opens them; SQLite gives the ``-wal``, ``-shm`` and
``-journal`` files it creates the database file's mode).

:func:`store_exposure` says what about an existing store is not private: its
directory belongs to another user (root aside) or other users may write to it
(they could plant or swap its files), or one of its files belongs to another
user or is accessible to group or others. Writable stores refuse such a store
unless told to accept it; read-only readers only warn.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
from collections.abc import Sequence
from pathlib import Path

from host_bridge.embedded.stores._errors import SharedStoreError

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "STORE_COMPANIONS",
    "files_exposure",
    "make_private_dirs",
    "open_private_file",
    "store_exposure",
]

PRIVATE_DIR_MODE = 0o700
"""The mode of the directories the store creates."""

PRIVATE_FILE_MODE = 0o600
"""The mode of the files the store creates."""

STORE_COMPANIONS = ("-wal", "-shm", "-journal", ".locks", ".wants")
"""The suffixes of the files kept beside the database file.

SQLite's, the session locks and the hand-over requests (``.wants``).
"""

_GROUP_OTHER = 0o077
_GROUP_OTHER_WRITE = 0o022

_ACCEPT = "pass allow_shared_store=True"  # (the CLI names its flag instead)


def make_private_dirs(path: Path) -> None:
    """Create the directory ``path`` and its missing parents with mode 0700, whatever the umask.

    Directories that exist are left as they are. Raises ``OSError``, also
    ``FileExistsError`` when something other than a directory is at ``path``.
    """
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current) and current.parent != current:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by another process: checked like any existing one
        os.chmod(directory, PRIVATE_DIR_MODE)  # the umask may have taken bits away
    if not path.is_dir():
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))


def open_private_file(path: Path, flags: int = os.O_RDWR, *, mode: int = PRIVATE_FILE_MODE) -> int:
    """Open ``path`` (``flags``, close-on-exec), creating it with exactly ``mode`` when missing.

    A file made here has ``mode`` whatever the umask (the umask only takes
    bits away, and ``fchmod`` puts them back before the descriptor is
    returned); an existing file is opened as it is. Raises ``OSError``.
    """
    flags |= os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return os.open(path, flags)
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def store_exposure(path: Path, *, owners: bool = True) -> SharedStoreError | None:
    """What makes the SQLite store at ``path`` reachable by other local users; None if nothing.

    Looks at the store's directory and at those of ``path`` and its companions
    (:data:`STORE_COMPANIONS`) that exist, and reports the first kind of
    problem found, for every file it applies to. ``owners``: also report a
    directory or file of another user. Creates nothing; what cannot be looked
    at is left to opening it to report.
    """
    directory = path.parent
    info = _stat(directory)
    if info is not None and stat.S_ISDIR(info.st_mode):
        found = _directory_exposure(directory, info, owners=owners)
        if found is not None:
            return found
    files = [path, *(path.with_name(path.name + suffix) for suffix in STORE_COMPANIONS)]
    looked = [(file, info) for file in files if (info := _stat(file)) is not None]
    return files_exposure([item for item in looked if stat.S_ISREG(item[1].st_mode)], owners=owners)


def files_exposure(
    files: Sequence[tuple[Path, os.stat_result]], *, owners: bool = True
) -> SharedStoreError | None:
    """What makes these store files (with their ``stat``) reachable by others; None if nothing.

    Files of another user come first (with ``owners``), then files whose mode
    lets group or others in.
    """
    if owners:
        foreign = [(file, info) for file, info in files if info.st_uid != os.geteuid()]
        if foreign:
            one = len(foreign) == 1
            names = ", ".join(f"{file} (uid {info.st_uid})" for file, info in foreign)
            return _exposed(
                f"the session store {'file' if one else 'files'} {names} "
                f"{'belongs' if one else 'belong'} to another user, not to uid {os.geteuid()}",
                "move it aside" if one else "move them aside",
            )
    opened = [(file, info) for file, info in files if info.st_mode & _GROUP_OTHER]
    if not opened:
        return None
    one = len(opened) == 1
    names = ", ".join(f"{file} (mode {stat.S_IMODE(info.st_mode):04o})" for file, info in opened)
    fix = " ".join(shlex.quote(str(file)) for file, _ in opened)
    return _exposed(
        f"the session store {'file' if one else 'files'} {names} "
        f"{'is' if one else 'are'} accessible to other local users",
        f"run chmod 600 {fix}",
    )


def _directory_exposure(
    directory: Path, info: os.stat_result, *, owners: bool
) -> SharedStoreError | None:
    """What about the store's directory lets other users at its files; None if nothing."""
    if owners and info.st_uid not in (os.geteuid(), 0):
        return _exposed(
            f"the directory {directory} of the session store belongs to another user "
            f"(uid {info.st_uid})",
            "keep the store in a directory of your own",
        )
    if not info.st_mode & _GROUP_OTHER_WRITE:
        return None
    remedy = (
        "keep the store in a directory of your own, not a shared one"
        if info.st_mode & stat.S_ISVTX  # a sticky directory everyone shares: chmod is no fix
        else f"run chmod 700 {shlex.quote(str(directory))}"
    )
    return _exposed(
        f"the directory {directory} of the session store is writable by other users "
        f"(mode {stat.S_IMODE(info.st_mode):04o})",
        remedy,
    )


def _exposed(problem: str, remedy: str) -> SharedStoreError:
    return SharedStoreError(
        f"{problem}; {remedy}, or {_ACCEPT} to accept it", problem=problem, remedy=remedy
    )


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None
