"""What team files may grant, checked on the compiled objects: the last line after the config checks.

The config checks explain a mistake at the line that made it; this check holds the invariant
itself, whatever compiler produced the object: everything under `teams/<team>/` stays in that
team's namespaces, binds only that team's listed subjects (and, on a MultiKueue worker, the one
grant to a manager of the fleet that dispatches the team's jobs), and no namespace is declared
twice or shared with the platform.
"""

from __future__ import annotations

from collections.abc import Iterator

from generator.checks.fleet import system_subject
from generator.compile.manifest import Manifest
from generator.compile.member_rights import rules
from generator.compile.multikueue import manager_grant
from generator.config.cluster import ClusterConfig
from generator.config.team import TeamConfig
from generator.errors import Finding
from generator.validate.findings import object_finding

CHECK = "tenancy"
TEAM_CLUSTER_SCOPED = frozenset({"Namespace", "ClusterQueue", "ClusterRole", "ClusterRoleBinding"})
"""Cluster-scoped kinds a team's folder may hold (its Namespaces, its own ClusterQueue, and the reads its members
get outside their namespaces: held to compile/member_rights.py's table below)."""


def _cluster_reads(m: Manifest, team: TeamConfig, cluster: ClusterConfig) -> Iterator[tuple[str, str, str]]:
    """A team's ClusterRole is `fleetgen-members-<team>` and holds exactly the cluster's table of cluster-wide
    member rights; its binding refers to nothing else."""
    name = f"fleetgen-members-{team.name}"
    if m.name != name:
        yield "metadata.name", f"{m.kind} {m.name!r} is not team {team.name!r}'s", f"name it {name}"
    if m.kind == "ClusterRole" and m.body.get("rules") != rules(cluster, "cluster", team):
        yield "rules", f"ClusterRole {m.name!r} grants other than the cluster's member rights", \
            "grant only what compile/member_rights.py lists"
    if m.kind == "ClusterRoleBinding" and m.body.get("roleRef", {}).get("name") != name:
        yield "roleRef.name", f"ClusterRoleBinding {m.name!r} binds another role", f"bind {name}"


def _team_object(m: Manifest, team: TeamConfig, cluster: ClusterConfig) -> Iterator[tuple[str, str, str]]:
    own = set(team.namespace_names)
    if m.namespace is None and m.kind not in TEAM_CLUSTER_SCOPED:
        yield "metadata", f"a cluster-scoped {m.kind} in team {team.name!r}'s folder", \
            "team objects must be namespaced in the team's namespaces"
    if m.namespace is not None and m.namespace not in own:
        yield "metadata.namespace", f"namespace {m.namespace!r} is not one of team {team.name!r}'s", \
            f"use one of: {', '.join(sorted(own))}"
    if m.kind == "Namespace" and m.name not in own:
        yield "metadata.name", f"Namespace {m.name!r} is not one of team {team.name!r}'s", \
            f"use one of: {', '.join(sorted(own))}"
    if m.kind in ("ClusterRole", "ClusterRoleBinding"):
        yield from _cluster_reads(m, team, cluster)
    if m.kind == "ClusterQueue" and m.name != team.name:
        yield "metadata.name", f"ClusterQueue {m.name!r} is not team {team.name!r}'s", "name it after the team"
    grants = [manager_grant(manager) for manager in cluster.managers]
    if m.kind == "RoleBinding" and any(m.body.get("subjects") == [subject] and m.body.get("roleRef", {}).get("name")
                                       == role for subject, role in grants):
        return  # the worker's grant to a MultiKueue manager of the fleet, in the team's namespace
    if m.kind in ("RoleBinding", "ClusterRoleBinding"):
        listed = {("Group", g) for g in team.members.groups} | {("User", u) for u in team.members.users}
        allowed = set(cluster.tenancy.allowed_system_subjects)
        for i, subject in enumerate(m.body.get("subjects") or []):
            key = (subject.get("kind"), subject.get("name"))
            if key not in listed:
                yield f"subjects[{i}]", f"{key[0]} {key[1]!r} is not a member of team {team.name!r}", \
                    "bind only the team's members"
            elif system_subject(str(key[1])) and key[1] not in allowed:
                yield f"subjects[{i}]", f"{key[1]!r} is a system subject", "remove it from the team's members"


def validate_tenancy(cluster: ClusterConfig, teams: dict[str, TeamConfig], manifests: list[Manifest],
                     platform: dict[str, Manifest]) -> list[Finding]:
    """Findings for team objects that leave their team, and for namespaces declared twice."""
    findings: list[Finding] = []
    declared: dict[str, Manifest] = {}
    for m in manifests:
        if m.kind == "Namespace":
            if m.name in declared:
                findings.append(object_finding(m, "metadata.name", f"Namespace {m.name!r} is declared twice "
                                               f"(also in {declared[m.name].path})", "each namespace has one owner",
                                               CHECK))
            declared.setdefault(m.name, m)
        if m.folder[:1] != ("teams",) or len(m.folder) < 2:
            continue
        team = teams.get(m.folder[1])
        if team is None:
            findings.append(object_finding(m, "", f"folder teams/{m.folder[1]} belongs to no team", "", CHECK))
            continue
        for path, message, hint in _team_object(m, team, cluster):
            findings.append(object_finding(m, path, message, hint, CHECK))
        if m.kind == "Namespace" and m.name in platform:
            owner = platform[m.name]
            findings.append(object_finding(m, "metadata.name", f"namespace {m.name!r} is also used by the "
                                           f"platform ({owner.kind} {owner.name})", "choose another namespace",
                                           CHECK))
    return findings
