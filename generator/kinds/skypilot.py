"""SkyPilot tasks: a batch profile's job as a SkyPilot task on Kubernetes, for teams that launch through
SkyPilot, and the client configuration that puts it in the team's namespace. Rendered beside the kinds whose
record says `skypilot` (generator/kinds)."""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from generator.kinds.podspec import MAX_EXEC_LABEL, program_env, toleration

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
    from generator.config.jobs import KUBERNETES_GRACE_SECONDS

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
