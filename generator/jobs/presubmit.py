"""Checks before a job is submitted, so a job that cannot run is refused with the reason instead of
waiting in a queue forever: the member's rights (SelfSubjectAccessReview), the LocalQueue and the
WorkloadPriorityClass on the cluster, and the team's guaranteed + borrowable GPUs in the fleet files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generator.connection import ClusterError, Connection, timeout
from generator.jobs.shape import quantity
from generator.jobs.workloads import KUEUE, condition, preferred_version
from generator.kinds import BY_NAME, BY_OBJECT, companion_service

if TYPE_CHECKING:
    from generator.config.cluster import ClusterConfig
    from generator.config.fleet import Fleet
    from generator.config.jobs import JobProfile
    from generator.config.team import TeamConfig

@dataclass(frozen=True)
class Resource:
    """What the rights check asks for besides a job kind of the SDK's (a RayCluster): its API group, its
    plural, and its kind for messages."""

    group: str
    plural: str
    kind: str


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
DEFAULT_QUEUE = "default"
"""The LocalQueue Kueue gives a job without a queue label (every fleetgen team namespace has one)."""


class SubmitRefused(ClusterError):
    """A pre-submit check failed: nothing was created."""


@dataclass(frozen=True)
class Outcome:
    """One check: passed (True), failed (False) or could not be made (None), and what it found."""

    check: str
    passed: bool | None
    detail: str

    def __str__(self) -> str:
        mark = {True: "ok", False: "FAILED", None: "skipped"}[self.passed]
        return f"{mark:7} {self.check}: {self.detail}"


def allowed(api: Connection, verb: str, group: str, resource: str, namespace: str) -> tuple[bool, str]:
    from kubernetes import client

    body: Any = {"spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                                 "namespace": namespace}}}
    review = client.AuthorizationV1Api(api.client).create_self_subject_access_review(
        body, _request_timeout=timeout(api))
    status = review.status
    if status is None:
        return False, "the API server returned no status for the access review"
    return bool(status.allowed), str(status.reason or status.evaluation_error or "")


def rights(api: Connection, namespace: str, needed: tuple[tuple[str, str, str], ...] = (
        ("jobset.x-k8s.io", "jobsets", "JobSets"),)) -> Outcome:
    """Whether the user may create each of `needed` (group, resource, what it is called) in `namespace`."""
    for group, resource, called in needed:
        may, why = allowed(api, "create", group, resource, namespace)
        if not may:
            return Outcome("rights", False, f"you may not create {called} in namespace {namespace}"
                           f"{f' ({why})' if why else ''}: ask the team's owners to add you to its members "
                           "(teams/<team>.yaml)")
    return Outcome("rights", True, f"you may create {' and '.join(c for _, _, c in needed)} in namespace {namespace}")


def local_queue(api: Connection, namespace: str, queue: str | None) -> Outcome:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    version = preferred_version(api, KUEUE)
    if version is None:
        return Outcome("queue", False, "Kueue is not installed on this cluster (no kueue.x-k8s.io API)")
    # Without a label Kueue's webhook gives the job the namespace's LocalQueue `default`, if there is
    # one (kueue v0.19.2 pkg/controller/jobframework/defaults.go:79-97); without one Kueue ignores it.
    unlabelled = not queue
    queue = queue or DEFAULT_QUEUE
    try:
        found: Any = client.CustomObjectsApi(api.client).get_namespaced_custom_object(
            KUEUE, version, namespace, "localqueues", queue, _request_timeout=timeout(api))
    except ApiException as exc:
        if exc.status == 404 and unlabelled:
            return Outcome("queue", False, f"the job has no {QUEUE_LABEL} label and namespace {namespace} has no "
                           f"LocalQueue {DEFAULT_QUEUE!r}: Kueue would not queue it, so it would run outside any "
                           "quota; label it with the team's queue (named after the team)")
        if exc.status == 404:
            return Outcome("queue", False, f"no LocalQueue {queue!r} in namespace {namespace}: the team's queue is "
                           "named after the team; is the team's file merged and synced to this cluster?")
        if exc.status == 403:
            return Outcome("queue", None, f"cannot read LocalQueue {queue!r} (403)")
        raise
    active = condition(found, "Active")
    if active and active.get("status") == "False":
        why = active.get("message") or active.get("reason")
        return Outcome("queue", False, f"LocalQueue {queue!r} is inactive: {why}")
    target = (found.get("spec") or {}).get("clusterQueue", "?")
    if unlabelled:
        return Outcome("queue", True, f"no {QUEUE_LABEL} label: Kueue gives the job LocalQueue {namespace}/{queue} "
                       f"(ClusterQueue {target}), as every job without one in the namespace")
    return Outcome("queue", True, f"LocalQueue {namespace}/{queue} is active (ClusterQueue {target})")


def priority(api: Connection, name: str | None) -> Outcome:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    if not name:
        return Outcome("priority", True, "none set: the queue's default priority applies")
    version = preferred_version(api, KUEUE)
    try:
        client.CustomObjectsApi(api.client).get_cluster_custom_object(
            KUEUE, version or "v1beta2", "workloadpriorityclasses", name, _request_timeout=timeout(api))
    except ApiException as exc:
        if exc.status == 404:
            return Outcome("priority", False, f"WorkloadPriorityClass {name!r} does not exist on this cluster: "
                           "use one of the cluster file's priorities")
        if exc.status == 403:  # members read no cluster-scoped objects; the fleet files were checked instead
            return Outcome("priority", None, f"cannot read WorkloadPriorityClass {name!r} (403)")
        raise
    return Outcome("priority", True, f"WorkloadPriorityClass {name!r} exists")


def pod_groups(body: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(pods, pod template) of each group of identical pods of a job when all its pods run, as its kind counts
    them (a kind no module makes: as a JobSet's)."""
    return BY_OBJECT.get(str(body.get("kind")), BY_NAME["jobset"]).pod_groups(body)


def requested_gpus(body: dict[str, Any], resource: str) -> int:
    """GPUs of `resource` the whole job requests when all its pods run."""
    total = 0
    for pods, template in pod_groups(body):
        for container in (template.get("spec") or {}).get("containers") or []:
            resources = container.get("resources") or {}
            # a request left out is the limit (k8s v1.36.3 pkg/apis/core/v1/defaults.go:170-176)
            asked = (resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(resource))
            total += pods * int(quantity(asked or 0))
    return total


def capacity(body: dict[str, Any], fleet: Fleet | None, root: Path | None,
             profile: JobProfile | None = None) -> Outcome:
    """The request against the team's guaranteed + borrowable GPUs in the profile's pool (fleet
    files): `fleet` when the job came from it, else the fleet repository at `root`. `profile` is the
    one the job was made from (`Job.define` makes one no team file lists)."""
    from generator.capacity import never_admitted, team_shares
    from generator.checks import load_fleet

    labels = (body.get("metadata") or {}).get("labels") or {}
    team, cluster, name = (labels.get(f"fleetgen.io/{k}") for k in ("team", "cluster", "profile"))
    if not (team and cluster and name):
        return Outcome("capacity", None, "not a fleetgen profile job: the team's quota was not checked")
    if fleet is None and root is None:
        return Outcome("capacity", None, "no fleet files (no fleet repository here, and none read from the "
                       "cluster): the team's quota was not checked")
    if fleet is None:
        try:
            fleet = load_fleet(root)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - any unreadable fleet only means the check cannot be made
            return Outcome("capacity", None, f"no readable fleet repository at {root}: the team's quota was not "
                           "checked")
    tcfg = fleet.teams.get(team)
    found = profile or (next((p for p in tcfg.config.job_profiles if p.name == name), None) if tcfg else None)
    cfg = fleet.clusters[cluster].config if cluster in fleet.clusters else None
    if found is not None and cfg is not None and found.on_cpu_pool(cfg) and tcfg is not None:
        return _cpu_capacity(body, cfg, tcfg.config, found)
    pool = cfg.pool(found.pool) if found and cfg else None
    if found is None or pool is None:
        return Outcome("capacity", None, f"profile {team}/{name} is not in the fleet files: quota not checked")
    share = team_shares(fleet).get((cluster, pool.name, team))
    wanted = requested_gpus(body, pool.gpu.resource)
    where = f"{cluster}/{pool.name}"
    too_big = never_admitted(wanted, team, where, share)
    if too_big:
        return Outcome("capacity", False, f"{too_big}; use fewer nodes")
    assert share is not None  # a request of 0 GPUs fits any share; more needs one
    note = ("within the team's guarantee" if wanted <= share.guaranteed
            else f"borrows {wanted - share.guaranteed} while others are idle")
    return Outcome("capacity", True, f"{wanted} GPUs of at most {share.most} in {where} ({note})")


def _cpu_capacity(body: dict[str, Any], cfg: ClusterConfig, team: TeamConfig, profile: JobProfile) -> Outcome:
    """A CPU-only profile's pods against what the team may hold of the cluster's CPU pool."""
    from generator.compile.quota import cpu_pod_requests, cpu_profile_fit

    assert cfg.cpu_pool is not None
    cpu, memory = cpu_pod_requests(cfg.cpu_pool, profile.cpu, profile.memory)
    fits, why = cpu_profile_fit(cfg, team, sum(pods for pods, _ in pod_groups(body)), cpu, memory)
    return Outcome("capacity", True, why) if fits else Outcome("capacity", False, f"{why}; use fewer nodes")


def services_needed(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, what it is) of every Service the job brings to its namespace once submitted: the one fleetgen
    creates beside it (`companion_service`) and those its operator makes. JobSet names its pods' headless
    Service after `spec.network.subdomain`, else the JobSet (jobset v0.12.0 pkg/controllers/
    jobset_controller.go:1090-1099; DNS hostnames on unless turned off, pkg/webhooks/jobset_webhook.go:130-
    136); LeaderWorkerSet its headless Service after the set (lws v0.9.0 pkg/controllers/
    leaderworkerset_controller.go:213-217), or with subdomainPolicy UniquePerReplica one per group after its
    leader pod `<name>-<group>` (pkg/controllers/pod_controller.go:116-117); a TrainJob's JobSet is named
    after it. Both operators create theirs only when no Service of that name exists, and otherwise use
    whatever holds the name, silently (jobset jobset_controller.go:799-803, lws pkg/utils/controller/
    controller_utils.go:36-40): their pods' DNS names then do not resolve. So a name already taken must
    refuse the job before anything is created."""
    kind = BY_OBJECT.get(str(body.get("kind")))
    out: list[tuple[str, str]] = []
    service = companion_service(body)
    if service is not None and kind is not None:
        out.append((str(service["metadata"]["name"]), f"the Service fleetgen creates for its {kind.companion_purpose}"))
    return out + (kind.operator_services(body) if kind is not None else [])


def services_free(api: Connection, body: dict[str, Any]) -> Outcome:
    """Whether every Service name the job needs (`services_needed`) is free in its namespace, or held by a
    Service this very job owns (an earlier submit of it)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    needed = services_needed(body)
    if not needed:
        return Outcome("services", True, "the job needs no Service")
    meta = body.get("metadata") or {}
    namespace, kind, name = str(meta.get("namespace") or "default"), body.get("kind"), meta.get("name")
    core = client.CoreV1Api(api.client)
    for service, what in needed:
        try:
            found = core.read_namespaced_service(service, namespace, _request_timeout=timeout(api))
        except ApiException as exc:
            if exc.status == 404:
                continue
            return Outcome("services", None, f"cannot read Service {namespace}/{service} ({exc.status})")
        owners = (found.metadata.owner_references if found.metadata else None) or []
        known = BY_OBJECT.get(str(kind))
        if any(o.kind in ((known.owners if known else ()) or (kind,)) and o.name == name for o in owners):
            continue
        by = ", ".join(f"{o.kind} {o.name}" for o in owners) or "nothing: someone created it by hand"
        return Outcome("services", False, f"Service {service} already exists in namespace {namespace} (owned by "
                       f"{by}) and is not this job's, but {what} needs that name: submit the job under another "
                       "name (--name), or delete that Service if it is no longer used")
    names = ", ".join(s for s, _ in needed)
    return Outcome("services", True, f"Service name{'s' if len(needed) > 1 else ''} {names} free in namespace "
                   f"{namespace}")


def run_checks(api: Connection, body: dict[str, Any], fleet: Fleet | None, root: Path | None,
               profile: JobProfile | None = None, of: Any = None) -> list[Outcome]:
    """Every pre-submit check of the job `body` (of the SDK's Kind `of`, or a Resource; a JobSet when None), in
    order."""
    meta = body.get("metadata") or {}
    namespace, labels = str(meta.get("namespace") or "default"), meta.get("labels") or {}
    needed: tuple[tuple[str, str, str], ...] = (
        ((of.group, of.plural, f"{of.kind}s"),) if of is not None else (("jobset.x-k8s.io", "jobsets", "JobSets"),))
    if companion_service(body) is not None:
        needed += (("", "services", "Services (its rendezvous hostnames)" if body.get("kind") == "Job"
                    else "Services (its serving address)"),)
    checks: list[Callable[[], Outcome]] = [
        lambda: rights(api, namespace, needed),
        lambda: local_queue(api, namespace, labels.get(QUEUE_LABEL)),
        lambda: priority(api, labels.get(PRIORITY_LABEL)),
        lambda: capacity(body, fleet, root, profile),
        lambda: services_free(api, body),
    ]
    return [check() for check in checks]


def refuse(name: str, outcomes: list[Outcome]) -> None:
    """SubmitRefused naming every failed check, if any failed."""
    failed = [o for o in outcomes if o.passed is False]
    if failed:
        raise SubmitRefused(f"job {name} not submitted: " + "; ".join(f"{o.check}: {o.detail}" for o in failed))
