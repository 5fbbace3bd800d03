"""Check that ``messages``, ``actors`` and ``host_bridge`` are this distribution's packages.

The three import names are generic: a user's own ``messages.py`` earlier on
``sys.path`` shadows ours, and another distribution that owns the same name
(PyPI's ``messages``) overwrites our ``__init__.py`` in site-packages. Each of our
packages declares :data:`DISTRIBUTION` as ``__distribution__``;
:func:`require_own_packages` finds where a name resolves *without importing it*
(``sys.modules`` first, then :func:`importlib.util.find_spec`), compares that with
the directory beside this package and checks the marker, and raises one
:class:`ShadowedPackageError` that names the file and what to do.

Stdlib only: it runs before anything else of ours is imported, from
``actors/__init__.py``, ``host_bridge/__init__.py`` and :mod:`dsh_schedule`.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import CodeType, ModuleType
from typing import NoReturn

__all__ = ["DISTRIBUTION", "ShadowedPackageError", "require_own_packages"]

DISTRIBUTION = "dsh-tool-schedule"
"""The distribution's name, the value of ``__distribution__`` in each of its packages."""

_ROOT = Path(__file__).resolve().parent.parent  # where our packages sit side by side
_MARKER = re.compile(rf'^__distribution__ = "{re.escape(DISTRIBUTION)}"$', re.MULTILINE)


class ShadowedPackageError(ImportError):
    """``messages``, ``actors`` or ``host_bridge`` is not the package dsh-tool-schedule installs.

    Either a module or package of the same name comes first on ``sys.path`` (or is
    already in ``sys.modules``), or another distribution overwrote ours in place,
    or ours is gone (uninstalling that distribution removes our ``__init__.py``).
    ``name`` is the import name, ``path`` the file it resolves to (``None`` when it
    has none), ``distribution`` the other distribution that installed that file,
    when one is known. The message is one line that says what to do.
    """

    def __init__(
        self, message: str, *, name: str, path: str | None, distribution: str | None
    ) -> None:
        super().__init__(message, name=name, path=path)
        self.distribution = distribution


ShadowedPackageError.__module__ = "dsh_schedule"  # its public home, shown in tracebacks


def require_own_packages(*names: str) -> None:
    """Raise :class:`ShadowedPackageError` unless each of ``names`` is our package.

    Imports nothing of ``names``: a foreign module is found by its location or
    its missing marker, never run.
    """
    for name in names:
        _require_own_package(name)


def _require_own_package(name: str) -> None:
    expected = _ROOT / name
    module = sys.modules.get(name)
    if module is not None:
        origin = _module_origin(module)
        marked = getattr(module, "__distribution__", None) == DISTRIBUTION
        fileless = (
            f"a module without a file ({module!r}) that was put in sys.modules before "
            f"{DISTRIBUTION} was imported"
        )
    else:
        spec = importlib.util.find_spec(name)
        if spec is None:
            _missing(name, expected)
        origin = spec.origin if spec.has_location else None
        marked = origin is not None and _declares_marker(origin, spec.loader, name)
        fileless = f"a namespace package in {', '.join(spec.submodule_search_locations or ())}"
    location = None if origin is None else Path(origin).resolve()
    if location is None or location.parent != expected or location.stem != "__init__":
        if not (expected / "__init__.py").is_file():
            _missing(name, expected)
        _shadowed(name, location, fileless)
    if not marked:
        _overwritten(name, location)


def _missing(name: str, expected: Path) -> NoReturn:
    raise ShadowedPackageError(
        f"the package {name!r} of {DISTRIBUTION} is missing from {expected} (uninstalling "
        f"another distribution that owns the name removes it): run "
        f"`pip install --force-reinstall {DISTRIBUTION}`.",
        name=name,
        path=None,
        distribution=None,
    )


def _shadowed(name: str, location: Path | None, fileless: str) -> NoReturn:
    where = fileless if location is None else str(location)
    kind = "package" if location is None or location.stem == "__init__" else "module"
    raise ShadowedPackageError(
        f"{name!r} resolves to {where}, not to the package {DISTRIBUTION} installs: "
        f"it comes first on sys.path. Rename that {kind}, or take its directory off sys.path.",
        name=name,
        path=None if location is None else str(location),
        distribution=None,
    )


def _overwritten(name: str, location: Path) -> NoReturn:
    other = _owner(name, location)
    by = f"the distribution {other!r}" if other else "another distribution"
    uninstall = f"Run `pip uninstall {other}`" if other else "Uninstall that distribution"
    raise ShadowedPackageError(
        f"{location} is not the package {name!r} of {DISTRIBUTION}: {by} installed the "
        f"same name over it. {uninstall}, then `pip install --force-reinstall "
        f"{DISTRIBUTION}`, or keep the two in separate virtualenvs.",
        name=name,
        path=str(location),
        distribution=other,
    )


def _module_origin(module: ModuleType) -> str | None:
    spec = getattr(module, "__spec__", None)
    if spec is not None and spec.has_location and spec.origin:
        return str(spec.origin)
    file = getattr(module, "__file__", None)
    return file if isinstance(file, str) else None


def _declares_marker(origin: str, loader: object, name: str) -> bool:
    """Whether the module assigns the marker: read from its source or code, never run.

    Source beside it is read as text (a meta-path hook's loader, such as
    pytest's assertion rewriter, need not offer ``get_source``); otherwise the
    loader's code object is asked for the assignment (a ``.pyc``-only or frozen
    install, a zip on ``sys.path``).
    """
    try:
        source = Path(origin).read_text(encoding="utf-8") if origin.endswith(".py") else None
    except (OSError, UnicodeDecodeError):
        source = None  # inside a zip, say: the loader knows
    if source is not None:
        return _MARKER.search(source) is not None
    get_code = getattr(loader, "get_code", None)
    try:
        code = None if get_code is None else get_code(name)
    except (ImportError, OSError, SyntaxError, ValueError, EOFError):
        return False
    return (
        isinstance(code, CodeType)
        and "__distribution__" in code.co_names
        and DISTRIBUTION in code.co_consts
    )


def _owner(name: str, location: Path) -> str | None:
    """The other installed distribution whose files include ``location``, if any."""
    import importlib.metadata  # only when an error is raised: it costs ~20 ms to import

    ours = _normalise(DISTRIBUTION)
    for candidate in importlib.metadata.packages_distributions().get(name, []):
        if _normalise(candidate) == ours:
            continue
        try:
            distribution = importlib.metadata.distribution(candidate)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in distribution.files or ():
            if Path(str(distribution.locate_file(file))).resolve() == location:
                return str(distribution.metadata["Name"])
    return None


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
