"""Property: whatever a team file says, what the output grants stays inside that team.

For any team file (hostile subjects, other teams' and the platform's namespaces, look-alikes),
either the render refuses it with findings, or every (namespace, subject) pair the output
grants beyond the fleet without that team is one of the team's own namespaces x one of its
listed subjects, none of them a `system:` subject; the one cluster-wide binding is to the team's
`fleetgen-members-<team>`, whose rules only read (what the cluster file, not the team, grants).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator import render
from generator.errors import InputError
from generator.yamltext import to_yaml
from tests.conftest import REPO

Grant = tuple[str, str, str]
"""(namespace, or "*<role>" for a cluster-wide binding to <role>; subject kind, subject name)."""

NAMESPACES = ["prop", "prop-a", "prop-b", "speech", "vision", "monitoring", "fleetgen-system", "flux-system",
              "argocd", "kube-system", "kube-public", "default", "gpu-operator", "kueue-system", "jobset-system",
              "observability", "cert-manager"]
SUBJECTS = ["ml", "prop-team", "alice@acme.com", "oidc:ml-engineers", "system:authenticated", "system:masters",
            "SYSTEM:nodes", "system:serviceaccounts", "system:serviceaccount:kube-system:default",
            "system:anonymous", "system:unauthenticated", " system:authenticated", "\u0430dmin", "ml\u200b",
            "ｍｌ", "a\u202eb", "speech", "*", ":", "system", "system:", "System:Masters"]

names = st.one_of(st.sampled_from(NAMESPACES), st.from_regex(r"\A[a-z][a-z0-9-]{0,10}[a-z0-9]\Z"))
subjects = st.one_of(st.sampled_from(SUBJECTS), st.from_regex(r"\A[a-z][a-z0-9@.:-]{0,20}\Z"),
                     st.text(min_size=1, max_size=24))
team_files = st.fixed_dictionaries(
    {"name": st.just("prop"), "owners": st.just(["@acme/prop"]),
     "quotas": st.just({"dev": {"l4": {"gpus": 1}}}),
     "members": st.fixed_dictionaries({"groups": st.lists(subjects, min_size=1, max_size=3)},
                                      optional={"users": st.lists(subjects, max_size=3)})},
    optional={"namespaces": st.lists(names, min_size=1, max_size=4)})


def grants(result: render.Build) -> set[Grant]:
    out = set()
    for manifests in result.compiled.values():
        for m in manifests:
            if m.kubernetes and m.kind in ("RoleBinding", "ClusterRoleBinding"):
                for s in m.body.get("subjects") or []:
                    where = m.namespace or "*" + str((m.body.get("roleRef") or {}).get("name"))
                    out.add((where, str(s.get("kind")), str(s.get("name"))))
    return out


class _Fleet:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="fleetgen-grants-"))
        atexit.register(shutil.rmtree, self.root, True)  # hypothesis tests take no tmp_path
        for name in ("teams", "clusters"):
            shutil.copytree(REPO / name, self.root / name)
        self.baseline = grants(render.build(self.root, ["dev"]))


FLEET = _Fleet()


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(team_files)
def test_grants_stay_inside_the_team(team: dict[str, Any]) -> None:
    _check(team)


def test_the_property_sees_the_grants_of_an_ordinary_team() -> None:
    """The check above is not vacuous: a plain team's bindings are found and pass it."""
    team = {"name": "prop", "owners": ["@acme/prop"], "namespaces": ["prop", "prop-a"],
            "members": {"groups": ["ml"], "users": ["alice@acme.com"]}, "quotas": {"dev": {"l4": {"gpus": 1}}}}
    assert _check(team) == {(ns, kind, name) for ns in ("prop", "prop-a", "*fleetgen-members-prop")
                            for kind, name in (("Group", "ml"), ("User", "alice@acme.com"))}


def _check(team: dict[str, Any]) -> set[Grant] | None:
    path = FLEET.root / "teams/prop.yaml"
    path.write_text(to_yaml(team), encoding="utf-8")
    try:
        result = render.build(FLEET.root, ["dev"])
    except InputError as exc:
        assert exc.findings and all(f.file.startswith(("teams/", "clusters/")) for f in exc.findings)
        return None
    finally:
        path.unlink()
    own_namespaces = set(team.get("namespaces") or ["prop"])
    members = team.get("members") or {}
    listed = {("Group", g) for g in members.get("groups", [])} | {("User", u) for u in members.get("users", [])}
    new = grants(result) - FLEET.baseline
    wide = [m for ms in result.compiled.values() for m in ms
            if m.kubernetes and m.kind == "ClusterRole" and m.name == "fleetgen-members-prop"]
    for role in wide:  # exactly the reads the cluster file allows, written out here, not taken from the table
        assert {(group, resource, verb, tuple(rule.get("resourceNames") or ())) for rule in role.body["rules"]
                for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]} <= {
            *(("", "nodes", verb, ()) for verb in ("get", "list", "watch")),
            *(("node.k8s.io", "runtimeclasses", verb, ()) for verb in ("get", "list", "watch")),
            *(("trainer.kubeflow.org", "clustertrainingruntimes", verb, ()) for verb in ("get", "list", "watch")),
            ("visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", "get", ("prop",))}, role.body
    for namespace, kind, name in new:
        assert namespace in own_namespaces | {"*fleetgen-members-prop"}, (namespace, kind, name)
        assert (kind, name) in listed, (namespace, kind, name)
        assert not name.strip().lower().startswith("system:"), name
    return new
