"""SkyPilot tasks: a batch profile's job as a SkyPilot task on Kubernetes, for teams that launch through
SkyPilot, and the client configuration that puts it in the team's namespace. Rendered beside the kinds whose
record says `skypilot` (generator/kinds)."""

from __future__ import annotations

import re
import shlex
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any

from generator import quantity
from generator.kinds.podspec import (
    MAX_EXEC_LABEL,
    NODE_SHARE,
    node_share,
    program_env,
    toleration,
    topology_annotations,
)

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

SKYPILOT_GPU_NAMES = (
    "GB300", "GB200", "B300", "B200", "B100", "GH200", "H200", "H100-80GB", "H100-MEGA", "H100",
    "A100-80GB", "A100", "A10G", "A10", "A16", "A30", "A40", "RTX6000-Ada", "L40S", "L40", "L4",
    "A6000", "A5000", "A4000", "V100-32GB", "V100", "P100", "P40", "P4000", "P4", "T4g", "T4", "K80", "M60")
"""SkyPilot's canonical GPU names, first match wins (skypilot 0.14.1 sky/utils/gpu_names.py:11). The
test suite checks `skypilot_accelerator` against SkyPilot's own GFDLabelFormatter for every pool."""
SKYPILOT_PATTERNS = {"A100-80GB": r"A100.*-80GB", "H100-80GB": r"H100.*-80GB"}
"""Names SkyPilot matches by pattern instead of by word (sky/provision/kubernetes/utils.py:864-870)."""
RAY_NODE_CONTAINER = "ray-node"
"""The container of every SkyPilot pod (skypilot 0.14.1 sky/provision/kubernetes/constants.py:25,
sky/templates/kubernetes-ray.yml.j2:590). A `pod_config` container of that name is merged into it by name
(sky/utils/config_utils.py:385-406), so its requests replace SkyPilot's own (j2:1792-1795); under another
name it would be a second container, which the API server refuses without an image."""
REMOTE_IDENTITY = "default"
"""The ServiceAccount SkyPilot's pods run as: the namespace's own `default`, like every other job pod of the
team. Any of SkyPilot's keywords (SERVICE_ACCOUNT, its default, LOCAL_CREDENTIALS, NO_UPLOAD) means its
`skypilot-service-account` (sky/clouds/kubernetes.py:860-873), for which every launch lists and creates a
Role, a RoleBinding, a ClusterRole and a ClusterRoleBinding (sky/provision/kubernetes/config.py:28-50), which
a member cannot; with a named account it sets none of them up (config.py:28-31, 90-92), and it uploads no
kubeconfig into the pods unless the value is LOCAL_CREDENTIALS (sky/backends/backend_utils.py:852-896)."""


def skypilot_accelerator(product: str) -> str:
    """The accelerator name SkyPilot gives nodes labelled nvidia.com/gpu.product=`product`."""
    for name in SKYPILOT_GPU_NAMES:
        pattern = SKYPILOT_PATTERNS.get(name, rf"\b{re.escape(name)}\b")
        if re.search(pattern, product):
            return name
    return product.upper().replace("NVIDIA-", "").replace("GEFORCE-", "").replace("RTX-", "RTX")


def skypilot_resources(cluster: ClusterConfig, profile: JobProfile) -> tuple[str, str, float, float]:
    """(cpu, memory, SkyPilot's cpus, SkyPilot's memory in GB) of one pod: the pool's share that the JobSet
    kind requests (podspec.node_share), as quantities for `pod_config`, and as the numbers SkyPilot sizes
    and checks a pod by (`resources.cpus`, `resources.memory`: CPUs and GB, which it names to 0.1,
    sky/provision/kubernetes/utils.py:3630-3642), floored so they never exceed the quantities."""
    pool = cluster.pool(profile.pool)
    assert pool is not None
    cpu, memory = node_share(pool, profile.gpus_in(pool), NODE_SHARE)
    tenth = Decimal("0.1")
    cpus = quantity.value_of(cpu).quantize(tenth, rounding=ROUND_FLOOR)
    gigabytes = (quantity.value_of(memory) / Decimal(10**9)).quantize(tenth, rounding=ROUND_FLOOR)
    return cpu, memory, float(cpus), float(gigabytes)


def skypilot_task(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile) -> dict[str, Any]:
    """The same job as a SkyPilot task, for teams that launch through SkyPilot on Kubernetes.

    One gang: the queue travels in the task's `config.kubernetes.kueue.local_queue_name`, for which SkyPilot
    labels every pod with the queue and `kueue.x-k8s.io/pod-group-name` and annotates the group's size
    (`pod-group-total-count`: num_nodes) and `retriable-in-group: "false"` (skypilot 0.14.1
    sky/templates/kubernetes-ray.yml.j2:306-331): Kueue makes one Workload of all the task's pods and admits
    them together or not at all, and finishes it once none of them runs rather than wait for a failed pod's
    replacement (kueue v0.19.2 pkg/controller/jobs/pod/pod_controller.go:406-411). The per-pod choice, a
    `kueue.x-k8s.io/queue-name` in `resources.labels` (pod labels, j2:296-299) and no `local_queue_name`,
    makes each pod its own Workload, admitted one by one: a multi-node task may then hold some nodes' GPUs
    while the rest wait, which is why it is not rendered.

    `pod_config` is merged into every pod (sky/provision/kubernetes/utils.py:4153-4205, one pod template
    for head and workers, instance.py:2345-2367): the priority and execution-limit labels, the profile's
    topology annotations (those the JobSet kind puts on its pods: Kueue reads them from each pod of the
    group), the pool's node labels and tolerations, and the pool's CPU and memory share on SkyPilot's
    container, which replace its default of 4 CPUs and 16 GB per GPU (sky/clouds/kubernetes.py:211-214,
    1413-1418); `resources.cpus`/`memory` say the same to SkyPilot's optimizer and fit check. The namespace
    cannot be set by a task: it comes from `skypilot_config` (see skypilot_config()).
    """
    from generator.config.jobs import KUBERNETES_GRACE_SECONDS

    pool = cluster.pool(profile.pool)
    assert pool is not None
    gpus = profile.gpus_in(pool)
    program = " ".join(shlex.quote(part) for part in [*profile.command, *profile.args])
    run = (f"torchrun --nnodes=$SKYPILOT_NUM_NODES --nproc-per-node={gpus} --node-rank=$SKYPILOT_NODE_RANK "
           f'--master-addr=$(echo "$SKYPILOT_NODE_IPS" | head -n1) --master-port={profile.master_port} '
           f"--no-python {program}" if profile.launcher == "torchrun" else program)
    cpu, memory, cpus, gigabytes = skypilot_resources(cluster, profile)
    metadata: dict[str, Any] = {}
    priority = profile.priority or team.default_priority
    pod_labels = {"kueue.x-k8s.io/priority-class": priority} if priority else {}
    if profile.max_execution_seconds is not None:
        pod_labels[MAX_EXEC_LABEL] = str(profile.max_execution_seconds)
    if pod_labels:
        metadata["labels"] = pod_labels
    annotations = topology_annotations(profile, grouped=False)  # one pod set: every pod runs the same
    if annotations:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {}
    if profile.termination_grace_period_seconds != KUBERNETES_GRACE_SECONDS:
        spec["terminationGracePeriodSeconds"] = profile.termination_grace_period_seconds
    if pool.node_labels:
        spec["nodeSelector"] = dict(sorted(pool.node_labels.items()))
    if pool.taints:
        spec["tolerations"] = [toleration(t) for t in pool.taints]
    spec["containers"] = [{"name": RAY_NODE_CONTAINER, "resources": {
        "requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}}]
    pod_config: dict[str, Any] = {**({"metadata": metadata} if metadata else {}), "spec": spec}
    kubernetes: dict[str, Any] = {"kueue": {"local_queue_name": team.queue_for(cluster, profile.pool)},
                                  "pod_config": pod_config}
    return {
        "name": profile.name,
        "num_nodes": profile.nodes,
        "resources": {"infra": "kubernetes", "accelerators": f"{skypilot_accelerator(pool.gpu.product)}:{gpus}",
                      "cpus": cpus, "memory": gigabytes, "image_id": f"docker:{profile.image}"},
        "envs": program_env(profile),
        "config": {"kubernetes": kubernetes},
        "run": run + "\n",
    }


def skypilot_config(team: TeamConfig) -> dict[str, str | dict[str, str]]:
    """SkyPilot client configuration for the team: its namespace, which no task can set
    (`kubernetes.namespace` is not among skypilot 0.14.1's OVERRIDEABLE_CONFIG_KEYS_IN_TASK,
    sky/skylet/constants.py:660), and the pods' ServiceAccount (REMOTE_IDENTITY), without which a
    member's launch fails creating SkyPilot's Role. Used as `sky check --config <this file>` and
    `sky launch --config <this file> <task>`."""
    return {"kubernetes": {"namespace": team.namespace_names[0], "remote_identity": REMOTE_IDENTITY}}
