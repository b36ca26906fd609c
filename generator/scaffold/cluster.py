"""A new cluster's file, as `fleetgen init` writes the first and `fleetgen add cluster` each later one.

The file is written from the model: the keys given are set, every other key is listed commented with
its meaning and default, and the health reconciler starts in dry run. `add_cluster` checks the new file
with the whole fleet (every cross-file rule, the compile and the validators of the new cluster) in a
scratch copy of the fleet's inputs first, and then creates it whole, never over a file there, so a
bad value or an existing name changes nothing in the repository.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generator import repofiles
from generator.config.cluster import ClusterConfig
from generator.config.names import name_problem
from generator.errors import UsageError
from generator.scaffold.example import input_paths
from generator.scaffold.skeleton import skeleton

if TYPE_CHECKING:
    from generator.validate.pipeline import Options

SCHEMA_LINE = "yaml-language-server: $schema=../schemas/{kind}.schema.json"


@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """One cluster as the command line describes it: one GPU pool, the GitOps engine, the repository it
    syncs from and the registry it pulls fleetgen's images from."""

    cluster: str
    repo_url: str
    registry: str
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
            "health": {"dryRun": True},  # decisions logged, no node touched, until someone has read them
        }


def cluster_file(spec: ClusterSpec, writer: str) -> str:
    return skeleton(ClusterConfig, spec.cluster_values(),
                    f"{SCHEMA_LINE.format(kind='cluster')}\nCluster {spec.cluster}, written by `{writer}`: the keys "
                    "set below are yours; every other key is listed commented, with its meaning and default.\n"
                    "Reference: docs/reference/config.md.")


def cluster_steps(spec: ClusterSpec, first: int) -> list[str]:
    """A new cluster's steps from its first commit to its first sync, numbered from `first`: the
    reconciler's image must exist before the cluster syncs, and it starts in dry run."""
    from generator import __version__

    steps = [f"commit and push, then build fleetgen's images: run the `images` workflow (Actions > images > Run "
             f"workflow) so that {spec.registry}/fleetgen:{__version__} exists; the health reconciler runs it (set "
             f"the repository variable IMAGE_REGISTRY={spec.registry} if that is not ghcr.io/<your org>)",
             f"bootstrap the cluster from rendered/gitops/{spec.cluster} (docs/how-to/gitops.md)",
             "the health reconciler starts in dry run (health.dryRun: true): it logs what it would cordon and "
             "repair and touches no node; set dryRun: false once its decisions look right (docs/how-to/health.md)"]
    return [f"  {n}. {step}" for n, step in enumerate(steps, first)]


def add_steps(spec: ClusterSpec) -> list[str]:
    """What to do after `add cluster`: teams get quota there in their own files, then the cluster's steps."""
    return ["next:", f"  1. read the commented keys in clusters/{spec.cluster}.yaml; give teams quota there in their "
            f"own files (quotas.{spec.cluster}.<pool>, approved by their owners), `./fleetgen render` after each "
            "edit", *cluster_steps(spec, 2)]


def _fleet_value(clusters: dict[str, str], flag: str, given: str | None) -> str:
    """The fleet's one value of a setting its clusters share (`--repo-url`, `--registry`), or the flag's."""
    if given:
        return given
    values = sorted(set(clusters.values()))
    if len(values) == 1:
        return values[0]
    seen = ", ".join(f"{name}: {value}" for name, value in sorted(clusters.items())) or "no cluster sets it"
    raise UsageError(f"{flag} is required: the fleet's clusters do not share one value to start from ({seen})")


def spec_for(root: Path, values: dict[str, Any]) -> ClusterSpec:
    """`add cluster`'s arguments as a ClusterSpec: `repo_url` and `registry` default to the fleet's."""
    from generator.checks import load_fleet

    fleet = load_fleet(root)  # a fleet with errors is fixed first: the new cluster is checked beside it
    repo = _fleet_value({n: c.config.gitops.repo_url for n, c in fleet.clusters.items()}, "--repo-url",
                        values.pop("repo_url"))
    registry = _fleet_value({n: c.config.images.registry for n, c in fleet.clusters.items()
                             if c.config.images is not None and c.config.images.registry}, "--registry",
                            values.pop("registry"))
    return ClusterSpec(repo_url=repo, registry=registry, **values)


def add_cluster(root: Path, spec: ClusterSpec, options: Options | None = None) -> str:
    """Create `clusters/<name>.yaml` for `spec` once the whole fleet with it passes every check and the
    new cluster compiles and validates (in a scratch copy); its path relative to `root`."""
    from generator import render

    if (problem := name_problem("cluster", spec.cluster)) is not None:
        raise UsageError(f"--cluster: {problem}")
    rel = f"clusters/{spec.cluster}.yaml"
    if repofiles.lexists(root, rel):
        raise UsageError(f"{rel} exists: the fleet has a cluster file of that name; choose another name, or edit "
                         "that file")
    text = cluster_file(spec, "fleetgen add cluster").encode("utf-8")
    with tempfile.TemporaryDirectory(prefix="fleetgen-add-") as scratch:
        copy = Path(scratch)
        for path in input_paths(root):
            repofiles.write_bytes(copy, path, repofiles.read_bytes(root, path))
        repofiles.write_bytes(copy, rel, text)
        render.build(copy, [spec.cluster], options, jobs=1)
    try:
        repofiles.create_bytes(root, rel, text)
    except FileExistsError:
        raise UsageError(f"{rel} appeared while it was being checked; nothing was written") from None
    return rel
