"""Jobs of each kind a profile renders (`kind: jobset | job`) in the SDK, fast tier: what is built,
what the pre-submit checks ask for, how each kind's status and pods are read. The real API server,
Kueue and the Job controller judge them in tests/test_e2e_fleet.py and tests/test_twin_scheduling.py."""

from __future__ import annotations

from typing import Any

import pytest

from generator.checks import load_fleet
from generator.connection import Connection
from generator.errors import UsageError
from generator.jobs import ConfigurationError, Job
from generator.jobs.job import KINDS
from generator.jobs.presubmit import requested_gpus
from tests.conftest import REPO

FLEET = load_fleet(REPO)


def test_a_job_profile_makes_a_batch_job_of_its_size() -> None:
    job = Job.from_profile("speech", "asr-eval", root=REPO, nodes=3, name="eval3")
    assert job.of is KINDS["Job"] and job.body["kind"] == "Job" and job.name == "eval3"
    assert job.body["spec"]["completions"] == job.body["spec"]["parallelism"] == 3
    env = {e["name"]: e.get("value") for e in job.body["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "eval3-0.eval3" and env["NNODES"] == "3"
    assert requested_gpus(job.body, "nvidia.com/gpu") == 3
    assert requested_gpus(Job.from_profile("speech", "asr-2node", root=REPO).body, "nvidia.com/gpu") == 4


def test_gpus_asked_as_limits_only_are_counted_like_the_api_server_defaults_them() -> None:
    """A container giving GPUs only as limits requests as many (the API server copies limits into missing
    requests); before, the pre-submit capacity check counted 0 for such a job and passed it."""
    job = Job.from_profile("speech", "asr-eval", root=REPO, nodes=3, name="eval3")
    resources = job.body["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["limits"] = {"nvidia.com/gpu": "2"}
    resources["requests"].pop("nvidia.com/gpu")
    assert requested_gpus(job.body, "nvidia.com/gpu") == 6


def test_define_makes_either_kind_by_the_same_rules() -> None:
    common: dict[str, Any] = {"nodes": 2, "gpus_per_node": 1, "root": REPO}
    batch = Job.define("speech", "mine", "ghcr.io/acme/x:1", ["python", "eval.py"], kind="job", **common)
    jobset = Job.define("speech", "mine", "ghcr.io/acme/x:1", ["python", "eval.py"], **common)
    assert (batch.body["kind"], jobset.body["kind"]) == ("Job", "JobSet")
    # The same container on the same nodes: only the rendezvous address differs (the pod's hostname).
    batch_pod = batch.body["spec"]["template"]["spec"]
    jobset_pod = jobset.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    addresses = [{e["name"]: e.get("value") for e in p["containers"][0]["env"]}["MASTER_ADDR"]
                 for p in (batch_pod, jobset_pod)]
    assert addresses == ["mine-0.mine", "mine-workers-0-0.mine"]
    for pod in (batch_pod, jobset_pod):
        pod["containers"][0]["env"] = [v for v in pod["containers"][0]["env"] if v["name"] != "MASTER_ADDR"]
    assert batch_pod["containers"] == jobset_pod["containers"]
    assert {k: v for k, v in batch_pod.items() if k != "subdomain"} == jobset_pod
    with pytest.raises(ConfigurationError,
                       match="kind: Input should be 'jobset', 'job', 'rayjob', 'trainjob', 'raycluster', "
                             "'deployment' or 'leaderworkerset'"):
        Job.define("speech", "mine", "ghcr.io/acme/x:1", ["python"], kind="pytorchjob", **common)
    with pytest.raises(ConfigurationError, match="the last pod's hostname would be"):
        Job.define("speech", "e" * 62, "ghcr.io/acme/x:1", ["python"], kind="job", **common)


def test_only_jobsets_and_batch_jobs_are_jobs() -> None:
    with pytest.raises(UsageError,
                       match="kind: JobSet, Job, RayJob, TrainJob, Deployment, LeaderWorkerSet, and metadata.name"):
        Job({"kind": "Pod", "metadata": {"name": "p"}})
    with pytest.raises(UsageError, match="kind must be one of JobSet, Job"):
        Job.on_cluster(None, "x", "ns", "RayCluster")


@pytest.mark.parametrize(("kind", "rank", "selector"), [
    ("Job", 1, "batch.kubernetes.io/job-name=j,batch.kubernetes.io/job-completion-index=1"),
    ("JobSet", 1, "jobset.sigs.k8s.io/jobset-name=j,jobset.sigs.k8s.io/replicatedjob-name=workers,"
                  "batch.kubernetes.io/job-completion-index=0"),
])
def test_a_rank_is_found_in_each_kinds_pods(kind: str, rank: int, selector: str) -> None:
    spec: dict[str, Any] = ({"completions": 2} if kind == "Job" else {"replicatedJobs": [
        {"name": "leader", "template": {"spec": {"completions": 1}}},
        {"name": "workers", "template": {"spec": {"completions": 1}}}]})
    job = Job({"kind": kind, "metadata": {"name": "j", "namespace": "ns"}, "spec": spec})
    assert job._rank_selector(rank) == selector
    with pytest.raises(UsageError, match="rank 2 is out of range: the job has 2 nodes"):
        job._rank_selector(2)


def test_each_kinds_status_is_read_from_its_own_fields() -> None:
    jobset, batch = KINDS["JobSet"], KINDS["Job"]
    assert jobset.active({"status": {"replicatedJobsStatus": [{"active": 2}, {"active": 1}]}}) == 3
    assert batch.active({"status": {"active": 2}}) == 2 and batch.active({}) == 0
    assert (jobset.restarts({"status": {"restarts": 4}}), batch.restarts({"status": {"failed": 1}})) == (4, 1)
    done = {"status": {"conditions": [{"type": "Complete", "status": "True", "message": "all done"}]}}
    assert batch.ended(done) == ("succeeded", "all done") and jobset.ended(done) is None
    assert batch.ended({"status": {"conditions": [{"type": "Failed", "status": "False"}]}}) is None
    ray = KINDS["RayJob"]
    assert ray.ended({"status": {"jobDeploymentStatus": "Running"}}) is None
    assert ray.ended({"status": {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed"}}) \
        == ("failed", "FAILED: AppFailed")
    assert (ray.active({"status": {"jobDeploymentStatus": "Running"}}), ray.active({})) == (1, 0)
    assert ray.pods({"status": {"rayClusterName": "tune-x1b2c"}}, "tune") == "ray.io/cluster=tune-x1b2c"
    assert batch.not_child == "!jobset.sigs.k8s.io/jobset-name"  # a JobSet's own Jobs are not listed as jobs


def test_a_ray_job_asks_for_its_workers_gpus_and_logs_its_driver() -> None:
    job = Job.from_profile("ml-research", "tune-sweep", root=REPO, nodes=3)
    assert job.of is KINDS["RayJob"] and requested_gpus(job.body, "nvidia.com/gpu") == 24
    assert job._rank_selector(0) == "batch.kubernetes.io/job-name=tune-sweep"  # KubeRay's submitter Job
    with pytest.raises(UsageError, match="a RayJob's log is its driver's"):
        job._rank_selector(1)


def test_define_makes_a_ray_job_where_kuberay_runs() -> None:
    job = Job.define("ml-research", "tune", "rayproject/ray:2.52.0-gpu", ["python", "tune.py", "--n", "a b"],
                     cluster="prod-east", pool="h100", nodes=2, kind="rayjob", root=REPO)
    assert job.body["kind"] == "RayJob" and job.body["spec"]["entrypoint"] == "python tune.py --n 'a b'"
    with pytest.raises(ConfigurationError, match="kind: cluster dev does not run KubeRay"):
        Job.define("ml-research", "tune", "rayproject/ray:2.52.0-gpu", ["python"], cluster="dev", pool="l4",
                   kind="rayjob", root=REPO)
    with pytest.raises(ConfigurationError, match="launcher: a RayJob has no launcher"):
        Job.define("ml-research", "tune", "rayproject/ray:2.52.0-gpu", ["python"], cluster="prod-east", pool="h100",
                   kind="rayjob", launcher="none", root=REPO)


def test_a_train_job_is_read_through_its_jobset_and_asks_for_its_nodes_gpus() -> None:
    """A TrainJob ends on its Complete or Failed condition; its pods and ranks are those of the JobSet
    Trainer names after it (replicated job `node`); its GPUs are numNodes x resourcesPerNode."""
    train = KINDS["TrainJob"]
    assert train.ended({"status": {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}}) \
        == ("succeeded", "done")
    assert train.ended({"status": {"conditions": [{"type": "Suspended", "status": "True"}]}}) is None
    assert train.active({"status": {"jobsStatus": [{"name": "node", "active": 2}, "junk"]}}) == 2
    assert train.active({}) == 0 and train.log_container == "node"
    job = Job.from_profile("ml-research", "finetune", root=REPO, nodes=3)
    assert job.of is train and requested_gpus(job.body, "nvidia.com/gpu") == 24
    assert job._rank_selector(2) == ("jobset.sigs.k8s.io/jobset-name=finetune,jobset.sigs.k8s.io/replicatedjob-name="
                                     "node,batch.kubernetes.io/job-completion-index=2")
    with pytest.raises(UsageError, match="rank 3 is out of range: the job has 3 nodes"):
        job._rank_selector(3)


def test_define_makes_a_train_job_where_trainer_runs() -> None:
    """Left at their defaults, maxRestarts and the grace period are not a TrainJob's to refuse; set, they are."""
    job = Job.define("ml-research", "ft", "nvcr.io/nvidia/pytorch:25.10-py3", ["python", "ft.py"],
                     cluster="prod-east", pool="h100", nodes=2, kind="trainjob", root=REPO)
    assert job.body["kind"] == "TrainJob" and job.body["spec"]["trainer"]["numNodes"] == 2
    with pytest.raises(ConfigurationError, match="max_restarts: a TrainJob has no maxRestarts"):
        Job.define("ml-research", "ft", "nvcr.io/nvidia/pytorch:25.10-py3", ["python"], cluster="prod-east",
                   pool="h100", kind="trainjob", max_restarts=5, root=REPO)
    with pytest.raises(ConfigurationError, match="kind: cluster dev does not run Kubeflow Trainer"):
        Job.define("ml-research", "ft", "nvcr.io/nvidia/pytorch:25.10-py3", ["python"], cluster="dev",
                   pool="l4", kind="trainjob", root=REPO)


def test_a_ray_cluster_profile_makes_a_ray_cluster_not_a_job(tmp_path: Any) -> None:
    """`kind: raycluster` makes a RayCluster (from the profile, or a file `job new` wrote), checked by the
    same rules; asking for it as a job, or a job as a Ray cluster, says which to use."""
    from generator.jobs import RayCluster
    from generator.jobs import made as making
    from generator.jobs.ray import MAX_NAME
    from generator.yamltext import to_yaml

    ray = RayCluster.from_profile("ml-research", "workbench", root=REPO, nodes=3, name="bench3")
    assert ray.body is not None and (ray.body["kind"], ray.name, ray.namespace) == ("RayCluster", "bench3",
                                                                                     "ml-research")
    assert requested_gpus(ray.body, "nvidia.com/gpu") == 24 and ray.profile.nodes == 3
    either = making.from_profile("ml-research", "workbench", root=REPO)
    assert isinstance(either, RayCluster) and either.body == RayCluster.from_profile(
        "ml-research", "workbench", root=REPO).body
    assert isinstance(making.from_profile("ml-research", "tune-sweep", root=REPO), Job)
    path = tmp_path / "bench.yaml"
    path.write_text(to_yaml(ray.body))
    from_file = making.from_file(path)
    assert isinstance(from_file, RayCluster) and from_file.body == ray.body
    path.write_text("kind: Pod\nmetadata: {name: p}\n")
    with pytest.raises(UsageError,
                       match="needs kind: JobSet, Job, RayJob, TrainJob, Deployment, LeaderWorkerSet or RayCluster"):
        making.from_file(path)
    with pytest.raises(UsageError, match=r"ml-research/workbench is a Ray cluster \(kind: raycluster\), not a job"):
        Job.from_profile("ml-research", "workbench", root=REPO)
    with pytest.raises(UsageError, match=r"ml-research/tune-sweep is a job \(kind: rayjob\), not a Ray cluster"):
        RayCluster.from_profile("ml-research", "tune-sweep", root=REPO)
    with pytest.raises(UsageError, match="runs no program, so none can replace it"):
        making.from_profile("ml-research", "workbench", root=REPO, command=["python"])
    with pytest.raises(UsageError, match="KubeRay takes at most 53 for a RayCluster"):
        RayCluster.from_profile("ml-research", "workbench", root=REPO, name="w" * 54)
    with pytest.raises(ConfigurationError, match="is a Ray cluster, not a job"):
        Job.define("ml-research", "wb", "rayproject/ray:2.52.0-gpu", ["ray"], cluster="prod-east", pool="h100",
                   kind="raycluster", root=REPO)
    from generator.kinds.raycluster import RAY_CLUSTER_NAME
    assert MAX_NAME == RAY_CLUSTER_NAME  # the SDK's copy of the limit (it does not import the compilers)


def test_a_serving_profile_makes_a_deployment_whose_status_is_its_pods_workloads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`kind: deployment`: a Deployment (and its Service) asking for replicas x GPUs; Kueue admits each pod on
    its own, so status is pending while any pod's Workload waits (the first one's reasons and position),
    admitted until every replica is ready, then running; it never finishes; the Deployment's pods are
    numbered in name order for logs."""
    from types import SimpleNamespace

    from kubernetes import client

    from generator.jobs import workloads
    from generator.kinds import companion_service

    job = Job.from_profile("ml-research", "chat-serve", root=REPO, nodes=3)
    job.api = Connection(SimpleNamespace())  # its calls (the pod list, the Workloads) are faked below
    assert job.of is KINDS["Deployment"] and requested_gpus(job.body, "nvidia.com/gpu") == 3
    service = companion_service(job.body)
    assert service is not None and service["spec"]["ports"][0]["port"] == 8000
    listed: list[Any] = []
    monkeypatch.setattr(client.CoreV1Api, "list_namespaced_pod", lambda self, *a, **k: SimpleNamespace(items=listed))
    held = {"uid-b": ("couldn't assign flavors to pod set main: insufficient quota", "position 2 in queue x")}
    monkeypatch.setattr(workloads, "workload_of", lambda api, ns, uid: None if uid == "uid-c" else {"uid": uid})
    monkeypatch.setattr(workloads, "waiting", lambda api, ns, workload: held.get(workload["uid"]))

    def status(ready: int | None) -> Any:
        current = {**job.body, "status": {} if ready is None else {"readyReplicas": ready}}
        return job._serving_status(current)
    assert str(status(None)) == "chat-serve: pending: no pod yet"
    phases = {"a": "Running", "b": "Pending", "c": "Pending"}
    listed.extend(SimpleNamespace(metadata=SimpleNamespace(name=f"chat-serve-{c}", uid=f"uid-{c}"),
                                  status=SimpleNamespace(phase=phases[c]), spec=SimpleNamespace()) for c in "cba")
    pending = status(None)
    assert (pending.phase, pending.position) == ("pending", "position 2 in queue x")
    assert pending.reason == ("2 of 3 pods held by Kueue; chat-serve-b: couldn't assign flavors to pod set main: "
                              "insufficient quota")
    held.clear()
    monkeypatch.setattr(workloads, "workload_of", lambda api, ns, uid: {"uid": uid})
    assert status(1).phase == "admitted" and status(1).reason.startswith("1/3 replicas ready; ")
    assert str(status(3)) == "chat-serve: running: 3/3 replicas ready"
    with pytest.raises(UsageError, match="never finishes: wait for admitted or running"):
        job.wait(SimpleNamespace(), until="finished")
    assert [job._pod_for_rank(r) for r in range(3)] == ["chat-serve-a", "chat-serve-b", "chat-serve-c"]
    with pytest.raises(UsageError, match="no replica 3 of chat-serve: it has 3 pods now"):
        job._pod_for_rank(3)


def test_a_multi_node_server_is_held_and_counted_by_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kind: leaderworkerset`: a LeaderWorkerSet asking for replicas x nodes x GPUs; Kueue admits each group
    as one Workload labelled with the set's uid, so status is pending while any group's Workload waits,
    then counts the groups LeaderWorkerSet calls ready. The twin runs it for real: tests/test_lws.py."""
    from types import SimpleNamespace

    from kubernetes import client

    from generator.jobs import workloads

    job = Job.from_profile("ml-research", "big-serve", root=REPO)
    job.api = Connection(SimpleNamespace())  # its calls (the pod list, the Workloads) are faked below
    assert job.of is KINDS["LeaderWorkerSet"] and requested_gpus(job.body, "nvidia.com/gpu") == 32
    monkeypatch.setattr(client.CoreV1Api, "list_namespaced_pod", lambda self, *a, **k: SimpleNamespace(items=[]))
    groups: list[dict[str, Any]] = []
    monkeypatch.setattr(workloads, "workloads_of", lambda api, ns, uid: groups if uid == "u1" else [])
    held = {"leaderworkerset-big-serve-1": ("couldn't assign flavors to pod set main: insufficient quota", "")}
    monkeypatch.setattr(workloads, "waiting", lambda api, ns, w: held.get(w["metadata"]["name"]))

    def status(ready: int | None) -> Any:
        current = {**job.body, "metadata": {**job.body["metadata"], "uid": "u1"},
                   "status": {} if ready is None else {"readyReplicas": ready}}
        return job._serving_status(current)
    assert str(status(None)) == "big-serve: pending: Kueue has not created a Workload yet"
    groups.extend({"metadata": {"name": f"leaderworkerset-big-serve-{i}"}} for i in range(2))
    assert status(None).reason == ("1 of 2 groups held by Kueue; leaderworkerset-big-serve-1: couldn't assign "
                                   "flavors to pod set main: insufficient quota")
    held.clear()
    assert status(1).phase == "admitted"
    assert str(status(2)) == "big-serve: running: 2/2 replicas ready"
