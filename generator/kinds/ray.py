"""KubeRay (`operators.ray`), the operator of the Ray kinds (rayjob.py, raycluster.py), and the Ray cluster
both run: a head without GPUs and `nodes` workers pinned to the pool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.kinds.base import POD_LIMITS, POD_PORTS, POD_REQUESTS, Body, Operator, Reach
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


DASHBOARD = Reach(name="dashboard", pods=(("ray.io/node-type", "head"),), port=8265)
"""KubeRay's operator follows a RayJob through its head's dashboard (the job submission API): it reads the
head Service's `dashboard` port, builds `http://<head service>.<namespace>.svc.<domain>:<port>` and asks
it for the job's status while the job runs and to stop it when it is deleted (ray-operator v1.6.2
controllers/ray/rayjob_controller.go:226-231,300-305,131-135, utils/util.go:939-970), with a plain HTTP
client unless started with --use-kubernetes-proxy (util.go:1001-1022, main.go:103), which fleetgen's values
leave off; a RayService's Serve config goes the same way (rayservice_controller.go:1763-1767). The head
Service is headless (common/service.go:127-129), so the connection lands on the head pod, at 8265 where the
head container declares no ports, as fleetgen's does (service.go:403-410,436-441, utils/constant.go:107).
KubeRay labels the head `ray.io/node-type: head` and no template can override it (common/pod.go:776-791).
Cut off, a RayJob never sees its job end, and fails 30 s after its submitter exits
(rayjob_controller.go:41,1193-1215)."""
SERVE = Reach(name="serve", pods=(("ray.io/node-type", "head"),), port=8000)
"""A RayService's head: KubeRay's operator asks the Serve proxy on the head pod's own IP, at the head container's
`serve` port or 8000, whether it is healthy, and labels the head into the Serve Service only when it answers
(ray-operator v1.6.2 controllers/ray/rayservice_controller.go:1815-1846, utils/util.go:1038-1050,
utils/constant.go:110,116), with the same plain HTTP client."""
KUBERAY = Operator(key="ray", title="KubeRay", api_groups=("ray.io",),
                   member_resources=("rayclusters", "rayjobs", "rayservices"), instead="jobset",
                   release="kuberay-operator", namespace="kuberay-system",
                   pods=(("app.kubernetes.io/name", "kuberay-operator"),
                         ("app.kubernetes.io/instance", "kuberay-operator")),
                   reaches=(DASHBOARD, SERVE))
"""KubeRay v1.6.2's chart aggregates none of its editor roles to `edit`: members get the Ray kinds where it runs.
A MultiKueue manager may run it and dispatch the Ray kinds: KubeRay leaves alone what Kueue's webhook marks
`spec.managedBy: kueue.x-k8s.io/multikueue` (ray-operator v1.6.2 controllers/ray/rayjob_controller.go:108,
raycluster_controller.go:163). Its pods are the chart's Deployment's selector labels, the name fixed by
the chart's nameOverride and the instance fleetgen's release name (kuberay v1.6.2
helm-chart/kuberay-operator/values.yaml:6, templates/deployment.yaml:15-23)."""
RAY_LEADER = ("{what}'s head is its leader", "remove leader (the head runs Ray's driver)")
"""A Ray kind's head is its leader: `leader` is refused."""
RAY_UNUSED = (("launcher", "launcher"), ("fail_fast_exit_codes", "failFastExitCodes"), ("master_port", "masterPort"))
"""Ray starts what runs on its cluster and wires its own ports."""
