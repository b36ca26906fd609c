"""`kind: raycluster`: an interactive KubeRay RayCluster, the Ray cluster a RayJob of the same profile would
run on, kept until it is deleted, for notebooks and `ray job submit`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.kinds.base import Body, Kind, Refused, status
from generator.kinds.jobset import RESERVED_ENV, dns_label_problems
from generator.kinds.podspec import job_labels, resized
from generator.kinds.ray import KUBERAY, RAY_API, RAY_LEADER, RAY_SHAPE, RAY_UNUSED, cluster_spec, ray_pod_groups

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

RAY_CLUSTER_NAME = 53
"""KubeRay's longest RayCluster name, so that its longest Service name fits 63 characters (ray-operator
v1.6.2 controllers/ray/utils/constant.go:296-299, checked at validation.go:32-36 with DNS-1035)."""


def name_problems(name: str, profile: JobProfile) -> list[str]:
    """KubeRay names the cluster's Services after it, longer."""
    problems = dns_label_problems(name)
    if len(name) > RAY_CLUSTER_NAME:
        problems.append(f"name {name!r} has {len(name)} characters but KubeRay takes at most {RAY_CLUSTER_NAME} "
                        f"for a RayCluster (its Services add to it); shorten it by {len(name) - RAY_CLUSTER_NAME}")
    return problems


def raycluster(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
               nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The KubeRay RayCluster for a `kind: raycluster` profile: the Ray cluster a RayJob of the same
    profile would run on, kept until it is deleted, for notebooks and `ray job submit`. Kueue admits head
    and workers together and suspends it until then."""
    if command is not None:
        raise ValueError("a RayCluster runs no program of its own: submit one to it with `ray job submit`")
    profile = resized(profile, nodes, image, None)
    return {"apiVersion": RAY_API, "kind": "RayCluster",
            "metadata": {"name": name or profile.name, "namespace": team.namespace_names[0],
                         "labels": job_labels(team, cluster, profile)},
            "spec": cluster_spec(team, cluster, profile)}


def pods(body: Body, name: str) -> str:
    """The pods of a Ray cluster: KubeRay labels each with the cluster's name."""
    return f"ray.io/cluster={name}"


def _ended(obj: Body) -> tuple[str, str] | None:
    """A Ray cluster runs until deleted, unless KubeRay gave up on it."""
    found = status(obj)
    return ("failed", str(found.get("reason") or "")) if found.get("state") == "failed" else None


KIND = Kind(
    name="raycluster", what="a RayCluster", kind="RayCluster", group="ray.io", version="v1", plural="rayclusters",
    operator=KUBERAY, frameworks=("ray.io/raycluster",), build=raycluster, name_problems=name_problems,
    refused=Refused(fields=(("command", "command"), ("args", "args"), *RAY_UNUSED, ("max_restarts", "maxRestarts")),
                    why="it runs Ray only (submit programs to it with `ray job submit`) and is kept until deleted"),
    leader_refused=RAY_LEADER, reserved_env=RESERVED_ENV, reserved_by="by fleetgen for the rendezvous",
    runs_program=False, sdk_job=False,
    pods=pods, ended=_ended, active=lambda o: int(status(o).get("readyWorkerReplicas") or 0),
    rank=lambda body, name, rank: pods(body, name), log_container="ray-head",
    shape=tuple("spec." + p for p in RAY_SHAPE), pod_groups=lambda body: ray_pod_groups(body.get("spec") or {}),
    doc="`raycluster`: an interactive KubeRay RayCluster (the cluster file needs `operators.ray`): a head and\n"
        "`nodes` workers on the pool that run Ray and no program of their own (no `command`, `args`,\n"
        "`launcher`, `failFastExitCodes`, `masterPort`, `maxRestarts` or `leader`); it holds its quota until\n"
        "deleted (`fleetgen job cancel --kind raycluster`), or until `maxExecutionTime` when set.")
