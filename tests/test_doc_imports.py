"""Every import statement shown in the README and docs/*.md runs as written."""

from __future__ import annotations

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
    for package in ("host_bridge", "host_bridge.testing"):
        assert f"from {package} import" in shown


@pytest.mark.parametrize("statement", CASES)
def test_a_documented_import_runs(statement: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [str(ROOT / "docs" / "examples"), *sys.path])
    exec(compile(statement, "<docs>", "exec"), {})
