"""Issue 16: inputs Kueue accepts but reads otherwise than they seem, said as warnings with
file:line (a render still succeeds), or translated so Kueue does what the file says."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.conftest import edit, run


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


def _cohort(root: Path, cluster: str, name: str) -> dict[str, object]:
    return dict(yaml.safe_load((root / "rendered" / cluster / "kueue" / f"cohort-{name}.yaml").read_text())["spec"])


def test_the_example_fleet_warns_of_devs_overcommit_and_prod_wests_lent_guarantees(fleet_root: Path) -> None:
    """Both deliberate: dev overcommits its L4, and prod-west's `reclaimWithinCohort: LowerPriority`
    lets borrowers of a lender's priority keep what it lends (issue 31)."""
    result = run(fleet_root, "render", "--check")
    assert result.code == 0
    warnings = _warnings(result.err)
    assert warnings[0] == (
        "warning: clusters/dev.yaml:7: overcommit: pool 'l4' has 8 GPUs but teams are guaranteed 14 (overcommit 2): "
        "Kueue admits up to 14 GPUs of jobs there; pods beyond 8 GPUs stay Pending, and after waitForPodsReady's "
        "10m the job is evicted and requeued, again and again while the pool is full [warning]")
    assert len(warnings) == 2 and warnings[1].startswith(
        "warning: clusters/prod-west.yaml:9: kueue.preemption.reclaimWithinCohort: in prod-west guaranteed GPUs are "
        "not guaranteed once lent"), warnings
    # Only the clusters asked for.
    assert _warnings(run(fleet_root, "render", "--check", "--cluster", "prod-east").err) == []


def test_a_lone_teams_weight_goes_to_its_undeclared_cohort(fleet_root: Path) -> None:
    """Kueue ranks a ClusterQueue only against its cohort's other children (kueue v0.19.2
    pkg/scheduler/fair_sharing_iterator.go:115-125): alone, the team's weight would do nothing, so the
    cohort it implies carries it; once a second team joins, the cohort is back to Kueue's default."""
    assert _cohort(fleet_root, "prod-west", "platform")["fairSharing"] == {"weight": "500m"}
    assert _cohort(fleet_root, "prod-west", "research")["fairSharing"] == {"weight": "1"}
    edit(fleet_root, "teams/recsys.yaml", "fairSharingWeight: 1.5\n", "fairSharingWeight: 1.5\ncohort: platform\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert "fairSharing" not in _cohort(fleet_root, "prod-west", "platform")


def test_a_declared_cohort_with_another_weight_is_warned_of(fleet_root: Path) -> None:
    edit(fleet_root, "clusters/prod-east.yaml", "  - {name: platform, fairSharingWeight: 0.5}",
         "  - {name: platform}")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert (
        "warning: teams/platform-ci.yaml:10: fairSharingWeight: in cluster 'prod-east' the team's ClusterQueue is "
        "alone in cohort 'platform', so its weight 0.5 ranks it against nobody: the cohort competes for borrowed "
        "GPUs with weight 1 (it sets none) [warning]") in _warnings(result.err)
    assert "fix: set fairSharingWeight on cohort 'platform' in clusters/prod-east.yaml (cohorts:)" in result.err
    # The same weight on the cohort is what the team meant: no warning.
    edit(fleet_root, "clusters/prod-east.yaml", "  - {name: platform}", "  - {name: platform, fairSharingWeight: 0.5}")
    assert not any("platform-ci.yaml:10: fairSharingWeight" in w for w in _warnings(run(fleet_root, "render").err))


def test_overcommit_on_a_topology_aware_pool_says_what_kueue_does_there(fleet_root: Path, shared_schemas: Path,
                                                                        shared_crds: Path) -> None:
    """`validate` prints the warnings too; a topology-aware flavor checks node capacity, so there
    overcommit means guarantees that are met only when others leave room, not requeue loops."""
    edit(fleet_root, "clusters/prod-east.yaml", "overcommit: 1.0", "overcommit: 2")
    edit(fleet_root, "teams/vision.yaml", "h100: {gpus: 32, borrowingLimit: 64}", "h100: {gpus: 300}")
    result = run(fleet_root, "validate", "--offline", "--no-kubeconform", "--schema-location",
                 str(shared_schemas), "--crd-location", str(shared_crds))
    assert result.code == 0, result.err
    assert [w for w in _warnings(result.err) if "prod-east" in w] == [
        "warning: clusters/prod-east.yaml:12: overcommit: pool 'h100' has 256 GPUs but teams are guaranteed 492 "
        "(overcommit 2): its flavor is topology-aware, so Kueue admits only what fits on the nodes: guarantees "
        "beyond 256 GPUs are met only when others leave room [warning]"]


def test_without_a_cpu_pool_cpu_only_jobs_are_said_to_land_on_gpu_nodes(fleet_root: Path) -> None:
    path = fleet_root / "clusters/prod-west.yaml"
    path.write_text(re.sub(r"^cpuPool:.*\n(  .*\n)*", "", path.read_text(), flags=re.M))
    team_file = fleet_root / "teams/inference.yaml"  # its CPU-only router profile needs the pool
    team_file.write_text(team_file.read_text().split("  # The routers")[0])
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert "warning: clusters/prod-west.yaml:13: cpuPool: jobs without a queue label in team namespaces, CPU-only " \
           "ones included, are queued to the team's GPU queue: Kueue admits them to a GPU flavor, so they run on " \
           "GPU nodes and use the GPU pools' CPU quota [warning]" in result.err, result.err
    lq = yaml.safe_load((fleet_root / "rendered/prod-west/teams/recsys/recsys/localqueue-default.yaml").read_text())
    assert lq["spec"] == {"clusterQueue": "recsys"}
    (group,) = yaml.safe_load((fleet_root / "rendered/prod-west/teams/recsys/clusterqueue-recsys.yaml").read_text())[
        "spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["a100"]  # no CPU flavor without a CPU pool
