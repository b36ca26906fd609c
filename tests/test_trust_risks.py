"""Issue 28: a risk line for every change a team file makes to other teams' scheduling.

Each case is a team-file change whose effect lies outside the team's own folder: a first weight
turning Kueue's fair sharing on for the cluster, joining an undeclared cohort, a weight out of
proportion to the cluster's others. Before the fix none of them had a risk line.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.conftest import REPO, edit, risks_between


def _without_weights(root: Path) -> None:
    for path in [*root.glob("teams/*.yaml"), *root.glob("clusters/*.yaml")]:
        path.write_text(re.sub(r"(, )?fairSharingWeight: [0-9.]+\n?", lambda m: "" if m.group(1) else "",
                               path.read_text()))


def test_a_teams_first_weight_turning_fair_sharing_on_is_high(fleet_root: Path, tmp_path: Path) -> None:
    _without_weights(fleet_root)
    base = tmp_path / "base"
    shutil.copytree(fleet_root, base)
    edit(fleet_root, "teams/speech.yaml", "defaultPriority: standard",
         "defaultPriority: standard\nfairSharingWeight: 2")
    found = risks_between(base, fleet_root)["fair-sharing-switched"]
    assert found == ["high: dev: team speech sets a fairSharingWeight, so Kueue's fair sharing turns on: borrowing "
                     "and preemption between every team follow weights and usage instead of borrowWithinCohort "
                     "(set kueue.fairSharing in the cluster file to decide this for the whole cluster)"]


def test_joining_an_undeclared_cohort_names_the_teams_it_touches(fleet_root: Path) -> None:
    edit(fleet_root, "teams/speech.yaml", "defaultPriority: standard", "defaultPriority: standard\ncohort: research")
    found = risks_between(REPO, fleet_root)["implicit-cohort-changed"]
    assert found == ["medium: dev: undeclared cohort 'research': speech joins; ml-research now lend and borrow idle "
                     "GPUs with ml-research, speech, and the cohort no longer carries ml-research's weight 1 (Kueue "
                     "weighs a cohort with one member by that member's weight) (declare the cohort in the cluster "
                     "file to own who joins it)"]


def test_a_new_team_with_an_outsized_weight_is_high(fleet_root: Path) -> None:
    (fleet_root / "teams/solo.yaml").write_text(
        'name: solo\nowners: ["@acme/solo"]\ncohort: solo-only\nfairSharingWeight: 1000000\n'
        "quotas:\n  dev:\n    l4: {gpus: 1}\n")
    found = risks_between(REPO, fleet_root)["fair-sharing-weight-outsized"]
    assert found and found[0].startswith("high: dev: team solo fair-sharing weight new, 1000000 (100% of the cluster's "
                                         "total weight): more than 4x the largest other weight (2)"), found


def test_a_weight_climbing_within_4x_is_still_a_risk_line(fleet_root: Path) -> None:
    edit(fleet_root, "teams/recsys.yaml", "fairSharingWeight: 1.5", "fairSharingWeight: 5")
    found = risks_between(REPO, fleet_root)
    assert found["fair-sharing-weight-changed"] == [
        "medium: prod-west: team recsys fair-sharing weight 1.5 → 5 (53% of the cluster's total weight): every "
        "other team's share of idle GPUs moves"]
    edit(fleet_root, "teams/recsys.yaml", "fairSharingWeight: 5", "fairSharingWeight: 9")
    found = risks_between(REPO, fleet_root)
    assert "fair-sharing-weight-changed" not in found  # a jump is high already, once
    assert any("more than 4x the largest other weight (2)" in r for r in found["fair-sharing-weight-outsized"])
