"""Whether a server is rolling out to a new template, and whether that rollout is stuck, in its controller's words.

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


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = ((obj.get("status") or {}).get("conditions")) or []
    return {str(c.get("type")): c for c in found if isinstance(c, dict)}


def _count(status: dict[str, Any], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) else 0


QUOTA_REFUSAL = "exceeded quota: fleetgen-gpus"
"""What the API server's ResourceQuota admission says refusing a pod over the namespace's GPU quota
(isolation.py's ResourceQuota `fleetgen-gpus`)."""
SURGE_HINT = ("a rolling update that surges needs GPUs beyond what the team may hold while the old replicas serve: "
              "set spec.strategy.rollingUpdate.maxSurge: 0 (and maxUnavailable: 1), as fleetgen's serving profiles do")


def refused(obj: dict[str, Any]) -> str:
    """Why the controller cannot create the server's pods (a ReplicaSet's ReplicaFailure, e.g. the namespace's
    ResourceQuota refusing them), in its words; "" when nothing is refused."""
    failure = _conditions(obj).get("ReplicaFailure") or {}
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


def deployment_rollout(obj: dict[str, Any]) -> Rollout | None:
    """The Deployment's rollout while pods of an older template remain (`status.replicas` counts every pod of
    every ReplicaSet, `updatedReplicas` those of the newest), or None (its controller has not looked at the
    latest change yet, or nothing is left to replace)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    wanted = spec["replicas"] if isinstance(spec.get("replicas"), int) else 1
    updated, total = _count(status, "updatedReplicas"), _count(status, "replicas")
    seen = _count(status, "observedGeneration") >= int((obj.get("metadata") or {}).get("generation") or 0)
    progressing = _conditions(obj).get("Progressing") or {}
    stuck = STUCK_REASONS.get(str(progressing.get("reason"))) if progressing.get("status") == "False" else None
    if not seen or total <= updated:  # no pod of an older template left (a first start is no rollout)
        return None
    problem = refused(obj) or (f"the Deployment controller says it {stuck}: {progressing.get('message')}"
                               if stuck else "")
    return Rollout(updated, wanted, problem)


def leaderworkerset_rollout(obj: dict[str, Any]) -> Rollout | None:
    """The LeaderWorkerSet's rollout (groups of the old template remain), or None."""
    update = _conditions(obj).get("UpdateInProgress") or {}
    if update.get("status") != "True":
        return None
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    wanted = spec["replicas"] if isinstance(spec.get("replicas"), int) else 1
    return Rollout(_count(status, "updatedReplicas"), wanted)


ROLLOUTS = {"Deployment": deployment_rollout, "LeaderWorkerSet": leaderworkerset_rollout}
"""How each serving kind's controller tells a rollout under way."""


def rollout(kind: str, obj: dict[str, Any]) -> Rollout | None:
    """The rollout under way of a server of `kind` (its object as read), if it has one."""
    read = ROLLOUTS.get(kind)
    return read(obj) if read else None
