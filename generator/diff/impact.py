"""What a change means for GPUs (capacity rows) and what is dangerous about it (risk rules)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from generator import quantity
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
    limit_before: int = 0
    """GPUs quotas may add up to: capacity x the cluster's overcommit."""
    limit_after: int = 0

    @property
    def resized(self) -> bool:
        """The pool itself changes (GPUs or overcommit), whatever the teams' quotas do."""
        return (self.capacity_before, self.limit_before) != (self.capacity_after, self.limit_after)

    @property
    def unallocated_before(self) -> int:
        return max(0, self.capacity_before - self.allocated_before)

    @property
    def unallocated_after(self) -> int:
        return max(0, self.capacity_after - self.allocated_after)


def capacity_impact(before: Fleet | None, after: Fleet | None) -> list[PoolImpact]:
    """Pools where any team's guaranteed, borrowable or lendable GPUs change (or the pool itself)."""
    old = {(p.cluster, p.pool): p for p in pool_capacities(before)} if before else {}
    new = {(p.cluster, p.pool): p for p in pool_capacities(after)} if after else {}
    out = []
    for key in sorted(set(old) | set(new)):
        b, a = old.get(key), new.get(key)
        teams = sorted({t.team for t in (b.teams if b else ())} | {t.team for t in (a.teams if a else ())})
        rows = tuple(CapacityRow(key[0], key[1], team, _share(b, team), _share(a, team)) for team in teams)
        if not any(r.changed for r in rows) and (b and a and (b.gpus, b.limit) == (a.gpus, a.limit)):
            continue
        ref = a or b
        assert ref is not None
        out.append(PoolImpact(key[0], key[1], ref.product, b.gpus if b else 0, a.gpus if a else 0,
                              b.allocated if b else 0, a.allocated if a else 0, rows,
                              b.limit if b else 0, a.limit if a else 0))
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


def _subject_set(body: dict[str, Any] | None) -> set[tuple[str, str]]:
    return {(str(s.get("kind")), str(s.get("name"))) for s in ((body or {}).get("subjects") or [])
            if isinstance(s, dict)}


def _subjects_changed(change: Change) -> Iterator[Risk]:
    """Who holds a team's rights is the one thing a team file decides alone: every change is shown."""
    if change.obj.key[2] not in ("RoleBinding", "ClusterRoleBinding"):
        return
    before = _subject_set(change.before.body if change.before else None)
    after = _subject_set(change.after.body if change.after else None)
    if before == after:
        return
    parts = []
    for verb, subjects in (("added", after - before), ("removed", before - after)):
        if subjects:
            parts.append(f"{verb} " + ", ".join(f"{kind} {name!r}" for kind, name in sorted(subjects)))
    role = ((change.obj.body.get("roleRef") or {}).get("name")) or "?"
    yield Risk("high", "rbac-subjects-changed", f"{change.obj.cluster}: {change.obj.label} (role {role}): "
               + "; ".join(parts))


WEIGHT_JUMP = 4.0
"""A fair-sharing weight that moves by more than this factor shifts a whole cohort's borrowing."""


def _weight(body: dict[str, Any] | None) -> Decimal | None:
    value = (((body or {}).get("spec") or {}).get("fairSharing") or {}).get("weight")
    try:
        return quantity.value_of(value) if value is not None else None
    except ValueError:
        return None


def weight_jumped(old: Decimal, new: Decimal) -> bool:
    """Did a weight move by more than WEIGHT_JUMP (either way, or to or from 0)?"""
    low, high = sorted((old, new))
    return low == 0 or high / low > Decimal(str(WEIGHT_JUMP))


def _weight_jump(change: Change) -> Iterator[Risk]:
    if change.action != "change" or change.obj.key[2] not in ("ClusterQueue", "Cohort"):
        return
    old = _weight(change.before.body if change.before else None)
    new = _weight(change.after.body if change.after else None)
    old_v, new_v = (old if old is not None else Decimal(1)), (new if new is not None else Decimal(1))  # Kueue: 1
    if old_v != new_v and weight_jumped(old_v, new_v):
        yield Risk("high", "fair-sharing-weight-jump", f"{change.obj.cluster}: {change.obj.label} fair-sharing weight "
                   f"{old_v.normalize():f} → {new_v.normalize():f} (more than {WEIGHT_JUMP:g}x): its share of idle "
                   "GPUs against the rest of the cohort changes that much")


def _namespace_claimed(change: Change) -> Iterator[Risk]:
    if change.obj.key[2] != "Namespace" or change.action == "destroy":
        return
    team_after = change.obj.team
    team_before = change.before.team if change.before else None
    if team_after and team_after != team_before:
        was = f" (was team {team_before!r}'s)" if team_before else ""
        yield Risk("high", "namespace-claimed", f"{change.obj.cluster}: team {team_after!r} claims namespace "
                   f"{change.obj.key[4]!r}{was}: its members get edit rights there")


def _cluster_scoped(change: Change) -> Iterator[Risk]:
    _, group, kind, ns, _ = change.obj.key
    if not ns and group != "kueue.x-k8s.io" and kind != "Namespace" and change.action != "change":
        yield Risk("low", "cluster-scoped", f"{change.obj.cluster}: cluster-scoped {change.obj.label} "
                   f"{'added' if change.action == 'add' else 'removed'}")


@dataclass(frozen=True)
class Immutable:
    """A field the API server refuses to change once set (a CRD transition rule on `oldSelf`)."""

    kind: str
    field: str
    when: str = ""
    """Only while the old object has this field set (empty: always)."""
    source: str = ""


IMMUTABLE: tuple[Immutable, ...] = (
    # Kueue v0.19.2, apis/kueue/v1beta2/localqueue_types.go:35 (rule "self == oldSelf")
    Immutable("LocalQueue", "spec.clusterQueue", source="localqueue_types.go:35"),
    # topology_types.go:115
    Immutable("Topology", "spec.levels", source="topology_types.go:115"),
    # resourceflavor_types.go:49-51: with a topologyName (TAS flavors) nodeLabels, tolerations and
    # topologyName itself are immutable
    Immutable("ResourceFlavor", "spec.topologyName", "spec.topologyName", "resourceflavor_types.go:51"),
    Immutable("ResourceFlavor", "spec.nodeLabels", "spec.topologyName", "resourceflavor_types.go:49"),
    Immutable("ResourceFlavor", "spec.tolerations", "spec.topologyName", "resourceflavor_types.go:50"),
    # admissioncheck_types.go:52: a check's controller cannot change
    Immutable("AdmissionCheck", "spec.controllerName", source="admissioncheck_types.go:52"),
)
"""Checked against the real API server with Kueue's CRDs in tests/test_diff_upstream.py."""


def _has(body: dict[str, Any] | None, dotted: str) -> bool:
    node: Any = body or {}
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _immutable(change: Change) -> Iterator[Risk]:
    if change.action != "change":
        return
    for rule in IMMUTABLE:
        if rule.kind != change.obj.key[2] or (rule.when and not _has(change.before.body if change.before else None,
                                                                        rule.when)):
            continue
        if _fields(change, rule.field):
            yield Risk("high", "immutable-field", f"{change.obj.cluster}: {change.obj.label} changes immutable "
                       f"{rule.field}: the API server refuses the update, so the object must be deleted and "
                       "recreated (a sync fails otherwise)")


GITOPS_DESTINATION: dict[str, tuple[str, ...]] = {
    "Application": ("spec.destination", "spec.project"),
    "Kustomization": ("spec.targetNamespace", "spec.kubeConfig", "spec.serviceAccountName"),
    "HelmRelease": ("spec.targetNamespace", "spec.kubeConfig", "spec.storageNamespace", "spec.releaseName"),
}
"""Where a GitOps object deploys: changing it moves (and prunes) everything it manages."""
GITOPS_SOURCE: dict[str, tuple[str, ...]] = {
    "Application": ("spec.source.repoURL", "spec.source.path", "spec.source.targetRevision"),
    "GitRepository": ("spec.url", "spec.ref"),
    "Kustomization": ("spec.path", "spec.sourceRef"),
}
"""What a GitOps object deploys from: another repository, branch or path replaces the cluster's state."""


def _gitops(change: Change) -> Iterator[Risk]:
    kind = change.obj.key[2]
    if change.action != "change" or change.obj.key[1] not in ("argoproj.io", "kustomize.toolkit.fluxcd.io",
                                                               "source.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"):
        return
    moved = [f for prefix in GITOPS_DESTINATION.get(kind, ()) for f in _fields(change, prefix)]
    if moved:
        yield Risk("high", "gitops-destination-changed", f"{change.obj.cluster}: {change.obj.label} changes where it "
                   f"deploys ({', '.join(moved)}): objects at the old destination are pruned or orphaned")
    source = [f for prefix in GITOPS_SOURCE.get(kind, ()) for f in _fields(change, prefix)]
    if source:
        yield Risk("medium", "gitops-source-changed", f"{change.obj.cluster}: {change.obj.label} syncs from another "
                   f"source ({', '.join(source)}): what that source holds replaces the cluster's state")


def _gitops_engine(changes: list[Change]) -> Iterator[Risk]:
    """A cluster whose Argo CD Applications go while Flux Kustomizations come (or back)."""
    engines: dict[str, dict[str, set[str]]] = {}
    for change in changes:
        group = change.obj.key[1]
        engine = "argocd" if group == "argoproj.io" else "flux" if group.endswith("toolkit.fluxcd.io") else ""
        if engine and change.action in ("add", "destroy"):
            engines.setdefault(change.obj.cluster, {}).setdefault(change.action, set()).add(engine)
    for cluster, by_action in sorted(engines.items()):
        added, removed = by_action.get("add", set()), by_action.get("destroy", set())
        if added and removed and added != removed:
            yield Risk("high", "gitops-engine-changed", f"{cluster}: GitOps moves from {', '.join(sorted(removed))} "
                       f"to {', '.join(sorted(added))}: remove the old engine's objects without pruning (or both "
                       "engines manage, and prune, the same objects during the switch)")


STOPS = {"HoldAndDrain": ("high", "evicts every admitted workload of the team (they requeue) and admits nothing "
                                  "new"),
         "Hold": ("medium", "admits nothing new; admitted workloads run to completion"),
         "None": ("low", "admits again")}
"""ClusterQueue stopPolicy -> (risk level, what Kueue then does), from the field's API documentation."""


def _stop_policy(change: Change) -> Iterator[Risk]:
    """A team's queue is stopped, drained or started again."""
    if change.obj.key[2] != "ClusterQueue" or change.action == "destroy":
        return
    before = ((change.before.body if change.before else {}).get("spec") or {}).get("stopPolicy", "None")
    after = ((change.after.body if change.after else {}).get("spec") or {}).get("stopPolicy", "None")
    if before != after and (change.action == "change" or after != "None"):
        level, effect = STOPS.get(after, ("medium", "changes whether it admits"))
        yield Risk(level, "queue-stopped" if after != "None" else "queue-started",
                   f"{change.obj.cluster}: {change.obj.label} stopPolicy {before} -> {after}: {effect}")


def _cohort_limits(change: Change) -> Iterator[Risk]:
    """A declared cohort's own quota or limits change (the root's follows the pools: capacity rows say it)."""
    obj = change.obj
    if obj.key[2] != "Cohort" or obj.key[4] == obj.cluster or change.action == "destroy":
        return
    if (change.action == "add" and (obj.body.get("spec") or {}).get("resourceGroups")) or \
            (change.action == "change" and _fields(change, "spec.resourceGroups")):
        yield Risk("medium", "cohort-quota-changed", f"{obj.cluster}: {obj.label} changes its own quota or limits: "
                   "what its teams can borrow, and lend outside it, changes")


def _admission_policy(change: Change) -> Iterator[Risk]:
    """A team's allowed priority classes (its ValidatingAdmissionPolicy) change."""
    if change.obj.key[2] != "ValidatingAdmissionPolicy":
        return
    verb = {"add": "now limits", "destroy": "no longer limits", "change": "changes"}[change.action]
    yield Risk("medium", "admission-policy-changed", f"{change.obj.cluster}: {change.obj.label} {verb} what the "
               "API server admits in the team's namespaces (allowed priority classes)")


def _spec(obj: Any) -> dict[str, Any]:
    return dict(((obj.body if obj else None) or {}).get("spec") or {})


def _check_rules(spec: dict[str, Any]) -> dict[str, tuple[str, ...] | None]:
    """A queue's admission checks -> the flavors each runs on (None: all)."""
    rules = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    return {r["name"]: tuple(r["onFlavors"]) if r.get("onFlavors") else None for r in rules}


def _admission_checks(change: Change) -> Iterator[Risk]:
    """Checks a team's jobs must pass change: new jobs on those pools wait for them (or stop waiting);
    a ProvisioningRequestConfig change alters what the autoscaler is asked for."""
    obj = change.obj
    if obj.key[2] == "ProvisioningRequestConfig" and change.action == "change":
        yield Risk("medium", "admission-check-changed", f"{obj.cluster}: {obj.label} changes what the autoscaler "
                   "is asked for jobs needing the check (class, parameters, managed resources or retries)")
    if obj.key[2] != "ClusterQueue" or change.action == "destroy":
        return
    before, after = _check_rules(_spec(change.before)), _check_rules(_spec(change.after))
    for name in sorted(set(before) | set(after)):
        if before.get(name, ()) == after.get(name, ()):
            continue
        pools = after.get(name) if name in after else before.get(name)
        where = f"on {', '.join(pools)}" if pools else "on every pool"
        if name not in after:
            what = f"no longer waits for admission check {name} ({where})"
        elif name not in before:
            what = f"now waits for admission check {name} before admitting jobs {where}"
        else:
            what = f"runs admission check {name} {where} (before: on {', '.join(before[name] or ('every pool',))})"
        yield Risk("medium", "admission-checks-changed", f"{obj.cluster}: {obj.label} {what}")


def _placement(change: Change) -> Iterator[Risk]:
    """The order a team's pools are tried in, or whether a job moves on instead of borrowing or
    preempting, changes: the same jobs may land on other GPUs (or preempt, or borrow, instead)."""
    if change.obj.key[2] != "ClusterQueue" or change.action != "change":
        return
    before, after = _spec(change.before), _spec(change.after)

    def order(spec: dict[str, Any]) -> list[str]:
        return [f["name"] for g in spec.get("resourceGroups") or [] for f in g.get("flavors") or []]

    old, new = order(before), order(after)
    if old != new and sorted(old) == sorted(new):
        yield Risk("low", "flavor-order-changed", f"{change.obj.cluster}: {change.obj.label} tries its pools in "
                   f"another order ({', '.join(old)} → {', '.join(new)}): new jobs may land on other GPUs")
    if before.get("flavorFungibility") != after.get("flavorFungibility"):
        def words(spec: dict[str, Any]) -> str:
            f = spec.get("flavorFungibility")
            return ", ".join(f"{k} {v}" for k, v in sorted(f.items())) if f else "Kueue's defaults"

        yield Risk("low", "flavor-fungibility-changed", f"{change.obj.cluster}: {change.obj.label} flavorFungibility "
                   f"{words(before)} → {words(after)}: whether a job borrows or preempts in one pool or moves on to "
                   "the next changes")


def _dispatch(change: Change) -> Iterator[Risk]:
    """A MultiKueue manager stops dispatching to a worker (for one team, or at all): jobs admitted
    there lose their link to the manager, and queued ones go elsewhere or wait."""
    obj = change.obj
    if obj.key[2] == "MultiKueueCluster" and change.action == "destroy":
        yield Risk("high", "dispatch-worker-removed", f"{obj.cluster}: worker {obj.key[4]} is removed from the "
                   "MultiKueue manager: jobs it runs for the manager's teams are orphaned there, queued ones are "
                   "dispatched elsewhere or wait")
    if obj.key[2] == "MultiKueueConfig" and change.action == "change":
        after = _spec(change.after).get("clusters") or []
        lost = [w for w in _spec(change.before).get("clusters") or [] if w not in after]
        if lost:
            yield Risk("high", "dispatch-worker-removed", f"{obj.cluster}: {obj.label} no longer dispatches to "
                       f"{', '.join(lost)}: the team's jobs there are orphaned, new ones go elsewhere")


RULES: list[Callable[[Change], Iterator[Risk]]] = [
    _deleted_kueue, _namespace_deleted, _preemption_or_priority, _rbac, _subjects_changed, _weight_jump,
    _namespace_claimed, _cluster_scoped, _immutable, _gitops, _admission_policy, _stop_policy,
    _cohort_limits, _admission_checks, _placement, _dispatch,
]


def risks(changes: list[Change], capacity: list[PoolImpact], extra: list[Risk] | None = None) -> list[Risk]:
    """Every risk, most severe first (`extra`: those found on the fleets, diff/scheduling.py)."""
    found = [risk for change in changes for rule in RULES for risk in rule(change)] + list(extra or [])
    found.extend(_gitops_engine(changes))
    for pool in capacity:
        found.extend(_pool_risks(pool))
        for row in pool.rows:
            b, a = row.before or _ZERO, row.after or _ZERO
            if a.guaranteed < b.guaranteed:
                found.append(Risk("high", "quota-reduced", f"{row.cluster}: {row.team} loses "
                                  f"{b.guaranteed - a.guaranteed} guaranteed {pool.pool} GPUs ({b.guaranteed} → "
                                  f"{a.guaranteed}); its running workloads above the new quota may be preempted"))
            elif a.borrowable < b.borrowable:
                found.append(Risk("low", "borrowing-reduced", f"{row.cluster}: {row.team} can borrow fewer "
                                  f"{pool.pool} GPUs ({b.borrowable} → {a.borrowable})"))
    order = {"high": 0, "medium": 1, "low": 2}
    return sorted(set(found), key=lambda r: (order[r.severity], r.rule, r.message))


def _pool_risks(pool: PoolImpact) -> Iterator[Risk]:
    """The pool's own size, and guarantees beyond the GPUs that exist.

    Overcommit (the cluster's `overcommit`) lets quotas add up to more GPUs than the pool has; that
    is a choice, so only a change that adds guaranteed GPUs without nodes behind them is a risk.
    """
    where = f"{pool.cluster}: pool {pool.pool}"
    if pool.capacity_before and pool.capacity_after < pool.capacity_before:
        share = f"{pool.allocated_after} guaranteed ({_percent(pool.allocated_before, pool.capacity_before)} → " \
                f"{_percent(pool.allocated_after, pool.capacity_after)})"
        yield Risk("high" if pool.allocated_after > pool.capacity_after else "medium", "pool-capacity-reduced",
                   f"{where} shrinks from {pool.capacity_before} to {pool.capacity_after} GPUs: {share}; GPUs no "
                   f"team holds {pool.unallocated_before} → {pool.unallocated_after}, so there is less to borrow")
    elif pool.capacity_before and pool.capacity_after > pool.capacity_before:
        yield Risk("low", "pool-capacity-increased", f"{where} grows from {pool.capacity_before} to "
                   f"{pool.capacity_after} GPUs (quotas unchanged unless shown)")
    over_before = max(0, pool.allocated_before - pool.capacity_before)
    over_after = max(0, pool.allocated_after - pool.capacity_after)
    if over_after > over_before:
        overcommit = pool.limit_after / pool.capacity_after if pool.capacity_after else 0
        yield Risk("medium", "pool-overcommitted", f"{where} guarantees {pool.allocated_after} GPUs of "
                   f"{pool.capacity_after} that exist (overcommit {overcommit:g} allows {pool.limit_after}): "
                   f"{over_after} guaranteed GPUs have no node (was {over_before}), so Kueue can admit work that "
                   "cannot be scheduled")


def _percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%" if whole else "-"
