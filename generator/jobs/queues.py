"""The queues a user may submit to on a cluster, with each team's GPUs in each pool: guaranteed,
borrowable, in use and free. From a notebook, before choosing a pool and a size.

Guaranteed and borrowable come from the fleet files the cluster publishes (the figures `fleetgen
explain` and the diff preview use); in use from the team's LocalQueues' status, which Kueue keeps
(`status.flavorsUsage`: admitted workloads, per flavor, named after the pool). Free is what the team
can take now without waiting for anyone: its unused guarantee, and at most `free_at_most` if the
rest of its cohort is idle (whether it is, members cannot see: other teams' queues are not theirs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generator.connection import Connection, guarded, timeout
from generator.jobs.presubmit import allowed
from generator.jobs.workloads import KUEUE, preferred_version
from generator.quantity import QuantityError, value_of


@dataclass(frozen=True)
class QueueInfo:
    """One team's queue for one pool of the cluster."""

    team: str
    namespaces: tuple[str, ...]
    """Where you may submit to it."""
    queue: str
    """The LocalQueue to name in `kueue.x-k8s.io/queue-name` (`queue=` of a job or Ray cluster)."""
    cluster: str
    pool: str
    product: str
    guaranteed: int
    borrowable: int
    """At most this many more while others leave them idle."""
    in_use: int | None
    """GPUs of admitted jobs now; None when Kueue's status could not be read."""

    @property
    def free(self) -> int | None:
        """Unused guarantee: GPUs a job gets now, taking them back from borrowers if need be."""
        return None if self.in_use is None else max(0, self.guaranteed - self.in_use)

    @property
    def free_at_most(self) -> int | None:
        """What a job could get now if the cohort's other queues are idle."""
        return None if self.in_use is None else max(0, self.guaranteed + self.borrowable - self.in_use)

    def __str__(self) -> str:
        use = ("in use unknown" if self.in_use is None else
               f"{self.in_use} in use, {self.free} free, up to {self.free_at_most} if the cohort is idle")
        return (f"{self.team}: queue {self.queue} in {', '.join(self.namespaces)}: {self.pool} ({self.product}) on "
                f"{self.cluster}: {self.guaranteed} guaranteed + {self.borrowable} borrowable; {use}")


def _gpus(queue: dict[str, Any], flavor: str, resource: str) -> int:
    """GPUs of `resource` the LocalQueue's admitted workloads hold in `flavor`; malformed entries count 0."""
    total = 0
    for usage in (queue.get("status") or {}).get("flavorsUsage") or []:
        if not isinstance(usage, dict) or usage.get("name") != flavor:
            continue
        for res in usage.get("resources") or []:
            if isinstance(res, dict) and res.get("name") == resource:
                try:
                    total += int(value_of(str(res.get("total", "0"))))
                except QuantityError:
                    continue
    return total


class Queues:
    """Reads the queues; a class only so that failures name what was being read (ClusterError)."""

    def __init__(self, api: Connection) -> None:
        self.api = api

    @guarded("list the queues you may submit to")
    def read(self, team: str | None = None, fleet: Any = None) -> list[QueueInfo]:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        from generator.capacity import team_shares
        from generator.jobs.published import published_fleet

        fleet = fleet or published_fleet(self.api)
        (cname, cluster), = fleet.clusters.items()
        cfg = cluster.config
        shares = team_shares(fleet)
        shared, afs = set(cfg.shared_pools), cfg.kueue.admission_fair_sharing
        version = preferred_version(self.api, KUEUE) or "v1beta2"
        objects = client.CustomObjectsApi(self.api.client)
        out = []
        for tname, loaded in sorted(fleet.teams.items()):
            tcfg = loaded.config
            if team not in (None, tname):
                continue
            mine = [ns for ns in tcfg.namespace_names
                    if allowed(self.api, "create", "jobset.x-k8s.io", "jobsets", ns)[0]]
            if not mine:
                continue
            listed: list[Any] = []
            readable = True
            for ns in mine:
                try:
                    found: Any = objects.list_namespaced_custom_object(KUEUE, version, ns, "localqueues",
                                                                       _request_timeout=timeout(self.api))
                except ApiException as exc:
                    if exc.status != 403:
                        raise
                    readable = False  # in use unknown; the quota figures still stand
                    break
                items = found.get("items") if isinstance(found, dict) else None
                listed.extend(items if isinstance(items, list) else [])
            for pool in cfg.node_pools:
                if pool.name not in tcfg.quotas[cname]:
                    continue
                share = shares.get((cname, pool.name, tname))
                by_usage = afs if pool.name in shared else None  # its own queue, in the first namespace
                target = by_usage.cluster_queue(pool.name) if by_usage else tname
                used = None if not readable else sum(
                    _gpus(q, pool.name, pool.gpu.resource) for q in listed
                    if isinstance(q, dict) and (q.get("spec") or {}).get("clusterQueue") == target)
                out.append(QueueInfo(
                    tname, tuple(mine[:1] if by_usage else mine),
                    by_usage.local_queue(tname, pool.name) if by_usage else tname, cname, pool.name,
                    pool.gpu.product, share.guaranteed if share else 0, share.borrowable if share else 0, used))
        return out


def queues(api: Connection, team: str | None = None) -> list[QueueInfo]:
    """Every queue of the connected cluster you may submit to (or `team`'s), one per pool."""
    return Queues(api).read(team)
