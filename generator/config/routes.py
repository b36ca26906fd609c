"""Where a team's GPU jobs go when the team's own queue cannot hold them.

Kueue gives a job without a queue label the namespace's LocalQueue `default` (kueue v0.19.2
pkg/controller/jobframework/defaults.go:79-97), and fleetgen points `default` and `<team>` at the
team's ClusterQueue. That queue lists only the team's own pools: a GPU resource the team has only
in pools shared by usage is not in it, and Kueue leaves such a job pending for ever with "resource
nvidia.com/gpu unavailable in ClusterQueue" (kueue v0.19.2
pkg/scheduler/flavorassigner/flavorassigner.go:1071). Pointing `default` at the shared pool's
ClusterQueue instead would make it a second tenant of the team there (Kueue ranks usage per
LocalQueue, pkg/cache/queue/cluster_queue.go:1094-1124), so such jobs are relabelled with the
team's one LocalQueue on the shared pool as they are created (`compile/queue_routing.py`), where
the cluster serves MutatingAdmissionPolicy and that LocalQueue exists (the team's first namespace).
"""

from __future__ import annotations

from dataclasses import dataclass

from generator.config.cluster import AdmissionFairSharing, ClusterConfig
from generator.config.team import TeamConfig


@dataclass(frozen=True)
class SharedRoute:
    """A GPU resource the team has in a cluster only through a pool shared by usage."""

    resource: str
    """The GPU resource name (`nvidia.com/gpu`)."""
    pool: str
    """The first pool shared by usage, in the cluster's pool order, where the team has it."""
    local_queue: str
    """The team's LocalQueue on that pool (`<team>-<pool>`)."""
    cluster_queue: str
    """The pool's ClusterQueue (`shared-<pool>`)."""
    namespace: str
    """The one namespace where that LocalQueue is: the team's first."""


def shared_routes(cfg: ClusterConfig, team: TeamConfig) -> list[SharedRoute]:
    """Per GPU resource the team's own ClusterQueue in `cfg` lacks but a pool shared by usage gives it,
    that pool's queue; empty where the team's queue holds every GPU resource it has (or under MultiKueue,
    where the manager's queues dispatch and hold no pools)."""
    quotas = team.quotas.get(cfg.name)
    if quotas is None or cfg.multikueue is not None or cfg.kueue.admission_fair_sharing is None:
        return []
    shared = set(cfg.shared_pools)
    own = {p.gpu.resource for p in cfg.node_pools if p.name in quotas and p.name not in shared}
    out: dict[str, SharedRoute] = {}
    for pool in cfg.node_pools:
        if pool.name in shared and pool.name in quotas and pool.gpu.resource not in own:
            out.setdefault(pool.gpu.resource, SharedRoute(
                pool.gpu.resource, pool.name, AdmissionFairSharing.local_queue(team.name, pool.name),
                AdmissionFairSharing.cluster_queue(pool.name), team.namespace_names[0]))
    return list(out.values())


def relabelled(cfg: ClusterConfig, team: TeamConfig) -> bool:
    """Whether the API server relabels the team's GPU jobs onto its shared-pool queue in `cfg`."""
    return cfg.mutating_policies and bool(shared_routes(cfg, team))


def stranded_namespaces(cfg: ClusterConfig, team: TeamConfig) -> list[str]:
    """The team's namespaces where a job asking for a routed GPU resource, without a queue label or on
    the team's own queue, is never admitted: all of them without MutatingAdmissionPolicy, else all but
    the first (the team has no queue on the shared pool there)."""
    if not shared_routes(cfg, team):
        return []
    names = team.namespace_names
    return names[1:] if cfg.mutating_policies else list(names)
