"""`fleetgen init`: turn a copy of this repository into a team's own fleet.

The example teams and clusters, their rendered tree and the generator's own test suite give way to one
cluster file and one team file written from the models (every key there, the unset ones commented),
`fleet.yaml` with the platform's owners, and the fleet's own test of its rendered tree. generator/,
the workflows, schemas and tool builds stay. Everything new is compiled in a scratch folder first, so
bad values change nothing."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from generator.config.cluster import ClusterConfig
from generator.config.repo import FLEET_FILE, load_repo_config
from generator.config.team import TeamConfig
from generator.errors import UsageError
from generator.scaffold.skeleton import skeleton
from generator.yamltext import to_yaml

EXAMPLE_OWNERS = ["@acme/gpu-platform"]
"""The example fleet's platform owners: a fleet.yaml naming others is someone's own fleet already."""
REPLACED = ("teams", "clusters", "rendered", "benchmarks")
"""Folders of the example fleet and of fleetgen's own development that a new fleet starts without."""
KEPT_TESTS = ("upstream",)
"""What of tests/ a fleet keeps: the pinned tool builds its workflows use (kubeconform)."""
SCHEMA_LINE = "yaml-language-server: $schema=../schemas/{kind}.schema.json"


@dataclass(frozen=True)
class FleetSpec:
    """What `fleetgen init` asks for: nothing here has a default that could be someone else's."""

    owner: str
    repo_url: str
    registry: str
    cluster: str
    team: str
    gpu_product: str
    gpus_per_node: int
    nodes: int
    cpu_per_node: str
    memory_per_node: str
    engine: str = "argocd"
    kubernetes_version: str = "1.36"

    def cluster_values(self) -> dict[str, Any]:
        pool = self.gpu_product.lower().removeprefix("nvidia-").split("-")[0] or "gpu"
        return {
            "name": self.cluster, "kubernetesVersion": self.kubernetes_version,
            "nodePools": [{"name": pool, "gpu": {"product": self.gpu_product, "perNode": self.gpus_per_node},
                           "nodes": self.nodes, "cpuPerNode": self.cpu_per_node,
                           "memoryPerNode": self.memory_per_node,
                           "nodeLabels": {"nvidia.com/gpu.product": self.gpu_product},
                           "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}],
            "priorities": [{"name": "standard", "value": 100}],
            "gitops": {"engine": self.engine, "repoUrl": self.repo_url},
            "images": {"registry": self.registry},
        }

    def team_values(self) -> dict[str, Any]:
        pool = self.cluster_values()["nodePools"][0]
        return {"name": self.team, "owners": [self.owner], "members": {"groups": [self.team]},
                "defaultPriority": "standard",
                "quotas": {self.cluster: {pool["name"]: {"gpus": pool["nodes"] * pool["gpu"]["perNode"]}}}}


def _files(spec: FleetSpec) -> dict[str, str]:
    cluster = skeleton(ClusterConfig, spec.cluster_values(),
                       f"{SCHEMA_LINE.format(kind='cluster')}\nCluster {spec.cluster}, written by `fleetgen init`: "
                       "the keys set below are yours; every other key is listed commented, with its meaning "
                       "and default.\nReference: docs/reference/config.md.")
    team = skeleton(TeamConfig, spec.team_values(),
                    f"{SCHEMA_LINE.format(kind='team')}\nTeam {spec.team}, written by `fleetgen init`: its whole "
                    "pool as guaranteed GPUs to start with; every other key is listed commented.")
    fleet = ("# Repository-wide settings (docs/how-to/reviews.md), written by `fleetgen init`.\n"
             + to_yaml({"platformOwners": [spec.owner], "platformApprovesQuotas": True}))
    tests = resources.files("generator.scaffold").joinpath("files")
    return {f"clusters/{spec.cluster}.yaml": cluster, f"teams/{spec.team}.yaml": team, FLEET_FILE: fleet,
            "tests/test_fleet.py": tests.joinpath("test_fleet.py").read_text(encoding="utf-8"),
            "tests/run": tests.joinpath("run").read_text(encoding="utf-8")}


def _guard(root: Path, force: bool) -> None:
    if not (root / "generator").is_dir() or not (root / "pyproject.toml").is_file():
        raise UsageError(f"{root} is not a copy of the fleetgen repository (no generator/ and pyproject.toml): "
                         "run `fleetgen init` at the root of a fresh copy")
    if force:
        return
    repo = load_repo_config(root)  # the repository's own reader: a malformed fleet.yaml is a located error
    owners = repo.platform_owners if repo is not None else EXAMPLE_OWNERS
    if owners != EXAMPLE_OWNERS:
        raise UsageError(f"{FLEET_FILE} names platform owners {owners}: this is already a fleet of its own, and "
                         "init would replace its teams, clusters and rendered tree; pass --force to do so anyway")


def _build(scratch: Path, files: dict[str, str]) -> None:
    """Compile the new fleet in `scratch` (errors there change nothing in the repository)."""
    from generator import render

    for rel, text in files.items():
        path = scratch / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    render.write(render.build(scratch, jobs=1))


def init_fleet(root: Path, spec: FleetSpec, force: bool = False) -> list[str]:
    """Make `root` the fleet `spec` describes; returns the paths written, relative to `root`."""
    _guard(root, force)
    files = _files(spec)  # every value is checked where fleetgen checks it: by the render in the scratch folder
    root.joinpath(".fleetgen").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root / ".fleetgen", prefix="init-") as name:
        scratch = Path(name)
        _build(scratch, files)
        for folder in REPLACED:
            shutil.rmtree(root / folder, ignore_errors=True)
        tests = root / "tests"
        for entry in list(tests.iterdir()) if tests.is_dir() else []:
            if entry.name not in KEPT_TESTS:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        written = []
        for rel in (*files, ".github/CODEOWNERS"):
            source, target = scratch / rel, root / rel
            if source.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
                written.append(rel)
        (root / "tests/run").chmod(0o755)
        shutil.copytree(scratch / "rendered", root / "rendered")
        written.append("rendered/")
    return written
