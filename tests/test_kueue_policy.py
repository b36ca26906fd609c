"""Issue 16: Kueue policy whose meaning matches what Kueue does (fair sharing and what it ignores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import edit, run


def _kueue_config(root: Path, cluster: str) -> dict[str, Any]:
    platform = root / "rendered" / cluster / "platform"
    app = platform / f"application-{cluster}-kueue.yaml"
    doc = yaml.safe_load((app if app.exists() else platform / "helmrelease-kueue.yaml").read_text())
    values = doc["spec"]["source"]["helm"]["valuesObject"] if doc["kind"] == "Application" else doc["spec"]["values"]
    return dict(yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"]))


def test_fair_sharing_accepted_explicitly_keeps_borrow_within_cohort(fleet_root: Path) -> None:
    """`kueue.fairSharing: true` says the cluster accepts fair sharing's preemption: borrowWithinCohort
    is then rendered (Kueue ignores it) instead of refused."""
    edit(fleet_root, "clusters/prod-east.yaml", "  queueingStrategy: BestEffortFIFO\n",
         "  queueingStrategy: BestEffortFIFO\n  fairSharing: true\n")
    edit(fleet_root, "clusters/prod-east.yaml", "    reclaimWithinCohort: Any\n",
         "    reclaimWithinCohort: Any\n    borrowWithinCohort: {policy: LowerPriority}\n")
    assert run(fleet_root, "render").code == 0
    cq = yaml.safe_load((fleet_root / "rendered/prod-east/teams/vision/clusterqueue-vision.yaml").read_text())
    assert cq["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority"}
    assert "fairSharing" in _kueue_config(fleet_root, "prod-east")

