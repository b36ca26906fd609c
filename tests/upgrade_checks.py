"""What an upgrade story checks after a Kueue upgrade, on the twin or under an engine alike: the
admitted job's Workload is the same object and still admitted, the waiting one still waits, every queue
is active, and there is one Workload per job (none orphaned)."""

from __future__ import annotations

from typing import Any

from tests.upstream.fleet import KUEUE, condition, workload_of

State = tuple[str, str, str]
"""(Workload uid, its Admitted status, its Evicted status)."""


def job_state(stack: Any, ns: str, name: str) -> State:
    found = workload_of(stack, ns, name) or {}
    return (found.get("metadata", {}).get("uid", ""), condition(found, "Admitted").get("status", ""),
            condition(found, "Evicted").get("status", ""))


def storage(stack: Any) -> str:
    """The version the API server stores ClusterQueues at, as the installed CRD says."""
    from kubernetes import client

    crd = client.ApiextensionsV1Api(stack.client()).read_custom_resource_definition(f"clusterqueues.{KUEUE}")
    return str(next(v.name for v in crd.spec.versions if v.storage))


def assert_work_kept(stack: Any, ns: str, before: dict[str, State], running: str, waiting: str) -> None:
    from kubernetes import client

    api = client.CustomObjectsApi(stack.client())
    after = {name: job_state(stack, ns, name) for name in (running, waiting)}
    assert after[running] == (before[running][0], "True", ""), after  # the same Workload, still admitted
    assert after[waiting][0] == before[waiting][0] and after[waiting][1] != "True", after
    for kind in ("clusterqueues", "localqueues"):
        items = (api.list_cluster_custom_object(KUEUE, "v1beta2", kind) if kind == "clusterqueues" else
                 api.list_namespaced_custom_object(KUEUE, "v1beta2", ns, kind))["items"]
        assert items and all(condition(q, "Active").get("status") == "True" for q in items), \
            [(q["metadata"]["name"], q.get("status")) for q in items]
    workloads = api.list_cluster_custom_object(KUEUE, "v1beta2", "workloads")["items"]
    owned = {(w["metadata"]["namespace"], ref["name"]) for w in workloads
             for ref in w["metadata"].get("ownerReferences") or []}
    assert owned == {(ns, running), (ns, waiting)}, owned  # one Workload per job, none orphaned
