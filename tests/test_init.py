"""Issue 29: `fleetgen init` turns a copy of this repository into a fleet of one's own, which passes its
own checks: render, validate with kubeconform, a diff on a branch, its workflows under actionlint and
its own tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from generator.config.cluster import ClusterConfig
from generator.config.team import TeamConfig
from tests.conftest import REPO, checkout_copy

ARGS = ["init", "--owner", "@gpuco/platform", "--repo-url", "https://github.com/gpuco/fleet.git",
        "--registry", "ghcr.io/gpuco", "--cluster", "prod", "--team", "research",
        "--gpu-product", "NVIDIA-H100-80GB-HBM3", "--gpus-per-node", "8", "--nodes", "16",
        "--cpu-per-node", "192", "--memory-per-node", "1800Gi"]


def fleetgen(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "generator", "--root", str(root), *args], capture_output=True,
                          text=True, timeout=600, env=env, cwd=root)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = checkout_copy(tmp_path_factory.mktemp("new") / "fleet")
    result = fleetgen(root, *ARGS)
    assert result.returncode == 0, result.stderr
    return root


def test_init_replaces_the_example_with_a_documented_skeleton(fleet: Path) -> None:
    assert sorted(p.name for p in (fleet / "teams").iterdir()) == ["research.yaml"]
    assert sorted(p.name for p in (fleet / "clusters").iterdir()) == ["prod.yaml"]
    assert sorted(p.name for p in (fleet / "rendered").iterdir()) == ["gitops", "prod"]
    assert sorted(p.name for p in (fleet / "tests").iterdir()) == ["run", "test_fleet.py", "upstream"]
    assert not (fleet / "benchmarks").exists() and (fleet / "generator").is_dir() and (fleet / "schemas").is_dir()
    assert yaml.safe_load((fleet / "fleet.yaml").read_text())["platformOwners"] == ["@gpuco/platform"]
    assert "@gpuco/platform" in (fleet / ".github/CODEOWNERS").read_text()
    assert "acme" not in (fleet / ".github/CODEOWNERS").read_text()
    cluster_text = (fleet / "clusters/prod.yaml").read_text()
    cluster = yaml.safe_load(cluster_text)
    assert cluster["gitops"] == {"engine": "argocd", "repoUrl": "https://github.com/gpuco/fleet.git"}
    assert cluster["images"] == {"registry": "ghcr.io/gpuco"}
    assert cluster["nodePools"][0]["gpu"] == {"product": "NVIDIA-H100-80GB-HBM3", "perNode": 8}
    team = yaml.safe_load((fleet / "teams/research.yaml").read_text())
    assert team["quotas"] == {"prod": {"h100": {"gpus": 128}}}
    # every key of the models is there, set or commented with its meaning
    for model, text in ((ClusterConfig, cluster_text), (TeamConfig, (fleet / "teams/research.yaml").read_text())):
        for name, field in model.model_fields.items():
            key = field.alias or name
            assert f"\n{key}:" in text or f"\n# {key}:" in text, key
        assert all(len(line) <= 100 for line in text.splitlines())
    assert "# kueue:\n  # Kueue release" in cluster_text
    assert "  # - key:   # required" in cluster_text  # a commented example item of a list
    assert (fleet / "tests/run").stat().st_mode & 0o111


def test_the_new_fleet_renders_and_validates(fleet: Path, kubeconform_on_path: Path, shared_schemas: Path,
                                             shared_crds: Path) -> None:
    assert fleetgen(fleet, "render", "--check").returncode == 0
    result = fleetgen(fleet, "validate", "--offline", "--schema-location", str(shared_schemas), "--crd-location",
                      str(shared_crds))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kubeconform not on PATH" not in result.stderr  # kubeconform -strict ran, and passed


def test_its_own_tests_pass(fleet: Path, kubeconform_on_path: Path, shared_schemas: Path, shared_crds: Path) -> None:
    env = {**os.environ, "FLEETGEN_SCHEMA_LOCATION": str(shared_schemas), "FLEETGEN_CRD_LOCATION": str(shared_crds)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fleet.py"],
                          cwd=fleet, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout + proc.stderr


def test_a_change_on_a_branch_diffs(fleet: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(fleet, work, ignore=shutil.ignore_patterns(".fleetgen"))
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "init")
    git(work, "checkout", "-qb", "smaller")
    path = work / "teams/research.yaml"
    path.write_text(path.read_text().replace("gpus: 128", "gpus: 96"))
    assert fleetgen(work, "render").returncode == 0
    git(work, "commit", "-qam", "research gives back 32 GPUs")
    result = fleetgen(work, "diff", "--base", "main")
    assert result.returncode == 1, result.stderr
    assert "research" in result.stdout and "128" in result.stdout and "96" in result.stdout, result.stdout


def test_its_workflows_pass_actionlint(fleet: Path) -> None:
    actionlint = shutil.which("actionlint")
    if actionlint is None:
        pytest.fail("actionlint is part of the test extras")
    workflows = sorted(str(p) for p in (fleet / ".github/workflows").glob("*.yml"))
    assert len(workflows) >= 4
    proc = subprocess.run([actionlint, *workflows], capture_output=True, text=True, cwd=fleet)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for workflow in workflows:  # nothing they run was removed with the example
        text = Path(workflow).read_text()
        for token in ("tests/logql", "tests/preview", "benchmarks/"):
            assert token not in text, (workflow, token)


def test_init_refuses_an_existing_fleet_and_bad_values_change_nothing(fleet: Path, tmp_path: Path) -> None:
    again = fleetgen(fleet, *ARGS)
    assert again.returncode == 2 and "already a fleet of its own" in again.stderr and "--force" in again.stderr
    fresh = checkout_copy(tmp_path / "fresh")
    def tree() -> list[str]:  # the repository's files; not the work area or Python's bytecode caches
        return sorted(str(p.relative_to(fresh)) for p in fresh.rglob("*")
                      if ".fleetgen" not in p.parts and "__pycache__" not in p.parts)

    before = tree()
    bad = [*ARGS]
    bad[bad.index("ghcr.io/gpuco")] = "registry.example.com/gpuco"
    result = fleetgen(fresh, *bad)
    assert result.returncode == 2 and "images.registry" in result.stderr and "reserved for examples" in result.stderr
    assert "Traceback" not in result.stderr
    assert tree() == before


def test_init_outside_a_fleetgen_copy_is_a_usage_error(tmp_path: Path) -> None:
    result = fleetgen(tmp_path, *ARGS)
    assert result.returncode == 2 and "not a copy of the fleetgen repository" in result.stderr


def test_the_fleet_files_it_writes_are_package_data() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert "scaffold/files/*" in text


@pytest.mark.slow
def test_the_readme_pre_commit_hook_guards_the_new_fleet(fleet: Path, tmp_path: Path) -> None:
    """pre-commit runs the README's hook (the fleet's own ./fleetgen, in its .venv) and refuses a stale tree."""
    from tests.test_release import _readme_block

    work = tmp_path / "work"
    shutil.copytree(fleet, work, ignore=shutil.ignore_patterns(".fleetgen"))
    (work / ".pre-commit-config.yaml").write_text(_readme_block("- [pre-commit](https://pre-commit.com) hooks"))
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    ok = subprocess.run(["pre-commit", "run", "--all-files"], cwd=work, capture_output=True, text=True, env=env,
                        timeout=900)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    path = work / "teams/research.yaml"
    path.write_text(path.read_text().replace("gpus: 128", "gpus: 64"))
    stale = subprocess.run(["pre-commit", "run", "--all-files"], cwd=work, capture_output=True, text=True, env=env,
                           timeout=300)
    assert stale.returncode == 1 and "fleetgen render --check" in stale.stdout and "Failed" in stale.stdout


def test_a_malformed_fleet_file_is_a_located_error_not_a_crash(tmp_path: Path) -> None:
    fresh = checkout_copy(tmp_path / "fresh")
    (fresh / "fleet.yaml").write_text("- not\n- a mapping\n")
    result = fleetgen(fresh, *ARGS)
    assert result.returncode == 2 and "fleet.yaml" in result.stderr and "Traceback" not in result.stderr
    assert "fleetgen bug" not in result.stderr, result.stderr
    assert (fresh / "teams/ml-research.yaml").is_file()  # nothing replaced
