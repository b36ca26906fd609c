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


def test_a_team_holding_part_of_the_cpu_pool_names_what_the_others_lose(fleet_root: Path) -> None:
    """Issue 53: `policy.neverPreempted` makes a team hold its cpuPool limit as quota, taken out of what
    the root cohort lends every other team (its Cohort's nominalQuota in the CPU flavor falls). Before,
    the diff showed that Cohort field and no risk line: GPU pools get capacity rows, the CPU pool none."""
    edit(fleet_root, "teams/recsys.yaml", "fairSharingWeight: 1.5\n",
         "fairSharingWeight: 1.5\npolicy: {neverPreempted: true}\n")
    edit(fleet_root, "teams/recsys.yaml", "    l4: {gpus: 0}\n", "")  # a never-preempted team has no shared pool
    found = risks_between(REPO, fleet_root)
    assert found["cpu-pool-held"] == [
        "medium: prod-west: team recsys now holds 124 CPUs and 480Gi of cpuPool cpu (policy.neverPreempted): "
        "the other teams can borrow 124 CPUs and 480Gi less of it while recsys uses it (the root cohort "
        "prod-west lends 248 → 124 CPUs, 960Gi → 480Gi), and their work borrowing it may be preempted when recsys "
        "takes it back (reclaimWithinCohort LowerPriority)"], found
    edit(fleet_root, "teams/recsys.yaml", "policy: {neverPreempted: true}\n", "")
    assert "cpu-pool-held" not in risks_between(REPO, fleet_root)  # only the l4 queue goes


def test_each_admission_policy_is_said_for_what_it_decides(fleet_root: Path) -> None:
    """Issue 53's policies (a team's maximum execution time, the reclaim deadline) changed by a team file
    each get a line saying what they decide. Before, every ValidatingAdmissionPolicy read "(allowed
    priority classes)" and every MutatingAdmissionPolicy "now gives the priority class of workloads
    created without one", so a team's max-exec policy was announced as a default-priority change."""
    edit(fleet_root, "teams/speech.yaml", "quotas:\n",
         "maxExecutionTime: 72h\npolicy: {maxTerminationGracePeriodSeconds: 60}\nquotas:\n")
    found = risks_between(REPO, fleet_root)
    assert "default-priority-changed" not in found, found
    assert sorted(found["admission-policy-changed"]) == [
        "medium: dev: MutatingAdmissionPolicy fleetgen-max-exec-speech now decides how long the team's batch jobs "
        "may run once admitted",
        "medium: dev: ValidatingAdmissionPolicy fleetgen-max-exec-speech now decides how long the team's batch jobs "
        "may run once admitted",
        "medium: dev: ValidatingAdmissionPolicy fleetgen-reclaim-deadline changes how it decides how long pods in "
        "team namespaces may take to stop, and so how long a reclaim takes"], found
