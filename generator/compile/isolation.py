"""What bounds a team namespace without Kueue's help: Pod Security, network, quota, tolerations.

Kueue bounds what it admits; a member with `edit` can still create a bare pod that Kueue never
sees (its webhook down, a gate removed, a kind Kueue does not manage). Such a pod must not run
privileged or on the host, reach other namespaces or the cloud metadata endpoint, use more GPUs
than the team could ever be admitted, or tolerate its way onto a node the health reconciler
cordoned. Each of those is enforced by the API server or the CNI, not by fleetgen:

- Pod Security admission: `pod-security.kubernetes.io/*` labels on the Namespace (built in since
  Kubernetes 1.25), the level from the cluster file (`tenancy.podSecurity`).
- A NetworkPolicy that denies everything but the namespace itself, the cluster DNS and the
  cluster's egress CIDRs (enforced by the CNI).
- A ResourceQuota on the GPU resources at the most the team's queues could hold (guarantee plus
  what it may borrow, per pool), so admitted jobs never hit it; a LimitRange that gives
  containers without requests default ones, so Kueue and the scheduler count them.
- A ValidatingAdmissionPolicy refusing pods that tolerate the health taint or a cordon.
"""

from __future__ import annotations

import functools
from typing import Any

from generator.compile.admission import ADMISSION
from generator.compile.kueue import team_folder
from generator.compile.manifest import Manifest, labels
from generator.config.cluster import POD_SECURITY_ORDER, ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.signals import HEALTH_TAINT_KEY

POD_SECURITY = "pod-security.kubernetes.io"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
FORBIDDEN_TOLERATIONS = (HEALTH_TAINT_KEY, UNSCHEDULABLE_TAINT)
"""Taints a team pod may not tolerate: fleetgen's faulty-GPU taint and the cordon's own."""
TOLERATION_POLICY = "fleetgen-team-tolerations"
TEAM_NAMESPACE_LABEL = "fleetgen.io/team-namespace"
"""On every team Namespace: the tolerations policy's binding selects namespaces by it."""
DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]


def pod_security_level(cfg: ClusterConfig, team: str) -> str:
    """The Pod Security level enforced on the team's namespaces in this cluster."""
    return cfg.tenancy.pod_security_exceptions.get(team, cfg.tenancy.pod_security)


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
    egress = cfg.tenancy.network.egress
    same_namespace: list[dict[str, Any]] = [{"podSelector": {}}]
    rules: list[dict[str, Any]] = [
        {"to": same_namespace},
        {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                 "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}], "ports": DNS_PORTS},
    ]
    if egress.allow:
        blocks = []
        for cidr in egress.allow:
            inside = [d for d in egress.deny if _within(d, cidr)]
            blocks.append({"ipBlock": {"cidr": cidr, **({"except": inside} if inside else {})}})
        rules.append({"to": blocks})
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "fleetgen-team-isolation", "namespace": ns, "labels": labels(cfg.name, team)},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                     "ingress": [{"from": same_namespace}], "egress": rules}}


@functools.lru_cache(maxsize=1024)
def _within(inner: str, outer: str) -> bool:
    """Is `inner` a subnet of `outer`? (once per pair: every team's policy asks the same)"""
    import ipaddress

    a, b = ipaddress.ip_network(inner), ipaddress.ip_network(outer)
    return a.version == b.version and a.subnet_of(b)  # type: ignore[arg-type]


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


def toleration_policy(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    """One policy per cluster, bound to every team namespace (by the label fleetgen puts on them):
    a pod may not tolerate the health taint or a cordon, nor every taint at once."""
    cfg = cluster.config
    keys = ", ".join(f"'{k}'" for k in FORBIDDEN_TOLERATIONS)
    policy = {
        "apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": TOLERATION_POLICY, "labels": labels(cfg.name)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE"], "resources": ["pods"]}]},
            "validations": [{
                "expression": ("!has(object.spec.tolerations) || object.spec.tolerations.all(t, "
                               f"(has(t.key) && t.key != '' && !(t.key in [{keys}])))"),
                "message": (f"team pods may not tolerate {' or '.join(FORBIDDEN_TOLERATIONS)}, nor every taint "
                            "(a toleration without a key): those nodes were cordoned for a reason"),
                "reason": "Forbidden"}],
        },
    }
    binding = {
        "apiVersion": ADMISSION, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": TOLERATION_POLICY, "labels": labels(cfg.name)},
        "spec": {"policyName": TOLERATION_POLICY, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {TEAM_NAMESPACE_LABEL: "true"}}}},
    }
    where = cluster.at("tenancy")
    return [Manifest(("teams",), policy, where), Manifest(("teams",), binding, where)]
