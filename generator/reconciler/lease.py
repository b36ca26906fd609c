"""Leader election with a coordination.k8s.io Lease, and the breaker kept in a ConfigMap.

Only the replica holding the Lease acts, and only while it is certain nobody else can hold it:
- Taking or renewing the Lease is an update guarded by resourceVersion, so two replicas racing
  for it cannot both win.
- Expiry is judged as client-go's leaderelection does (client-go tools/leaderelection/
  leaderelection.go, tryAcquireOrRenew: `observedTime + LeaseDuration`): by how long the holder's
  record has stood unchanged on *this* replica's monotonic clock, not by comparing the holder's
  renewTime with our wall clock, so clock skew between nodes cannot make two leaders. A fresh
  process therefore waits one duration before it takes a Lease a dead replica left behind
  (`acquire_patiently`, for `fleetgen health once`).
- A leader's certainty runs out `renew_fraction` of a duration after it *sent* its last renewal;
  before every write the loop asks `still_leading()`, which renews when the certainty is running
  low and says no when it cannot. A loop slowed by a sluggish Prometheus therefore cannot write
  after another replica has taken over.
"""

from __future__ import annotations

import datetime
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from generator.compile.health import BREAKER, LEASE
from generator.connection import Connection, timeout
from generator.reconciler.model import ALL_POOLS, Breaker

MIN_LEASE_SECONDS = 15
"""client-go's default LeaseDuration: the floor of a Lease sized to the loop (`fit`)."""
LOOPS_REMEMBERED = 10


def _time(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(text: Any) -> float:
    if isinstance(text, datetime.datetime):
        return text.timestamp()
    return datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


@dataclass
class LeaderLease:
    """Acquire or renew the reconciler's Lease; True while this replica leads."""

    api: Connection
    namespace: str
    identity: str
    duration_seconds: float = 15
    renew_fraction: float = 2 / 3
    """Share of a duration after a renewal was sent during which this replica may act (client-go's
    default RenewDeadline/LeaseDuration is 10s/15s)."""
    clock: Callable[[], float] = time.time
    """Wall clock: only for the times written into the Lease."""
    monotonic: Callable[[], float] = time.monotonic
    _observed: tuple[str, str, str] | None = field(default=None, repr=False)
    _observed_at: float = field(default=0.0, repr=False)
    _observed_duration: float = field(default=0.0, repr=False)
    _certain_until: float = field(default=float("-inf"), repr=False)
    _loops: list[float] = field(default_factory=list, repr=False)
    last_error: BaseException | None = field(default=None, repr=False)
    """Why the last acquire() failed when it was not another holder: an unreachable or refusing API
    server (a one-shot command reports it instead of "another replica holds the lease")."""

    def acquire(self) -> bool:
        """Take or renew the Lease; True when this replica now leads. An API server that fails or
        does not answer means False: leadership is never assumed."""
        from urllib3.exceptions import HTTPError

        self.last_error = None
        try:
            return self._acquire()
        except (HTTPError, OSError) as exc:
            self._certain_until = float("-inf")
            self.last_error = exc
            return False

    def _acquire(self) -> bool:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        coordination = client.CoordinationV1Api(self.api.client)
        sent = self.monotonic()
        self._certain_until = float("-inf")
        now = self.clock()
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": int(round(self.duration_seconds)) or 1,
                "renewTime": _time(now)}
        try:
            current = self.api.client.sanitize_for_serialization(coordination.read_namespaced_lease(
                LEASE, self.namespace, _request_timeout=timeout(self.api)))
        except ApiException as exc:
            if exc.status != 404:
                self.last_error = exc
                return False
            body: Any = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                         "metadata": {"name": LEASE, "namespace": self.namespace},
                         "spec": {**spec, "acquireTime": _time(now), "leaseTransitions": 0}}
            try:
                coordination.create_namespaced_lease(self.namespace, body, _request_timeout=timeout(self.api))
            except ApiException:
                return False  # someone else created it first
            return self._won(sent)
        held = current.get("spec") or {}
        holder = held.get("holderIdentity")
        if holder and holder != self.identity and not self._expired(current, sent):
            return False
        new_spec = {**held, **spec}
        if holder != self.identity:
            new_spec["acquireTime"] = _time(now)
            new_spec["leaseTransitions"] = int(held.get("leaseTransitions") or 0) + 1
        current["spec"] = new_spec
        try:
            coordination.replace_namespaced_lease(LEASE, self.namespace, current,  # guarded by resourceVersion
                                                  _request_timeout=timeout(self.api))
        except ApiException:
            return False  # 409: another replica renewed or took it first
        return self._won(sent)

    def acquire_patiently(self) -> bool:
        """acquire(), and if another holder's record is new to us, watch it for one duration first:
        a Lease left by a dead replica is taken, a live one (renewed meanwhile) is not."""
        if self.acquire():
            return True
        if self._observed is None or self.last_error is not None:
            return False  # the API server did not answer
        time.sleep(max(0.0, self._observed_at + self._observed_duration - self.monotonic()) + 0.1)
        return self.acquire()

    def still_leading(self) -> bool:
        """Before a write: True while this replica is certain to lead, renewing when that runs low."""
        remaining = self._certain_until - self.monotonic()
        if remaining > self.duration_seconds * self.renew_fraction / 2:
            return True
        return self.acquire()

    def fit(self, period: float, loop_seconds: float) -> None:
        """Size the Lease to the loop as measured: a leader renews at the start of every loop, so
        the Lease must outlast a period plus the slowest recent loop (at 10k nodes a node list
        alone took 15 s, longer than client-go's 15 s default), or leadership would lapse between
        loops and move on every period. The renew deadline scales with it (`renew_fraction`)."""
        self._loops = [*self._loops[-(LOOPS_REMEMBERED - 1):], loop_seconds]
        self.duration_seconds = float(max(MIN_LEASE_SECONDS, math.ceil(period * 1.5 + 2 * max(self._loops))))

    def _won(self, sent: float) -> bool:
        self._certain_until = sent + self.duration_seconds * self.renew_fraction
        return True

    def _expired(self, lease: dict[str, Any], now: float) -> bool:
        """Has the holder's record stood unchanged for a full duration, as this replica saw it?"""
        held = lease.get("spec") or {}
        record = (str(held.get("holderIdentity")), str(held.get("renewTime")),
                  str((lease.get("metadata") or {}).get("resourceVersion")))
        duration = self._observed_duration = float(held.get("leaseDurationSeconds") or self.duration_seconds)
        if record != self._observed:
            self._observed, self._observed_at = record, now
            return False
        return now >= self._observed_at + duration


@dataclass
class BreakerStore:
    """Every pool's breaker in one ConfigMap: it survives restarts and leader changes.

    `data.state` is JSON: {"pools": {"<pool>": {"tripped", "reason", "since"}}}, tripped pools only.
    A state saved before breakers were per pool ({"tripped": ...}) holds every pool.
    """

    api: Connection
    namespace: str

    def load(self) -> dict[str, Breaker]:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            cm = client.CoreV1Api(self.api.client).read_namespaced_config_map(BREAKER, self.namespace,
                                                                           _request_timeout=timeout(self.api))
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        data = json.loads((cm.data or {}).get("state", "{}"))
        if "pools" not in data:
            data = {"pools": {ALL_POOLS: data}}
        out = {}
        for pool, state in sorted((data.get("pools") or {}).items()):
            if state.get("tripped"):
                out[str(pool)] = Breaker(True, str(state.get("reason", "")), state.get("since"))
        return out

    def save(self, breakers: Mapping[str, Breaker]) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        core = client.CoreV1Api(self.api.client)
        pools = {pool: {"tripped": True, "reason": b.reason, "since": b.since}
                 for pool, b in sorted(breakers.items()) if b.tripped}
        state = json.dumps({"pools": pools}, sort_keys=True)
        body: Any = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": BREAKER, "namespace": self.namespace}, "data": {"state": state}}
        try:
            core.create_namespaced_config_map(self.namespace, body, _request_timeout=timeout(self.api))
        except ApiException as exc:
            if exc.status != 409:
                raise
            core.patch_namespaced_config_map(BREAKER, self.namespace, {"data": {"state": state}},
                                             _content_type="application/merge-patch+json",
                                             _request_timeout=timeout(self.api))
