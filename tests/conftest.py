"""Shared fixtures: the example fleet copied to a temp folder, ../shared, and a CLI runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.upstream.absent import skip_or_fail

REPO = Path(__file__).resolve().parent.parent
SERVER_POLL = 0.05
"""`serve_forever`'s poll interval for the tests' loopback servers: `shutdown()` waits up to one
interval, and the default 0.5 s was spent in every such test's teardown."""
SHARED = REPO.parent / "shared"

# Bytecode is written during the tests even where the environment says not to (CI sets
# PYTHONDONTWRITEBYTECODE): without it every `fleetgen` the tests start compiles the package from
# source (0.6 s each), and every pytest worker rewrites every test module's asserts again (6 s).
# The files go to __pycache__ folders, which git ignores and the generator's code key leaves out.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def shared_or_skip(*parts: str) -> Path:
    """A path inside ../shared (beside the checkout), or skip saying why (fail under CI, which has it)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        skip_or_fail(f"{path} is absent: the upstream CRDs, schemas and charts live in ../shared beside the "
                     "checkout")
    return path


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests set their own locations; none reads the user's cache or CI's exported settings."""
    for name in ("FLEETGEN_ROOT", "FLEETGEN_SCHEMA_LOCATION", "FLEETGEN_CRD_LOCATION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FLEETGEN_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def shared_schemas() -> Path:
    return shared_or_skip("schemas")


@pytest.fixture(scope="session")
def shared_crds() -> Path:
    return shared_or_skip("crds")


@pytest.fixture
def fleet_root(tmp_path: Path) -> Path:
    """A private copy of the example fleet (teams/, clusters/, rendered/)."""
    root = tmp_path / "fleet"
    root.mkdir()
    for name in ("teams", "clusters", "rendered"):
        shutil.copytree(REPO / name, root / name)
    return root


def checkout_copy(dest: Path) -> Path:
    """A copy of this checkout as a fresh clone would hold it: tracked files and new ones not ignored
    (so uncommitted work is tested too), with none of the caches, environments or stage beside it."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        source = REPO / rel
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree, not yet in the index
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return dest


def interrupted_switch(root: Path, wanted: dict[str, bytes], only: list[str], renames: int,
                       files: dict[str, bytes] | None = None) -> None:
    """What a genuine render killed after `renames` renames of its switch leaves (its journal
    committed, its stage issued): for the next run to finish. Nothing after the kill runs."""
    from generator import emit

    real, calls = os.rename, [0]

    def rename(src: Any, dst: Any, **where: Any) -> None:
        if calls[0] == renames:
            raise SystemExit("killed")
        calls[0] += 1
        real(src, dst, **where)

    os.rename = rename  # type: ignore[assignment]
    try:
        emit.write_tree(root, wanted, only, files)
    except SystemExit:
        pass
    finally:
        os.rename = real


def fd_path(name: Any, dir_fd: int | None) -> str:
    """The path a `dir_fd` call names (for tests that watch renames made through descriptors)."""
    return str(name) if dir_fd is None else f"{os.readlink(f'/proc/self/fd/{dir_fd}')}/{name}"


def edit(root: Path, rel: str, old: str, new: str) -> None:
    """Replace the first `old` in a fleet file; fail loudly if a test case went stale."""
    path = root / rel
    text = path.read_text()
    assert old in text, f"test case out of date: {old!r} not in {rel}"
    path.write_text(text.replace(old, new, 1))


EXAMPLE_TENANCY = "\ntenancy: {membersReadNodes: true}\n"
"""The example clusters' one tenancy line (SkyPilot reads Nodes there)."""


def add_tenancy(root: Path, cluster: str, body: str) -> None:
    """Add `body` (keys indented by two spaces, each line ending in a newline) to a cluster file's `tenancy:`."""
    path = root / "clusters" / f"{cluster}.yaml"
    text = path.read_text()
    assert text.count("\ntenancy:") == text.count(EXAMPLE_TENANCY) <= 1, \
        f"test case out of date: clusters/{cluster}.yaml's tenancy changed"
    ours = EXAMPLE_TENANCY in text
    text = text.replace(EXAMPLE_TENANCY, "\n") + "tenancy:\n" + ("  membersReadNodes: true\n" if ours else "")
    path.write_text(text + body)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by relative path."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@dataclass
class Result:
    code: int
    out: str
    err: str


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
                   check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository holding the example fleet, committed."""
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("teams", "clusters"):
        shutil.copytree(REPO / name, root / name)
    shutil.copy(REPO / "fleet.yaml", root / "fleet.yaml")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def run(root: Path, *args: str) -> Result:
    """Run the CLI in process against `root`; stdout and stderr kept apart."""
    from generator.cli import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["--root", str(root), *args], catch_exceptions=False)
    return Result(res.exit_code, res.stdout, res.stderr)


def risks_between(base: Path, head: Path) -> dict[str, list[str]]:
    """`fleetgen diff --from base --to head` risks, by rule: "severity: message" each."""
    import json

    result = run(head, "diff", "--from", str(base), "--to", str(head), "--format", "json")
    assert result.code == 1, result.err
    out: dict[str, list[str]] = {}
    for risk in json.loads(result.out)["risks"]:
        out.setdefault(risk["rule"], []).append(f"{risk['severity']}: {risk['message']}")
    return out


def run_process(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m generator` in a fresh interpreter."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "generator", "--root", str(root), *args], capture_output=True,
                          text=True, env=full_env, check=False, timeout=300)


def local_checks(shared_schemas: Path, shared_crds: Path) -> list[str]:
    """Options that make render run every check offline against ../shared."""
    return ["--schema-location", str(shared_schemas), "--crd-location", str(shared_crds)]


# ------------------------------------------------------------------ the real control plane

UPSTREAM_FIXTURES = {"upstream_tools", "upstream_etcd", "kube_stack", "deployed", "kubeconform_on_path"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that runs an upstream program is marked `upstream` (select: -m upstream)."""
    for item in items:
        if UPSTREAM_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.upstream)


HEAVY_TWINS = frozenset({"tests/test_twin_gitops.py", "tests/test_twin_scheduling.py",
                         "tests/test_upgrade_story_flux.py"})
"""Modules that each drive a whole twin (Argo CD or Flux, or a fleet's every profile) for many minutes.
Side by side on two cores they starved each other's API servers into 504s, so `--dist loadfile` sends
them to one worker as one unit, one after the other."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with HEAVY_TWINS as one unit of work (`xdist_group` marks need `--dist loadgroup`,
    which would spread every other module test by test, setting up its twin on both workers)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeavyTwinsApart(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "heavy-twins" if scope in HEAVY_TWINS else scope

    return HeavyTwinsApart(config, log)


@pytest.fixture(scope="session")
def upstream_tools() -> None:
    """The pinned upstream programs; skipped (failed under CI, which always builds them) when absent."""
    from tests.upstream import tools

    missing = tools.missing()
    if missing:
        skip_or_fail(f"upstream programs not built ({', '.join(missing)}) in {tools.tools_dir()}: "
                     "run python3 tests/upstream/tools.py build")


@pytest.fixture
def kubeconform_on_path(upstream_tools: None, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The pinned kubeconform first on PATH, where `fleetgen validate` looks for it; its path."""
    from tests.upstream import tools

    exe = tools.binary("kubeconform")
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    return exe


@pytest.fixture(scope="session")
def upstream_etcd(upstream_tools: None, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One etcd for the session; every Stack keeps its data under its own prefix."""
    from tests.upstream.cluster import Etcd

    etcd = Etcd.start(tmp_path_factory.mktemp("etcd"))
    yield etcd
    etcd.stop()


@pytest.fixture(scope="session")
def kube_stack(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real API server with Kueue (its own default configuration) and JobSet, for the whole session."""
    from tests.upstream.cluster import Stack

    stack = Stack.start(tmp_path_factory.mktemp("stack"), upstream_etcd)
    yield stack
    stack.stop()
