"""Issue 53: a server of a team that is never preempted rolls out within the team's guarantee.

A copy of the example fleet with one more team, `storefront`: `policy.neverPreempted` (so it never
borrows: its ClusterQueue's and its namespace ResourceQuota's GPUs are its guarantee) and 2 H100 GPUs
in prod-east, all of which its serving profile `shop-serve` (2 replicas of 1 GPU) holds. On prod-east's
twin: the real API server with its ResourceQuota admission and the resource-quota controller, Kueue
v0.19.2 (its deployment and pod integrations), kube-controller-manager's Deployment and ReplicaSet
controllers, kube-scheduler and kwok.

A member submits `shop-serve`, then changes its image as anyone would (a patch of the Deployment): the
rollout completes, every replica on the new image, without ever needing a GPU beyond the guarantee,
and `fleetgen job status` says it is rolling out while it does.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.config.fleet import Fleet
from tests.conftest import REPO, run
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom
from tests.upstream.processes import wait_for
from tests.upstream.twin import CRI_LOG, Twin, pods, running_twin

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, PROFILE = "prod-east", "storefront", "shop-serve"
SELECTOR = f"app.kubernetes.io/instance={PROFILE}"
NEW_IMAGE = "ghcr.io/acme/shop-serve:2026.12.0"
TEAM_FILE = f"""\
name: {TEAM}
owners: ["@acme/storefront"]
members: {{groups: [storefront]}}
defaultPriority: production
policy: {{neverPreempted: true}}
quotas:
  {CLUSTER}:
    h100: {{gpus: 2}}
jobProfiles:
  - name: {PROFILE}
    kind: deployment
    cluster: {CLUSTER}
    pool: h100
    nodes: 2
    gpusPerNode: 1
    image: ghcr.io/acme/shop-serve:2026.11.0
    command: [python, -m, shop.serve]
    port: 8000
"""
"""A serving team at its guarantee: its two replicas hold every GPU it may ever hold."""


@pytest.fixture(scope="module")
def fleet_at_guarantee(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("storefront-fleet")
    for name in ("teams", "clusters", "rendered"):
        shutil.copytree(REPO / name, root / name)
    (root / "teams" / f"{TEAM}.yaml").write_text(TEAM_FILE)
    rendered = run(root, "render")
    assert rendered.code == 0, rendered.err
    return root


@pytest.fixture(scope="module")
def rollout_twin(upstream_etcd: Any, fleet_at_guarantee: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    workdir = tmp_path_factory.mktemp(f"rollout-{CLUSTER}")
    logs = workdir / "container.log"
    logs.write_text(CRI_LOG)
    with running_twin(CLUSTER, upstream_etcd, workdir, logs=logs, root=fleet_at_guarantee) as running:
        yield running


def _workloads(stack: Stack, namespace: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = custom(stack).list_namespaced_custom_object(KUEUE, "v1beta2", namespace,
                                                                             "workloads")["items"]
    return found


def test_a_never_preempted_server_at_its_guarantee_rolls_out_to_a_new_image(
        rollout_twin: tuple[Stack, Fleet, Twin], fleet_at_guarantee: Path) -> None:
    """Intent: a never-preempted team's server that holds the team's whole guarantee can be updated; the
    rollout completes on the real Deployment controller, ResourceQuota admission and Kueue, and `job status`
    tells the rollout in progress from a finished one."""
    from kubernetes import client

    stack, fleet, twin = rollout_twin
    root = fleet_at_guarantee
    team = fleet.teams[TEAM].config
    ns = team.namespace_names[0]
    who = stack.identity(f"serving@{TEAM}.test", (team.members.groups[0],))
    login = ("--kubeconfig", str(who.kubeconfig))
    quota = client.CoreV1Api(stack.client()).read_namespaced_resource_quota("fleetgen-gpus", ns)
    assert quota.spec.hard == {"requests.nvidia.com/gpu": "2"}, quota.spec.hard  # the guarantee, nothing more
    submitted = run(root, "job", "submit", TEAM, PROFILE, *login)
    assert submitted.code == 0, submitted
    try:
        ready = run(root, "job", "wait", PROFILE, "-n", ns, "--kind", "deployment", "--for", "running",
                    "--timeout", "120", *login)
        assert (ready.code, ready.out.splitlines()[-1]) == (0, f"{PROFILE}: running: 2/2 replicas ready"), \
            (ready, twin.logs())
        # The member changes the image, as `kubectl set image` would.
        member = client.AppsV1Api(stack.client(who.user, (team.members.groups[0],)))
        member.patch_namespaced_deployment(PROFILE, ns, {"spec": {"template": {"spec": {"containers": [
            {"name": "server", "image": NEW_IMAGE}]}}}})
        said: set[str] = set()

        def rolled_out() -> bool:
            status = run(root, "job", "status", PROFILE, "-n", ns, "--kind", "deployment", *login)
            said.add(status.out.strip())
            found = pods(stack, ns, SELECTOR)
            new = [p for p in found if p.spec.containers[0].image == NEW_IMAGE and p.status.phase == "Running"
                   and p.metadata.deletion_timestamp is None]
            return len(found) == len(new) == 2 and status.out.strip().endswith("running: 2/2 replicas ready")
        done = wait_for(rolled_out, 240, step=1)
        deployment = client.AppsV1Api(stack.client()).read_namespaced_deployment(PROFILE, ns)
        assert done, (sorted(said), deployment.status, [(p.metadata.name, p.spec.containers[0].image, p.status.phase)
                                                         for p in pods(stack, ns, SELECTOR)], twin.logs())
        assert deployment.status.updated_replicas == 2 and deployment.status.available_replicas == 2, deployment.status
        progressing = {c.type: c for c in deployment.status.conditions}["Progressing"]
        assert progressing.reason == "NewReplicaSetAvailable", progressing
        # Kueue admitted every new replica against the team's own queue; nothing was ever borrowed.
        admitted = [w for w in _workloads(stack, ns) if condition(w, "Admitted").get("status") == "True"]
        assert {w["status"]["admission"]["clusterQueue"] for w in admitted} == {team.name}
        assert any("rolling out" in line for line in said), sorted(said)
    finally:
        cancelled = run(root, "job", "cancel", PROFILE, "-n", ns, "--kind", "deployment", *login)
        assert cancelled.code == 0, cancelled


def test_a_surging_rollout_at_the_guarantee_is_told_as_stuck_with_its_refusal(
        rollout_twin: tuple[Stack, Fleet, Twin], fleet_at_guarantee: Path) -> None:
    """Intent: a member's own Deployment with Kubernetes' default rolling update (maxSurge 25%) at the team's
    guarantee cannot surge (the ResourceQuota refuses the extra pod and Kueue could never admit it: the team
    never borrows); `job status` says the rollout is stuck, in the API server's words, and how to fix it,
    instead of "running" on the old replicas."""
    from kubernetes import client

    stack, fleet, twin = rollout_twin
    root = fleet_at_guarantee
    team = fleet.teams[TEAM].config
    ns = team.namespace_names[0]
    name = "own-serve"
    who = stack.identity(f"serving@{TEAM}.test", (team.members.groups[0],))
    login = ("--kubeconfig", str(who.kubeconfig))
    assert wait_for(lambda: not pods(stack, ns, SELECTOR), 90), pods(stack, ns, SELECTOR)  # the guarantee is free
    made = run(root, "job", "new", TEAM, PROFILE, "--name", name)
    assert made.code == 0, made
    body = next(yaml.safe_load_all(made.out))
    del body["spec"]["strategy"]  # Kubernetes' default: RollingUpdate, maxSurge 25%, maxUnavailable 25%
    member = client.AppsV1Api(stack.client(who.user, (team.members.groups[0],)))
    member.create_namespaced_deployment(ns, body)
    try:
        ready = run(root, "job", "wait", name, "-n", ns, "--kind", "deployment", "--for", "running",
                    "--timeout", "120", *login)
        assert ready.code == 0, (ready, twin.logs())
        member.patch_namespaced_deployment(name, ns, {"spec": {"template": {"spec": {"containers": [
            {"name": "server", "image": NEW_IMAGE}]}}}})

        def stuck() -> str:
            said = run(root, "job", "status", name, "-n", ns, "--kind", "deployment", *login).out.strip()
            return said if "rollout stuck" in said else ""
        said = wait_for(stuck, 90, step=1)
        assert said.startswith(f"{name}: running: rollout stuck (pods refused: pods ") and \
            "exceeded quota: fleetgen-gpus" in said and "set spec.strategy.rollingUpdate.maxSurge: 0" in said and \
            "rolling out: 0/2 replicas on the new template; 2/2 replicas ready" in said, \
            (said, client.AppsV1Api(stack.client()).read_namespaced_deployment(name, ns).status)
    finally:
        client.AppsV1Api(stack.client()).delete_namespaced_deployment(name, ns)
