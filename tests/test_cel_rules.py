"""The CEL rule loader reads the upstream CRDs; CRD schemas convert as kubeconform's catalog does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from generator.compile.manifest import Manifest
from generator.validate import cel
from generator.validate.schemas import crd_json_schema
from tests.conftest import edit, run


def test_rules_loaded_for_every_kueue_kind_we_emit(shared_crds: Path) -> None:
    catalog = cel.load_crds(str(shared_crds), [], offline=True)
    assert catalog is not None
    rules = catalog.rules("v0.19.2")
    counts = {kind: len(rules[("kueue.x-k8s.io/v1beta2", kind)].rules)
              for kind in ("ClusterQueue", "ResourceFlavor", "Topology", "Cohort")}
    assert all(n > 0 for n in counts.values()), counts
    assert ("kueue.x-k8s.io/v1beta1", "ClusterQueue") in rules
    assert ("jobset.x-k8s.io/v1alpha2", "JobSet") in rules


def test_defaults_are_applied_before_rules(shared_crds: Path) -> None:
    """reclaimWithinCohort defaults to Never: borrowWithinCohort alone must then fail, as on the API server."""
    catalog = cel.load_crds(str(shared_crds), [], offline=True)
    assert catalog is not None
    rules = catalog.rules("v0.19.2")
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
            "spec": {"cohortName": "c", "namespaceSelector": {}, "resourceGroups": [],
                     "preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}}}
    findings = cel.validate_cel([Manifest(("x",), body, ("teams/q.yaml", 3))], rules)
    assert [f.field for f in findings] == ["ClusterQueue q: spec.preemption"]


def test_crd_location_must_be_a_folder(tmp_path: Path) -> None:
    from generator.errors import UsageError

    with pytest.raises(UsageError, match="is not a folder"):
        cel.load_crds(str(tmp_path / "missing"), [], offline=True)


def test_crd_schemas_convert_exactly_as_the_catalog_does(shared_crds: Path, shared_schemas: Path) -> None:
    """The fallback for kinds a schema location lacks gives the same schema kubeconform's catalog has."""
    converted = 0
    for path in sorted(shared_crds.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            kind = crd["spec"]["names"]["kind"].lower()
            ref = shared_schemas / crd["spec"]["group"] / f"{kind}_{version['name']}.json"
            assert crd_json_schema(version["schema"]["openAPIV3Schema"]) == json.loads(ref.read_text()), ref.name
            converted += 1
    assert converted >= 20


def test_validate_falls_back_to_crd_schemas(fleet_root: Path, shared_crds: Path, shared_schemas: Path,
                                            tmp_path: Path) -> None:
    """A schema location without Kueue schemas still validates Kueue objects strictly, from the CRDs."""
    without_kueue = tmp_path / "schemas"
    shutil.copytree(shared_schemas, without_kueue, ignore=shutil.ignore_patterns("kueue.x-k8s.io"))
    assert not (without_kueue / "kueue.x-k8s.io").exists()
    args = ["validate", "--offline", "--schema-location", str(without_kueue), "--crd-location", str(shared_crds)]
    result = run(fleet_root, *args)
    assert result.code == 0, result.err
    long = "d" * 2049
    edit(fleet_root, "clusters/prod-west.yaml", "{name: standard, value: 100}",
         f"{{name: standard, value: 100, description: {long}}}")
    result = run(fleet_root, *args)
    assert result.code == 1
    assert "WorkloadPriorityClass standard: description: " in result.err and "[schema]" in result.err
