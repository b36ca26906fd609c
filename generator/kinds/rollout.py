"""Whether a server (a `serving` kind) is rolling out to a new template, and whether that rollout is stuck, in
its controller's words.

A server (a Deployment, a LeaderWorkerSet) keeps serving on its old replicas while new ones replace them; its
status alone ("1/2 replicas ready") reads like a server starting up or one losing a replica. The controllers
say which: the Deployment controller counts replicas of the newest template (`updatedReplicas`) and gives up
on a rollout that made no progress within `progressDeadlineSeconds` (condition Progressing, reason
ProgressDeadlineExceeded: k8s.io/kubernetes v1.36.3 pkg/controller/deployment/util/deployment_util.go:86),
copying a ReplicaSet's failure to create pods (a ResourceQuota refusing them) into condition ReplicaFailure
(pkg/controller/deployment/progress.go:100-104); LeaderWorkerSet sets condition UpdateInProgress while groups
of the old template remain (sigs.k8s.io/lws v0.9.0 pkg/controllers/leaderworkerset_controller.go:488-493).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STUCK_REASONS = {"ProgressDeadlineExceeded": "made no progress within its progressDeadlineSeconds"}
"""Progressing=False reasons of a Deployment that mean its controller gave up waiting (deployment_util.go:86)."""


@dataclass(frozen=True)
class Rollout:
    """A rollout under way: how many replicas run the new template, and why it is stuck if it is."""

    updated: int
    wanted: int
    stuck: str = ""

    def __str__(self) -> str:
        text = f"rolling out: {self.updated}/{self.wanted} replicas on the new template"
        return f"rollout stuck ({self.stuck}); {text}" if self.stuck else text


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = ((obj.get("status") or {}).get("conditions")) or []
    return {str(c.get("type")): c for c in found if isinstance(c, dict)}


def count(status: dict[str, Any], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) else 0


QUOTA_REFUSAL = "exceeded quota: fleetgen-gpus"
"""What the API server's ResourceQuota admission says refusing a pod over the namespace's GPU quota
(isolation.py's ResourceQuota `fleetgen-gpus`)."""
SURGE_HINT = ("a rolling update that surges needs GPUs beyond what the team may hold while the old replicas serve: "
              "set spec.strategy.rollingUpdate.maxSurge: 0 (and maxUnavailable: 1), as fleetgen's serving profiles do")


def pods_refused(obj: dict[str, Any]) -> str:
    """Why a Deployment's controller cannot create its pods (a ReplicaSet's ReplicaFailure, e.g. the namespace's
    ResourceQuota refusing them), in its words; "" when nothing is refused."""
    failure = conditions(obj).get("ReplicaFailure") or {}
    if failure.get("status") != "True":
        return ""
    message = str(failure.get("message") or failure.get("reason") or "ReplicaFailure")
    surging = QUOTA_REFUSAL in message and _surges(obj)
    return f"pods refused: {message}" + (f"; {SURGE_HINT}" if surging else "")


def _surges(obj: dict[str, Any]) -> bool:
    """Whether a Deployment's rolling update may create pods beyond its replicas (maxSurge not 0)."""
    strategy = (obj.get("spec") or {}).get("strategy") or {}
    surge = (strategy.get("rollingUpdate") or {}).get("maxSurge")
    return strategy.get("type", "RollingUpdate") == "RollingUpdate" and surge not in (0, "0", "0%")


def no_rollout(obj: dict[str, Any]) -> Rollout | None:
    """A kind that does not roll out to a new template in place (a job is replaced, not updated)."""
    return None


def nothing_refused(obj: dict[str, Any]) -> str:
    """A kind whose controller reports no refused pods in its own status."""
    return ""
