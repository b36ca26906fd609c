"""Issue 57: a cluster is added from the command line, with init's arguments, instead of by copying a
445-line file: `fleetgen add cluster` writes it from the model (the health reconciler in dry run),
checks it with the whole fleet first, and renders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest
import yaml

from tests.conftest import REPO, run
from tests.init_runs import tree_state

ADD = ["add", "cluster", "--cluster", "prod-south", "--gpu-product", "NVIDIA-A100-SXM4-80GB", "--gpus-per-node", "8",
       "--nodes", "4", "--cpu-per-node", "96", "--memory-per-node", "900Gi"]


@pytest.fixture
def fleet(fleet_root: Path) -> Path:
    shutil.copy(REPO / "fleet.yaml", fleet_root / "fleet.yaml")
    return fleet_root


def test_add_cluster_writes_a_checked_file_in_dry_run_and_renders_it(fleet: Path) -> None:
    result = run(fleet, *ADD)
    assert result.code == 0, result.err
    text = (fleet / "clusters/prod-south.yaml").read_text()
    cluster = yaml.safe_load(text)
    assert cluster["gitops"] == {"engine": "argocd", "repoUrl": "https://github.com/acme/gpu-fleet.git"}
    assert cluster["images"] == {"registry": "ghcr.io/acme"}  # the fleet's, as no flag named another
    assert cluster["nodePools"][0]["name"] == "a100" and cluster["nodePools"][0]["nodes"] == 4
    assert cluster["health"] == {"dryRun": True}
    assert "\n# kueue:\n" in text  # every other key listed, commented
    policy = yaml.safe_load((fleet / "rendered/prod-south/health/configmap-fleetgen-health.yaml").read_text())
    assert json.loads(policy["data"]["policy.json"])["dryRun"] is True
    assert (fleet / "rendered/gitops/prod-south").is_dir()
    assert run(fleet, "render", "--check").code == 0
    lines = result.out.splitlines()
    assert lines[0] == "wrote clusters/prod-south.yaml" and lines[1].startswith("rendered "), lines
    steps = result.out[result.out.index("next:"):]
    assert "quotas.prod-south.<pool>" in steps and "`images` workflow" in steps and "dryRun: false" in steps


def test_an_existing_name_or_a_bad_value_changes_nothing(fleet: Path) -> None:
    before = tree_state(fleet)
    taken = run(fleet, *[("dev" if arg == "prod-south" else arg) for arg in ADD])
    assert taken.code == 2 and "clusters/dev.yaml exists" in taken.err, taken.err
    bad = run(fleet, *ADD, "--registry", "registry.example.com/x")
    assert bad.code == 2 and "clusters/prod-south.yaml" in bad.err and "images.registry" in bad.err, bad.err
    odd = run(fleet, *[("lots" if arg == "900Gi" else arg) for arg in ADD])
    assert odd.code == 2 and "clusters/prod-south.yaml" in odd.err and "memoryPerNode" in odd.err, odd.err
    assert "Traceback" not in taken.err + bad.err + odd.err
    assert tree_state(fleet) == before


def test_with_clusters_syncing_from_different_repositories_the_url_must_be_given(fleet: Path) -> None:
    path = fleet / "clusters/dev.yaml"
    path.write_text(path.read_text().replace("https://github.com/acme/gpu-fleet.git",
                                             "https://github.com/acme/dev-fleet.git"))
    result = run(fleet, *ADD)
    assert result.code == 2 and "--repo-url is required" in result.err and "dev: https://github.com/acme/dev" \
        in result.err, result.err
    assert not (fleet / "clusters/prod-south.yaml").exists()
    assert run(fleet, *ADD, "--repo-url", "https://github.com/acme/south.git").code == 0


def test_it_takes_inits_cluster_arguments() -> None:
    from generator.cli import build

    def names(command: click.Command) -> set[str]:
        return {p.name for p in command.params if p.name}

    assert names(build.add_cluster) - {"schema_location", "crd_location"} == names(build.init) - {
        "owner", "team", "force", "fleetgen_from"}


def test_the_preview_of_a_new_cluster_is_one_line_listing_what_it_brings(repo: Path) -> None:
    """It was 36 lines (19 medium), one per role, binding and policy; a team's arrival there keeps its
    own line, and an existing cluster that gains objects is not called new."""
    from tests.diffs import diff_json

    assert run(repo, *ADD).code == 0
    teams = repo / "teams/speech.yaml"
    teams.write_text(teams.read_text().replace("quotas:\n", "quotas:\n  prod-south:\n    a100: {gpus: 8}\n"))
    (repo / "teams/audio.yaml").write_text("name: audio\nowners: ['@acme/audio']\nmembers: {groups: [audio]}\n"
                                           "defaultPriority: standard\nquotas:\n  dev:\n    l4: {gpus: 1}\n")
    code, report = diff_json(repo)
    assert code == 1
    lines = [(r["severity"], r["rule"], r["message"]) for r in report["risks"]]
    assert [line for line in lines if line[1] == "cluster-added"] == [
        ("medium", "cluster-added", "prod-south: cluster prod-south arrives with 66 objects: flavor a100; priority "
                                    "class standard; roles fleetgen-fleet-reader, fleetgen-health, "
                                    "fleetgen-health-events, fleetgen-priority-reader, fleetgen-team-member; admission "
                                    "policies fleetgen-reclaim-deadline, fleetgen-team-egress, fleetgen-team-objects, "
                                    "fleetgen-team-pod-placement, fleetgen-team-priorities, fleetgen-team-workloads; "
                                    "10 GitOps objects; teams speech (their own lines)")]
    assert {line[1] for line in lines} == {"cluster-added", "team-added", "pool-overcommitted"}, lines
    assert [line[2].split(":")[0] for line in lines if line[1] == "team-added"] == ["dev", "prod-south"], lines


def test_a_cluster_is_new_only_when_its_root_kustomization_arrives() -> None:
    """A `--rendered` diff holds only the files that differ: a job template added to an existing cluster
    (no kustomization lists templates) or a change under rendered/gitops/argocd-settings/ (cluster
    `gitops`) once made those clusters "arrive", hiding their own risk lines."""
    from generator.diff.run import _new_clusters

    assert _new_clusters({"dev"}, {}, {"dev/templates/speech/x.job.yaml": b""}) == frozenset()
    assert _new_clusters({"gitops"}, {}, {"gitops/kustomization.yaml": b""}) == frozenset()
    assert _new_clusters({"dev", "south"}, {"dev/kustomization.yaml": b""},
                         {"dev/kustomization.yaml": b"", "south/kustomization.yaml": b""}) == {"south"}


@pytest.mark.parametrize("name", ["gitops", "argocd-settings"])
def test_a_name_that_collides_with_the_gitops_folders_is_refused(fleet: Path, name: str) -> None:
    result = run(fleet, *[(name if arg == "prod-south" else arg) for arg in ADD])
    assert result.code == 2 and "is reserved" in result.err and f"clusters/{name}.yaml" in result.err, result.err
    assert not (fleet / f"clusters/{name}.yaml").exists()
