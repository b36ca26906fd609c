"""Synthesize a fleet of N clusters x M teams for benchmarks (and scale tests).

Every team gets quota in every cluster, spread over the cluster's pools, so the fleet is the
worst case for a render: clusters x teams ClusterQueues plus their namespaces, queues and RBAC.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

PRODUCTS = [("h100", "NVIDIA-H100-80GB-HBM3", 8, "192", "1800Gi"),
            ("a100", "NVIDIA-A100-SXM4-80GB", 8, "124", "1000Gi"),
            ("l40s", "NVIDIA-L40S", 4, "62500m", "480Gi"), ("l4", "NVIDIA-L4", 4, "46", "180Gi")]


def cluster(i: int, teams: int, pools: int) -> dict:
    node_pools = []
    for p in range(pools):
        name, product, per_node, cpu, mem = PRODUCTS[p % len(PRODUCTS)]
        node_pools.append({
            "name": f"{name}-{p}", "gpu": {"product": product, "perNode": per_node},
            "nodes": teams * 8 // per_node + 8, "cpuPerNode": cpu, "memoryPerNode": mem,
            "nodeLabels": {"nvidia.com/gpu.product": product, "node.fleetgen.io/pool": f"{name}-{p}"},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            **({"topologyLevels": ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]} if p == 0 else {}),
        })
    return {"name": f"cluster-{i:03d}", "kubernetesVersion": "1.33", "kueue": {"version": "v0.19.2"},
            "nodePools": node_pools,
            "priorities": [{"name": "high", "value": 1000}, {"name": "standard", "value": 100}],
            "cohorts": [{"name": f"org-{o}"} for o in range(4)],
            "gitops": {"repoUrl": "https://github.com/acme/gpu-fleet.git"}, "images": {"registry": "ghcr.io/acme"}}


def team(j: int, clusters: int, pools: int) -> dict:
    quotas = {}
    for i in range(clusters):
        pool = PRODUCTS[(i + j) % pools % len(PRODUCTS)][0] + f"-{(i + j) % pools}"
        quotas[f"cluster-{i:03d}"] = {pool: {"gpus": 8 * (1 + j % 3), "borrowingLimit": 8, "lendingLimit": 4}}
    return {"name": f"team-{j:04d}", "owners": [f"@acme/team-{j:04d}"],
            "members": {"groups": [f"team-{j:04d}"], "users": [f"user{j}@acme.com"]},
            "namespaces": [f"team-{j:04d}", f"team-{j:04d}-eval"], "cohort": f"org-{j % 4}",
            "defaultPriority": "standard", "fairSharingWeight": 1 + j % 3, "quotas": quotas}


def synthesize(root: Path, clusters: int, teams: int, pools: int = 2) -> Path:
    """Write clusters/ and teams/ for the synthetic fleet under `root`."""
    (root / "clusters").mkdir(parents=True, exist_ok=True)
    (root / "teams").mkdir(parents=True, exist_ok=True)
    for i in range(clusters):
        (root / "clusters" / f"cluster-{i:03d}.yaml").write_text(yaml.safe_dump(cluster(i, teams, pools)))
    for j in range(teams):
        (root / "teams" / f"team-{j:04d}.yaml").write_text(yaml.safe_dump(team(j, clusters, pools)))
    return root


def one_pool(root: Path, teams: int) -> Path:
    """One cluster, one H100 pool, `teams` teams spread over 8 cohorts that hold quota themselves."""
    (root / "clusters").mkdir(parents=True)
    (root / "teams").mkdir()
    cluster = {"name": "big", "kubernetesVersion": "1.33", "kueue": {"version": "v0.19.2"},
               "nodePools": [{"name": "h100", "gpu": {"product": "NVIDIA-H100-80GB-HBM3", "perNode": 8},
                              "nodes": teams // 4 + 8, "cpuPerNode": "192", "memoryPerNode": "1800Gi"}],
               "cpuPool": {"nodes": 4, "cpuPerNode": "64", "memoryPerNode": "256Gi"},
               "priorities": [{"name": "standard", "value": 100}],
               "cohorts": [{"name": f"org-{o}", "quotas": {"h100": {"gpus": 8}}} for o in range(8)],
               "gitops": {"repoUrl": "https://github.com/acme/gpu-fleet.git"}, "images": {"registry": "ghcr.io/acme"}}
    (root / "clusters/big.yaml").write_text(yaml.safe_dump(cluster))
    for j in range(teams):
        name = f"team-{j:05d}"
        team = {"name": name, "owners": [f"@acme/{name}"], "members": {"groups": [name]}, "cohort": f"org-{j % 8}",
                "defaultPriority": "standard", "quotas": {"big": {"h100": {"gpus": 1 + j % 2, "lendingLimit": 1}}}}
        (root / "teams" / f"{name}.yaml").write_text(yaml.safe_dump(team))
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root", type=Path)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--pools", type=int, default=2)
    args = parser.parse_args()
    synthesize(args.root, args.clusters, args.teams, args.pools)


if __name__ == "__main__":
    main()
