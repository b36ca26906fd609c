"""`fleetgen init`: turn a copy of this repository into a team's own fleet.

The example teams and clusters, their rendered tree and the generator's own test suite give way to one
cluster file and one team file written from the models (every key there, the unset ones commented),
`fleet.yaml` with the platform's owners, and the fleet's own test of its rendered tree. generator/,
the workflows, schemas and tool builds stay. The names are checked before anything else (they become
paths), and a copy with a symbolic link anywhere is refused. Everything new is compiled in a stage under
.fleetgen/ first, then renamed into place as one journaled transaction, render's own (`emit`), so bad
values, a failed rename or Ctrl-C change nothing, and an init killed half-way is finished (or undone,
if it had not reached its commit point) by the next init or render; what the new fleet replaces is
kept in the stage's `previous/`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from generator import emit, moves, proofs, repofiles
from generator.config.cluster import ClusterConfig
from generator.config.names import name_problem
from generator.config.repo import FLEET_FILE, load_repo_config
from generator.config.team import TeamConfig
from generator.errors import UsageError
from generator.scaffold.skeleton import skeleton
from generator.yamltext import to_yaml

EXAMPLE_OWNERS = ["@acme/gpu-platform"]
"""The example fleet's platform owners: a fleet.yaml naming others is someone's own fleet already."""
REPLACED = ("teams", "clusters", "rendered", "benchmarks")
"""Folders of the example fleet and of fleetgen's own development that a new fleet starts without."""
FILES = (FLEET_FILE, ".github/CODEOWNERS")
"""Files of the example fleet that the new one replaces."""
CODEOWNERS = FILES[1]
UNTOUCHED = frozenset({".git", ".venv", ".tools", "fleetgen.egg-info", "node_modules", "__pycache__", ".pytest_cache",
                       ".mypy_cache", ".ruff_cache", ".hypothesis"})
"""What init neither reads nor writes, so a link there is no concern of its: git's own folder and
the environments and caches git ignores (a virtual environment and node_modules/.bin are made of
links; tests/run installs the latter under tests/)."""
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


def _is_a_copy(root: Path) -> None:
    if not (root / "generator").is_dir() or not (root / "pyproject.toml").is_file():
        raise UsageError(f"{root} is not a copy of the fleetgen repository (no generator/ and pyproject.toml): "
                         "run `fleetgen init` at the root of a fresh copy")


def _not_a_fleet(root: Path, force: bool) -> None:
    if force:
        return
    repo = load_repo_config(root)  # the repository's own reader: a malformed fleet.yaml is a located error
    owners = repo.platform_owners if repo is not None else EXAMPLE_OWNERS
    if owners != EXAMPLE_OWNERS:
        raise UsageError(f"{FLEET_FILE} names platform owners {owners}: this is already a fleet of its own, and "
                         "init would replace its teams, clusters and rendered tree; pass --force to do so anyway")


def _check(root: Path, spec: FleetSpec) -> None:
    """What can refuse before anything is written, `.fleetgen/` included: the names that become paths,
    the copy itself, a work area git tracks, any link in the copy (a `tests/` or `.github/` pointing out
    would be written through), and a stage of an earlier init that cannot be proven this checkout's."""
    for flag, kind, value in (("--cluster", "cluster", spec.cluster), ("--team", "team", spec.team)):
        if (problem := name_problem(kind, value)) is not None:
            raise UsageError(f"{flag}: {problem}")
    _is_a_copy(root)
    emit.refuse_committed(root)
    repofiles.refuse_links(root, UNTOUCHED)
    _refuse_an_unproven_switch(root)


def _refuse_an_unproven_switch(root: Path) -> None:
    """A stage of init's that still holds `new/` was stopped before it finished; fleetgen takes its own
    forward or back (`emit.recover`), but one whose proof the cache folder does not hold (the checkout
    copied elsewhere, another cache folder) it leaves alone: say where each part is instead."""
    work = root / emit.WORK
    for stage in sorted(work.glob("init-*")) if work.is_dir() else []:
        if (stage / "new").is_dir() and not proofs.stage_proven(root, stage.name):
            rel = stage.relative_to(root).as_posix()
            raise UsageError(f"an earlier `fleetgen init` was stopped before it finished, and this checkout's "
                             f"fleetgen cannot prove {rel}/ is its own stage (the cache folder holds no token for "
                             f"it), so it is left alone: what it had moved aside, if anything, is in {rel}/previous/, "
                             f"what it had not yet moved in is in {rel}/new/; restore the repository (git checkout, "
                             f"or move those back), delete {rel}/ and run init again")


def _build(scratch: Path, files: dict[str, str]) -> None:
    """Compile the new fleet in `scratch` (errors there change nothing in the repository)."""
    from generator import render

    scratch.mkdir()
    for rel, text in files.items():
        repofiles.write_bytes(scratch, rel, text.encode("utf-8"))
    (scratch / "tests/run").chmod(0o755)
    render.write(render.build(scratch, jobs=1))


def _moves(root: Path, new: Path) -> list[moves.Move]:
    """The renames (`generator/moves.py`) that switch the new fleet, built in `new`, in: each replaced
    path aside into the stage's `previous/`, each new one into its place, the kept parts of tests/ back
    into the new tests/."""
    switched = [("aside", rel) for rel in (*REPLACED, "tests", *FILES) if os.path.lexists(root / rel)]
    github = ".github" if not (root / ".github").is_dir() else CODEOWNERS  # no .github/: the new one as a whole
    switched += [("in", rel) for rel in ("teams", "clusters", "rendered", "tests", FLEET_FILE, github)
                 if os.path.lexists(new / rel)]
    return switched + [("back", f"tests/{kept}") for kept in KEPT_TESTS if os.path.lexists(root / "tests" / kept)]


def init_fleet(root: Path, spec: FleetSpec, force: bool = False,
               note: Callable[[str], None] = lambda line: None) -> tuple[list[str], str]:
    """Make `root` the fleet `spec` describes. Returns the paths written (relative to `root`) and the
    folder, under .fleetgen/, that keeps what they replaced. An earlier init that was killed is first
    taken forward or back, and `note` gets a line saying which."""
    _check(root, spec)
    files = _files(spec)  # every value is checked where fleetgen checks it: by the render in the stage
    with emit.locked(root):
        for line in emit.recover(root):
            note(line)
        _not_a_fleet(root, force)
        stage, token = emit.issue_init_stage(root)
        new = root / emit.WORK / stage / "new"
        try:
            _build(new, files)
        except BaseException:
            emit.drop_init_stage(root, stage)
            raise
        emit.switch_init(root, stage, token, _moves(root, new))
    written = [rel for rel in (*files, CODEOWNERS) if (root / rel).is_file()]
    return [*written, "rendered/"], f"{emit.WORK}/{stage}/previous/"
