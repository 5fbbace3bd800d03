"""Public surface: names in ``__all__`` of the public modules, per package and in total.

Usage (from the repository root)::

    python -m bench.public_surface [--modules]

A module is public when no component of its dotted name starts with ``_``; a
package's ``__init__.py`` counts as the package itself, so ``host_bridge.testing``
is public and ``messages._fold`` is not. ``__all__`` is read from the source
(a literal list or tuple, possibly extended with ``+=``), so nothing is imported.
``--modules`` lists every public module with its count.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ModuleSurface", "count_surface", "main"]

PACKAGES = ("messages", "actors", "host_bridge")
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ModuleSurface:
    """One public module and the number of names its ``__all__`` lists."""

    package: str
    module: str
    names: int


def _dotted(path: Path) -> tuple[str, ...]:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _all_names(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in tree.body:
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names = []
            value = node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and (
            isinstance(node.target, ast.Name) and node.target.id == "__all__"
        ):
            if isinstance(node, ast.AnnAssign):
                names = []
            value = node.value
        if isinstance(value, ast.List | ast.Tuple):
            names.extend(
                e.value
                for e in value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return len(names)


def count_surface(packages: Sequence[str] = PACKAGES) -> Iterator[ModuleSurface]:
    """Every public module of ``packages``, in path order, with its ``__all__`` size."""
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            dotted = _dotted(path)
            if any(part.startswith("_") for part in dotted):
                continue
            yield ModuleSurface(package, ".".join(dotted), _all_names(path))


def main(argv: Sequence[str] | None = None) -> None:
    """Print the table of names and public modules per package."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", action="store_true", help="list every public module")
    args = parser.parse_args(argv)
    surfaces = list(count_surface())
    if args.modules:
        for surface in surfaces:
            print(f"{surface.names:5d}  {surface.module}")
        print()
    print(f"{'package':<12} {'names':>6} {'modules':>8}")
    for package in PACKAGES:
        mine = [s for s in surfaces if s.package == package]
        print(f"{package:<12} {sum(s.names for s in mine):>6} {len(mine):>8}")
    print(f"{'total':<12} {sum(s.names for s in surfaces):>6} {len(surfaces):>8}")


if __name__ == "__main__":
    main()
