"""Issue 31: pools shared by usage over time (Kueue's Admission Fair Sharing), opt-in per pool.

prod-west's l4 pool in the example fleet is shared by vision (weight 2), platform-ci and recsys;
tests/test_e2e_fleet.py runs it on the real Kueue. These check what is rendered, refused, explained
and said in the diff.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import edit, risks_between, run
from tests.rendered import kueue_config


def _doc(root: Path, *parts: str) -> dict[str, Any]:
    return dict(yaml.safe_load((root / "rendered" / "prod-west" / Path(*parts)).read_text()))


def _flavors(spec: dict[str, Any]) -> list[str]:
    return [f["name"] for group in spec.get("resourceGroups", []) for f in group["flavors"]]


def test_a_shared_pool_is_one_queue_ranked_by_usage_with_a_queue_per_team(fleet_root: Path) -> None:
    queue = _doc(fleet_root, "kueue", "clusterqueue-shared-l4.yaml")["spec"]
    assert queue["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    assert "cohortName" not in queue  # nothing to lend or borrow
    assert queue["namespaceSelector"]["matchExpressions"][0]["values"] == ["platform-ci", "recsys", "vision"]
    assert queue["preemption"] == {"reclaimWithinCohort": "Never", "withinClusterQueue": "LowerPriority"}
    flavor = queue["resourceGroups"][0]["flavors"][0]
    assert flavor["name"] == "l4"
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]} == \
        {"cpu": "188", "memory": "720Gi", "nvidia.com/gpu": "16"}  # the whole pool: 2 nodes x 8 L4
    vision = _doc(fleet_root, "teams", "vision", "vision", "localqueue-vision-l4.yaml")
    assert vision["spec"] == {"clusterQueue": "shared-l4", "fairSharing": {"weight": "2"}}
    recsys = _doc(fleet_root, "teams", "recsys", "recsys", "localqueue-recsys-l4.yaml")
    assert recsys["spec"] == {"clusterQueue": "shared-l4"}  # Kueue's default weight, 1
    # Only the first namespace: Kueue keeps usage per LocalQueue.
    assert not (fleet_root / "rendered/prod-west/teams/vision/vision-eval/localqueue-vision-l4.yaml").exists()
    # The pool leaves the teams' own queues and the root cohort's unallocated GPUs.
    assert _flavors(_doc(fleet_root, "teams", "vision", "clusterqueue-vision.yaml")["spec"]) == ["cpu", "l40s"]
    root = _doc(fleet_root, "kueue", "cohort-prod-west.yaml")["spec"]
    assert "l4" not in _flavors(root)
    afs = kueue_config(fleet_root, "prod-west")["admissionFairSharing"]
    assert afs == {"usageHalfLifeTime": "24h", "usageSamplingInterval": "5m",
                   "resourceWeights": {"cpu": 0, "memory": 0, "nvidia.com/gpu": 1}}
    assert "admissionFairSharing" not in kueue_config(fleet_root, "prod-east")


def test_a_profile_on_a_shared_pool_uses_the_teams_queue_there(fleet_root: Path) -> None:
    edit(fleet_root, "teams/recsys.yaml", "quotas:\n", "jobProfiles:\n"
         "  - {name: eval-l4, cluster: prod-west, pool: l4, nodes: 2, image: registry.example/eval:1, "
         "command: [python, eval.py]}\nquotas:\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    body = yaml.safe_load((fleet_root / "rendered/prod-west/templates/recsys/eval-l4.jobset.yaml").read_text())
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "recsys-l4"
    assert body["metadata"]["namespace"] == "recsys"
    edit(fleet_root, "teams/recsys.yaml", "nodes: 2, image: registry.example/eval:1",
         "nodes: 3, image: registry.example/eval:1")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "the job needs 24 GPUs but team 'recsys' can have at most 16 in prod-west/l4 (0 guaranteed + 16 " \
        "borrowable)" in result.err, result.err


def test_a_team_with_only_a_shared_pool_keeps_the_cpu_pool(fleet_root: Path) -> None:
    edit(fleet_root, "teams/recsys.yaml", "    a100: {gpus: 24, lendingLimit: 24}\n", "")
    assert run(fleet_root, "render").code == 0
    spec = _doc(fleet_root, "teams", "recsys", "clusterqueue-recsys.yaml")["spec"]
    assert spec["resourceGroups"] == [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "cpu", "resources": [
        {"name": "cpu", "nominalQuota": "0", "borrowingLimit": "124"},
        {"name": "memory", "nominalQuota": "0", "borrowingLimit": "480Gi"}]}]}]


@pytest.mark.parametrize(("path", "old", "new", "where", "message"), [
    ("teams/vision.yaml", "l4: {gpus: 0, usageWeight: 2}", "l4: {gpus: 4}",
     "teams/vision.yaml:15: quotas.prod-west.l4.gpus",
     "pool 'l4' of 'prod-west' is shared by usage (kueue.admissionFairSharing): no team holds, lends or borrows"),
    ("teams/vision.yaml", "l4: {gpus: 0, usageWeight: 2}", "l4: {gpus: 0, borrowingLimit: 8}",
     "teams/vision.yaml:15: quotas.prod-west.l4.borrowingLimit", "write l4: {gpus: 0}"),
    ("teams/vision.yaml", "l40s: {gpus: 8}\n    l4", "l40s: {gpus: 8, usageWeight: 3}\n    l4",
     "teams/vision.yaml:14: quotas.prod-west.l40s.usageWeight",
     "is not shared by usage, so the weight would do nothing"),
    ("clusters/prod-west.yaml", "pools: [l4]", "pools: [l4, h100]",
     "clusters/prod-west.yaml:11: kueue.admissionFairSharing.pools[1]", "cluster 'prod-west' has no GPU pool 'h100'"),
    ("clusters/prod-west.yaml", "pools: [l4], usageHalfLifeTime: 24h", "pools: [l4], usageHalfLifeTime: 0s",
     "clusters/prod-west.yaml:11: kueue.admissionFairSharing.usageHalfLifeTime", "'0s' is zero"),
    ("clusters/prod-west.yaml", "  version: v0.19.2\n", "  version: v0.14.8\n",
     "clusters/prod-west.yaml:11: kueue.admissionFairSharing", "only behind an alpha feature gate"),
    ("teams/recsys.yaml", "quotas:\n", "policy: {neverPreempted: true}\nquotas:\n",
     "teams/recsys.yaml:12: quotas.prod-west.l4", "policy.neverPreempted promises they never are"),
    ("teams/vision.yaml", "quotas:\n", "flavorOrder: {prod-west: [l4, l40s]}\nquotas:\n",
     "teams/vision.yaml:10: flavorOrder.prod-west", "the team's pools in 'prod-west' are l40s"),
])
def test_what_a_shared_pool_refuses_at_its_line(fleet_root: Path, path: str, old: str, new: str, where: str,
                                                message: str) -> None:
    edit(fleet_root, path, old, new)
    result = run(fleet_root, "render")
    assert result.code == 2, result.err
    assert where in result.err and message in result.err, result.err


def test_explain_says_the_cost_and_the_share(fleet_root: Path) -> None:
    team = run(fleet_root, "explain", "team", "recsys").out
    assert "prod-west  l4             0       16 (by usage)         0            0/16         0%" in team, team
    assert ("in prod-west: pool l4 is shared by usage (ClusterQueue shared-l4): no GPUs guaranteed there; jobs "
            "labelled kueue.x-k8s.io/queue-name: recsys-l4 in namespace recsys wait with those of platform-ci 1 "
            "(25%), vision 2 (50%); Kueue admits first the team whose GPU use (counted half after 24h) divided by "
            "its weight is least, before priority and age; its weight 1, so while all keep the pool busy it gets 25% "
            "of it over time; there a job may preempt any team's jobs of lower priority, those of the team that "
            "used most first") in team, team
    cluster = run(fleet_root, "explain", "cluster", "prod-west").out
    assert "pool l4 (NVIDIA-L4): 16 GPUs, shared by usage in ClusterQueue shared-l4: no guarantees" in cluster
    assert "vision            2              50%  vision-l4" in cluster, cluster


def test_the_diff_says_what_sharing_by_usage_costs(repo: Path, tmp_path: Path) -> None:
    """A pool turning shared takes every guarantee in it (high); a team joining or reweighting moves
    every other team's share (medium)."""
    base = tmp_path / "base"
    shutil.copytree(repo, base, ignore=shutil.ignore_patterns(".git"))
    shared = "  admissionFairSharing: {pools: [l4], usageHalfLifeTime: 24h}"
    edit(base, "clusters/prod-west.yaml", shared, "")
    quotas = {"platform-ci": ("l4: {gpus: 0}", "l4: {gpus: 4}"), "recsys": ("l4: {gpus: 0}", "l4: {gpus: 4}"),
              "vision": ("l4: {gpus: 0, usageWeight: 2}", "l4: {gpus: 8}")}
    for team, (now, was) in quotas.items():
        edit(base, f"teams/{team}.yaml", now, was)
    found = risks_between(base, repo)
    assert found["pool-shared-by-usage"] == ["high: prod-west: pool l4 becomes shared by usage: platform-ci 4, recsys "
                                             "4, vision 8 guaranteed GPUs go; no team holds any of it, and waiting "
                                             "jobs go first for the team that used least recently"], found
    assert any(r.startswith("high: prod-west: vision loses 8 guaranteed l4 GPUs") for r in found["quota-reduced"])
    edit(base, "clusters/prod-west.yaml", "   # one queue by recent use", f"{shared}   # one queue by recent use")
    for team, (_, was) in quotas.items():  # shared again, vision at weight 1 as before
        edit(base, f"teams/{team}.yaml", was, "l4: {gpus: 0}")
    found = risks_between(base, repo)
    assert found["usage-share-changed"] == ["medium: prod-west: pool l4, shared by usage: each team's share over "
                                            "time moves (platform-ci 33% → 25%, recsys 33% → 25%, vision 33% → "
                                            "50%)"], found


def test_a_v1beta1_kueue_gets_the_same_layout_and_its_crds_accept_it(fleet_root: Path, shared_schemas: Path,
                                                                    shared_crds: Path) -> None:
    """dev runs Kueue v0.15 (v1beta1 objects, Admission Fair Sharing beta and on by default there,
    kueue v0.15.2 pkg/features/kube_features.go:298-301): its pool shared by usage renders with the
    v1beta1 fields, and the CRDs' schemas and CEL rules accept them."""
    from tests.conftest import local_checks

    edit(fleet_root, "clusters/dev.yaml", "  version: v0.15.2\n",
         "  version: v0.15.2\n  admissionFairSharing: {pools: [l4], usageHalfLifeTime: 168h}\n")
    for team in ("ml-research", "platform-ci", "speech", "vision"):
        path = fleet_root / f"teams/{team}.yaml"
        text = path.read_text()
        start = text.index("  dev:\n    l4: {")
        end = text.index("}", start)
        path.write_text(text[:start] + "  dev:\n    l4: {gpus: 0" + text[end:])
    result = run(fleet_root, "render", *local_checks(shared_schemas, shared_crds))
    assert result.code == 0, result.err
    queue = yaml.safe_load((fleet_root / "rendered/dev/kueue/clusterqueue-shared-l4.yaml").read_text())
    assert queue["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert queue["spec"]["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    config = kueue_config(fleet_root, "dev")
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta1"
    assert config["admissionFairSharing"]["usageHalfLifeTime"] == "168h"


def test_an_outsized_usage_weight_is_a_high_risk(repo: Path, tmp_path: Path) -> None:
    """recsys raising its weight from 1 to 20 takes most of the pool from platform-ci and vision (its
    share 25% to 87%): a weight moved more than 4x, as for fair sharing; 1 to 2 is a change (medium)."""
    base = tmp_path / "base"
    shutil.copytree(repo, base, ignore=shutil.ignore_patterns(".git"))
    edit(repo, "teams/recsys.yaml", "l4: {gpus: 0}", "l4: {gpus: 0, usageWeight: 20}")
    assert risks_between(base, repo)["usage-share-changed"] == [
        "high: prod-west: pool l4, shared by usage: each team's share over time moves (platform-ci 25% → 4%, recsys "
        "25% → 87%, vision 50% → 9%); recsys's usageWeight moves more than 4x or is more than that times the "
        "others'"]
    edit(repo, "teams/recsys.yaml", "usageWeight: 20", "usageWeight: 2")
    assert risks_between(base, repo)["usage-share-changed"][0].startswith("medium: prod-west: pool l4")
