"""Tenancy objects: a Namespace per team namespace, RoleBindings for the team's members, and the
bounds of each namespace (compile/isolation.py).

Members get two bindings in each of their namespaces and nowhere else: the built-in `edit` role
(pods, logs, config maps, secrets, batch Jobs) and `fleetgen-team-member`, a ClusterRole rendered
once per cluster with what `edit` lacks for a queued training job. Beyond their namespaces, a team's
members get `fleetgen-members-<team>` (reads the cluster grants them outside their namespaces) and every
authenticated user `fleetgen-priority-reader`. What each holds, and why, is one table:
compile/member_rights.py. A ClusterRole bound by a RoleBinding grants only within that binding's namespace.
"""

from __future__ import annotations

from typing import Any

from generator.compile.isolation import namespace_bounds, namespace_labels
from generator.compile.kueue import team_folder
from generator.compile.manifest import Manifest, labels
from generator.compile.member_rights import rules
from generator.compile.namespace_policies import namespace_policies
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig

RBAC = "rbac.authorization.k8s.io"
MEMBER_ROLE = "edit"
JOBS_ROLE = "fleetgen-team-member"


def namespaces(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """One Namespace per team namespace, labelled with team and cluster."""
    tcfg = team.config
    out = []
    for i, ns in enumerate(tcfg.namespace_names):
        body = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": labels(cluster.config.name, tcfg.name)
                             | namespace_labels(cluster.config, tcfg.name)}}
        out.append(Manifest(team_folder(tcfg.name) + (ns,), body,
                            team.at("namespaces", i) if tcfg.namespaces else team.at("name")))
    return out


def _subjects(team: TeamConfig) -> list[dict[str, Any]]:
    return ([{"kind": "Group", "apiGroup": RBAC, "name": g} for g in team.members.groups]
            + [{"kind": "User", "apiGroup": RBAC, "name": u} for u in team.members.users])


def role_bindings(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """`edit` and `fleetgen-team-member` for the team's members, in each of its namespaces only."""
    tcfg = team.config
    subjects = _subjects(tcfg)
    if not subjects:
        return []
    out = []
    for ns in tcfg.namespace_names:
        for suffix, role in (("members", MEMBER_ROLE), ("members-jobs", JOBS_ROLE)):
            body = {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                    "metadata": {"name": f"{tcfg.name}-{suffix}", "namespace": ns,
                                 "labels": labels(cluster.config.name, tcfg.name)},
                    "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
                    "subjects": subjects}
            out.append(Manifest(team_folder(tcfg.name) + (ns,), body, team.at("members")))
    return out


def member_role(cluster: Loaded[ClusterConfig]) -> Manifest:
    """The ClusterRole the `<team>-members-jobs` RoleBindings refer to (one per cluster)."""
    body = {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
            "metadata": {"name": JOBS_ROLE, "labels": labels(cluster.config.name)},
            "rules": rules(cluster.config, "namespace")}
    return Manifest(("teams",), body, cluster.at("name"))


def cluster_reads(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """`fleetgen-members-<team>`: what the team's members may read outside their namespaces, bound to them
    alone (none where the cluster grants nothing cluster-wide or the team lists no members)."""
    tcfg = team.config
    subjects, granted = _subjects(tcfg), rules(cluster.config, "cluster", tcfg)
    if not subjects or not granted:
        return []
    meta = {"name": f"fleetgen-members-{tcfg.name}", "labels": labels(cluster.config.name, tcfg.name)}
    where = team.at("members")
    return [Manifest(team_folder(tcfg.name), {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": meta,
                                              "rules": granted}, where),
            Manifest(team_folder(tcfg.name), {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
                                              "metadata": meta, "subjects": subjects,
                                              "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole",
                                                          "name": meta["name"]}}, where)]


PRIORITY_READER = "fleetgen-priority-reader"


def priority_reader(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    """The ClusterRole of what every authenticated user may read, bound to them."""
    meta = {"name": PRIORITY_READER, "labels": labels(cluster.config.name)}
    where = cluster.at("priorities")
    return [
        Manifest(("teams",), {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": meta,
                              "rules": rules(cluster.config, "everyone")}, where),
        Manifest(("teams",), {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": meta,
                              "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": PRIORITY_READER},
                              "subjects": [{"kind": "Group", "apiGroup": RBAC, "name": "system:authenticated"}]},
                 where),
    ]


def compile_tenancy(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """The member ClusterRole, and Namespaces and RoleBindings of every team with quota in the cluster."""
    out: list[Manifest] = [member_role(cluster), *priority_reader(cluster), *namespace_policies(cluster)]
    for team in teams:
        out.extend(namespaces(cluster, team))
        out.extend(role_bindings(cluster, team))
        out.extend(cluster_reads(cluster, team))
        out.extend(namespace_bounds(cluster, team))
    return out
