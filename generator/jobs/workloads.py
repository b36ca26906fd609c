"""What Kueue says about a job: its Workload, why it waits, and where it stands in the queue.

Kueue's API version is asked of the cluster (API discovery), never assumed: a v0.15 cluster and a
v0.19 cluster both answer. The reasons come from Kueue v0.19.2's Workload conditions
(apis/kueue/v1beta2/workload_types.go:931-1170); each is a row in a table, not a branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generator.connection import Connection, get_json, timeout, word
from generator.kinds.base import condition as condition  # re-exported: how the SDK reads a condition

KUEUE = "kueue.x-k8s.io"
VISIBILITY = "visibility.kueue.x-k8s.io"
KNOWN_VERSIONS = ("v1beta2", "v1beta1")
"""Versions of Kueue's API this client reads, newest first; the cluster's preferred one is used."""

QUOTA_REASONS = {
    "NoMatchingFlavor": "no flavor of its ClusterQueue fits (node labels, tolerations or resources)",
    "WaitingForQuota": "waiting for quota: the team's GPUs and what it may borrow are in use",
    "ExceedsMaxQuota": "it asks for more than the queue could ever give: use fewer nodes",
    "TopologyPlacementFailed": "no topology domain has room for all its pods together",
    "WaitingForPreemptedWorkloads": "Kueue is preempting other workloads to make room",
    "Misconfigured": "its ClusterQueue or LocalQueue is misconfigured: tell a platform engineer",
    "Suspended": "its queue is stopped (stopPolicy): tell a platform engineer",
    "PendingEvaluation": "not evaluated by Kueue's scheduler yet",
    "WaitingForPodsReady": "waiting for other workloads' pods to become ready (waitForPodsReady)",
}
"""QuotaReserved=False reasons (workload_types.go:945-977), said for a person."""

EVICTION_REASONS = {
    "Preempted": "preempted by a higher-priority workload or a team reclaiming its quota",
    "PodsReadyTimeout": "its pods did not all become ready in time (waitForPodsReady)",
    "AdmissionCheck": "an admission check failed or was retried",
    "ClusterQueueStopped": "its ClusterQueue was stopped",
    "LocalQueueStopped": "its LocalQueue was stopped",
    "NodeFailures": "a node it ran on failed",
    "InactiveWorkload": "it was deactivated",
    "Deactivated": "it was deactivated",
    "MaximumExecutionTimeExceeded": "it ran past its maximum execution time",
    "FlavorMigration": "it was moved to another flavor",
    "EvictedOnManagerCluster": "the MultiKueue manager evicted it",
}
"""Evicted=True reasons (workload_types.go:1083-1144)."""

PREEMPTION_REASONS = {
    "InClusterQueue": "by a higher-priority job of the same team",
    "InCohortReclamation": "by another team reclaiming GPUs this team had borrowed",
    "InCohortFairSharing": "by fair sharing in the cohort",
    "InCohortReclaimWhileBorrowing": "by another team that was itself borrowing",
}
"""Preempted=True reasons (workload_types.go:1037-1049)."""

DEACTIVATIONS = {
    "MaximumExecutionTimeExceeded": "Kueue deactivated it: it ran its maximum execution time (label "
                                    "kueue.x-k8s.io/max-exec-time-seconds, or the team's maxExecutionTime); "
                                    "resubmit it to run again, with a shorter run or checkpoints",
    "RequeuingLimitExceeded": "Kueue deactivated it: it was evicted and requeued more times than "
                              "waitForPodsReady allows; fix why its pods do not become ready, then resubmit it",
}
"""Why Kueue deactivated a Workload: the cause in its Evicted reason `Deactivated` + `DueTo` + cause
(kueue v0.19.2 pkg/controller/core/workload_controller.go:676-685 and 923,
pkg/workload/evict/evict.go:180-183, pkg/workload/patching/patching.go:302-304)."""
DEACTIVATED_DUE_TO = "DeactivatedDueTo"


def _true(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    found = condition(obj, kind)
    return found if found and found.get("status") == "True" else None


def preferred_version(api: Connection, group: str) -> str | None:
    """The version of `group` the cluster prefers (discovery), among the ones this client reads; cached."""
    cache = api.versions
    if group not in cache:
        from kubernetes.client.exceptions import ApiException

        try:
            found: Any = get_json(api, f"/apis/{group}")
        except ApiException as exc:
            if exc.status != 404:
                raise
            found = {}
        served = [v.get("version") for v in (found or {}).get("versions") or []]
        preferred = ((found or {}).get("preferredVersion") or {}).get("version")
        cache[group] = preferred if preferred in KNOWN_VERSIONS else next(
            (v for v in KNOWN_VERSIONS if v in served), None)
    return cache[group]


def workload_of(api: Connection, namespace: str, uid: str) -> dict[str, Any] | None:
    """The Workload Kueue made for the job with this uid, or None (not yet, or Kueue absent)."""
    items = sorted(workloads_of(api, namespace, uid), key=lambda w: w["metadata"].get("creationTimestamp") or "")
    return items[-1] if items else None


def workloads_of(api: Connection, namespace: str, uid: str) -> list[dict[str, Any]]:
    """Every Workload Kueue made for the object with this uid (a LeaderWorkerSet has one per group), by name."""
    from kubernetes import client

    version = preferred_version(api, KUEUE)
    if version is None:
        return []
    found: Any = client.CustomObjectsApi(api.client).list_namespaced_custom_object(
        KUEUE, version, namespace, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={uid}",
        _request_timeout=timeout(api))
    return sorted(found["items"], key=lambda w: str(w["metadata"].get("name")))


@dataclass(frozen=True)
class Position:
    """Where a pending workload stands (Kueue's visibility API), counted from 1."""

    in_local_queue: int
    in_cluster_queue: int
    queue: str

    def __str__(self) -> str:
        return (f"position {self.in_local_queue} in queue {self.queue} "
                f"({self.in_cluster_queue} in its ClusterQueue)")


def pending_workloads(api: Connection, namespace: str, queue: str) -> list[dict[str, Any]] | str:
    """The LocalQueue's pending workloads as Kueue's visibility API lists them, or why it cannot be told."""
    from kubernetes.client.exceptions import ApiException

    version = preferred_version(api, VISIBILITY)
    if version is None:
        return "queue position unknown: Kueue's visibility API is not served on this cluster"
    path = f"/apis/{VISIBILITY}/{version}/namespaces/{namespace}/localqueues/{queue}/pendingworkloads"
    try:
        found: Any = get_json(api, path)
    except ApiException as exc:
        if exc.status in (403, 404, 503):
            return f"queue position unknown: the visibility API answered {exc.status} {exc.reason}"
        raise
    return [item for item in (found or {}).get("items") or [] if isinstance(item, dict)]


def _position(listed: list[dict[str, Any]] | str, queue: str, workload: str) -> Position | str:
    if isinstance(listed, str):
        return listed
    for item in listed:
        if (item.get("metadata") or {}).get("name") == workload:
            # The API counts from 0 (apis/visibility/v1beta2/types.go:76-79); people count from 1.
            return Position(int(item.get("positionInLocalQueue") or 0) + 1,
                            int(item.get("positionInClusterQueue") or 0) + 1, queue)
    return "not in the queue's pending list (being admitted, or waiting to be requeued)"


def queue_position(api: Connection, namespace: str, queue: str, workload: str) -> Position | str:
    """The workload's position in its LocalQueue, or why it cannot be told."""
    return _position(pending_workloads(api, namespace, queue), queue, workload)


NOT_EVALUATED = ("", "PendingEvaluation")
"""QuotaReserved reasons (none, or Kueue's own) of a workload Kueue's scheduler has not looked at."""


def waiting_behind(api: Connection, namespace: str, workload: dict[str, Any], listed: list[dict[str, Any]] | str,
                   position: Position | str) -> str:
    """For a workload Kueue has not evaluated with others ahead of it in its ClusterQueue: the first
    of them and why it waits. Kueue hands its scheduler only each ClusterQueue's head; a StrictFIFO
    queue keeps a head that does not fit at the front (kueue v0.19.2
    pkg/cache/queue/cluster_queue.go:1044-1054 requeues it to the heap at once), so
    nothing behind it is evaluated until it is admitted. '' otherwise."""
    reserved = condition(workload, "QuotaReserved") or {"status": "False", "reason": ""}
    evaluated = reserved.get("status") == "True" or reserved.get("reason") not in NOT_EVALUATED
    if evaluated or not isinstance(position, Position) or position.in_cluster_queue < 2 or isinstance(listed, str):
        return ""
    ahead = position.in_cluster_queue - 1
    head = next((i for i in listed if int(i.get("positionInClusterQueue") or 0) == 0), None)
    if head is None:
        return (f"{ahead} workload(s) ahead of it in its ClusterQueue, the first in another LocalQueue; Kueue "
                "evaluates a StrictFIFO queue's workloads only in order")
    name = str((head.get("metadata") or {}).get("name", ""))
    why = ""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    version = preferred_version(api, KUEUE)
    try:
        found: Any = client.CustomObjectsApi(api.client).get_namespaced_custom_object(
            KUEUE, version or "v1beta2", namespace, "workloads", name, _request_timeout=timeout(api))
        why = f" ({why_pending(found, api)})"
    except ApiException as exc:
        if exc.status not in (403, 404):
            raise
    return (f"waiting behind {name}{why}, the head of its ClusterQueue ({ahead} ahead of it): Kueue evaluates a "
            "StrictFIFO queue's workloads only in order, none behind the head until the head is admitted")


def waiting(api: Connection, namespace: str, workload: dict[str, Any]) -> tuple[str, str] | None:
    """(every reason, queue position) while Kueue has not admitted the workload or it is deactivated;
    None once it is admitted."""
    admitted = condition(workload, "Admitted")
    if admitted and admitted.get("status") == "True" and (workload.get("spec") or {}).get("active") is not False:
        return None
    queue = str((workload.get("spec") or {}).get("queueName") or "")
    if not queue:
        return why_pending(workload, api), "no queue"
    listed = pending_workloads(api, namespace, queue)
    position = _position(listed, queue, str((workload.get("metadata") or {}).get("name", "")))
    behind = waiting_behind(api, namespace, workload, listed, position)
    return behind or why_pending(workload, api), str(position)


def why_pending(workload: dict[str, Any], api: Connection | None = None) -> str:
    """Every reason Kueue gives for not running the workload now, most decisive first."""
    reasons: list[str] = []
    evicted = _true(workload, "Evicted")
    cause = str((evicted or {}).get("reason", "")).removeprefix(DEACTIVATED_DUE_TO)
    if (workload.get("spec") or {}).get("active") is False:
        reasons.append(f"deactivated (spec.active is false): {DEACTIVATIONS[cause]}" if cause in DEACTIVATIONS else
                       "deactivated (spec.active is false): Kueue will not admit it until it is reactivated; "
                       "resubmit it, or ask a platform engineer why it was stopped")
    if evicted:
        why = EVICTION_REASONS.get(cause, evicted.get("reason", "evicted"))
        preempted = _true(workload, "Preempted")
        if preempted and preempted.get("reason") in PREEMPTION_REASONS:
            why = "preempted " + PREEMPTION_REASONS[preempted["reason"]]
        reasons.append(f"evicted: {why.strip()}" + (f" ({evicted['message']})" if evicted.get("message") else ""))
    requeue = (workload.get("status") or {}).get("requeueState") or {}
    requeued = condition(workload, "Requeued")
    if requeue.get("requeueAt"):
        reasons.append(f"requeued {requeue.get('count', 0)} time(s); back in the queue at {requeue['requeueAt']}")
    elif requeued and requeued.get("status") == "False":
        reasons.append(f"waiting to be requeued: {requeued.get('message') or requeued.get('reason')}")
    reserved = condition(workload, "QuotaReserved")
    if reserved and reserved.get("status") == "False":
        text = QUOTA_REASONS.get(reserved.get("reason", ""))
        message = reserved.get("message") or ""
        reasons.append(f"{text}: {message}" if text and message else text or message or "waiting in the queue")
        # kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go:1071
        if "unavailable in ClusterQueue" in message:
            reasons.append("its ClusterQueue has no quota at all for a resource it requests, so Kueue will never "
                           "admit it there: request only the resources of the team's pools ("
                           + word(api, "`fleetgen job queues`", "generator.jobs.queues(api)")
                           + " lists them), or label it with a queue that has them")
    elif reserved and reserved.get("status") == "True":
        admitted = condition(workload, "Admitted") or {}
        states = (workload.get("status") or {}).get("admissionChecks") or []
        checks = [f"{c.get('name')}={c.get('state')}" + (f" ({c['message']})"
                                                          if c.get("message") else "")
                  for c in states if c.get("state") != "Ready"]
        reasons.append("quota reserved, waiting for admission checks" + (f": {', '.join(checks)}" if checks else "")
                       + (f" ({admitted['message']})" if admitted.get("message") else ""))
        nominated = (workload.get("status") or {}).get("nominatedClusterNames") or []
        if nominated:
            reasons.append(f"dispatched by MultiKueue to {', '.join(nominated)}, not admitted there yet")
    return "; ".join(reasons) or "waiting in the queue (Kueue has not evaluated it yet)"
