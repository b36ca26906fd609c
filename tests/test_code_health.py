"""Issue 29 (part): the checks CI runs on the code itself, and what the command line promises.

ruff and mypy run here, so CI fails on a lint or type error: mypy found a real crash
(`fleetgen health status` raised TypeError on any cluster with drain enabled; the test of that
is in tests/test_reconciler_integration.py).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO, run
from tests.upstream.absent import skip_or_fail


def _tool(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        skip_or_fail(f"{module} is not installed: python3 -m pip install -e '.[test]'")


def test_ruff_finds_nothing() -> None:
    _tool("ruff")
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=REPO, capture_output=True,
                          text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_finds_nothing_in_the_package() -> None:
    _tool("mypy")
    proc = subprocess.run([sys.executable, "-m", "mypy", "generator"], cwd=REPO, capture_output=True, text=True,
                          check=False, timeout=600)
    assert proc.returncode == 0 and proc.stdout.startswith("Success:"), proc.stdout + proc.stderr


def test_imports_point_down_the_pipeline() -> None:
    """The config layer used to import compile, capacity, validate and diff through function-local
    imports (a 13-module cycle). import-linter's layers contract now holds every stage to importing only
    the stages below it, function-local imports included."""
    _tool("importlinter")
    proc = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                           "lint_imports_command()"], cwd=REPO, capture_output=True, text=True, check=False,
                          timeout=300)
    assert proc.returncode == 0 and "2 kept, 0 broken" in proc.stdout, proc.stdout + proc.stderr


def test_every_module_has_a_layer() -> None:
    """A new top-level module or package outside the contract would escape it."""
    layers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    named = {m.strip() for layer in layers for m in layer.split("|")}
    modules = {f"generator.{p.stem if p.suffix == '.py' else p.name}" for p in (REPO / "generator").iterdir()
               if (p.suffix == ".py" and not p.name.startswith("__")) or (p / "__init__.py").is_file()}
    assert modules == named


def _test_modules_imported(tree: ast.Module, tests: Path) -> list[tuple[int, str]]:
    """(line, module) of each import of a test module, at the top or inside a function: `tests.test_x`
    however it is spelt (`import`, `from ... import`, `from tests import test_x`), and `test_x` or
    `.test_x` (pytest puts tests/ itself on sys.path)."""
    def is_test_module(name: str) -> bool:
        parts = name.split(".")
        if parts[0] == "tests":
            parts = parts[1:]
        return bool(parts) and parts[0].startswith("test_") and (tests / f"{parts[0]}.py").is_file()

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if is_test_module(base):
                found.append((node.lineno, base))
            elif base in ("tests", "") and (base or node.level):
                found += [(node.lineno, f"{base}.{alias.name}".lstrip("."))
                          for alias in node.names if is_test_module(alias.name)]
    return found


def test_no_test_module_imports_another() -> None:
    """Helpers the test modules share live in modules of their own: those that start an upstream program
    (an operator, a twin, Loki, Prometheus, helm, kubeconform) under tests/upstream/, the others in plainly
    named modules under tests/. Fourteen test modules imported others for such helpers, which ran the
    imported module's own set-up and loaded it a second time (pytest imports it as `test_x`, the importer
    as `tests.test_x`), and left a test's helpers where nobody looks for them."""
    tests = REPO / "tests"
    found = [f"tests/{path.name}:{line}: imports {module}"
             for path in sorted(tests.glob("test_*.py"))
             for line, module in _test_modules_imported(ast.parse(path.read_text(), str(path)), tests)]
    assert not found, "\n".join(found)


def test_the_python_floor_is_one_statement() -> None:
    """`requires-python >=3.10` was false (datetime.UTC, and a dependency, need 3.11): the floor,
    the type checker, the linter's target and the README say the same version, and it runs here."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    floor = re.fullmatch(r">=(\d+)\.(\d+)", project["project"]["requires-python"])
    assert floor is not None
    major, minor = int(floor.group(1)), int(floor.group(2))
    assert project["tool"]["mypy"]["python_version"] == f"{major}.{minor}"
    assert project["tool"]["ruff"]["target-version"] == f"py{major}{minor}"
    assert f"Python {major}.{minor} or later" in (REPO / "README.md").read_text()
    assert sys.version_info[:2] >= (major, minor)


@pytest.mark.parametrize("group", [[], ["job"], ["health"]])
def test_help_shows_every_summary_whole(group: list[str]) -> None:
    result = run(REPO, *group, "--help")
    commands = result.out[result.out.index("Commands:"):]
    assert result.code == 0 and not [line for line in commands.splitlines() if line.endswith("...")], commands


@pytest.mark.parametrize(("given", "said"), [("no-such-folder", "no such folder"),
                                             ("empty", "holds neither a fleet")])
def test_diff_to_a_mistyped_path_is_an_error_not_a_destroy_everything(given: str, said: str, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run(REPO, "diff", "--from", str(REPO), "--to", str(tmp_path / given))
    assert result.code == 2 and said in result.err and "destroy" not in result.out
