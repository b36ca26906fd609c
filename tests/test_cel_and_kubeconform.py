"""The CEL rule loader reads the upstream CRDs; kubeconform, when installed, agrees with us."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.compile.manifest import Manifest
from generator.validate import cel, kubeconform
from tests.conftest import REPO, run


def test_rules_loaded_for_every_kueue_kind_we_emit(shared_crds: Path) -> None:
    rules = cel.load_crds(str(shared_crds), [], offline=True)
    assert rules is not None
    counts = {kind: len(rules[("kueue.x-k8s.io/v1beta2", kind)].rules)
              for kind in ("ClusterQueue", "ResourceFlavor", "Topology", "Cohort")}
    assert all(n > 0 for n in counts.values()), counts
    assert ("kueue.x-k8s.io/v1beta1", "ClusterQueue") in rules
    assert ("jobset.x-k8s.io/v1alpha2", "JobSet") in rules


def test_defaults_are_applied_before_rules(shared_crds: Path) -> None:
    """reclaimWithinCohort defaults to Never: borrowWithinCohort alone must then fail, as on the API server."""
    rules = cel.load_crds(str(shared_crds), [], offline=True)
    assert rules is not None
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
            "spec": {"cohortName": "c", "namespaceSelector": {}, "resourceGroups": [],
                     "preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}}}
    findings = cel.validate_cel([Manifest(("x",), body, ("teams/q.yaml", 3))], rules)
    assert [f.field for f in findings] == ["ClusterQueue q: spec.preemption"]


def test_crd_location_must_be_a_folder(tmp_path: Path) -> None:
    from generator.errors import UsageError

    with pytest.raises(UsageError, match="is not a folder"):
        cel.load_crds(str(tmp_path / "missing"), [], offline=True)


@pytest.mark.skipif(kubeconform.available() is None,
                    reason="kubeconform is not on PATH (no PyPI, Debian or npm package; the GitHub workflow installs it)")
def test_kubeconform_agrees(shared_schemas: Path, shared_crds: Path) -> None:
    result = run(REPO, "validate", "--offline", "--schema-location", str(shared_schemas),
                 "--crd-location", str(shared_crds))
    assert result.code == 0, result.err
    assert "kubeconform not on PATH" not in result.err
