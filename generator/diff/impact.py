"""What a change means for GPUs (capacity rows) and what is dangerous about it (risk rules)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from generator.capacity import PoolCapacity, TeamShare, pool_capacities
from generator.config.fleet import Fleet
from generator.diff.objects import Change

_ZERO = TeamShare("", 0, 0, 0, None)


@dataclass(frozen=True)
class CapacityRow:
    """One team's GPUs in one pool, before and after."""

    cluster: str
    pool: str
    team: str
    before: TeamShare | None
    after: TeamShare | None

    @property
    def changed(self) -> bool:
        b, a = self.before or _ZERO, self.after or _ZERO
        return (b.guaranteed, b.borrowable, b.lendable) != (a.guaranteed, a.borrowable, a.lendable)


@dataclass(frozen=True)
class PoolImpact:
    """A pool whose allocation changes: capacity and totals before and after, and every team in it."""

    cluster: str
    pool: str
    product: str
    capacity_before: int
    capacity_after: int
    allocated_before: int
    allocated_after: int
    rows: tuple[CapacityRow, ...]


def capacity_impact(before: Fleet | None, after: Fleet | None) -> list[PoolImpact]:
    """Pools where any team's guaranteed, borrowable or lendable GPUs change (or the pool itself)."""
    old = {(p.cluster, p.pool): p for p in pool_capacities(before)} if before else {}
    new = {(p.cluster, p.pool): p for p in pool_capacities(after)} if after else {}
    out = []
    for key in sorted(set(old) | set(new)):
        b, a = old.get(key), new.get(key)
        teams = sorted({t.team for t in (b.teams if b else ())} | {t.team for t in (a.teams if a else ())})
        rows = tuple(CapacityRow(key[0], key[1], team, _share(b, team), _share(a, team)) for team in teams)
        if not any(r.changed for r in rows) and (b and a and b.gpus == a.gpus):
            continue
        ref = a or b
        assert ref is not None
        out.append(PoolImpact(key[0], key[1], ref.product, b.gpus if b else 0, a.gpus if a else 0,
                              b.allocated if b else 0, a.allocated if a else 0, rows))
    return out


def _share(pool: PoolCapacity | None, team: str) -> TeamShare | None:
    return next((t for t in pool.teams if t.team == team), None) if pool else None


@dataclass(frozen=True)
class Risk:
    """Something a reviewer must look at twice."""

    severity: str  # high | medium | low
    rule: str
    message: str


def _fields(change: Change, prefix: str) -> list[str]:
    return [f.path for f in change.fields if f.path == prefix or f.path.startswith((prefix + ".", prefix + "["))]


def _deleted_kueue(change: Change) -> Iterator[Risk]:
    if change.action == "destroy" and change.obj.key[2] in ("ClusterQueue", "ResourceFlavor", "Cohort", "Topology"):
        yield Risk("high", "kueue-object-deleted", f"{change.obj.cluster}: {change.obj.label} is deleted; Kueue keeps "
                   "it (resource-in-use finalizer) until no workload uses it, and admitted work loses its queue")


def _namespace_deleted(change: Change) -> Iterator[Risk]:
    if change.action == "destroy" and change.obj.key[2] == "Namespace":
        yield Risk("high", "namespace-deleted", f"{change.obj.cluster}: Namespace {change.obj.key[4]} is deleted with "
                   "every object and running job in it")


def _preemption_or_priority(change: Change) -> Iterator[Risk]:
    kind = change.obj.key[2]
    if change.action == "change" and kind == "ClusterQueue" and _fields(change, "spec.preemption"):
        yield Risk("medium", "preemption-changed", f"{change.obj.cluster}: preemption policy of {change.obj.label} "
                   "changes: which running workloads can be evicted changes")
    if kind == "WorkloadPriorityClass" and (change.action != "change" or _fields(change, "value")):
        verb = {"add": "added", "destroy": "removed", "change": "changes value"}[change.action]
        yield Risk("medium", "priority-changed", f"{change.obj.cluster}: {change.obj.label} {verb}: "
                   "preemption order between teams changes")


def _rbac(change: Change) -> Iterator[Risk]:
    if change.obj.key[2] not in ("RoleBinding", "ClusterRoleBinding", "Role", "ClusterRole"):
        return
    if change.action == "add" or (change.action == "change" and any(
            f.op == "added" or f.path.startswith("roleRef") for f in change.fields
            if f.path.startswith(("subjects", "roleRef")))):
        yield Risk("medium", "rbac-widened", f"{change.obj.cluster}: {change.obj.label} grants access to more people "
                   "or more rights")


def _cluster_scoped(change: Change) -> Iterator[Risk]:
    _, group, kind, ns, _ = change.obj.key
    if not ns and group != "kueue.x-k8s.io" and kind != "Namespace" and change.action != "change":
        yield Risk("low", "cluster-scoped", f"{change.obj.cluster}: cluster-scoped {change.obj.label} "
                   f"{'added' if change.action == 'add' else 'removed'}")


IMMUTABLE: dict[str, list[str]] = {
    "LocalQueue": ["spec.clusterQueue"],
    "Topology": ["spec.levels"],
    "ResourceFlavor": ["spec.topologyName"],
}


def _immutable(change: Change) -> Iterator[Risk]:
    if change.action != "change":
        return
    for prefix in IMMUTABLE.get(change.obj.key[2], []):
        if _fields(change, prefix):
            yield Risk("high", "immutable-field", f"{change.obj.cluster}: {change.obj.label} changes immutable "
                       f"{prefix}: the object must be deleted and recreated (sync will fail otherwise)")


RULES: list[Callable[[Change], Iterator[Risk]]] = [
    _deleted_kueue, _namespace_deleted, _preemption_or_priority, _rbac, _cluster_scoped, _immutable,
]


def risks(changes: list[Change], capacity: list[PoolImpact]) -> list[Risk]:
    """Every risk, most severe first."""
    found = [risk for change in changes for rule in RULES for risk in rule(change)]
    for pool in capacity:
        for row in pool.rows:
            b, a = row.before or _ZERO, row.after or _ZERO
            if a.guaranteed < b.guaranteed:
                found.append(Risk("high", "quota-reduced", f"{row.cluster}: {row.team} loses "
                                  f"{b.guaranteed - a.guaranteed} guaranteed {pool.pool} GPUs ({b.guaranteed} → "
                                  f"{a.guaranteed}); its running workloads above the new quota may be preempted"))
            elif a.borrowable < b.borrowable:
                found.append(Risk("low", "borrowing-reduced", f"{row.cluster}: {row.team} can borrow fewer "
                                  f"{pool.pool} GPUs ({b.borrowable} → {a.borrowable})"))
        if pool.allocated_after > pool.capacity_after > 0:
            found.append(Risk("medium", "pool-overcommitted", f"{pool.cluster}: pool {pool.pool} guarantees "
                              f"{pool.allocated_after} GPUs of {pool.capacity_after} (overcommitted)"))
    order = {"high": 0, "medium": 1, "low": 2}
    return sorted(set(found), key=lambda r: (order[r.severity], r.rule, r.message))
