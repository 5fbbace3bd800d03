"""A foreign ``messages`` or ``actors`` is reported as one ShadowedPackageError, never run.

Each case runs in a fresh interpreter: a user's module in the working directory or
first on ``PYTHONPATH``, one already in ``sys.modules``, and a copy of the installed
packages whose ``messages/__init__.py`` another distribution overwrote.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dsh_schedule
import host_bridge
from dsh_schedule import ShadowedPackageError
from dsh_schedule._provenance import DISTRIBUTION

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("messages", "actors", "host_bridge", "dsh_schedule")
FOREIGN = "raise SystemExit('the foreign module ran')\n"  # the check must never run it
IMPORTS = ["import host_bridge", "import actors", "from dsh_schedule import install_schedule"]
REPORT = textwrap.dedent(
    """
    import sys
    from dsh_schedule import ShadowedPackageError
    try:
        exec(sys.argv[1])
    except ShadowedPackageError as error:
        print(error.name, error.path, error.distribution, sep="\\n")
        print(error)
    else:
        print("imported")
    """
)


def _python(
    *args: str, cwd: Path, path: Path | None = None, flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` in ``cwd`` with ``path`` (then the code under test) on the path."""
    env = dict(os.environ)
    env.pop("PYTHONSAFEPATH", None)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (path, ROOT) if p is not None)
    return subprocess.run(
        [sys.executable, *flags, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )


def _report(
    statement: str, *, cwd: Path, path: Path | None = None, flags: tuple[str, ...] = ()
) -> list[str]:
    """Run ``statement``; the error's name, path, distribution and message (or "imported")."""
    done = _python("-c", REPORT, statement, cwd=cwd, path=path, flags=flags)
    assert done.returncode == 0, done.stderr
    assert "the foreign module ran" not in done.stdout + done.stderr
    return done.stdout.splitlines()


def _assert_one_error_line(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit status 2, nothing on stdout, and exactly one ``Error:`` line on stderr."""
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: ")
    for fragment in fragments:
        assert fragment in line, (fragment, line)


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    """A user's app directory holding their own ``messages.py``."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "messages.py").write_text(FOREIGN, encoding="utf-8")
    return app


@pytest.mark.parametrize("statement", IMPORTS)
def test_a_messages_module_in_the_working_directory_is_named(
    user_dir: Path, statement: str
) -> None:
    """Regression: this was ``ModuleNotFoundError: No module named 'messages.mailbox'``."""
    name, path, distribution, message = _report(statement, cwd=user_dir)
    shadow = str((user_dir / "messages.py").resolve())
    assert (name, path, distribution) == ("messages", shadow, "None")
    assert message.startswith(f"'messages' resolves to {shadow}, not to the package {DISTRIBUTION}")
    assert "Rename that module" in message


@pytest.mark.parametrize("statement", IMPORTS)
def test_a_messages_module_first_on_pythonpath_is_named(
    user_dir: Path, tmp_path: Path, statement: str
) -> None:
    name, path, _, _ = _report(statement, cwd=tmp_path, path=user_dir)
    assert (name, path) == ("messages", str((user_dir / "messages.py").resolve()))


def test_the_uncaught_error_is_the_last_traceback_line(user_dir: Path) -> None:
    done = _python("-c", "import host_bridge", cwd=user_dir)
    assert done.returncode == 1
    last = done.stderr.splitlines()[-1]
    assert last.startswith("dsh_schedule.ShadowedPackageError: 'messages' resolves to ")
    assert "ModuleNotFoundError" not in done.stderr
    assert "During handling" not in done.stderr


def test_a_foreign_module_already_in_sys_modules_is_reported(tmp_path: Path) -> None:
    statement = "import sys, types; sys.modules['messages'] = types.ModuleType('messages'); " + (
        "import actors"
    )
    name, path, _, message = _report(statement, cwd=tmp_path)
    assert (name, path) == ("messages", "None")
    assert "a module without a file" in message
    assert "put in sys.modules before dsh-tool-schedule was imported" in message


def test_a_foreign_actors_package_is_named(tmp_path: Path) -> None:
    (tmp_path / "actors").mkdir()
    (tmp_path / "actors" / "__init__.py").write_text(FOREIGN, encoding="utf-8")
    name, path, _, message = _report("import host_bridge", cwd=tmp_path)
    assert (name, path) == ("actors", str((tmp_path / "actors" / "__init__.py").resolve()))
    assert "Rename that package" in message


def test_the_console_script_names_dsh_schedule_cli() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    scripts = config["options.entry_points"]["console_scripts"].split()
    assert scripts == ["dsh-schedule", "=", "dsh_schedule.cli:main"]


CONSOLE = "import sys; from dsh_schedule.cli import main; sys.argv[0] = 'dsh-schedule'; main()"


@pytest.mark.parametrize(
    "command",
    [["-c", CONSOLE, "catalog"], ["-m", "dsh_schedule", "catalog"]],
    ids=["console-script", "python-m"],
)
def test_the_command_reports_a_shadowing_module_in_one_line(
    user_dir: Path, command: list[str]
) -> None:
    """Regression: ``dsh-schedule catalog`` exited 1 with a traceback."""
    done = _python(*command, cwd=user_dir)
    _assert_one_error_line(done, str((user_dir / "messages.py").resolve()), "Rename that module")


def test_the_command_reports_a_shadowing_actors_package_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "actors").mkdir()
    (tmp_path / "actors" / "__init__.py").write_text(FOREIGN, encoding="utf-8")
    done = _python("-m", "dsh_schedule", "--version", cwd=tmp_path)
    _assert_one_error_line(done, "'actors' resolves to ")


def _site_copy(site: Path) -> None:
    """Our packages as an installer lays them out, in ``site``."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__")
        )


def _overwrite_messages(site: Path, *, with_metadata: bool) -> Path:
    """Write another distribution's ``messages/__init__.py`` over ours, as pip did."""
    init = site / "messages" / "__init__.py"
    init.write_text(FOREIGN, encoding="utf-8")
    if with_metadata:
        info = site / "messages-0.8.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: messages\nVersion: 0.8.0\n", encoding="utf-8"
        )
        (info / "RECORD").write_text(
            "messages/__init__.py,,\nmessages-0.8.0.dist-info/METADATA,,\n", encoding="utf-8"
        )
    return init.resolve()


def test_an_overwritten_install_names_the_other_distribution(tmp_path: Path) -> None:
    """Regression: PyPI's ``messages`` replaced ours silently, then nothing imported."""
    site = tmp_path / "site-packages"
    _site_copy(site)
    init = _overwrite_messages(site, with_metadata=True)
    for statement in IMPORTS:
        name, path, distribution, message = _report(statement, cwd=tmp_path, path=site)
        assert (name, path, distribution) == ("messages", str(init), "messages")
        assert message == (
            f"{init} is not the package 'messages' of {DISTRIBUTION}: the distribution "
            f"'messages' installed the same name over it. Run `pip uninstall messages`, then "
            f"`pip install --force-reinstall {DISTRIBUTION}`, or keep the two in separate "
            f"virtualenvs."
        )
    done = _python("-m", "dsh_schedule", "catalog", cwd=tmp_path, path=site)
    _assert_one_error_line(done, str(init), "`pip uninstall messages`")


def test_an_overwritten_install_without_metadata_is_still_detected(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    _site_copy(site)
    init = _overwrite_messages(site, with_metadata=False)
    name, path, distribution, message = _report("import actors", cwd=tmp_path, path=site)
    assert (name, path, distribution) == ("messages", str(init), "None")
    assert "another distribution installed the same name over it. Uninstall that" in message


@pytest.mark.parametrize("removed", ["__init__.py", "the package"])
def test_a_removed_package_says_to_reinstall(tmp_path: Path, removed: str) -> None:
    """``pip uninstall messages`` removes our ``__init__.py`` too (its other files stay)."""
    site = tmp_path / "site-packages"
    _site_copy(site)
    if removed == "__init__.py":
        (site / "messages" / "__init__.py").unlink()
    else:
        shutil.rmtree(site / "messages")
    *_, message = _report("import actors", cwd=tmp_path, path=site)
    assert message == (
        f"the package 'messages' of {DISTRIBUTION} is missing from {site.resolve() / 'messages'}"
        f" (uninstalling another distribution that owns the name removes it): run "
        f"`pip install --force-reinstall {DISTRIBUTION}`."
    )


def test_a_healthy_install_copy_imports_and_runs_the_command(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    _site_copy(site)
    assert _report("import host_bridge, actors, messages", cwd=tmp_path, path=site) == ["imported"]
    done = _python("-m", "dsh_schedule", "--version", cwd=tmp_path, path=site)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("dsh-schedule, version ")


def test_importing_dsh_schedule_and_its_cli_imports_none_of_the_generic_names(
    tmp_path: Path,
) -> None:
    code = "import sys, dsh_schedule, dsh_schedule.cli; print(sorted({0} & set(sys.modules)))"
    done = _python("-c", code.format(set(PACKAGES[:3])), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_dsh_schedule_re_exports_the_host_bridge_surface() -> None:
    assert dsh_schedule.__all__ == host_bridge.__all__
    for name in host_bridge.__all__:
        assert getattr(dsh_schedule, name) is getattr(host_bridge, name), name
    assert host_bridge.ShadowedPackageError is ShadowedPackageError
    assert set(host_bridge.__all__) <= set(dir(dsh_schedule))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'install_schedules'"):
        getattr(dsh_schedule, "install_schedules")  # noqa: B009


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_carries_the_marker(package: str) -> None:
    module = __import__(package)
    assert module.__distribution__ == DISTRIBUTION


HOOKED = textwrap.dedent(
    """
    import importlib.machinery, sys

    class Hook:
        '''A meta-path hook whose loader has no get_source (as pytest's assertion rewriter).'''

        def find_spec(self, name, path=None, target=None):
            if name not in ("messages", "actors"):
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None:
                spec.loader = Loader(spec.loader)
            return spec

    class Loader:
        def __init__(self, inner):
            self.inner = inner

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            self.inner.exec_module(module)

    sys.meta_path.insert(0, Hook())
    import host_bridge
    print("imported")
    """
)


def test_our_packages_behind_an_import_hook_without_get_source_import(tmp_path: Path) -> None:
    done = _python("-c", HOOKED, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["imported"]


def test_a_bytecode_only_install_imports_and_runs_the_command(tmp_path: Path) -> None:
    """Regression: a .pyc-only (frozen-style) install was called overwritten."""
    site = tmp_path / "site-packages"
    _site_copy(site)
    compiled = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-b", str(site)], check=False, timeout=120
    )
    assert compiled.returncode == 0
    for source in site.rglob("*.py"):
        source.unlink()
    assert _report("import host_bridge, actors", cwd=tmp_path, path=site) == ["imported"]
    done = _python("-m", "dsh_schedule", "--version", cwd=tmp_path, path=site)
    assert done.returncode == 0, done.stderr


def test_a_zip_on_sys_path_imports(tmp_path: Path) -> None:
    """Regression: our packages inside a zip were called overwritten."""
    site = tmp_path / "site-packages"
    _site_copy(site)
    archive = tmp_path / "app.zip"
    shutil.make_archive(str(archive.with_suffix("")), "zip", site)
    assert _report("import host_bridge, actors", cwd=tmp_path, path=archive) == ["imported"]


def test_a_zip_with_a_foreign_messages_is_still_detected(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    _site_copy(site)
    _overwrite_messages(site, with_metadata=False)
    archive = tmp_path / "app.zip"
    shutil.make_archive(str(archive.with_suffix("")), "zip", site)
    name, _, _, message = _report("import host_bridge", cwd=tmp_path, path=archive)
    assert name == "messages"
    assert "is not the package 'messages' of dsh-tool-schedule" in message


def test_the_command_escapes_the_path_it_names(tmp_path: Path) -> None:
    user_dir = tmp_path / "odd\x1b[31mname\nline"
    user_dir.mkdir()
    (user_dir / "messages.py").write_text(FOREIGN, encoding="utf-8")
    done = _python("-m", "dsh_schedule", "--version", cwd=user_dir)
    _assert_one_error_line(done, "odd\\x1b[31mname\\nline")
    assert "\x1b" not in done.stderr
