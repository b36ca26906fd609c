"""Issue 53: `policy.neverPreempted` holds in every pool a team's work lands in, the CPU pool included.

prod-west as rendered, on its twin (the real API server, Kueue v0.19.2, kube-scheduler binding pods to
Nodes made from clusters/prod-west.yaml, kwok running them). The example's inference team is never
preempted; a member submits its CPU-only `router` profile (a Deployment on the CPU pool) with
`fleetgen job submit`, recsys and vision fill the rest of the pool at `production`, and ml-research
then wants some of the pool for a `production` job.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from generator.config.fleet import Fleet
from generator.config.team import TeamConfig
from tests.conftest import REPO, run
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom
from tests.upstream.processes import wait_for
from tests.upstream.twin import Twin, pods, running_twin

pytestmark = pytest.mark.upstream

CLUSTER, SERVING, PROFILE = "prod-west", "inference", "router"
POD = {"cpu": "31", "memory": "60Gi"}
"""One pod: half a CPU-pool node (62 CPUs, 240Gi), so four are a team's limit of 124 CPUs (the router
profile's pods are these too)."""
RUNS = {"pod-complete.stage.kwok.x-k8s.io/delay": "20m", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "20m"}
"""kwok keeps a Job's pods running this long (tests/test_twin_scheduling.py submit says why both)."""


@pytest.fixture(scope="module")
def twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    with running_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"never-preempted-{CLUSTER}")) as running:
        yield running


def _client(stack: Stack, team: TeamConfig) -> Any:
    """An API client of a member of `team` as its file names them."""
    if team.members.groups:
        return stack.client(f"np-member@{team.name}.test", (team.members.groups[0],))
    return stack.client(team.members.users[0])


def _pod_spec(selector: dict[str, str]) -> dict[str, Any]:
    return {"nodeSelector": dict(selector), "containers": [
        {"name": "c", "image": "registry.example/cpu:1", "resources": {"requests": dict(POD)}}]}


def _workloads(stack: Stack, namespace: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = custom(stack).list_namespaced_custom_object(KUEUE, "v1beta2", namespace,
                                                                             "workloads")["items"]
    return found


def _admitted(workload: dict[str, Any]) -> bool:
    return condition(workload, "Admitted").get("status") == "True"


def _preempted(workload: dict[str, Any]) -> bool:
    return condition(workload, "Preempted").get("status") == "True"


def test_a_never_preempted_teams_cpu_only_pods_are_not_preempted_by_a_reclaim(
        twin: tuple[Stack, Fleet, Twin]) -> None:
    """Intent: a team with `policy.neverPreempted` is never preempted, by anyone, in any pool its work
    lands in. Before, its queue borrowed all of its CPU pool share (nominalQuota 0), so a `production`
    job of another team wanting the full pool preempted its `standard` routers (fair sharing's reclaim
    of borrowed quota). Now it holds its cpuPool limit as quota with borrowingLimit 0: Kueue finds
    nothing of it to preempt and the other team's job waits; explain says so and what it costs."""
    from kubernetes import client

    stack, fleet, running = twin
    cfg = fleet.clusters[CLUSTER].config
    assert cfg.cpu_pool is not None
    cpu_nodes = dict(cfg.cpu_pool.node_labels)
    teams = {name: fleet.teams[name].config for name in (SERVING, "recsys", "vision", "ml-research")}
    ns = {name: team.namespace_names[0] for name, team in teams.items()}  # where profiles' jobs go too
    serving = teams[SERVING]
    assert serving.never_preempted, "the example fleet's inference team is the never-preempted serving team"
    profile = next(p for p in serving.job_profiles if p.name == PROFILE)
    assert profile.on_cpu_pool(cfg) and profile.priority == "standard", profile
    limit = cfg.cpu_pool.limit_for(SERVING)
    assert limit is not None
    created: list[tuple[str, str, str]] = []  # (kind, namespace, name)
    router = f"{PROFILE}-{uuid.uuid4().hex[:5]}"
    who = stack.identity(f"np-member@{SERVING}.test", (serving.members.groups[0],))
    login = ("--kubeconfig", str(who.kubeconfig))
    dry = run(REPO, "job", "submit", SERVING, PROFILE, "--name", router, "--dry-run", *login)
    assert dry.code == 0 and f"capacity: 4 pods of {POD['cpu']} CPUs and {POD['memory']} ({limit.cpu} CPUs and " \
        f"240Gi in all) on cpuPool {cfg.cpu_pool.name} of {CLUSTER}, within the {limit.cpu} CPUs and " \
        f"{limit.memory} it may hold there (held for the team: never preempted)" in dry.out, dry
    submitted = run(REPO, "job", "submit", SERVING, PROFILE, "--name", router, *login)
    created += [("Deployment", ns[SERVING], router), ("Service", ns[SERVING], router)]
    assert submitted.code == 0, submitted

    def job(team: str, pods_: int) -> str:
        name = f"{team}-{uuid.uuid4().hex[:5]}"
        spec = {"restartPolicy": "Never", **_pod_spec(cpu_nodes)}
        client.BatchV1Api(_client(stack, teams[team])).create_namespaced_job(ns[team], {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/priority-class": "production"}},
            "spec": {"parallelism": pods_, "completions": pods_, "template": {
                "metadata": {"annotations": dict(RUNS)}, "spec": spec}}})
        created.append(("Job", ns[team], name))
        return name

    def routers() -> list[dict[str, Any]]:
        return [w for w in _workloads(stack, ns[SERVING]) if router in w["metadata"]["name"]]

    def running_routers() -> list[Any]:
        found = [p for p in pods(stack, ns[SERVING], f"app.kubernetes.io/instance={router}")
                 if p.spec.node_name and p.status.phase == "Running" and p.metadata.deletion_timestamp is None]
        return found if len(found) == 4 else []

    def job_workload(namespace: str, name: str) -> dict[str, Any]:
        return next((w for w in _workloads(stack, namespace) if name in w["metadata"]["name"]), {})

    try:
        assert wait_for(lambda: len([w for w in routers() if _admitted(w)]) == 4, 90), routers()
        assert {f["flavors"]["cpu"] for w in routers() for f in w["status"]["admission"]["podSetAssignments"]} == \
            {cfg.cpu_pool.name}
        assert wait_for(running_routers, 90), running.logs()
        before = {p.metadata.name for p in running_routers()}
        fillers = [(ns[team], job(team, 4)) for team in ("recsys", "vision")]  # the rest of the pool
        assert wait_for(lambda: all(_admitted(job_workload(*f)) for f in fillers), 90), \
            [condition(job_workload(*f), "QuotaReserved") for f in fillers]
        wanting = job("ml-research", 2)

        def reclaimed() -> bool:
            return any(_preempted(w) for w in routers()) or _admitted(job_workload(ns["ml-research"], wanting))

        def waits() -> bool:
            message = str(condition(job_workload(ns["ml-research"], wanting), "QuotaReserved").get("message"))
            return "insufficient" in message
        assert wait_for(waits, 60), job_workload(ns["ml-research"], wanting)

        def share(queue: str) -> int | None:
            found = custom(stack).get_cluster_custom_object_status(KUEUE, "v1beta2", "clusterqueues", queue)
            weighted = ((found.get("status") or {}).get("fairSharing") or {}).get("weightedShare")
            return None if weighted is None else int(weighted)
        # Fair sharing counts only what a queue uses above its quota: recsys borrows the pool, inference,
        # holding its share as quota and never borrowing, has none to count (explain's weight split).
        assert wait_for(lambda: (share("recsys") or 0) > 0 and share(SERVING) == 0, 60), \
            (share("recsys"), share(SERVING))
        # Kueue tries again on every change in the cohort; a preemption would come within seconds.
        assert not wait_for(reclaimed, 20), [condition(w, "Preempted") for w in routers()]
        assert {p.metadata.name for p in running_routers()} == before
        assert all(_admitted(w) and not _preempted(w) for w in routers()), routers()
    finally:
        for kind, namespace, name in created:
            with contextlib.suppress(client.exceptions.ApiException):
                if kind == "Deployment":
                    client.AppsV1Api(stack.client()).delete_namespaced_deployment(name, namespace)
                elif kind == "Service":
                    client.CoreV1Api(stack.client()).delete_namespaced_service(name, namespace)
                else:
                    client.BatchV1Api(stack.client()).delete_namespaced_job(name, namespace,
                                                                            propagation_policy="Foreground")
        assert wait_for(lambda: not any(name in w["metadata"]["name"] for _, namespace, name in created
                                        for w in _workloads(stack, namespace)), 90)

    out = run(REPO, "explain", "team", SERVING).out
    assert f"in {CLUSTER}: job profile {PROFILE} (deployment) is CPU-only: 4 pods of {POD['cpu']} CPUs and " \
        f"{POD['memory']} ({limit.cpu} CPUs and 240Gi in all) on cpuPool {cfg.cpu_pool.name} of {CLUSTER}, within " \
        f"the {limit.cpu} CPUs and {limit.memory} it may hold there (held for the team: never preempted)" in out, out
    assert "- its workloads are never preempted, by any team or by its own: its queue never borrows " \
        f"(borrowingLimit 0 in every flavor: a100, l40s, cpuPool {cfg.cpu_pool.name})" in out, out
    assert f"- the cost: it never borrows idle GPUs or CPUs, and runs only on what it holds: 8 a100 GPUs, 32 l40s " \
        f"GPUs, of cpuPool {cfg.cpu_pool.name} {limit.cpu} CPUs and {limit.memory}" in out, out
    assert "- fair sharing: weight 1, which never counts: its queue never borrows, so it takes no share of what " \
        "its cohort's teams borrow" in out, out
    assert "inference never borrows (policy.neverPreempted) and takes none of it" in out, out
    assert f"CPU-only jobs run on cpuPool {cfg.cpu_pool.name} first, up to the {limit.cpu} CPUs and {limit.memory} " \
        "of it held for the team" in out, out
