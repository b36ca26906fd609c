"""The real kubeconform (built at the pinned version) in strict mode on every rendered tree, and
as `fleetgen validate` runs it: offline, findings mapped back to the config line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from generator.compile.manifest import is_object_file
from generator.validate.kubeconform import kubeconform_args
from tests.conftest import REPO, edit, run
from tests.rendered import CLUSTERS, kubernetes_version
from tests.upstream.kubeconform import kubeconform, operator_schemas

TREES = [*CLUSTERS, "gitops"]


def k8s_files(folder: Path) -> list[Path]:
    return [p for p in sorted(folder.rglob("*.yaml")) if is_object_file(p.name)]


@pytest.mark.parametrize("tree", TREES)
def test_every_rendered_tree_is_valid_for_kubeconform_strict(tree: str, kubeconform_on_path: Path,
                                                            shared_schemas: Path, tmp_path: Path) -> None:
    folder = REPO / "rendered" / tree
    found = kubeconform(kubeconform_on_path, folder, kubernetes_version(tree), shared_schemas,
                        operator_schemas(tmp_path / "operators"))
    summary = json.loads(found.pop()["summary"])
    assert found == [], found  # -output json lists only what is not valid
    expected = len(k8s_files(folder))
    assert summary == {"valid": expected, "invalid": 0, "errors": 0, "skipped": 0}, summary


def test_kubeconform_strict_refuses_an_unknown_field_in_a_built_in_and_a_custom_kind(
        tmp_path: Path, kubeconform_on_path: Path, shared_schemas: Path) -> None:
    """The tree check above can fail: both schema locations are found and read strictly."""
    folder = tmp_path / "tree"
    shutil.copytree(REPO / "rendered" / "prod-west", folder)
    for pattern in ("**/clusterqueue-*.yaml", "**/rolebinding-*.yaml"):
        path = sorted(folder.glob(pattern))[0]
        obj = yaml.safe_load(path.read_text())
        obj.setdefault("spec" if obj["kind"] == "ClusterQueue" else "roleRef", {})["bogus"] = 1
        path.write_text(yaml.safe_dump(obj))
    found = kubeconform(kubeconform_on_path, folder, kubernetes_version("prod-west"), shared_schemas)
    summary = json.loads(found.pop()["summary"])
    assert summary["invalid"] == 2 and summary["errors"] == 0, found
    assert sorted(r["kind"] for r in found) == ["ClusterQueue", "RoleBinding"]
    assert all("bogus" in r["msg"] for r in found)


def test_validate_runs_kubeconform_offline_and_maps_findings_to_config_lines(
        fleet_root: Path, shared_schemas: Path, shared_crds: Path, kubeconform_on_path: Path) -> None:
    args = ["validate", "--offline", "--schema-location", str(shared_schemas), "--crd-location", str(shared_crds)]
    clean = run(fleet_root, *args)
    assert clean.code == 0 and "kubeconform not on PATH" not in clean.err, clean.err
    edit(fleet_root, "clusters/prod-west.yaml", "{name: standard, value: 100}",
         f"{{name: standard, value: 100, description: {'d' * 2049}}}")
    result = run(fleet_root, *args)
    assert result.code == 1
    line = next(i for i, text in enumerate((fleet_root / "clusters/prod-west.yaml").read_text().splitlines(), 1)
                if "name: standard" in text)
    mine = [x for x in result.err.splitlines() if x.endswith("[kubeconform]")]
    assert mine and all(x.startswith(f"clusters/prod-west.yaml:{line}: WorkloadPriorityClass standard:") for x in mine)
    quiet = run(fleet_root, *args, "--no-kubeconform")
    assert quiet.code == 1 and "[kubeconform]" not in quiet.err


def test_validate_without_a_schema_location_checks_built_in_kinds_only(
        fleet_root: Path, shared_crds: Path, kubeconform_on_path: Path, tmp_path: Path) -> None:
    """Offline with no custom-resource schemas, kubeconform stays quiet about custom kinds and still
    judges every built-in one."""
    result = run(fleet_root, "validate", "--offline", "--crd-location", str(shared_crds))
    assert "[kubeconform]" not in result.err, result.err  # no "could not find schema" for ClusterQueues
    folder = tmp_path / "tree"
    shutil.copytree(REPO / "rendered" / "prod-west", folder)
    path = sorted(folder.glob("**/rolebinding-*.yaml"))[0]
    obj = yaml.safe_load(path.read_text())
    obj["roleRef"]["bogus"] = 1
    path.write_text(yaml.safe_dump(obj))
    args = kubeconform_args(str(kubeconform_on_path), kubernetes_version("prod-west"), None)
    proc = subprocess.run([*args, "-summary", str(folder)], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(proc.stdout)
    assert [r["kind"] for r in report["resources"] if r["status"] == "statusInvalid"] == ["RoleBinding"]
    assert report["summary"]["skipped"] > 0  # the Kueue objects, for want of a schema


def test_kubeconform_falls_back_to_the_crd_schemas_as_validate_does(
        fleet_root: Path, shared_schemas: Path, shared_crds: Path, kubeconform_on_path: Path, tmp_path: Path) -> None:
    """A schema location without the Kueue kinds: kubeconform reads the CRDs' own schemas, strictly."""
    without_kueue = tmp_path / "schemas"
    shutil.copytree(shared_schemas, without_kueue, ignore=shutil.ignore_patterns("kueue.x-k8s.io"))
    args = ["validate", "--offline", "--schema-location", str(without_kueue), "--crd-location", str(shared_crds)]
    clean = run(fleet_root, *args)
    assert clean.code == 0, clean.err
    edit(fleet_root, "clusters/prod-west.yaml", "{name: standard, value: 100}",
         f"{{name: standard, value: 100, description: {'d' * 2049}}}")
    result = run(fleet_root, *args)
    assert result.code == 1
    assert any("WorkloadPriorityClass standard:" in x and x.endswith("[kubeconform]") for x in result.err.splitlines())
