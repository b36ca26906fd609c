"""Schema, CEL and Kueue-webhook checks fire on broken input, located, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from generator.compile import FAMILIES
from generator.compile.manifest import Manifest, is_object_file
from tests.conftest import edit, local_checks, run, snapshot


@pytest.fixture
def checks(shared_schemas: Path, shared_crds: Path) -> list[str]:
    return local_checks(shared_schemas, shared_crds)


def _render_fails(root: Path, checks: list[str], where: str, fragments: list[str]) -> str:
    before = snapshot(root / "rendered")
    result = run(root, "render", *checks)
    assert result.code == 2, result.out + result.err
    assert where in result.err, result.err
    for fragment in fragments:
        assert fragment in result.err, result.err
    assert snapshot(root / "rendered") == before
    return result.err


def test_custom_resource_schema_finding(fleet_root: Path, checks: list[str]) -> None:
    long = "x" * 2100
    edit(fleet_root, "clusters/prod-east.yaml", "description: Customer-facing training and serving",
          f"description: {long}")
    _render_fails(fleet_root, checks, "clusters/prod-east.yaml:23: WorkloadPriorityClass production: description:",
                  ["[schema]", "longer than 2048 characters"])


def test_resource_flavor_label_limit_is_a_schema_finding(fleet_root: Path, checks: list[str]) -> None:
    labels = ", ".join(f"example.com/l{i}: v" for i in range(9))
    edit(fleet_root, "clusters/prod-west.yaml", "nodeLabels: {nvidia.com/gpu.product: NVIDIA-L40S}",
          f"nodeLabels: {{{labels}}}")
    _render_fails(fleet_root, checks, "clusters/prod-west.yaml:26: ResourceFlavor l40s: spec.nodeLabels:",
                  ["[schema]", "[kueue-webhook]", "9 entries, at most 8 allowed"])


def test_builtin_schema_finding(fleet_root: Path, checks: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(cluster: Any, teams: Any) -> list[Manifest]:
        if not teams:
            return []
        team = teams[0]
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "extra", "labelz": {}}}
        return [Manifest(("teams", team.config.name, "extra"), body, team.at("namespaces"))]

    monkeypatch.setattr("generator.compile.FAMILIES", [*FAMILIES, broken])
    _render_fails(fleet_root, checks, "Namespace extra: metadata:",
                  ["[schema]", "'labelz' was unexpected", "teams/"])


def test_cel_rule_finding(fleet_root: Path, checks: list[str]) -> None:
    edit(fleet_root, "clusters/prod-east.yaml", "topologyLevels: [topology.kubernetes.io/zone,",
          "topologyLevels: [topology.kubernetes.io/zone, topology.kubernetes.io/zone,")
    _render_fails(fleet_root, checks, "clusters/prod-east.yaml:21: Topology h100: spec.levels: must be unique [cel]",
                  ["the CRD requires: size(self.filter("])


def test_cel_preemption_rule(fleet_root: Path, checks: list[str]) -> None:
    # borrowWithinCohort with reclaimWithinCohort: Never, which Kueue's CEL refuses (fair sharing,
    # which would make fleetgen refuse borrowWithinCohort first, explicitly accepted).
    edit(fleet_root, "clusters/prod-east.yaml", "    reclaimWithinCohort: Any\n",
         "    reclaimWithinCohort: Never\n    borrowWithinCohort: {policy: LowerPriority}\n")
    edit(fleet_root, "clusters/prod-east.yaml", "    withinClusterQueue: LowerPriority\n",
         "    withinClusterQueue: LowerPriority\n  fairSharing: true\n")
    err = _render_fails(fleet_root, checks, "clusters/prod-east.yaml:8: ClusterQueue ml-research: spec.preemption:",
                        ["[cel]"])
    assert "reclaimWithinCohort" in err


HOSTNAME_FIRST = ("topologyLevels: [topology.kubernetes.io/zone, cloud.provider.com/topology-block, "
                  "kubernetes.io/hostname]",
                  "topologyLevels: [kubernetes.io/hostname, topology.kubernetes.io/zone, "
                  "cloud.provider.com/topology-block]")


def test_kueue_webhook_finding(fleet_root: Path, checks: list[str]) -> None:
    # (A tiny fairSharingWeight, the old trigger here, is now refused by the team model itself.)
    edit(fleet_root, "clusters/prod-east.yaml", *HOSTNAME_FIRST)
    _render_fails(fleet_root, checks, "clusters/prod-east.yaml:21: Topology h100: spec.levels: kubernetes.io/hostname "
                  "may only be the last level [kueue-webhook]", ["fix: move kubernetes.io/hostname to the end"])


def test_render_without_local_locations_notes_what_it_skipped(fleet_root: Path) -> None:
    result = run(fleet_root, "render", "--check")
    assert result.code == 0, result.err
    assert "custom-resource schemas not checked" in result.err
    assert "Kueue CEL rules not checked" in result.err


def test_validate_runs_every_check_offline(fleet_root: Path, checks: list[str]) -> None:
    result = run(fleet_root, "validate", "--offline", *checks)
    assert result.code == 0, result.err
    objects = [p for p in (fleet_root / "rendered").rglob("*.yaml") if is_object_file(p.name)]
    assert f"valid: {len(objects)} objects in 4 clusters" in result.out
    # ../shared's catalog has no KubeRay or LeaderWorkerSet schema: their templates are said unchecked, not refused
    assert "prod-east: job templates not checked against a schema, none at hand for leaderworkerset.x-k8s.io/v1 " \
        "LeaderWorkerSet, ray.io/v1 RayCluster, ray.io/v1 RayJob" in result.err


def test_validate_reports_findings_with_exit_1(fleet_root: Path, checks: list[str]) -> None:
    edit(fleet_root, "clusters/prod-east.yaml", "kubernetes.io/hostname]", "kubernetes.io/hostname, example.com/rack]")
    result = run(fleet_root, "validate", "--offline", *checks)
    assert result.code == 1, result.err
    assert "kubernetes.io/hostname label can only be used at the lowest level" in result.err


def test_offline_validate_never_hands_kubeconform_a_remote_location(fleet_root: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`--offline` means no network, kubeconform included: given the https location it fetched from
    it (a dead host cost this suite 113 s of DNS timeouts). A kubeconform stand-in records its
    arguments; the custom-resource schemas it may read are all local."""
    import json
    import os

    calls = tmp_path / "calls.jsonl"
    fake = tmp_path / "bin" / "kubeconform"
    fake.parent.mkdir()
    fake.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                    f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                    "print('{\"resources\": []}')\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    no_crds = tmp_path / "crds"
    no_crds.mkdir()
    run(fleet_root, "validate", "--offline", "--schema-location", "https://example.invalid/{group}/{kind}.json",
        "--crd-location", str(no_crds))
    argvs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert argvs and all("example.invalid" not in arg for argv in argvs for arg in argv), argvs


def test_validate_offline_without_schemas_reports_missing_schema(fleet_root: Path, tmp_path: Path) -> None:
    no_crds = tmp_path / "crds"
    no_crds.mkdir()
    result = run(fleet_root, "validate", "--offline", "--schema-location", "https://example.invalid/{group}/{kind}.json",
                 "--crd-location", str(no_crds))
    assert result.code == 1
    assert "no schema found for kueue.x-k8s.io/v1beta2 ClusterQueue" in result.err
