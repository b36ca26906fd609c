"""Issue 31: a team's `defaultPriority` for every workload in its namespaces that names no class, not
only fleetgen's templates. The real API server and Kueue judge the policy in
tests/test_e2e_fleet.py::test_workloads_naming_no_class_get_the_teams_default_priority; these check
what is rendered, said and warned from the files."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from generator.compile.admission import INTEGRATION_KINDS, _names_class
from generator.config.cluster import FLEETGEN_FRAMEWORKS, KUEUE_CHART_FRAMEWORKS, MULTIKUEUE_FRAMEWORKS
from tests.conftest import edit, risks_between, run
from tests.kueue_kinds import KIND_CRDS, classed_object

POLICY = "rendered/prod-west/teams/mutatingadmissionpolicy-fleetgen-default-priority-vision.yaml"
BINDING = "rendered/prod-west/teams/mutatingadmissionpolicybinding-fleetgen-default-priority-vision.yaml"


def test_every_kueue_integration_is_a_kind_the_policy_knows() -> None:
    """A kind missing from the table would keep running at priority 0 with nothing said."""
    known = {f for release in KUEUE_CHART_FRAMEWORKS.values() for f in release}
    known |= set(FLEETGEN_FRAMEWORKS) | set(MULTIKUEUE_FRAMEWORKS)
    assert known <= set(INTEGRATION_KINDS), sorted(known - set(INTEGRATION_KINDS))


def test_the_pod_template_test_walks_lists_and_maps() -> None:
    assert _names_class("object", ("spec", "replicatedJobs", "[]", "template", "spec")) == (
        "has(object.spec) && has(object.spec.replicatedJobs) && object.spec.replicatedJobs.exists(i0, "
        "has(i0.template) && has(i0.template.spec) && has(i0.template.spec.priorityClassName))")
    assert _names_class("object", ("spec", "r", "{}", "spec")) == (
        "has(object.spec) && has(object.spec.r) && object.spec.r.exists(k0, has(object.spec.r[k0].spec) && "
        "has(object.spec.r[k0].spec.priorityClassName))")


def test_a_team_with_a_default_priority_gets_a_mutating_policy(fleet_root: Path) -> None:
    """Only creations in the team's own namespaces (by the name the API server sets), only objects
    naming no class, for the kinds of the cluster's Kueue integrations; the label is the team's class."""
    policy = yaml.safe_load((fleet_root / POLICY).read_text())
    binding = yaml.safe_load((fleet_root / BINDING).read_text())
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    rules = {(g, r) for rule in spec["matchConstraints"]["resourceRules"] for g in rule["apiGroups"]
             for r in rule["resources"]}
    assert {("batch", "jobs"), ("", "pods"), ("apps", "deployments"), ("jobset.x-k8s.io", "jobsets"),
            ("ray.io", "rayjobs"), ("kubeflow.org", "pytorchjobs")} <= rules
    assert all(rule["operations"] == ["CREATE"] for rule in spec["matchConstraints"]["resourceRules"])
    assert "'kueue.x-k8s.io/priority-class' in object.metadata.labels" in spec["matchConditions"][0]["expression"]
    assert "!has(object.metadata.ownerReferences)" in spec["matchConditions"][1]["expression"]
    assert spec["mutations"][0]["applyConfiguration"]["expression"] == \
        "Object{metadata: Object.metadata{labels: {'kueue.x-k8s.io/priority-class': 'standard'}}}"
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["vision", "vision-eval"]}]
    explained = run(fleet_root, "explain", "team", "vision").out
    assert "default standard, given to every workload created in its namespaces that names no class" in explained


def test_before_kubernetes_1_36_the_default_reaches_only_templates_and_a_warning_says_so(fleet_root: Path) -> None:
    """No MutatingAdmissionPolicy to serve it: nothing is rendered that the API server would refuse,
    one warning per cluster names the teams, and `explain` says what their other workloads get."""
    edit(fleet_root, "clusters/prod-west.yaml", 'kubernetesVersion: "1.36"', 'kubernetesVersion: "1.35"')
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert not (fleet_root / POLICY).exists()
    assert not list(fleet_root.glob("rendered/prod-west/teams/mutatingadmissionpolicy*"))
    assert result.err.count("defaultPriority of") == 1, result.err
    assert "clusters/prod-west.yaml:4: kubernetesVersion: defaultPriority of inference, ml-research, " \
        "platform-ci, recsys, vision reaches only fleetgen's job templates in prod-west" in result.err, result.err
    explained = run(fleet_root, "explain", "team", "vision").out
    assert "default standard on fleetgen's job templates only: other workloads naming no class run at " \
        "priority 0 (applying it to every workload needs Kubernetes 1.36, the cluster is 1.35)" in explained


def test_changing_a_default_priority_is_a_risk_line(fleet_root: Path, tmp_path: Path) -> None:
    """It moves how the team's workloads queue and preempt against other teams'."""
    base = tmp_path / "base"
    shutil.copytree(fleet_root, base)
    edit(fleet_root, "teams/vision.yaml", "defaultPriority: standard", "defaultPriority: preemptible")
    assert run(fleet_root, "render").code == 0
    found = risks_between(base, fleet_root)
    assert any("prod-west" in line and "changes the priority class of workloads created without one" in line
               for line in found["default-priority-changed"]), found
    assert all(line.startswith("medium: ") for line in found["default-priority-changed"])


def test_the_policy_labels_every_kind_it_names_on_the_real_api_server(
        upstream_etcd: Any, tmp_path_factory: Any) -> None:
    """Issue 31: the policy's per-kind paths were checked on the real server for Job, JobSet, Pod and
    Deployment only. Here every kind of prod-west's (Kueue v0.19) and dev's (v0.15) policy, each kind's
    CRD from the module Kueue builds against: created in a team namespace naming no class, it gets the
    team's class; with any one of its pod templates naming one (`priorityClassName`), it gets none.
    A TrainJob has no template of its own (its runtime has them): it always gets the team's class."""
    from kubernetes.dynamic.exceptions import ServiceUnavailableError

    from generator.compile.admission import INTEGRATION_KINDS
    from tests.conftest import REPO
    from tests.upstream import tools
    from tests.upstream.cluster import Stack
    from tests.upstream.fleet import apply
    from tests.upstream.processes import wait_for

    crds = {framework: yaml.safe_load(tools.module_file(module, rel).read_text())
            for framework, (module, rel) in KIND_CRDS.items()}
    stack = Stack.start(tmp_path_factory.mktemp("default-priority"), upstream_etcd, platform=False)
    try:
        for crd in crds.values():
            stack.create(crd)
        stack._wait_established([c["metadata"]["name"] for c in crds.values()])
        policies = {"prod-west": "vision", "dev": "speech"}
        covered: dict[str, str] = {}
        for cluster, team in policies.items():
            teams = REPO / "rendered" / cluster / "teams"
            for name in ("mutatingadmissionpolicy", "mutatingadmissionpolicybinding"):
                body = yaml.safe_load((teams / f"{name}-fleetgen-default-priority-{team}.yaml").read_text())
                apply(stack, body)
                if name == "mutatingadmissionpolicy":
                    for rule in body["spec"]["matchConstraints"]["resourceRules"]:
                        for group in rule["apiGroups"]:
                            for resource in rule["resources"]:
                                covered.setdefault(f"{group}/{resource}", team)
        assert {f"{g}/{r}" for g, r, _ in INTEGRATION_KINDS.values()} <= set(covered), sorted(covered)
        for ns in ("vision", "speech"):
            apply(stack, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        apply(stack, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                      "value": 1000})
        client = stack.dynamic()

        def label(framework: str, ns: str, classed: int | None = None) -> str | None:
            body = classed_object(framework, crds.get(framework), classed)
            api = client.resources.get(api_version=body["apiVersion"], kind=body["kind"])

            def attempt() -> tuple[Any] | None:
                try:
                    out = api.create(body=body, namespace=ns, dry_run="All").to_dict()
                except ServiceUnavailableError:  # the policy's type for a new CRD comes a moment later
                    return None
                return ((out["metadata"].get("labels") or {}).get("kueue.x-k8s.io/priority-class"),)
            answer = wait_for(attempt, 30)
            assert answer is not None, f"{framework}: still unavailable"
            return answer[0]

        for ns in policies.values():  # a new policy is compiled asynchronously: wait until it acts
            assert wait_for(lambda ns=ns: label("batch/job", ns), 30)
        results = {}
        for framework, (group, plural, paths) in INTEGRATION_KINDS.items():
            ns = covered[f"{group}/{plural}"]
            results[framework] = (label(framework, ns), *(label(framework, ns, i) for i in range(len(paths))))
        wrong = {f: got for f, got in results.items() if got != ("standard", *[None] * len(INTEGRATION_KINDS[f][2]))}
        assert not wrong, wrong
    finally:
        stack.stop()
