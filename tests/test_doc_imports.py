"""Every import statement shown in the README and docs/*.md runs as written, and every
dotted name the prose quotes (`host_bridge.protocols.wall_clock_ms`) exists."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_IMPORT = re.compile(r"^(?:from \S+ import (?:\([^)]*\)|[^\n(]+)|import [^\n]+)", re.MULTILINE)


def _imports(path: Path) -> list[str]:
    found: list[str] = []
    for block in _FENCE.findall(path.read_text(encoding="utf-8")):
        found.extend(m.group(0).split("#", 1)[0].strip() for m in _IMPORT.finditer(block))
    return found


CASES = [
    pytest.param(statement, id=f"{path.name}:{statement}")
    for path in DOCS
    for statement in _imports(path)
]


def test_the_docs_show_imports_of_the_project() -> None:
    shown = " ".join(str(param.values[0]) for param in CASES)
    for package in ("dsh_schedule", "host_bridge.testing"):
        assert f"from {package} import" in shown


@pytest.mark.parametrize("statement", CASES)
def test_a_documented_import_runs(statement: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [str(ROOT / "docs" / "examples"), *sys.path])
    exec(compile(statement, "<docs>", "exec"), {})


# `dsh_schedule.host_bridge.…` is a logger name (the loggers live under `dsh_schedule.`).
_DOTTED = re.compile(
    r"`((?:dsh_schedule(?!\.(?:host_bridge|actors|messages)\.)|host_bridge|messages|actors)"
    r"(?:\.[A-Za-z_]\w*)+)"
)


def _resolves(name: str) -> bool:
    """Whether ``name`` is a module, or an attribute path below the longest importable one."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def test_every_dotted_name_the_docs_quote_exists() -> None:
    quoted = [
        f"{path.name}:{number}: {match.group(1)}"
        for path in DOCS
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in _DOTTED.finditer(line)
    ]
    assert len(quoted) > 50  # the docs quote the project's names throughout
    assert [q for q in quoted if not _resolves(q.rsplit(" ", 1)[1])] == []
