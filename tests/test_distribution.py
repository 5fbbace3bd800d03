"""The sdist and the wheel as a user gets them: built from a copy of this tree, then read back.

The sdist is built from a copy of the source tree (so the build writes nothing
here) and the wheel from the unpacked sdist, as ``python -m build`` does, so the
sdist is shown to build. Both use the environment's setuptools without
isolation: no network. Deselect with ``-m "not distribution"``.
"""

from __future__ import annotations

import configparser
import posixpath
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

pytestmark = pytest.mark.distribution

ROOT = Path(__file__).resolve().parent.parent

_BUILD = """
import sys
from setuptools import build_meta

kind, out = sys.argv[1], sys.argv[2]  # read first: the backend rewrites sys.argv
built = build_meta.build_sdist(out) if kind == "sdist" else build_meta.build_wheel(out)
print(built)
"""

_NOT_SOURCE = {".git", ".tox", "venv", "build", "dist", "__pycache__"}
_CACHES = {".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", "__pycache__"}


@dataclass(frozen=True)
class Built:
    """The two archives and the tree the sdist was built from."""

    source: Path
    sdist: list[str]
    """Member paths of the sdist, relative to its top folder (files only)."""
    wheel: list[str]
    metadata: Message
    entry_points: configparser.ConfigParser
    wheel_license: bytes


def _ignore(folder: str, names: list[str]) -> set[str]:
    """What a source copy leaves out: VCS data, virtualenvs, build output and caches."""
    left_out = {
        name
        for name in names
        if name in _NOT_SOURCE | _CACHES
        or name.startswith(".venv")
        or name.endswith((".egg-info", ".pyc"))
    }
    if Path(folder).name == "bench":
        left_out.add("results")
    return left_out


def _build(kind: str, where: Path, out: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-c", _BUILD, kind, str(out)],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out / done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Build once for the module: sdist from a copy of the tree, wheel from the sdist."""
    work = tmp_path_factory.mktemp("distribution")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=_ignore, symlinks=True)
    out = work / "out"
    out.mkdir()
    sdist = _build("sdist", source, out)
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.isfile()]
        (top,) = {m.name.split("/", 1)[0] for m in members}
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # 3.11.4+
        archive.extractall(work / "unpacked", **safe)  # type: ignore[arg-type]
    names = [m.name.split("/", 1)[1] for m in members]
    wheel = _build("wheel", work / "unpacked" / top, out)
    with zipfile.ZipFile(wheel) as archive:
        wheel_names = archive.namelist()
        (dist_info,) = {n.split("/", 1)[0] for n in wheel_names if ".dist-info/" in n}
        metadata = Parser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
        entry_points = configparser.ConfigParser()
        entry_points.read_string(archive.read(f"{dist_info}/entry_points.txt").decode())
        licenses = [
            n for n in wheel_names if n in (f"{dist_info}/LICENSE", f"{dist_info}/licenses/LICENSE")
        ]
        assert len(licenses) == 1, wheel_names
        wheel_license = archive.read(licenses[0])
    return Built(source, sorted(names), wheel_names, metadata, entry_points, wheel_license)


def _packages() -> set[str]:
    """The top-level packages setup.cfg declares."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    include = config["options.packages.find"]["include"].split()
    return {name.split(".", 1)[0] for name in include}


def test_the_wheel_holds_the_typed_packages_and_nothing_else(built: Built) -> None:
    tops = {name.split("/", 1)[0] for name in built.wheel if ".dist-info/" not in name}
    assert tops == _packages()
    for package in tops:
        assert f"{package}/py.typed" in built.wheel
        assert f"{package}/__init__.py" in built.wheel
    assert not {"tests", "docs", "bench", "LICENSE", "README.md"} & tops
    assert not [name for name in built.wheel if "__pycache__" in name or name.endswith(".pyc")]


def test_the_wheel_carries_the_license(built: Built) -> None:
    assert built.wheel_license == (ROOT / "LICENSE").read_bytes()
    assert b"MIT License" in built.wheel_license


def test_the_metadata_describes_the_project(built: Built) -> None:
    metadata = built.metadata
    summary = metadata["Summary"]
    assert "one-shot" not in summary
    assert {"fixed-rate", "cron"} <= set(re.findall(r"[\w-]+", summary))
    classifiers = metadata.get_all("Classifier") or []
    for version in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert "Typing :: Typed" in classifiers
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert "Project-URL" not in metadata  # none until the project has a public address


def test_gevent_is_only_an_extra(built: Built) -> None:
    requires = built.metadata.get_all("Requires-Dist") or []
    gevent = [r for r in requires if re.match(r"gevent\b", r)]
    assert gevent, requires
    assert all("extra ==" in r for r in gevent), gevent
    assert 'gevent>=23; extra == "gevent"' in gevent
    assert "gevent" in (built.metadata.get_all("Provides-Extra") or [])


def test_the_wheel_registers_the_cli_and_no_pytest_plugin(built: Built) -> None:
    assert built.entry_points.sections() == ["console_scripts"]
    assert list(built.entry_points["console_scripts"]) == ["dsh-schedule"]


def _tree(root: Path, folder: str) -> set[str]:
    return {
        path.relative_to(root).as_posix()
        for path in (root / folder).rglob("*")
        if path.is_file() and not _CACHES & set(path.parts) and path.suffix != ".pyc"
    }


@pytest.mark.parametrize("folder", ["tests", "docs", "bench"])
def test_the_sdist_holds_every_file_of(built: Built, folder: str) -> None:
    expected = _tree(built.source, folder)
    assert expected, folder
    assert {n for n in built.sdist if n.startswith(f"{folder}/")} == expected


def test_the_sdist_holds_the_project_files_and_no_caches(built: Built) -> None:
    for name in ("LICENSE", "README.md", "setup.cfg", "pyproject.toml", "tox.ini", ".ci/run"):
        assert name in built.sdist, name
    assert not [n for n in built.sdist if _CACHES & set(n.split("/")) or n.endswith(".pyc")]
    assert not [n for n in built.sdist if n.startswith("bench/results/")]


_INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_HTML_LINK = re.compile(r"\b(?:href|src)=\"([^\"]+)\"")


def _relative_links(markdown: str) -> set[str]:
    """Relative link targets of a Markdown text, without their #anchor or ?query."""
    targets = set()
    for pattern in (_INLINE_LINK, _REFERENCE_LINK, _HTML_LINK):
        for target in pattern.findall(markdown):
            if target.startswith("#") or re.match(r"[a-zA-Z][\w+.-]*:", target):
                continue
            targets.add(re.split(r"[#?]", target, maxsplit=1)[0])
    return targets


def test_the_link_reader_sees_every_kind_of_relative_link() -> None:
    text = (
        '[a](docs/a.md#x) [b](<docs/b.md>) [c](docs/c.md "t") [d](https://x.y/z) [e](#top)\n'
        '[ref]: docs/ref.md\n<img src="docs/img.png"> [m](mailto:a@b.c)\n'
    )
    assert _relative_links(text) == {
        "docs/a.md",
        "docs/b.md",
        "docs/c.md",
        "docs/ref.md",
        "docs/img.png",
    }


def test_every_relative_readme_link_resolves_in_the_sdist(built: Built) -> None:
    links = _relative_links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert links, "the README links its docs"
    members = set(built.sdist)
    missing = []
    for link in sorted(links):
        target = posixpath.normpath(link)
        inside = not target.startswith("../") and target != ".."
        is_file = target in members
        is_folder = any(name.startswith(f"{target}/") for name in members)
        if not inside or not (is_file or is_folder):
            missing.append(link)
    assert missing == []
