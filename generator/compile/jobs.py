"""Job templates: a team's job profiles as JobSets or batch Jobs (and SkyPilot tasks), ready to submit.

A JobSet here is one Indexed Job with a pod per node (or a leader job plus a worker job).
Rendezvous is wired from JobSet's stable hostnames: rank 0 is `<jobset>-<job>-0-0.<subdomain>`,
each pod's node rank is its Job completion index. A `kind: job` profile is that Indexed Job alone,
with a headless Service of its own for the hostnames: rank 0 is `<job>-0.<job>`. Kueue admits the
whole job at once into the team's queue. Templates live outside the synced tree: Kueue mutates
jobs, so GitOps must not.
"""

from __future__ import annotations

import re
import shlex
from decimal import Decimal
from typing import Any

from generator import quantity
from generator.compile.isolation import pod_security_level
from generator.compile.kueue import toleration
from generator.compile.manifest import Manifest, labels
from generator.compile.quota import cpu_pod_requests, node_share
from generator.config.cluster import ClusterConfig, NodePool, Taint
from generator.config.fleet import Loaded
from generator.config.jobs import KUBERNETES_GRACE_SECONDS, JobProfile
from generator.config.platform import TRAINER_RUNTIME
from generator.config.team import TeamConfig

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
CONTAINER = "trainer"
NODE_SHARE = Decimal("0.9")
"""Share of a node's allocatable CPU and memory a training pod requests; the rest is left for node
agents (GPU exporter, log collector, CNI) so a full-node pod still fits."""
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
POD_SUFFIX = 6  # "-xxxxx": the random suffix the Job controller appends to pod names
MAX_NAME = 63
RESERVED_ENV = frozenset({"MASTER_ADDR", "MASTER_PORT", "NNODES", "NPROC_PER_NODE", "NODE_RANK",
                          "JOB_COMPLETION_INDEX"})
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
FAIL_FAST_RULE = "failFastOnProgramErrors"
"""JobSet's webhook takes rule names matching ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ only (no '-'):
sigs.k8s.io/jobset v0.12.0 pkg/webhooks/jobset_webhook.go:418; its CRD schema does not say so."""
DISRUPTION_RULE = "restartOnDisruption"
DISRUPTION_MESSAGE = "has condition DisruptionTarget matching"
"""What the Job controller writes when a pod failure policy rule matches a pod condition:
"Pod %s/%s has condition %v matching %v rule at index %d" (k8s.io/kubernetes v1.36.3
pkg/controller/job/pod_failure_policy.go:74); the JobSet rule below matches it as an RE2 pattern."""
PODSET_GROUP = "kueue.x-k8s.io/podset-group-name"
"""Kueue places two pod sets with the same group name in one topology domain; a group is exactly two
pod sets, one of them with a single pod (sigs.k8s.io/kueue v0.19.2
pkg/controller/jobframework/tas_validation.go:213-260), which is a leader and its workers."""
UNBUFFERED = ("PYTHONUNBUFFERED", "1")
"""torchrun runs `python -u` itself; with --no-python it runs the command as written, so Python's
output is unbuffered through the environment instead and logs still arrive as they are printed."""


def program_env(profile: JobProfile) -> dict[str, str]:
    """The profile's own environment, plus PYTHONUNBUFFERED under torchrun unless it sets one."""
    env = {e.name: e.value for e in profile.env}
    if profile.launcher == "torchrun":
        env.setdefault(*UNBUFFERED)
    return env


def replicated_jobs(profile: JobProfile) -> list[tuple[str, int]]:
    """(replicated job name, pods) of the profile: workers only, or a leader and workers (a TrainJob's
    JobSet: the runtime's `node`)."""
    if profile.kind == "trainjob":
        return [(TRAINER_NODE, profile.nodes)]
    if profile.leader is None:
        return [("workers", profile.nodes)]
    return [("leader", 1)] + ([("workers", profile.nodes - 1)] if profile.nodes > 1 else [])


def name_problems(name: str, profile: JobProfile) -> list[str]:
    """Why `name` cannot name a job of this profile (the DNS and length rules of its kind), if it cannot."""
    problems = []
    if not DNS_1035.match(name) or len(name) > MAX_NAME:
        problems.append(f"{name!r} is not a DNS-1035 label (lower-case letters, digits and '-', starting with a "
                        f"letter, at most {MAX_NAME} characters)")
    if profile.kind == "raycluster":
        if len(name) > RAY_CLUSTER_NAME:
            problems.append(f"name {name!r} has {len(name)} characters but KubeRay takes at most {RAY_CLUSTER_NAME} "
                            f"for a RayCluster (its Services add to it); shorten it by {len(name) - RAY_CLUSTER_NAME}")
        return problems
    if profile.kind == "rayjob":
        if len(name) > RAY_JOB_NAME:
            problems.append(f"name {name!r} has {len(name)} characters but KubeRay takes at most {RAY_JOB_NAME} for a "
                            f"RayJob (its Ray cluster's name adds 6); shorten it by {len(name) - RAY_JOB_NAME}")
        return problems
    if profile.kind == "leaderworkerset":  # group g's StatefulSet <name>-<g> labels its pods <sts>-<10-char hash>
        budget = LWS_NAME - len(f"-{(profile.replicas or 1) - 1}")
        if len(name) > budget:
            problems.append(f"name {name!r} has {len(name)} characters but at most {budget} fit: the last group's "
                            f"StatefulSet '{name}-{(profile.replicas or 1) - 1}' would be over {LWS_NAME}, too long "
                            f"for its pods' controller-revision-hash label; shorten it by {len(name) - budget}")
        return problems
    if profile.kind == "job":  # each pod's hostname is <job>-<index> (its pod name is cut to fit by the controller)
        budget = MAX_NAME - len(f"-{profile.nodes - 1}")
        if len(name) > budget:
            problems.append(f"name {name!r} has {len(name)} characters but at most {budget} fit: the last pod's "
                            f"hostname would be '{name}-{profile.nodes - 1}' ({len(name) + MAX_NAME - budget} > "
                            f"{MAX_NAME}); shorten it by {len(name) - budget}")
        return problems
    longest = max(len(f"-{rjob}-0-{pods - 1}") + POD_SUFFIX for rjob, pods in replicated_jobs(profile))
    budget = MAX_NAME - longest
    if len(name) > budget:
        rjob, pods = max(replicated_jobs(profile), key=lambda r: len(f"-{r[0]}-0-{r[1] - 1}"))
        problems.append(f"name {name!r} has {len(name)} characters but at most {budget} fit: its longest pod name "
                        f"would be '{name}-{rjob}-0-{pods - 1}-xxxxx' ({len(name) + longest} > {MAX_NAME}); "
                        f"shorten it by {len(name) - budget}")
    return problems


def _per_node(pool: NodePool, gpus: int) -> dict[str, str]:
    cpu, memory = node_share(pool, gpus, NODE_SHARE)
    return {"cpu": cpu, "memory": memory, pool.gpu.resource: str(gpus)}


def _placement(cluster: ClusterConfig, profile: JobProfile) -> tuple[dict[str, str], dict[str, str],
                                                                      dict[str, str], list[Taint]]:
    """(requests, limits, node labels, taints) of one pod of `profile`: a GPU pool's GPUs with their share of a
    node, or on the CPU pool (a CPU-only profile) its `cpu` and `memory` and no GPUs. The node labels pin the
    pod to its pool: Kueue skips flavors whose nodeLabels contradict the pod's nodeSelector (kueue v0.19.2
    pkg/scheduler/flavorassigner/flavorassigner.go:1330-1380), so a CPU-only pod lands in the CPU pool's flavor."""
    if profile.on_cpu_pool(cluster):
        assert cluster.cpu_pool is not None
        cpu, memory = cpu_pod_requests(cluster.cpu_pool, profile.cpu, profile.memory)
        return ({"cpu": cpu, "memory": memory}, {"memory": memory}, dict(cluster.cpu_pool.node_labels),
                list(cluster.cpu_pool.taints))
    pool = cluster.pool(profile.pool)
    assert pool is not None
    gpus = profile.gpus_in(pool)
    requests = _per_node(pool, gpus)
    return requests, {"memory": requests["memory"], pool.gpu.resource: str(gpus)}, dict(pool.node_labels), \
        list(pool.taints)


def _launch(profile: JobProfile, command: list[str], args: list[str], rank_offset: int) -> tuple[list[str], list[str]]:
    """Container command and args. User strings are only ever separate argv entries, never shell text."""
    program = [*command, *args]
    if profile.launcher == "none":
        return program[:1], program[1:]
    # --no-python: torchrun runs the command exactly as written on every local rank. Without it
    # torchrun prepends `python -u`, so [python, train.py] would run `python -u python train.py`
    # (torch/distributed/run.py, config_from_args: cmd = [sys.executable, "-u"] unless no_python).
    torchrun = ["torchrun", "--nnodes=$(NNODES)", "--nproc-per-node=$(NPROC_PER_NODE)",
                "--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)"]
    if rank_offset == 0:
        return torchrun[:1], [*torchrun[1:], "--node-rank=$(NODE_RANK)", "--no-python", *program]
    # Workers after a leader: rank = completion index + offset, computed by a fixed script; the
    # torchrun flags and the program arrive as positional parameters ("$@"), never as shell text.
    script = f'exec torchrun --node-rank="$((JOB_COMPLETION_INDEX + {rank_offset}))" "$@"'
    return ["/bin/sh", "-c", script, "torchrun"], [*torchrun[1:], "--no-python", *program]


def _resized(profile: JobProfile, nodes: int | None, image: str | None, command: list[str] | None) -> JobProfile:
    """`profile` resized, with another image, or another program (which replaces command and arguments)."""
    updates: dict[str, Any] = {k: v for k, v in (("nodes", nodes), ("image", image)) if v is not None}
    if command is not None:
        updates.update(command=command, args=[], leader=profile.leader and profile.leader.model_copy(
            update={"command": None, "args": None}))
    return profile.model_copy(update=updates) if updates else profile


def _pod_template(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, env: list[dict[str, Any]],
                  command: list[str] | None, args: list[str] | None, grouped: bool, subdomain: str | None = None,
                  container_name: str = CONTAINER, ports: list[dict[str, Any]] | None = None,
                  restart_policy: str | None = "Never") -> dict[str, Any]:
    """The pod template of one node of `profile`: the training container on the pool's nodes (without
    `command`: a Ray worker, which KubeRay starts and which has no rendezvous port). `ports` replace the
    rendezvous port (a server's); `restart_policy` None leaves the pod's to its controller's default."""
    requests, limits, node_labels, taints = _placement(cluster, profile)
    pod_annotations = {}
    if profile.topology is not None:
        pod_annotations[f"kueue.x-k8s.io/podset-{profile.topology.mode}-topology"] = profile.topology.level
        if grouped:  # rank 0 in the same domain as its workers
            pod_annotations[PODSET_GROUP] = "rendezvous"
        if profile.topology.slice is not None:  # the checks exclude a leader (its podset group) here
            pod_annotations["kueue.x-k8s.io/podset-slice-required-topology"] = profile.topology.slice.level
            pod_annotations["kueue.x-k8s.io/podset-slice-size"] = str(profile.topology.slice.size)
    launched = {"command": command, "args": args} if command is not None else {}
    if ports is None and command is not None:
        ports = [{"name": "rendezvous", "containerPort": profile.master_port}]
    container = {
        "name": container_name, "image": profile.image, **launched, "env": env, **({"ports": ports} if ports else {}),
        "resources": {"requests": requests, "limits": limits},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    restricted = pod_security_level(cluster, team.name) == "restricted"
    if restricted:  # the namespace enforces Pod Security `restricted`: the template must meet it
        container["securityContext"] = RESTRICTED_CONTAINER
    pod: dict[str, Any] = {
        **({"securityContext": RESTRICTED_POD} if restricted else {}),
        **({"subdomain": subdomain} if subdomain else {}),
        **({"restartPolicy": restart_policy} if restart_policy else {}),
        **({"terminationGracePeriodSeconds": profile.termination_grace_period_seconds}
           if profile.termination_grace_period_seconds != KUBERNETES_GRACE_SECONDS else {}),
        # Pins the job to its pool: Kueue skips flavors whose nodeLabels contradict the pod's
        # nodeSelector, so a team's quota in another pool of the same queue is never used.
        **({"nodeSelector": dict(sorted(node_labels.items()))} if node_labels else {}),
        "tolerations": [toleration(t) for t in taints],
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory",
                                                  "sizeLimit": quantity.normalise(profile.shared_memory)}}],
    }
    if pod_annotations:
        return {"metadata": {"annotations": pod_annotations}, "spec": pod}
    return {"spec": pod}


def _rendezvous_env(profile: JobProfile, cluster: ClusterConfig, master: str) -> list[dict[str, Any]]:
    pool = cluster.pool(profile.pool)
    assert pool is not None
    gpus = profile.gpus_in(pool)
    # JOB_COMPLETION_INDEX itself is injected into every pod of an Indexed Job by the Job controller.
    return [{"name": "MASTER_ADDR", "value": master}, {"name": "MASTER_PORT", "value": str(profile.master_port)},
            {"name": "NNODES", "value": str(profile.nodes)}, {"name": "NPROC_PER_NODE", "value": str(gpus)}]


def _job_labels(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile) -> dict[str, str]:
    """Labels of the job object: fleetgen's, the team's queue, the priority and the execution limit."""
    priority = profile.priority or team.default_priority
    meta_labels = {**labels(cluster.name, team.name), "fleetgen.io/profile": profile.name,
                   "kueue.x-k8s.io/queue-name": team.queue_for(cluster, profile.pool)}
    if priority:
        meta_labels["kueue.x-k8s.io/priority-class"] = priority
    if profile.max_execution_seconds is not None:  # Kueue's Workload maximumExecutionTimeSeconds
        meta_labels[MAX_EXEC_LABEL] = str(profile.max_execution_seconds)
    return meta_labels


def _pod_failure_policy(profile: JobProfile, on_disruption: str) -> dict[str, Any]:
    """Rule 0: a disrupted pod (drained or lost node, eviction, preemption); rule 1: a program bug (the
    fail-fast exit codes) fails the job."""
    return {"rules": [
        {"action": on_disruption, "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                                              "values": profile.exit_codes}}]}


def jobset(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
           nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The JobSet for `profile` (optionally renamed, resized, with another image or command)."""
    profile = _resized(profile, nodes, image, command)
    name = name or profile.name
    rjobs = replicated_jobs(profile)
    user_env = [{"name": name, "value": value} for name, value in program_env(profile).items()]
    base_env = _rendezvous_env(profile, cluster, f"{name}-{rjobs[0][0]}-0-0.{name}")
    replicated = []
    offset = 0
    for rjob, pods in rjobs:
        leader = rjob == "leader"
        cmd = (profile.leader.command if leader and profile.leader and profile.leader.command else profile.command)
        args = (profile.leader.args if leader and profile.leader and profile.leader.args is not None else profile.args)
        container_command, container_args = _launch(profile, list(cmd), list(args), offset)
        rank_env = ([{"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}]
                    if offset == 0 else [])
        template = _pod_template(team, cluster, profile, base_env + rank_env + user_env, container_command,
                                 container_args, grouped=len(rjobs) == 2)
        replicated.append({"name": rjob, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
            # A disrupted pod fails its Job at once and the JobSet restarts without spending
            # maxRestarts; a program bug fails the JobSet. Anything else (a worker failure, an OOM
            # kill) exceeds backoffLimit 0 and restarts the JobSet within maxRestarts.
            "podFailurePolicy": _pod_failure_policy(profile, "FailJob"),
            "template": template}}})
        offset += pods
    return {
        "apiVersion": JOBSET_API, "kind": "JobSet",
        "metadata": {"name": name, "namespace": team.namespace_names[0],
                     "labels": _job_labels(team, cluster, profile)},
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": name},
            # Rules are tried in order; no match means RestartJobSet (counted against maxRestarts).
            "failurePolicy": {"maxRestarts": profile.max_restarts, "rules": [
                {"name": DISRUPTION_RULE, "action": "RestartJobSetAndIgnoreMaxRestarts",
                 "onJobFailureReasons": ["PodFailurePolicy"], "onJobFailureMessagePatterns": [DISRUPTION_MESSAGE]},
                {"name": FAIL_FAST_RULE, "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["workers" if profile.nodes > 1 or
                                                                          profile.leader is None else "leader"]},
            "replicatedJobs": replicated,
        },
    }


def batch_job(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
              nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The batch/v1 Indexed Job for a `kind: job` profile: one pod per node, pod `i` on node rank `i`.

    Its pods' hostnames are `<job>-<index>` (the Job controller's, for Indexed Jobs); with more than one
    node they sit in the subdomain of the headless Service of `companion_service`, so rank 0 is
    `<job>-0.<job>`. Each index is retried up to maxRestarts times; a disruption is not counted
    (podFailurePolicy Ignore: the pod is recreated); a fail-fast exit code fails the Job.
    """
    profile = _resized(profile, nodes, image, command)
    name = name or profile.name
    several = profile.nodes > 1
    master = f"{name}-0.{name}" if several else "localhost"
    env = [*_rendezvous_env(profile, cluster, master),
           {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
           *({"name": k, "value": v} for k, v in program_env(profile).items())]
    container_command, container_args = _launch(profile, list(profile.command), list(profile.args), 0)
    template = _pod_template(team, cluster, profile, env, container_command, container_args, grouped=False,
                             subdomain=name if several else None)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": team.namespace_names[0],
                     "labels": _job_labels(team, cluster, profile)},
        "spec": {
            "parallelism": profile.nodes, "completions": profile.nodes, "completionMode": "Indexed",
            "backoffLimitPerIndex": profile.max_restarts, "maxFailedIndexes": 0,
            "podFailurePolicy": _pod_failure_policy(profile, "Ignore"),
            "template": template,
        },
    }


def companion_service(job: dict[str, Any]) -> dict[str, Any] | None:
    """The Service a job needs beside it, created with it: a multi-node batch Job's headless Service, which
    gives its pods their `<pod>.<job>` DNS names (as JobSet makes one for its own; addresses published
    before the pods are ready, since rendezvous comes first), or a serving Deployment's ClusterIP Service
    on its port, or a LeaderWorkerSet's on its leaders' port. None for anything else (a JobSet makes its
    own; a one-node Job needs none)."""
    meta = job.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith("kueue.x-k8s.io/")}
    if job.get("kind") == "Deployment":
        pod = job["spec"]["template"]["spec"]
        ports = [p for c in pod["containers"] for p in c.get("ports") or [] if p.get("name") == SERVING_PORT]
        if not ports:
            return None
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels},
                "spec": {"selector": dict(job["spec"]["selector"]["matchLabels"]),
                         "ports": [{"name": SERVING_PORT, "port": ports[0]["containerPort"],
                                    "targetPort": SERVING_PORT}]}}
    if job.get("kind") == "LeaderWorkerSet":
        pod = job["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
        ports = [p for c in pod["containers"] for p in c.get("ports") or [] if p.get("name") == SERVING_PORT]
        if not ports:
            return None
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": leaders_service(meta["name"]), "namespace": meta["namespace"], "labels": labels},
                "spec": {"selector": {LWS_NAME_LABEL: meta["name"], LWS_WORKER_INDEX_LABEL: "0"},
                         "ports": [{"name": SERVING_PORT, "port": ports[0]["containerPort"],
                                    "targetPort": SERVING_PORT}]}}
    if job.get("kind") != "Job":
        return None
    subdomain = job["spec"]["template"]["spec"].get("subdomain")
    if not subdomain:
        return None
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": subdomain, "namespace": meta["namespace"], "labels": labels},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {JOB_NAME_LABEL: meta["name"]}}}


SERVING_CONTAINER = "server"
SERVING_PORT = "serving"
SERVING_INSTANCE = "app.kubernetes.io/instance"
"""A serving Deployment's container, its port's name (the Service's too), and the label that selects its pods."""
ONE_AT_A_TIME = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
"""A rollout replaces one replica at a time, within the GPUs the Deployment holds: a surge pod would need
quota the team may not have, and wait for it."""


def deployment(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
               nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The apps/v1 Deployment of a `kind: deployment` profile: `nodes` replicas of the server, each pinned to
    the pool with its GPUs and share, restarted when it exits. Kueue's deployment integration puts the
    queue and priority on its pods, which the pod integration then admits one by one (kueue v0.19.2
    pkg/controller/jobs/deployment/deployment_webhook.go:91-105)."""
    profile = _resized(profile, nodes, image, command)
    name = name or profile.name
    template = _server_pod(team, cluster, profile, "Always")  # the only policy a Deployment takes
    selected = {SERVING_INSTANCE: name}
    template["metadata"] = {**template.get("metadata", {}), "labels": dict(selected)}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": team.namespace_names[0],
                         "labels": _job_labels(team, cluster, profile)},
            "spec": {"replicas": profile.nodes, "selector": {"matchLabels": selected}, "strategy": ONE_AT_A_TIME,
                     "template": {"metadata": template["metadata"], "spec": template["spec"]}}}


def _server_pod(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile,
                restart_policy: str | None) -> dict[str, Any]:
    """A server's pod template: the command as written in container `server`, on its port when it has one."""
    env = [{"name": e.name, "value": e.value} for e in profile.env]
    program = [*profile.command, *profile.args]
    ports = [{"name": SERVING_PORT, "containerPort": profile.port}] if profile.port is not None else []
    return _pod_template(team, cluster, profile, env, program[:1], program[1:], grouped=False,
                         container_name=SERVING_CONTAINER, ports=ports, restart_policy=restart_policy)


LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_NAME = 52
"""The longest StatefulSet name whose pods' `controller-revision-hash` label (`<name>-<hash>`, the hash up to
10 characters) still fits 63; LeaderWorkerSet names group g's StatefulSet `<name>-<g>`."""
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
"""Labels LeaderWorkerSet puts on every pod of a set (lws v0.9.0 api/leaderworkerset/v1/
leaderworkerset_types.go:37,45): worker index 0 is each group's leader."""
LWS_LEADERS = "-leaders"
"""Suffix of the Service fleetgen makes for a LeaderWorkerSet's leaders. LeaderWorkerSet names its own Services
after the set: the headless one that gives every pod its DNS name (and so LWS_LEADER_ADDRESS) is `<name>`
(sigs.k8s.io/lws v0.9.0 pkg/controllers/leaderworkerset_controller.go:214-215, created only if no Service of
that name exists: pkg/utils/controller/controller_utils.go:33-63), and with subdomainPolicy UniquePerReplica
one per group, named after its leader pod `<name>-<group>` (pkg/controllers/pod_controller.go:116-117); its
other objects are StatefulSets `<name>` and `<name>-<group>` and ControllerRevisions, no Services. A name
ending in a word is none of these."""


def leaders_service(name: str) -> str:
    """The Service of LeaderWorkerSet `name`'s leaders (LWS_LEADERS)."""
    return f"{name}{LWS_LEADERS}"


LWS_RESERVED_ENV = frozenset({"LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"})
"""What LeaderWorkerSet's pod webhook sets in every container (leaderworkerset_types.go:67-75)."""


def leaderworkerset(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
                    nodes: int | None = None, image: str | None = None,
                    command: list[str] | None = None) -> dict[str, Any]:
    """The LeaderWorkerSet of a `kind: leaderworkerset` profile: `replicas` groups of `nodes` pods (the
    leader is each group's first), all running the server as written, each pod pinned to the pool with
    its GPUs and share. A group is recreated whole when one of its pods restarts (a multi-node server
    cannot lose a member), and a rollout replaces one group at a time within the same GPUs. Kueue admits
    each group as one Workload (kueue v0.19.2 pkg/controller/jobs/leaderworkerset/
    leaderworkerset_reconciler.go:283)."""
    profile = _resized(profile, nodes, image, command)
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet",
            "metadata": {"name": name or profile.name, "namespace": team.namespace_names[0],
                         "labels": _job_labels(team, cluster, profile)},
            "spec": {"replicas": profile.replicas or 1, "startupPolicy": "LeaderCreated",
                     "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                         "maxUnavailable": 1, "maxSurge": 0}},
                     # A StatefulSet's pods always restart (its default); LeaderWorkerSet labels them by name.
                     "leaderWorkerTemplate": {"size": profile.nodes, "restartPolicy": "RecreateGroupOnPodRestart",
                                              "workerTemplate": _server_pod(team, cluster, profile, None)}}}


RAY_API = "ray.io/v1"
RAY_JOB_NAME = 47
"""KubeRay's longest RayJob name: its cluster's name adds 6 characters and must fit 53 (ray-operator
v1.6.2 controllers/ray/utils/constant.go:296-305, checked at validation.go:280-281)."""
RAY_CLUSTER_NAME = 53
"""KubeRay's longest RayCluster name, so that its longest Service name fits 63 characters (ray-operator
v1.6.2 controllers/ray/utils/constant.go:296-299, checked at validation.go:32-36 with DNS-1035)."""
NO_SKYPILOT_KINDS = frozenset({"rayjob", "raycluster", "deployment", "leaderworkerset"})
"""Kinds with no SkyPilot task: Ray starts what a Ray kind runs (SkyPilot's nodes would run a program),
and a server is no batch task."""
RAY_HEAD = {"cpu": "2", "memory": "8Gi"}
"""The Ray head's requests (and limits): it schedules and serves the dashboard, no GPUs."""


def _ray_cluster_spec(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile) -> dict[str, Any]:
    """A RayCluster's spec (a RayJob's `rayClusterSpec`): a head without GPUs and `nodes` workers pinned to
    the pool as the profile says; groups are fixed-size, as Kueue admits no autoscaling."""
    env = [{"name": e.name, "value": e.value} for e in profile.env]
    worker = _pod_template(team, cluster, profile, env, None, None, grouped=False, container_name="ray-worker")
    head_container: dict[str, Any] = {"name": "ray-head", "image": profile.image, "env": env,
                                      "resources": {"requests": dict(RAY_HEAD), "limits": dict(RAY_HEAD)}}
    head_pod: dict[str, Any] = {"containers": [head_container]}
    if "securityContext" in worker["spec"]:
        head_container["securityContext"] = RESTRICTED_CONTAINER
        head_pod = {"securityContext": RESTRICTED_POD, **head_pod}
    if profile.termination_grace_period_seconds != KUBERNETES_GRACE_SECONDS:
        head_pod["terminationGracePeriodSeconds"] = profile.termination_grace_period_seconds
    return {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": head_pod}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": profile.nodes, "minReplicas": profile.nodes,
                                  "maxReplicas": profile.nodes, "rayStartParams": {}, "template": worker}]}


def rayjob(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
           nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The KubeRay RayJob for a `kind: rayjob` profile: a head and `nodes` workers on the pool, the
    program as the entrypoint. Kueue admits head and workers together, and requires the cluster to
    go when the job ends (`shutdownAfterJobFinishes`: kueue v0.19.2
    pkg/controller/jobs/rayjob/rayjob_webhook.go:138-140)."""
    profile = _resized(profile, nodes, image, command)
    return {
        "apiVersion": RAY_API, "kind": "RayJob",
        "metadata": {"name": name or profile.name, "namespace": team.namespace_names[0],
                     "labels": _job_labels(team, cluster, profile)},
        "spec": {
            "entrypoint": shlex.join([*profile.command, *profile.args]),
            "shutdownAfterJobFinishes": True,
            "backoffLimit": profile.max_restarts,
            "rayClusterSpec": _ray_cluster_spec(team, cluster, profile),
        },
    }


def raycluster(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
               nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The KubeRay RayCluster for a `kind: raycluster` profile: the Ray cluster a RayJob of the same
    profile would run on, kept until it is deleted, for notebooks and `ray job submit`. Kueue admits head
    and workers together and suspends it until then."""
    if command is not None:
        raise ValueError("a RayCluster runs no program of its own: submit one to it with `ray job submit`")
    profile = _resized(profile, nodes, image, None)
    return {"apiVersion": RAY_API, "kind": "RayCluster",
            "metadata": {"name": name or profile.name, "namespace": team.namespace_names[0],
                         "labels": _job_labels(team, cluster, profile)},
            "spec": _ray_cluster_spec(team, cluster, profile)}


TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINER_NODE = "node"
"""The runtime's replicated job and its container, which the Torch plugin fills from `spec.trainer`
(kubeflow/trainer v2.2.1 pkg/constants/constants.go:69)."""
TRAINER_PATCH_MANAGER = "fleetgen.io/profile"
"""Who owns the runtime patch fleetgen writes (Trainer requires a domain-prefixed manager; Kueue writes
its own beside it at admission: kueue v0.19.2 pkg/controller/jobs/trainjob/trainjob_controller.go:76)."""
TRAINER_RESERVED_ENV = frozenset({"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                                  "PET_MASTER_PORT"})
"""torchrun's settings the Torch plugin writes and Trainer's webhook refuses in `env` (constants.go:286-287)."""


def trainjob(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
             nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The Kubeflow Trainer TrainJob for a `kind: trainjob` profile, on the platform's `torch-distributed`
    runtime: image, program, nodes and per-node resources in `spec.trainer` (Trainer writes torchrun's
    PET_* settings, rank 0 at `<job>-node-0-0.<job>`), and the pool, topology and /dev/shm as a runtime
    patch of the node pods, the only way the TrainJob API reaches them."""
    profile = _resized(profile, nodes, image, command)
    name = name or profile.name
    pool = cluster.pool(profile.pool)
    assert pool is not None
    env = [{"name": k, "value": v} for k, v in program_env(profile).items()]
    template = _pod_template(team, cluster, profile, [], None, None, grouped=False, container_name=TRAINER_NODE)
    pod, (container,) = template["spec"], template["spec"].pop("containers")
    program = [*profile.command, *profile.args]
    # torchrun reads its flags from the PET_* variables; --no-python as for a JobSet (see _launch).
    launched = ["torchrun", "--no-python", *program] if profile.launcher == "torchrun" else program
    patch_pod = {k: pod[k] for k in ("securityContext", "nodeSelector", "tolerations", "volumes") if k in pod}
    patch_pod["containers"] = [{"name": TRAINER_NODE, "volumeMounts": container["volumeMounts"],
                                **({"securityContext": container["securityContext"]}
                                   if "securityContext" in container else {})}]
    node_template: dict[str, Any] = {"spec": patch_pod}
    if "metadata" in template:
        node_template = {"metadata": template["metadata"], **node_template}
    return {
        "apiVersion": TRAINER_API, "kind": "TrainJob",
        "metadata": {"name": name, "namespace": team.namespace_names[0],
                     "labels": _job_labels(team, cluster, profile)},
        "spec": {
            "runtimeRef": {"name": TRAINER_RUNTIME},
            "trainer": {"image": profile.image, "command": launched[:1], "args": launched[1:], "env": env,
                        "numNodes": profile.nodes, "numProcPerNode": profile.gpus_in(pool),
                        "resourcesPerNode": container["resources"]},
            "runtimePatches": [{"manager": TRAINER_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {
                "replicatedJobs": [{"name": TRAINER_NODE, "template": {"spec": {"template": node_template}}}]}}}}],
        },
    }


MAKERS = {"jobset": jobset, "job": batch_job, "rayjob": rayjob, "trainjob": trainjob, "raycluster": raycluster,
          "deployment": deployment, "leaderworkerset": leaderworkerset}
"""The compiler of each profile `kind`."""


def job_object(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, **changes: Any) -> dict[str, Any]:
    """The object of `profile`'s kind (a JobSet, a batch Job, a RayJob, a TrainJob or a RayCluster), with the
    changes `jobset` takes."""
    return MAKERS[profile.kind](team, cluster, profile, **changes)


JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""The label the API server adds to every Job's pod template (k8s.io/kubernetes v1.36.3
pkg/registry/batch/job/strategy.go:248); pod `i` of an Indexed Job is named host `<job>-<i>` by the Job
controller (pkg/controller/job/job_controller.go:1944)."""


MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
"""Kueue copies it into the Workload's maximumExecutionTimeSeconds and deactivates the Workload once
it has been admitted that long (kueue v0.19.2 pkg/controller/jobframework/utils.go:193,
pkg/controller/constants/constants.go:59)."""
RESTRICTED_POD: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
"""What Pod Security `restricted` asks of a pod beyond `baseline` (the image must then run as a
non-root user: an image whose USER is root is refused by the kubelet, not by admission)."""


SKYPILOT_GPU_NAMES = (
    "GB300", "GB200", "B300", "B200", "B100", "GH200", "H200", "H100-80GB", "H100-MEGA", "H100",
    "A100-80GB", "A100", "A10G", "A10", "A16", "A30", "A40", "RTX6000-Ada", "L40S", "L40", "L4",
    "A6000", "A5000", "A4000", "V100-32GB", "V100", "P100", "P40", "P4000", "P4", "T4g", "T4", "K80", "M60")
"""SkyPilot's canonical GPU names, first match wins (skypilot 0.14.1 sky/utils/gpu_names.py:11). The
test suite checks `skypilot_accelerator` against SkyPilot's own GFDLabelFormatter for every pool."""
SKYPILOT_PATTERNS = {"A100-80GB": r"A100.*-80GB", "H100-80GB": r"H100.*-80GB"}
"""Names SkyPilot matches by pattern instead of by word (sky/provision/kubernetes/utils.py:864-870)."""


def skypilot_accelerator(product: str) -> str:
    """The accelerator name SkyPilot gives nodes labelled nvidia.com/gpu.product=`product`."""
    for name in SKYPILOT_GPU_NAMES:
        pattern = SKYPILOT_PATTERNS.get(name, rf"\b{re.escape(name)}\b")
        if re.search(pattern, product):
            return name
    return product.upper().replace("NVIDIA-", "").replace("GEFORCE-", "").replace("RTX-", "RTX")


def skypilot_task(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile) -> dict[str, Any]:
    """The same job as a SkyPilot task, for teams that launch through SkyPilot on Kubernetes.

    The queue travels in the task's `config.kubernetes.kueue.local_queue_name`, which makes SkyPilot
    label every pod as one Kueue pod group (all nodes admitted together); the priority, the pool's
    node labels and tolerations travel in `pod_config`. The namespace cannot be set by a task:
    it comes from `skypilot_config` (see skypilot_config()).
    """
    pool = cluster.pool(profile.pool)
    assert pool is not None
    gpus = profile.gpus_in(pool)
    program = " ".join(shlex.quote(part) for part in [*profile.command, *profile.args])
    run = (f"torchrun --nnodes=$SKYPILOT_NUM_NODES --nproc-per-node={gpus} --node-rank=$SKYPILOT_NODE_RANK "
           f'--master-addr=$(echo "$SKYPILOT_NODE_IPS" | head -n1) --master-port={profile.master_port} '
           f"--no-python {program}" if profile.launcher == "torchrun" else program)
    pod_config: dict[str, Any] = {}
    priority = profile.priority or team.default_priority
    pod_labels = {"kueue.x-k8s.io/priority-class": priority} if priority else {}
    if profile.max_execution_seconds is not None:
        pod_labels[MAX_EXEC_LABEL] = str(profile.max_execution_seconds)
    if pod_labels:
        pod_config["metadata"] = {"labels": pod_labels}
    spec: dict[str, Any] = {}
    if profile.termination_grace_period_seconds != KUBERNETES_GRACE_SECONDS:
        spec["terminationGracePeriodSeconds"] = profile.termination_grace_period_seconds
    if pool.node_labels:
        spec["nodeSelector"] = dict(sorted(pool.node_labels.items()))
    if pool.taints:
        spec["tolerations"] = [toleration(t) for t in pool.taints]
    if spec:
        pod_config["spec"] = spec
    kubernetes: dict[str, Any] = {"kueue": {"local_queue_name": team.queue_for(cluster, profile.pool)}}
    if pod_config:
        kubernetes["pod_config"] = pod_config
    return {
        "name": profile.name,
        "num_nodes": profile.nodes,
        "resources": {"infra": "kubernetes", "accelerators": f"{skypilot_accelerator(pool.gpu.product)}:{gpus}",
                      "image_id": f"docker:{profile.image}"},
        "envs": program_env(profile),
        "config": {"kubernetes": kubernetes},
        "run": run + "\n",
    }


def skypilot_config(team: TeamConfig) -> dict[str, Any]:
    """SkyPilot client configuration for the team: its namespace, which no task can set
    (`kubernetes.namespace` is not among skypilot 0.14.1's OVERRIDEABLE_CONFIG_KEYS_IN_TASK,
    sky/skylet/constants.py:660). Used as `sky launch --config <this file> <task>`."""
    return {"kubernetes": {"namespace": team.namespace_names[0]}}


def compile_templates(cluster: Loaded[ClusterConfig], teams: list[Loaded[TeamConfig]]) -> list[Manifest]:
    """The job (JobSet, batch Job with its rendezvous Service, RayJob, TrainJob or RayCluster) and SkyPilot task
    of every profile that targets this cluster (not synced by GitOps)."""
    out = []
    for team in teams:
        for i, profile in enumerate(team.config.job_profiles):
            if profile.cluster != cluster.config.name:
                continue
            body = job_object(team.config, cluster.config, profile)
            folder, source = ("templates", team.config.name), team.at("jobProfiles", i)
            out.append(Manifest(folder, body, source, synced=False, file=f"{profile.name}.{profile.kind}.yaml"))
            service = companion_service(body)
            if service is not None:
                out.append(Manifest(folder, service, source, synced=False, file=f"{profile.name}.service.yaml"))
            if profile.kind not in NO_SKYPILOT_KINDS:
                out.append(Manifest(folder, skypilot_task(team.config, cluster.config, profile), source,
                                    synced=False, file=f"{profile.name}.sky.yaml", kubernetes=False))
        if any(p.cluster == cluster.config.name and p.kind not in NO_SKYPILOT_KINDS for p in team.config.job_profiles):
            out.append(Manifest(("templates", team.config.name), skypilot_config(team.config),
                                team.at("namespaces"), synced=False, file="skypilot-config.yaml", kubernetes=False))
    return out
