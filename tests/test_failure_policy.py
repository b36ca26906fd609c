"""What happens when a pod of a rendered JobSet fails, decided by the real controllers.

A stack whose kube-controller-manager also runs the Job controller: it creates the pods (which never
start: no scheduler, no kubelet), reads their failure from their status as a kubelet or the taint
manager would write it, and applies the rendered podFailurePolicy; the JobSet controller then
applies the rendered failurePolicy. Three failures, three outcomes:

- a worker failure (torchrun's exit 1): the JobSet restarts and spends one of maxRestarts;
- a disruption (pod condition DisruptionTarget: node drain, eviction, preemption): the JobSet
  restarts without spending maxRestarts;
- a program bug (exit 2): the JobSet fails at once.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from generator.jobs import Job
from tests.conftest import REPO
from tests.upstream.cluster import Stack
from tests.upstream.processes import wait_for

pytestmark = pytest.mark.upstream
NS = "train"


@pytest.fixture(scope="module")
def stack(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    started = Stack.start(tmp_path_factory.mktemp("failure-policy"), upstream_etcd,
                          extra_controllers=("job-controller",))
    started.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    yield started
    started.stop()


def jobset(stack: Stack, name: str) -> dict[str, Any]:
    """The pretrain-4node template at two nodes, outside Kueue (no queue label: not its to admit)."""
    from kubernetes import client

    body = Job.from_profile("ml-research", "pretrain-4node", root=REPO, nodes=2, name=name).body
    body["metadata"]["namespace"] = NS
    for label in ("kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"):
        body["metadata"]["labels"].pop(label)
    client.CustomObjectsApi(stack.client()).create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS,
                                                                           "jobsets", body)
    return body


def status(stack: Stack, name: str) -> dict[str, Any]:
    from kubernetes import client

    found = client.CustomObjectsApi(stack.client()).get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", name)
    return dict(found.get("status") or {})


def pods_of(stack: Stack, name: str, attempt: int) -> list[Any]:
    from kubernetes import client

    selector = f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/restart-attempt={attempt}"
    return [p for p in client.CoreV1Api(stack.client()).list_namespaced_pod(NS, label_selector=selector).items
            if p.metadata.deletion_timestamp is None and p.status.phase == "Pending"]


def fail_pod(stack: Stack, pod: Any, exit_code: int, disrupted: bool = False) -> None:
    """Write the pod's end as the kubelet (container exit) or the taint manager (DisruptionTarget) would."""
    from kubernetes import client

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                   "message": "Taint manager: deleting due to NoExecute taint", "lastTransitionTime": now}] \
        if disrupted else []
    client.CoreV1Api(stack.client()).patch_namespaced_pod_status(pod.metadata.name, NS, {"status": {
        "phase": "Failed", "conditions": conditions,
        "containerStatuses": [{"name": "trainer", "image": pod.spec.containers[0].image, "imageID": "",
                               "ready": False, "restartCount": 0,
                               "state": {"terminated": {"exitCode": exit_code, "reason": "Error",
                                                        "startedAt": now, "finishedAt": now}}}]}})


def failed(st: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c["type"] == "Failed" and c["status"] == "True"), {})


def test_worker_failure_restarts_and_counts(stack: Stack) -> None:
    jobset(stack, "worker-fault")
    assert wait_for(lambda: len(pods_of(stack, "worker-fault", 0)) == 2, 60), "the Job controller made no pods"
    fail_pod(stack, pods_of(stack, "worker-fault", 0)[0], exit_code=1)
    assert wait_for(lambda: status(stack, "worker-fault").get("restarts") == 1, 60), status(stack, "worker-fault")
    st = status(stack, "worker-fault")
    assert st.get("restartsCountTowardsMax") == 1 and not failed(st)
    assert wait_for(lambda: len(pods_of(stack, "worker-fault", 1)) == 2, 60), "no pods after the restart"


def test_disruption_restarts_without_spending_max_restarts(stack: Stack) -> None:
    jobset(stack, "drained")
    assert wait_for(lambda: len(pods_of(stack, "drained", 0)) == 2, 60)
    fail_pod(stack, pods_of(stack, "drained", 0)[1], exit_code=137, disrupted=True)
    assert wait_for(lambda: status(stack, "drained").get("restarts") == 1, 60), status(stack, "drained")
    st = status(stack, "drained")
    assert not st.get("restartsCountTowardsMax") and not failed(st), st


def test_program_bug_fails_the_jobset_at_once(stack: Stack) -> None:
    jobset(stack, "buggy")
    assert wait_for(lambda: len(pods_of(stack, "buggy", 0)) == 2, 60)
    fail_pod(stack, pods_of(stack, "buggy", 0)[0], exit_code=2)
    assert wait_for(lambda: bool(failed(status(stack, "buggy"))), 60), status(stack, "buggy")
    st = status(stack, "buggy")
    assert not st.get("restarts"), st
    assert failed(st)["reason"] == "FailJobSetFailurePolicyAction", failed(st)  # the rule, not maxRestarts
