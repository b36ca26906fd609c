"""Issue 30, user story 2 (first part): a team member's job runs on nodes shaped like the cluster file.

The dev cluster as rendered, on the real API server with Kueue, JobSet and the Job controller;
its Nodes made from clusters/dev.yaml; kube-scheduler binds pods and kwok runs them (no kubelet).
A member submits the speech team's profile: Kueue admits it to the profile's pool, kube-scheduler
binds every pod to a node of that pool, kwok runs them to completion and the JobSet completes.
Then a node is cordoned and tainted as the health reconciler does: new pods avoid it. And every job
profile of the fleet, on its cluster's twin: bound to its pool, host for host where Kueue's
topology-aware scheduling placed it (in one block, or each slice in one domain), run to completion.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.checks import load_fleet
from generator.config.fleet import Fleet
from generator.reconciler.model import TAINT_KEY
from generator.reconciler.nodes import taint_value
from tests.conftest import REPO
from tests.upstream.cluster import Stack
from tests.upstream.fleet import condition, fake_nodes, workload_of
from tests.upstream.processes import wait_for
from tests.upstream.twin import (
    MANAGED,
    Twin,
    bound_pods,
    completed,
    placed_where_kueue_chose,
    pods,
    running_twin,
    submit,
)

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, PROFILE = "dev", "speech", "asr-2node"
UNHEALTHY = {"key": TAINT_KEY, "value": taint_value("xid-79"), "effect": "NoSchedule"}
"""The taint the health reconciler puts on a node with a faulty GPU (reconciler/nodes.py)."""


@pytest.fixture(scope="module")
def twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    with running_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"twin-{CLUSTER}")) as running:
        yield running


def test_a_members_job_is_admitted_bound_to_its_pool_and_runs_to_completion(
        twin: tuple[Stack, Fleet, Twin], tmp_path: Path) -> None:
    stack, fleet, running = twin
    profile = next(p for p in fleet.teams[TEAM].config.job_profiles if p.name == PROFILE)
    ns, body = submit(stack, fleet, "twin-asr", tmp_path, TEAM, PROFILE)
    assert wait_for(lambda: condition(workload_of(stack, ns, "twin-asr"), "Admitted").get("status") == "True", 60), \
        condition(workload_of(stack, ns, "twin-asr"), "QuotaReserved")
    selector = "jobset.sigs.k8s.io/jobset-name=twin-asr"
    bound = bound_pods(stack, ns, "twin-asr", profile.nodes)
    assert bound, f"pods not bound: {[(p.metadata.name, p.status.phase) for p in pods(stack, ns, selector)]}\n" \
                  f"{running.logs()}"
    pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(
        fleet.clusters[CLUSTER].config)}
    assert {pool_of[p.spec.node_name] for p in bound} == {profile.pool}
    gpus = [int(c.resources.limits.get("nvidia.com/gpu", 0)) for p in bound for c in p.spec.containers]
    assert sum(gpus) == profile.nodes * profile.gpus_per_node
    assert wait_for(lambda: completed(stack, ns, "twin-asr"), 90), \
        f"{[(p.metadata.name, p.status.phase) for p in pods(stack, ns, selector)]}\n{running.logs()}"
    assert wait_for(lambda: condition(workload_of(stack, ns, "twin-asr"), "Finished").get("status") == "True", 60)


def test_a_cordoned_and_tainted_node_gets_no_new_pods(twin: tuple[Stack, Fleet, Twin], tmp_path: Path) -> None:
    from kubernetes import client

    stack, fleet, running = twin
    core = client.CoreV1Api(stack.client())
    profile = next(p for p in fleet.teams[TEAM].config.job_profiles if p.name == PROFILE)
    nodes = [n["metadata"]["name"] for n in fake_nodes(fleet.clusters[CLUSTER].config)
             if n["metadata"]["labels"][MANAGED] == profile.pool]
    faulty = nodes[0]
    taints = core.read_node(faulty).spec.taints or []
    core.patch_node(faulty, {"spec": {"unschedulable": True, "taints": [
        *[{"key": t.key, "value": t.value, "effect": t.effect} for t in taints], UNHEALTHY]}})
    try:
        ns, _ = submit(stack, fleet, "twin-avoid", tmp_path, TEAM, PROFILE)
        selector = "jobset.sigs.k8s.io/jobset-name=twin-avoid"
        placed = {p.spec.node_name for p in bound_pods(stack, ns, "twin-avoid", profile.nodes)}
        assert placed, f"{[(p.metadata.name, p.status.phase) for p in pods(stack, ns, selector)]}\n{running.logs()}"
        assert faulty not in placed and placed <= set(nodes[1:]), placed
        assert wait_for(lambda: completed(stack, ns, "twin-avoid"), 90)
    finally:
        core.patch_node(faulty, {"spec": {"unschedulable": False, "taints": [
            {"key": t.key, "value": t.value, "effect": t.effect} for t in taints] or None}})


PROFILES = sorted((team, profile.name) for team, loaded in load_fleet(REPO).teams.items()
                  for profile in loaded.config.job_profiles if profile.kind in ("jobset", "job"))
"""The profiles this twin runs to completion: the operators' kinds run on twins with their operators
(tests/test_ray.py, tests/test_trainer.py), and a server never completes (tests/test_serving.py)."""
"""Every job profile of the example fleet (team, profile), each submitted on its cluster's twin; a
RayJob's on the twin that runs KubeRay (tests/test_ray.py), a TrainJob's on the one that runs Kubeflow
Trainer (tests/test_trainer.py)."""


@pytest.fixture(scope="module")
def twins(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One running twin per cluster, started when a profile first needs it."""
    from contextlib import ExitStack

    with ExitStack() as stack_of_twins:
        started: dict[str, Any] = {}

        def get(name: str) -> tuple[Stack, Fleet, Twin]:
            if name not in started:
                started[name] = stack_of_twins.enter_context(
                    running_twin(name, upstream_etcd, tmp_path_factory.mktemp(f"twin-{name}")))
            return started[name]  # type: ignore[no-any-return]

        yield {"get": get}


@pytest.mark.parametrize(("team_name", "profile_name"), PROFILES)
def test_every_profile_runs_on_its_pool_where_kueue_placed_it(twins: dict[str, Any], team_name: str,
                                                             profile_name: str, tmp_path: Path) -> None:
    """User story 2 for each profile: a member submits it; Kueue admits it to the profile's pool;
    kube-scheduler binds every pod to a node of that pool (with topology: to exactly the hosts Kueue's
    topology-aware scheduling chose, in one block, or each slice in one domain of its level); kwok runs
    them to completion."""
    team = load_fleet(REPO).teams[team_name].config
    profile = next(p for p in team.job_profiles if p.name == profile_name)
    stack, fleet, running = twins["get"](profile.cluster)
    name = f"twin-{profile_name}"
    ns, body = submit(stack, fleet, name, tmp_path, team_name, profile_name)
    kind = body["kind"]
    assert wait_for(lambda: condition(workload_of(stack, ns, name, kind), "Admitted").get("status") == "True", 90), \
        condition(workload_of(stack, ns, name, kind), "QuotaReserved")
    bound = placed_where_kueue_chose(stack, fleet.clusters[profile.cluster].config, ns, name, profile, running.logs,
                                     kind)
    if kind == "Job" and profile.nodes > 1:
        rendezvous_resolves(stack, ns, name, bound)
    assert wait_for(lambda: completed(stack, ns, name, kind), 150), running.logs()


def rendezvous_resolves(stack: Stack, namespace: str, name: str, bound: list[Any]) -> None:
    """A batch Job's rank 0 is where every pod's MASTER_ADDR points: the Job controller named pod 0's
    host `<job>-0` in the subdomain the template gives, which is the Service `job submit` created, and
    that Service selects the job's pods (the DNS records a cluster's DNS serves for it)."""
    from kubernetes import client

    first = next(p for p in bound if p.metadata.annotations["batch.kubernetes.io/job-completion-index"] == "0")
    master = {e.name: e.value for e in first.spec.containers[0].env}["MASTER_ADDR"]
    assert f"{first.spec.hostname}.{first.spec.subdomain}" == master, (first.spec.hostname, first.spec.subdomain)
    service = client.CoreV1Api(stack.client()).read_namespaced_service(first.spec.subdomain, namespace)
    assert service.spec.cluster_ip == "None" and service.spec.publish_not_ready_addresses
    assert all(p.metadata.labels.items() >= service.spec.selector.items() for p in bound), service.spec.selector
    owner = service.metadata.owner_references[0]
    assert (owner.kind, owner.name) == ("Job", name)  # the garbage collector deletes it with the Job
