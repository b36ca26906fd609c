"""`kind: rayjob`: a KubeRay RayJob, a Ray cluster of a head and `nodes` workers on the pool that runs the
profile's program as its entrypoint and is torn down when the job ends."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from generator.errors import UsageError
from generator.kinds.base import Body, Kind, Refused, status
from generator.kinds.jobset import RESERVED_ENV, dns_label_problems
from generator.kinds.podspec import job_labels, resized
from generator.kinds.ray import KUBERAY, RAY_API, RAY_LEADER, RAY_SHAPE, RAY_UNUSED, cluster_spec, ray_pod_groups

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

RAY_JOB_NAME = 47
"""KubeRay's longest RayJob name: its cluster's name adds 6 characters and must fit 53 (ray-operator
v1.6.2 controllers/ray/utils/constant.go:296-305, checked at validation.go:280-281)."""
RAY_ENDED = {"Complete": "succeeded", "Failed": "failed"}
"""A RayJob's jobDeploymentStatus once it has ended (ray-operator v1.6.2 apis/ray/v1/rayjob_types.go)."""


def name_problems(name: str, profile: JobProfile) -> list[str]:
    """KubeRay names the RayJob's cluster after it, 6 characters longer."""
    problems = dns_label_problems(name)
    if len(name) > RAY_JOB_NAME:
        problems.append(f"name {name!r} has {len(name)} characters but KubeRay takes at most {RAY_JOB_NAME} for a "
                        f"RayJob (its Ray cluster's name adds 6); shorten it by {len(name) - RAY_JOB_NAME}")
    return problems


def rayjob(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
           nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The KubeRay RayJob for a `kind: rayjob` profile: a head and `nodes` workers on the pool, the
    program as the entrypoint. Kueue admits head and workers together, and requires the cluster to
    go when the job ends (`shutdownAfterJobFinishes`: kueue v0.19.2
    pkg/controller/jobs/rayjob/rayjob_webhook.go:138-140)."""
    profile = resized(profile, nodes, image, command)
    return {
        "apiVersion": RAY_API, "kind": "RayJob",
        "metadata": {"name": name or profile.name, "namespace": team.namespace_names[0],
                     "labels": job_labels(team, cluster, profile)},
        "spec": {
            "entrypoint": shlex.join([*profile.command, *profile.args]),
            "shutdownAfterJobFinishes": True,
            "backoffLimit": profile.max_restarts,
            "rayClusterSpec": cluster_spec(team, cluster, profile),
        },
    }


def _ended(obj: Body) -> tuple[str, str] | None:
    found = status(obj)
    phase = RAY_ENDED.get(str(found.get("jobDeploymentStatus") or ""))
    if phase is None:
        return None
    why = [str(found.get(k)) for k in ("jobStatus", "reason", "message") if found.get(k)]
    return phase, ": ".join(why)


def _rank(body: dict[str, Any], name: str, rank: int) -> str:
    """A RayJob's log is its driver's, which KubeRay's submitter Job (named after it) follows."""
    if rank:
        raise UsageError(f"a RayJob's log is its driver's (rank 0), which Ray gathers from every worker; "
                         f"not rank {rank}")
    return f"batch.kubernetes.io/job-name={name}"


# The pods of the Ray cluster KubeRay made for it (named in its status), and its driver's output in the
# submitter Job KubeRay names after it (container ray-job-submitter: controllers/ray/utils/constant.go:283).
KIND = Kind(
    name="rayjob", what="a RayJob", kind="RayJob", group="ray.io", version="v1", plural="rayjobs",
    operator=KUBERAY, frameworks=("ray.io/rayjob",), build=rayjob, name_problems=name_problems,
    refused=Refused(fields=RAY_UNUSED, why="Ray starts the entrypoint and reports how it ended"),
    leader_refused=RAY_LEADER, reserved_env=RESERVED_ENV, reserved_by="by fleetgen for the rendezvous",
    pods=lambda o, name: f"ray.io/cluster={status(o).get('rayClusterName') or name}", ended=_ended,
    active=lambda o: int(status(o).get("jobDeploymentStatus") == "Running"),
    restarts=lambda o: int(status(o).get("failed") or 0), rank=_rank, log_container="ray-job-submitter",
    shape=tuple("spec.rayClusterSpec." + p for p in RAY_SHAPE),
    pod_groups=lambda body: ray_pod_groups((body.get("spec") or {}).get("rayClusterSpec") or {}),
    doc="`rayjob`: a KubeRay RayJob (the cluster file needs `operators.ray`): a Ray cluster of a head and\n"
        "`nodes` workers on the pool, torn down when the job ends, that runs `command` and `args` as its\n"
        "entrypoint (Ray starts the program: no `launcher`, `failFastExitCodes`, `masterPort` or\n"
        "`leader`), retried whole up to `maxRestarts` times.")
