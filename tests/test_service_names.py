"""Issue 53: a job's Services never collide with an operator's own, on the real API server with the real
JobSet controller.

A serving Deployment's Service is named after it, as JobSet names its pods' headless Service and a
multi-node Job's rendezvous Service is named: `fleetgen job submit` used to create the Deployment and then
fail on its Service (409), or take the name first, so that a later JobSet of that name silently used
fleetgen's ClusterIP Service and its pods' DNS names did not resolve (jobset v0.12.0
pkg/controllers/jobset_controller.go:799-803 reuses any Service holding the name). Now submit refuses,
before creating anything, a job whose Service name (its own or its operator's) is held by a Service it
does not own, and says whose it is.

prod-west's queues and team objects are applied to the session's stack; a member of inference submits.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.jobs import Job
from tests.conftest import REPO, run
from tests.upstream.cluster import Identity, Stack
from tests.upstream.fleet import apply_all, kustomize_build
from tests.upstream.processes import wait_for

pytestmark = pytest.mark.upstream

TEAM, PROFILE, NAMESPACE = "inference", "llm-serve", "inference-staging"
"""inference's serving profile (a Deployment with a port) and the namespace its jobs go to (its first)."""
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")


@pytest.fixture(scope="module")
def member(kube_stack: Stack) -> Iterator[tuple[Stack, Identity]]:
    objects = [*kustomize_build(REPO / "rendered/prod-west/kueue"), *kustomize_build(REPO / "rendered/prod-west/teams")]
    assert apply_all(kube_stack, objects) == []
    yield kube_stack, kube_stack.identity("oncall@acme.com", ("inference-oncall",))


def _jobset(name: str) -> dict[str, Any]:
    """A plain JobSet as anyone may write one (no queue label: Kueue leaves it to run)."""
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                "parallelism": 1, "completions": 1, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.example/x:1"}]}}}}}]}}


def _service(stack: Stack, name: str) -> Any:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        return client.CoreV1Api(stack.client()).read_namespaced_service(name, NAMESPACE)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _deployments(stack: Stack, name: str) -> list[str]:
    from kubernetes import client

    found = client.AppsV1Api(stack.client()).list_namespaced_deployment(NAMESPACE).items
    return [d.metadata.name for d in found if d.metadata.name == name]


def _jobsets(stack: Stack, name: str) -> list[str]:
    from kubernetes import client

    found = client.CustomObjectsApi(stack.client()).list_namespaced_custom_object(*JOBSET[:2], NAMESPACE, JOBSET[2])
    return [j["metadata"]["name"] for j in found["items"] if j["metadata"]["name"] == name]


def test_a_serving_service_never_takes_or_reuses_an_operators_name(
        member: tuple[Stack, Identity], tmp_path: Path) -> None:
    """Intent: a serving profile's Service never collides with an operator's own objects. A Deployment
    named like a running JobSet is refused before anything is created (before: the Deployment was
    created, then its Service failed with 409); a JobSet named like a server is refused, since the
    JobSet controller would use the server's Service for its pods' DNS names; a Service someone made by
    hand is named as such; with a free name both go through."""
    from kubernetes import client

    stack, oncall = member
    kc = ["--kubeconfig", str(oncall.kubeconfig)]
    suffix = uuid.uuid4().hex[:5]
    taken, served, by_hand = f"clash-{suffix}", f"serve-{suffix}", f"mine-{suffix}"
    objects = client.CustomObjectsApi(stack.client())
    core = client.CoreV1Api(stack.client())
    try:
        # The JobSet controller makes the JobSet's headless Service, named after it.
        objects.create_namespaced_custom_object(*JOBSET[:2], NAMESPACE, JOBSET[2], _jobset(taken))
        assert wait_for(lambda: _service(stack, taken) is not None, 60), f"no Service {taken} from JobSet"
        owner = _service(stack, taken).metadata.owner_references[0]
        assert (owner.kind, owner.name) == ("JobSet", taken)

        refused = run(REPO, "job", "submit", TEAM, PROFILE, "--name", taken, *kc)
        assert refused.code == 2, (refused.out, refused.err)
        assert f"job {taken} not submitted: services: Service {taken} already exists in namespace {NAMESPACE} " \
            f"(owned by JobSet {taken}) and is not this job's, but the Service fleetgen creates for its serving " \
            "address needs that name: submit the job under another name (--name)" in refused.err, refused.err
        assert _deployments(stack, taken) == []
        dry = run(REPO, "job", "submit", TEAM, PROFILE, "--name", taken, "--dry-run", *kc)
        assert dry.code == 2 and f"FAILED  services: Service {taken} already exists" in dry.out, (dry.out, dry.err)
        unchecked = run(REPO, "job", "submit", TEAM, PROFILE, "--name", taken, "--no-check", *kc)
        assert unchecked.code == 2 and "services: Service" in unchecked.err, unchecked.err
        assert _deployments(stack, taken) == []

        # A free name: the Deployment and its Service, owned by it.
        submitted = run(REPO, "job", "submit", TEAM, PROFILE, "--name", served, *kc)
        assert submitted.code == 0, submitted.err
        owner = _service(stack, served).metadata.owner_references[0]
        assert (owner.kind, owner.name) == ("Deployment", served)

        # A JobSet of the server's name would get the server's ClusterIP Service as its headless one.
        jobset = Job.from_profile("ml-research", "pretrain-4node", root=REPO, name=served).body
        jobset["metadata"]["namespace"] = NAMESPACE
        jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = TEAM
        path = tmp_path / "jobset.yaml"
        path.write_text(yaml.safe_dump(jobset))
        second = run(REPO, "job", "submit", str(path), "--no-check", *kc)
        assert second.code == 2 and f"Service {served} already exists in namespace {NAMESPACE} (owned by " \
            f"Deployment {served}) and is not this job's, but the headless Service the JobSet controller makes " \
            "for its pods' DNS names needs that name" in second.err, second.err
        assert _jobsets(stack, served) == []

        # Someone's own Service.
        core.create_namespaced_service(NAMESPACE, {"metadata": {"name": by_hand},
                                                   "spec": {"ports": [{"port": 80}]}})
        mine = run(REPO, "job", "submit", TEAM, PROFILE, "--name", by_hand, *kc)
        assert mine.code == 2 and "(owned by nothing: someone created it by hand)" in mine.err, mine.err
        assert _deployments(stack, by_hand) == []
    finally:
        with contextlib.suppress(client.exceptions.ApiException):
            objects.delete_namespaced_custom_object(*JOBSET[:2], NAMESPACE, JOBSET[2], taken)
        with contextlib.suppress(client.exceptions.ApiException):
            client.AppsV1Api(stack.client()).delete_namespaced_deployment(served, NAMESPACE)
        for name in (taken, served, by_hand):
            with contextlib.suppress(client.exceptions.ApiException):
                core.delete_namespaced_service(name, NAMESPACE)
