"""KubeRay (`operators.ray`), the operator of the Ray kinds (rayjob.py, raycluster.py), and the Ray cluster
both run: a head without GPUs and `nodes` workers pinned to the pool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.kinds.base import POD_LIMITS, POD_PORTS, POD_REQUESTS, Body, Operator
from generator.kinds.podspec import RESTRICTED_CONTAINER, RESTRICTED_POD, pod_template

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

RAY_API = "ray.io/v1"
RAY_HEAD = {"cpu": "2", "memory": "8Gi"}
"""The Ray head's requests (and limits): it schedules and serves the dashboard, no GPUs."""


def cluster_spec(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile) -> dict[str, Any]:
    """A RayCluster's spec (a RayJob's `rayClusterSpec`): a head without GPUs and `nodes` workers pinned to
    the pool as the profile says; groups are fixed-size, as Kueue admits no autoscaling."""
    from generator.config.jobs import KUBERNETES_GRACE_SECONDS

    env = [{"name": e.name, "value": e.value} for e in profile.env]
    worker = pod_template(team, cluster, profile, env, None, None, grouped=False, container_name="ray-worker")
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


RAY_SHAPE = ("headGroupSpec." + POD_PORTS, "headGroupSpec." + POD_REQUESTS,
             "workerGroupSpecs?[]." + POD_PORTS, "workerGroupSpecs?[]." + POD_REQUESTS,
             "headGroupSpec." + POD_LIMITS, "workerGroupSpecs?[]." + POD_LIMITS, "workerGroupSpecs?[].replicas?:int")
"""What the SDK reads of a Ray cluster's spec."""


def ray_pod_groups(ray: Body) -> list[tuple[int, Body]]:
    """A Ray cluster's head, and each worker group's replicas."""
    groups = [(1, (ray.get("headGroupSpec") or {}).get("template") or {})]
    return groups + [(int(g.get("replicas") or 0), g.get("template") or {}) for g in ray.get("workerGroupSpecs") or []]


KUBERAY = Operator(key="ray", title="KubeRay", api_groups=("ray.io",),
                   member_resources=("rayclusters", "rayjobs", "rayservices"), instead="jobset")
"""KubeRay v1.6.2's chart aggregates none of its editor roles to `edit`: members get the Ray kinds where it runs.
A MultiKueue manager may run it and dispatch the Ray kinds: KubeRay leaves alone what Kueue's webhook marks
`spec.managedBy: kueue.x-k8s.io/multikueue` (ray-operator v1.6.2 controllers/ray/rayjob_controller.go:108,
raycluster_controller.go:163)."""
RAY_LEADER = ("{what}'s head is its leader", "remove leader (the head runs Ray's driver)")
"""A Ray kind's head is its leader: `leader` is refused."""
RAY_UNUSED = (("launcher", "launcher"), ("fail_fast_exit_codes", "failFastExitCodes"), ("master_port", "masterPort"))
"""Ray starts what runs on its cluster and wires its own ports."""
