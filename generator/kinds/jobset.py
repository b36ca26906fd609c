"""`kind: jobset`: a JobSet of one Indexed Job with a pod per node (or a leader job and a worker job).

Rendezvous is wired from JobSet's stable hostnames: rank 0 is `<jobset>-<job>-0-0.<subdomain>`, each pod's
node rank is its Job completion index. Kueue admits the whole job at once into the team's queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generator.errors import UsageError
from generator.kinds.base import POD_LIMITS, POD_PORTS, POD_REQUESTS, Body, Kind, ended_by_condition, status
from generator.kinds.podspec import (
    COMPLETION_INDEX,
    DNS_1035,
    MAX_NAME,
    POD_SUFFIX,
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

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
RESERVED_ENV = frozenset({"MASTER_ADDR", "MASTER_PORT", "NNODES", "NPROC_PER_NODE", "NODE_RANK",
                          "JOB_COMPLETION_INDEX"})
"""What fleetgen sets for torchrun's rendezvous in every pod of the batch kinds."""
FAIL_FAST_RULE = "failFastOnProgramErrors"
"""JobSet's webhook takes rule names matching ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ only (no '-'):
sigs.k8s.io/jobset v0.12.0 pkg/webhooks/jobset_webhook.go:418; its CRD schema does not say so."""
DISRUPTION_RULE = "restartOnDisruption"
DISRUPTION_MESSAGE = "has condition DisruptionTarget matching"
"""What the Job controller writes when a pod failure policy rule matches a pod condition:
"Pod %s/%s has condition %v matching %v rule at index %d" (k8s.io/kubernetes v1.36.3
pkg/controller/job/pod_failure_policy.go:74); the JobSet rule below matches it as an RE2 pattern."""


def replicated_jobs(profile: JobProfile) -> list[tuple[str, int]]:
    """(replicated job name, pods) of the profile: workers only, or a leader and workers."""
    if profile.leader is None:
        return [("workers", profile.nodes)]
    return [("leader", 1)] + ([("workers", profile.nodes - 1)] if profile.nodes > 1 else [])


def dns_label_problems(name: str) -> list[str]:
    """Why `name` is no DNS-1035 label of at most 63 characters (every kind's first rule), if it is not."""
    if DNS_1035.match(name) and len(name) <= MAX_NAME:
        return []
    return [f"{name!r} is not a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, at most "
            f"{MAX_NAME} characters)"]


def pod_name_problems(name: str, rjobs: list[tuple[str, int]]) -> list[str]:
    """Why the pods of a JobSet named `name` with these replicated jobs would have names over 63 characters."""
    problems = dns_label_problems(name)
    longest = max(len(f"-{rjob}-0-{pods - 1}") + POD_SUFFIX for rjob, pods in rjobs)
    budget = MAX_NAME - longest
    if len(name) > budget:
        rjob, pods = max(rjobs, key=lambda r: len(f"-{r[0]}-0-{r[1] - 1}"))
        problems.append(f"name {name!r} has {len(name)} characters but at most {budget} fit: its longest pod name "
                        f"would be '{name}-{rjob}-0-{pods - 1}-xxxxx' ({len(name) + longest} > {MAX_NAME}); "
                        f"shorten it by {len(name) - budget}")
    return problems


def name_problems(name: str, profile: JobProfile) -> list[str]:
    """A JobSet's pods are named `<jobset>-<job>-<replica>-<index>-<suffix>`, within 63 characters."""
    return pod_name_problems(name, replicated_jobs(profile))


def jobset(team: TeamConfig, cluster: ClusterConfig, profile: JobProfile, name: str | None = None,
           nodes: int | None = None, image: str | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """The JobSet for `profile` (optionally renamed, resized, with another image or command)."""
    profile = resized(profile, nodes, image, command)
    name = name or profile.name
    rjobs = replicated_jobs(profile)
    user_env = [{"name": name, "value": value} for name, value in program_env(profile).items()]
    base_env = rendezvous_env(profile, cluster, f"{name}-{rjobs[0][0]}-0-0.{name}")
    replicated = []
    offset = 0
    for rjob, pods in rjobs:
        leader = rjob == "leader"
        cmd = (profile.leader.command if leader and profile.leader and profile.leader.command else profile.command)
        args = (profile.leader.args if leader and profile.leader and profile.leader.args is not None else profile.args)
        container_command, container_args = launch(profile, list(cmd), list(args), offset)
        rank_env = ([{"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}]
                    if offset == 0 else [])
        template = pod_template(team, cluster, profile, base_env + rank_env + user_env, container_command,
                                 container_args, grouped=len(rjobs) == 2)
        replicated.append({"name": rjob, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
            # A disrupted pod fails its Job at once and the JobSet restarts without spending
            # maxRestarts; a program bug fails the JobSet. Anything else (a worker failure, an OOM
            # kill) exceeds backoffLimit 0 and restarts the JobSet within maxRestarts.
            "podFailurePolicy": pod_failure_policy(profile, "FailJob"),
            "template": template}}})
        offset += pods
    return {
        "apiVersion": JOBSET_API, "kind": "JobSet",
        "metadata": {"name": name, "namespace": team.namespace_names[0],
                     "labels": job_labels(team, cluster, profile)},
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


def _rank(body: dict[str, Any], name: str, rank: int) -> str:
    """A JobSet's ranks run through its replicated jobs in order."""
    offset = 0
    for rjob in (body.get("spec") or {}).get("replicatedJobs") or []:
        count = int(rjob["template"]["spec"].get("completions") or 1)
        if rank < offset + count:
            return (f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name={rjob['name']},"
                    f"batch.kubernetes.io/job-completion-index={rank - offset}")
        offset += count
    raise UsageError(f"rank {rank} is out of range: the job has {offset} nodes")


def replicated_pod_groups(rjobs: list[Any]) -> list[tuple[int, Body]]:
    """(pods, pod template) of each replicated job: its replicas times its Job's parallelism."""
    jobs = [(((r.get("template") or {}).get("spec") or {}), int(r.get("replicas") or 1)) for r in rjobs]
    return [(int(job.get("parallelism") or 1) * replicas, job.get("template") or {}) for job, replicas in jobs]


def _pod_groups(body: Body) -> list[tuple[int, Body]]:
    return replicated_pod_groups((body.get("spec") or {}).get("replicatedJobs") or [])


def _services(body: Body) -> list[tuple[str, str]]:
    """JobSet names its pods' headless Service after `spec.network.subdomain`, else the JobSet (jobset v0.12.0
    pkg/controllers/jobset_controller.go:1090-1099; DNS hostnames on unless turned off, pkg/webhooks/
    jobset_webhook.go:130-136)."""
    spec = body.get("spec") or {}
    if (spec.get("network") or {}).get("enableDNSHostnames") is False:
        return []
    subdomain = (spec.get("network") or {}).get("subdomain") or (body.get("metadata") or {}).get("name") or ""
    return [(str(subdomain), "the headless Service the JobSet controller makes for its pods' DNS names")]


def pods(body: Body, name: str) -> str:
    """The pods of a JobSet (and of the JobSet a TrainJob makes, named after it)."""
    return f"jobset.sigs.k8s.io/jobset-name={name}"


KIND = Kind(
    name="jobset", what="a JobSet", kind="JobSet", group="jobset.x-k8s.io", version="v1alpha2", plural="jobsets",
    frameworks=("jobset.x-k8s.io/jobset",), build=jobset, name_problems=name_problems,
    reserved_env=RESERVED_ENV, reserved_by="by fleetgen for the rendezvous", skypilot=True,
    pods=pods, ended=ended_by_condition("Completed"),
    active=lambda o: sum(int(j.get("active") or 0) for j in status(o).get("replicatedJobsStatus") or []),
    restarts=lambda o: int(status(o).get("restarts") or 0), rank=_rank,
    shape=("spec.replicatedJobs[].name:str", "spec.replicatedJobs[].replicas?:int",
           "spec.replicatedJobs[].template.spec.completions?:int",
           "spec.replicatedJobs[].template.spec.parallelism?:int",
           "spec.replicatedJobs[].template.spec." + POD_PORTS, "spec.replicatedJobs[].template.spec." + POD_REQUESTS,
           "spec.replicatedJobs[].template.spec." + POD_LIMITS),
    pod_groups=_pod_groups, operator_services=_services,
    doc="`jobset`: a JobSet, which recreates the whole job after a failure (within `maxRestarts`).")
