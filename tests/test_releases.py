"""Issue 57: releases that go together.

A cluster file pins Kueue (`kueue.version`) and the other platform components (`versions`); every pin is
a release of fleetgen's table (generator/releases.yaml), meets the others' needs, and otherwise fails the
render at the pin's line naming releases that work. An upgrade is one risk line per component and
cluster, read alike from Argo CD and Flux objects, with what the release changes and the order.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from generator import releases
from generator.versions import component
from tests.conftest import REPO, edit, risks_between, run
from tests.upstream.tools import TOOLS

COMPONENTS = tuple(releases.table())


@pytest.mark.parametrize("name", COMPONENTS)
def test_the_rows_marked_tested_are_the_releases_this_repository_builds_the_default_among_them(name: str) -> None:
    built = {releases.key(t.version) for t in TOOLS if t.name == name or t.name.startswith(f"{name}-v")}
    tested = {releases.key(r.version) for r in releases.table()[name].values() if r.tested}
    assert tested == built, (name, sorted(tested), sorted(built))
    row = releases.release(name, component(name).version)
    assert row is not None and row.tested, (name, component(name).version)


def test_the_defaults_meet_each_others_needs_and_every_row_cites_its_source() -> None:
    defaults = {name: component(name).version for name in COMPONENTS} | {releases.KUBERNETES: "1.29"}
    assert releases.unmet(defaults) == []
    for rows in releases.table().values():
        for row in rows.values():
            assert row.sources, row.label
            assert {needs for needs, _ in row.requires} <= {*COMPONENTS, releases.KUBERNETES}, row.label


@pytest.fixture
def fleet(repo: Path) -> Path:
    """The example fleet's inputs (teams/, clusters/, fleet.yaml), committed; nothing rendered yet."""
    return repo


def _pin(root: Path, cluster: str, versions: str) -> int:
    """Add `versions:` to a cluster file; the line it is on."""
    path = root / "clusters" / f"{cluster}.yaml"
    text = path.read_text() + f"versions: {versions}\n"
    path.write_text(text)
    return len(text.splitlines())


def _errors(root: Path) -> str:
    result = run(root, "render")
    assert result.code == 2, (result.out, result.err)
    assert not (root / "rendered").exists(), "a refused render wrote a tree"
    return result.err


def test_an_unknown_kueue_release_fails_at_its_line_naming_the_releases_that_work(fleet: Path) -> None:
    edit(fleet, "clusters/prod-east.yaml", "  version: v0.19.2", "  version: v9.99.0")
    err = _errors(fleet)
    assert ("clusters/prod-east.yaml:6: kueue.version: kueue v9.99.0 is not a release fleetgen knows: its table "
            "(generator/releases.yaml) has v0.14.8, v0.15.2, v0.16.2, v0.17.0, v0.19.2") in err, err
    assert "fix: use one that works with this cluster's other releases: v0.14.8, v0.15.2, v0.16.2, v0.17.0, " \
           "v0.19.2" in err, err
    assert "Traceback" not in err
    offline = run(fleet, "validate", "--offline")
    assert offline.code == 2 and "kueue v9.99.0 is not a release fleetgen knows" in offline.err, offline


def test_a_pair_the_table_rules_out_points_at_the_pin_that_falls_short_and_names_no_downgrade(fleet: Path) -> None:
    line = _pin(fleet, "prod-east", "{kubeflow-trainer: 2.1.0}")
    err = _errors(fleet)
    assert (f"clusters/prod-east.yaml:{line}: versions.kubeflow-trainer: kueue v0.19.2 needs kubeflow-trainer 2.2.1 or "
            "later (sigs.k8s.io/kueue v0.19.2 go.mod:14,23,48,49), and the cluster runs kubeflow-trainer 2.1.0\n"
            "    fix: set versions.kubeflow-trainer to one of 2.2.1, 2.3.0\n") in err, err  # not kueue v0.16.2 or older


def test_an_operator_needs_its_jobset(fleet: Path) -> None:
    line = _pin(fleet, "prod-west", "{kubeflow-trainer: 2.3.0, jobset: 0.11.1}")
    err = _errors(fleet)
    assert (f"clusters/prod-west.yaml:{line}: versions.jobset: kubeflow-trainer 2.3.0 needs jobset 0.12.0 or later "
            "(github.com/kubeflow/trainer/v2 v2.3.0 go.mod:25), and the cluster runs jobset 0.11.1\n"
            "    fix: set versions.jobset to 0.12.0\n") in err, err
    assert "kueue v0.19.2 needs jobset 0.12.0 or later" in err, err


def test_a_default_that_falls_short_is_found_at_the_block_that_would_pin_it(fleet: Path) -> None:
    """dev sets no Kueue block here: the finding points at `versions:`, naming the field to set."""
    edit(fleet, "clusters/dev.yaml", "kueue:\n  version: v0.15.2\n", "")
    line = _pin(fleet, "dev", "{jobset: 0.10.1}")
    err = _errors(fleet)
    assert f"clusters/dev.yaml:{line}: versions.jobset: kueue v0.19.2 needs jobset 0.12.0 or later" in err, err


def test_kubernetes_older_than_a_release_needs_says_to_upgrade_the_cluster(fleet: Path) -> None:
    edit(fleet, "clusters/dev.yaml", 'kubernetesVersion: "1.36"', 'kubernetesVersion: "1.28"')
    err = _errors(fleet)
    assert ("clusters/dev.yaml:6: kueue.version: kueue v0.15.2 needs Kubernetes 1.29 or later (sigs.k8s.io/kueue "
            "v0.15.2 go.mod:12,20,43,44), and the cluster runs 1.28\n    fix: upgrade the cluster to Kubernetes 1.29 "
            "or later and set kubernetesVersion to match\n") in err, err


@pytest.mark.parametrize(("versions", "message"), [
    ("{kueue: v0.19.2}", "Kueue's release is kueue.version: move it there"),
    ("{ray: 1.6.2}", "no component is named 'ray': a cluster file pins jobset, kubeflow-trainer, kuberay-operator, "
                     "lws here"),
    ("{lws: latest}", "must be a release number such as 2.2.1"),
])
def test_a_pin_of_no_component_or_no_release_is_refused(fleet: Path, versions: str, message: str) -> None:
    _pin(fleet, "prod-east", versions)
    err = _errors(fleet)
    assert "clusters/prod-east.yaml:" in err and message in err, err


def test_a_pin_of_an_operator_the_cluster_does_not_run_is_refused(fleet: Path) -> None:
    _pin(fleet, "prod-west", "{lws: v0.8.0}")
    err = _errors(fleet)
    assert "versions.lws: the cluster does not run LeaderWorkerSet's controller (operators.lws is off)" in err, err


def _platform(root: Path, cluster: str, name: str) -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load((root / "rendered" / cluster / "platform" / name).read_text())
    return loaded


def test_a_cluster_runs_its_own_release_on_either_engine_and_the_others_keep_the_default(fleet: Path) -> None:
    _pin(fleet, "prod-east", "{kubeflow-trainer: 2.3.0, lws: 0.9.0}")  # Argo CD; lws spelled without its v
    _pin(fleet, "prod-west", "{kubeflow-trainer: 2.3.0}")  # Flux, the chart from an OCIRepository
    result = run(fleet, "render")
    assert result.code == 0, result.err
    east = _platform(fleet, "prod-east", "application-prod-east-kubeflow-trainer.yaml")
    assert east["spec"]["source"]["targetRevision"] == "2.3.0"  # type: ignore[index]
    west = _platform(fleet, "prod-west", "ocirepository-kubeflow-trainer.yaml")
    assert west["spec"]["ref"]["tag"] == "2.3.0"  # type: ignore[index]
    lws = _platform(fleet, "prod-east", "application-prod-east-lws.yaml")
    assert lws["spec"]["source"]["targetRevision"] == "v0.9.0"  # type: ignore[index]
    hub = (fleet / "rendered" / "hub" / "platform" / "application-hub-kubeflow-trainer.yaml").read_text()
    assert "targetRevision: 2.2.1" in hub


def _head(base: Path, tmp_path: Path) -> Path:
    head = tmp_path / "head"
    shutil.copytree(base, head)
    return head


def test_an_upgrade_reads_alike_on_both_engines_and_replaces_the_source_change_line(fleet: Path,
                                                                                     tmp_path: Path) -> None:
    head = _head(fleet, tmp_path)
    _pin(head, "prod-east", "{kubeflow-trainer: 2.3.0}")
    _pin(head, "prod-west", "{kubeflow-trainer: 2.3.0}")
    found = risks_between(fleet, head)
    # the same line on both engines: merged into one naming both clusters (risks.merged)
    (line,) = found.pop("platform-upgraded")
    assert line.startswith("medium: prod-east, prod-west: kubeflow-trainer 2.2.1 -> 2.3.0; its chart applies the "
                           "training runtimes from a Helm post-install and post-upgrade hook Job"), line
    assert "cited only" not in line, line  # built here, and run by the upgrade story
    assert "gitops-source-changed" not in found, found


def test_an_upgrade_across_releases_names_each_ones_changes_and_a_downgrade_is_high(fleet: Path,
                                                                                   tmp_path: Path) -> None:
    head = _head(fleet, tmp_path)
    edit(head, "clusters/dev.yaml", "  version: v0.15.2", "  version: v0.19.2")
    (line,) = risks_between(fleet, head)["platform-upgraded"]
    assert line.startswith("medium: dev: kueue 0.15.2 -> 0.19.2; kueue.x-k8s.io/v1beta2 becomes the storage "
                           "version"), line
    assert "cited only" not in line
    (back,) = risks_between(head, fleet)["platform-upgraded"]
    assert back.startswith("high: dev: kueue 0.19.2 -> 0.15.2; a downgrade"), back


def test_an_upgrade_whose_needs_sync_after_it_says_to_merge_those_first(fleet: Path, tmp_path: Path) -> None:
    edit(fleet, "clusters/dev.yaml", "kueue:\n", "operators: {trainer: true}\nkueue:\n")
    _pin(fleet, "dev", "{kubeflow-trainer: 2.1.0}")
    head = _head(fleet, tmp_path)
    edit(head, "clusters/dev.yaml", "  version: v0.15.2", "  version: v0.19.2")
    edit(head, "clusters/dev.yaml", "versions: {kubeflow-trainer: 2.1.0}", "versions: {kubeflow-trainer: 2.2.1}")
    lines = sorted(risks_between(fleet, head)["platform-upgraded"])
    assert len(lines) == 2, lines
    kueue, trainer = sorted(lines, key=lambda line: "kueue 0.15.2" not in line)
    assert kueue.startswith("high: dev: kueue 0.15.2 -> 0.19.2"), kueue
    assert ("it needs kubeflow-trainer 2.2.1 or later, which this change also brings but the engine syncs after "
            "kueue: merge the kubeflow-trainer upgrade first, on its own") in kueue, kueue
    assert trainer.startswith("medium: dev: kubeflow-trainer 2.1.0 -> 2.2.1"), trainer


def test_a_release_spelt_otherwise_than_its_tag_is_not_taken_for_it(fleet: Path) -> None:
    """The chart's tag is the string: `v0.19.02` would render a chart version no registry has."""
    edit(fleet, "clusters/prod-east.yaml", "  version: v0.19.2", "  version: v0.19.02")
    assert "kueue v0.19.02 is not a release fleetgen knows" in _errors(fleet)


def test_a_rendered_tree_with_a_release_that_is_no_number_gets_a_line_not_a_traceback(tmp_path: Path) -> None:
    """Rendered files of a pull request are hostile: `--from`/`--to` of two rendered trees."""
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.copytree(REPO / "rendered", before)
    shutil.copytree(REPO / "rendered", after)
    edit(after, "prod-east/platform/application-prod-east-kueue.yaml", "targetRevision: 0.19.2",
         "targetRevision: latest")
    edit(after, "prod-west/platform/ocirepository-kubeflow-trainer.yaml", "tag: 2.2.1", "tag: 2.1.0")
    result = run(REPO, "diff", "--from", str(before), "--to", str(after), "--format", "json")
    assert result.code == 1, result.err
    lines = {f"{r['severity']}: {r['message']}" for r in json.loads(result.out)["risks"]
             if r["rule"] == "platform-upgraded"}
    assert lines == {"medium: prod-east: kueue 0.19.2 -> latest; not a release in fleetgen's table, so nothing is "
                     "known of what it needs",
                     "high: prod-west: kubeflow-trainer 2.2.1 -> 2.1.0; a downgrade: what the newer release stored "
                     "or defaulted may not be read by the older one, and fleetgen's table has no notes for going "
                     "back; cited only: this fleetgen does not build or test it"}, lines


def test_a_chart_swapped_in_a_rendered_file_is_a_source_change_not_an_upgrade(tmp_path: Path) -> None:
    """A hostile rendered tree: prod-east's JobSet Application made to install Kueue, and prod-west's Kueue
    OCIRepository pointed elsewhere. Neither is an upgrade; both say where the cluster's state now comes from."""
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.copytree(REPO / "rendered", before)
    shutil.copytree(REPO / "rendered", after)
    edit(after, "prod-east/platform/application-prod-east-jobset.yaml", "chart: jobset", "chart: kueue")
    edit(after, "prod-east/platform/application-prod-east-jobset.yaml", "targetRevision: 0.12.0",
         "targetRevision: 0.19.2")
    edit(after, "prod-west/platform/ocirepository-kueue.yaml", "url: oci://registry.k8s.io/kueue/charts/kueue",
         "url: oci://registry.example/kueue/charts/kueue")
    result = run(REPO, "diff", "--from", str(before), "--to", str(after), "--format", "json")
    assert result.code == 1, result.err
    lines = {(r["rule"], r["severity"], r["message"]) for r in json.loads(result.out)["risks"]}
    assert lines == {
        ("gitops-source-changed", "medium", "prod-east: Application argocd/prod-east-jobset syncs from another source "
         "(spec.source.chart, spec.source.targetRevision): what that source holds replaces the cluster's state"),
        ("gitops-source-changed", "medium", "prod-west: OCIRepository flux-system/kueue syncs from another source "
         "(spec.url): what that source holds replaces the cluster's state")}, lines


def test_an_ignored_version_field_leaves_no_upgrade_line(tmp_path: Path) -> None:
    """`diff --ignore` of the chart's version field hides its upgrade line too, whatever else of the object
    changes."""
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.copytree(REPO / "rendered", before)
    shutil.copytree(REPO / "rendered", after)
    edit(after, "prod-east/platform/application-prod-east-jobset.yaml", "targetRevision: 0.12.0",
         "targetRevision: 0.11.1")
    edit(after, "prod-east/platform/application-prod-east-jobset.yaml", "spec:\n", "spec:\n  revisionHistoryLimit: 3\n")
    result = run(REPO, "diff", "--from", str(before), "--to", str(after), "--format", "json",
                 "--ignore", "Application:spec.source.targetRevision")
    assert result.code == 1, result.err
    assert [r["rule"] for r in json.loads(result.out)["risks"] if r["rule"] == "platform-upgraded"] == []


def test_an_error_about_a_release_only_cited_says_so(fleet: Path) -> None:
    edit(fleet, "clusters/dev.yaml", "  version: v0.15.2", "  version: v0.17.0")
    _pin(fleet, "dev", "{jobset: 0.10.1}")
    err = _errors(fleet)
    assert ("versions.jobset: kueue v0.17.0 needs jobset 0.11.1 or later (sigs.k8s.io/kueue v0.17.0 "
            "go.mod:13,22,45,46), and the cluster runs jobset 0.10.1 (cited only: this fleetgen does not build or "
            "test it)") in err, err
