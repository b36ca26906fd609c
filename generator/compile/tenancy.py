"""Tenancy objects: a Namespace per team namespace and RoleBindings for the team's members."""

from __future__ import annotations

from typing import Any

from generator.compile.kueue import team_folder
from generator.compile.manifest import Manifest, labels
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Loaded
from generator.config.team import TeamConfig

RBAC = "rbac.authorization.k8s.io"
MEMBER_ROLE = "edit"


def namespaces(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """One Namespace per team namespace, labelled with team and cluster."""
    tcfg = team.config
    out = []
    for i, ns in enumerate(tcfg.namespace_names):
        body = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": labels(cluster.config.name, tcfg.name)}}
        out.append(Manifest(team_folder(tcfg.name) + (ns,), body,
                            team.at("namespaces", i) if tcfg.namespaces else team.at("name")))
    return out


def _subjects(team: TeamConfig) -> list[dict[str, Any]]:
    return ([{"kind": "Group", "apiGroup": RBAC, "name": g} for g in team.members.groups]
            + [{"kind": "User", "apiGroup": RBAC, "name": u} for u in team.members.users])


def role_bindings(cluster: Loaded[ClusterConfig], team: Loaded[TeamConfig]) -> list[Manifest]:
    """`edit` for the team's members, bound in each of the team's namespaces and nowhere else."""
    tcfg = team.config
    subjects = _subjects(tcfg)
    if not subjects:
        return []
    out = []
    for ns in tcfg.namespace_names:
        body = {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                "metadata": {"name": f"{tcfg.name}-members", "namespace": ns,
                             "labels": labels(cluster.config.name, tcfg.name)},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": MEMBER_ROLE},
                "subjects": subjects}
        out.append(Manifest(team_folder(tcfg.name) + (ns,), body, team.at("members")))
    return out


def compile_tenancy(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """Namespaces and RoleBindings of every team with quota in the cluster."""
    out: list[Manifest] = []
    for team in teams:
        out.extend(namespaces(cluster, team))
        out.extend(role_bindings(cluster, team))
    return out
