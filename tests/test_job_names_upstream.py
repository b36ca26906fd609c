"""Issue 52: a job name or namespace of `.` or `..` given to `fleetgen job`, against the real API server.

urllib3 (2.8) resolves the dot segments of a URL before sending it, so the name the command line gave
was not the object the request named: `job cancel . -n NS` read `.../namespaces/NS/jobsets/` (the list)
as if it were a job, then sent DELETE to it, which the API server serves as deletecollection: every
JobSet of the namespace, for anyone allowed to (here a platform engineer, in system:masters). The
session's kube-apiserver with the JobSet CRD judges it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REPO, run
from tests.upstream.cluster import Stack

pytestmark = pytest.mark.upstream
NS = "dot-names"
JOBSETS = ("keep-a", "keep-b")


def _jobset(name: str) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.37"}]}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace": NS},
            "spec": {"suspend": True, "replicatedJobs": [{"name": "workers", "replicas": 1,
                                                          "template": {"spec": {"template": {"spec": pod}}}}]}}


@pytest.fixture(scope="module")
def jobsets(kube_stack: Stack) -> Iterator[Any]:
    """Two suspended JobSets in a namespace of their own; the client that reads them back."""
    from kubernetes import client

    api = kube_stack.client()
    client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
    objects = client.CustomObjectsApi(api)
    for name in JOBSETS:
        objects.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", _jobset(name))
    yield objects
    client.CoreV1Api(api).delete_namespace(NS)


@pytest.mark.parametrize("args", [["cancel", ".", "-n", NS], ["status", ".", "-n", NS], ["wait", "..", "-n", NS],
                                  ["cancel", "x", "-n", ".."], ["list", "-n", ".."]])
def test_a_dot_name_reaches_no_other_object(kube_stack: Stack, jobsets: Any, args: list[str]) -> None:
    result = run(REPO, "job", *args, "--kubeconfig", str(kube_stack.identity().kubeconfig))
    left = {j["metadata"]["name"]: j["metadata"].get("deletionTimestamp")
            for j in jobsets.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets")["items"]}
    assert left == dict.fromkeys(JOBSETS), (left, result.out, result.err)  # none deleted, none being deleted
    assert result.code == 2 and "must be a DNS-1123" in result.err, (result.code, result.out, result.err)


def test_the_python_api_cancels_no_collection(kube_stack: Stack, jobsets: Any) -> None:
    """The same through the SDK a notebook uses: `Job.on_cluster(api, ".", NS).cancel()`."""
    from generator.errors import UsageError
    from generator.jobs import Job, connect

    api = connect(kubeconfig=str(kube_stack.identity().kubeconfig))
    try:
        Job.on_cluster(api, ".", NS).cancel()
        outcome = "cancelled"
    except UsageError as exc:
        outcome = str(exc)
    left = {j["metadata"]["name"]: j["metadata"].get("deletionTimestamp")
            for j in jobsets.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets")["items"]}
    assert left == dict.fromkeys(JOBSETS), (left, outcome)
    assert "must be a DNS-1123 subdomain" in outcome, outcome
