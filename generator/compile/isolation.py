"""What bounds a team namespace without Kueue's help: Pod Security, network, quota, tolerations.

Kueue bounds what it admits; a member with `edit` can still create a bare pod that Kueue never
sees (its webhook down, a gate removed, a kind Kueue does not manage). Such a pod must not run
privileged or on the host, reach other namespaces or the cloud metadata endpoint, use more GPUs
than the team could ever be admitted, or tolerate its way onto a node the health reconciler
cordoned. Each of those is enforced by the API server or the CNI, not by fleetgen:

- Pod Security admission: `pod-security.kubernetes.io/*` labels on the Namespace (built in since
  Kubernetes 1.25), the level from the cluster file (`tenancy.podSecurity`).
- A NetworkPolicy that denies everything but the namespace itself, the cluster DNS and the
  cluster's egress CIDRs (enforced by the CNI); beside it, for each operator the cluster runs that
  connects to the pods of its kinds itself (KubeRay to a Ray head's dashboard), one that lets in
  its pods alone, from its namespace, to those pods' port alone (`Operator.reaches`).
- A ResourceQuota on the GPU resources at the most the team's queues could hold (guarantee plus
  what it may borrow, per pool), so admitted jobs never hit it; a LimitRange that gives
  containers without requests default ones, so Kueue and the scheduler count them.
- ValidatingAdmissionPolicies on pods, NetworkPolicies and fleetgen's own objects in every team
  namespace (compile/namespace_policies.py).
"""

from __future__ import annotations

from typing import Any

from generator.compile.kueue import team_folder
from generator.compile.manifest import Manifest, labels
from generator.compile.namespace_policies import (
    DNS_LABELS,
    ISOLATION_POLICY,
    TEAM_NAMESPACE_LABEL,
    egress_blocks,
)
from generator.compile.podnetwork import DNS_PORTS
from generator.config.cluster import POD_SECURITY_ORDER, ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.kinds import OPERATORS
from generator.kinds.base import Operator, Reach
from generator.kinds.podspec import pod_security_level as pod_security_level  # re-exported

POD_SECURITY = "pod-security.kubernetes.io"


def namespace_labels(cfg: ClusterConfig, team: str) -> dict[str, str]:
    """Pod Security labels (enforce the cluster's level, warn and audit at `restricted`), pinned to
    the cluster's Kubernetes minor so an upgrade does not tighten them unannounced."""
    level = pod_security_level(cfg, team)
    version = f"v{cfg.kubernetes_version}"
    out = {TEAM_NAMESPACE_LABEL: "true", f"{POD_SECURITY}/enforce": level, f"{POD_SECURITY}/enforce-version": version}
    if POD_SECURITY_ORDER[level] > POD_SECURITY_ORDER["restricted"]:
        out |= {f"{POD_SECURITY}/warn": "restricted", f"{POD_SECURITY}/warn-version": version,
                f"{POD_SECURITY}/audit": "restricted", f"{POD_SECURITY}/audit-version": version}
    return out


def gpu_ceiling(cfg: ClusterConfig, team: TeamConfig) -> dict[str, int]:
    """Per GPU resource, the most the team's queues could ever hold in this cluster: in each pool its
    quota plus its borrowing limit, or the pool's capacity (times overcommit) when it has none."""
    out: dict[str, int] = {}
    for pool_name, quota in sorted(team.quotas.get(cfg.name, {}).items()):
        pool = cfg.pool(pool_name)
        if pool is None:
            continue
        capacity = int(pool.gpus * cfg.overcommit)
        unlimited = quota.borrowing_limit is None or pool_name in cfg.shared_pools  # shared: all of it, by usage
        most = capacity if unlimited else min(capacity, quota.gpus + (quota.borrowing_limit or 0))
        resource = pool.gpu.resource
        out[resource] = out.get(resource, 0) + max(quota.gpus, most)
    return out


def _network_policy(cfg: ClusterConfig, team: str, ns: str) -> dict[str, Any]:
    same_namespace: list[dict[str, Any]] = [{"podSelector": {}}]
    rules: list[dict[str, Any]] = [
        {"to": same_namespace},
        {"to": [{"namespaceSelector": {"matchLabels": dict(DNS_LABELS[0])},
                 "podSelector": {"matchLabels": dict(DNS_LABELS[1])}}], "ports": DNS_PORTS},
    ]
    blocks = egress_blocks(cfg.tenancy.network.egress)
    if blocks:
        rules.append({"to": blocks})
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": ISOLATION_POLICY, "namespace": ns, "labels": labels(cfg.name, team)},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                     "ingress": [{"from": same_namespace}], "egress": rules}}


def operator_policy_name(operator: Operator, reach: Reach) -> str:
    """`fleetgen-` first, so `fleetgen-team-objects` keeps members from changing or deleting it."""
    return f"fleetgen-operator-{operator.key}-{reach.name}"


def _operator_policy(cfg: ClusterConfig, team: str, ns: str, operator: Operator, reach: Reach) -> dict[str, Any]:
    """Ingress only (egress stays the isolation policy's), to the pods `reach` names on its port, from the
    operator's pods in its namespace: NetworkPolicies add up, so this opens nothing else."""
    source = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": operator.namespace}},
              "podSelector": {"matchLabels": dict(operator.pods)}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": operator_policy_name(operator, reach), "namespace": ns,
                         "labels": labels(cfg.name, team)},
            "spec": {"podSelector": {"matchLabels": dict(reach.pods)}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [source], "ports": [{"protocol": "TCP", "port": reach.port}]}]}}


def namespace_bounds(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """NetworkPolicy, ResourceQuota and LimitRange in each of the team's namespaces."""
    cfg, tcfg = cluster.config, team.config
    ceiling = gpu_ceiling(cfg, tcfg)
    out = []
    for i, ns in enumerate(tcfg.namespace_names):
        where = team.at("namespaces", i) if tcfg.namespaces else team.at("name")
        meta = {"namespace": ns, "labels": labels(cfg.name, tcfg.name)}
        folder = team_folder(tcfg.name) + (ns,)
        if cfg.tenancy.network.isolate:
            out.append(Manifest(folder, _network_policy(cfg, tcfg.name, ns), cluster.at("tenancy")))
            out.extend(Manifest(folder, _operator_policy(cfg, tcfg.name, ns, op, reach),
                                cluster.at("operators", op.key))
                       for op in OPERATORS if op.runs_in(cfg) for reach in op.reaches)
        if ceiling:
            hard = {f"requests.{resource}": str(gpus) for resource, gpus in sorted(ceiling.items())}
            out.append(Manifest(folder, {"apiVersion": "v1", "kind": "ResourceQuota",
                                         "metadata": {"name": "fleetgen-gpus", **meta}, "spec": {"hard": hard}},
                                team.at("quotas", cfg.name)))
        requests = {k: str(v) for k, v in sorted(cfg.tenancy.default_container_requests.items())}
        if requests:
            out.append(Manifest(folder, {"apiVersion": "v1", "kind": "LimitRange",
                                         "metadata": {"name": "fleetgen-defaults", **meta},
                                         "spec": {"limits": [{"type": "Container", "defaultRequest": requests}]}},
                                where))
    return out
