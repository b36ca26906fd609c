"""Issue 57: a Kueue upgrade on the fleet twin, as docs/operations/upgrade-the-platform.md says to do it.

dev runs Kueue v0.15.2 (v1beta1 storage). Its file moves to v0.19.2 and is rendered; the cluster gets
the new release as an engine's sync does (its install manifests over the old, the manager restarted with
the rendered Configuration, then the rendered objects, now kueue.x-k8s.io/v1beta2, applied). What was
admitted stays admitted, what waited still waits, every queue stays active, nothing is orphaned, and
the upgraded Kueue admits new work on the same quota.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import edit, run

CLUSTER, TEAM = "dev", "ml-research"


def test_a_kueue_upgrade_keeps_admitted_and_waiting_work_and_every_queue(
        fleet_root: Path, upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    from kubernetes import client

    from tests.upstream.fleet import (
        JOBSET,
        KUEUE,
        apply_all,
        condition,
        gpu_jobset,
        kustomize_build,
        rendered_kueue_config,
        workload_of,
    )
    from tests.upstream.processes import wait_for
    from tests.upstream.twin import running_twin

    assert run(fleet_root, "render", "--cluster", CLUSTER).code == 0
    with running_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp("upgrade"), root=fleet_root, kubelets=False,
                      kueue_tool="kueue-v0.15.2") as (stack, fleet, _):
        team = fleet.teams[TEAM].config
        ns, tag = team.namespace_names[0], uuid.uuid4().hex[:5]
        jobs, kueue = client.CustomObjectsApi(stack.client()), client.CustomObjectsApi(stack.client())

        def storage() -> str:
            """The version the API server stores ClusterQueues at, as the installed CRD says."""
            crd = client.ApiextensionsV1Api(stack.client()).read_custom_resource_definition(
                f"clusterqueues.{KUEUE}")
            return str(next(v.name for v in crd.spec.versions if v.storage))

        def submit(name: str, pods: int) -> None:
            jobs.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", gpu_jobset(team, name, pods, 4))

        def state(name: str) -> tuple[str, str, str]:
            """(workload uid, Admitted, Evicted) of a job."""
            found = workload_of(stack, ns, name) or {}
            return (found.get("metadata", {}).get("uid", ""), condition(found, "Admitted").get("status", ""),
                    condition(found, "Evicted").get("status", ""))

        running, waiting = f"running-{tag}", f"waiting-{tag}"
        submit(running, 1)  # 4 GPUs: the team's quota on dev's l4
        assert wait_for(lambda: state(running)[1] == "True", 60), workload_of(stack, ns, running)
        submit(waiting, 4)  # 16 GPUs: more than the whole pool's quotas, so it waits
        assert wait_for(lambda: state(waiting)[0], 60)
        assert wait_for(lambda: condition(workload_of(stack, ns, waiting), "QuotaReserved").get("status") == "False",
                        60), workload_of(stack, ns, waiting)
        before = {name: state(name) for name in (running, waiting)}
        assert stack.processes["kueue"].popen.args[0].endswith("kueue-v0.15.2")
        assert storage() == "v1beta1"

        # the upgrade, as the page says: the pin, a render, the sync
        edit(fleet_root, f"clusters/{CLUSTER}.yaml", "  version: v0.15.2", "  version: v0.19.2")
        assert run(fleet_root, "render", "--cluster", CLUSTER).code == 0
        objects = kustomize_build(fleet_root / "rendered" / CLUSTER)
        stack.upgrade_kueue("kueue", rendered_kueue_config(objects))
        assert not apply_all(stack, objects)

        assert storage() == "v1beta2"  # the v0.16 change the table's notes name
        after = {name: state(name) for name in (running, waiting)}
        assert after[running] == (before[running][0], "True", ""), after  # the same Workload, still admitted
        assert after[waiting][0] == before[waiting][0] and after[waiting][1] != "True", after
        for kind in ("clusterqueues", "localqueues"):
            items = (kueue.list_cluster_custom_object(KUEUE, "v1beta2", kind) if kind == "clusterqueues" else
                     kueue.list_namespaced_custom_object(KUEUE, "v1beta2", ns, kind))["items"]
            assert items and all(condition(q, "Active").get("status") == "True" for q in items), \
                [(q["metadata"]["name"], q.get("status")) for q in items]
        workloads = kueue.list_cluster_custom_object(KUEUE, "v1beta2", "workloads")["items"]
        owned = {(w["metadata"]["namespace"], ref["name"]) for w in workloads
                 for ref in w["metadata"].get("ownerReferences") or []}
        assert owned == {(ns, running), (ns, waiting)}, owned  # one Workload per job, none orphaned

        # the upgraded Kueue admits on the same quota once the running job ends
        jobs.delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", running)
        submit(f"next-{tag}", 1)
        assert wait_for(lambda: state(f"next-{tag}")[1] == "True", 60), workload_of(stack, ns, f"next-{tag}")
        assert stack.processes["kueue"].popen.args[0].endswith("/kueue")
