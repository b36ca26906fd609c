"""The pod every job kind runs: where it is pinned and what it tolerates, its share of a node's GPUs, CPU and
memory, shared memory, topology, security context, the program's launch and environment, and the failure
policy that tells a fault from a bug. Each kind's builder (generator/kinds/<kind>.py) shapes this pod into
its own object."""

from __future__ import annotations

import re
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any

from generator import quantity
from generator.objectlabels import labels

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig, CpuPool, NodePool, Taint
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

CONTAINER = "trainer"
NODE_SHARE = Decimal("0.9")
"""Share of a node's allocatable CPU and memory a training pod requests; the rest is left for node
agents (GPU exporter, log collector, CNI) so a full-node pod still fits."""
CPU_POD_SHARE = Decimal("0.9")
"""Share of a CPU-pool node a CPU-only profile's pod requests when it sets no `cpu` or `memory`: as a
training pod's of a GPU node, the rest left for node agents."""
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
POD_SUFFIX = 6  # "-xxxxx": the random suffix the Job controller appends to pod names
MAX_NAME = 63
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_MI = Decimal(1 << 20)
_MB = Decimal(10**6)
_MILLI = Decimal("0.001")
PODSET_GROUP = "kueue.x-k8s.io/podset-group-name"
"""Kueue places two pod sets with the same group name in one topology domain; a group is exactly two
pod sets, one of them with a single pod (sigs.k8s.io/kueue v0.19.2
pkg/controller/jobframework/tas_validation.go:213-260), which is a leader and its workers."""
UNBUFFERED = ("PYTHONUNBUFFERED", "1")
"""torchrun runs `python -u` itself; with --no-python it runs the command as written, so Python's
output is unbuffered through the environment instead and logs still arrive as they are printed."""


MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
"""Kueue copies it into the Workload's maximumExecutionTimeSeconds and deactivates the Workload once
it has been admitted that long (kueue v0.19.2 pkg/controller/jobframework/utils.go:193,
pkg/controller/constants/constants.go:59)."""
RESTRICTED_POD: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
"""What Pod Security `restricted` asks of a pod beyond `baseline` (the image must then run as a
non-root user: an image whose USER is root is refused by the kubelet, not by admission)."""



def program_env(profile: JobProfile) -> dict[str, str]:
    """The profile's own environment, plus PYTHONUNBUFFERED under torchrun unless it sets one."""
    env = {e.name: e.value for e in profile.env}
    if profile.launcher == "torchrun":
        env.setdefault(*UNBUFFERED)
    return env


def toleration(taint: Any) -> dict[str, Any]:
    """The toleration that matches a pool taint exactly (Equal with a value, else Exists)."""
    tol: dict[str, Any] = {"key": taint.key}
    if taint.value is None:
        tol["operator"] = "Exists"
    else:
        tol["operator"] = "Equal"
        tol["value"] = taint.value
    tol["effect"] = taint.effect
    return tol


def pod_security_level(cfg: ClusterConfig, team: str) -> str:
    """The Pod Security level enforced on the team's namespaces in this cluster."""
    return cfg.tenancy.pod_security_exceptions.get(team, cfg.tenancy.pod_security)


def node_share(pool: NodePool, gpus: int, factor: Decimal = Decimal(1)) -> tuple[str, str]:
    """(cpu, memory) that go with `gpus` of the pool in its per-node ratio, times `factor`.

    CPU is floored to millicores and memory to whole MiB (MB for decimal pools), so shares never
    add up to more than the nodes have.
    """
    share = Decimal(gpus) / pool.gpu.per_node * factor
    cpu = (quantity.value_of(pool.cpu_per_node) * share).quantize(_MILLI, rounding=ROUND_FLOOR)
    per_node, fmt = quantity.parse(pool.memory_per_node)
    step = _MI if fmt == "BinarySI" else _MB
    memory = (per_node * share / step).to_integral_value(rounding=ROUND_FLOOR) * step
    return quantity.canonical(cpu, "DecimalSI"), quantity.canonical(memory, fmt)


def cpu_pod_requests(pool: CpuPool, cpu: str | int | None, memory: str | int | None) -> tuple[str, str]:
    """(cpu, memory) one pod of a CPU-only profile requests: as set, else CPU_POD_SHARE of a CPU-pool node."""
    if cpu is None:
        cpu = quantity.canonical((quantity.value_of(pool.cpu_per_node) * CPU_POD_SHARE).quantize(
            _MILLI, rounding=ROUND_FLOOR), "DecimalSI")
    if memory is None:
        per_node, fmt = quantity.parse(pool.memory_per_node)
        step = _MI if fmt == "BinarySI" else _MB
        memory = quantity.canonical((per_node * CPU_POD_SHARE / step).to_integral_value(rounding=ROUND_FLOOR) * step,
                                    fmt)
    return quantity.normalise(cpu), quantity.normalise(memory)


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


def launch(profile: JobProfile, command: list[str], args: list[str], rank_offset: int) -> tuple[list[str], list[str]]:
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


def resized(profile: JobProfile, nodes: int | None, image: str | None, command: list[str] | None) -> JobProfile:
    """`profile` resized, with another image, or another program (which replaces command and arguments)."""
    updates: dict[str, Any] = {k: v for k, v in (("nodes", nodes), ("image", image)) if v is not None}
    if command is not None:
        updates.update(command=command, args=[], leader=profile.leader and profile.leader.model_copy(
            update={"command": None, "args": None}))
    return profile.model_copy(update=updates) if updates else profile


def topology_annotations(profile: JobProfile, grouped: bool) -> dict[str, str]:
    """Kueue's topology-aware scheduling annotations of one pod of `profile` (none without `topology`);
    `grouped`: a leader pod set and a worker pod set, placed in one domain as a podset group."""
    if profile.topology is None:
        return {}
    out = {f"kueue.x-k8s.io/podset-{profile.topology.mode}-topology": profile.topology.level}
    if grouped:  # rank 0 in the same domain as its workers
        out[PODSET_GROUP] = "rendezvous"
    if profile.topology.slice is not None:  # the checks exclude a leader (its podset group) here
        out["kueue.x-k8s.io/podset-slice-required-topology"] = profile.topology.slice.level
        out["kueue.x-k8s.io/podset-slice-size"] = str(profile.topology.slice.size)
    return out


def pod_template(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, env: list[dict[str, Any]],
                  command: list[str] | None, args: list[str] | None, grouped: bool, subdomain: str | None = None,
                  container_name: str = CONTAINER, ports: list[dict[str, Any]] | None = None,
                  restart_policy: str | None = "Never") -> dict[str, Any]:
    """The pod template of one node of `profile`: the training container on the pool's nodes (without
    `command`: a Ray worker, which KubeRay starts and which has no rendezvous port). `ports` replace the
    rendezvous port (a server's); `restart_policy` None leaves the pod's to its controller's default."""
    from generator.config.jobs import KUBERNETES_GRACE_SECONDS

    requests, limits, node_labels, taints = _placement(cluster, profile)
    pod_annotations = topology_annotations(profile, grouped)
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


def rendezvous_env(profile: JobProfile, cluster: ClusterConfig, master: str) -> list[dict[str, Any]]:
    pool = cluster.pool(profile.pool)
    assert pool is not None
    gpus = profile.gpus_in(pool)
    # JOB_COMPLETION_INDEX itself is injected into every pod of an Indexed Job by the Job controller.
    return [{"name": "MASTER_ADDR", "value": master}, {"name": "MASTER_PORT", "value": str(profile.master_port)},
            {"name": "NNODES", "value": str(profile.nodes)}, {"name": "NPROC_PER_NODE", "value": str(gpus)}]


def job_labels(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile) -> dict[str, str]:
    """Labels of the job object: fleetgen's, the team's queue, the priority and the execution limit."""
    priority = profile.priority or team.default_priority
    meta_labels = {**labels(cluster.name, team.name), "fleetgen.io/profile": profile.name,
                   "kueue.x-k8s.io/queue-name": team.queue_for(cluster, profile.pool)}
    if priority:
        meta_labels["kueue.x-k8s.io/priority-class"] = priority
    if profile.max_execution_seconds is not None:  # Kueue's Workload maximumExecutionTimeSeconds
        meta_labels[MAX_EXEC_LABEL] = str(profile.max_execution_seconds)
    return meta_labels


def pod_failure_policy(profile: JobProfile, on_disruption: str) -> dict[str, Any]:
    """Rule 0: a disrupted pod (drained or lost node, eviction, preemption); rule 1: a program bug (the
    fail-fast exit codes) fails the job."""
    return {"rules": [
        {"action": on_disruption, "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": CONTAINER, "operator": "In",
                                              "values": profile.exit_codes}}]}


