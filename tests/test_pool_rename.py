"""Issue 57: renaming a pool reads as a rename.

Renaming prod-west's `a100` pool read as four high "loses N guaranteed GPUs" lines, two "shrinks to 0"
lines and a deleted ResourceFlavor. The preview now pairs a pool that goes with one that arrives in the
same cluster with the same GPUs and the same teams' shares, and says in one line what the rename does
in Kueue, as the real Kueue showed it here.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import edit, risks_between, run

OLD, NEW = "a100", "a100-80g"


def rename(root: Path) -> None:
    """Rename prod-west's a100 pool in its cluster file and in every team file (its nodes keep their labels)."""
    edit(root, "clusters/prod-west.yaml", f"  - name: {OLD}\n", f"  - name: {NEW}\n")
    for path in sorted((root / "teams").glob("*.yaml")):
        text = path.read_text()
        path.write_text(re.sub(rf"\b{OLD}:", f"{NEW}:", re.sub(rf"pool: {OLD}$", f"pool: {NEW}", text, flags=re.M)))


def _key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    return obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def test_a_renamed_pool_is_one_line_not_lost_guarantees(repo: Path, tmp_path: Path) -> None:
    head = tmp_path / "head"
    shutil.copytree(repo, head)
    rename(head)
    found = risks_between(repo, head)
    assert "quota-reduced" not in found and "pool-capacity-reduced" not in found, found
    assert "kueue-object-deleted" not in found, found
    (line,) = found["pool-renamed"]
    assert line == (f"medium: hub, prod-west: pool {OLD} is renamed {NEW}: every team keeps its GPUs, and the "
                    f"ResourceFlavor {OLD} is replaced by {NEW} at once. Workloads admitted on {OLD} keep running but "
                    f"count against no quota until they end, so each team can be admitted its whole quota of {NEW} "
                    "again beside them, and those pods wait for GPUs (or are requeued by waitForPodsReady): rename "
                    "a drained pool, or accept that"), line


def test_a_pool_that_goes_while_another_of_other_shares_arrives_is_no_rename(repo: Path, tmp_path: Path) -> None:
    head = tmp_path / "head"
    shutil.copytree(repo, head)
    rename(head)
    edit(head, "teams/inference.yaml", f"{NEW}: {{gpus: 8}}", f"{NEW}: {{gpus: 4}}")
    found = risks_between(repo, head)
    # hub, where inference has no quota, still sees a rename; prod-west sees what it is: guarantees lost
    assert [line.split(": ")[1] for line in found["pool-renamed"]] == ["hub"], found["pool-renamed"]
    assert "high: prod-west: inference loses 8 guaranteed a100 GPUs (8 → 0); its running workloads above the new " \
           "quota may be preempted" in found["quota-reduced"], found
    assert any(line.startswith("high: prod-west: ResourceFlavor a100 is deleted") for line in
               found["kueue-object-deleted"]), found


def test_kueue_keeps_admitted_work_through_a_rename_counted_against_no_quota(
        fleet_root: Path, upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """prod-west on the real Kueue: inference (8 a100 GPUs, never borrows) runs an 8-GPU job; the renamed fleet
    is applied and what it no longer has deleted, as an engine prunes (after the sync). The preview's
    `pool-renamed` line says what Kueue then does: the running job stays, a second one is admitted beside
    it on the new flavor although the team holds only 8 GPUs, and the old ResourceFlavor is gone at once."""
    from kubernetes import client

    from tests.upstream.fleet import JOBSET, apply_all, condition, flavors, gpu_jobset, kustomize_build, workload_of
    from tests.upstream.processes import wait_for
    from tests.upstream.twin import running_twin

    assert run(fleet_root, "render", "--cluster", "prod-west").code == 0
    with running_twin("prod-west", upstream_etcd, tmp_path_factory.mktemp("rename"), root=fleet_root,
                      kubelets=False) as (stack, fleet, _):
        team = fleet.teams["inference"].config
        ns, tag = team.namespace_names[0], uuid.uuid4().hex[:5]
        jobs = client.CustomObjectsApi(stack.client())

        def submit(name: str) -> None:
            body = gpu_jobset(team, name, 1, 8)
            pod = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            pod["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
            jobs.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", body)

        def admitted(name: str) -> bool:
            return condition(workload_of(stack, ns, name), "Admitted").get("status") == "True"

        first, second = f"first-{tag}", f"second-{tag}"
        submit(first)
        assert wait_for(lambda: admitted(first), 60), workload_of(stack, ns, first)
        assert flavors(workload_of(stack, ns, first)) == {OLD}

        before = kustomize_build(fleet_root / "rendered" / "prod-west")
        rename(fleet_root)
        assert run(fleet_root, "render", "--cluster", "prod-west").code == 0
        after = kustomize_build(fleet_root / "rendered" / "prod-west")
        assert not apply_all(stack, after)
        pruned = {_key(o) for o in before} - {_key(o) for o in after}
        dynamic = stack.dynamic()
        for api_version, kind, namespace, name in sorted(pruned):
            dynamic.resources.get(api_version=api_version, kind=kind).delete(name=name, namespace=namespace or None)

        submit(second)
        kueue = client.CustomObjectsApi(stack.client())

        def old_flavor_gone() -> bool:
            try:
                kueue.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", OLD)
            except client.ApiException as exc:
                return bool(exc.status == 404)
            return False

        # the old flavor goes at once: no queue lists it, and admitted work does not hold it
        assert wait_for(old_flavor_gone, 30)
        # the second job is admitted on the new flavor within the team's 8 GPUs, which the first, still
        # admitted on the old one, no longer counts against: the team holds 16 of 8 until the first ends
        assert wait_for(lambda: admitted(second), 60), workload_of(stack, ns, second)
        assert flavors(workload_of(stack, ns, second)) == {NEW}
        first_now = workload_of(stack, ns, first)
        assert admitted(first) and flavors(first_now) == {OLD} and not condition(first_now, "Evicted"), first_now
        queue = kueue.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", team.name)
        assert condition(queue, "Active").get("status") == "True", queue.get("status")
        # and its status shows the new flavor only: what still runs on the old one is out of sight there
        assert OLD not in {f["name"] for f in queue["status"]["flavorsReservation"]}, queue["status"]


def test_a_pool_renamed_onto_other_nodes_is_no_rename(repo: Path, tmp_path: Path) -> None:
    """Same GPUs and shares, but prod-west's flavor would select other nodes: what goes and what comes are told
    apart there. hub's flavors select no nodes (a MultiKueue manager's pools are its workers'), so hub sees a
    rename."""
    head = tmp_path / "head"
    shutil.copytree(repo, head)
    rename(head)
    edit(head, "clusters/prod-west.yaml", "node.fleetgen.io/pool: a100}", "node.fleetgen.io/pool: a100-new}")
    found = risks_between(repo, head)
    assert [line.split(": ")[1] for line in found["pool-renamed"]] == ["hub"], found["pool-renamed"]
    assert any(line.startswith("high: prod-west: ResourceFlavor a100 is deleted") for line in
               found["kueue-object-deleted"]), found
