"""JobSet templates of job profiles: three golden shapes, JobSet's own rules, and bad profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.compile.manifest import Manifest
from generator.kinds.podspec import COMPLETION_INDEX
from generator.validate import cel
from tests.conftest import REPO, edit, run
from tests.refusals import refused_at

TEMPLATES = REPO / "rendered"


def load(rel: str) -> dict[str, Any]:
    return yaml.safe_load((TEMPLATES / rel).read_text())


def pod(body: dict[str, Any], rjob: int = 0) -> dict[str, Any]:
    return body["spec"]["replicatedJobs"][rjob]["template"]["spec"]["template"]


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_templates_are_outside_the_synced_tree() -> None:
    assert (TEMPLATES / "prod-east/templates/ml-research/finetune-1node.jobset.yaml").is_file()
    for kustomization in TEMPLATES.rglob("kustomization.yaml"):
        assert "templates" not in yaml.safe_load(kustomization.read_text())["resources"], kustomization


def test_golden_single_node() -> None:
    body = load("prod-east/templates/ml-research/finetune-1node.jobset.yaml")
    assert body["metadata"]["namespace"] == "ml-research"
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml-research"
    assert body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "standard"  # the team's default
    job = body["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (job["parallelism"], job["completions"], job["completionMode"]) == (1, 1, "Indexed")
    container = pod(body)["spec"]["containers"][0]
    # A whole H100 node: 8 GPUs, 90% of the node's 192 CPUs and 1800Gi in the pool's ratio.
    assert container["resources"]["requests"] == {"cpu": "172800m", "memory": "1620Gi", "nvidia.com/gpu": "8"}
    assert container["resources"]["limits"] == {"memory": "1620Gi", "nvidia.com/gpu": "8"}
    assert container["command"] == ["torchrun"]
    assert container["args"][:5] == ["--nnodes=$(NNODES)", "--nproc-per-node=$(NPROC_PER_NODE)",
                                     "--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)",
                                     "--node-rank=$(NODE_RANK)"]
    # --no-python: torchrun runs the command as written (without it, `python -u python -m ...`).
    assert container["args"][5:] == ["--no-python", "python", "-m", "train.finetune", "--config",
                                     "configs/finetune.yaml"]
    values = env(container)
    assert values["MASTER_ADDR"] == "finetune-1node-workers-0-0.finetune-1node"
    assert values["NODE_RANK"] == {"fieldRef": {"fieldPath":
                                                "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert values["NNODES"] == "1" and values["NPROC_PER_NODE"] == "8" and values["NCCL_DEBUG"] == "WARN"
    assert values["PYTHONUNBUFFERED"] == "1"
    assert pod(body)["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                                                 "effect": "NoSchedule"}]
    assert pod(body)["spec"]["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}]
    assert body["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": "finetune-1node"}


def test_golden_multi_node_workers() -> None:
    body = load("prod-west/templates/ml-research/pretrain-4node.jobset.yaml")
    job = body["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert [rj["name"] for rj in body["spec"]["replicatedJobs"]] == ["workers"]
    assert job["parallelism"] == job["completions"] == 4 and job["backoffLimit"] == 0
    # Exit 1 is torchrun's answer to any worker failure: it restarts, it does not fail fast.
    assert job["podFailurePolicy"]["rules"] == [
        {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [2, 126, 127]}}]
    assert body["spec"]["failurePolicy"] == {"maxRestarts": 5, "rules": [
        {"name": "restartOnDisruption", "action": "RestartJobSetAndIgnoreMaxRestarts",
         "onJobFailureReasons": ["PodFailurePolicy"],
         "onJobFailureMessagePatterns": ["has condition DisruptionTarget matching"]},
        {"name": "failFastOnProgramErrors", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]}
    assert body["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["workers"]}
    container = pod(body)["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "111600m", "memory": "900Gi", "nvidia.com/gpu": "8"}
    assert env(container)["NNODES"] == "4"
    assert pod(body)["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "128Gi"
    assert "annotations" not in pod(body).get("metadata", {})


def test_golden_leader_and_workers_with_topology() -> None:
    body = load("prod-east/templates/llm-pretrain/pretrain-70b.jobset.yaml")
    assert [(rj["name"], rj["template"]["spec"]["parallelism"]) for rj in body["spec"]["replicatedJobs"]] == [
        ("leader", 1), ("workers", 15)]
    assert body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "production"
    for i in (0, 1):
        # One group: Kueue places rank 0 in the same block as its workers.
        assert pod(body, i)["metadata"]["annotations"] == {
            "kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-block",
            "kueue.x-k8s.io/podset-group-name": "rendezvous"}
    leader, worker = pod(body, 0)["spec"]["containers"][0], pod(body, 1)["spec"]["containers"][0]
    assert env(leader)["MASTER_ADDR"] == env(worker)["MASTER_ADDR"] == "pretrain-70b-leader-0-0.pretrain-70b"
    assert leader["args"][-1] == "--coordinator" and worker["args"][-1] == "s3://acme-corpus/v7"
    # Worker ranks start after the leader: computed by a fixed script, the program stays argv.
    assert worker["command"] == ["/bin/sh", "-c",
                                 'exec torchrun --node-rank="$((JOB_COMPLETION_INDEX + 1))" "$@"', "torchrun"]
    assert "NODE_RANK" not in env(worker) and "--node-rank=$(NODE_RANK)" not in worker["args"]
    assert body["spec"]["successPolicy"]["targetReplicatedJobs"] == ["workers"]


def test_skypilot_task() -> None:
    task = load("prod-east/templates/llm-pretrain/pretrain-70b.sky.yaml")
    assert task["num_nodes"] == 16 and task["resources"]["accelerators"] == "H100-80GB:8"
    assert "labels" not in task["resources"]  # a queue label on pods only admits them one by one
    assert task["config"]["kubernetes"]["kueue"] == {"local_queue_name": "llm-pretrain"}
    assert task["config"]["kubernetes"]["pod_config"]["metadata"]["labels"] == {
        "kueue.x-k8s.io/priority-class": "production"}
    assert task["run"].startswith("torchrun --nnodes=$SKYPILOT_NUM_NODES --nproc-per-node=8")
    assert " --no-python python -m foundation.pretrain" in task["run"]
    # The pool's share of a node, as the JobSet requests it; its topology (SkyPilot's pods are one pod set)
    assert task["config"]["kubernetes"]["pod_config"]["spec"]["containers"] == [{"name": "ray-node", "resources": {
        "requests": {"cpu": "172800m", "memory": "1620Gi"}, "limits": {"memory": "1620Gi"}}}]
    assert (task["resources"]["cpus"], task["resources"]["memory"]) == (172.8, 1739.4)
    assert task["config"]["kubernetes"]["pod_config"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-block"}
    assert load("prod-east/templates/llm-pretrain/skypilot-config.yaml") == {
        "kubernetes": {"namespace": "llm-pretrain", "remote_identity": "default"}}


def test_jobset_cel_rules_run_on_templates(shared_crds: Path) -> None:
    catalog = cel.load_crds(str(shared_crds), [], offline=True)
    assert catalog is not None
    rules = catalog.rules("v0.19.2")
    body = load("prod-east/templates/llm-pretrain/pretrain-70b.jobset.yaml")
    assert cel.validate_cel([Manifest(("t",), body, ("teams/llm-pretrain.yaml", 1))], rules) == []
    body["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    body["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "leader", "status": "Ready"}]
    findings = cel.validate_cel([Manifest(("t",), body, ("teams/llm-pretrain.yaml", 1))], rules)
    assert findings and all(f.check == "cel" for f in findings)


PROFILE_CASES = [
    ("name: pretrain-4node", "name: pretrain-4node-with-a-much-longer-name-than-fits-here",
     "teams/ml-research.yaml:29", "at most 45 fit", "shorten it by 8"),
    ("    pool: a100", "    pool: l40s", "teams/ml-research.yaml:31", "no quota in pool 'l40s'", "use one of: a100"),
    ("    cluster: prod-west", "    cluster: dev\n    # moved", "teams/ml-research.yaml:32",
     "no quota in pool 'a100' of 'dev'", "use one of: l4"),
    ("    nodes: 4", "    nodes: 40", "teams/ml-research.yaml:32", "needs 320 GPUs but team 'ml-research' can have at "
     "most 32 in prod-west/a100 (16 guaranteed + 16 borrowable)", "Kueue would never admit it"),
    ("    nodes: 1\n", "    nodes: 1\n    gpusPerNode: 9\n", "teams/ml-research.yaml:23",
     "9 GPUs per pod, but nodes of pool 'h100' have 8", "use 1 to 8"),
    ("      - {name: NCCL_DEBUG, value: WARN}", "      - {name: MASTER_ADDR, value: x}", "teams/ml-research.yaml:27",
     "MASTER_ADDR is set by fleetgen", "remove it"),
    ("    maxRestarts: 5", "    maxRestarts: 5\n    priority: urgent", "teams/ml-research.yaml:37",
     "priority 'urgent' is not defined in cluster 'prod-west'", "use one of"),
    ("  - name: pretrain-4node", "  - name: finetune-1node", "teams/ml-research.yaml:29", "defined twice", "rename"),
    ("    image: ghcr.io/acme/llm-train:2026.11.1", "    image: 'ghcr.io/acme/x; rm -rf /'",
     "teams/ml-research.yaml:33", "container image reference", None),
    ("    nodes: 4", "    nodes: four", "teams/ml-research.yaml:32", "expected a whole number", None),
    ("    maxRestarts: 5", "    maxRestarts: 5\n    failFastExitCodes: [1, 2]", "teams/ml-research.yaml:37",
     "torchrun exits 1 whenever any worker fails", "remove 1"),
]


@pytest.mark.parametrize("old,new,where,message,hint", PROFILE_CASES, ids=[c[3][:30] for c in PROFILE_CASES])
def test_bad_profiles_are_located(fleet_root: Path, old: str, new: str, where: str, message: str,
                                  hint: str | None) -> None:
    refused_at(fleet_root, "teams/ml-research.yaml", old, new, where, message, hint)


def test_topology_level_must_exist_in_the_pool(fleet_root: Path) -> None:
    edit(fleet_root, "teams/ml-research.yaml", "    nodes: 4\n",
         "    nodes: 4\n    topology: {mode: preferred, level: topology.kubernetes.io/zone}\n")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "teams/ml-research.yaml:33: jobProfiles[1].topology.level: pool 'a100' has no topology level" in result.err
    assert "declares no topologyLevels" in result.err


def test_topology_slices_become_kueues_slice_annotations() -> None:
    body = yaml.safe_load((REPO / "rendered/prod-east/templates/ml-research/pretrain-8node-slices.jobset.yaml")
                          .read_text())
    (job,) = body["spec"]["replicatedJobs"]
    assert job["template"]["spec"]["template"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/podset-preferred-topology": "topology.kubernetes.io/zone",
        "kueue.x-k8s.io/podset-slice-required-topology": "cloud.provider.com/topology-block",
        "kueue.x-k8s.io/podset-slice-size": "4"}


@pytest.mark.parametrize(("old", "new", "field", "message"), [
    ("slice: {level: cloud.provider.com/topology-block, size: 4}",
     "slice: {level: cloud.provider.com/topology-block, size: 3}",
     "topology.slice.size", "8 nodes do not divide into slices of 3"),
    ("level: topology.kubernetes.io/zone\n      slice: {level: cloud.provider.com/topology-block",
     "level: cloud.provider.com/topology-block\n      slice: {level: topology.kubernetes.io/zone",
     "topology.slice.level", "'topology.kubernetes.io/zone' is above the job's level"),
    ("slice: {level: cloud.provider.com/topology-block, size: 4}", "slice: {level: rack, size: 4}",
     "topology.slice.level", "pool 'h100' has no topology level 'rack'"),
])
def test_topology_slices_follow_kueues_rules(fleet_root: Path, old: str, new: str, field: str, message: str) -> None:
    edit(fleet_root, "teams/ml-research.yaml", old, new)
    result = run(fleet_root, "render")
    assert result.code == 2
    assert f"jobProfiles[2].{field}: {message}" in result.err, result.err
    assert "teams/ml-research.yaml:" in result.err


def test_topology_slices_exclude_a_leader(fleet_root: Path) -> None:
    edit(fleet_root, "teams/llm-pretrain.yaml", "topology: {mode: required, level: cloud.provider.com/topology-block}",
         "topology: {mode: required, level: cloud.provider.com/topology-block, "
         "slice: {level: kubernetes.io/hostname, size: 1}}")
    result = run(fleet_root, "render")
    assert result.code == 2
    assert "jobProfiles[0].topology.slice: a profile with a leader puts rank 0 in its workers' domain" in result.err


def test_golden_batch_job_with_its_rendezvous_service() -> None:
    """`kind: job`: an Indexed batch Job, one pod per node, each index retried in place; rank 0 is
    `<job>-0.<job>`: the Job controller's hostname in the subdomain of the job's own headless Service."""
    body = load("dev/templates/speech/asr-eval.job.yaml")
    assert (body["apiVersion"], body["kind"]) == ("batch/v1", "Job")
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "speech"
    spec = body["spec"]
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (2, 2, "Indexed")
    assert (spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]) == (2, 0) and "backoffLimit" not in spec
    assert spec["podFailurePolicy"]["rules"] == [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [2, 126, 127]}}]
    template = spec["template"]["spec"]
    container = template["containers"][0]
    assert template["subdomain"] == "asr-eval"
    assert env(container)["MASTER_ADDR"] == "asr-eval-0.asr-eval" and env(container)["NNODES"] == "2"
    assert env(container)["NODE_RANK"] == {"fieldRef": {"fieldPath": COMPLETION_INDEX}}
    assert container["args"][:5] == ["--nnodes=$(NNODES)", "--nproc-per-node=$(NPROC_PER_NODE)",
                                     "--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)",
                                     "--node-rank=$(NODE_RANK)"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    service = load("dev/templates/speech/asr-eval.service.yaml")
    assert service["metadata"]["name"] == "asr-eval" and service["metadata"]["namespace"] == "speech"
    assert service["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": True,
                               "selector": {"batch.kubernetes.io/job-name": "asr-eval"}}
    assert not any(k.startswith("kueue.x-k8s.io/") for k in service["metadata"]["labels"])  # Kueue queues no Service


def test_a_single_node_batch_job_needs_no_service(fleet_root: Path) -> None:
    edit(fleet_root, "teams/speech.yaml", "    nodes: 2\n    gpusPerNode: 1\n", "    nodes: 1\n    gpusPerNode: 1\n")
    assert run(fleet_root, "render").code == 0
    folder = fleet_root / "rendered/dev/templates/speech"
    body = yaml.safe_load((folder / "asr-eval.job.yaml").read_text())
    assert env(body["spec"]["template"]["spec"]["containers"][0])["MASTER_ADDR"] == "localhost"
    assert "subdomain" not in body["spec"]["template"]["spec"]
    assert not (folder / "asr-eval.service.yaml").exists()


@pytest.mark.parametrize(("old", "new", "where", "message", "hint"), [
    ("  - name: asr-eval\n", f"  - name: asr-eval-{'x' * 53}\n",  # 62 characters: a Job's name, not a hostname
     "teams/speech.yaml:23", f"the last pod's hostname would be 'asr-eval-{'x' * 53}-1' (64 > 63)", "shorten it by 1"),
    ("    kind: job\n", "    kind: job\n    leader: {}\n", "teams/speech.yaml:25", "no separate leader",
     "use kind: jobset"),
    ("    kind: job\n", "    kind: pytorchjob\n", "teams/speech.yaml:24",
     "'jobset', 'job', 'rayjob', 'trainjob', 'raycluster', 'deployment' or 'leaderworkerset'", None),
])
def test_bad_batch_job_profiles_are_located(fleet_root: Path, old: str, new: str, where: str, message: str,
                                            hint: str | None) -> None:
    refused_at(fleet_root, "teams/speech.yaml", old, new, where, message, hint)


def test_a_multi_node_batch_job_is_refused_on_a_multikueue_manager(fleet_root: Path) -> None:
    """MultiKueue copies a batch Job to a worker, not the Service its hostnames need: refused at the
    profile's `kind` line, with a JobSet (which makes its own Service on the worker) as the fix."""
    path = fleet_root / "teams/vision.yaml"
    lines = path.read_text().splitlines()
    profile = ["jobProfiles:", "  - name: hub-eval", "    kind: job", "    cluster: hub", "    pool: l40s",
               "    nodes: 2", "    image: ghcr.io/acme/vision:1", "    command: [python, eval.py]"]
    path.write_text("\n".join([*lines, *profile]) + "\n")
    result = run(fleet_root, "render")
    assert result.code == 2, result.out
    assert f"teams/vision.yaml:{len(lines) + 3}: jobProfiles[0].kind: hub is a MultiKueue manager" in result.err, \
        result.err
    assert "use kind: jobset" in result.err
    path.write_text("\n".join([*lines, *profile]).replace("nodes: 2", "nodes: 1") + "\n")
    assert run(fleet_root, "render").code == 0


def test_golden_ray_job() -> None:
    """`kind: rayjob`: KubeRay's RayJob with the program as its entrypoint, a head and `nodes` fixed-size
    workers pinned to the pool, and the cluster torn down when the job ends (Kueue's own rule)."""
    body = load("prod-east/templates/ml-research/tune-sweep.rayjob.yaml")
    assert (body["apiVersion"], body["kind"]) == ("ray.io/v1", "RayJob")
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml-research"
    spec = body["spec"]
    assert spec["entrypoint"] == "python -m research.tune --trials 64"
    assert (spec["shutdownAfterJobFinishes"], spec["backoffLimit"]) == (True, 1)
    [workers] = spec["rayClusterSpec"]["workerGroupSpecs"]
    assert workers["replicas"] == workers["minReplicas"] == workers["maxReplicas"] == 2
    pod = workers["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    [container] = pod["containers"]
    assert container["name"] == "ray-worker" and "command" not in container and "ports" not in container
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["resources"] == {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}}
    folder = TEMPLATES / "prod-east/templates/ml-research"
    assert not (folder / "tune-sweep.sky.yaml").exists()  # a Ray entrypoint is no SkyPilot program


@pytest.mark.parametrize(("old", "new", "where", "message", "hint"), [
    ("    kind: rayjob\n    cluster: prod-east\n    pool: h100\n",
     "    kind: rayjob\n    cluster: dev\n    pool: l4\n", "teams/ml-research.yaml:54",
     "cluster dev does not run KubeRay", "set operators.ray: true"),
    ("    kind: rayjob\n", "    kind: rayjob\n    launcher: torchrun\n", "teams/ml-research.yaml:55",
     "a RayJob has no launcher", "remove launcher"),
    ("    kind: rayjob\n", "    kind: rayjob\n    leader: {}\n", "teams/ml-research.yaml:55",
     "a RayJob's head is its leader", "remove leader"),
    ("  - name: tune-sweep\n", f"  - name: tune-{'s' * 43}\n", "teams/ml-research.yaml:53",
     "KubeRay takes at most 47 for a RayJob", "shorten it by 1"),
])
def test_bad_ray_job_profiles_are_located(fleet_root: Path, old: str, new: str, where: str, message: str,
                                          hint: str | None) -> None:
    refused_at(fleet_root, "teams/ml-research.yaml", old, new, where, message, hint)


def test_golden_ray_cluster() -> None:
    """`kind: raycluster`: the Ray cluster a RayJob of the profile would run on, as a RayCluster of its own:
    no entrypoint, kept until deleted, Kueue's labels (the execution limit included: Kueue reads it on any
    job it manages, kueue v0.19.2 pkg/controller/jobframework/utils.go:186-193), no SkyPilot task."""
    body = load("prod-east/templates/ml-research/workbench.raycluster.yaml")
    assert (body["apiVersion"], body["kind"], body["metadata"]["name"]) == ("ray.io/v1", "RayCluster", "workbench")
    labels = body["metadata"]["labels"]
    assert (labels["kueue.x-k8s.io/queue-name"], labels["kueue.x-k8s.io/max-exec-time-seconds"]) == \
        ("ml-research", "28800")
    rayjob = load("prod-east/templates/ml-research/tune-sweep.rayjob.yaml")["spec"]["rayClusterSpec"]
    [workers] = body["spec"]["workerGroupSpecs"]
    assert workers["replicas"] == workers["minReplicas"] == workers["maxReplicas"] == 1
    rayjob["workerGroupSpecs"][0].update(replicas=1, minReplicas=1, maxReplicas=1)
    assert body["spec"]["headGroupSpec"] == rayjob["headGroupSpec"]
    pod, like = workers["template"]["spec"], rayjob["workerGroupSpecs"][0]["template"]["spec"]
    assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == like["volumes"][0]["emptyDir"]["sizeLimit"] == "32Gi"
    assert pod["nodeSelector"] == like["nodeSelector"] and pod["tolerations"] == like["tolerations"]
    assert pod["containers"][0]["resources"] == like["containers"][0]["resources"]
    assert not any(k in body["spec"] for k in ("entrypoint", "rayClusterSpec"))
    assert not (TEMPLATES / "prod-east/templates/ml-research/workbench.sky.yaml").exists()


@pytest.mark.parametrize(("old", "new", "where", "message", "hint"), [
    ("    kind: raycluster\n", "    kind: raycluster\n    command: [python, x.py]\n", "teams/ml-research.yaml:76",
     "a RayCluster has no command: it runs Ray only", "remove command"),
    ("    kind: raycluster\n", "    kind: raycluster\n    maxRestarts: 2\n", "teams/ml-research.yaml:76",
     "a RayCluster has no maxRestarts", "remove maxRestarts"),
    ("    kind: raycluster\n    cluster: prod-east\n    pool: h100\n",
     "    kind: raycluster\n    cluster: dev\n    pool: l4\n", "teams/ml-research.yaml:75",
     "cluster dev does not run KubeRay, so nothing would run a RayCluster", "set operators.ray: true"),
    ("  - name: workbench\n", f"  - name: w{'o' * 53}\n", "teams/ml-research.yaml:74",
     "KubeRay takes at most 53 for a RayCluster", "shorten it by 1"),
    # Every other kind runs a program: leaving out its command is refused where the profile is.
    ("    kind: raycluster\n", "    kind: rayjob\n", "teams/ml-research.yaml:74",
     "command is required for kind rayjob", "only kind raycluster runs none"),
])
def test_bad_ray_cluster_profiles_are_located(fleet_root: Path, old: str, new: str, where: str, message: str,
                                              hint: str | None) -> None:
    refused_at(fleet_root, "teams/ml-research.yaml", old, new, where, message, hint)


def test_golden_serving_deployment() -> None:
    """`kind: deployment`: a Deployment of `nodes` replicas running the command as written (no torchrun, no
    rendezvous), restarted when it exits, pinned to the pool with its GPUs; rollouts one replica at a time
    within the same GPUs; a ClusterIP Service on its port; no SkyPilot task. Kueue's own webhook puts the
    queue and priority on the pods (tests/test_serving.py checks that on the real one)."""
    body = load("prod-east/templates/ml-research/chat-serve.deployment.yaml")
    assert (body["apiVersion"], body["kind"]) == ("apps/v1", "Deployment")
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml-research"
    spec = body["spec"]
    assert spec["replicas"] == 2 and spec["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    assert spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"] == \
        {"app.kubernetes.io/instance": "chat-serve"}
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Always"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    [container] = pod["containers"]
    assert container["name"] == "server"
    assert [*container["command"], *container["args"]] == ["python", "-m", "research.serve", "--port", "8000"]
    assert container["ports"] == [{"name": "serving", "containerPort": 8000}] and container["env"] == []
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    service = load("prod-east/templates/ml-research/chat-serve.service.yaml")
    assert service["spec"] == {"selector": {"app.kubernetes.io/instance": "chat-serve"},
                               "ports": [{"name": "serving", "port": 8000, "targetPort": "serving"}]}
    assert not any(k.startswith("kueue.x-k8s.io/") for k in service["metadata"]["labels"])
    assert not (TEMPLATES / "prod-east/templates/ml-research/chat-serve.sky.yaml").exists()


@pytest.mark.parametrize(("old", "new", "where", "message", "hint"), [
    ("    kind: deployment\n", "    kind: deployment\n    launcher: none\n", "teams/ml-research.yaml:86",
     "a Deployment has no launcher: its replicas serve on their own", "remove launcher"),
    ("    kind: deployment\n", "    kind: deployment\n    maxExecutionTime: 8h\n", "teams/ml-research.yaml:86",
     "a Deployment has no maxExecutionTime", "remove maxExecutionTime"),
    ("    kind: deployment\n",
     "    kind: deployment\n    topology: {mode: preferred, level: topology.kubernetes.io/zone}\n",
     "teams/ml-research.yaml:86", "a Deployment has no topology", "remove topology"),
    ("    kind: trainjob\n", "    kind: trainjob\n    port: 8080\n", "teams/ml-research.yaml:66",
     "a trainjob profile serves nothing: port is for kinds deployment and leaderworkerset", "use kind: deployment"),
    # dev runs Kueue v0.15.2, whose chart does not enable the deployment integration.
    ("    kind: deployment\n    cluster: prod-east\n    pool: h100\n",
     "    kind: deployment\n    cluster: dev\n    pool: l4\n", "teams/ml-research.yaml:85",
     "Kueue on dev does not queue this kind (its integrations lack deployment)", "kueue.integrations"),
])
def test_bad_serving_profiles_are_located(fleet_root: Path, old: str, new: str, where: str, message: str,
                                          hint: str | None) -> None:
    refused_at(fleet_root, "teams/ml-research.yaml", old, new, where, message, hint)


def test_golden_cpu_only_server() -> None:
    """A profile on the cluster's cpuPool (pool: cpu) is a CPU-only server: its `cpu` and `memory` per pod
    and no GPUs, pinned to the CPU pool's nodes, so Kueue gives it the team's CPU pool flavor (the real
    Kueue admits it there in tests/test_never_preempted.py)."""
    body = load("prod-west/templates/inference/router.deployment.yaml")
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "inference"
    assert body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "standard"
    pod = body["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node.fleetgen.io/pool": "cpu"} and pod["tolerations"] == []
    [container] = pod["containers"]
    assert container["resources"] == {"requests": {"cpu": "31", "memory": "60Gi"}, "limits": {"memory": "60Gi"}}
    assert load("prod-west/templates/inference/router.service.yaml")["spec"]["ports"] == \
        [{"name": "serving", "port": 8080, "targetPort": "serving"}]
    assert not (TEMPLATES / "prod-west/templates/inference/router.sky.yaml").exists()


def test_a_cpu_only_pod_defaults_to_most_of_a_cpu_pool_node(fleet_root: Path) -> None:
    edit(fleet_root, "teams/inference.yaml", "    nodes: 4\n    cpu: \"31\"\n    memory: 60Gi\n", "    nodes: 2\n")
    assert run(fleet_root, "render").code == 0
    body = yaml.safe_load((fleet_root / "rendered/prod-west/templates/inference/router.deployment.yaml").read_text())
    assert body["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == \
        {"cpu": "55800m", "memory": "216Gi"}  # 90% of a 62-CPU, 240Gi node


@pytest.mark.parametrize(("old", "new", "where", "message", "hint"), [
    ("    nodes: 4\n    cpu:", "    nodes: 5\n    cpu:", "teams/inference.yaml:36",
     "5 pods of 31 CPUs and 60Gi (155 CPUs and 300Gi in all), but team inference may hold at most 124 CPUs and "
     "480Gi of cpuPool cpu of prod-west (held for the team: never preempted), so Kueue would never admit them all",
     "use fewer nodes"),
    ("    cpu: \"31\"", "    cpu: \"70\"", "teams/inference.yaml:36",
     "a pod of 70 CPUs and 60Gi is larger than a node of cpuPool cpu of prod-west (62 CPUs and 240Gi)", None),
    ("    pool: cpu\n", "    pool: cpu\n    gpusPerNode: 1\n", "teams/inference.yaml:36",
     "1 GPUs per pod, but cpuPool cpu has no GPUs", "remove gpusPerNode"),
    ("    kind: deployment\n    cluster: prod-west\n    pool: cpu",
     "    kind: job\n    cluster: prod-west\n    pool: cpu",
     "teams/inference.yaml:33", "a job profile cannot run on cpuPool cpu: CPU-only profiles are servers",
     "use kind: deployment or leaderworkerset"),
    ("    sharedMemory: 8Gi\n", "    sharedMemory: 8Gi\n    cpu: \"4\"\n", "teams/inference.yaml:29",
     "a pod on GPU pool 'l40s' gets the cpu that goes with its GPUs", "use pool: cpu for a CPU-only server"),
])
def test_bad_cpu_only_profiles_are_located(fleet_root: Path, old: str, new: str, where: str, message: str,
                                           hint: str | None) -> None:
    refused_at(fleet_root, "teams/inference.yaml", old, new, where, message, hint)


def test_golden_multi_node_server() -> None:
    """`kind: leaderworkerset`: `replicas` groups of `nodes` pods (the leader first) running the command as
    written, pinned to the pool with their GPUs; a group recreated whole when a pod restarts; rollouts one
    group at a time within the same GPUs; the leaders behind a ClusterIP Service on the port; no SkyPilot
    task. tests/test_lws.py runs it under the real LeaderWorkerSet controller and Kueue."""
    body = load("prod-east/templates/ml-research/big-serve.leaderworkerset.yaml")
    assert (body["apiVersion"], body["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "ml-research"
    spec = body["spec"]
    assert (spec["replicas"], spec["startupPolicy"]) == (2, "LeaderCreated")
    assert spec["rolloutStrategy"] == {"type": "RollingUpdate",
                                       "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0}}
    group = spec["leaderWorkerTemplate"]
    assert (group["size"], group["restartPolicy"]) == (2, "RecreateGroupOnPodRestart")
    assert "leaderTemplate" not in group  # the leader runs what its workers run
    pod = group["workerTemplate"]["spec"]
    assert "restartPolicy" not in pod and pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    [container] = pod["containers"]
    assert container["name"] == "server" and container["ports"] == [{"name": "serving", "containerPort": 8000}]
    assert [*container["command"], *container["args"]] == ["python", "-m", "research.serve_sharded", "--port", "8000"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    service = load("prod-east/templates/ml-research/big-serve.service.yaml")
    assert service["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": "big-serve",
                                           "leaderworkerset.sigs.k8s.io/worker-index": "0"}
    assert not (TEMPLATES / "prod-east/templates/ml-research/big-serve.sky.yaml").exists()


@pytest.mark.parametrize(("old", "new", "where", "message", "hint"), [
    ("    kind: leaderworkerset\n", "    kind: leaderworkerset\n    maxRestarts: 2\n", "teams/ml-research.yaml:100",
     "a LeaderWorkerSet has no maxRestarts: its groups serve until deleted", "remove maxRestarts"),
    ("    kind: leaderworkerset\n", "    kind: leaderworkerset\n    env: [{name: LWS_GROUP_SIZE, value: '4'}]\n",
     "teams/ml-research.yaml:100", "LWS_GROUP_SIZE is set by LeaderWorkerSet on every pod", "remove it"),
    ("    kind: deployment\n", "    kind: deployment\n    replicas: 2\n", "teams/ml-research.yaml:86",
     "a deployment profile has no groups of pods: replicas is for kind leaderworkerset", "remove replicas"),
    ("  - name: big-serve\n", "  - name: big-serve-for-the-largest-model-we-have-ever-served-x\n",
     "teams/ml-research.yaml:98", "at most 50 fit: the last group's StatefulSet", "shorten it by 3"),
    ("    kind: leaderworkerset\n    cluster: prod-east\n    pool: h100\n",
     "    kind: leaderworkerset\n    cluster: dev\n    pool: l4\n", "teams/ml-research.yaml:99",
     "cluster dev does not run LeaderWorkerSet's controller", "set operators.lws: true"),
])
def test_bad_multi_node_server_profiles_are_located(fleet_root: Path, old: str, new: str, where: str, message: str,
                                                    hint: str | None) -> None:
    refused_at(fleet_root, "teams/ml-research.yaml", old, new, where, message, hint)


def test_golden_train_job() -> None:
    """`kind: trainjob`: a Kubeflow Trainer TrainJob on the platform's torch-distributed runtime: the program
    under torchrun (which reads Trainer's PET_* settings), nodes and per-node resources in `spec.trainer`,
    and the pool, /dev/shm and nothing else as fleetgen's runtime patch of the runtime's `node` pods."""
    body = load("prod-east/templates/ml-research/finetune.trainjob.yaml")
    assert (body["apiVersion"], body["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    labels = body["metadata"]["labels"]
    assert (labels["kueue.x-k8s.io/queue-name"], labels["kueue.x-k8s.io/priority-class"]) == ("ml-research", "standard")
    spec = body["spec"]
    assert spec["runtimeRef"] == {"name": "torch-distributed"}
    trainer = spec["trainer"]
    assert trainer["command"] == ["torchrun"]
    assert trainer["args"] == ["--no-python", "python", "-m", "research.finetune", "--epochs", "3"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 8)
    assert trainer["env"] == [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "8"
    (patch,) = spec["runtimePatches"]
    assert patch["manager"] == "fleetgen.io/profile"
    (rjob,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["spec"]
    assert rjob["name"] == "node" and set(pod) == {"nodeSelector", "tolerations", "volumes", "containers"}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod["containers"] == [{"name": "node", "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}]
    assert (TEMPLATES / "prod-east/templates/ml-research/finetune.sky.yaml").exists()  # the same program


@pytest.mark.parametrize(("old", "new", "where", "message", "hint"), [
    ("    kind: trainjob\n    cluster: prod-east\n    pool: h100\n",
     "    kind: trainjob\n    cluster: dev\n    pool: l4\n", "teams/ml-research.yaml:65",
     "cluster dev does not run Kubeflow Trainer", "set operators.trainer: true"),
    ("    kind: trainjob\n", "    kind: trainjob\n    maxRestarts: 2\n", "teams/ml-research.yaml:66",
     "a TrainJob has no maxRestarts: its training runtime (torch-distributed) decides it", "remove maxRestarts"),
    ("    kind: trainjob\n", "    kind: trainjob\n    terminationGracePeriodSeconds: 600\n",
     "teams/ml-research.yaml:66", "a TrainJob has no terminationGracePeriodSeconds", "use kind: jobset"),
    ("    kind: trainjob\n", "    kind: trainjob\n    leader: {}\n", "teams/ml-research.yaml:66",
     "a TrainJob's nodes all run the same program", "remove leader"),
    ("    kind: trainjob\n", "    kind: trainjob\n    env: [{name: PET_MASTER_ADDR, value: x}]\n",
     "teams/ml-research.yaml:66", "PET_MASTER_ADDR is set by Kubeflow Trainer for torchrun", "remove it"),
    ("  - name: finetune\n", f"  - name: finetune-{'x' * 40}\n", "teams/ml-research.yaml:64",
     f"its longest pod name would be 'finetune-{'x' * 40}-node-0-1-xxxxx' (64 > 63)", "shorten it by 1"),
])
def test_bad_train_job_profiles_are_located(fleet_root: Path, old: str, new: str, where: str, message: str,
                                            hint: str | None) -> None:
    refused_at(fleet_root, "teams/ml-research.yaml", old, new, where, message, hint)
