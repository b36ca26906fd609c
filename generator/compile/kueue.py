"""Kueue objects: ResourceFlavors, Topologies, Cohorts, WorkloadPriorityClasses, queues.

Pure functions from typed config to `Manifest`s. Cluster-scoped shared objects go to
`kueue/`; a team's ClusterQueue and LocalQueues go to the team's own folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from generator import quantity
from generator.compile.manifest import ARGOCD_CRD_IN_SAME_SYNC, Manifest, labels
from generator.compile.quota import cpu_pool_held, cpu_pool_resources, pool_resources, unallocated_resources
from generator.config.cluster import ClusterConfig, CohortQuota, MultiKueue, NodePool, Preemption, Taint, kueue_tuple
from generator.config.fleet import Loaded, held_gpus, implicit_cohort_weight
from generator.config.team import PoolQuota, TeamConfig
from generator.kinds.podspec import toleration as toleration  # re-exported: the compilers pin through here

SHARED = ("kueue",)
HOSTNAME = "kubernetes.io/hostname"
"""The one topology level of a topology-aware CPU pool: every node has it."""


def team_folder(team: str) -> tuple[str, ...]:
    """Folder of everything one team owns in a cluster."""
    return ("teams", team)


def _obj(cfg: ClusterConfig, kind: str, name: str, team: str | None = None, namespace: str | None = None,
         api_version: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = labels(cfg.name, team)
    if cfg.gitops.engine == "argocd":  # their CRDs arrive in the same sync, from the Kueue chart
        meta["annotations"] = dict(ARGOCD_CRD_IN_SAME_SYNC)
    return {"apiVersion": api_version or cfg.kueue.api_version, "kind": kind, "metadata": meta}


def _weight(value: float) -> str:
    return quantity.canonical(quantity.value_of(repr(float(value)) if value % 1 else int(value)))


def _flavor_spec(node_labels: dict[str, str], taints: list[Taint]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(sorted(node_labels.items()))
    if taints:
        spec["nodeTaints"] = [{k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect))
                               if v is not None} for t in taints]
        spec["tolerations"] = [toleration(t) for t in taints]
    return spec


def cpu_flavor(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    """The CPU pool's ResourceFlavor (none without a CPU pool)."""
    cfg, pool = cluster.config, cluster.config.cpu_pool
    if pool is None:
        return []
    body = _obj(cfg, "ResourceFlavor", pool.name)
    body["spec"] = _flavor_spec(pool.node_labels, pool.taints)
    if not cfg.cpu_pool_topology_aware:
        return [Manifest(SHARED, body, cluster.at("cpuPool"))]
    body["spec"]["topologyName"] = pool.name
    topo = _obj(cfg, "Topology", pool.name)
    topo["spec"] = {"levels": [{"nodeLabel": HOSTNAME}]}
    return [Manifest(SHARED, body, cluster.at("cpuPool")), Manifest(SHARED, topo, cluster.at("cpuPool"))]


def admission_checks(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    """Each declared AdmissionCheck and, for a ProvisioningRequest check, its ProvisioningRequestConfig."""
    cfg = cluster.config
    out = []
    for i, check in enumerate(cfg.admission_checks):
        body = _obj(cfg, "AdmissionCheck", check.name)
        body["spec"] = {"controllerName": check.controller}
        request = check.provisioning_request
        if request is not None:
            body["spec"]["parameters"] = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                          "name": check.name}
        out.append(Manifest(SHARED, body, cluster.at("admissionChecks", i)))
        if request is None:
            continue
        config = _obj(cfg, "ProvisioningRequestConfig", check.name)
        spec: dict[str, Any] = {"provisioningClassName": request.class_name}
        if request.parameters:
            spec["parameters"] = dict(sorted(request.parameters.items()))
        spec["managedResources"] = cfg.check_resources(check)
        spec["retryStrategy"] = {"backoffLimitCount": request.retry.limit,
                                 "backoffBaseSeconds": request.retry.backoff_base_seconds,
                                 "backoffMaxSeconds": request.retry.backoff_max_seconds}
        if request.pod_set_merge_policy is not None:
            spec["podSetMergePolicy"] = request.pod_set_merge_policy
        config["spec"] = spec
        out.append(Manifest(SHARED, config, cluster.at("admissionChecks", i, "provisioningRequest")))
    return out


def _admission_checks_strategy(cfg: ClusterConfig, team: TeamConfig) -> dict[str, Any]:
    """The queue's `admissionChecksStrategy`: each check that applies to the team, on its pools."""
    rules: list[dict[str, Any]] = []
    if cfg.multikueue is not None:  # on every flavor: Kueue refuses a MultiKueue check per flavor
        rules.append({"name": MultiKueue.check_name(team.name)})
    own = cfg.queue_pools(team.quotas[cfg.name])
    for check, pools in cfg.checks_for(team.name, own) if own else []:  # no GPU pool: nothing to check
        rule: dict[str, Any] = {"name": check.name}
        # On the GPU pools only: CPU-only work, on the CPU pool's flavor, never waits for a check.
        if pools is None and cfg.cpu_flavor_for(own):
            pools = [p.name for p in cfg.node_pools if p.name in own]
        if pools is not None:
            rule["onFlavors"] = pools
        rules.append(rule)
    return {"admissionChecks": rules} if rules else {}


def resource_flavor(cluster: Loaded[ClusterConfig], index: int) -> Manifest:
    """One ResourceFlavor per node pool: node labels, taints, tolerations, topology."""
    cfg, pool = cluster.config, cluster.config.node_pools[index]
    spec = _flavor_spec(pool.node_labels, pool.taints)
    if pool.topology_levels is not None:
        spec["topologyName"] = pool.name
    body = _obj(cfg, "ResourceFlavor", pool.name)
    body["spec"] = spec
    origins = {"spec.nodeLabels": cluster.at("nodePools", index, "nodeLabels"),
               "spec.nodeTaints": cluster.at("nodePools", index, "taints"),
               "spec.tolerations": cluster.at("nodePools", index, "taints"),
               "spec.topologyName": cluster.at("nodePools", index, "topologyLevels")}
    return Manifest(SHARED, body, cluster.at("nodePools", index), origins)


def topology(cluster: Loaded[ClusterConfig], index: int) -> Manifest:
    """The Kueue Topology of a pool that declares topologyLevels."""
    cfg, pool = cluster.config, cluster.config.node_pools[index]
    body = _obj(cfg, "Topology", pool.name)
    body["spec"] = {"levels": [{"nodeLabel": level} for level in pool.topology_levels or []]}
    return Manifest(SHARED, body, cluster.at("nodePools", index, "topologyLevels"))


def priority_class(cluster: Loaded[ClusterConfig], index: int) -> Manifest:
    """A WorkloadPriorityClass (top-level value and description, no spec)."""
    cfg, prio = cluster.config, cluster.config.priorities[index]
    body = _obj(cfg, "WorkloadPriorityClass", prio.name)
    body["value"] = prio.value
    if prio.description is not None:
        body["description"] = prio.description
    origins = {"value": cluster.at("priorities", index, "value"),
               "description": cluster.at("priorities", index, "description")}
    return Manifest(SHARED, body, cluster.at("priorities", index), origins)


def cohorts(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """The root cohort (named after the cluster), declared cohorts and teams' undeclared ones."""
    cfg = cluster.config
    root = _obj(cfg, "Cohort", cfg.name)
    root["spec"] = {}
    groups = _unallocated_groups(cfg, teams) if cfg.kueue.share_unallocated else []
    if cfg.cpu_pool is not None:  # lent to the teams' queues, less what never-preempted teams hold of it
        # One group per resource in an object (Kueue's webhook): the GPU pools' group gains the flavor.
        held = [h for h in (cpu_pool_held(cfg, t.config) for t in teams) if h is not None]
        cpu, memory = cpu_pool_resources(cfg.cpu_pool, held)
        group: dict[str, Any] = groups[0] if groups else {"coveredResources": ["cpu", "memory"], "flavors": []}
        quota = {"cpu": cpu, "memory": memory}
        group["flavors"].append({"name": cfg.cpu_pool.name, "resources": [
            {"name": r, "nominalQuota": quota.get(r, "0")} for r in group["coveredResources"]]})
        groups = [group]
    if groups:
        root["spec"]["resourceGroups"] = groups
    out = [Manifest(SHARED, root, cluster.at("name"), {"spec.resourceGroups": cluster.at("nodePools")})]
    declared = {c.name for c in cfg.cohorts}
    for i, cohort in enumerate(cfg.cohorts):
        body = _obj(cfg, "Cohort", cohort.name)
        body["spec"] = {"parentName": cohort.parent or cfg.name}
        if cohort.fair_sharing_weight is not None:
            body["spec"]["fairSharing"] = {"weight": _weight(cohort.fair_sharing_weight)}
        groups = quota_groups([p for p in cfg.node_pools if p.name in cohort.quotas], cohort.quotas)
        if groups:
            body["spec"]["resourceGroups"] = groups
        out.append(Manifest(SHARED, body, cluster.at("cohorts", i),
                            {"spec.fairSharing": cluster.at("cohorts", i, "fairSharingWeight"),
                             "spec.parentName": cluster.at("cohorts", i, "parent"),
                             "spec.resourceGroups": cluster.at("cohorts", i, "quotas")}))
    implicit = sorted({t.config.cohort for t in teams if t.config.cohort and t.config.cohort not in declared})
    for name in implicit:
        body = _obj(cfg, "Cohort", name)
        body["spec"] = {"parentName": cfg.name}
        members = [t for t in teams if t.config.cohort == name]
        weight = implicit_cohort_weight(teams, name)
        fields: dict[str, tuple[str, int]] = {}
        if weight is not None:
            body["spec"]["fairSharing"] = {"weight": _weight(weight)}
            fields = {"spec.fairSharing": members[0].at("fairSharingWeight")}
        out.append(Manifest(SHARED, body, members[0].at("cohort"), fields))
    return out


def _unallocated_groups(cfg: ClusterConfig, teams: list[Loaded[TeamConfig]]) -> list[dict[str, Any]]:
    """The root cohort's quota: per pool, the GPUs (and their CPU and memory) no team or cohort holds.

    A cohort's quota is lent to every ClusterQueue below it that lists the flavor (Kueue's
    hierarchical cohorts), up to each queue's borrowingLimit; without it these GPUs are covered by
    no quota at all and never admitted.
    """
    flavors: list[tuple[NodePool, dict[str, Any]]] = []
    shared = set(cfg.shared_pools)  # held whole by their own queue
    for pool in (p for p in cfg.node_pools if p.name not in shared):
        # A pool the teams hold whole keeps its flavor, at 0: a team's quota moves only numbers here,
        # never the object's shape (which flavors and resources it lists).
        free = unallocated_resources(pool, held_gpus(cfg, teams, pool.name))
        flavors.append((pool, {"name": pool.name, "resources": [{"name": q.name, "nominalQuota": q.nominal}
                                                                for q in free.values()]}))
    if not flavors:
        return []
    covered = ["cpu", "memory", *dict.fromkeys(pool.gpu.resource for pool, _ in flavors)]
    for _pool, flavor in flavors:  # every flavor lists every covered resource, in the group's order
        have = {r["name"]: r for r in flavor["resources"]}
        flavor["resources"] = [have.get(name, {"name": name, "nominalQuota": "0"}) for name in covered]
    return [{"coveredResources": covered, "flavors": [f for _, f in flavors]}]


def _resource_groups(cfg: ClusterConfig, team: TeamConfig) -> list[dict[str, Any]]:
    """The team queue's flavors: the CPU pool's first (where it applies), then the team's pools in its
    flavor order; pools shared by usage are not in it (their own queue holds them)."""
    own = cfg.queue_pools(team.quotas[cfg.name])
    pools: list[NodePool] = [p for p in cfg.node_pools if p.name in own]
    order = team.flavor_order.get(cfg.name)
    if order:  # the checks make it a permutation of the team's pools in the cluster
        pools.sort(key=lambda p: order.index(p.name) if p.name in order else len(order))
    groups = quota_groups(pools, team.quotas[cfg.name])
    if cfg.cpu_flavor_for(own):
        if not groups:  # only shared pools: CPU-only and unlabelled work still has the CPU pool
            groups = [{"coveredResources": ["cpu", "memory"], "flavors": []}]
        groups[0]["flavors"].insert(0, _cpu_flavor_quota(cfg, team, groups[0]["coveredResources"]))
    return groups


def _cpu_flavor_quota(cfg: ClusterConfig, team: TeamConfig, covered: list[str]) -> dict[str, Any]:
    """The CPU pool's flavor in the team's queue, tried first: nothing of its own (the root cohort
    lends the pool), its CPU and memory capped by the team's limit, no GPUs; a team never preempted
    holds its limit instead (`cpu_pool_held`). Kueue takes the first flavor that fits (kueue v0.19.2
    pkg/scheduler/flavorassigner/flavorassigner.go:1330-1380), so CPU-only work lands on the CPU pool
    while it has room and a GPU request, which this flavor can never fit, goes on to the team's GPU pools."""
    assert cfg.cpu_pool is not None
    limit = cfg.cpu_pool.limit_for(team.name)
    held = cpu_pool_held(cfg, team)
    amounts = {"cpu": quantity.normalise(limit.cpu), "memory": quantity.normalise(limit.memory)} if limit else {}
    resources: list[dict[str, Any]] = []
    for name in covered:
        entry: dict[str, Any] = {"name": name, "nominalQuota": amounts[name] if held and name in amounts else "0"}
        if not held and name in amounts:
            entry["borrowingLimit"] = amounts[name]
        resources.append(entry)
    return {"name": cfg.cpu_pool.name, "resources": resources}


def _never_borrow(groups: list[dict[str, Any]]) -> None:
    """`borrowingLimit: 0` on every resource of every flavor (the CPU pool's included), for a team never
    preempted. Kueue preempts another queue's workloads only while that queue uses more than its
    nominal quota of a resource the preemptor needs (kueue v0.19.2 pkg/scheduler/preemption/
    preemption.go:636-663 with fair sharing; classical/hierarchical_preemption.go:198-205 and
    classical/candidate_generator.go:143-146 without), and a borrowingLimit of 0 keeps usage within
    nominal (pkg/cache/scheduler/resource_node.go:106-122); withinClusterQueue Never does the rest."""
    for group in groups:
        for flavor in group["flavors"]:
            flavor["resources"] = [{"name": r["name"], "nominalQuota": r["nominalQuota"], "borrowingLimit": "0",
                                    **{k: v for k, v in r.items() if k == "lendingLimit"}} for r in flavor["resources"]]


def quota_groups(pools: list[NodePool], quotas: Mapping[str, PoolQuota | CohortQuota]) -> list[dict[str, Any]]:
    """One resource group: a flavor per pool (in order) listing cpu, memory and GPUs with limits."""
    gpu_resources = list(dict.fromkeys(p.gpu.resource for p in pools))
    covered = ["cpu", "memory", *gpu_resources]
    flavors = []
    for pool in pools:
        resources_of = pool_resources(pool, quotas[pool.name])
        resources = []
        for name in covered:
            q = resources_of.get(name)
            entry: dict[str, Any] = {"name": name, "nominalQuota": q.nominal if q else "0"}
            if q and q.borrowing is not None:
                entry["borrowingLimit"] = q.borrowing
            if q and q.lending is not None:
                entry["lendingLimit"] = q.lending
            resources.append(entry)
        flavors.append({"name": pool.name, "resources": resources})
    return [{"coveredResources": covered, "flavors": flavors}] if flavors else []


def _preemption(p: Preemption) -> dict[str, Any]:
    out: dict[str, Any] = {"reclaimWithinCohort": p.reclaim_within_cohort}
    if p.borrow_within_cohort is not None:
        bwc: dict[str, Any] = {"policy": p.borrow_within_cohort.policy}
        if p.borrow_within_cohort.max_priority_threshold is not None:
            bwc["maxPriorityThreshold"] = p.borrow_within_cohort.max_priority_threshold
        out["borrowWithinCohort"] = bwc
    out["withinClusterQueue"] = p.within_cluster_queue
    return out


# Kueue before v0.15 spells "stop the search" per case (kueue v0.14.8 apis/kueue/v1beta1/clusterqueue_types.go:402,412).
_V014_STOP = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}


def _fungibility(cfg: ClusterConfig, team: TeamConfig) -> dict[str, str]:
    """The queue's flavorFungibility in the cluster's Kueue release's words; {} for Kueue's defaults."""
    chosen = team.fungibility_in(cfg)
    if chosen is None:
        return {}
    out: dict[str, str] = {"whenCanBorrow": chosen.when_can_borrow, "whenCanPreempt": chosen.when_can_preempt}
    if kueue_tuple(cfg.kueue.version)[:2] < (0, 15):
        out = {k: _V014_STOP[k] if v == "MayStopSearch" else v for k, v in out.items()}
    if chosen.preference is not None:
        out["preference"] = chosen.preference
    return out


def cluster_queue(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> Manifest:
    """The team's ClusterQueue: its quotas, only its own namespaces, the cluster's policy."""
    cfg, tcfg = cluster.config, team.config
    body = _obj(cfg, "ClusterQueue", tcfg.name, team=tcfg.name)
    cohort_key = "cohortName" if cfg.kueue.api_version.endswith("v1beta2") else "cohort"
    spec: dict[str, Any] = {cohort_key: tcfg.cohort or cfg.name}
    # kubernetes.io/metadata.name is set by the API server and cannot be forged by a namespace
    # editor, unlike a team label: only the team's own namespaces can submit to its queue.
    spec["namespaceSelector"] = {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(tcfg.namespace_names)}]}
    spec["queueingStrategy"] = tcfg.queueing_in(cfg)
    spec["preemption"] = _preemption(tcfg.preemption_in(cfg))
    if tcfg.fair_sharing_weight is not None:
        spec["fairSharing"] = {"weight": _weight(tcfg.fair_sharing_weight)}
    spec["resourceGroups"] = _resource_groups(cfg, tcfg)
    if tcfg.never_preempted:
        _never_borrow(spec["resourceGroups"])
    fungibility = _fungibility(cfg, tcfg)
    if fungibility:
        spec["flavorFungibility"] = fungibility
    strategy = _admission_checks_strategy(cfg, tcfg)
    if strategy:
        spec["admissionChecksStrategy"] = strategy
    stop = tcfg.stop_policy.get(cfg.name, "None")
    if stop != "None":  # Kueue's default; left out so lifting a stop removes the field
        spec["stopPolicy"] = stop
    body["spec"] = spec
    own = tcfg.policy
    origins = {"spec.queueingStrategy": team.at("policy", "queueingStrategy") if own and own.queueing_strategy
               else cluster.at("kueue", "queueingStrategy"),
               "spec.preemption": team.at("policy") if own and own.sets_preemption
               else cluster.at("kueue", "preemption"),
               "spec.fairSharing": team.at("fairSharingWeight"),
               "spec.stopPolicy": team.at("stopPolicy", cfg.name),
               "spec.admissionChecksStrategy": cluster.at("admissionChecks"),
               "spec.flavorFungibility": team.at("flavorFungibility") if tcfg.flavor_fungibility
               else cluster.at("kueue", "flavorFungibility"),
               "spec.resourceGroups": team.at("flavorOrder", cfg.name) if cfg.name in tcfg.flavor_order
               else team.at("quotas", cfg.name),
               "spec.namespaceSelector": team.at("namespaces") if tcfg.namespaces else team.at("name"),
               "spec.cohortName": team.at("cohort") if tcfg.cohort else team.at("quotas", cfg.name),
               "spec.cohort": team.at("cohort") if tcfg.cohort else team.at("quotas", cfg.name)}
    return Manifest(team_folder(tcfg.name), body, team.at("quotas", cfg.name), origins)


DEFAULT_QUEUE_ANNOTATION = {"kueue.x-k8s.io/default-queue": "true"}
"""What CodeFlare's SDK looks for to pick a namespace's queue for a RayCluster or job it labels."""


def local_queues(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """In each team namespace: a LocalQueue named after the team and one named `default`, both on the
    team's ClusterQueue. Kueue gives every job without a queue label in a managed namespace the
    LocalQueue `default` (kueue v0.19.2 pkg/controller/jobframework/defaults.go:79-97), so unlabelled
    work, GPU or CPU-only, is charged to the team's quota."""
    cfg, tcfg = cluster.config, team.config
    out = []
    for ns in tcfg.namespace_names:
        for name in (tcfg.name, "default"):
            body = _obj(cfg, "LocalQueue", name, team=tcfg.name, namespace=ns)
            if name == "default":
                meta = body["metadata"]
                meta["annotations"] = {**meta.get("annotations", {}), **DEFAULT_QUEUE_ANNOTATION}
            body["spec"] = {"clusterQueue": tcfg.name}
            out.append(Manifest(team_folder(tcfg.name) + (ns,), body, team.at("namespaces") if tcfg.namespaces
                                else team.at("name")))
    return out


def shared_cluster_queue(cluster: Loaded[ClusterConfig], pool: NodePool,
                         teams: list[Loaded[TeamConfig]]) -> Manifest:
    """The ClusterQueue of a pool shared by usage: all of the pool's GPUs, in no cohort (nothing to
    lend or borrow), open to the first namespace of each team that uses the pool, its waiting jobs
    ranked by their LocalQueues' recent usage (Kueue's `UsageBasedAdmissionFairSharing`, kueue v0.19.2
    pkg/cache/queue/cluster_queue.go:1094-1124): usage first, then priority and age."""
    cfg = cluster.config
    afs = cfg.kueue.admission_fair_sharing
    assert afs is not None
    users = [t.config for t in teams if pool.name in t.config.quotas[cfg.name]]
    body = _obj(cfg, "ClusterQueue", afs.cluster_queue(pool.name))
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                    "values": sorted(t.namespace_names[0] for t in users)}]},
        "queueingStrategy": cfg.kueue.queueing_strategy,
        "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": afs.within_cluster_queue},
        "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
        "resourceGroups": quota_groups([pool], {pool.name: PoolQuota(gpus=pool.gpus)}),
    }
    checks = [c.name for c in cfg.shared_pool_checks(pool.name)]
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
    body["spec"] = spec
    index = afs.pools.index(pool.name)
    origin = cluster.at("kueue", "admissionFairSharing", "pools", index)
    return Manifest(SHARED, body, origin, {"spec.queueingStrategy": cluster.at("kueue", "queueingStrategy"),
                                           "spec.preemption": cluster.at("kueue", "admissionFairSharing"),
                                           "spec.admissionChecksStrategy": cluster.at("admissionChecks")})


def shared_local_queues(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """The team's LocalQueue on each pool shared by usage, in its first namespace, with its usage weight.
    Kueue keeps usage per LocalQueue, so one per team keeps the team one tenant."""
    cfg, tcfg = cluster.config, team.config
    afs = cfg.kueue.admission_fair_sharing
    out = []
    for pool in cfg.shared_pools:
        if afs is None or pool not in tcfg.quotas[cfg.name]:
            continue
        ns = tcfg.namespace_names[0]
        body = _obj(cfg, "LocalQueue", afs.local_queue(tcfg.name, pool), team=tcfg.name, namespace=ns)
        body["spec"] = {"clusterQueue": afs.cluster_queue(pool)}
        weight = tcfg.quotas[cfg.name][pool].usage_weight
        if weight is not None:
            body["spec"]["fairSharing"] = {"weight": _weight(weight)}
        out.append(Manifest(team_folder(tcfg.name) + (ns,), body, team.at("quotas", cfg.name, pool),
                            {"spec.fairSharing": team.at("quotas", cfg.name, pool, "usageWeight")}))
    return out


def compile_kueue(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Every Kueue object of one cluster."""
    cfg = cluster.config
    out: list[Manifest] = []
    for i, pool in enumerate(cfg.node_pools):
        out.append(resource_flavor(cluster, i))
        if pool.topology_levels is not None:
            out.append(topology(cluster, i))
    out.extend(cpu_flavor(cluster))
    out.extend(priority_class(cluster, i) for i in range(len(cfg.priorities)))
    out.extend(admission_checks(cluster))
    out.extend(cohorts(cluster, teams))
    shared = set(cfg.shared_pools)
    out.extend(shared_cluster_queue(cluster, pool, teams) for pool in cfg.node_pools if pool.name in shared)
    for team in teams:
        out.append(cluster_queue(cluster, team))
        out.extend(local_queues(cluster, team))
        out.extend(shared_local_queues(cluster, team))
    return out
