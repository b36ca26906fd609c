"""Issue 32, Ray clusters under Kueue: prod-east's `operators.ray` on its fleet twin.

prod-east as rendered on the real API server with Kueue and JobSet, the CRDs of KubeRay's chart (the
kuberay module at the pin), and the real KubeRay operator (built from its module) started as its
chart deploys it: the args `helm template` makes of prod-east's values, under the chart's own
ServiceAccount and RBAC (a TokenRequest token; only where it listens is changed). kube-scheduler
binds pods to Nodes made from clusters/prod-east.yaml and kwok runs them.

A member of ml-research creates a RayCluster on the team's queue: Kueue admits it against the team's
quota, the operator creates its head and GPU workers, and they are bound to the CPU pool and the H100
pool as Kueue placed them. A second one, beyond what the team may borrow, stays suspended with no
pods. A member of another team may not create one in ml-research's namespace.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.config.fleet import Fleet
from generator.errors import UsageError
from tests.conftest import REPO, run
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom, fake_nodes
from tests.upstream.operators import RAY, ray_all_gone, ray_crds, start_kuberay
from tests.upstream.processes import wait_for
from tests.upstream.twin import LOG, MANAGED, Twin, operator_twin, pods

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, OTHER = "prod-east", "ml-research", "llm-pretrain"


@pytest.fixture(scope="module")
def ray_twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    with operator_twin(CLUSTER, upstream_etcd, tmp_path_factory.mktemp(f"ray-{CLUSTER}"), ray_crds(),
                       start_kuberay) as running:
        yield running


def ray_cluster(name: str, queue: str, workers: int, gpus: int) -> dict[str, Any]:
    """A RayCluster as a notebook user writes one: a CPU head, `workers` workers of `gpus` GPUs each."""
    def group(container: str, requests: dict[str, str]) -> dict[str, Any]:
        return {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": container, "image": "rayproject/ray:2.52.0",
             "resources": {"requests": requests, "limits": requests}}]}}}
    worker = {"groupName": "gpu", "replicas": workers, "minReplicas": workers, "maxReplicas": workers,
              **group("ray-worker", {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": str(gpus)})}
    return {"apiVersion": f"{RAY}/v1", "kind": "RayCluster",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"rayVersion": "2.52.0", "headGroupSpec": group("ray-head", {"cpu": "2", "memory": "8Gi"}),
                     "workerGroupSpecs": [worker]}}


def workload_of_ray(stack: Stack, namespace: str, name: str) -> dict[str, Any] | None:
    objects = custom(stack)
    uid = objects.get_namespaced_custom_object(RAY, "v1", namespace, "rayclusters", name)["metadata"]["uid"]
    found = objects.list_namespaced_custom_object(KUEUE, "v1beta2", namespace, "workloads",
                                                  label_selector=f"kueue.x-k8s.io/job-uid={uid}")
    return found["items"][0] if found["items"] else None


def test_a_members_ray_cluster_is_queued_admitted_and_placed_in_its_pools(
        ray_twin: tuple[Stack, Fleet, Twin]) -> None:
    from kubernetes.client.exceptions import ApiException

    stack, fleet, twin = ray_twin
    team, other = fleet.teams[TEAM].config, fleet.teams[OTHER].config
    ns, queue = team.namespace_names[0], team.queue_for(fleet.clusters[CLUSTER].config, "h100")
    member = custom(stack, stack.client(f"ray-member@{TEAM}.test", (team.members.groups[0],)))
    outsider = custom(stack, stack.client(f"ray-member@{OTHER}.test", (other.members.groups[0],)))
    with pytest.raises(ApiException) as refused:
        outsider.create_namespaced_custom_object(RAY, "v1", ns, "rayclusters", ray_cluster("intruder", queue, 1, 8))
    assert refused.value.status == 403

    member.create_namespaced_custom_object(RAY, "v1", ns, "rayclusters", ray_cluster("small", queue, 2, 8))
    assert wait_for(lambda: condition(workload_of_ray(stack, ns, "small"), "Admitted").get("status") == "True",
                    60), workload_of_ray(stack, ns, "small")
    pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(
        fleet.clusters[CLUSTER].config)}

    def placed() -> dict[str, str]:
        found = [p for p in pods(stack, ns, "ray.io/cluster=small") if p.spec.node_name and p.status.phase == "Running"]
        return {p.metadata.name: pool_of[p.spec.node_name] for p in found} if len(found) == 3 else {}
    where = wait_for(placed, 90)
    seen = [(p.metadata.name, p.spec.node_name, p.status.phase) for p in pods(stack, ns, "ray.io/cluster=small")]
    assert where, f"{seen}\n{twin.logs()}"
    assert sorted(where.values()) == sorted(["cpu", "h100", "h100"]), where
    # The admitted GPUs are charged to the team's queue: 16 of its 64.
    admitted = workload_of_ray(stack, ns, "small")["status"]["admission"]  # type: ignore[index]
    assert admitted["clusterQueue"] == team.name

    # 11 more workers of 8 GPUs: 104 with the first, 8 beyond 64 guaranteed and 32 borrowable.
    member.create_namespaced_custom_object(RAY, "v1", ns, "rayclusters", ray_cluster("large", queue, 11, 8))
    assert wait_for(lambda: "nvidia.com/gpu in flavor h100, 8 more needed" in str(condition(
        workload_of_ray(stack, ns, "large"), "QuotaReserved").get("message")), 60), \
        condition(workload_of_ray(stack, ns, "large"), "QuotaReserved")
    large = member.get_namespaced_custom_object(RAY, "v1", ns, "rayclusters", "large")
    assert large["spec"]["suspend"] is True and pods(stack, ns, "ray.io/cluster=large") == []

    for name in ("small", "large"):
        member.delete_namespaced_custom_object(RAY, "v1", ns, "rayclusters", name)
    assert wait_for(lambda: ray_all_gone(stack, ns), 60)


def test_a_notebook_brings_a_ray_cluster_up_follows_it_and_takes_it_down(ray_twin: tuple[Stack, Fleet, Twin]) -> None:
    """Issue 32's notebook story with the Python API, as a member of ml-research: a dry run creates
    nothing; `up()`, `wait_ready()` once KubeRay calls it ready (every pod Running); `details()` names the
    head Service KubeRay made and its dashboard port; one too large for the team's quota is `pending`
    with Kueue's reason and its place in the queue; `down()` removes both and their pods."""
    from kubernetes import client

    from generator.jobs import ClusterError, connect
    from generator.jobs.ray import ClusterConfiguration, RayCluster

    stack, fleet, _ = ray_twin
    team = fleet.teams[TEAM].config
    ns, queue = team.namespace_names[0], team.queue_for(fleet.clusters[CLUSTER].config, "h100")
    who = stack.identity(f"notebook@{TEAM}.test", (team.members.groups[0],))
    api = connect(kubeconfig=str(who.kubeconfig))

    def config(name: str, workers: int) -> ClusterConfiguration:
        return ClusterConfiguration(name=name, namespace=ns, queue=queue, image="rayproject/ray:2.52.0",
                                    workers=workers, worker_gpus=8, worker_cpus="16", worker_memory="128Gi")

    tune = RayCluster(config("nb-tune", 2), api)
    tune.up(dry_run=True)
    with pytest.raises(ClusterError, match="404"):
        tune.status()
    tune.up()
    ready = tune.wait_ready(timeout_seconds=120)
    assert ready.phase == "ready" and len(ready.pods) == 3, ready
    details = tune.details()
    service = client.CoreV1Api(stack.client()).read_namespaced_service(details.head_service, ns)
    assert {p.name: p.port for p in service.spec.ports}["dashboard"] == 8265
    assert details.dashboard == f"http://{service.metadata.name}.{ns}.svc:8265"
    assert details.dashboard_via_api.endswith(f"/namespaces/{ns}/services/{service.metadata.name}:dashboard/proxy/")
    review = client.AuthorizationV1Api(api.client).create_self_subject_access_review({"spec": {"resourceAttributes": {
        "verb": "get", "resource": "services", "subresource": "proxy", "name": service.metadata.name,
        "namespace": ns}}})
    assert review.status.allowed, review.status  # the member may open the dashboard through the API server
    assert (details.workers, details.worker_gpus) == (2, 8)
    # Ray's log: the head's (rank 0), then each worker's, in name order, from the pod's Ray container.
    assert list(tune.logs()) == LOG.splitlines() == list(tune.logs(rank=2))
    with pytest.raises(UsageError, match="no rank 3 in Ray cluster nb-tune: it has 3 pods now"):
        list(tune.logs(rank=3))

    big = RayCluster(config("nb-big", 11), api).up()
    assert wait_for(lambda: "8 more needed" in big.status().reason, 60), big.status()
    waiting = big.status()
    assert waiting.phase == "pending" and waiting.pods == {}, waiting
    assert waiting.position.startswith("position 1 in queue"), waiting

    # The command line, on the same clusters: `--kind raycluster`, and a hint where it was left out.
    login = ("--namespace", ns, "--kubeconfig", str(who.kubeconfig))
    said = run(REPO, "job", "status", "nb-tune", "--kind", "raycluster", *login)
    assert (said.code, said.out.strip()) == (0, "nb-tune: ready"), said
    said = run(REPO, "job", "status", "nb-big", "--kind", "raycluster", *login)
    assert said.code == 0 and said.out.startswith("nb-big: pending (position 1 in queue"), said
    said = run(REPO, "job", "status", "nb-tune", *login)
    assert said.code == 2 and f"{ns}/nb-tune is a RayCluster, not a JobSet: fleetgen job status nb-tune " \
        f"--namespace {ns} --kind raycluster" in said.err, said
    said = run(REPO, "job", "logs", "nb-tune", "--kind", "raycluster", "--rank", "1", *login)
    assert (said.code, said.out) == (0, LOG), said
    said = run(REPO, "job", "logs", "nb-tune", *login)
    assert said.code == 2 and "is a RayCluster, not a JobSet" in said.err and "--kind raycluster" in said.err, said
    said = run(REPO, "job", "wait", "nb-tune", "--kind", "raycluster", "--for", "running", "--timeout", "30", *login)
    assert (said.code, said.out.strip()) == (0, "nb-tune: ready"), said
    said = run(REPO, "job", "wait", "nb-big", "--kind", "raycluster", "--for", "admitted", "--timeout", "3",
               "--interval", "1", *login)
    assert said.code == 2 and "Ray cluster nb-big is not admitted after 3 s; it is nb-big: pending" in said.err, said
    said = run(REPO, "job", "wait", "nb-big", "--kind", "raycluster", "--for", "finished", *login)
    assert said.code == 2 and "a RayCluster does not finish" in said.err, said
    said = run(REPO, "job", "list", *login)
    listed = said.out.splitlines()
    assert said.code == 0 and len(listed) == 2 and listed[1] == f"{ns}/nb-tune: ready (RayCluster)", said
    assert listed[0].startswith(f"{ns}/nb-big: pending (position 1 in queue") and listed[0].endswith(" (RayCluster)")
    said = run(REPO, "job", "cancel", "nb-big", "--kind", "raycluster", *login)
    assert said.code == 0, said
    tune.down()
    assert wait_for(lambda: ray_all_gone(stack, ns), 60)
    with pytest.raises(ClusterError, match="404"):
        RayCluster.on_cluster(api, "nb-tune", ns).status()


def test_a_members_ray_job_profile_is_admitted_run_on_its_pools_and_cancelled(
        ray_twin: tuple[Stack, Fleet, Twin], tmp_path: Path) -> None:
    """A `kind: rayjob` profile through `fleetgen job` as a member of ml-research: `job submit` creates the
    RayJob; Kueue admits it against the team's quota; the real KubeRay makes its Ray cluster, whose head
    and two H100 workers are bound to the CPU pool and the H100 pool, pinned by the profile; `job status
    --kind rayjob` and `job list` follow it; `job cancel --kind rayjob` removes it and its cluster."""
    stack, fleet, twin = ray_twin
    team = fleet.teams[TEAM].config
    ns = team.namespace_names[0]
    who = stack.identity(f"ray-job@{TEAM}.test", (team.members.groups[0],))
    kubeconfig = ("--kubeconfig", str(who.kubeconfig))
    submitted = run(REPO, "job", "submit", TEAM, "tune-sweep", *kubeconfig)
    assert submitted.code == 0, submitted.err
    objects = custom(stack)

    def rayjob() -> dict[str, Any]:
        found: dict[str, Any] = objects.get_namespaced_custom_object(RAY, "v1", ns, "rayjobs", "tune-sweep")
        return found

    def workload() -> dict[str, Any] | None:
        found = objects.list_namespaced_custom_object(KUEUE, "v1beta2", ns, "workloads", label_selector=(
            f"kueue.x-k8s.io/job-uid={rayjob()['metadata']['uid']}"))["items"]
        return found[0] if found else None
    try:
        assert wait_for(lambda: condition(workload(), "Admitted").get("status") == "True", 60), workload()
        assert workload()["status"]["admission"]["clusterQueue"] == team.name  # type: ignore[index]
        pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(
            fleet.clusters[CLUSTER].config)}

        def placed() -> list[str]:
            # Read each look: KubeRay names a Ray cluster when it first sees the RayJob, drops the name when
            # Kueue's webhook has it suspended, and names a new one once it is admitted (ray-operator v1.6.2
            # controllers/ray/rayjob_controller.go:394,879-881); a name read early never gets pods.
            cluster = rayjob().get("status", {}).get("rayClusterName")
            found = [p for p in pods(stack, ns, f"ray.io/cluster={cluster}") if p.spec.node_name] if cluster else []
            return sorted(pool_of[p.spec.node_name] for p in found) if len(found) == 3 else []
        assert wait_for(placed, 90) == ["cpu", "h100", "h100"], f"{rayjob().get('status')}\n{twin.logs()}"
        status = run(REPO, "job", "status", "tune-sweep", "-n", ns, "--kind", "rayjob", *kubeconfig)
        assert status.code == 0 and status.out.startswith("tune-sweep: ") and \
            ("admitted" in status.out or "running" in status.out), status.out + status.err
        hinted = run(REPO, "job", "status", "tune-sweep", "-n", ns, *kubeconfig)
        assert hinted.code == 2 and "is a RayJob, not a JobSet" in hinted.err and "--kind rayjob" in hinted.err
        listed = run(REPO, "job", "list", "-n", ns, *kubeconfig)
        assert listed.code == 0 and f"{ns}/tune-sweep: " in listed.out and "(RayJob)" in listed.out, \
            listed.out + listed.err
        assert "(RayCluster)" not in listed.out  # the RayJob's own cluster is the RayJob's, not listed again
    finally:
        cancelled = run(REPO, "job", "cancel", "tune-sweep", "-n", ns, "--kind", "rayjob", *kubeconfig)
        assert cancelled.code == 0, cancelled.err
    assert wait_for(lambda: not objects.list_namespaced_custom_object(RAY, "v1", ns, "rayjobs")["items"]
                    and ray_all_gone(stack, ns), 90)


def test_a_members_ray_cluster_profile_comes_up_on_its_pools_and_goes(
        ray_twin: tuple[Stack, Fleet, Twin], tmp_path: Path) -> None:
    """A `kind: raycluster` profile (ml-research's `workbench`) through `fleetgen job` as a member: `job new`
    writes the RayCluster, `job submit --dry-run` checks it and passes it through the API server and
    Kueue's webhook without creating it, `job submit TEAM PROFILE` creates it; Kueue admits it against the
    team's quota with the profile's execution limit, the real KubeRay makes its head and H100 worker, bound
    to the CPU and H100 pools; `job wait --kind raycluster` sees it ready; `job cancel` takes it down."""
    stack, fleet, twin = ray_twin
    team = fleet.teams[TEAM].config
    ns = team.namespace_names[0]
    who = stack.identity(f"workbench@{TEAM}.test", (team.members.groups[0],))
    kubeconfig = ("--kubeconfig", str(who.kubeconfig))
    objects = custom(stack)
    written = tmp_path / "workbench.yaml"
    made = run(REPO, "job", "new", TEAM, "workbench", "--name", "bench", "-o", str(written))
    assert made.code == 0 and "wrote" in made.err and "RayCluster ml-research/bench" in made.err, made
    dry = run(REPO, "job", "submit", str(written), "--dry-run", *kubeconfig)
    assert dry.code == 0 and "capacity: 8 GPUs of at most" in dry.out and "nothing was created" in dry.out, dry
    assert objects.list_namespaced_custom_object(RAY, "v1", ns, "rayclusters")["items"] == []
    submitted = run(REPO, "job", "submit", TEAM, "workbench", *kubeconfig)
    assert submitted.code == 0 and submitted.out.strip().endswith(
        f"fleetgen job status workbench --namespace {ns} --kind raycluster"), submitted
    try:
        assert wait_for(lambda: condition(workload_of_ray(stack, ns, "workbench"), "Admitted").get("status")
                        == "True", 60), workload_of_ray(stack, ns, "workbench")
        spec = workload_of_ray(stack, ns, "workbench")["spec"]  # type: ignore[index]
        assert spec["maximumExecutionTimeSeconds"] == 8 * 3600  # Kueue read the profile's maxExecutionTime
        pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(
            fleet.clusters[CLUSTER].config)}

        def placed() -> list[str]:
            found = [p for p in pods(stack, ns, "ray.io/cluster=workbench") if p.spec.node_name]
            return sorted(pool_of[p.spec.node_name] for p in found) if len(found) == 2 else []
        assert wait_for(placed, 90) == ["cpu", "h100"], twin.logs()
        [worker] = pods(stack, ns, "ray.io/cluster=workbench,ray.io/node-type=worker")
        # The profile's pinning (Kueue's topology assignment adds the node's hostname beside it)
        assert worker.spec.node_selector["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3", worker.spec
        ready = run(REPO, "job", "wait", "workbench", "-n", ns, "--kind", "raycluster", "--for", "running",
                    "--timeout", "90", *kubeconfig)
        assert (ready.code, ready.out.splitlines()[-1]) == (0, "workbench: ready"), ready  # after its progress
    finally:
        cancelled = run(REPO, "job", "cancel", "workbench", "-n", ns, "--kind", "raycluster", *kubeconfig)
        assert cancelled.code == 0, cancelled
    assert wait_for(lambda: ray_all_gone(stack, ns), 90)
