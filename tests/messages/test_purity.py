"""``messages`` stays pure: it imports the standard library and itself, nothing else."""

from __future__ import annotations

import ast
import sys
from importlib import resources
from pathlib import Path

import messages
from messages._zones import load_time_zone

_PACKAGE = Path(messages.__file__).parent


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_messages_imports_only_the_standard_library_and_itself() -> None:
    allowed = set(sys.stdlib_module_names) | {"messages", "__future__"}
    offenders = {
        path.name: sorted(_imported_roots(path) - allowed) for path in sorted(_PACKAGE.glob("*.py"))
    }
    assert {name: roots for name, roots in offenders.items() if roots} == {}


def test_zone_data_comes_from_the_tzdata_package() -> None:
    zone = load_time_zone("Europe/London")
    assert str(zone) == "Europe/London"
    shipped = resources.files("tzdata.zoneinfo").joinpath("Europe").joinpath("London")
    assert shipped.is_file()  # the declared dependency ships the zone files
