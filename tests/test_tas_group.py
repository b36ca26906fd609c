"""Rank 0 and its workers in one topology block: what `kueue.x-k8s.io/podset-group-name` changes,
shown on the real Kueue manager.

Two blocks of three 8-GPU nodes; two nodes of block `a` are taken by another job. A leader plus
two workers then needs three nodes. Placed as two independent pod sets, Kueue puts the leader in
the tightest block that fits one pod (`a`, one node free) and the workers in `b`: rank 0 is a block
away from its workers. As one group (what fleetgen renders), all three go to `b`.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from generator.jobs import Job
from generator.jobs.workloads import workload_of
from generator.kinds.podspec import PODSET_GROUP
from tests.conftest import REPO
from tests.upstream.cluster import Stack
from tests.upstream.fleet import apply_all, create_nodes, topology_domains
from tests.upstream.processes import wait_for

pytestmark = pytest.mark.upstream
NS, POOL, BLOCK = "tas-group", "tas-group", "test.fleetgen.io/block"
GPU = "nvidia.com/gpu"


def node(name: str, block: str) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "512Gi", GPU: "8", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, BLOCK: block,
                                                  "node.fleetgen.io/pool": POOL}},
            "spec": {"taints": []},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "test"}]}}


@pytest.fixture(scope="module")
def queue(kube_stack: Stack) -> Stack:
    create_nodes(kube_stack, [node(f"tas-{b}-{i}", b) for b in ("a", "b") for i in range(3)])
    refused = apply_all(kube_stack, [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": POOL},
         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": POOL},
         "spec": {"nodeLabels": {"node.fleetgen.io/pool": POOL}, "topologyName": POOL}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": POOL},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [
                      {"name": POOL, "resources": [{"name": "cpu", "nominalQuota": "1000"},
                                                   {"name": "memory", "nominalQuota": "10Ti"},
                                                   {"name": GPU, "nominalQuota": "100"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": POOL, "namespace": NS},
         "spec": {"clusterQueue": POOL}},
    ])
    assert refused == []
    return kube_stack


def shaped(name: str, nodes: int, group: bool) -> dict[str, Any]:
    """pretrain-70b (a leader and workers, required block placement) moved onto this test's pool."""
    body = copy.deepcopy(Job.from_profile("llm-pretrain", "pretrain-70b", root=REPO, nodes=nodes, name=name).body)
    body["metadata"]["namespace"] = NS
    body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = POOL
    body["metadata"]["labels"].pop("kueue.x-k8s.io/priority-class")
    for rjob in body["spec"]["replicatedJobs"]:
        template = rjob["template"]["spec"]["template"]
        annotations = {"kueue.x-k8s.io/podset-required-topology": BLOCK}
        if group:
            annotations[PODSET_GROUP] = template["metadata"]["annotations"][PODSET_GROUP]
        template["metadata"]["annotations"] = annotations
        template["spec"]["nodeSelector"] = {"node.fleetgen.io/pool": POOL}
        container = template["spec"]["containers"][0]
        container["resources"] = {"requests": {"cpu": "32", "memory": "256Gi", GPU: "8"},
                                  "limits": {"memory": "256Gi", GPU: "8"}}
    return body


def blocks(stack: Stack, name: str) -> dict[str, set[str]] | None:
    """The blocks each pod set of the admitted job is in (None until admitted)."""
    from kubernetes import client

    uid = client.CustomObjectsApi(stack.client()).get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", name)["metadata"]["uid"]
    hosts = topology_domains(workload_of(stack.connection(), NS, uid), "kubernetes.io/hostname")  # tas-<block>-<i>
    return {ps: {h.split("-")[1] for h in names} for ps, names in hosts.items()} or None


def submit(stack: Stack, body: dict[str, Any]) -> None:
    from kubernetes import client

    client.CustomObjectsApi(stack.client()).create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", body)


def cancel(stack: Stack, name: str) -> None:
    from kubernetes import client

    client.CustomObjectsApi(stack.client()).delete_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", name, propagation_policy="Foreground")


@pytest.mark.parametrize("group,expected", [(False, {"leader": {"a"}, "workers": {"b"}}),
                                            (True, {"leader": {"b"}, "workers": {"b"}})],
                         ids=["separate-pod-sets-split", "one-group-stays-together"])
def test_leader_follows_its_workers_only_as_a_group(queue: Stack, group: bool, expected: dict[str, set[str]]) -> None:
    filler = shaped(f"filler-{int(group)}", 2, group=True)  # leader + one worker: two nodes of one block
    submit(queue, filler)
    assert wait_for(lambda: blocks(queue, filler["metadata"]["name"]) is not None, 60)
    taken = blocks(queue, filler["metadata"]["name"])
    assert taken == {"leader": {"a"}, "workers": {"a"}}, taken  # the tightest fit of two empty blocks: the first
    job = shaped(f"trio-{int(group)}", 3, group=group)
    submit(queue, job)
    assert wait_for(lambda: blocks(queue, job["metadata"]["name"]) is not None, 60)
    assert blocks(queue, job["metadata"]["name"]) == expected
    for name in (job["metadata"]["name"], filler["metadata"]["name"]):
        cancel(queue, name)
    assert wait_for(lambda: not any(True for _ in _jobsets(queue)), 60)


def _jobsets(stack: Stack) -> list[Any]:
    from kubernetes import client

    return list(client.CustomObjectsApi(stack.client()).list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets")["items"])
