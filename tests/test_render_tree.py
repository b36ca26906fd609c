"""The committed rendered/ tree: golden, deterministic, pruned, and never half-written."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from generator import emit
from tests.conftest import REPO, local_checks, run, run_process, snapshot


def _load(root: Path, rel: str) -> dict:
    return yaml.safe_load((root / "rendered" / rel).read_text())


def test_committed_tree_matches_the_example_fleet(shared_schemas: Path, shared_crds: Path) -> None:
    """rendered/ in git must be exactly what teams/ and clusters/ compile to."""
    result = run(REPO, "render", "--check", *local_checks(shared_schemas, shared_crds))
    assert result.code == 0, result.out + result.err
    assert "rendered/ is up to date" in result.out


def test_committed_tree_matches_without_shared_folder() -> None:
    """The same guarantee with only the checks that need neither network nor ../shared."""
    result = run(REPO, "render", "--check")
    assert result.code == 0, result.out + result.err


def test_check_lists_stale_missing_and_extra_files(fleet_root: Path) -> None:
    rendered = fleet_root / "rendered"
    (rendered / "dev/kueue/resourceflavor-l4.yaml").write_text("edited by hand\n")
    (rendered / "prod-east/kueue/cohort-research.yaml").unlink()
    (rendered / "prod-west/stray.yaml").write_text("x: 1\n")
    result = run(fleet_root, "render", "--check")
    assert result.code == 1
    assert "~ dev/kueue/resourceflavor-l4.yaml" in result.out
    assert "+ prod-east/kueue/cohort-research.yaml" in result.out
    assert "- prod-west/stray.yaml" in result.out
    assert "run `fleetgen render`" in result.out


def test_golden_cluster_queue(fleet_root: Path) -> None:
    cq = _load(fleet_root, "prod-east/teams/ml-research/clusterqueue-ml-research.yaml")
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert cq["spec"]["cohortName"] == "research"
    assert cq["spec"]["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml-research"]}]}
    assert cq["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert cq["spec"]["fairSharing"] == {"weight": "1"}
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    # 64 of 256 H100s: a quarter of 32 nodes x 192 CPUs and 1800Gi.
    # The CPU pool's flavor first (issue 31): nothing of its own, no GPUs, no limit in prod-east.
    assert group["flavors"][0] == {"name": "cpu", "resources": [
        {"name": "cpu", "nominalQuota": "0"}, {"name": "memory", "nominalQuota": "0"},
        {"name": "nvidia.com/gpu", "nominalQuota": "0"}]}
    assert group["flavors"][1:] == [{"name": "h100", "resources": [
        {"name": "cpu", "nominalQuota": "1536", "borrowingLimit": "768", "lendingLimit": "384"},
        {"name": "memory", "nominalQuota": "14400Gi", "borrowingLimit": "7200Gi", "lendingLimit": "3600Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": "64", "borrowingLimit": "32", "lendingLimit": "16"}]}]


def test_golden_multi_pool_queue_and_fractional_cpu(fleet_root: Path) -> None:
    cq = _load(fleet_root, "prod-west/teams/platform-ci/clusterqueue-platform-ci.yaml")
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    assert [f["name"] for f in flavors] == ["cpu", "a100", "l40s"]  # the CPU pool, then the cluster's pool order
    # 4 L40S of a 4-GPU node with 62500m CPU: the whole node, canonical quantities.
    assert flavors[2]["resources"][:2] == [{"name": "cpu", "nominalQuota": "62500m"},
                                           {"name": "memory", "nominalQuota": "480Gi"}]


def test_golden_old_kueue_gets_v1beta1(fleet_root: Path) -> None:
    cq = _load(fleet_root, "dev/teams/speech/clusterqueue-speech.yaml")
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert cq["spec"]["cohort"] == "dev" and "cohortName" not in cq["spec"]


def test_golden_flavor_topology_cohorts_and_tenancy(fleet_root: Path) -> None:
    flavor = _load(fleet_root, "prod-east/kueue/resourceflavor-h100.yaml")
    assert flavor["spec"]["topologyName"] == "h100"
    assert flavor["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                                              "effect": "NoSchedule"}]
    topo = _load(fleet_root, "prod-east/kueue/topology-h100.yaml")
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]][-1] == "kubernetes.io/hostname"
    nested = _load(fleet_root, "prod-east/kueue/cohort-research-vision.yaml")
    assert nested["spec"] == {"parentName": "research", "fairSharing": {"weight": "2"}}
    # The root cohort holds the 32 H100 no team has quota for, with their CPU and memory (issue 16).
    assert _load(fleet_root, "prod-east/kueue/cohort-prod-east.yaml")["spec"] == {"resourceGroups": [
        {"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": [
            {"name": "cpu", "nominalQuota": "768"}, {"name": "memory", "nominalQuota": "7200Gi"},
            {"name": "nvidia.com/gpu", "nominalQuota": "32"}]},
        # ... and the whole cpuPool, lent to the CPU flavor of the teams' queues (in the same group: Kueue's
        # webhook allows each resource in one group only).
        {"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": "496"},
                                      {"name": "memory", "nominalQuota": "1920Gi"},
                                      {"name": "nvidia.com/gpu", "nominalQuota": "0"}]}]}]}
    implicit = _load(fleet_root, "prod-west/kueue/cohort-research.yaml")  # team cohort not declared there
    # ... holding ml-research alone, so it carries the team's weight (see test_kueue_advice.py).
    assert implicit["spec"] == {"parentName": "prod-west", "fairSharing": {"weight": "1"}}
    for ns in ("vision", "vision-eval"):
        for queue, target in (("vision", "vision"), ("default", "vision")):
            lq = _load(fleet_root, f"prod-east/teams/vision/{ns}/localqueue-{queue}.yaml")
            assert lq["metadata"]["namespace"] == ns and lq["spec"] == {"clusterQueue": target}
        rb = _load(fleet_root, f"prod-east/teams/vision/{ns}/rolebinding-vision-members.yaml")
        assert rb["metadata"]["namespace"] == ns
        assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}
        assert [s["name"] for s in rb["subjects"]] == ["vision", "vision-contractors"]
        ns_obj = _load(fleet_root, f"prod-east/teams/vision/{ns}/namespace-{ns}.yaml")
        assert ns_obj["metadata"]["labels"]["fleetgen.io/team"] == "vision"
        assert ns_obj["metadata"]["labels"]["fleetgen.io/cluster"] == "prod-east"
    wpc = _load(fleet_root, "prod-east/kueue/workloadpriorityclass-production.yaml")
    assert wpc["value"] == 1000 and "spec" not in wpc


def test_every_file_has_the_generated_header_and_every_folder_a_kustomization(fleet_root: Path) -> None:
    rendered = fleet_root / "rendered"
    for path in rendered.rglob("*.yaml"):
        assert path.read_text().startswith("# Generated by fleetgen"), path
    for folder in [p for p in rendered.rglob("*") if p.is_dir()]:
        if "templates" in folder.relative_to(rendered).parts:  # job templates are never synced
            assert not (folder / "kustomization.yaml").exists(), folder
            continue
        kust = yaml.safe_load((folder / "kustomization.yaml").read_text())
        listed = set(kust["resources"])
        present = {p.name for p in folder.iterdir() if p.name not in ("kustomization.yaml", "templates")}
        assert listed == present, folder


def test_two_fresh_processes_with_different_hash_seeds_are_byte_identical(fleet_root: Path, tmp_path: Path) -> None:
    trees = []
    for seed in ("1", "4242"):
        root = tmp_path / f"seed-{seed}"
        root.mkdir()
        for name in ("teams", "clusters"):
            shutil.copytree(fleet_root / name, root / name)
        proc = run_process(root, "render", env={"PYTHONHASHSEED": seed})
        assert proc.returncode == 0, proc.stderr
        trees.append(snapshot(root / "rendered"))
    assert trees[0] == trees[1]
    assert trees[0] == snapshot(fleet_root / "rendered")


def test_removed_team_and_cluster_disappear(fleet_root: Path) -> None:
    (fleet_root / "teams/recsys.yaml").unlink()
    assert run(fleet_root, "render").code == 0
    rendered = fleet_root / "rendered"
    assert not (rendered / "prod-west/teams/recsys").exists()
    assert "recsys" not in (rendered / "prod-west/teams/kustomization.yaml").read_text()
    assert not list(rendered.rglob("*recsys*"))
    # speech lives only on dev: remove its quota and the cluster, and dev goes entirely.
    for team in ("ml-research", "vision", "platform-ci"):
        path = fleet_root / f"teams/{team}.yaml"
        path.write_text(path.read_text().replace("  dev:\n", "  xdev-removed:\n").split("  xdev-removed:\n")[0])
    (fleet_root / "teams/speech.yaml").unlink()
    (fleet_root / "clusters/dev.yaml").unlink()
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert not (rendered / "dev").exists() and not (rendered / "gitops/dev").exists()
    assert sorted(p.name for p in rendered.iterdir()) == ["gitops", "hub", "prod-east", "prod-west"]


def test_rerender_without_changes_writes_nothing(fleet_root: Path) -> None:
    rendered = fleet_root / "rendered"
    stamp = {p: p.stat().st_mtime_ns for p in rendered.rglob("*.yaml")}
    result = run(fleet_root, "render")
    assert result.code == 0 and "already up to date" in result.out
    assert {p: p.stat().st_mtime_ns for p in rendered.rglob("*.yaml")} == stamp


def test_render_one_cluster_leaves_the_others_alone(fleet_root: Path) -> None:
    rendered = fleet_root / "rendered"
    (rendered / "prod-west/kueue/resourceflavor-a100.yaml").write_text("stale\n")
    path = fleet_root / "teams/speech.yaml"
    path.write_text(path.read_text().replace("gpus: 6", "gpus: 5"))
    result = run(fleet_root, "render", "--cluster", "dev")
    assert result.code == 0, result.err
    assert "nominalQuota: '5'" in (rendered / "dev/teams/speech/clusterqueue-speech.yaml").read_text()
    assert (rendered / "prod-west/kueue/resourceflavor-a100.yaml").read_text() == "stale\n"
    assert run(fleet_root, "render", "--cluster", "nope").code == 2


def test_staged_but_uncommitted_render_is_dropped(fleet_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed while staging (no journal yet): the next run drops the stage; the tree is the old one.
    A stage-* folder fleetgen did not issue (a commit's, a user's) is not its to delete."""
    before = snapshot(fleet_root / "rendered")
    real = emit._write_files

    def killed(folder: object, files: dict[str, bytes], stats: object = None) -> None:
        real(folder, dict(list(files.items())[:3]))  # type: ignore[arg-type]
        raise SystemExit("killed")

    with monkeypatch.context() as patch, pytest.raises(SystemExit):
        patch.setattr(emit, "_write_files", killed)
        patch.setattr(emit, "_drop", lambda *args: None)  # SIGKILL runs no clean-up
        emit.write_tree(fleet_root, {"dev/a.yaml": b"a", "dev/b.yaml": b"b", "dev/c/d.yaml": b"d"}, ["dev"])
    (stage,) = emit.work_dir(fleet_root).glob("stage-*")
    assert (stage / "new/dev/c/d.yaml").read_bytes() == b"d"
    (fleet_root / emit.WORK / "stage-foreign").mkdir()
    emit.recover(fleet_root)
    assert snapshot(fleet_root / "rendered") == before
    assert [p.name for p in emit.work_dir(fleet_root).glob("stage-*")] == ["stage-foreign"]


REAL_RENAME = os.rename


def test_committed_switch_is_finished_from_any_point(fleet_root: Path) -> None:
    """Killed after the journal's commit, between any two renames: the next run completes it."""
    wanted = snapshot(fleet_root / "rendered")
    wanted = {k: (v + b"# new\n" if k.startswith(("dev/", "prod-east/")) else v) for k, v in wanted.items()}
    for steps in range(5):  # dev out, dev in, prod-east out, prod-east in: stop after each
        root = fleet_root.parent / f"copy-{steps}"
        shutil.copytree(fleet_root, root)
        calls = [0]

        def rename(src: object, dst: object, limit: int = steps, calls: list[int] = calls, **where: int) -> None:
            if calls[0] == limit:
                raise SystemExit("killed")  # what SIGKILL leaves: nothing after this point runs
            calls[0] += 1
            REAL_RENAME(src, dst, **where)  # type: ignore[arg-type]

        os.rename = rename  # type: ignore[assignment]
        try:
            emit.write_tree(root, wanted, ["dev", "prod-east"])
        except SystemExit:
            pass
        finally:
            os.rename = REAL_RENAME
        emit.recover(root)
        assert snapshot(root / "rendered") == wanted, steps
        assert not (root / ".fleetgen/journal.json").exists() and not list((root / ".fleetgen").glob("stage-*"))
        shutil.rmtree(root)


def test_render_killed_midway_leaves_the_old_tree(fleet_root: Path) -> None:
    """SIGKILL while files are being written: rendered/ is still the old tree, byte for byte."""
    before = snapshot(fleet_root / "rendered")
    path = fleet_root / "teams/speech.yaml"
    path.write_text(path.read_text().replace("gpus: 6", "gpus: 5"))
    script = (
        "import os, sys, time\n"
        "import generator.emit as e\n"
        "orig = e._write_files\n"
        "def slow(folder, files, strip=''):\n"
        "    items = list(files.items())\n"
        "    orig(folder, dict(items[:10]), strip)\n"
        "    open(os.environ['MARK'], 'w').close()\n"
        "    time.sleep(60)\n"
        "e._write_files = slow\n"
        "from generator.cli import main\n"
        "sys.argv = ['fleetgen', '--root', sys.argv[1], 'render']\n"
        "main()\n")
    mark = fleet_root.parent / "mark"
    proc = subprocess.Popen([sys.executable, "-c", script, str(fleet_root)], env={**os.environ, "MARK": str(mark)})
    try:
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "render did not reach the write step"
            time.sleep(0.05)
        assert list(fleet_root.glob(".fleetgen/stage-*")), "staged tree not found"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert snapshot(fleet_root / "rendered") == before
    result = run(fleet_root, "render")
    assert result.code == 0, result.err
    assert not list(fleet_root.glob(".fleetgen/stage-*"))
    assert "nominalQuota: '5'" in (fleet_root / "rendered/dev/teams/speech/clusterqueue-speech.yaml").read_text()


def test_parallel_render_is_byte_identical(fleet_root: Path) -> None:
    serial = snapshot(fleet_root / "rendered")
    (fleet_root / "rendered").rename(fleet_root / "serial")
    result = run(fleet_root, "render", "--jobs", "2")
    assert result.code == 0, result.err
    assert snapshot(fleet_root / "rendered") == serial


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_large_cluster_written_in_several_processes_is_byte_identical(
        fleet_root: Path, monkeypatch: pytest.MonkeyPatch, start: str) -> None:
    """One cluster's objects are turned into text in one process per core from
    PARALLEL_EMIT_OBJECTS objects on (lowered here so prod-east qualifies): the same files, in
    the same order, whether the helpers are forked (and read the objects they inherit) or
    spawned (and are sent them)."""
    import concurrent.futures
    import multiprocessing

    from generator import render

    serial = render.build(fleet_root, ["prod-east"], jobs=1).tree
    monkeypatch.setattr(render, "PARALLEL_EMIT_OBJECTS", 10)
    monkeypatch.setattr(render, "pool_context", lambda: multiprocessing.get_context(start))
    given: list[bool] = []
    real = emit.texts_of
    monkeypatch.setattr(emit, "texts_of", lambda files, texts=None: given.append(texts is not None)
                        or real(files, texts))
    sent: list[str] = []
    submit = concurrent.futures.ProcessPoolExecutor.submit
    monkeypatch.setattr(concurrent.futures.ProcessPoolExecutor, "submit",
                        lambda pool, fn, *args: sent.append(fn.__name__) or submit(pool, fn, *args))
    parallel = render.build(fleet_root, ["prod-east"], jobs=3).tree
    assert list(parallel.items()) == list(serial.items())
    assert given[0]  # prod-east's texts came from the helpers
    assert sent == ["_inherited_texts" if start == "fork" else "_texts"] * 2, sent


def test_findings_inside_workers_stop_the_render(fleet_root: Path) -> None:
    from tests.conftest import edit

    before = snapshot(fleet_root / "rendered")
    edit(fleet_root, "clusters/prod-east.yaml",
         "topologyLevels: [topology.kubernetes.io/zone, cloud.provider.com/topology-block, kubernetes.io/hostname]",
         "topologyLevels: [kubernetes.io/hostname, topology.kubernetes.io/zone, cloud.provider.com/topology-block]")
    result = run(fleet_root, "render", "-j", "3")
    assert result.code == 2 and "clusters/prod-east.yaml:21: Topology h100: spec.levels: kubernetes.io/hostname " \
        "may only be the last level" in result.err, result.err
    assert snapshot(fleet_root / "rendered") == before


def test_partial_change_rewrites_only_the_changed_cluster(fleet_root: Path) -> None:
    from tests.conftest import edit

    assert run(fleet_root, "render").code == 0  # records every cluster
    east = {p: p.stat().st_mtime_ns for p in (fleet_root / "rendered/prod-east").rglob("*.yaml")}
    edit(fleet_root, "teams/speech.yaml", "gpus: 6", "gpus: 5")  # speech lives only on dev
    result = run(fleet_root, "render")
    assert result.code == 0 and "3 unchanged clusters not compiled again" in result.out, result.out
    assert {p: p.stat().st_mtime_ns for p in (fleet_root / "rendered/prod-east").rglob("*.yaml")} == east
    assert "nominalQuota: '5'" in (fleet_root / "rendered/dev/teams/speech/clusterqueue-speech.yaml").read_text()
    check = run(fleet_root, "render", "--check")  # and the whole tree is exactly a full render's
    assert check.code == 0, check.out
