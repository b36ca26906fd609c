"""Issue 17: the example fleet's MultiKueue manager (hub) dispatching to a worker (prod-west), on
two real API servers with a Kueue manager and JobSet on each. Issue 32: both run KubeRay
(`operators.ray`: its CRDs, and the real operator built from its module), so the manager dispatches
RayJobs and RayClusters too: the worker's operator runs them, the manager's leaves its copies alone. Both
serve Kubeflow Trainer's CRDs: the worker runs the real Trainer controller, the manager only its runtime
(as the hub's chart values install it: no controller), so TrainJobs are dispatched as well.

The worker's side is set up as README says: its rendered ServiceAccount's token Secret (filled by
the worker's real token controller) becomes a kubeconfig, stored as the Secret the manager's
rendered MultiKueueCluster names. prod-east's MultiKueueCluster stays without one (inactive), as a
worker not yet bootstrapped would.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.checks import load_fleet
from generator.config.cluster import MultiKueue
from generator.config.fleet import Fleet
from generator.jobs.job import Job
from tests.conftest import REPO, SHARED
from tests.upstream.charts import helm_template
from tests.upstream.cluster import Stack
from tests.upstream.fleet import (
    JOBSET,
    KUEUE,
    condition,
    create_nodes,
    custom,
    deploy,
    fake_nodes,
    gpu_jobset,
    kustomize_build,
    rendered_kueue_config,
    workload_of,
)
from tests.upstream.operators import RAY, ray_crds, start_kuberay, start_trainer, trainer_crds
from tests.upstream.processes import wait_for

RENDERED = REPO / "rendered"
MANAGER, WORKER = "hub", "prod-west"


@dataclass
class Pair:
    manager: Stack
    worker: Stack
    fleet: Fleet


def _start(fleet: Fleet, name: str, etcd: Any, tmp: Path, controllers: tuple[str, ...] = ()) -> Stack:
    """The rendered cluster (its tree and GitOps wiring) applied to a Stack of its own, all accepted."""
    objects = kustomize_build(RENDERED / name) + kustomize_build(RENDERED / "gitops" / name)
    stack = Stack.start(tmp / name, etcd, kueue_config=rendered_kueue_config(objects), extra_controllers=controllers,
                        crds=ray_crds() + trainer_crds())
    try:
        create_nodes(stack, fake_nodes(fleet.clusters[name].config))
        refused, _ = deploy(stack, fleet.clusters[name].config, objects, SHARED / "schemas")
        assert refused == [], refused
        stack.processes["kuberay-operator"] = start_kuberay(stack, tmp / name, name)
        if fleet.clusters[name].config.multikueue is None:
            stack.processes["kubeflow-trainer"] = start_trainer(stack, tmp / name, name)
        else:  # the chart's runtime, with no controller (manager.replicas: 0) and so no webhook to answer
            for doc in helm_template("kubeflow-trainer", name, "kubeflow-system", tmp / name):
                if doc["kind"] == "ClusterTrainingRuntime":
                    custom(stack).create_cluster_custom_object("trainer.kubeflow.org", "v1alpha1",
                                                               "clustertrainingruntimes", doc)
    except BaseException:
        stack.stop()
        raise
    return stack


def worker_kubeconfig(worker: Stack, manager: str) -> str:
    """README's bootstrap: the token Secret rendered on the worker, as a kubeconfig for the manager."""
    from kubernetes import client

    core = client.CoreV1Api(worker.client())
    name = f"multikueue-{manager}-token"
    assert wait_for(lambda: bool((core.read_namespaced_secret(name, "kueue-system").data or {}).get("token")), 30), \
        "the token controller did not fill the rendered token Secret"
    data = core.read_namespaced_secret(name, "kueue-system").data
    token = base64.b64decode(data["token"]).decode()
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "worker",
           "clusters": [{"name": "worker", "cluster": {"server": worker.server,
                                                        "certificate-authority-data": data["ca.crt"]}}],
           "users": [{"name": f"multikueue-{manager}", "user": {"token": token}}],
           "contexts": [{"name": "worker", "context": {"cluster": "worker", "user": f"multikueue-{manager}"}}]}
    return yaml.safe_dump(doc)


@pytest.fixture(scope="module")
def pair(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from kubernetes import client

    fleet = load_fleet(REPO)
    tmp = tmp_path_factory.mktemp("multikueue")
    worker = _start(fleet, WORKER, upstream_etcd, tmp, controllers=("serviceaccount-token-controller",))
    try:
        manager = _start(fleet, MANAGER, upstream_etcd, tmp)
        try:
            client.CoreV1Api(manager.client()).create_namespaced_secret("kueue-system", {
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": MultiKueue.secret(WORKER)},
                "stringData": {"kubeconfig": worker_kubeconfig(worker, MANAGER)}})

            def queues_active() -> bool:
                """vision's LocalQueues on the manager, active once the check is (they lag the ClusterQueue:
                a member's pre-submit check read one still inactive)."""
                found = custom(manager).list_namespaced_custom_object(KUEUE, "v1beta2", "vision", "localqueues")
                return bool(found["items"]) and all(condition(q, "Active").get("status") == "True"
                                                    for q in found["items"])
            assert wait_for(queues_active, 90), "vision's LocalQueues on the manager stayed inactive"
            yield Pair(manager, worker, fleet)
        finally:
            manager.stop()
    finally:
        worker.stop()


def workloads(stack: Stack, namespace: str) -> list[dict[str, Any]]:
    """Every Workload of a namespace (on a worker: those MultiKueue created there too)."""
    return list(custom(stack).list_namespaced_custom_object(KUEUE, "v1beta2", namespace, "workloads")["items"])


def test_the_manager_connects_to_the_bootstrapped_worker_only(pair: Pair) -> None:
    objects = custom(pair.manager)

    def active(name: str) -> dict[str, Any]:
        return condition(objects.get_cluster_custom_object(KUEUE, "v1beta2", "multikueueclusters", name), "Active")

    assert wait_for(lambda: active(WORKER).get("status") == "True", 60), active(WORKER)
    assert active("prod-east").get("status") == "False"  # no kubeconfig Secret for it here
    check = objects.get_cluster_custom_object(KUEUE, "v1beta2", "admissionchecks", "multikueue-vision")
    assert wait_for(lambda: condition(objects.get_cluster_custom_object(
        KUEUE, "v1beta2", "admissionchecks", "multikueue-vision"), "Active").get("status") == "True", 60), check


def test_a_members_jobset_is_dispatched_to_the_worker_and_admitted_there(pair: Pair) -> None:
    team = pair.fleet.teams["vision"].config
    ns = team.namespace_names[0]
    member = pair.manager.identity(f"e2e@{team.name}.test", (team.members.groups[0],))
    name = f"dispatch-{uuid.uuid4().hex[:5]}"
    submitted = custom(pair.manager, pair.manager.client(member.user, (team.members.groups[0],)))
    submitted.create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", gpu_jobset(team, name, 1, 4))
    try:
        assert wait_for(lambda: condition(workload_of(pair.manager, ns, name), "Admitted").get("status") == "True",
                        90), workload_of(pair.manager, ns, name)
        local = workload_of(pair.manager, ns, name) or {}
        [state] = local["status"]["admissionChecks"]
        assert state["name"] == "multikueue-vision" and state["state"] == "Ready", state
        remote = [w for w in workloads(pair.worker, ns) if w["metadata"]["name"] == local["metadata"]["name"]]
        assert remote and condition(remote[0], "Admitted").get("status") == "True", remote
        assert remote[0]["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == MANAGER
        # On the worker the job runs on the team's own pool there, whatever the manager reserved.
        assigned = {f for ps in remote[0]["status"]["admission"]["podSetAssignments"] for f in ps["flavors"].values()}
        assert assigned == {"l40s"}
        assert custom(pair.worker).get_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name)
        # What `fleetgen job status` says on the manager.
        ref = {"apiVersion": f"{JOBSET}/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace": ns}}
        status = Job(ref, pair.manager.connection(member.user, (team.members.groups[0],))).status()
        assert (status.phase, status.reason) == ("admitted", "dispatched by MultiKueue to worker cluster prod-west")
    finally:
        custom(pair.manager).delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name,
                                                             propagation_policy="Foreground")


def test_a_members_batch_job_is_dispatched_to_the_worker_too(pair: Pair) -> None:
    """A one-node `kind: job` defined in Python and submitted on the manager: MultiKueue copies the
    batch Job to the worker, which admits it on the team's pool there (a multi-node one is refused at
    render: its Service would not follow it)."""
    team = pair.fleet.teams["vision"].config
    ns = team.namespace_names[0]
    member = pair.manager.identity(f"e2e-batch@{team.name}.test", (team.members.groups[0],))
    api = pair.manager.connection(member.user, (team.members.groups[0],))
    name = f"batch-{uuid.uuid4().hex[:5]}"
    job = Job.define("vision", name, "registry.example/e2e:1", ["python", "eval.py"], cluster=MANAGER, pool="l40s",
                     gpus_per_node=4, kind="job", root=REPO, api=api)
    job.submit()
    try:
        assert wait_for(lambda: condition(workload_of(pair.manager, ns, name, "Job"), "Admitted").get("status")
                        == "True", 90), workload_of(pair.manager, ns, name, "Job")
        local = workload_of(pair.manager, ns, name, "Job") or {}
        remote = [w for w in workloads(pair.worker, ns) if w["metadata"]["name"] == local["metadata"]["name"]]
        assert remote and condition(remote[0], "Admitted").get("status") == "True", remote
        assigned = {f for ps in remote[0]["status"]["admission"]["podSetAssignments"] for f in ps["flavors"].values()}
        assert assigned == {"l40s"}
        assert custom(pair.worker).get_namespaced_custom_object("batch", "v1", ns, "jobs", name)["spec"]["suspend"] \
            is False
        status = Job.on_cluster(api, name, ns, "Job").status()
        assert (status.phase, status.reason) == ("admitted", "dispatched by MultiKueue to worker cluster prod-west")
    finally:
        job.cancel()


def test_without_quota_on_the_worker_the_job_waits_on_the_manager(pair: Pair) -> None:
    """The worker's queue for the team given no GPUs (and no borrowing): the dispatched copy waits
    there for quota, and the manager's Workload keeps its quota reserved with the MultiKueue check
    pending, saying where it was sent; with the quota back, it is admitted on both."""
    from generator.compile.kueue import cluster_queue
    from generator.config.fleet import Loaded
    from generator.config.team import PoolQuota
    from generator.jobs.workloads import why_pending
    from tests.upstream.fleet import apply

    loaded = pair.fleet.teams["vision"]
    team = loaded.config
    starved = {**team.quotas, WORKER: {"l40s": PoolQuota(gpus=0, borrowing_limit=0)}}
    cluster = pair.fleet.clusters[WORKER]
    original = cluster_queue(cluster, loaded).body
    apply(pair.worker, cluster_queue(cluster, Loaded(team.model_copy(update={"quotas": starved}), loaded.source)).body)
    ns, name = team.namespace_names[0], f"starved-{uuid.uuid4().hex[:5]}"
    custom(pair.manager).create_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets",
                                                         gpu_jobset(team, name, 1, 4))
    try:
        def state() -> dict[str, Any]:
            states = ((workload_of(pair.manager, ns, name) or {}).get("status") or {}).get("admissionChecks") or []
            return dict(states[0]) if states else {}

        def remote() -> dict[str, Any] | None:
            local = workload_of(pair.manager, ns, name) or {}
            found = [w for w in workloads(pair.worker, ns) if w["metadata"]["name"] == local["metadata"]["name"]]
            return found[0] if found else None

        assert wait_for(lambda: "insufficient" in str(condition(remote(), "QuotaReserved").get("message")), 60), \
            remote()
        local = workload_of(pair.manager, ns, name)
        assert condition(local, "QuotaReserved").get("status") == "True"
        assert condition(local, "Admitted").get("status") != "True"
        assert state().get("state") == "Pending", state()
        assert (local or {})["status"]["nominatedClusterNames"] == [WORKER]
        assert why_pending(local or {}) == "quota reserved, waiting for admission checks: multikueue-vision=Pending; " \
            "dispatched by MultiKueue to prod-west, not admitted there yet"
        apply(pair.worker, original)
        assert wait_for(lambda: condition(workload_of(pair.manager, ns, name), "Admitted").get("status") == "True",
                        90), (state(), remote())
    finally:
        apply(pair.worker, original)
        custom(pair.manager).delete_namespaced_custom_object(JOBSET, "v1alpha2", ns, "jobsets", name,
                                                             propagation_policy="Foreground")


def _worker_copy(pair: Pair, ns: str, plural: str, name: str) -> dict[str, Any] | None:
    from kubernetes.client.exceptions import ApiException

    try:
        found: dict[str, Any] = custom(pair.worker).get_namespaced_custom_object(RAY, "v1", ns, plural, name)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return found


def _admitted_on_both(pair: Pair, ns: str, name: str, kind: str) -> dict[str, Any]:
    """The manager's Workload for the job admitted, and its copy on the worker admitted there."""
    assert wait_for(lambda: condition(workload_of(pair.manager, ns, name, kind), "Admitted").get("status") == "True",
                    90), workload_of(pair.manager, ns, name, kind)
    local = workload_of(pair.manager, ns, name, kind) or {}
    assert local["status"]["clusterName"] == WORKER
    remote = [w for w in workloads(pair.worker, ns) if w["metadata"]["name"] == local["metadata"]["name"]]
    assert remote and condition(remote[0], "Admitted").get("status") == "True", remote
    assert remote[0]["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == MANAGER
    return remote[0]


def test_a_members_ray_job_is_dispatched_to_a_worker_whose_kuberay_runs_it(pair: Pair) -> None:
    """A RayJob defined in Python and submitted on the manager as a member: Kueue's webhook hands it
    to MultiKueue (`spec.managedBy`), the worker admits its copy on the team's pool there, and the
    worker's KubeRay makes its Ray cluster and pods; the manager's KubeRay makes nothing, and the
    manager's RayJob carries the worker's status. Cancelled, the copy goes too."""
    team = pair.fleet.teams["vision"].config
    ns = team.namespace_names[0]
    member = pair.manager.identity(f"e2e-ray@{team.name}.test", (team.members.groups[0],))
    api = pair.manager.connection(member.user, (team.members.groups[0],))
    name = f"rayjob-{uuid.uuid4().hex[:5]}"
    job = Job.define("vision", name, "rayproject/ray:2.52.0", ["python", "-c", "print('hello')"], cluster=MANAGER,
                     pool="l40s", gpus_per_node=4, kind="rayjob", root=REPO, api=api)
    job.submit()
    try:
        local = custom(pair.manager).get_namespaced_custom_object(RAY, "v1", ns, "rayjobs", name)
        assert local["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        remote = _admitted_on_both(pair, ns, name, "RayJob")
        assert {f for ps in remote["status"]["admission"]["podSetAssignments"] for f in ps["flavors"].values()} \
            >= {"l40s"}
        copy = _worker_copy(pair, ns, "rayjobs", name) or {}
        assert "managedBy" not in copy.get("spec", {}), copy  # the worker's KubeRay runs it
        assert wait_for(lambda: ((_worker_copy(pair, ns, "rayjobs", name) or {}).get("status") or {}).get(
            "rayClusterName"), 60), _worker_copy(pair, ns, "rayjobs", name)
        ray_cluster = (_worker_copy(pair, ns, "rayjobs", name) or {})["status"]["rayClusterName"]
        core = client_for(pair.worker)
        assert wait_for(lambda: core.list_namespaced_pod(ns, label_selector=f"ray.io/cluster={ray_cluster}").items,
                        60), "the worker's KubeRay made no pods"
        # The manager's KubeRay left its copy alone, and MultiKueue copied the worker's status onto it.
        assert custom(pair.manager).list_namespaced_custom_object(RAY, "v1", ns, "rayclusters")["items"] == []
        assert wait_for(lambda: (custom(pair.manager).get_namespaced_custom_object(
            RAY, "v1", ns, "rayjobs", name).get("status") or {}).get("rayClusterName") == ray_cluster, 60)
        status = Job.on_cluster(api, name, ns, "RayJob").status()
        assert status.phase in ("admitted", "running") and \
            status.reason == "dispatched by MultiKueue to worker cluster prod-west", status
    finally:
        job.cancel()
    assert wait_for(lambda: _worker_copy(pair, ns, "rayjobs", name) is None, 60), "the worker's copy stayed"


def test_a_notebook_ray_cluster_on_the_manager_comes_up_on_the_worker(pair: Pair) -> None:
    """A RayCluster brought up from Python on the manager: admitted there and on the worker, made by the
    worker's KubeRay; its status says where it runs, and `down()` removes the copy too."""
    from generator.jobs import connect
    from generator.jobs.ray import ClusterConfiguration, RayCluster

    team = pair.fleet.teams["vision"].config
    ns = team.namespace_names[0]
    who = pair.manager.identity(f"notebook@{team.name}.test", (team.members.groups[0],))
    queue = team.queue_for(pair.fleet.clusters[MANAGER].config, "l40s")
    name = f"nb-{uuid.uuid4().hex[:5]}"
    cluster = RayCluster(ClusterConfiguration(name=name, namespace=ns, queue=queue, image="rayproject/ray:2.52.0",
                                              workers=1, worker_gpus=4, worker_cpus="8", worker_memory="64Gi"),
                         connect(kubeconfig=str(who.kubeconfig))).up()
    try:
        _admitted_on_both(pair, ns, name, "RayCluster")
        core = client_for(pair.worker)
        assert wait_for(lambda: len(core.list_namespaced_pod(ns, label_selector=f"ray.io/cluster={name}").items) == 2,
                        60), "the worker's KubeRay did not make the head and the worker"
        status = cluster.status()
        assert status.phase == "starting" and status.pods == {}, status
        assert status.reason == "dispatched by MultiKueue to worker cluster prod-west: its pods run there", status
    finally:
        cluster.down()
    assert wait_for(lambda: _worker_copy(pair, ns, "rayclusters", name) is None, 60), "the worker's copy stayed"


def test_a_members_train_job_is_dispatched_to_a_worker_whose_trainer_runs_it(pair: Pair) -> None:
    """A TrainJob defined in Python on the manager: Kueue's webhook hands it to MultiKueue, Kueue builds its
    Workload from the manager's runtime, the worker admits its copy and the worker's Trainer makes its
    JobSet; the manager has no Trainer controller, so nothing there runs it. Cancelled, the copy goes."""
    from kubernetes.client.exceptions import ApiException

    team = pair.fleet.teams["vision"].config
    ns = team.namespace_names[0]
    member = pair.manager.identity(f"e2e-train@{team.name}.test", (team.members.groups[0],))
    api = pair.manager.connection(member.user, (team.members.groups[0],))
    name = f"train-{uuid.uuid4().hex[:5]}"
    job = Job.define("vision", name, "registry.example/train:1", ["python", "train.py"], cluster=MANAGER,
                     pool="l40s", nodes=2, gpus_per_node=4, kind="trainjob", root=REPO, api=api)
    job.submit()
    trainer = ("trainer.kubeflow.org", "v1alpha1", ns, "trainjobs", name)

    def worker_jobset() -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = custom(pair.worker).get_namespaced_custom_object(JOBSET, "v1alpha2", ns,
                                                                                   "jobsets", name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return found
    try:
        assert custom(pair.manager).get_namespaced_custom_object(*trainer)["spec"]["managedBy"] == \
            "kueue.x-k8s.io/multikueue"
        remote = _admitted_on_both(pair, ns, name, "TrainJob")
        assert {f for ps in remote["status"]["admission"]["podSetAssignments"] for f in ps["flavors"].values()} \
            == {"l40s"}
        # MultiKueue cleared it on the copy, and the worker's Trainer webhook made it its own.
        assert custom(pair.worker).get_namespaced_custom_object(*trainer)["spec"]["managedBy"] == \
            "trainer.kubeflow.org/trainjob-controller"
        assert wait_for(worker_jobset, 60), "the worker's Trainer made no JobSet"
        assert (worker_jobset() or {})["spec"]["replicatedJobs"][0]["replicas"] >= 1
        # No JobSet of a TrainJob on the manager (the namespace's JobSets of earlier tests may still be
        # finishing their foreground deletion there: CI once listed two of them).
        made_here = [j["metadata"]["name"] for j in custom(pair.manager).list_namespaced_custom_object(
            JOBSET, "v1alpha2", ns, "jobsets")["items"] if j["metadata"]["name"] == name
            or any(o.get("kind") == "TrainJob" for o in j["metadata"].get("ownerReferences") or [])]
        assert made_here == []
        status = Job.on_cluster(api, name, ns, "TrainJob").status()
        assert status.reason == "dispatched by MultiKueue to worker cluster prod-west", status
    finally:
        job.cancel()

    def copy_gone() -> bool:
        try:
            custom(pair.worker).get_namespaced_custom_object(*trainer)
        except ApiException as e:
            return e.status == 404
        return False
    assert wait_for(copy_gone, 60), "the worker's copy stayed"


def client_for(stack: Stack) -> Any:
    from kubernetes import client

    return client.CoreV1Api(stack.client())
