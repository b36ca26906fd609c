"""Issue 17: MultiKueue declared in the cluster files, what is rendered and what is refused.
The dispatch itself, on two real API servers with Kueue, is in tests/test_multikueue.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, edit, run

HUB = REPO / "rendered" / "hub"


def _doc(root: Path, rel: str) -> dict[str, Any]:
    return dict(yaml.safe_load((root / "rendered" / rel).read_text()))


def test_the_manager_dispatches_each_team_to_the_workers_where_it_has_quota() -> None:
    for worker in ("prod-east", "prod-west"):
        assert _doc(REPO, f"hub/kueue/multikueuecluster-{worker}.yaml")["spec"] == {
            "clusterSource": {"kubeConfig": {"location": f"multikueue-{worker}", "locationType": "Secret"}}}
    assert _doc(REPO, "hub/kueue/multikueueconfig-multikueue-vision.yaml")["spec"] == {
        "clusters": ["prod-east", "prod-west"]}
    assert _doc(REPO, "hub/kueue/admissioncheck-multikueue-vision.yaml")["spec"] == {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "multikueue-vision"}}
    queue = _doc(REPO, "hub/teams/vision/clusterqueue-vision.yaml")["spec"]
    assert queue["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue-vision"}]}
    assert [f["name"] for f in queue["resourceGroups"][0]["flavors"]] == ["h100", "l40s"]
    # The manager's flavors are its workers' pools, with no nodes of its own to select.
    for pool in ("h100", "a100", "l40s"):
        assert _doc(REPO, f"hub/kueue/resourceflavor-{pool}.yaml").get("spec", {}) == {}
    # Only teams with quota on the manager have queues there.
    assert sorted(p.name for p in (HUB / "teams").iterdir() if p.is_dir()) == ["platform-ci", "vision"]
    app = _doc(REPO, "hub/platform/application-hub-kueue.yaml")
    values = app["spec"]["source"]["helm"]["valuesObject"]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["multiKueue"] == {"gcInterval": "1m", "origin": "hub", "workerLostTimeout": "15m"}
    assert "multiKueue" not in json.dumps(_doc(REPO, "prod-west/platform/helmrelease-kueue.yaml"))


def test_a_worker_lets_the_manager_write_only_in_the_dispatched_teams_namespaces() -> None:
    rbac = [_doc(REPO, f"prod-west/kueue/{name}.yaml") for name in (
        "clusterrole-fleetgen-multikueue-hub-read", "clusterrole-fleetgen-multikueue-hub-write",
        "clusterrolebinding-fleetgen-multikueue-hub-read")]
    read, write, binding = rbac
    assert all(rule["verbs"] == ["get", "list", "watch"] or rule["verbs"] == ["get"] for rule in read["rules"])
    assert binding["roleRef"]["name"] == read["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "multikueue-hub", "namespace": "kueue-system"}]
    cluster_wide = [yaml.safe_load(f.read_text()) for f in (REPO / "rendered/prod-west").rglob("clusterrolebinding-*")]
    assert [b["roleRef"]["name"] for b in cluster_wide if "multikueue" in b["roleRef"]["name"]] == [
        read["metadata"]["name"]]  # writes are granted per namespace only
    bindings = sorted((REPO / "rendered/prod-west/teams").glob("*/*/rolebinding-fleetgen-multikueue-hub.yaml"))
    assert [yaml.safe_load(b.read_text())["metadata"]["namespace"] for b in bindings] == [
        "platform-ci", "vision", "vision-eval"]  # teams with quota on hub; not inference nor recsys
    assert all(yaml.safe_load(b.read_text())["roleRef"]["name"] == write["metadata"]["name"] for b in bindings)
    token = _doc(REPO, "prod-west/kueue/secret-multikueue-hub-token.yaml")
    assert token["type"] == "kubernetes.io/service-account-token" and "data" not in token  # no credential in git
    assert not (REPO / "rendered/dev/kueue/serviceaccount-multikueue-hub.yaml").exists()  # not a worker


@pytest.mark.parametrize(("change", "message"), [
    (("clusters/hub.yaml", "workers: [prod-east, prod-west]", "workers: [prod-east, prod-north]"),
     "clusters/hub.yaml:10: multikueue.workers[1]: unknown cluster 'prod-north'"),
    (("clusters/hub.yaml", "workers: [prod-east, prod-west]", "workers: [prod-east, hub]"),
     "multikueue.workers[1]: 'hub' is a MultiKueue manager itself"),
    (("clusters/prod-west.yaml", "  version: v0.19.2", "  version: v0.16.2"),
     "multikueue.workers[1]: 'prod-west' runs Kueue v0.16.2, the manager v0.19.2"),
    (("clusters/prod-west.yaml", "  - {name: standard, value: 100}", "  - {name: standard, value: 200}"),
     "priority class 'standard' (100) of the manager: 'prod-west' gives it 200"),
    (("teams/vision.yaml", "  hub:\n    h100: {gpus: 32}\n    l40s: {gpus: 8}", "  hub:\n    h100: {gpus: 32}\n"
      "    a100: {gpus: 8}"),
     "quotas.hub.a100: team 'vision' has quota in 'a100' on manager 'hub' but none on any of its workers "
     "(prod-east, prod-west)"),
    (("clusters/prod-west.yaml", "cpuPool:\n",
      "admissionChecks: [{name: mk, controllerName: kueue.x-k8s.io/multikueue}]\ncpuPool:\n"),
     "controllerName kueue.x-k8s.io/multikueue is Kueue's own: declare `multikueue` in the manager cluster's file"),
    (("clusters/prod-west.yaml", "operators: {ray: true, trainer: true}", "operators: {ray: false, trainer: true}"),
     "clusters/hub.yaml:10: multikueue.workers[1]: the manager dispatches ray.io/raycluster, ray.io/rayjob "
     "(operators.ray), but 'prod-west' does not run that operator: the manager's Kueue would stay disconnected "
     "from it"),
    (("clusters/hub.yaml", "priorities:", "nodePools: [{name: x, gpu: {product: X, perNode: 1}, nodes: 1, "
      "cpuPerNode: 1, memoryPerNode: 1Gi}]\npriorities:"),
     "a MultiKueue manager has no nodePools: its jobs run on its workers' pools"),
    (("clusters/hub.yaml", "  version: v0.19.2\n", "  version: v0.19.2\n  integrations: [batch/job, "
      "jobset.x-k8s.io/jobset, pod]\n"),
     "clusters/hub.yaml:8: kueue.integrations: a MultiKueue manager dispatches batch/job, jobset.x-k8s.io/jobset, "
     "ray.io/raycluster, ray.io/rayjob, trainer.kubeflow.org/trainjob only, not pod: its workers grant it no more"),
    (("clusters/prod-west.yaml", "  - name: l40s\n    gpu: {product: NVIDIA-L40S, perNode: 4}",
      "  - name: h100\n    gpu: {product: NVIDIA-L40S, perNode: 4}"),
     "multikueue.workers[1]: pool 'h100' of 'prod-west' has 4 x nvidia.com/gpu per node, another worker's 8"),
])
def test_a_wrong_manager_or_worker_is_an_error_at_its_line(fleet_root: Path, change: tuple[str, str, str],
                                                           message: str) -> None:
    edit(fleet_root, *change)
    result = run(fleet_root, "render")
    assert result.code == 2, result.err
    assert message in result.err, result.err
    assert "Traceback" not in result.err


def test_a_removed_worker_is_a_high_risk_and_explain_says_where_jobs_go(repo: Path) -> None:
    explained = run(repo, "explain", "team", "vision")
    assert "in hub: jobs are dispatched by MultiKueue to prod-east, prod-west" in explained.out, explained.out
    edit(repo, "clusters/hub.yaml", "workers: [prod-east, prod-west]", "workers: [prod-east]")
    edit(repo, "teams/vision.yaml", "  hub:\n    h100: {gpus: 32}\n    l40s: {gpus: 8}", "  hub:\n    h100: {gpus: 32}")
    edit(repo, "teams/platform-ci.yaml", "  hub:\n    a100: {gpus: 8}\n    l40s: {gpus: 4}\n", "")
    result = run(repo, "diff", "--format", "json")
    assert result.code == 1, result.err
    risks = {(r["severity"], r["rule"], r["message"]) for r in json.loads(result.out)["risks"]}
    assert ("high", "dispatch-worker-removed", "hub: worker prod-west is removed from the MultiKueue manager: jobs "
            "it runs for the manager's teams are orphaned there, queued ones are dispatched elsewhere or wait") \
        in risks, sorted(risks)
    assert ("high", "dispatch-worker-removed", "hub: MultiKueueConfig multikueue-vision no longer dispatches to "
            "prod-west: the team's jobs there are orphaned, new ones go elsewhere") in risks, sorted(risks)


@pytest.mark.parametrize(("cluster", "role", "refused"), [
    ("prod-west", "fleetgen-multikueue-hub-write", False),  # as rendered: the worker's grant to hub
    ("prod-west", "admin", True),                           # the same subject, another role
    ("dev", "fleetgen-multikueue-hub-write", True),         # dev is no worker of hub
])
def test_the_tenancy_check_allows_exactly_the_managers_grant(cluster: str, role: str, refused: bool) -> None:
    from generator.checks import load_fleet
    from generator.compile.manifest import Manifest
    from generator.validate.tenancy_rules import validate_tenancy

    fleet = load_fleet(REPO)
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "fleetgen-multikueue-hub", "namespace": "vision"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
               "subjects": [{"kind": "ServiceAccount", "name": "multikueue-hub", "namespace": "kueue-system"}]}
    manifest = Manifest(("teams", "vision", "vision"), binding, ("teams/vision.yaml", 1))
    teams = {t.config.name: t.config for t in fleet.teams_in(cluster)}
    findings = validate_tenancy(fleet.clusters[cluster].config, teams, [manifest], {})
    assert bool(findings) == refused, findings
    if refused:
        assert "ServiceAccount 'multikueue-hub' is not a member of team 'vision'" in findings[0].message


def test_a_workers_change_recompiles_its_manager(repo: Path) -> None:
    """The manager's pools are its workers': an incremental render, and the diff, that kept the
    manager because its own files were unchanged would leave its quotas on the old pools."""
    assert run(repo, "render").code == 0
    edit(repo, "clusters/prod-west.yaml", "    nodes: 16\n", "    nodes: 8\n")
    result = run(repo, "render")
    assert result.code == 0 and "(2 unchanged clusters not compiled again)" in result.out, result.out
    assert run(repo, "render", "--check").code == 0  # the same as compiling everything afresh
    root = _doc(repo, "hub/kueue/cohort-hub.yaml")["spec"]["resourceGroups"][0]["flavors"]
    assert {"name": "nvidia.com/gpu", "nominalQuota": "56"} in next(f for f in root if f["name"] == "a100")["resources"]
    diff = json.loads(run(repo, "diff", "--format", "json").out)
    assert "2 cluster(s) whose inputs are unchanged were not compiled" in diff["notes"]
    assert ("hub", "Cohort", "hub") in {(c["cluster"], c["kind"], c["name"]) for c in diff["changes"]}, diff["changes"]
