"""Tenancy objects: a Namespace per team namespace, RoleBindings for the team's members, and the
bounds of each namespace (compile/isolation.py).

Members get two bindings in each of their namespaces and nowhere else: the built-in `edit` role
(pods, logs, config maps, secrets, batch Jobs) and `fleetgen-team-member`, a ClusterRole rendered
once per cluster with what `edit` lacks for a queued training job: JobSets (JobSet's chart adds
no `aggregate-to-edit` role for them; nor do the operators' charts for their kinds, granted where each
runs: generator/kinds) and read access to the Kueue objects that say where a job stands. A ClusterRole
bound by a RoleBinding grants only within that binding's namespace.

And one cluster-wide read grant, `fleetgen-priority-reader`: every authenticated user may read the
cluster's WorkloadPriorityClasses (names and values, already published to the same users in
`kube-public/fleetgen-fleet`), so the job SDK's pre-submit check can tell a class that exists from
one that does not. Read only, and no team file widens it.
"""

from __future__ import annotations

from typing import Any

from generator.compile.isolation import namespace_bounds, namespace_labels
from generator.compile.kueue import team_folder
from generator.compile.manifest import Manifest, labels
from generator.compile.namespace_policies import namespace_policies
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig
from generator.kinds import OPERATORS

RBAC = "rbac.authorization.k8s.io"
MEMBER_ROLE = "edit"
JOBS_ROLE = "fleetgen-team-member"
JOBS_RULES: list[dict[str, list[str]]] = [
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"],
     "verbs": ["create", "delete", "get", "list", "patch", "watch"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["visibility.kueue.x-k8s.io"], "resources": ["localqueues/pendingworkloads"], "verbs": ["get"]},
]
"""What a member needs beyond `edit` to submit, follow and cancel jobs: no update of queue objects."""
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
            "rules": JOBS_RULES + [rule for operator in OPERATORS if operator.runs_in(cluster.config)
                                   for rule in operator.member_rules]}
    return Manifest(("teams",), body, cluster.at("name"))


PRIORITY_READER = "fleetgen-priority-reader"
PRIORITY_READER_RULES: list[dict[str, list[str]]] = [
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloadpriorityclasses"], "verbs": ["get", "list", "watch"]},
]


def priority_reader(cluster: Loaded[ClusterConfig]) -> list[Manifest]:
    """The ClusterRole that reads WorkloadPriorityClasses, bound to every authenticated user."""
    meta = {"name": PRIORITY_READER, "labels": labels(cluster.config.name)}
    where = cluster.at("priorities")
    return [
        Manifest(("teams",), {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": meta,
                              "rules": PRIORITY_READER_RULES}, where),
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
        out.extend(namespace_bounds(cluster, team))
    return out
