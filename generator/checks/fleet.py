"""Cross-file rules a single model cannot check: references, uniqueness, capacity.

Each rule is a small generator of findings; `RULES` is the table `check_fleet` runs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from generator import quantity
from generator.checks.versions import release_pins
from generator.compile.quota import cpu_pod_requests, cpu_pool_held, cpu_pool_resources, cpu_profile_fit
from generator.config.cluster import AdmissionFairSharing, ClusterConfig, NodePool, kueue_tuple
from generator.config.fleet import Fleet, Loaded, fair_sharing
from generator.config.jobs import JobProfile
from generator.config.messages import shown
from generator.config.team import TeamConfig
from generator.errors import Finding
from generator.kinds import (
    KINDS,
    OPERATORS,
    dispatched_frameworks,
    frameworks_of,
    kind_of,
    operator_frameworks,
    unknown_kind,
)
from generator.kinds.base import Kind

# Namespaces a team may never claim, whatever a cluster's policy says: granting `edit` there would
# hand out the platform, or an add-on that runs with cluster-wide rights (admission, networking,
# secrets, autoscaling, storage, service mesh, GitOps, cloud controllers).
RESERVED_NAMESPACES = re.compile(
    r"^(default|kube-.*|kueue-system|jobset-system|monitoring|gpu-operator|nvidia-.*|network-operator|"
    r"node-feature-discovery|sriov-network-operator|fleetgen-.*|argocd|argo|argo-.*|flux-system|"
    r"cert-manager|openshift|openshift-.*|gatekeeper-system|kyverno|kyverno-.*|calico-.*|tigera-operator|"
    r"cilium|cilium-.*|external-secrets|sealed-secrets|vault|vault-.*|karpenter|keda|istio-.*|istio|"
    r"linkerd|linkerd-.*|ingress-nginx|nginx-ingress|traefik|envoy-gateway-system|metallb-system|"
    r"external-dns|longhorn-system|rook-ceph|velero|local-path-storage|openebs|"
    r"cattle-.*|rancher-.*|fleet-.*|knative-.*|kserve|kubeflow|kubeflow-.*|ray-system|kuberay-.*|"
    r"volcano-system|tekton-.*|crossplane-system|olm|operators|operator-lifecycle-manager|"
    r"kubernetes-dashboard|prometheus|grafana|loki|observability|opentelemetry-.*|falco|trivy-system|"
    r"gmp-.*|gke-.*|config-management-system|cnrm-system|azure-.*|aws-.*|amazon-.*|eks-.*|"
    r"lws-system|trainer-system|kubeflow-system|kueue-.*|jobset-.*)$")
RESERVED_TEAM_NAMES = frozenset({"default"})
RESERVED_CLUSTER_NAMES: dict[str, str] = {
    "gitops": "rendered/gitops/ holds the GitOps objects",
    "argocd-settings": "rendered/gitops/argocd-settings/ holds Argo CD's settings, beside each cluster's bootstrap",
}
"""Cluster names that would put a cluster's files where fleetgen keeps others, and why."""


def _unique_within_cluster(fleet: Fleet) -> Iterator[Finding]:
    for loaded in fleet.clusters.values():
        cfg = loaded.config
        for what, names in (("nodePools", [p.name for p in cfg.node_pools]),
                            ("priorities", [p.name for p in cfg.priorities]),
                            ("cohorts", [c.name for c in cfg.cohorts]),
                            ("admissionChecks", [c.name for c in cfg.admission_checks])):
            for name, count in Counter(names).items():
                if count > 1:
                    index = names.index(name, names.index(name) + 1)
                    file, line = loaded.at(what, index, "name")
                    yield Finding(file, line, f"{what}[{index}].name", f"{name!r} is defined {count} times",
                                  "give each entry a unique name")


def _cohort_tree(fleet: Fleet) -> Iterator[Finding]:
    for loaded in fleet.clusters.values():
        cfg = loaded.config
        parents = {c.name: (c.parent or cfg.name) for c in cfg.cohorts}
        for i, cohort in enumerate(cfg.cohorts):
            file, line = loaded.at("cohorts", i)
            if cohort.name == cfg.name:
                yield Finding(file, line, f"cohorts[{i}].name", f"{cohort.name!r} is the root cohort's name "
                              "(the cluster name)", "choose another cohort name")
            if cohort.parent and cohort.parent != cfg.name and cohort.parent not in parents:
                yield Finding(file, line, f"cohorts[{i}].parent", f"parent cohort {cohort.parent!r} is not defined",
                              f"define it in cohorts or omit parent to hang it under the root {cfg.name!r}")
            seen, node = set(), cohort.name
            while node in parents and node not in seen:
                seen.add(node)
                node = parents[node]
            if node in seen:
                yield Finding(file, line, f"cohorts[{i}].parent", f"cohort {cohort.name!r} is part of a cycle",
                              "make the cohort parents form a tree")


def _team_names(fleet: Fleet) -> Iterator[Finding]:
    for team in fleet.teams.values():
        for cluster_name in team.config.quotas:
            cluster = fleet.clusters.get(cluster_name)
            if cluster is None:
                continue
            cohorts = {c.name for c in cluster.config.cohorts} | {cluster_name}
            if team.config.name in cohorts:
                file, line = team.at("name")
                yield Finding(file, line, "name",
                              f"team name {team.config.name!r} is also a cohort in cluster {cluster_name!r}",
                              "rename the team or the cohort; queues and cohorts must not share names")
            if team.config.cohort == cluster_name:
                file, line = team.at("cohort")
                yield Finding(file, line, "cohort", f"{cluster_name!r} is the cluster's root cohort",
                              "omit cohort to join the root, or name an org unit")


MIN_KUBERNETES = (1, 30)
"""The oldest Kubernetes fleetgen renders for: every cluster gets admission policies of
admissionregistration.k8s.io/v1, which the API server serves from 1.30 (the official OpenAPI of 1.29,
as kubernetes-validate ships it, has only v1alpha1 and v1beta1 ValidatingAdmissionPolicy)."""


def _kubernetes_versions(fleet: Fleet) -> Iterator[Finding]:
    from generator.kubeschemas import builtin_versions

    for loaded in fleet.clusters.values():
        version = loaded.config.kubernetes_version
        if tuple(int(x) for x in version.split(".")) < MIN_KUBERNETES:
            file, line = loaded.at("kubernetesVersion")
            oldest = ".".join(map(str, MIN_KUBERNETES))
            yield Finding(file, line, "kubernetesVersion", f"Kubernetes {version} is older than {oldest}, the oldest "
                          "fleetgen renders for: team isolation relies on admissionregistration.k8s.io/v1 "
                          f"ValidatingAdmissionPolicies, served from {oldest}",
                          f"upgrade the cluster to Kubernetes {oldest} or later and set kubernetesVersion to match")
        elif version not in builtin_versions():
            file, line = loaded.at("kubernetesVersion")
            yield Finding(file, line, "kubernetesVersion", f"Kubernetes {version} has no built-in schemas",
                          f"use one of {', '.join(builtin_versions())} (upgrade kubernetes-validate for newer)")


def _reserved_cluster_names(fleet: Fleet) -> Iterator[Finding]:
    for loaded in fleet.clusters.values():
        if loaded.config.name in RESERVED_CLUSTER_NAMES:
            file, line = loaded.at("name")
            yield Finding(file, line, "name", f"cluster name {loaded.config.name!r} is reserved "
                          f"({RESERVED_CLUSTER_NAMES[loaded.config.name]})", "choose another cluster name")


def _reserved_team_names(fleet: Fleet) -> Iterator[Finding]:
    for team in fleet.teams.values():
        if team.config.name in RESERVED_TEAM_NAMES:
            file, line = team.at("name")
            yield Finding(file, line, "name", f"team name {team.config.name!r} is reserved "
                          "(every team namespace has a LocalQueue called 'default')", "choose another team name")


def _platform_namespaces(fleet: Fleet) -> dict[str, str]:
    """Namespace -> the component that renders into it, over every cluster of the fleet."""
    from generator.compile import platform_namespaces

    owners: dict[str, str] = {}
    for name in sorted(fleet.clusters):
        for ns, m in platform_namespaces(fleet.clusters[name]).items():
            file, line = m.source
            family = m.folder[0] if m.folder else "cluster"
            owners.setdefault(ns, f"{family} ({m.kind} {m.name}) in cluster {name!r}, from {file}:{line}")
    return owners


def _namespaces(fleet: Fleet) -> Iterator[Finding]:
    claims: dict[str, list[tuple[str, tuple[str, int], str]]] = {}
    platform = _platform_namespaces(fleet) if fleet.teams else {}
    claimed: dict[str, set[str]] = {}  # namespace -> teams naming it (a clash is said as "belongs to")
    for team in fleet.teams.values():
        for ns in team.config.namespace_names:
            claimed.setdefault(ns, set()).add(team.config.name)
    for team in fleet.teams.values():
        names = team.config.namespace_names
        for i, ns in enumerate(names):
            where = team.at("namespaces", i) if team.config.namespaces else team.at("name")
            field = f"namespaces[{i}]" if team.config.namespaces else "name"
            if ns in platform:
                yield Finding(where[0], where[1], field, f"namespace {ns!r} belongs to the platform: "
                              f"{platform[ns]}", "choose a namespace of the team's own, e.g. <team>-<purpose>")
            elif RESERVED_NAMESPACES.match(ns):
                yield Finding(where[0], where[1], field, f"namespace {ns!r} is reserved for the platform or a "
                              "cluster add-on", "choose a namespace of the team's own, e.g. <team>-<purpose>")
            elif len(claimed[ns]) == 1 and (refused := [
                    c for c in sorted(team.config.quotas) if c in fleet.clusters
                    and not fleet.clusters[c].config.tenancy.namespaces.admits(team.config.name, ns)]):
                policy = fleet.clusters[refused[0]].config.tenancy.namespaces
                file, line = fleet.clusters[refused[0]].at("tenancy")
                yield Finding(where[0], where[1], field, f"namespace {ns!r} is not one team {team.config.name!r} may "
                              f"claim in cluster {refused[0]!r}: it matches neither the pattern "
                              f"{policy.pattern!r} nor tenancy.namespaces.allowed ({file}:{line})",
                              f"use {team.config.name!r} or {team.config.name + '-<purpose>'!r}, or ask the "
                              "platform team to add it to the cluster's tenancy.namespaces.allowed")
            elif ns in names[:i]:
                yield Finding(where[0], where[1], field, f"namespace {ns!r} is listed twice", "remove the duplicate")
            else:
                claims.setdefault(ns, []).append((team.config.name, where, field))
    for ns, claimants in claims.items():
        if len(claimants) < 2:
            continue
        # A namespace named after a team is that team's; otherwise the first team (by name) keeps it.
        owner = next((c[0] for c in claimants if c[0] == ns), min(c[0] for c in claimants))
        for name, (file, line), field in claimants:
            if name != owner:
                yield Finding(file, line, field, f"namespace {ns!r} already belongs to team {owner!r}",
                              "each namespace belongs to exactly one team; choose another name")


# What each well-known system subject stands for (Kubernetes' authenticator and RBAC defaults).
SYSTEM_SUBJECTS: dict[str, str] = {
    "system:authenticated": "everyone who can log in to the cluster",
    "system:unauthenticated": "every anonymous request",
    "system:anonymous": "every anonymous request",
    "system:serviceaccounts": "every ServiceAccount of every namespace",
    "system:nodes": "every kubelet",
    "system:masters": "cluster administrators, who bypass RBAC",
    "system:monitoring": "the API server's metrics readers",
}
SYSTEM_PREFIXES: tuple[tuple[str, str], ...] = (
    ("system:serviceaccounts:", "every ServiceAccount of namespace {rest}"),
    ("system:serviceaccount:", "the ServiceAccount {rest}, a workload's identity"),
    ("system:node:", "the kubelet of node {rest}"),
    ("system:", "a Kubernetes system identity"),
)


def system_subject(name: str) -> str | None:
    """What a `system:` subject stands for; None for an ordinary user or group."""
    lowered = name.lower()
    if lowered in SYSTEM_SUBJECTS:
        return SYSTEM_SUBJECTS[lowered]
    return next((text.format(rest=name[len(prefix):]) for prefix, text in SYSTEM_PREFIXES
                 if lowered.startswith(prefix)), None)


def _subjects(fleet: Fleet) -> Iterator[Finding]:
    for team in fleet.teams.values():
        members = team.config.members
        for key, names in (("groups", members.groups), ("users", members.users)):
            for i, subject in enumerate(names):
                meaning = system_subject(subject)
                if meaning is None:
                    continue
                refusing = sorted(c for c in team.config.quotas if c in fleet.clusters and subject not in
                                  fleet.clusters[c].config.tenancy.allowed_system_subjects) \
                    or ([] if team.config.quotas else ["(every cluster)"])
                if refusing:
                    file, line = team.at("members", key, i)
                    yield Finding(file, line, f"members.{key}[{i}]",
                                  f"{subject!r} is {meaning}: a team file may not grant it rights "
                                  f"(not allowed in {', '.join(refusing)})",
                                  "list your team's own identity-provider groups and users; a platform engineer "
                                  "can allow one exact system: subject in the cluster file's "
                                  "tenancy.allowedSystemSubjects")
            for name in sorted({n for n in names if names.count(n) > 1}):
                i = names.index(name, names.index(name) + 1)
                file, line = team.at("members", key, i)
                yield Finding(file, line, f"members.{key}[{i}]", f"{name!r} is listed twice", "remove the duplicate")


def _quota_references(fleet: Fleet) -> Iterator[Finding]:
    for team in fleet.teams.values():
        cfg = team.config
        for cluster_name, pools in cfg.quotas.items():
            cluster = fleet.clusters.get(cluster_name)
            if cluster is None:
                file, line = team.at("quotas", cluster_name)
                yield Finding(file, line, f"quotas.{cluster_name}", f"unknown cluster {cluster_name!r}",
                              f"use one of: {', '.join(sorted(fleet.clusters))}")
                continue
            pool_names = [p.name for p in cluster.config.node_pools]
            for pool in pools:
                if pool not in pool_names:
                    file, line = team.at("quotas", cluster_name, pool)
                    yield Finding(file, line, f"quotas.{cluster_name}.{pool}",
                                  f"cluster {cluster_name!r} has no node pool {pool!r}",
                                  f"use one of: {', '.join(pool_names)}")
            priorities = [p.name for p in cluster.config.priorities]
            if cfg.default_priority and cfg.default_priority not in priorities:
                file, line = team.at("defaultPriority")
                yield Finding(file, line, "defaultPriority",
                              f"priority {cfg.default_priority!r} is not defined in cluster {cluster_name!r}",
                              f"use one of: {', '.join(priorities) or '(none defined)'}")
            for i, allowed in enumerate(cfg.allowed_priorities or []):
                if allowed not in priorities:
                    file, line = team.at("allowedPriorities", i)
                    yield Finding(file, line, f"allowedPriorities[{i}]",
                                  f"priority {allowed!r} is not defined in cluster {cluster_name!r}",
                                  f"use one of: {', '.join(priorities) or '(none defined)'}")
            cohorts = {c.name for c in cluster.config.cohorts}
            if cfg.cohort and cluster.config.cohorts and cfg.cohort not in cohorts:
                file, line = team.at("cohort")
                yield Finding(file, line, "cohort", f"cohort {cfg.cohort!r} is not declared in cluster "
                              f"{cluster_name!r}", f"use one of: {', '.join(sorted(cohorts))}")


def _cohort_quotas(fleet: Fleet) -> Iterator[Finding]:
    """A cohort's quota names pools of its cluster."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        pools = [p.name for p in cfg.node_pools]
        for i, cohort in enumerate(cfg.cohorts):
            for pool in cohort.quotas:
                if pool not in pools:
                    file, line = cluster.at("cohorts", i, "quotas", pool)
                    yield Finding(file, line, f"cohorts[{i}].quotas.{pool}", f"pool {pool!r} is not defined in "
                                  f"cluster {cfg.name!r}", f"use one of: {', '.join(pools)}")


def _cpu_pool(fleet: Fleet) -> Iterator[Finding]:
    """The CPU pool's flavor must not take a GPU pool's name; its per-team limits name teams of the cluster."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        if cfg.cpu_pool is None:
            continue
        if cfg.pool(cfg.cpu_pool.name) is not None:
            file, line = cluster.at("cpuPool", "name")
            yield Finding(file, line, "cpuPool.name", f"{cfg.cpu_pool.name!r} is also a GPU pool's name",
                          "give the CPU pool another name (it names its ResourceFlavor)")
        teams = {t.config.name for t in fleet.teams_in(cfg.name)}
        for name in cfg.cpu_pool.team_limits:
            if name not in teams:
                file, line = cluster.at("cpuPool", "teamLimits", name)
                yield Finding(file, line, f"cpuPool.teamLimits.{name}", f"team {name!r} has no queue in cluster "
                              f"{cfg.name!r}", f"use one of: {', '.join(sorted(teams)) or '(none)'}")
        yield from _cpu_pool_overheld(cluster, fleet.teams_in(cfg.name))


def _cpu_pool_overheld(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> Iterator[Finding]:
    """Teams never preempted hold their CPU pool limit as quota (compile.quota.cpu_pool_held); together
    they cannot hold more than the pool has, or Kueue would admit CPU-only pods no node can take."""
    cfg, pool = cluster.config, cluster.config.cpu_pool
    assert pool is not None
    holders = [(t.config.name, h) for t in teams if (h := cpu_pool_held(cfg, t.config)) is not None]
    total_cpu, total_memory = cpu_pool_resources(pool)
    for resource, total in (("cpu", total_cpu), ("memory", total_memory)):
        held = sum((quantity.value_of(getattr(h, resource)) for _, h in holders), Decimal(0))
        if held <= quantity.value_of(total):
            continue
        path = ("cpuPool", "teamLimits") if pool.team_limits else ("cpuPool", "teamLimit")
        file, line = cluster.at(*path)
        amount = quantity.canonical(held, quantity.parse(total)[1])
        yield Finding(file, line, ".".join(path), f"teams never preempted hold their limit of cpuPool {pool.name} "
                      f"as quota ({', '.join(name for name, _ in holders)}): {amount} {resource} together, more "
                      f"than the pool's {total}", "lower their limits (cpuPool.teamLimits) so that they fit in the "
                      "pool together")


def _admission_checks(fleet: Fleet) -> Iterator[Finding]:
    """A check's pools are GPU pools of its cluster; the teams it names have quota in them (a typo
    would leave the team's jobs unchecked, or check nobody)."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        pools = [p.name for p in cfg.node_pools]
        quotas = {t.config.name: list(t.config.quotas[cfg.name]) for t in fleet.teams_in(cfg.name)}
        for i, check in enumerate(cfg.admission_checks):
            for j, pool in enumerate(check.pools or []):
                if pool not in pools:
                    file, line = cluster.at("admissionChecks", i, "pools", j)
                    yield Finding(file, line, f"admissionChecks[{i}].pools[{j}]", f"pool {pool!r} is not a GPU pool "
                                  f"of cluster {cfg.name!r}", f"use one of: {', '.join(pools)}")
            for j, team in enumerate(check.teams or []):
                file, line = cluster.at("admissionChecks", i, "teams", j)
                if team not in quotas:
                    yield Finding(file, line, f"admissionChecks[{i}].teams[{j}]", f"team {team!r} has no queue in "
                                  f"cluster {cfg.name!r}", f"use one of: {', '.join(sorted(quotas)) or '(none)'}")
                elif not cfg.check_reaches(check, team, quotas[team]):
                    yield Finding(file, line, f"admissionChecks[{i}].teams[{j}]", f"team {team!r} has no quota in "
                                  f"the check's pools ({', '.join(check.pools or [])})",
                                  "add one of its pools to the check's pools, or drop the team")


def _multikueue_workers(fleet: Fleet) -> Iterator[Finding]:
    """A manager's workers are clusters of the fleet, not managers, on its Kueue release line, running
    the operators whose kinds it dispatches (its Kueue watches those kinds on every worker), with its
    priority classes at the same values (dispatched Workloads keep their class)."""
    for cluster in fleet.clusters.values():
        cfg, mk = cluster.config, cluster.config.multikueue
        if mk is None:
            continue
        plain = sorted(n for n, c in fleet.clusters.items() if c.config.multikueue is None)
        for i, worker in enumerate(mk.workers):
            file, line = cluster.at("multikueue", "workers", i)
            field, other = f"multikueue.workers[{i}]", fleet.clusters.get(worker)
            if other is None:
                yield Finding(file, line, field, f"unknown cluster {worker!r}", f"use one of: {', '.join(plain)}")
                continue
            wcfg = other.config
            if wcfg.multikueue is not None:
                yield Finding(file, line, field, f"{worker!r} is a MultiKueue manager itself",
                              "list clusters without a multikueue key: a manager dispatches to workers only")
                continue
            if kueue_tuple(wcfg.kueue.version)[:2] != kueue_tuple(cfg.kueue.version)[:2]:
                yield Finding(file, line, field, f"{worker!r} runs Kueue {wcfg.kueue.version}, the manager "
                              f"{cfg.kueue.version}: the manager creates its own release's Workloads there",
                              "run the same Kueue minor release on the manager and its workers")
            for operator in OPERATORS:
                kinds = operator_frameworks(operator)
                dispatched = operator.runs_in(cfg) and not operator.multikueue_refusal
                if dispatched and not operator.runs_in(wcfg):
                    yield Finding(file, line, field, f"the manager dispatches {', '.join(kinds)} (operators."
                                  f"{operator.key}), but {worker!r} does not run that operator: the manager's Kueue "
                                  "would stay disconnected from it, dispatching nothing there",
                                  f"set operators.{operator.key}: true in {worker!r}'s file, or turn it off here")
            values = {p.name: p.value for p in wcfg.priorities}
            for prio in cfg.priorities:
                if values.get(prio.name) != prio.value:
                    has = "lacks it" if prio.name not in values else f"gives it {values[prio.name]}"
                    yield Finding(file, line, field, f"priority class {prio.name!r} ({prio.value}) of the manager: "
                                  f"{worker!r} {has}", "declare the manager's priority classes on every worker, "
                                  "with the same values")


def _multikueue_quotas(fleet: Fleet) -> Iterator[Finding]:
    """Quota on a manager is a bound on what is dispatched: a team needs quota in that pool on one
    of the manager's workers, or its jobs there are dispatched nowhere."""
    for team in fleet.teams.values():
        for cluster_name, pools in team.config.quotas.items():
            cluster = fleet.clusters.get(cluster_name)
            mk = cluster.config.multikueue if cluster else None
            if mk is None:
                continue
            for pool in pools:
                if not any(pool in team.config.quotas.get(w, {}) for w in mk.workers):
                    file, line = team.at("quotas", cluster_name, pool)
                    yield Finding(file, line, f"quotas.{cluster_name}.{pool}", f"team {team.config.name!r} has "
                                  f"quota in {pool!r} on manager {cluster_name!r} but none on any of its workers "
                                  f"({', '.join(mk.workers)})", f"give the team quota in {pool!r} on a worker, "
                                  "or remove it here")


def _queue_clusters(fleet: Fleet, team: TeamConfig) -> str:
    """The clusters a team has a queue in, for a fix: never a name the fleet does not have (a typo in
    `quotas` is its own error, and must not come back as the suggested fix of another)."""
    return ', '.join(sorted(c for c in team.quotas if c in fleet.clusters)) or '(none)'


def _no_queue_in(fleet: Fleet, team: Loaded[TeamConfig], key: str, cluster: str) -> Finding:
    """A per-cluster team key naming a cluster the team has no quota (so no queue) in."""
    file, line = team.at(key, cluster)
    return Finding(file, line, f"{key}.{cluster}", f"team {team.config.name!r} has no queue in cluster {cluster!r}",
                   f"use one of: {_queue_clusters(fleet, team.config)}")


def _placement(fleet: Fleet) -> Iterator[Finding]:
    """Every team has a queue in some cluster (else nothing of it renders, namespaces included), and
    each queue can admit something: one without GPU quota runs on the cluster's CPU pool, so it needs
    one, and a team never preempted must hold part of it (it borrows nothing)."""
    for team in fleet.teams.values():
        cfg = team.config
        if not cfg.quotas:
            file, line = team.at("quotas") if "quotas" in cfg.model_fields_set else team.at("name")
            cpu = sorted(n for n, c in fleet.clusters.items() if c.config.cpu_pool is not None)
            yield Finding(file, line, "quotas", f"team {cfg.name!r} has no queue in any cluster, so nothing of it "
                          "is rendered: no namespace, no queue, no access",
                          f"give it GPU quota (quotas: {{<cluster>: {{<pool>: {{gpus: N}}}}}}) in one of: "
                          f"{', '.join(sorted(fleet.clusters)) or '(no clusters)'}; or, for a CPU-only team, "
                          f"quotas: {{<cluster>: {{}}}} in a cluster with a cpuPool: {', '.join(cpu) or '(none)'}")
        for cluster_name, pools in cfg.quotas.items():
            cluster = fleet.clusters.get(cluster_name)
            if pools or cluster is None:
                continue
            file, line = team.at("quotas", cluster_name)
            pool = cluster.config.cpu_pool
            if pool is None:
                gpu_pools = ', '.join(p.name for p in cluster.config.node_pools) or '(none)'
                yield Finding(file, line, f"quotas.{cluster_name}", f"team {cfg.name!r} has no GPU quota in "
                              f"cluster {cluster_name!r}, which has no cpuPool: its queue there could admit no job",
                              f"give it GPU quota in one of: {gpu_pools}" + (
                                  "" if cluster.config.multikueue is not None  # a manager has no cpuPool
                                  else f"; or add a cpuPool to clusters/{cluster_name}.yaml"))
            elif cfg.never_preempted and cpu_pool_held(cluster.config, cfg) is None:
                yield Finding(file, line, f"quotas.{cluster_name}", f"team {cfg.name!r} has no GPU quota in "
                              f"cluster {cluster_name!r} and, never preempted, borrows nothing: with no cpuPool limit "
                              "held for it, its queue there could admit no job",
                              f"set cpuPool.teamLimits.{cfg.name} in clusters/{cluster_name}.yaml (held for it)")


def _stop_policy(fleet: Fleet) -> Iterator[Finding]:
    """A stop names a cluster the team has a queue in (a typo would silently stop nothing)."""
    for team in fleet.teams.values():
        for cluster in team.config.stop_policy:
            if cluster not in team.config.quotas:
                yield _no_queue_in(fleet, team, "stopPolicy", cluster)


def _flavor_order(fleet: Fleet) -> Iterator[Finding]:
    """A team's flavor order lists exactly its pools in the cluster, each once."""
    for team in fleet.teams.values():
        cfg = team.config
        for cluster, order in cfg.flavor_order.items():
            file, line = team.at("flavorOrder", cluster)
            if cluster not in cfg.quotas:
                yield _no_queue_in(fleet, team, "flavorOrder", cluster)
                continue
            where = fleet.clusters.get(cluster)
            pools = where.config.queue_pools(cfg.quotas[cluster]) if where else list(cfg.quotas[cluster])
            if sorted(order) != sorted(pools):
                yield Finding(file, line, f"flavorOrder.{cluster}", f"lists {', '.join(order)}, but the team's "
                              f"pools in {cluster!r} are {', '.join(pools) or '(none)'}",
                              "list every pool of the team's quota there, each once (pools shared by usage have "
                              "their own queue and are not listed)")


def _fungibility_preference(fleet: Fleet) -> Iterator[Finding]:
    """`preference` exists from Kueue v0.15 on (kueue v0.15.2 apis/kueue/v1beta1/clusterqueue_types.go:426)."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        if kueue_tuple(cfg.kueue.version)[:2] >= (0, 15):
            continue
        where: list[tuple[Loaded[Any], tuple[str, ...], Any]] = [
            (cluster, ("kueue", "flavorFungibility", "preference"), cfg.kueue.flavor_fungibility)]
        where += [(t, ("flavorFungibility", "preference"), t.config.flavor_fungibility)
                  for t in fleet.teams_in(cfg.name)]
        for loaded, path, fungibility in where:
            if fungibility is not None and fungibility.preference is not None:
                file, line = loaded.at(*path)
                yield Finding(file, line, ".".join(path), f"Kueue {cfg.kueue.version} in cluster {cfg.name!r} has "
                              "no flavorFungibility.preference",
                              "remove it, or upgrade the cluster's Kueue to v0.15 or later")


def _allowed_priorities(fleet: Fleet) -> Iterator[Finding]:
    """A team's own default and job profiles must use a priority its policy lets through."""
    for team in fleet.teams.values():
        cfg = team.config
        if cfg.allowed_priorities is None:
            continue
        allowed = set(cfg.allowed_priorities)
        if cfg.default_priority and cfg.default_priority not in allowed:
            file, line = team.at("defaultPriority")
            yield Finding(file, line, "defaultPriority", f"priority {cfg.default_priority!r} is not in "
                          "allowedPriorities: the API server would refuse the team's own jobs",
                          f"use one of: {', '.join(sorted(allowed))}, or allow it")
        for i, profile in enumerate(cfg.job_profiles):
            if profile.priority and profile.priority not in allowed:
                file, line = team.at("jobProfiles", i, "priority")
                yield Finding(file, line, f"jobProfiles[{i}].priority", f"priority {profile.priority!r} is not "
                              "in allowedPriorities: the API server would refuse this profile's jobs",
                              f"use one of: {', '.join(sorted(allowed))}, or allow it")


def _capacity(fleet: Fleet) -> Iterator[Finding]:
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        for i, pool in enumerate(cfg.node_pools):
            users = [(t.config.name, t.config.quotas[cfg.name][pool.name].gpus)
                     for t in fleet.teams_in(cfg.name) if pool.name in t.config.quotas[cfg.name]]
            cohorts = [(f"cohort {c.name}", c.quotas[pool.name].gpus) for c in cfg.cohorts if pool.name in c.quotas]
            users += cohorts
            holders = "teams and cohorts" if cohorts else "teams"
            total = sum(g for _, g in users)
            limit = int(pool.gpus * cfg.overcommit)
            if total > limit:
                share = ", ".join(f"{name} {gpus}" for name, gpus in sorted(users, key=lambda u: (-u[1], u[0])))
                file, line = cluster.at("nodePools", i, "nodes")
                yield Finding(file, line, f"nodePools[{i}]",
                              f"pool {pool.name!r} has {pool.gpus} GPUs x overcommit {cfg.overcommit:g} = {limit}, "
                              f"but {holders} hold {total} ({share})",
                              f"lower team quotas by {total - limit} GPUs in total, or add nodes, or raise overcommit")


Problem = tuple[tuple[object, ...], str, str, str]
"""(key path inside the profile, field, message, fix)."""


def _slice_problems(profile: JobProfile, pool: Any) -> Iterator[Problem]:
    """Kueue's rules for podset slices (kueue v0.19.2 pkg/controller/jobframework/tas_validation.go:76-82
    and 187-191, pkg/cache/scheduler/tas_flavor_snapshot.go:779 and 946-948)."""
    slc = profile.topology.slice if profile.topology else None
    if slc is None or profile.topology is None:
        return
    levels = list(pool.topology_levels or [])
    where = ("topology", "slice")
    if profile.leader is not None:
        yield where, "topology.slice", "a profile with a leader puts rank 0 in its workers' domain with a podset " \
            "group, which Kueue does not allow together with slices", "remove the leader or the slice"
    if slc.level not in levels:
        yield where + ("level",), "topology.slice.level", f"pool {pool.name!r} has no topology level {slc.level!r}", \
            f"use one of: {', '.join(levels)}" if levels else "the pool declares no topologyLevels"
    elif profile.topology.level in levels and levels.index(slc.level) < levels.index(profile.topology.level):
        yield where + ("level",), "topology.slice.level", f"{slc.level!r} is above the job's level " \
            f"{profile.topology.level!r}: Kueue refuses slices wider than the job's domain", \
            f"use {profile.topology.level!r} or a level below it"
    if profile.nodes % slc.size:
        yield where + ("size",), "topology.slice.size", f"{profile.nodes} nodes do not divide into slices of " \
            f"{slc.size}", "use a size that divides nodes"


def _profile_problems(fleet: Fleet, team: TeamConfig, profile: JobProfile,
                      shares: dict[Any, Any]) -> Iterator[Problem]:
    unknown = unknown_kind(profile.kind)
    if unknown is not None:
        yield ("kind",), "kind", f"must be one of {unknown.removeprefix('Input should be ')} " \
            f"(got {shown(profile.kind)})", "use one of the listed values"
        return
    kind = kind_of(profile.kind)
    for problem in kind.name_problems(profile.name, profile):
        yield ("name",), "name", problem, "choose a shorter profile name or fewer nodes"
    if kind.runs_program and not profile.command:
        idle = " or ".join(k.name for k in KINDS if not k.runs_program)
        yield (), "command", f"command is required for kind {kind.name}: the program every node runs, e.g. " \
            f"[python, train.py] (only kind {idle} runs none)", "add command: the program to run"
    cluster = fleet.clusters.get(profile.cluster)
    if profile.cluster not in team.quotas or cluster is None:
        yield ("cluster",), "cluster", f"team {team.name!r} has no quota in cluster {profile.cluster!r}", \
            f"use one of: {_queue_clusters(fleet, team)}"
        return
    cfg = cluster.config
    pool = None if profile.on_cpu_pool(cfg) else cfg.pool(profile.pool)
    if profile.on_cpu_pool(cfg):
        yield from _cpu_only_problems(team, profile, cfg)
    elif pool is None or profile.pool not in team.quotas[profile.cluster]:
        cpu = [f"{cfg.cpu_pool.name} (the cpuPool: a CPU-only server)"] if cfg.cpu_pool is not None else []
        held = [p for p in sorted(team.quotas[profile.cluster]) if cfg.pool(p) is not None]  # never a stale name
        yield ("pool",), "pool", f"team {team.name!r} has no quota in pool {profile.pool!r} of {profile.cluster!r}", \
            f"use one of: {', '.join(held + cpu) or '(none)'}"
        return
    else:
        yield from _gpu_pool_problems(team, profile, cfg, pool, shares)
    yield from _priority_problems(team, profile, cfg)
    if pool is not None:
        yield from _topology_problems(profile, pool)
    yield from _deadline_problems(team, profile, cfg)
    yield from _program_problems(kind, profile)
    yield from _kind_problems(kind, profile, cfg)


def _gpu_pool_problems(team: TeamConfig, profile: JobProfile, cfg: ClusterConfig, pool: NodePool,
                       shares: dict[Any, Any]) -> Iterator[Problem]:
    """A profile on a GPU pool: GPUs its nodes have, a job its queue can ever admit, and no CPU of its own."""
    from generator.capacity import never_admitted

    gpus = profile.gpus_in(pool)
    if not 1 <= gpus <= pool.gpu.per_node:
        cpu_only = f", or pool: {cfg.cpu_pool.name} for a CPU-only server" if cfg.cpu_pool is not None else ""
        yield ("gpusPerNode",), "gpusPerNode", \
            f"{gpus} GPUs per pod, but nodes of pool {pool.name!r} have {pool.gpu.per_node}", \
            f"use 1 to {pool.gpu.per_node}{cpu_only}"
    too_big = never_admitted(gpus * profile.nodes, team.name, f"{profile.cluster}/{profile.pool}",
                             shares[(profile.cluster, profile.pool, team.name)])
    if too_big:
        yield ("nodes",), "nodes", too_big, "use fewer nodes or raise the team's quota or borrowingLimit"
    for field in ("cpu", "memory"):
        if field in profile.model_fields_set:
            yield (field,), field, f"a pod on GPU pool {pool.name!r} gets the {field} that goes with its GPUs " \
                "(the pool's per-node ratio)", f"remove {field}, or use pool: " \
                f"{cfg.cpu_pool.name if cfg.cpu_pool else '<cpuPool>'} for a CPU-only server"


def _priority_problems(team: TeamConfig, profile: JobProfile, cfg: ClusterConfig) -> Iterator[Problem]:
    priority = profile.priority or team.default_priority
    known = [p.name for p in cfg.priorities]
    if priority is None:
        yield ("priority",), "priority", "no priority: the profile sets none and the team has no defaultPriority", \
            f"set priority to one of: {', '.join(known)}"
    elif priority not in known:
        yield ("priority",), "priority", f"priority {priority!r} is not defined in cluster {profile.cluster!r}", \
            f"use one of: {', '.join(known)}"


def _topology_problems(profile: JobProfile, pool: NodePool) -> Iterator[Problem]:
    if profile.topology is not None and profile.topology.level not in (pool.topology_levels or []):
        levels = pool.topology_levels or []
        yield ("topology", "level"), "topology.level", \
            f"pool {pool.name!r} has no topology level {profile.topology.level!r}", \
            f"use one of: {', '.join(levels)}" if levels else "the pool declares no topologyLevels; remove topology"
    yield from _slice_problems(profile, pool)


def _program_problems(kind: Kind, profile: JobProfile) -> Iterator[Problem]:
    """The program a kind's pods run: with no variable that others set, and no fail-fast exit code torchrun
    gives every fault."""
    from generator.config.jobs import TORCHRUN_ANY_FAILURE

    for j, env in enumerate(profile.env):
        if env.name in kind.reserved_env:
            yield ("env", j, "name"), f"env[{j}].name", f"{env.name} is set {kind.reserved_by}", \
                "remove it or use another name"
    if profile.launcher == "torchrun" and TORCHRUN_ANY_FAILURE in (profile.fail_fast_exit_codes or []):
        yield ("failFastExitCodes",), "failFastExitCodes", (
            "torchrun exits 1 whenever any worker fails (a lost node, an NCCL error, an OOM kill), so exit code 1 "
            "would fail the JobSet on infrastructure faults instead of restarting it"), \
            "remove 1 (usage errors and missing commands still fail fast: 2, 126, 127), or use launcher: none"


def _kind_problems(kind: Kind, profile: JobProfile, cluster: ClusterConfig) -> Iterator[Problem]:
    """What the kind needs of the cluster (its operator, its Kueue integrations) and of the profile (no fields
    it has no use for)."""
    operator = kind.operator
    if operator is not None and not operator.runs_in(cluster):
        yield ("kind",), "kind", f"cluster {cluster.name} does not run {operator.title}, so nothing would run " \
            f"{kind.what}", f"set operators.{operator.key}: true in its cluster file, or use kind: {operator.instead}"
    if profile.leader is not None and kind.leader_refused is not None:
        why, fix = kind.leader_refused
        yield ("leader",), "leader", why.format(what=kind.what), fix
    elif profile.leader is not None and profile.nodes < 2 and profile.launcher == "torchrun":
        yield ("leader",), "leader", "a leader job needs at least 2 nodes (a leader and a worker)", \
            "set nodes to 2 or more, or remove leader"
    unqueued = [f for f in kind.frameworks if f not in frameworks_of(cluster)]
    if unqueued:
        yield ("kind",), "kind", f"Kueue on {profile.cluster} does not queue this kind (its integrations lack " \
            f"{', '.join(unqueued)}), so it would run outside the team's quota", \
            "use kind: jobset" if cluster.multikueue is not None else \
            f"set kueue.integrations in its cluster file to include {', '.join(unqueued)}"
    if kind.refused is not None:
        for field, key in kind.refused.fields:
            if field in profile.model_fields_set:
                yield (key,), key, f"{kind.what} has no {key}: {kind.refused.why}", f"remove {key}{kind.refused.fix}"
    yield from _shape_problems(kind, profile, cluster)


SERVING = " and ".join(k.name for k in KINDS if k.serving)
GROUPED = " and ".join(k.name for k in KINDS if k.grouped)


def _shape_problems(kind: Kind, profile: JobProfile, cluster: ClusterConfig) -> Iterator[Problem]:
    """`port` on what serves, `replicas` on what runs groups, and a job a MultiKueue manager can dispatch."""
    if not kind.serving and profile.port is not None:
        yield ("port",), "port", f"a {profile.kind} profile serves nothing: port is for kinds {SERVING}", \
            "remove port, or use kind: deployment"
    if not kind.grouped and profile.replicas is not None:
        yield ("replicas",), "replicas", f"a {profile.kind} profile has no groups of pods: replicas is for kind " \
            f"{GROUPED}", "remove replicas (a Deployment's replicas are its nodes)"
    problem = kind.manager_problem(profile) if cluster.multikueue is not None else None
    if problem is not None:
        yield ("kind",), "kind", f"{profile.cluster} is a MultiKueue manager: {problem[0]}", problem[1]


CPU_ONLY_KINDS = tuple(k.name for k in KINDS if k.cpu_only)
"""Kinds a CPU-only profile may be: servers, which run the command as written (the batch kinds start torchrun
with one process per GPU, and Ray's and Trainer's pods are shaped by their operators)."""
CPU_ONLY_UNUSED = (("topology", "topology"),)
"""Fields with no meaning on the CPU pool (it declares no topology levels)."""


def _cpu_only_problems(team: TeamConfig, profile: JobProfile, cfg: ClusterConfig) -> Iterator[Problem]:
    """A profile on the cluster's CPU pool: a CPU-only server that Kueue can admit in the team's CPU pool flavor."""

    assert cfg.cpu_pool is not None
    where = f"cpuPool {cfg.cpu_pool.name}"
    if profile.kind not in CPU_ONLY_KINDS:
        yield ("kind",), "kind", f"a {profile.kind} profile cannot run on {where}: CPU-only profiles are servers", \
            f"use kind: {' or '.join(CPU_ONLY_KINDS)}, or a GPU pool"
        return
    if profile.gpus_per_node:
        yield ("gpusPerNode",), "gpusPerNode", f"{profile.gpus_per_node} GPUs per pod, but {where} has no GPUs", \
            "remove gpusPerNode (or set 0), or use a GPU pool"
    for field, key in CPU_ONLY_UNUSED:
        if field in profile.model_fields_set:
            yield (key,), key, f"{where} declares no topology levels", f"remove {key}"
    cpu, memory = cpu_pod_requests(cfg.cpu_pool, profile.cpu, profile.memory)
    pods = profile.nodes * (profile.replicas or 1)
    fits, why = cpu_profile_fit(cfg, team, pods, cpu, memory)
    if not fits:
        yield ("nodes",), "nodes", why, "use fewer nodes or less cpu and memory per pod, or raise the cluster's " \
            f"cpuPool limit for team {team.name}"


def _deadline_problems(team: TeamConfig, profile: JobProfile, cluster: ClusterConfig) -> Iterator[Problem]:
    """A profile within the team's reclaim deadline (the API server would refuse its pods) and its
    maximum execution time."""
    cap = team.grace_cap_in(cluster)
    if kind_of(profile.kind).own_grace and profile.termination_grace_period_seconds > cap:
        yield ("terminationGracePeriodSeconds",), "terminationGracePeriodSeconds", \
            f"{profile.termination_grace_period_seconds} s, but pods of team {team.name} in {cluster.name} may " \
            f"have at most {cap} s (the reclaim deadline, kueue.maxTerminationGracePeriodSeconds), so the API " \
            "server would refuse them", f"use at most {cap}"
    limit = team.max_execution_seconds
    if limit is not None and profile.max_execution_seconds is not None and profile.max_execution_seconds > limit:
        yield ("maxExecutionTime",), "maxExecutionTime", \
            f"{profile.max_execution_time} is longer than the team's maxExecutionTime {team.max_execution_time}, " \
            "and the API server refuses a longer kueue.x-k8s.io/max-exec-time-seconds label", \
            f"use at most {team.max_execution_time}, or remove it (the team's applies)"


def profile_problems(fleet: Fleet, team: TeamConfig, profile: JobProfile) -> list[tuple[str, str, str]]:
    """(field, problem, fix) of one profile as render would judge it: for `job new --nodes N` and friends."""
    from generator.capacity import team_shares

    return [(field, message, hint) for _, field, message, hint in
            _profile_problems(fleet, team, profile, team_shares(fleet))]


def _job_profiles(fleet: Fleet) -> Iterator[Finding]:
    from generator.capacity import team_shares

    shares = team_shares(fleet)
    for team in fleet.teams.values():
        names = [p.name for p in team.config.job_profiles]
        for i, profile in enumerate(team.config.job_profiles):
            problems = list(_profile_problems(fleet, team.config, profile, shares))
            if names.index(profile.name) != i:
                problems.insert(0, (("name",), "name", f"profile {profile.name!r} is defined twice", "rename one"))
            for path, field, message, hint in problems:
                file, line = team.at("jobProfiles", i, *path)
                yield Finding(file, line, f"jobProfiles[{i}].{field}", message, hint)


def _fair_sharing(fleet: Fleet) -> Iterator[Finding]:
    """Settings Kueue would silently ignore once fair sharing is on, or weights with it off."""
    for name, loaded in sorted(fleet.clusters.items()):
        cfg = loaded.config
        teams = fleet.teams_in(name)
        if cfg.kueue.fair_sharing is False:
            weighted = [(t.at("fairSharingWeight"), "fairSharingWeight") for t in teams
                        if t.config.fair_sharing_weight is not None]
            weighted += [(loaded.at("cohorts", i, "fairSharingWeight"), f"cohorts[{i}].fairSharingWeight")
                         for i, c in enumerate(cfg.cohorts) if c.fair_sharing_weight is not None]
            for (file, line), where in weighted:
                yield Finding(file, line, where, f"cluster {name} sets kueue.fairSharing: false, so this weight "
                              "does nothing", "remove the weight, or remove kueue.fairSharing: false")
        elif cfg.kueue.preemption.borrow_within_cohort is not None and cfg.kueue.fair_sharing is None \
                and fair_sharing(cfg, teams):
            file, line = loaded.at("kueue", "preemption", "borrowWithinCohort")
            yield Finding(file, line, "kueue.preemption.borrowWithinCohort",
                          "fair sharing is on (a team or cohort of this cluster sets a fairSharingWeight), and "
                          "then Kueue ignores borrowWithinCohort and its maxPriorityThreshold: preemption while "
                          "borrowing follows fair sharing's strategies and may reach workloads of any priority "
                          "reclaimWithinCohort allows (Kueue v0.19.2 pkg/scheduler/preemption/preemption.go:"
                          "155-160, 636-646)",
                          "remove borrowWithinCohort, or remove the weights, or set kueue.fairSharing: true to "
                          "accept that it is ignored")


def _team_policy(fleet: Fleet) -> Iterator[Finding]:
    """A team's own queue policy stays within what every cluster where it has quota allows, and is
    a combination Kueue accepts and does not ignore."""
    for tname, team in sorted(fleet.teams.items()):
        own = team.config.policy
        if own is None:
            continue
        for cname in sorted(team.config.quotas):
            cluster = fleet.clusters.get(cname)
            if cluster is None:
                continue
            cfg = cluster.config
            limits, base = cfg.kueue.team_policy, cfg.kueue.preemption
            base_bwc = base.borrow_within_cohort.policy if base.borrow_within_cohort else "Never"
            chosen: list[tuple[str, str | None, list[str]]] = [
                ("queueingStrategy", own.queueing_strategy, [*limits.queueing_strategy, cfg.kueue.queueing_strategy]),
                ("withinClusterQueue", own.within_cluster_queue,
                 [*limits.within_cluster_queue, base.within_cluster_queue]),
                ("reclaimWithinCohort", own.reclaim_within_cohort,
                 [*limits.reclaim_within_cohort, base.reclaim_within_cohort]),
                ("borrowWithinCohort", own.borrow_within_cohort.policy if own.borrow_within_cohort else None,
                 [*limits.borrow_within_cohort, base_bwc]),
            ]
            for key, value, allowed in chosen:
                if value is None or value in allowed:
                    continue
                file, line = team.at("policy", key)
                yield Finding(file, line, f"policy.{key}", f"cluster {cname} lets teams choose {key} "
                              f"{', '.join(sorted(set(allowed)))}, not {value}",
                              f"choose one of those, or ask the platform team to list {value} in "
                              f"kueue.teamPolicy.{key} of {cluster.source.path}")
            grace = own.max_termination_grace_period_seconds
            if grace is not None and not limits.max_termination_grace_period_seconds:
                file, line = team.at("policy", "maxTerminationGracePeriodSeconds")
                yield Finding(file, line, "policy.maxTerminationGracePeriodSeconds", f"cluster {cname} sets "
                              "kueue.teamPolicy.maxTerminationGracePeriodSeconds: false, so teams take its "
                              "kueue.maxTerminationGracePeriodSeconds "
                              f"({cfg.kueue.max_termination_grace_period_seconds})",
                              "remove it, or ask the platform team to allow it")
            elif grace is not None and grace > cfg.kueue.max_termination_grace_period_seconds:
                file, line = team.at("policy", "maxTerminationGracePeriodSeconds")
                yield Finding(file, line, "policy.maxTerminationGracePeriodSeconds", f"{grace} is above cluster "
                              f"{cname}'s kueue.maxTerminationGracePeriodSeconds "
                              f"({cfg.kueue.max_termination_grace_period_seconds}): a team may only shorten it",
                              f"use at most {cfg.kueue.max_termination_grace_period_seconds}")
            if own.never_preempted and not limits.never_preempted:
                file, line = team.at("policy", "neverPreempted")
                yield Finding(file, line, "policy.neverPreempted", f"cluster {cname} sets kueue.teamPolicy."
                              "neverPreempted: false", "remove neverPreempted, or ask the platform team to allow it")
            effective = team.config.preemption_in(cfg)
            bwc = effective.borrow_within_cohort
            mine = own.reclaim_within_cohort is not None or own.borrow_within_cohort is not None
            if mine and effective.reclaim_within_cohort == "Never" and bwc is not None and bwc.policy != "Never":
                file, line = team.at("policy")
                yield Finding(file, line, "policy", f"in cluster {cname} team {tname}'s queue would have "
                              f"reclaimWithinCohort: Never with borrowWithinCohort: {bwc.policy}, which Kueue "
                              "refuses (a queue that preempts while borrowing must reclaim its own)",
                              "choose another reclaimWithinCohort, or borrowWithinCohort: {policy: Never}")
            if own.borrow_within_cohort is not None and cfg.kueue.fair_sharing is None \
                    and fair_sharing(cfg, fleet.teams_in(cname)):
                file, line = team.at("policy", "borrowWithinCohort")
                yield Finding(file, line, "policy.borrowWithinCohort", f"fair sharing is on in cluster {cname}, "
                              "and then Kueue ignores borrowWithinCohort (kueue v0.19.2 "
                              "pkg/scheduler/preemption/preemption.go:155-160)",
                              f"remove borrowWithinCohort, or set kueue.fairSharing: true in {cluster.source.path} "
                              "to accept that it is ignored")


def _shared_pool_settings(fleet: Fleet) -> Iterator[Finding]:
    """`kueue.admissionFairSharing` names GPU pools of its cluster, once each, on a Kueue that serves it
    (beta and on by default from v0.15, kueue v0.19.2 pkg/features/kube_features.go:699-702), and no
    cohort holds GPUs in them; a check listing teams does not name them (their queue is everyone's)."""
    for cluster in fleet.clusters.values():
        cfg, afs = cluster.config, cluster.config.kueue.admission_fair_sharing
        if afs is None:
            continue
        base = ("kueue", "admissionFairSharing")
        if kueue_tuple(cfg.kueue.version)[:2] < (0, 15):
            file, line = cluster.at(*base)
            yield Finding(file, line, "kueue.admissionFairSharing", f"Kueue {cfg.kueue.version} serves Admission Fair "
                          "Sharing only behind an alpha feature gate", "upgrade the cluster's Kueue to v0.15 or later")
        pools = [p.name for p in cfg.node_pools]
        for i, pool in enumerate(afs.pools):
            file, line = cluster.at(*base, "pools", i)
            field = f"kueue.admissionFairSharing.pools[{i}]"
            if pool not in pools:
                yield Finding(file, line, field, f"cluster {cfg.name!r} has no GPU pool {pool!r}",
                              f"use one of: {', '.join(pools) or '(none)'}")
            elif afs.pools.index(pool) != i:
                yield Finding(file, line, field, f"pool {pool!r} is listed twice", "list each pool once")
        for i, cohort in enumerate(cfg.cohorts):
            for pool in cohort.quotas:
                if pool in cfg.shared_pools:
                    file, line = cluster.at("cohorts", i, "quotas", pool)
                    yield Finding(file, line, f"cohorts[{i}].quotas.{pool}", f"pool {pool!r} is shared by usage "
                                  "(kueue.admissionFairSharing): its own queue holds all of it", "remove this quota")
        for i, check in enumerate(cfg.admission_checks):
            named = [p for p in cfg.shared_pools if p in (check.pools or [])]
            if check.teams is not None and named:
                file, line = cluster.at("admissionChecks", i, "teams")
                yield Finding(file, line, f"admissionChecks[{i}].teams", f"the check names {', '.join(named)}, "
                              "shared by usage: its one queue serves every team, so a check cannot pick teams there",
                              "list the check's pools without the shared ones, or remove teams")


def _shared_pool_quotas(fleet: Fleet) -> Iterator[Finding]:
    """In a pool shared by usage a team holds nothing (`gpus: 0`, no limits); `usageWeight` only there;
    its queue names fit a label value and do not take a team's."""
    for team in fleet.teams.values():
        cfg = team.config
        for cname, quotas in cfg.quotas.items():
            cluster = fleet.clusters.get(cname)
            if cluster is None:
                continue
            shared = cluster.config.shared_pools
            for pool, quota in quotas.items():
                path = ("quotas", cname, pool)
                field = ".".join(path)
                if pool not in shared:
                    if quota.usage_weight is not None:
                        file, line = team.at(*path, "usageWeight")
                        yield Finding(file, line, f"{field}.usageWeight", f"pool {pool!r} of {cname!r} is not shared "
                                      "by usage, so the weight would do nothing",
                                      "remove it (fairSharingWeight weighs the team's borrowing), or list the pool "
                                      "in the cluster's kueue.admissionFairSharing.pools")
                    continue
                for key, value in (("gpus", quota.gpus), ("borrowingLimit", quota.borrowing_limit),
                                   ("lendingLimit", quota.lending_limit)):
                    if value:
                        file, line = team.at(*path, key)
                        yield Finding(file, line, f"{field}.{key}", f"pool {pool!r} of {cname!r} is shared by usage "
                                      "(kueue.admissionFairSharing): no team holds, lends or borrows GPUs in it; "
                                      "jobs wait in one queue, the team that used least recently first",
                                      f"write {pool}: {{gpus: 0}} (and usageWeight for a larger share), or ask the "
                                      "platform team to take the pool out of kueue.admissionFairSharing.pools")
                if cfg.never_preempted:
                    file, line = team.at(*path)
                    yield Finding(file, line, field, f"pool {pool!r} of {cname!r} is shared by usage: other teams' "
                                  "jobs in its one queue may preempt the team's (withinClusterQueue), and "
                                  "policy.neverPreempted promises they never are", "use the team's own pools only")
                name = AdmissionFairSharing.local_queue(cfg.name, pool)
                if len(name) > 63:
                    file, line = team.at(*path)
                    yield Finding(file, line, field, f"the team's queue on the pool, {name!r}, is longer than 63 "
                                  "characters (it is a kueue.x-k8s.io/queue-name label value)",
                                  "use a shorter team or pool name")
            for pool in shared:
                if cfg.name == AdmissionFairSharing.cluster_queue(pool):
                    file, line = team.at("name")
                    yield Finding(file, line, "name", f"{cfg.name!r} is the ClusterQueue of {cname!r}'s pool {pool!r}, "
                                  "shared by usage", "choose another team name")


def _pod_security_exceptions(fleet: Fleet) -> Iterator[Finding]:
    """An exception names a team with namespaces in the cluster; a typo must not pass unnoticed."""
    for name, loaded in sorted(fleet.clusters.items()):
        teams = {t.config.name for t in fleet.teams_in(name)}
        for team in sorted(loaded.config.tenancy.pod_security_exceptions):
            if team not in teams:
                file, line = loaded.at("tenancy", "podSecurityExceptions", team)
                yield Finding(file, line, f"tenancy.podSecurityExceptions.{team}",
                              f"team {team!r} has no quota (and so no namespaces) in cluster {name}",
                              "name a team of this cluster, or remove the exception")


def _operators(fleet: Fleet) -> Iterator[Finding]:
    """An operator whose kinds Kueue does not queue would run them outside every team's quota; one whose kinds a
    MultiKueue manager cannot dispatch has no place on a manager; and a manager dispatches only what its
    workers grant it."""
    for name in sorted(fleet.clusters):
        loaded = fleet.clusters[name]
        cfg = loaded.config
        file, line = loaded.at("operators")
        for operator in OPERATORS:
            if not operator.runs_in(cfg):
                continue
            kinds = operator_frameworks(operator)
            if cfg.multikueue is not None and operator.multikueue_refusal:
                yield Finding(file, line, "operators", f"{operator.key} is on, but a MultiKueue manager cannot "
                              f"dispatch its kinds ({', '.join(kinds)}): {operator.multikueue_refusal}",
                              f"turn operators.{operator.key} on in the worker clusters' files and submit those there")
                continue
            missing = [kind for kind in kinds if kind not in cfg.kueue.frameworks]
            if missing:
                yield Finding(file, line, "operators", f"{operator.key} is on, but Kueue would not queue "
                              f"{' or '.join(missing)}, so they would run outside every team's quota",
                              f"add {', '.join(missing)} to kueue.integrations")
        if cfg.multikueue is not None and cfg.kueue.integrations is not None:
            dispatched = dispatched_frameworks(None, cfg.operators)
            beyond = [f for f in cfg.kueue.integrations if f not in dispatched]
            if beyond:
                file, line = loaded.at("kueue", "integrations")
                yield Finding(file, line, "kueue.integrations", f"a MultiKueue manager dispatches "
                              f"{', '.join(dispatched)} only, not {', '.join(beyond)}: its workers grant it no more",
                              "omit kueue.integrations, and turn on operators.ray for the Ray kinds")


RULES: list[Callable[[Fleet], Iterator[Finding]]] = [
    _operators, _kubernetes_versions, _reserved_cluster_names, _reserved_team_names, _unique_within_cluster,
    _cohort_tree, _team_names, _namespaces, _subjects, _quota_references, _placement, _capacity, _job_profiles,
    _fair_sharing, _allowed_priorities, _stop_policy, _flavor_order, _fungibility_preference, _cohort_quotas,
    _cpu_pool, _admission_checks, _multikueue_workers, _multikueue_quotas, _pod_security_exceptions, _team_policy,
    _shared_pool_settings, _shared_pool_quotas, release_pins,
]


ACROSS_CLUSTERS: frozenset[Callable[[Fleet], Iterator[Finding]]] = frozenset({
    _multikueue_workers, _multikueue_quotas})
"""The rules that judge one cluster by others of the fleet (a MultiKueue manager by its workers)."""


def check_fleet(fleet: Fleet) -> list[Finding]:
    """Run every cross-file rule."""
    return [finding for rule in RULES for finding in rule(fleet)]


def check_one_cluster(fleet: Fleet) -> list[Finding]:
    """Run every cross-file rule that needs no other cluster than those in `fleet`: on the files one
    cluster publishes (jobs/published.py), which hold that cluster and its teams only."""
    return [finding for rule in RULES if rule not in ACROSS_CLUSTERS for finding in rule(fleet)]
