"""Where the embedded host keeps its data.

The data directory is chosen, first match wins, from:

1. ``$DSH_SCHEDULE_HOME`` when it is set and not empty (``~`` is expanded);
2. ``$XDG_DATA_HOME/dsh-schedule`` when ``$XDG_DATA_HOME`` is set to an absolute
   path (the XDG Base Directory rule: empty or relative values are ignored);
3. ``~/.local/share/dsh-schedule``.

The session store is the SQLite file ``sessions.sqlite3`` inside that directory
(plus SQLite's ``-wal`` and ``-shm`` companions while it is open). Every path
can also be passed explicitly, so none of this is required.

A *store spec* names the session store instead: a ``postgresql://`` URL or the
path of an SQLite file. :func:`redact_url` is how every message, log line and
printed hint shows one: without any password it may hold.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

__all__ = [
    "APP_DIR_NAME",
    "DEFAULT_DATA_ENV",
    "STORE_FILE_NAME",
    "default_data_dir",
    "is_postgres_url",
    "names_a_connection",
    "redact_url",
    "store_path",
]

DEFAULT_DATA_ENV = "DSH_SCHEDULE_HOME"
"""The environment variable that overrides the data directory."""

APP_DIR_NAME = "dsh-schedule"
"""The directory name used under ``$XDG_DATA_HOME`` or ``~/.local/share``."""

STORE_FILE_NAME = "sessions.sqlite3"
"""The file name of the SQLite session store inside the data directory."""


def default_data_dir() -> Path:
    """The data directory.

    ``$DSH_SCHEDULE_HOME`` if set and not empty, else ``$XDG_DATA_HOME/dsh-schedule``
    (only for an absolute ``$XDG_DATA_HOME``), else ``~/.local/share/dsh-schedule``.

    The directory is not created here; the store creates it when it opens.
    """
    override = os.environ.get(DEFAULT_DATA_ENV, "")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / APP_DIR_NAME
    return Path.home() / ".local" / "share" / APP_DIR_NAME


def store_path(data_dir: str | os.PathLike[str]) -> Path:
    """The session store file inside ``data_dir``: ``data_dir / "sessions.sqlite3"``."""
    return Path(data_dir) / STORE_FILE_NAME


def is_postgres_url(spec: object) -> bool:
    """Whether a store spec is a ``postgresql://`` (or ``postgres://``) connection URL.

    Any other spec is the path of an SQLite file.
    """
    return isinstance(spec, str) and spec.startswith(("postgresql://", "postgres://"))


# --- store specs without their secrets ---------------------------------------------------------

HIDDEN = "…"
"""What :func:`redact_url` shows for a spec (or a URL's part after the scheme) it cannot read."""

_SCHEME = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]*:/{1,2})")
_HOST = re.compile(r"(?:[\w.~%-]*|\[[\w:.%]*\])(?::[0-9]*)?")
_SECRET_KEY = re.compile(r"password|secret", re.IGNORECASE)
_CONNINFO_START = re.compile(  # a libpq connection keyword, then "="
    r"\s*(?:host|hostaddr|port|dbname|user|password|passfile|service|options|client_encoding"
    r"|application_name|fallback_application_name|connect_timeout|channel_binding|require_auth"
    r"|target_session_attrs|load_balance_hosts|replication|keepalives\w*|tcp_user_timeout"
    r"|ssl\w+|requirepeer|requiressl|gss\w+|krbsrvname|m(?:in|ax)_protocol_version|oauth_\w+)"
    r"\s*="
)
_CONNINFO_PAIR = re.compile(  # keyword = 'quoted value' | unquoted value (backslash escapes)
    r"\s*([^\s=]+)\s*=\s*('(?:[^'\\]|\\.)*'|(?!')(?:[^\s\\]|\\.)*)\s*", re.S
)


def names_a_connection(spec: object) -> bool:
    """Whether ``spec`` reads as a connection string rather than a file path.

    True for a URL of any scheme (``scheme://…``, also ``scheme:/…``) and for a
    libpq keyword/value string (one that starts with ``host=``, ``dbname=``,
    ``password=`` or another libpq keyword). Of those, only
    :func:`is_postgres_url` specs name a store.
    """
    return isinstance(spec, str) and bool(_SCHEME.match(spec) or _CONNINFO_START.match(spec))


def redact_url(spec: str) -> str:
    """``spec`` without its passwords, for messages, logs and printed hints.

    A URL (``postgresql://``, ``postgres://`` or any other scheme) loses the
    password of its user info (``user:pw@host`` becomes ``user@host``) and every
    query parameter whose name, percent-decoded, contains ``password`` or
    ``secret`` in any case (``password``, ``pass%77ord``, ``sslpassword``,
    repeated ones); hosts, ports, the database and other parameters stay as
    written. A URL that does not read one way only (an ``@`` after its hosts, a
    host list with other characters, a query parameter without exactly one
    ``=``) shows as ``scheme://…``. A libpq keyword/value string loses its
    password pairs by the same rule (``…`` when it does not parse). Anything else,
    such as an SQLite path, is returned unchanged. No file is read.
    """
    scheme = _SCHEME.match(spec)
    if scheme is not None:
        return _redact_uri(scheme.group(1), spec[scheme.end() :])
    if _CONNINFO_START.match(spec):
        return _redact_conninfo(spec)
    return spec


def _redact_uri(scheme: str, rest: str) -> str:
    """``scheme`` (with its slashes) and the rest of a URL, without passwords."""
    hidden = f"{scheme}{HIDDEN}"
    cut = re.search(r"[/?]", rest)
    authority, tail = (rest[: cut.start()], rest[cut.start() :]) if cut else (rest, "")
    userinfo, at, hosts = authority.rpartition("@")
    if "@" in userinfo or "@" in tail:
        return hidden  # libpq and RFC 3986 would split it differently
    if not all(_HOST.fullmatch(host) for host in hosts.split(",")):
        return hidden
    user = userinfo.partition(":")[0]
    path, _, query = tail.partition("?")
    kept: list[str] = []
    for param in filter(None, query.split("&")):
        key, equals, value = param.partition("=")
        if not equals or "=" in value:
            return hidden
        if not _is_secret(key):
            kept.append(param)
    shown = f"{scheme}{user}@{hosts}{path}" if at and user else f"{scheme}{hosts}{path}"
    return f"{shown}?{'&'.join(kept)}" if kept else shown


def _redact_conninfo(spec: str) -> str:
    """A libpq keyword/value string without its password pairs (:data:`HIDDEN` if unparsable)."""
    kept: list[str] = []
    position = 0
    while position < len(spec):
        pair = _CONNINFO_PAIR.match(spec, position)
        if pair is None or pair.end() == position:
            return HIDDEN
        position = pair.end()
        if not _is_secret(pair.group(1)):
            kept.append(f"{pair.group(1)}={pair.group(2)}")
    return " ".join(kept)


def _is_secret(key: str) -> bool:
    """Whether a parameter named ``key``, as written or percent-decoded (repeatedly), is secret."""
    while not _SECRET_KEY.search(key):
        decoded = unquote(key)
        if decoded == key:
            return False
        key = decoded
    return True
