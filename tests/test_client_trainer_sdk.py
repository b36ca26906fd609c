"""Issue 56, the Kubeflow SDK's TrainerClient as a team member uses it, on prod-east's fleet twin.

The SDK (`kubeflow` 0.4.1, the newest release for Trainer v2.2: tests/upstream/pyenvs.py) runs in its own
environment with a member's kubeconfig, against tests/test_trainer.py's twin: the real Trainer controller,
Kueue, JobSet and scheduler, with the rights fleetgen renders. What each call sends
(kubeflow/trainer/backends/kubernetes/backend.py of 0.4.1; recorded below as the client sends it):

- `TrainerClient()` reads ConfigMap kubeflow-system/kubeflow-trainer-public (:71-78; only a warning when it
  cannot), which Trainer's chart creates and lets every authenticated user read
  (charts/kubeflow-trainer/templates/manager/public-configmap.yaml, rbac/public_configmap_role*.yaml).
- `list_runtimes()` lists ClusterTrainingRuntimes and the namespace's TrainingRuntimes (:96-109): any error
  but a namespaced 404 fails it (:117-134).
- `get_runtime(name)` gets TrainingRuntime `name` in the namespace, and the ClusterTrainingRuntime only after
  a 404 (:176-215): a 403 on the namespaced read fails it even for a cluster runtime.
- `train(...)` gets its runtime so (:757-760) and creates the TrainJob (:333-339).
- `get_job` gets the TrainJob (:400-407), its runtime again (:643) and lists the namespace's pods by JobSet
  labels (:662-666); `wait_for_job_status` polls it (:468-489); `get_job_logs` adds pods/log of the step's
  pod, container `node` (:433-443, :614-618); `list_jobs` lists TrainJobs, then reads each as `get_job`
  does (:358-383); `get_job_events` lists the namespace's events (:527-530); `delete_job` deletes (:495-501).

So beyond TrainJobs and what `edit` gives (pods, pods/log, events), a member needs trainingruntimes get/list
in the namespace and clustertrainingruntimes get/list cluster-wide, as Trainer's own platform manifests grant
users (manifests/overlays/kubeflow-platform/kubeflow-trainer-roles.yaml at v2.2.1); fleetgen renders both
(generator/compile/member_rights.py), and this test runs on nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.config.fleet import Fleet
from tests.upstream import pyenvs
from tests.upstream.charts import helm_template
from tests.upstream.cluster import Stack
from tests.upstream.fleet import KUEUE, condition, custom, fake_nodes
from tests.upstream.operators import TRAINER, TRAINER_NAMESPACE, TRAINER_VERSION, start_trainer, trainer_crds
from tests.upstream.processes import wait_for
from tests.upstream.twin import LOG, MANAGED, Twin, operator_twin, pods

pytestmark = pytest.mark.upstream

CLUSTER, TEAM, OTHER, RUNTIME, PUBLIC = "prod-east", "ml-research", "llm-pretrain", "torch-distributed", \
    "kubeflow-trainer-public"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

CLIENT = '''
import json, sys
from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient
from kubeflow.trainer.options import Labels


def train():  # what each node would run (kwok runs no program)
    print("training")


def status_of(exc):
    while exc is not None and getattr(exc, "status", None) is None:
        exc = exc.__cause__
    return getattr(exc, "status", None)


clients = {}


def client(namespace):
    if namespace not in clients:
        clients[namespace] = TrainerClient(KubernetesBackendConfig(namespace=namespace))
    return clients[namespace]


out = []
for step in json.load(sys.stdin):
    call, sdk = step["call"], client(step["namespace"])
    try:
        if call == "list_runtimes":
            got = sorted(r.name for r in sdk.list_runtimes())
        elif call == "get_runtime":
            runtime = sdk.get_runtime(step["name"])
            got = [runtime.name, runtime.trainer.framework, runtime.trainer.num_nodes]
        elif call == "train":
            runtime = client(step["runtime_from"]).get_runtime(step["runtime"])
            got = sdk.train(runtime=runtime, trainer=CustomTrainer(
                func=train, num_nodes=step["nodes"], resources_per_node={"gpu": step["gpus"]}),
                options=[Labels(step["labels"])] if step["labels"] else None)
        elif call == "wait_for_job_status":
            got = sdk.wait_for_job_status(step["name"], timeout=step["timeout"], polling_interval=1).status
        elif call == "get_job":
            job = sdk.get_job(step["name"])
            got = [job.status, job.num_nodes, sorted([s.name, s.status, s.device, s.device_count] for s in job.steps)]
        elif call == "get_job_logs":
            got = list(sdk.get_job_logs(step["name"]))
        elif call == "get_job_events":
            got = sorted({e.involved_object_kind for e in sdk.get_job_events(step["name"])})
        elif call == "list_jobs":
            got = sorted([j.name, j.status] for j in sdk.list_jobs())
        elif call == "delete_job":
            got = sdk.delete_job(step["name"])
        out.append({"ok": got})
    except Exception as exc:
        out.append({"error": f"{type(exc).__name__}: {exc}", "status": status_of(exc)})
    out[-1]["calls"], CALLS[:] = list(CALLS), []
with open(sys.argv[1], "w") as answer:
    json.dump(out, answer)
'''
"""The SDK's calls, each a step of the request: its answer ("ok") or its error and the HTTP status behind it,
and the requests it sent."""


@pytest.fixture(scope="module")
def kubeflow_sdk() -> str:
    pyenvs.required("kubeflow", "the Kubeflow SDK")
    return "kubeflow"


@pytest.fixture(scope="module")
def trainer_twin(upstream_etcd: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Fleet, Twin]]:
    """tests/test_trainer.py's twin, with the chart's public ConfigMap the SDK reads first (the twin applies
    only the chart's identity, rights and webhooks)."""
    from kubernetes import utils

    workdir = tmp_path_factory.mktemp(f"trainer-sdk-{CLUSTER}")
    with operator_twin(CLUSTER, upstream_etcd, workdir, trainer_crds(), start_trainer) as running:
        (public,) = [d for d in helm_template("kubeflow-trainer", CLUSTER, TRAINER_NAMESPACE, workdir)
                     if d["kind"] == "ConfigMap" and d["metadata"]["name"] == PUBLIC]
        utils.create_from_dict(running[0].client(), public, namespace=TRAINER_NAMESPACE)
        yield running


def calls(steps: list[dict[str, Any]], names: dict[str, str]) -> list[tuple[str, str, int]]:
    """Every request of `steps`, once, each name in `names` replaced by its placeholder and pod names by {pod}."""
    def general(path: str) -> str:
        for name, placeholder in names.items():
            path = re.sub(rf"/{re.escape(name)}(/|$)", rf"/{placeholder}\1", path)
        return re.sub(r"/pods/[^/]+/log$", "/pods/{pod}/log", path)
    return sorted({(method, general(path), status) for step in steps for method, path, status in step["calls"]})


def test_a_member_trains_on_the_runtime_follows_the_job_to_complete_and_deletes_it(
        trainer_twin: tuple[Stack, Fleet, Twin], kubeflow_sdk: str, tmp_path: Path) -> None:
    """As a member of ml-research: `list_runtimes()` shows the chart's torch-distributed; `train()` on it with
    the team's queue label (`Labels`) and two nodes of 8 GPUs makes a TrainJob Kueue admits on the team's
    queue, whose pods are bound to H100 nodes; one without a label gets the namespace's `default` LocalQueue
    and the same quota; `wait_for_job_status` reaches Complete; `get_job`, `get_job_logs`, `get_job_events`
    and `list_jobs` follow it, `delete_job` removes both. Nothing else is sent, and nothing is refused but
    the namespaced runtime lookups' 404 (there are none in the namespace). A member of llm-pretrain is
    refused each call on ml-research's jobs."""
    stack, fleet, twin = trainer_twin
    team, other = fleet.teams[TEAM].config, fleet.teams[OTHER].config
    cluster = fleet.clusters[CLUSTER].config
    ns, queue = team.namespace_names[0], team.queue_for(cluster, "h100")
    member = stack.identity(f"sdk@{TEAM}.test", (team.members.groups[0],)).kubeconfig
    outsider = stack.identity(f"sdk@{OTHER}.test", (other.members.groups[0],)).kubeconfig
    objects = custom(stack)

    submitted = pyenvs.run_client(kubeflow_sdk, CLIENT, [
        {"call": "list_runtimes", "namespace": ns},
        {"call": "get_runtime", "namespace": ns, "name": RUNTIME},
        {"call": "train", "namespace": ns, "runtime": RUNTIME, "runtime_from": ns, "nodes": 2, "gpus": 8,
         "labels": {QUEUE_LABEL: queue}},
        {"call": "train", "namespace": ns, "runtime": RUNTIME, "runtime_from": ns, "nodes": 1, "gpus": 8,
         "labels": None}], member, tmp_path / "member")
    assert [s.get("ok") for s in submitted[:2]] == [[RUNTIME], [RUNTIME, "torch", 1]], submitted
    assert all(isinstance(s.get("ok"), str) for s in submitted[2:]), submitted
    name, unlabelled = submitted[2]["ok"], submitted[3]["ok"]

    def workload(job: str) -> dict[str, Any] | None:
        uid = objects.get_namespaced_custom_object(TRAINER, TRAINER_VERSION, ns, "trainjobs", job)["metadata"]["uid"]
        found = objects.list_namespaced_custom_object(KUEUE, "v1beta2", ns, "workloads",
                                                      label_selector=f"kueue.x-k8s.io/job-uid={uid}")["items"]
        return found[0] if found else None
    def admitted_now(job: str) -> bool:
        return condition(workload(job), "Admitted").get("status") == "True"
    for job, nodes in ((name, 2), (unlabelled, 1)):
        assert wait_for(lambda: admitted_now(job), 60), workload(job)  # noqa: B023 (called at once)
        admitted = workload(job)["status"]["admission"]  # type: ignore[index]
        (podset,) = admitted["podSetAssignments"]
        assert admitted["clusterQueue"] == team.name and (podset["count"], podset["flavors"]["nvidia.com/gpu"],
                                                          podset["resourceUsage"]["nvidia.com/gpu"]) \
            == (nodes, "h100", str(8 * nodes)), admitted
    # Kueue names the namespace's default LocalQueue on the unlabelled one (what-gets-rendered.md).
    labels = objects.get_namespaced_custom_object(TRAINER, TRAINER_VERSION, ns, "trainjobs", unlabelled)["metadata"]
    assert labels["labels"][QUEUE_LABEL] == "default", labels
    pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][MANAGED] for n in fake_nodes(cluster)}

    def placed() -> list[Any]:
        found = [p for p in pods(stack, ns, f"jobset.sigs.k8s.io/jobset-name={name}") if p.spec.node_name]
        return found if len(found) == 2 else []
    bound = wait_for(placed, 90)
    assert bound, twin.logs()
    assert sorted(pool_of[p.spec.node_name] for p in bound) == ["h100", "h100"]

    refused = pyenvs.run_client(kubeflow_sdk, CLIENT, [
        {"call": "train", "namespace": ns, "runtime": RUNTIME, "runtime_from": other.namespace_names[0], "nodes": 1,
         "gpus": 8, "labels": {QUEUE_LABEL: queue}},
        {"call": "list_runtimes", "namespace": ns},
        {"call": "get_job", "namespace": ns, "name": name},
        {"call": "list_jobs", "namespace": ns},
        {"call": "get_job_logs", "namespace": ns, "name": name},
        {"call": "delete_job", "namespace": ns, "name": name}], outsider, tmp_path / "outsider")
    assert [(s.get("status"), s["calls"][-1][2]) for s in refused] == [(403, 403)] * 6, refused

    followed = pyenvs.run_client(kubeflow_sdk, CLIENT, [
        {"call": "wait_for_job_status", "namespace": ns, "name": name, "timeout": 120},
        {"call": "wait_for_job_status", "namespace": ns, "name": unlabelled, "timeout": 120},
        {"call": "get_job", "namespace": ns, "name": name},
        {"call": "get_job_logs", "namespace": ns, "name": name},
        {"call": "get_job_events", "namespace": ns, "name": name},
        {"call": "list_jobs", "namespace": ns},
        {"call": "delete_job", "namespace": ns, "name": name},
        {"call": "delete_job", "namespace": ns, "name": unlabelled}], member, tmp_path / "member")
    finished, finished_too, job, logs, events, jobs, *deleted = (s.get("ok", s) for s in followed)
    assert (finished, finished_too) == ("Complete", "Complete"), followed
    assert job == ["Complete", 2, [["node-0", "Succeeded", "gpu", "8"], ["node-1", "Succeeded", "gpu", "8"]]], job
    assert logs == LOG.splitlines(), logs
    assert "Pod" in events, events  # read through `edit` (the SDK keeps events with a firstTimestamp, :534)
    assert jobs == sorted([[name, "Complete"], [unlabelled, "Complete"]]), jobs
    assert deleted == [None, None], followed
    assert wait_for(lambda: not objects.list_namespaced_custom_object(TRAINER, TRAINER_VERSION, ns,
                                                                      "trainjobs")["items"]
                    and not objects.list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns,
                                                                  "jobsets")["items"], 90)

    api, core = f"/apis/{TRAINER}/{TRAINER_VERSION}", "/api/v1"
    assert calls(submitted + followed, {name: "{job}", unlabelled: "{job}"}) == sorted([
        ("GET", f"{core}/namespaces/{TRAINER_NAMESPACE}/configmaps/{PUBLIC}", 200),
        ("GET", f"{api}/clustertrainingruntimes", 200),
        ("GET", f"{api}/namespaces/{ns}/trainingruntimes", 200),
        ("GET", f"{api}/namespaces/{ns}/trainingruntimes/{RUNTIME}", 404),
        ("GET", f"{api}/clustertrainingruntimes/{RUNTIME}", 200),
        ("POST", f"{api}/namespaces/{ns}/trainjobs", 201),
        ("GET", f"{api}/namespaces/{ns}/trainjobs/{{job}}", 200),
        ("GET", f"{api}/namespaces/{ns}/trainjobs", 200),
        ("DELETE", f"{api}/namespaces/{ns}/trainjobs/{{job}}", 200),
        ("GET", f"{core}/namespaces/{ns}/pods", 200),
        ("GET", f"{core}/namespaces/{ns}/pods/{{pod}}/log", 200),
        ("GET", f"{core}/namespaces/{ns}/events", 200)])

