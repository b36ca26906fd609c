"""Leader election with a coordination.k8s.io Lease, and the breaker kept in a ConfigMap.

Only the replica holding the Lease acts. Taking or renewing the Lease is an update guarded by
resourceVersion, so two replicas racing for it cannot both win; a replica that cannot renew
stops acting at once.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from generator.reconciler.model import Breaker

LEASE = "fleetgen-health"
BREAKER = "fleetgen-health-breaker"


def _time(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(text: Any) -> float:
    if isinstance(text, datetime.datetime):
        return text.timestamp()
    return datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


@dataclass
class LeaderLease:
    """Acquire or renew the reconciler's Lease; True while this replica leads."""

    api: Any
    namespace: str
    identity: str
    duration_seconds: int = 15
    clock: Callable[[], float] = __import__("time").time

    def acquire(self) -> bool:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        coordination = client.CoordinationV1Api(self.api)
        now = self.clock()
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration_seconds,
                "renewTime": _time(now)}
        try:
            current = self.api.sanitize_for_serialization(coordination.read_namespaced_lease(LEASE, self.namespace))
        except ApiException as exc:
            if exc.status != 404:
                return False
            body: Any = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": LEASE, "namespace": self.namespace},
                    "spec": {**spec, "acquireTime": _time(now), "leaseTransitions": 0}}
            try:
                coordination.create_namespaced_lease(self.namespace, body)
                return True
            except ApiException:
                return False  # someone else created it first
        held = current.get("spec") or {}
        holder = held.get("holderIdentity")
        expires = _seconds(held["renewTime"]) + float(held.get("leaseDurationSeconds") or 0) \
            if held.get("renewTime") else 0.0
        if holder != self.identity and now < expires:
            return False
        new_spec = {**held, **spec}
        if holder != self.identity:
            new_spec["acquireTime"] = _time(now)
            new_spec["leaseTransitions"] = int(held.get("leaseTransitions") or 0) + 1
        current["spec"] = new_spec
        try:
            coordination.replace_namespaced_lease(LEASE, self.namespace, current)  # guarded by resourceVersion
            return True
        except ApiException:
            return False  # 409: another replica renewed or took it first


@dataclass
class BreakerStore:
    """The breaker's state in a ConfigMap: it survives restarts and leader changes."""

    api: Any
    namespace: str

    def load(self) -> Breaker:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            cm = client.CoreV1Api(self.api).read_namespaced_config_map(BREAKER, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return Breaker()
            raise
        data = json.loads((cm.data or {}).get("state", "{}"))
        return Breaker(bool(data.get("tripped")), str(data.get("reason", "")), data.get("since"))

    def save(self, breaker: Breaker) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        core = client.CoreV1Api(self.api)
        state = json.dumps({"tripped": breaker.tripped, "reason": breaker.reason, "since": breaker.since})
        body: Any = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": BREAKER, "namespace": self.namespace}, "data": {"state": state}}
        try:
            core.create_namespaced_config_map(self.namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            core.patch_namespaced_config_map(BREAKER, self.namespace, {"data": {"state": state}},
                                             _content_type="application/merge-patch+json")
