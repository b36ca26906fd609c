"""How Kueue's Workload conditions are said to a person, and which Kueue API version is read.

Conditions are shaped as Kueue v0.19.2 writes them (apis/kueue/v1beta2/workload_types.go); the
live paths (eviction by deactivation, queue positions, quota waits) run on the real manager in
test_jobs.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from generator.connection import Connection
from generator.jobs import workloads


def cond(kind: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def workload(*conditions: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {"spec": {"queueName": "ml-research"}, "status": {"conditions": list(conditions), **status}}


CASES = [
    (workload(cond("QuotaReserved", "False", "Pending", "couldn't assign flavors")),
     ["couldn't assign flavors"]),
    (workload(cond("QuotaReserved", "False", "NoMatchingFlavor", "flavor a100 doesn't match node affinity")),
     ["no flavor of its ClusterQueue fits", "doesn't match node affinity"]),
    (workload(cond("Evicted", "True", "Preempted", "Preempted to accommodate a workload"),
              cond("Preempted", "True", "InCohortReclamation", "x"), cond("QuotaReserved", "False", "Pending", "")),
     ["evicted: preempted by another team reclaiming GPUs this team had borrowed (Preempted to accommodate"]),
    (workload(cond("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout"),
              requeueState={"count": 2, "requeueAt": "2026-11-22T10:00:00Z"}),
     ["its pods did not all become ready in time", "requeued 2 time(s); back in the queue at 2026-11-22T10:00:00Z"]),
    (workload(cond("QuotaReserved", "True", "QuotaReserved"), cond("Admitted", "False", "UnsatisfiedAdmissionChecks"),
              admissionChecks=[{"name": "prov", "state": "Pending"}, {"name": "mk", "state": "Ready"}]),
     ["quota reserved, waiting for admission checks: prov=Pending"]),
    (workload(), ["waiting in the queue (Kueue has not evaluated it yet)"]),
]


@pytest.mark.parametrize("found,says", CASES, ids=["pending", "no-flavor", "preempted", "requeued", "checks", "new"])
def test_why_pending_says_every_reason(found: dict[str, Any], says: list[str]) -> None:
    text = workloads.why_pending(found)
    for part in says:
        assert part in text, text


def test_deactivated_comes_first() -> None:
    found = workload(cond("Evicted", "True", "Deactivated", "The workload is deactivated"))
    found["spec"]["active"] = False
    text = workloads.why_pending(found)
    assert text.startswith("deactivated (spec.active is false)") and "evicted: it was deactivated" in text


@pytest.mark.parametrize("group_doc,expected", [
    ({"versions": [{"version": "v1beta2"}, {"version": "v1beta1"}], "preferredVersion": {"version": "v1beta2"}},
     "v1beta2"),
    ({"versions": [{"version": "v1beta1"}], "preferredVersion": {"version": "v1beta1"}}, "v1beta1"),
    ({"versions": [{"version": "v1"}, {"version": "v1beta2"}], "preferredVersion": {"version": "v1"}}, "v1beta2"),
    ({"versions": [{"version": "v1"}], "preferredVersion": {"version": "v1"}}, None),
], ids=["v0.19", "v0.10-era", "newer-preferred", "nothing-readable"])
def test_kueue_version_comes_from_discovery(monkeypatch: pytest.MonkeyPatch, group_doc: dict[str, Any],
                                            expected: str | None) -> None:
    calls: list[str] = []

    def get_json(api: Any, path: str) -> Any:
        calls.append(path)
        return group_doc

    monkeypatch.setattr(workloads, "get_json", get_json)
    api = Connection(client=None)  # discovery is get_json's, faked above
    assert workloads.preferred_version(api, "kueue.x-k8s.io") == expected
    assert workloads.preferred_version(api, "kueue.x-k8s.io") == expected
    assert calls == ["/apis/kueue.x-k8s.io"]  # asked once per client


def test_a_pods_state_says_why_it_waits() -> None:
    """The scheduler's message, a scheduling gate, or a container the kubelet cannot start."""
    from types import SimpleNamespace as NS

    from generator.jobs import pods

    def pod(phase: str = "Pending", conditions: list[Any] | None = None, gates: list[str] | None = None,
            waiting: Any = None) -> Any:
        statuses = [NS(name="trainer", state=NS(waiting=waiting))] if waiting else None
        return NS(spec=NS(scheduling_gates=[NS(name=g) for g in gates or []]),
                  status=NS(phase=phase, conditions=conditions, container_statuses=statuses))

    unschedulable = NS(type="PodScheduled", status="False", reason="Unschedulable",
                       message="0/32 nodes are available: 32 Insufficient nvidia.com/gpu.")
    assert pods.state(pod(conditions=[unschedulable])) == \
        "Pending: 0/32 nodes are available: 32 Insufficient nvidia.com/gpu."
    assert pods.state(pod(gates=["kueue.x-k8s.io/topology"])) == \
        "Pending: waiting for scheduling gates kueue.x-k8s.io/topology"
    assert pods.state(pod(waiting=NS(reason="ImagePullBackOff", message="Back-off pulling image \"x\""))) == \
        "Pending: trainer: ImagePullBackOff (Back-off pulling image \"x\")"
    assert pods.state(pod(waiting=NS(reason="ContainerCreating", message=None))) == "Pending"
    assert pods.state(pod("Running")) == "Running"
    by_pod = {f"p{i}": s for i, s in enumerate(["Running", "Succeeded", "Pending: a", "Pending: a", "Pending: b",
                                                  "Pending: c", "Pending: d", "Failed"])}
    assert pods.summary(by_pod) == "2 of 8 pods running; 2 Pending: a; 1 Failed; 1 Pending: b; 2 more waiting"
