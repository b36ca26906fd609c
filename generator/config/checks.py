"""Cross-file rules a single model cannot check: references, uniqueness, capacity.

Each rule is a small generator of findings; `RULES` is the table `check_fleet` runs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator

from generator.config.fleet import Fleet
from generator.errors import Finding

# Namespaces a team may never claim: granting `edit` there would hand out the platform.
RESERVED_NAMESPACES = re.compile(
    r"^(default|kube-.*|kueue-system|jobset-system|monitoring|gpu-operator|nvidia-.*|"
    r"fleetgen-.*|argocd|flux-system|cert-manager|openshift-.*)$")
RESERVED_TEAM_NAMES = frozenset({"default"})


def _unique_within_cluster(fleet: Fleet) -> Iterator[Finding]:
    for loaded in fleet.clusters.values():
        cfg = loaded.config
        for what, names in (("nodePools", [p.name for p in cfg.node_pools]),
                            ("priorities", [p.name for p in cfg.priorities]),
                            ("cohorts", [c.name for c in cfg.cohorts])):
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


def _kubernetes_versions(fleet: Fleet) -> Iterator[Finding]:
    from generator.validate.schemas import builtin_versions

    for loaded in fleet.clusters.values():
        version = loaded.config.kubernetes_version
        if version not in builtin_versions():
            file, line = loaded.at("kubernetesVersion")
            yield Finding(file, line, "kubernetesVersion", f"Kubernetes {version} has no built-in schemas",
                          f"use one of {', '.join(builtin_versions())} (upgrade kubernetes-validate for newer)")


def _reserved_team_names(fleet: Fleet) -> Iterator[Finding]:
    for team in fleet.teams.values():
        if team.config.name in RESERVED_TEAM_NAMES:
            file, line = team.at("name")
            yield Finding(file, line, "name", f"team name {team.config.name!r} is reserved "
                          "(every team namespace has a LocalQueue called 'default')", "choose another team name")


def _namespaces(fleet: Fleet) -> Iterator[Finding]:
    owner: dict[str, str] = {}
    for team in fleet.teams.values():
        names = team.config.namespace_names
        for i, ns in enumerate(names):
            file, line = team.at("namespaces", i) if team.config.namespaces else team.at("name")
            field = f"namespaces[{i}]" if team.config.namespaces else "name"
            if RESERVED_NAMESPACES.match(ns):
                yield Finding(file, line, field, f"namespace {ns!r} is reserved for the platform",
                              "choose a namespace of the team's own, e.g. <team>-<purpose>")
            elif ns in names[:i]:
                yield Finding(file, line, field, f"namespace {ns!r} is listed twice", "remove the duplicate")
            elif ns in owner and owner[ns] != team.config.name:
                yield Finding(file, line, field, f"namespace {ns!r} already belongs to team {owner[ns]!r}",
                              "each namespace belongs to exactly one team; choose another name")
            owner.setdefault(ns, team.config.name)


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
            cohorts = {c.name for c in cluster.config.cohorts}
            if cfg.cohort and cluster.config.cohorts and cfg.cohort not in cohorts:
                file, line = team.at("cohort")
                yield Finding(file, line, "cohort", f"cohort {cfg.cohort!r} is not declared in cluster "
                              f"{cluster_name!r}", f"use one of: {', '.join(sorted(cohorts))}")


def _capacity(fleet: Fleet) -> Iterator[Finding]:
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        for i, pool in enumerate(cfg.node_pools):
            users = [(t.config.name, t.config.quotas[cfg.name][pool.name].gpus)
                     for t in fleet.teams_in(cfg.name) if pool.name in t.config.quotas[cfg.name]]
            total = sum(g for _, g in users)
            limit = int(pool.gpus * cfg.overcommit)
            if total > limit:
                share = ", ".join(f"{name} {gpus}" for name, gpus in sorted(users, key=lambda u: (-u[1], u[0])))
                file, line = cluster.at("nodePools", i, "nodes")
                yield Finding(file, line, f"nodePools[{i}]",
                              f"pool {pool.name!r} has {pool.gpus} GPUs x overcommit {cfg.overcommit:g} = {limit}, "
                              f"but teams hold {total} ({share})",
                              f"lower team quotas by {total - limit} GPUs in total, or add nodes, or raise overcommit")


RULES: list[Callable[[Fleet], Iterator[Finding]]] = [
    _kubernetes_versions, _reserved_team_names, _unique_within_cluster, _cohort_tree, _team_names,
    _namespaces, _quota_references, _capacity,
]


def check_fleet(fleet: Fleet) -> list[Finding]:
    """Run every cross-file rule."""
    return [finding for rule in RULES for finding in rule(fleet)]
