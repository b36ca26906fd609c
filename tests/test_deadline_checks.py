"""Issue 53: the reclaim deadline and a team's maxExecutionTime as the files are checked (the real API
server and Kueue judge the policies in tests/test_reclaim_deadline.py)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import edit, run


def test_a_team_may_only_shorten_the_clusters_grace_cap(fleet_root: Path) -> None:
    edit(fleet_root, "teams/speech.yaml", "defaultPriority: standard\n",
         "defaultPriority: standard\npolicy: {maxTerminationGracePeriodSeconds: 600}\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "teams/speech.yaml:7: policy.maxTerminationGracePeriodSeconds: 600 is above cluster dev's " \
        "kueue.maxTerminationGracePeriodSeconds (300)" in result.err, result.err



def test_a_cluster_that_forbids_team_caps_refuses_the_team_key_at_its_line(fleet_root: Path) -> None:
    """Intent: where the cluster keeps the reclaim deadline to itself, a team file that sets its own
    is an error naming the team file, line and key, the cluster file's setting, and the fix, and
    nothing is rendered (render exits 2)."""
    edit(fleet_root, "clusters/dev.yaml", "kueue:\n  version: v0.15.2\n",
         "kueue:\n  version: v0.15.2\n  teamPolicy: {maxTerminationGracePeriodSeconds: false}\n")
    edit(fleet_root, "teams/speech.yaml", "defaultPriority: standard\n",
         "defaultPriority: standard\npolicy:\n  maxTerminationGracePeriodSeconds: 10\n")
    before = (fleet_root / "rendered" / "dev" / "teams" /
              "validatingadmissionpolicy-fleetgen-reclaim-deadline.yaml").read_text()
    result = run(fleet_root, "render")
    assert result.code == 2, result.err
    assert "teams/speech.yaml:8: policy.maxTerminationGracePeriodSeconds: cluster dev sets " \
        "kueue.teamPolicy.maxTerminationGracePeriodSeconds: false, so teams take its " \
        "kueue.maxTerminationGracePeriodSeconds (300)" in result.err, result.err
    assert "remove it, or ask the platform team to allow it" in result.err, result.err
    assert "Traceback" not in result.err
    assert (fleet_root / "rendered" / "dev" / "teams" /
            "validatingadmissionpolicy-fleetgen-reclaim-deadline.yaml").read_text() == before

def test_a_profile_over_the_cap_or_the_teams_max_execution_time_is_an_error(fleet_root: Path) -> None:
    edit(fleet_root, "teams/ml-research.yaml", "terminationGracePeriodSeconds: 120",
         "terminationGracePeriodSeconds: 900")
    edit(fleet_root, "teams/ml-research.yaml", "defaultPriority: standard\n",
         "defaultPriority: standard\nmaxExecutionTime: 24h\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "terminationGracePeriodSeconds: 900 s, but pods of team ml-research in prod-west may have at most " \
        "300 s" in result.err, result.err
    assert "maxExecutionTime: 72h is longer than the team's maxExecutionTime 24h" in result.err, result.err


def test_a_team_max_execution_time_renders_its_policies(fleet_root: Path) -> None:
    edit(fleet_root, "teams/vision.yaml", "defaultPriority: standard\n",
         "defaultPriority: standard\nmaxExecutionTime: 72h\n")
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    teams = fleet_root / "rendered" / "prod-west" / "teams"
    for kind in ("validatingadmissionpolicy", "validatingadmissionpolicybinding", "mutatingadmissionpolicy",
                 "mutatingadmissionpolicybinding"):
        assert (teams / f"{kind}-fleetgen-max-exec-vision.yaml").exists(), kind
    assert "batch jobs run at most 72h once admitted" in run(fleet_root, "explain", "team", "vision").out
