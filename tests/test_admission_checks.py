"""Issue 16: AdmissionChecks, Kueue's ProvisioningRequest check among them, declared per cluster.

The real Kueue holding, admitting and deactivating jobs by the rendered check is in
tests/test_e2e_fleet.py (`test_an_admission_check_asks_the_autoscaler_before_kueue_admits`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import edit, run

CHECKS = """admissionChecks:
  - name: l40s-capacity
    pools: [l40s]
    provisioningRequest:
      className: check-capacity.autoscaling.x-k8s.io
      parameters: {ValidUntilSeconds: "3600"}
      retry: {limit: 0, backoffBaseSeconds: 30}
  - name: budget
    teams: [recsys]
    controllerName: acme.example/budget-approval
"""


def _render_with(root: Path, cluster: str, checks: str) -> Any:
    """Render the fleet with `checks` (YAML text) appended to the cluster's file."""
    path = root / f"clusters/{cluster}.yaml"
    path.write_text(path.read_text() + checks)
    return run(root, "render")


def _doc(root: Path, cluster: str, rel: str) -> dict[str, Any]:
    return dict(yaml.safe_load((root / "rendered" / cluster / rel).read_text()))


def _strategy(root: Path, cluster: str, team: str, queue: str | None = None) -> Any:
    spec = _doc(root, cluster, f"teams/{team}/clusterqueue-{queue or team}.yaml")["spec"]
    return spec.get("admissionChecksStrategy")


def test_checks_render_on_exactly_the_pools_and_teams_they_name(fleet_root: Path) -> None:
    result = _render_with(fleet_root, "prod-west", CHECKS)
    assert result.code == 0, result.err
    assert _doc(fleet_root, "prod-west", "kueue/admissioncheck-l40s-capacity.yaml")["spec"] == {
        "controllerName": "kueue.x-k8s.io/provisioning-request",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "l40s-capacity"}}
    assert _doc(fleet_root, "prod-west", "kueue/provisioningrequestconfig-l40s-capacity.yaml")["spec"] == {
        "provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "parameters": {"ValidUntilSeconds": "3600"},
        "managedResources": ["nvidia.com/gpu"],
        "retryStrategy": {"backoffLimitCount": 0, "backoffBaseSeconds": 30, "backoffMaxSeconds": 1800}}
    assert _doc(fleet_root, "prod-west", "kueue/admissioncheck-budget.yaml")["spec"] == {
        "controllerName": "acme.example/budget-approval"}
    # inference (A100 and L40S): the provisioning check on L40S only; recsys (A100 only): the budget
    # check on every pool, no provisioning check; vision (L40S only): the provisioning check.
    assert _strategy(fleet_root, "prod-west", "inference") == {
        "admissionChecks": [{"name": "l40s-capacity", "onFlavors": ["l40s"]}]}
    # On the GPU pools only: CPU-only work, on the CPU pool's flavor, never waits for a check.
    assert _strategy(fleet_root, "prod-west", "recsys") == {
        "admissionChecks": [{"name": "budget", "onFlavors": ["a100"]}]}
    assert _strategy(fleet_root, "prod-west", "vision") == {
        "admissionChecks": [{"name": "l40s-capacity", "onFlavors": ["l40s"]}]}
    assert _strategy(fleet_root, "prod-east", "vision") is None  # another cluster
    explained = run(fleet_root, "explain", "team", "inference")
    assert "in prod-west: jobs on l40s wait for admission check l40s-capacity (the cluster autoscaler admits the " \
           "job once its pods fit on the nodes that exist" in explained.out, explained.out
    assert "budget" not in explained.out


@pytest.mark.parametrize("release", ["v0.14.8", "v0.15.2"])
def test_v1beta1_checks_match_that_releases_crds(fleet_root: Path, release: str, upstream_tools: None) -> None:
    """dev's Kueue speaks v1beta1: the AdmissionCheck, ProvisioningRequestConfig and queue it gets
    are checked against the CRDs of the release, from its Go module (v1beta2 on v0.19.2 runs in
    the end-to-end test)."""
    import jsonschema_rs

    from tests.upstream import tools

    edit(fleet_root, "clusters/dev.yaml", "  version: v0.15.2", f"  version: {release}")
    text = (fleet_root / "clusters/dev.yaml").read_text()
    (fleet_root / "clusters/dev.yaml").write_text(text + CHECKS.replace("l40s", "l4").replace("recsys", "vision"))
    result = run(fleet_root, "render", "--cluster", "dev")
    assert result.code == 0, result.err
    crds = tools.chart("kueue", release).parent.parent / "config/components/crd/bases"
    documents = {"admissionchecks": _doc(fleet_root, "dev", "kueue/admissioncheck-l4-capacity.yaml"),
                 "provisioningrequestconfigs": _doc(fleet_root, "dev",
                                                    "kueue/provisioningrequestconfig-l4-capacity.yaml"),
                 "clusterqueues": _doc(fleet_root, "dev", "teams/vision/clusterqueue-vision.yaml")}
    assert documents["clusterqueues"]["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert documents["clusterqueues"]["spec"]["admissionChecksStrategy"]["admissionChecks"] == [
        {"name": "l4-capacity", "onFlavors": ["l4"]}, {"name": "budget", "onFlavors": ["l4"]}]  # not the CPU pool
    for plural, body in documents.items():
        crd = yaml.safe_load((crds / f"kueue.x-k8s.io_{plural}.yaml").read_text())
        version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta1")
        validator = jsonschema_rs.validator_for(version["schema"]["openAPIV3Schema"]["properties"]["spec"])
        assert not [e.message for e in validator.iter_errors(body["spec"])], plural
    # The check can fail: a retry strategy with a string count is refused by the same schema.
    crd = yaml.safe_load((crds / "kueue.x-k8s.io_provisioningrequestconfigs.yaml").read_text())
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta1")["schema"]["openAPIV3Schema"]
    wrong = {**documents["provisioningrequestconfigs"]["spec"], "retryStrategy": {"backoffLimitCount": "0"}}
    assert [e.message for e in jsonschema_rs.validator_for(schema["properties"]["spec"]).iter_errors(wrong)]


@pytest.mark.parametrize(("snippet", "message"), [
    ("  - {name: c, pools: [h100], controllerName: acme.example/c}\n",
     "admissionChecks[0].pools[0]: pool 'h100' is not a GPU pool of cluster 'prod-west'"),
    ("  - {name: c, teams: [speech], controllerName: acme.example/c}\n",
     "admissionChecks[0].teams[0]: team 'speech' has no queue in cluster 'prod-west'"),
    ("  - {name: c, pools: [l40s], teams: [recsys], controllerName: acme.example/c}\n",
     "admissionChecks[0].teams[0]: team 'recsys' has no quota in the check's pools (l40s)"),
    ("  - {name: c, controllerName: acme.example/c}\n  - {name: c, controllerName: acme.example/d}\n",
     "admissionChecks[1].name: 'c' is defined 2 times"),
    ("  - {name: c}\n", "set exactly one of provisioningRequest and controllerName"),
    ("  - {name: c, controllerName: kueue.x-k8s.io/provisioning-request}\n",
     "controllerName kueue.x-k8s.io/provisioning-request is Kueue's own: declare it with provisioningRequest"),
    ("  - {name: c, provisioningRequest: {className: Check_Capacity}}\n", "className"),
    ("  - {name: c, provisioningRequest: {className: a.b, retry: {backoffBaseSeconds: 600, backoffMaxSeconds: 60}}}\n",
     "backoffMaxSeconds (60) is less than backoffBaseSeconds (600)"),
    ('  - {name: c, provisioningRequest: {className: a.b, parameters: {k: "a\\nb"}}}\n',
     "must be printable ASCII: no control characters or line breaks"),
])
def test_a_wrong_check_is_an_error_at_its_line(fleet_root: Path, snippet: str, message: str) -> None:
    path = fleet_root / "clusters/prod-west.yaml"
    before = path.read_text()
    path.write_text(before + "admissionChecks:\n" + snippet)
    result = run(fleet_root, "render")
    assert result.code == 2, result.err
    assert message in result.err, result.err
    line = len(before.splitlines()) + 1 + snippet.count("\n")
    assert any(f"clusters/prod-west.yaml:{n}:" in result.err for n in range(len(before.splitlines()) + 1, line + 1)), \
        result.err
    assert "Traceback" not in result.err


def test_a_class_no_autoscaler_serves_is_warned_of(fleet_root: Path) -> None:
    result = _render_with(fleet_root, "prod-east", "admissionChecks:\n"
                          "  - {name: dws, provisioningRequest: {className: queued-provisioning.acme.example}}\n")
    assert result.code == 0, result.err
    assert "admissionChecks[0].provisioningRequest.className: no known autoscaler serves class " \
           "'queued-provisioning.acme.example': unless yours does, jobs needing the check keep their quota " \
           "reserved and are never admitted [warning]" in result.err, result.err
    assert "applies to no team queue" not in result.err


def test_a_check_no_team_queue_reaches_is_warned_of(fleet_root: Path) -> None:
    edit(fleet_root, "clusters/prod-west.yaml", "nodePools:\n", "nodePools:\n  - {name: spare, gpu: {product: "
         "NVIDIA-L4, perNode: 4}, nodes: 1, cpuPerNode: 16, memoryPerNode: 64Gi}\n")
    result = _render_with(fleet_root, "prod-west", "admissionChecks:\n"
                          "  - {name: lonely, pools: [spare], controllerName: acme.example/x}\n")
    assert result.code == 0, result.err
    assert "admissionChecks[0]: check 'lonely' applies to no team queue: no team has quota in its pools " \
           "[warning]" in result.err, result.err
    queues = list((fleet_root / "rendered/prod-west/teams").glob("*/clusterqueue-*.yaml"))
    assert queues and not any("admissionChecksStrategy" in q.read_text() for q in queues)


def test_check_changes_flavor_order_and_fungibility_are_risks_in_the_diff(repo: Path) -> None:
    path = repo / "clusters/prod-west.yaml"
    path.write_text(path.read_text() + CHECKS)
    edit(repo, "teams/inference.yaml", "quotas:\n", "flavorOrder: {prod-west: [l40s, a100]}\n"
         "flavorFungibility: {whenCanBorrow: TryNextFlavor}\nquotas:\n")
    result = run(repo, "diff", "--format", "json")
    assert result.code == 1, result.err
    risks = {(r["severity"], r["rule"], r["message"]) for r in json.loads(result.out)["risks"]}
    for expected in [
        ("medium", "admission-checks-changed", "prod-west: ClusterQueue inference now waits for admission check "
         "l40s-capacity before admitting jobs on l40s"),
        ("medium", "admission-checks-changed", "prod-west: ClusterQueue recsys now waits for admission check budget "
         "before admitting jobs on a100"),  # its GPU pools: never on the CPU pool's flavor
        ("low", "flavor-order-changed", "prod-west: ClusterQueue inference tries its pools in another order "
         "(cpu, a100, l40s → cpu, l40s, a100): new jobs may land on other GPUs"),
        ("low", "flavor-fungibility-changed", "prod-west: ClusterQueue inference flavorFungibility Kueue's defaults → "
         "whenCanBorrow TryNextFlavor, whenCanPreempt TryNextFlavor: whether a job borrows or preempts in one pool "
         "or moves on to the next changes"),
    ]:
        assert expected in risks, sorted(risks)
    # A changed ProvisioningRequestConfig, once the checks are in the base.
    from tests.conftest import git

    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "checks")
    edit(repo, "clusters/prod-west.yaml", "limit: 0,", "limit: 2,")
    risks = {(r["severity"], r["rule"]) for r in json.loads(run(repo, "diff", "--format", "json").out)["risks"]}
    assert risks == {("medium", "admission-check-changed")}, risks
