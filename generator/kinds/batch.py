"""`kind: job`: a batch/v1 Indexed Job, one pod per node, for tools that know only Jobs.

Its pods' hostnames are `<job>-<index>` (the Job controller's, for Indexed Jobs); with more than one node a
headless Service of its own, named after it, gives them DNS names, so rank 0 is `<job>-0.<job>`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.errors import UsageError
from generator.kinds.base import POD_LIMITS, POD_PORTS, POD_REQUESTS, Body, Kind, ended_by_condition, status
from generator.kinds.jobset import RESERVED_ENV, dns_label_problems, replicated_pod_groups
from generator.kinds.podspec import (
    COMPLETION_INDEX,
    MAX_NAME,
    job_labels,
    launch,
    pod_failure_policy,
    pod_template,
    program_env,
    rendezvous_env,
    resized,
)

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""The label the API server adds to every Job's pod template (k8s.io/kubernetes v1.36.3
pkg/registry/batch/job/strategy.go:248); pod `i` of an Indexed Job is named host `<job>-<i>` by the Job
controller (pkg/controller/job/job_controller.go:1944)."""



def name_problems(name: str, profile: JobProfile) -> list[str]:
    """Each pod's hostname is <job>-<index> (its pod name is cut to fit by the controller)."""
    problems = dns_label_problems(name)
    budget = MAX_NAME - len(f"-{profile.nodes - 1}")
    if len(name) > budget:
        problems.append(f"name {name!r} has {len(name)} characters but at most {budget} fit: the last pod's "
                        f"hostname would be '{name}-{profile.nodes - 1}' ({len(name) + MAX_NAME - budget} > "
                        f"{MAX_NAME}); shorten it by {len(name) - budget}")
    return problems


def batch_job(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
              nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The batch/v1 Indexed Job for a `kind: job` profile: one pod per node, pod `i` on node rank `i`.

    Its pods' hostnames are `<job>-<index>` (the Job controller's, for Indexed Jobs); with more than one
    node they sit in the subdomain of the headless Service of `companion_service`, so rank 0 is
    `<job>-0.<job>`. Each index is retried up to maxRestarts times; a disruption is not counted
    (podFailurePolicy Ignore: the pod is recreated); a fail-fast exit code fails the Job.
    """
    profile = resized(profile, nodes, image, command)
    name = name or profile.name
    several = profile.nodes > 1
    master = f"{name}-0.{name}" if several else "localhost"
    env = [*rendezvous_env(profile, cluster, master),
           {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
           *({"name": k, "value": v} for k, v in program_env(profile).items())]
    container_command, container_args = launch(profile, list(profile.command), list(profile.args), 0)
    template = pod_template(team, cluster, profile, env, container_command, container_args, grouped=False,
                             subdomain=name if several else None)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": team.namespace_names[0],
                     "labels": job_labels(team, cluster, profile)},
        "spec": {
            "parallelism": profile.nodes, "completions": profile.nodes, "completionMode": "Indexed",
            "backoffLimitPerIndex": profile.max_restarts, "maxFailedIndexes": 0,
            "podFailurePolicy": pod_failure_policy(profile, "Ignore"),
            "template": template,
        },
    }


def rendezvous_service(job: Body) -> Body | None:
    """A multi-node batch Job's headless Service, which gives its pods their `<pod>.<job>` DNS names (as JobSet
    makes one for its own; addresses published before the pods are ready, since rendezvous comes first). A
    one-node Job needs none."""
    meta = job.get("metadata") or {}
    subdomain = job["spec"]["template"]["spec"].get("subdomain")
    if not subdomain:
        return None
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": subdomain, "namespace": meta["namespace"], "labels": unqueued_labels(job)},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {JOB_NAME_LABEL: meta["name"]}}}


def unqueued_labels(job: Body) -> dict[str, str]:
    """A job's labels less Kueue's: a Service beside the job is no workload to queue."""
    meta = job.get("metadata") or {}
    return {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith("kueue.x-k8s.io/")}


def _rank(body: dict[str, Any], name: str, rank: int) -> str:
    """A batch Job's rank is its completion index."""
    nodes = int((body.get("spec") or {}).get("completions") or 1)
    if rank >= nodes:
        raise UsageError(f"rank {rank} is out of range: the job has {nodes} nodes")
    return f"batch.kubernetes.io/job-name={name},batch.kubernetes.io/job-completion-index={rank}"


def _manager_problem(profile: JobProfile) -> tuple[str, str] | None:
    if profile.nodes < 2:
        return None
    return ("it dispatches a batch Job to a worker but not the Service its pods' hostnames need, so the nodes "
            "could not find rank 0", "use kind: jobset (JobSet makes that Service on the worker), or nodes: 1")


KIND = Kind(
    name="job", what="a batch Job", kind="Job", group="batch", version="v1", plural="jobs",
    frameworks=("batch/job",), build=batch_job, companion=rendezvous_service, name_problems=name_problems,
    leader_refused=("a batch Job has one pod template for every node, so no separate leader",
                    "remove leader (node rank 0 runs the profile's command), or use kind: jobset"),
    reserved_env=RESERVED_ENV, reserved_by="by fleetgen for the rendezvous", skypilot=True,
    manager_problem=_manager_problem,
    pods=lambda o, name: f"batch.kubernetes.io/job-name={name}", ended=ended_by_condition("Complete"),
    active=lambda o: int(status(o).get("active") or 0), restarts=lambda o: int(status(o).get("failed") or 0),
    rank=_rank, not_child="!jobset.sigs.k8s.io/jobset-name",
    shape=("spec.completions?:int", "spec.parallelism?:int", "spec." + POD_PORTS, "spec." + POD_REQUESTS,
           "spec." + POD_LIMITS, "spec.template.spec.subdomain?:str"),
    pod_groups=lambda body: replicated_pod_groups([{"template": {"spec": body.get("spec") or {}}}]),
    companion_purpose="rendezvous hostnames",
    doc="`job`: a batch/v1 Indexed Job, one pod per node (plus a headless Service named after the job for\n"
        "the rendezvous hostname when it has more than one node), for tools that know only Jobs; each\n"
        "node's pod is retried in place up to `maxRestarts` times (`backoffLimitPerIndex`). No `leader`.")
