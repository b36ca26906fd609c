"""Every class of config error: exit 2, a message naming file:line and field, rendered/ untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import edit, run, snapshot

# (file, text to replace, replacement, expected "file:line", expected message fragments)
CASES = [
    ("teams/ml-research.yaml", "borrowingLimit: 32,", "borrowingLimit: 32, burrowingLimit: 3,",
     "teams/ml-research.yaml:12", ["quotas.prod-east.h100.burrowingLimit", "unknown key 'burrowingLimit'",
                                   "did you mean 'borrowingLimit'"]),
    ("teams/ml-research.yaml", "gpus: 64,", 'gpus: "64",',
     "teams/ml-research.yaml:12", ["quotas.prod-east.h100.gpus", "expected a whole number", "without quotes"]),
    ("teams/ml-research.yaml", "name: ml-research", "name: ML_Research",
     "teams/ml-research.yaml:3", ["name: must be a DNS-1123 label", "'ML_Research'"]),
    ("teams/ml-research.yaml", "name: ml-research", "name: ml-research-2",
     "teams/ml-research.yaml:3", ["does not match the file name", "rename the file"]),
    ("teams/ml-research.yaml", "  dev:\n    l4: {gpus: 4}",
     "  dev:\n    l4: {gpus: 4}\n  nowhere:\n    h100: {gpus: 1}",
     "teams/ml-research.yaml:17", ["quotas.nowhere", "unknown cluster 'nowhere'", "dev, hub, prod-east, prod-west"]),
    ("teams/ml-research.yaml", "l4: {gpus: 4}", "t4: {gpus: 4}",
     "teams/ml-research.yaml:16", ["quotas.dev.t4", "cluster 'dev' has no node pool 't4'", "use one of: l4"]),
    ("teams/ml-research.yaml", "defaultPriority: standard", "defaultPriority: urgent",
     "teams/ml-research.yaml:8", ["defaultPriority", "priority 'urgent' is not defined"]),
    ("teams/vision.yaml", "namespaces: [vision, vision-eval]", "namespaces: [vision, ml-research]",
     "teams/vision.yaml:6", ["namespaces[1]", "namespace 'ml-research' already belongs to team 'ml-research'"]),
    ("teams/vision.yaml", "namespaces: [vision, vision-eval]", "namespaces: [vision, vision]",
     "teams/vision.yaml:6", ["namespaces[1]", "listed twice"]),
    ("teams/ml-research.yaml", "namespaces: [ml-research]", "namespaces: [kube-system]",
     "teams/ml-research.yaml:6", ["namespace 'kube-system' is reserved"]),
    ("clusters/prod-east.yaml", "{name: preemptible, value: 10,", "{name: standard, value: 10,",
     "clusters/prod-east.yaml:25", ["priorities[2].name", "'standard' is defined 2 times"]),
    ("teams/ml-research.yaml", "gpus: 64,", "gpus: -1,",
     "teams/ml-research.yaml:12", ["quotas.prod-east.h100.gpus", "greater than or equal to 0"]),
    ("teams/ml-research.yaml", "lendingLimit: 16", "lendingLimit: 99",
     "teams/ml-research.yaml:12", ["lendingLimit (99) is more than gpus (64)"]),
    ("teams/ml-research.yaml", "gpus: 64,", "gpus: 100,",
     "clusters/prod-east.yaml:16", ["pool 'h100' has 256 GPUs x overcommit 1 = 256, but teams hold 260",
                                    "llm-pretrain 128, ml-research 100, vision 32, platform-ci 0",
                                    "lower team quotas by 4 GPUs"]),
    ("clusters/prod-east.yaml", "overcommit: 1.0", "overcomit: 1.0",
     "clusters/prod-east.yaml:12", ["unknown key 'overcomit'", "did you mean 'overcommit'"]),
    ("clusters/prod-east.yaml", 'cpuPerNode: "192"', 'cpuPerNode: "192 cores"',
     "clusters/prod-east.yaml:17", ["nodePools[0].cpuPerNode", "not a Kubernetes quantity"]),
    ("clusters/prod-east.yaml", 'kubernetesVersion: "1.36"', 'kubernetesVersion: "1.19"',
     "clusters/prod-east.yaml:4", ["Kubernetes 1.19 is older than 1.30", "upgrade the cluster"]),
    # before: eight "no schema found for admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy" findings,
    # each telling the user to pass --schema-location
    ("clusters/prod-east.yaml", 'kubernetesVersion: "1.36"', 'kubernetesVersion: "1.29"',
     "clusters/prod-east.yaml:4", ["Kubernetes 1.29 is older than 1.30", "ValidatingAdmissionPolicies"]),
    ("clusters/prod-east.yaml", 'kubernetesVersion: "1.36"', "kubernetesVersion: 1.36",
     "clusters/prod-east.yaml:4", ["expected text, got float", 'quote the value: "1.36"']),
    ("clusters/prod-east.yaml", "version: v0.19.2", "version: v0.12.0",
     "clusters/prod-east.yaml:6", ["older than v0.14"]),
    ("clusters/prod-east.yaml", "reclaimWithinCohort: Any", "reclaimWithinCohort: Sometimes",
     "clusters/prod-east.yaml:9", ["must be one of", "'Never'", "'Sometimes'"]),
    ("clusters/prod-east.yaml", "    nodeLabels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}\n", "",
     "clusters/prod-east.yaml:14", ["topologyLevels needs at least one nodeLabel"]),
    ("clusters/prod-east.yaml", "parent: research,", "parent: reserch,",
     "clusters/prod-east.yaml:28", ["parent cohort 'reserch' is not defined"]),
    ("teams/ml-research.yaml", 'owners: ["@acme/ml-research-leads"]', 'owners: ["ml research leads"]',
     "teams/ml-research.yaml:4", ["owners[0]", "GitHub owner"]),
    ("teams/ml-research.yaml", "quotas:", "quotas: [1]\nx:",
     "teams/ml-research.yaml:10", ["quotas", "expected a mapping"]),
    ("teams/ml-research.yaml", "cohort: research", "cohort: research\ncohort: vision",
     "teams/ml-research.yaml:8", ["duplicate key 'cohort' (first defined on line 7)"]),
    ("teams/ml-research.yaml", "owners: [", "owners: [[",
     "teams/ml-research.yaml:5", ["invalid YAML"]),
    ("teams/speech.yaml", "name: speech", "name: default",
     "teams/speech.yaml:3", ["does not match the file name"]),
    # Issue 16: Kueue ignores borrowWithinCohort once fair sharing is on (weights are set here).
    ("clusters/prod-east.yaml", "    reclaimWithinCohort: Any\n",
     "    reclaimWithinCohort: Any\n    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}\n",
     "clusters/prod-east.yaml:10", ["kueue.preemption.borrowWithinCohort", "Kueue ignores borrowWithinCohort",
                                    "preemption.go:155-160", "kueue.fairSharing: true"]),
    # ... and weights do nothing with fair sharing off.
    ("clusters/prod-east.yaml", "  queueingStrategy: BestEffortFIFO\n",
     "  queueingStrategy: BestEffortFIFO\n  fairSharing: false\n",
     "clusters/prod-east.yaml:29", ["cohorts[1].fairSharingWeight", "kueue.fairSharing: false"]),
]



@pytest.mark.parametrize("rel,old,new,where,fragments", CASES, ids=[f"{c[0]}:{c[2][:30]}" for c in CASES])
def test_config_error_is_located_and_nothing_is_written(fleet_root: Path, rel: str, old: str, new: str,
                                                         where: str, fragments: list[str]) -> None:
    before = snapshot(fleet_root / "rendered")
    edit(fleet_root, rel, old, new)
    result = run(fleet_root, "render")
    assert result.code == 2, result.out + result.err
    assert f"{where}:" in result.err, result.err
    for fragment in fragments:
        assert fragment in result.err, result.err
    assert "fix:" in result.err
    assert "Traceback" not in result.err
    assert "nothing was written" in result.err
    assert snapshot(fleet_root / "rendered") == before


def test_team_named_default_is_reserved(fleet_root: Path) -> None:
    (fleet_root / "teams/speech.yaml").rename(fleet_root / "teams/default.yaml")
    edit(fleet_root, "teams/default.yaml", "name: speech", "name: default\nnamespaces: [speech]")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "teams/default.yaml:3: name: team name 'default' is reserved" in result.err


def test_all_problems_of_all_files_reported_together(fleet_root: Path) -> None:
    edit(fleet_root, "teams/ml-research.yaml", "gpus: 64,", "gpus: sixty-four,")
    edit(fleet_root, "teams/vision.yaml", "fairSharingWeight: 2", "fairSharingWeigth: 2")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "teams/ml-research.yaml:12" in result.err and "teams/vision.yaml:9" in result.err
    assert "2 problems found" in result.err


def test_yml_extension_is_not_silently_ignored(fleet_root: Path) -> None:
    (fleet_root / "teams/speech.yaml").rename(fleet_root / "teams/speech.yml")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "teams/speech.yml: fleetgen reads only files ending in .yaml" in result.err


def test_missing_clusters_folder_is_a_usage_error(tmp_path: Path) -> None:
    result = run(tmp_path, "render")
    assert result.code == 2
    assert "no clusters/ folder" in result.err
