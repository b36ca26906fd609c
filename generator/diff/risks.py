"""What is dangerous about a change: one risk line per cause, with a severity a reviewer can trust.

A preview that cries wolf is not read. So a risk line names a cause (a team arrives, a member is
added, a quota falls), not each object the cause touches: a team's arrival adds ten objects per
cluster and is one line; the same line on four clusters is one line naming the four. Severities
follow `SEVERITIES`, and every rule is in `RULEBOOK`, which the reference page is made from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from generator import quantity, releases
from generator.diff import upgrades
from generator.diff.impact import NO_SHARE, PoolImpact
from generator.diff.objects import Change

SEVERITIES: dict[str, str] = {
    "high": "The reviewer must act before merging. Once synced, the change deletes, evicts or stops running "
            "work, fails the sync, moves where the GitOps engine deploys, takes something a team holds away "
            "from it without its file saying so (a namespace, guaranteed GPUs, fair sharing), or gives "
            "someone rights across the cluster.",
    "medium": "The reviewer must agree. The change alters how other teams are scheduled (weights, priorities, "
              "preemption, cohorts, admission checks, GPUs promised beyond the nodes) or who can act in a "
              "team's namespaces, and nothing breaks when it syncs.",
    "low": "For the record. The consequence stays with the team whose file asked for it (its new namespace, "
           "a member removed, its own borrowing), or the platform grows.",
}
"""The rule every severity follows; a routine pull request (a quota raise, a new member, a new team)
has no high line."""
ORDER = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class Rule:
    """One risk rule, as the reference page lists it."""

    severity: str
    """Its severity, or the severities it can take ("high or medium")."""
    cause: str
    """What makes it fire, and what it means for the cluster."""


RULEBOOK: dict[str, Rule] = {
    # --- teams, namespaces and access
    "cluster-added": Rule("medium", "A cluster arrives: the platform, Kueue objects, the platform's roles and "
                          "admission policies it brings, in one line (its teams have their own `team-added` lines)."),
    "team-added": Rule("low", "A team arrives on a cluster: its queues, namespaces and member bindings, in one "
                              "line (a namespace taken from another team is still `namespace-claimed`)."),
    "team-removed": Rule("high", "A team leaves a cluster: its namespaces are deleted with every object and "
                                 "running job in them, and its queues once no admitted workload uses them."),
    "namespace-added": Rule("low", "A team gets another namespace; its members get their roles there."),
    "namespace-claimed": Rule("high", "A namespace moves from one team to another: the new team's members get "
                                      "edit rights over what the old team runs there."),
    "namespace-deleted": Rule("high", "A team's namespace is deleted while the team stays: every object and "
                                      "running job in it goes."),
    "members-added": Rule("medium", "People or groups get a team's roles in its namespaces (one line per set "
                                    "of namespaces, every cluster named)."),
    "members-removed": Rule("low", "People or groups lose a team's roles."),
    "rbac-subjects-changed": Rule("high or medium", "Who holds a binding the platform renders (not a team's) "
                                                    "changes; high when a ClusterRoleBinding gains a subject."),
    "rbac-widened": Rule("medium", "A platform Role, ClusterRole or binding is added, or a binding points at "
                                   "another role: more rights for someone."),
    "member-reads-widened": Rule("medium", "A team's members gain cluster-wide reads (`fleetgen-members-<team>`: "
                                           "the cluster file's `tenancy.membersReadNodes` or an operator turned "
                                           "on), one line per set of reads, the teams named."),
    "member-reads-narrowed": Rule("low", "A team's members lose cluster-wide reads."),
    # --- scheduling between teams
    "quota-reduced": Rule("high", "A team's guaranteed GPUs in a pool fall: its running workloads above the new "
                                  "quota may be preempted."),
    "borrowing-reduced": Rule("low", "Teams of a pool can borrow fewer GPUs (one line per pool)."),
    "cpu-pool-held": Rule("medium", "A team comes to hold (more of) the CPU pool as its own quota "
                                    "(`policy.neverPreempted`): the other teams can borrow that much less of it "
                                    "while it uses it, and their work borrowing it may be preempted when it takes "
                                    "it back."),
    "pool-overcommitted": Rule("medium", "A change adds guaranteed GPUs that no node backs (within the cluster's "
                                         "`overcommit`): Kueue can admit work that then cannot be scheduled."),
    "pool-capacity-reduced": Rule("high or medium", "A pool shrinks; high when guarantees then exceed it."),
    "pool-capacity-increased": Rule("low", "A pool grows."),
    "pool-renamed": Rule("medium", "A pool goes while one with the same GPUs and the same teams' shares arrives in "
                                   "the same cluster: a rename, one line instead of lost guarantees and a deleted "
                                   "ResourceFlavor. Kueue keeps what runs on the old flavor, counted against no "
                                   "quota until it ends."),
    "fair-sharing-switched": Rule("high", "A team's weight turns Kueue's fair sharing on or off for every team "
                                          "of a cluster whose file does not decide it."),
    "fair-sharing-weight-jump": Rule("high", "A queue's or cohort's weight moves by more than 4x."),
    "fair-sharing-weight-outsized": Rule("high", "A weight (a new team's included) is more than 4x the largest "
                                                 "other weight of the cluster."),
    "fair-sharing-weight-changed": Rule("medium", "Any other weight change: every other team's share of idle "
                                                  "GPUs moves."),
    "implicit-cohort-changed": Rule("medium", "A team joins or leaves an undeclared cohort that has other "
                                              "members."),
    "cohort-quota-changed": Rule("medium", "A declared cohort's own quota or limits change."),
    "preemption-changed": Rule("medium", "A queue's preemption policy changes: which running workloads can be "
                                         "evicted changes."),
    "queueing-strategy-changed": Rule("low", "A queue's queueingStrategy changes: the order its own workloads "
                                             "are admitted in (StrictFIFO: the oldest that does not fit blocks "
                                             "the rest)."),
    "pool-shared-by-usage": Rule("high or medium", "A pool becomes shared by usage (high: every guarantee in it "
                                                   "goes) or stops being (medium: the order jobs wait in changes)."),
    "usage-share-changed": Rule("high or medium", "In a pool shared by usage, a team joins, leaves or changes "
                                                  "its usageWeight: every other team's share over time moves (high "
                                                  "when a usageWeight moves more than 4x, or is more than 4x the "
                                                  "largest other)."),
    "priority-changed": Rule("medium", "A WorkloadPriorityClass is added, removed or changes value."),
    "admission-policy-changed": Rule("medium", "An admission policy fleetgen renders (a team's allowed priority "
                                               "classes, the ladder, the reclaim deadline, a team's maximum execution "
                                               "time or shared-pool queue, isolation) is added, removed or changes."),
    "default-priority-changed": Rule("medium", "The class a team's workloads get when they name none (its "
                                               "MutatingAdmissionPolicy) changes, appears or goes: how they "
                                               "queue and preempt against other teams changes."),
    "admission-checks-changed": Rule("medium", "A queue gains, loses or moves an admission check."),
    "admission-check-changed": Rule("medium", "A ProvisioningRequestConfig changes what the autoscaler is "
                                              "asked for."),
    "queue-stopped": Rule("high or medium", "A queue's stopPolicy becomes HoldAndDrain (high: evicts) or Hold."),
    "queue-started": Rule("low", "A stopped queue admits again."),
    "flavor-order-changed": Rule("low", "A team's pools are tried in another order."),
    "flavor-fungibility-changed": Rule("low", "Whether a job borrows or preempts in one pool or moves on "
                                              "changes."),
    "dispatch-worker-removed": Rule("high", "A MultiKueue manager stops dispatching to a worker: jobs there "
                                            "are orphaned."),
    # --- objects and sync
    "kueue-object-deleted": Rule("high", "A ClusterQueue, ResourceFlavor, Cohort or Topology is deleted (not "
                                         "with its team), with what Kueue then does to the work that used it."),
    "immutable-field": Rule("high", "A field the API server refuses to change: the sync fails until the object "
                                    "is deleted and recreated."),
    "gitops-destination-changed": Rule("high", "A GitOps object deploys somewhere else: objects at the old "
                                               "destination are pruned or orphaned."),
    "gitops-source-changed": Rule("medium", "A GitOps object syncs from another repository, branch or path."),
    "gitops-engine-changed": Rule("high", "A cluster moves between Argo CD and Flux."),
    "platform-upgraded": Rule("high or medium", "A platform chart moves to another release on a cluster (the "
                                                "cluster file's pin or fleetgen's), read alike from Argo CD and "
                                                "Flux objects: one line per component and cluster, with what each "
                                                "release it reaches changes (docs/reference/releases.md) and the "
                                                "order to do it in. High for a downgrade, or where a release it "
                                                "needs arrives in the same change but syncs after it."),
    "fleetgen-upgraded": Rule("high or medium", "The fleet's fleetgen pin (`fleetgen.txt`) moves: one line "
                                                "naming both releases and what of the diff the new one made. High "
                                                "for a downgrade, or a release from another repository."),
    "cluster-scoped": Rule("low", "A cluster-scoped object outside Kueue is added or removed."),
}
"""Every rule the diff can report; a Risk with a rule not here is a fleetgen bug."""


@dataclass(frozen=True)
class Risk:
    """Something a reviewer must look at twice, on the clusters it names."""

    severity: str
    rule: str
    what: str
    clusters: tuple[str, ...] = ()
    cause: str = ""
    """What fired it, for rules that another rule's line covers (`SUPERSEDED_BY`); not shown."""

    def __post_init__(self) -> None:
        assert self.rule in RULEBOOK and self.severity in ORDER, (self.rule, self.severity)

    @property
    def message(self) -> str:
        return f"{', '.join(self.clusters)}: {self.what}" if self.clusters else self.what


SUPERSEDED_BY: dict[str, tuple[str, ...]] = {
    "fair-sharing-weight-jump": ("fair-sharing-weight-outsized", "fair-sharing-switched"),
    "fair-sharing-weight-outsized": ("fair-sharing-switched",),
    "fair-sharing-weight-changed": ("fair-sharing-switched",),
    "kueue-object-deleted": ("pool-renamed",),
}
"""A line dropped where another line of the same cluster says more about the same cause (the same
`cause`, or a cluster-wide one with none): a weight is moot where fair sharing turns on or off."""


# --- rules on one object ---------------------------------------------------------------------------

def _fields(change: Change, prefix: str) -> list[str]:
    return [f.path for f in change.fields if f.path == prefix or f.path.startswith((prefix + ".", prefix + "["))]


def _at(change: Change, severity: str, rule: str, what: str, cause: str = "") -> Risk:
    return Risk(severity, rule, what, (change.obj.cluster,), cause)


DELETED_KUEUE = {
    "ClusterQueue": "Kueue keeps it (resource-in-use finalizer) only while workloads hold quota in it: admitted "
                    "ones run to completion, pending ones are never admitted (the queue reads Terminating), and "
                    "its LocalQueues' new jobs find no queue",
    "ResourceFlavor": "Kueue keeps it (resource-in-use finalizer) only while a ClusterQueue lists it, not while "
                      "work runs on it: work admitted on it keeps running and counts against no quota",
    "Cohort": "it has no finalizer: Kueue puts an implicit cohort of that name in its place, so its "
              "ClusterQueues stay grouped, without the deleted Cohort's own quota and settings",
    "Topology": "Kueue keeps it (resource-in-use finalizer) while a ResourceFlavor names it, so it goes only "
                "with that flavor",
}
"""What Kueue v0.19.2 does when each is deleted: `pkg/controller/core/clusterqueue_controller.go:189-198`
with `pkg/cache/scheduler/cache.go:426-434`; `resourceflavor_controller.go:107-116`; `cohort_controller.go:178-182`
with `pkg/cache/hierarchy/manager.go:110-122`; `pkg/controller/tas/topology_controller.go:109-120`."""


def _deleted_kueue(change: Change) -> Iterator[Risk]:
    if change.action == "destroy" and change.obj.key[2] in DELETED_KUEUE:
        yield _at(change, "high", "kueue-object-deleted", f"{change.obj.label} is deleted; "
                  f"{DELETED_KUEUE[change.obj.key[2]]}", cause=change.obj.label)


def _namespace_deleted(change: Change) -> Iterator[Risk]:
    if change.action == "destroy" and change.obj.key[2] == "Namespace":
        yield _at(change, "high", "namespace-deleted", f"Namespace {change.obj.key[4]} is deleted with every object "
                  "and running job in it")


def _preemption_or_priority(change: Change) -> Iterator[Risk]:
    kind = change.obj.key[2]
    if change.action == "change" and kind == "ClusterQueue" and _fields(change, "spec.preemption"):
        yield _at(change, "medium", "preemption-changed", f"preemption policy of {change.obj.label} changes: which "
                  "running workloads can be evicted changes")
    if change.action == "change" and kind == "ClusterQueue" and _fields(change, "spec.queueingStrategy"):
        after = _spec(change.after).get("queueingStrategy")
        yield _at(change, "low", "queueing-strategy-changed", f"{change.obj.label} admits its own workloads "
                  f"{after} from now on")
    if kind == "WorkloadPriorityClass" and (change.action != "change" or _fields(change, "value")):
        verb = {"add": "added", "destroy": "removed", "change": "changes value"}[change.action]
        yield _at(change, "medium", "priority-changed", f"{change.obj.label} {verb}: preemption order between "
                  "teams changes")


BINDINGS = ("RoleBinding", "ClusterRoleBinding")


def _rbac(change: Change) -> Iterator[Risk]:
    """More rights: a platform role or binding added, a role's rules or a binding's role changed.
    (Who holds a binding is `_platform_subjects`, or a team's members.)"""
    kind = change.obj.key[2]
    if kind not in (*BINDINGS, "Role", "ClusterRole"):
        return
    if change.action == "add" and not (kind in BINDINGS and change.obj.team):
        yield _at(change, "medium", "rbac-widened", f"{change.obj.label} is added: it grants rights")
    elif change.action == "change" and (_fields(change, "roleRef") or _fields(change, "rules")):
        yield _at(change, "medium", "rbac-widened", f"{change.obj.label} changes its "
                  f"{'role' if kind in BINDINGS else 'rules'}: it may grant more rights")


def subject_set(body: dict[str, Any] | None) -> set[tuple[str, str]]:
    """A binding's subjects as (kind, name)."""
    return {(str(s.get("kind")), str(s.get("name"))) for s in ((body or {}).get("subjects") or [])
            if isinstance(s, dict)}


def _body(side: Any) -> dict[str, Any] | None:
    return side.body if side else None


def _platform_subjects(change: Change) -> Iterator[Risk]:
    """Who holds a binding the platform renders: every change named (a team's are `members-*`)."""
    if change.obj.key[2] not in BINDINGS or change.obj.team:
        return
    before, after = subject_set(_body(change.before)), subject_set(_body(change.after))
    if before == after or change.action == "add":
        return
    parts = [f"{verb} " + _subjects(subjects) for verb, subjects in (("added", after - before),
                                                                     ("removed", before - after)) if subjects]
    role = ((change.obj.body.get("roleRef") or {}).get("name")) or "?"
    severity = "high" if change.obj.key[2] == "ClusterRoleBinding" and after - before else "medium"
    yield _at(change, severity, "rbac-subjects-changed", f"{change.obj.label} (role {role}): " + "; ".join(parts))


def _subjects(subjects: Iterable[tuple[str, str]]) -> str:
    return ", ".join(f"{kind} {name!r}" for kind, name in sorted(subjects))


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


def weight_cause(kind: str, name: str) -> str:
    """The `cause` of a weight line: the scheduling rules' "team:x" / "cohort:y"."""
    return f"weight:{kind}:{name}"


def _weight_jump(change: Change) -> Iterator[Risk]:
    kind = change.obj.key[2]
    if change.action != "change" or kind not in ("ClusterQueue", "Cohort"):
        return
    old, new = _weight(_body(change.before)), _weight(_body(change.after))
    old_v, new_v = (old if old is not None else Decimal(1)), (new if new is not None else Decimal(1))  # Kueue: 1
    if old_v != new_v and weight_jumped(old_v, new_v):
        # a team's queue carries the team's one weight: one line for the team
        owner = ("team", change.obj.team or change.obj.key[4]) if kind == "ClusterQueue" else ("cohort",
                                                                                               change.obj.key[4])
        yield _at(change, "high", "fair-sharing-weight-jump", f"{' '.join(owner)} fair-sharing weight "
                  f"{old_v.normalize():f} → {new_v.normalize():f} (more than {WEIGHT_JUMP:g}x): its share of idle "
                  "GPUs against the rest of the cohort changes that much", weight_cause(*owner))


def _namespace_claimed(change: Change) -> Iterator[Risk]:
    """A namespace that was another team's (a new one is `team-added` or `namespace-added`)."""
    if change.obj.key[2] != "Namespace" or change.action != "change":
        return
    team_after, team_before = change.obj.team, change.before.team if change.before else None
    if team_after and team_after != team_before:
        was = f" (was team {team_before!r}'s)" if team_before else " (it was no team's)"
        yield _at(change, "high", "namespace-claimed", f"team {team_after!r} claims namespace "
                  f"{change.obj.key[4]!r}{was}: its members get edit rights there")


def _cluster_scoped(change: Change) -> Iterator[Risk]:
    _, group, kind, ns, _ = change.obj.key
    if not ns and group != "kueue.x-k8s.io" and kind != "Namespace" and change.action != "change":
        yield _at(change, "low", "cluster-scoped", f"cluster-scoped {change.obj.label} "
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
"""Checked against the real API server with Kueue's CRDs in tests/test_diff_immutable.py."""


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
        if rule.kind != change.obj.key[2] or (rule.when and not _has(_body(change.before), rule.when)):
            continue
        if _fields(change, rule.field):
            yield _at(change, "high", "immutable-field", f"{change.obj.label} changes immutable {rule.field}: the "
                      "API server refuses the update, so the object must be deleted and recreated (a sync fails "
                      "otherwise)")


GITOPS_DESTINATION: dict[str, tuple[str, ...]] = {
    "Application": ("spec.destination", "spec.project"),
    "Kustomization": ("spec.targetNamespace", "spec.kubeConfig", "spec.serviceAccountName"),
    "HelmRelease": ("spec.targetNamespace", "spec.kubeConfig", "spec.storageNamespace", "spec.releaseName"),
}
"""Where a GitOps object deploys: changing it moves (and prunes) everything it manages."""
GITOPS_SOURCE: dict[str, tuple[str, ...]] = {
    "Application": ("spec.source.repoURL", "spec.source.path", "spec.source.chart", "spec.source.targetRevision"),
    "HelmRelease": ("spec.chart.spec.chart", "spec.chart.spec.sourceRef", "spec.chartRef"),
    "HelmRepository": ("spec.url",),
    "OCIRepository": ("spec.url",),
    "GitRepository": ("spec.url", "spec.ref"),
    "Kustomization": ("spec.path", "spec.sourceRef"),
}
"""What a GitOps object deploys from: another repository, branch or path replaces the cluster's state."""


def _gitops(change: Change) -> Iterator[Risk]:
    """(A chart's release moving is `platform-upgraded`'s line, not a source change.)"""
    kind = change.obj.key[2]
    if change.action != "change" or change.obj.key[1] not in ("argoproj.io", "kustomize.toolkit.fluxcd.io",
                                                               "source.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"):
        return
    moved = [f for prefix in GITOPS_DESTINATION.get(kind, ()) for f in _fields(change, prefix)]
    if moved:
        yield _at(change, "high", "gitops-destination-changed", f"{change.obj.label} changes where it deploys "
                  f"({', '.join(moved)}): objects at the old destination are pruned or orphaned")
    upgraded = upgrades.move(change) is not None
    source = [f for prefix in GITOPS_SOURCE.get(kind, ()) for f in _fields(change, prefix)
              if not (upgraded and f == "spec.source.targetRevision")]
    if source:
        yield _at(change, "medium", "gitops-source-changed", f"{change.obj.label} syncs from another source "
                  f"({', '.join(source)}): what that source holds replaces the cluster's state")


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
            yield Risk("high", "gitops-engine-changed", f"GitOps moves from {', '.join(sorted(removed))} to "
                       f"{', '.join(sorted(added))}: remove the old engine's objects without pruning (or both "
                       "engines manage, and prune, the same objects during the switch)", (cluster,))


def _upgrade_lines(changes: list[Change], new_clusters: frozenset[str]) -> Iterator[Risk]:
    """One line per component and cluster whose chart release moves, on either engine."""
    moved = [m for m in upgrades.moves(changes) if m.cluster not in new_clusters]
    by_cluster = {(m.cluster, m.component): m for m in moved}
    for move in moved:
        row = releases.release(move.component, move.new)
        what = [f"{move.component} {move.old} -> {move.new}"]
        severity = "medium"
        if move.downgrade:
            severity = "high"
            what.append("a downgrade: what the newer release stored or defaulted may not be read by the older one, "
                        "and fleetgen's table has no notes for going back")
        what.extend(note for crossed in upgrades.crossed(move) for note in crossed.upgrade)
        for needs, minimum in row.requires if row else ():
            other = by_cluster.get((move.cluster, needs))
            if other is None or not releases.numeric(other.old) or releases.key(other.old) >= releases.key(minimum):
                continue
            if upgrades.syncs_after(move.component, needs):
                severity = "high"
                what.append(f"it needs {needs} {minimum} or later, which this change also brings but the engine "
                            f"syncs after {move.component}: merge the {needs} upgrade first, on its own")
            else:
                what.append(f"it needs {needs} {minimum} or later, which this change brings and the engine syncs "
                            "first")
        if row is None:
            what.append("not a release in fleetgen's table, so nothing is known of what it needs")
        elif not row.tested:
            what.append("cited only: this fleetgen does not build or test it")
        yield Risk(severity, "platform-upgraded", "; ".join(what), (move.cluster,))


STOPS = {"HoldAndDrain": ("high", "evicts every admitted workload of the team (they requeue) and admits nothing "
                                  "new"),
         "Hold": ("medium", "admits nothing new; admitted workloads run to completion"),
         "None": ("low", "admits again")}
"""ClusterQueue stopPolicy -> (risk level, what Kueue then does), from the field's API documentation."""


def _stop_policy(change: Change) -> Iterator[Risk]:
    """A team's queue is stopped, drained or started again."""
    if change.obj.key[2] != "ClusterQueue" or change.action == "destroy":
        return
    before = ((_body(change.before) or {}).get("spec") or {}).get("stopPolicy", "None")
    after = ((_body(change.after) or {}).get("spec") or {}).get("stopPolicy", "None")
    if before != after and (change.action == "change" or after != "None"):
        level, effect = STOPS.get(after, ("medium", "changes whether it admits"))
        yield _at(change, level, "queue-stopped" if after != "None" else "queue-started",
                  f"{change.obj.label} stopPolicy {before} -> {after}: {effect}")


def _cohort_limits(change: Change) -> Iterator[Risk]:
    """A declared cohort's own quota or limits change (the root's follows the pools: capacity rows say it)."""
    obj = change.obj
    if obj.key[2] != "Cohort" or obj.key[4] == obj.cluster or change.action == "destroy":
        return
    if (change.action == "add" and (obj.body.get("spec") or {}).get("resourceGroups")) or \
            (change.action == "change" and _fields(change, "spec.resourceGroups")):
        yield _at(change, "medium", "cohort-quota-changed", f"{obj.label} changes its own quota or limits: what "
                  "its teams can borrow, and lend outside it, changes")


POLICY_EFFECTS: tuple[tuple[str, str], ...] = (
    ("fleetgen-priorities-", "which priority classes the team's workloads may use"),
    ("fleetgen-team-priorities", "which priorities workloads in every team namespace may run at (the ladder)"),
    ("fleetgen-reclaim-deadline", "how long pods in team namespaces may take to stop, and so how long a reclaim "
                                  "takes"),
    ("fleetgen-max-exec-", "how long the team's batch jobs may run once admitted"),
    ("fleetgen-shared-queue-", "which queue the team's GPU jobs land on"),
    ("fleetgen-team-pod-placement", "where team pods may run (tolerations, nodeName)"),
    ("fleetgen-team-egress", "what team NetworkPolicies may open"),
    ("fleetgen-team-objects", "which of fleetgen's objects in team namespaces members may change"),
)
"""Per admission policy name (prefix), what it decides, for the risk line; another name is said generally."""


def _policy_effect(name: str) -> str:
    return next((effect for prefix, effect in POLICY_EFFECTS if name.startswith(prefix)),
                "what the API server admits in team namespaces")


def _admission_policy(change: Change) -> Iterator[Risk]:
    """An admission policy fleetgen renders (a ValidatingAdmissionPolicy, or a MutatingAdmissionPolicy
    other than a team's default priority) is added, removed or changes: what it decides, by its name."""
    kind, name = change.obj.key[2], change.obj.key[4]
    if kind not in ("ValidatingAdmissionPolicy", "MutatingAdmissionPolicy") or \
            name.startswith(DEFAULT_PRIORITY_POLICY):
        return
    verb = {"add": "now decides", "destroy": "no longer decides", "change": "changes how it decides"}[change.action]
    yield _at(change, "medium", "admission-policy-changed", f"{change.obj.label} {verb} {_policy_effect(name)}")


DEFAULT_PRIORITY_POLICY = "fleetgen-default-priority-"


def _default_priority(change: Change) -> Iterator[Risk]:
    """The class a team's workloads without one get (its MutatingAdmissionPolicy) changes."""
    if change.obj.key[2] != "MutatingAdmissionPolicy" or not change.obj.key[4].startswith(DEFAULT_PRIORITY_POLICY):
        return
    verb = {"add": "now gives", "destroy": "no longer gives", "change": "changes"}[change.action]
    yield _at(change, "medium", "default-priority-changed", f"{change.obj.label} {verb} the priority class of "
              "workloads created without one in the team's namespaces: how they queue and preempt against other "
              "teams changes")


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
        yield _at(change, "medium", "admission-check-changed", f"{obj.label} changes what the autoscaler is asked "
                  "for jobs needing the check (class, parameters, managed resources or retries)")
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
        yield _at(change, "medium", "admission-checks-changed", f"{obj.label} {what}")


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
        yield _at(change, "low", "flavor-order-changed", f"{change.obj.label} tries its pools in another order "
                  f"({', '.join(old)} → {', '.join(new)}): new jobs may land on other GPUs")
    if before.get("flavorFungibility") != after.get("flavorFungibility"):
        def words(spec: dict[str, Any]) -> str:
            f = spec.get("flavorFungibility")
            return ", ".join(f"{k} {v}" for k, v in sorted(f.items())) if f else "Kueue's defaults"

        yield _at(change, "low", "flavor-fungibility-changed", f"{change.obj.label} flavorFungibility "
                  f"{words(before)} → {words(after)}: whether a job borrows or preempts in one pool or moves on to "
                  "the next changes")


def _dispatch(change: Change) -> Iterator[Risk]:
    """A MultiKueue manager stops dispatching to a worker (for one team, or at all): jobs admitted
    there lose their link to the manager, and queued ones go elsewhere or wait."""
    obj = change.obj
    if obj.key[2] == "MultiKueueCluster" and change.action == "destroy":
        yield _at(change, "high", "dispatch-worker-removed", f"worker {obj.key[4]} is removed from the MultiKueue "
                  "manager: jobs it runs for the manager's teams are orphaned there, queued ones are dispatched "
                  "elsewhere or wait")
    if obj.key[2] == "MultiKueueConfig" and change.action == "change":
        after = _spec(change.after).get("clusters") or []
        lost = [w for w in _spec(change.before).get("clusters") or [] if w not in after]
        if lost:
            yield _at(change, "high", "dispatch-worker-removed", f"{obj.label} no longer dispatches to "
                      f"{', '.join(lost)}: the team's jobs there are orphaned, new ones go elsewhere")


OBJECT_RULES: list[Callable[[Change], Iterator[Risk]]] = [
    _deleted_kueue, _namespace_deleted, _preemption_or_priority, _rbac, _platform_subjects, _weight_jump,
    _namespace_claimed, _cluster_scoped, _immutable, _gitops, _admission_policy, _default_priority, _stop_policy,
    _cohort_limits, _admission_checks, _placement, _dispatch,
]
"""Rules that read one object's change (a change a team cause covers is read by that cause instead)."""


# --- causes that span objects: a team arrives or leaves, gets a namespace, gains or loses members -----

def _cohort(queue: Change) -> str | None:
    """The cohort a queue was in (`cohortName` in Kueue v1beta2, `cohort` in v1beta1)."""
    spec = _spec(queue.before)
    return spec.get("cohortName") or spec.get("cohort")


@dataclass
class _TeamCauses:
    """The changes of one diff grouped by the team cause that explains them."""

    arrived: set[tuple[str, str]]
    """(cluster, team) whose queue is new there: everything of the team added there is its arrival."""
    left: set[tuple[str, str]]
    new_namespaces: dict[tuple[str, str], str]
    """(cluster, namespace) -> team, for a namespace an existing team gains."""
    cohorts: dict[tuple[str, str], str]
    """(cluster, cohort) -> the leaving team whose queue was in it, for a cohort deleted with it."""

    @classmethod
    def of(cls, changes: list[Change]) -> _TeamCauses:
        def queues(action: str) -> dict[tuple[str, str], Change]:
            return {(c.obj.cluster, c.obj.team): c for c in changes if c.action == action and c.obj.team
                    and c.obj.key[2] == "ClusterQueue" and c.obj.key[4] == c.obj.team}
        arrived, left = queues("add"), queues("destroy")
        new_namespaces = {(c.obj.cluster, c.obj.key[4]): c.obj.team for c in changes
                          if c.action == "add" and c.obj.key[2] == "Namespace" and c.obj.team
                          and (c.obj.cluster, c.obj.team) not in arrived}
        cohorts = {(cluster, str(_cohort(queue))): team for (cluster, team), queue in left.items() if _cohort(queue)}
        return cls(set(arrived), set(left), new_namespaces, cohorts)

    def owner(self, change: Change) -> tuple[str, str, str] | None:
        """The cause that covers this change: ("arrived" | "left" | "namespace", cluster, team)."""
        cluster, team = change.obj.cluster, change.obj.team
        if team and change.action == "add" and (cluster, team) in self.arrived:
            return ("arrived", cluster, team)
        if team and change.action == "destroy" and (cluster, team) in self.left:
            return ("left", cluster, team)
        if change.action == "destroy" and change.obj.key[2] == "Cohort" and (cluster, change.obj.key[4]) in \
                self.cohorts:
            return ("left", cluster, self.cohorts[(cluster, change.obj.key[4])])
        ns = change.obj.key[4] if change.obj.key[2] == "Namespace" else change.obj.key[3]
        if change.action == "add" and (cluster, ns) in self.new_namespaces:
            return ("namespace", cluster, self.new_namespaces[(cluster, ns)])
        return None


def _plural(word: str, items: Iterable[str]) -> str:
    names = sorted(set(items))
    return f"{word}{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _grants(bindings: list[Change]) -> str:
    """Who the added bindings name, and their roles: 'Group 'audio' get roles edit, ... there'."""
    subjects = set().union(*(subject_set(_body(c.after)) for c in bindings)) if bindings else set()
    roles = {str((c.obj.body.get("roleRef") or {}).get("name")) for c in bindings if c.obj.key[3]}
    wide = {str((c.obj.body.get("roleRef") or {}).get("name")) for c in bindings if not c.obj.key[3]}
    if not subjects:
        return "no members"
    return f"{_subjects(subjects)} get {_plural('role', roles)} there" + \
        (f" and {_plural('role', wide)} cluster-wide" if wide else "")


def _team_lines(owned: dict[tuple[str, str, str], list[Change]]) -> Iterator[Risk]:
    for (kind, cluster, team), covered in sorted(owned.items()):
        namespaces = [c.obj.key[4] for c in covered if c.obj.key[2] == "Namespace"]
        queues = [c.obj.key[4] for c in covered if c.obj.key[2] == "ClusterQueue"]
        bindings = [c for c in covered if c.obj.key[2] in BINDINGS]
        if kind == "arrived":
            where = _plural("namespace", namespaces) if namespaces else "no namespace"
            yield Risk("low", "team-added", f"team {team} arrives: {_plural('queue', queues)}, {where}; "
                       f"{_grants(bindings)}", (cluster,))
        elif kind == "left":  # which queues and cohorts differs by cluster; the changes list them
            gone = f"{_plural('namespace', namespaces)} deleted with every object and running job in them, and " \
                if namespaces else ""
            yield Risk("high", "team-removed", f"team {team} leaves: {gone}its queues (and any cohort only it used) "
                       "deleted; Kueue keeps a queue until no admitted workload uses it", (cluster,))
        else:
            yield Risk("low", "namespace-added", f"team {team} gets {_plural('namespace', namespaces)}: "
                       f"{_grants(bindings)}", (cluster,))


ARRIVAL_PARTS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("flavor", "flavors", frozenset({"ResourceFlavor"})),
    ("priority class", "priority classes", frozenset({"WorkloadPriorityClass"})),
    ("role", "roles", frozenset({"ClusterRole", "Role"})),
    ("admission policy", "admission policies", frozenset({"ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"})),
)
"""What a new cluster's line names, by kind: what decides scheduling, grants rights or refuses requests."""


def _cluster_lines(arriving: dict[str, list[Change]], teams: set[tuple[str, str]]) -> Iterator[Risk]:
    """One line per new cluster: how many objects, and by name what a reviewer checks twice."""
    for cluster, covered in sorted(arriving.items()):
        parts = []
        for one, many, kinds in ARRIVAL_PARTS:
            names = sorted({c.obj.key[4] for c in covered if c.obj.key[2] in kinds})
            if names:
                parts.append(f"{one if len(names) == 1 else many} {', '.join(names)}")
        gitops = sum(1 for c in covered if c.obj.key[1].endswith(("argoproj.io", "fluxcd.io")))
        arrived = sorted(team for c, team in teams if c == cluster)
        parts.append(f"{gitops} GitOps objects" if gitops else "no GitOps object")
        parts.append(f"teams {', '.join(arrived)} (their own lines)" if arrived else "no team has a queue there yet")
        yield Risk("medium", "cluster-added", f"cluster {cluster} arrives with {len(covered)} objects: "
                   f"{'; '.join(parts)}", (cluster,))


def _member_lines(changes: list[Change]) -> Iterator[Risk]:
    """A team's members added or removed, one line per team, direction and set of namespaces.

    Members are a team's, so every binding of the team in every namespace changes alike: the
    lines say who and where once, not once per binding."""
    moves: dict[tuple[str, str, str], dict[tuple[str, str], set[str]]] = {}
    roles: dict[tuple[str, str, str], set[str]] = {}
    cluster_wide: dict[tuple[str, str, str], set[str]] = {}
    for change in changes:
        if change.obj.key[2] not in BINDINGS or not change.obj.team or change.action != "change":
            continue
        before, after = subject_set(_body(change.before)), subject_set(_body(change.after))
        role = str((change.obj.body.get("roleRef") or {}).get("name"))
        namespace = change.obj.key[3]
        for verb, subjects in (("adds", after - before), ("removes", before - after)):
            key = (change.obj.cluster, change.obj.team, verb)
            for subject in subjects:  # a team's ClusterRoleBinding (its members' reads) is no place
                seen = moves.setdefault(key, {}).setdefault(subject, set())
                if namespace:
                    seen.add(namespace)
            if subjects:
                (roles if namespace else cluster_wide).setdefault(key, set()).add(role)
    for (cluster, team, verb), by_subject in sorted(moves.items()):
        by_places: dict[frozenset[str], list[tuple[str, str]]] = {}
        for subject, namespaces in by_subject.items():
            by_places.setdefault(frozenset(namespaces), []).append(subject)
        wide = cluster_wide.get((cluster, team, verb))
        for places, who in sorted(by_places.items(), key=lambda kv: sorted(kv[0])):
            rule, severity = ("members-added", "medium") if verb == "adds" else ("members-removed", "low")
            where = [f"{_plural('role', roles[(cluster, team, verb)])} in {_plural('namespace', places)}"
                     ] if places and (cluster, team, verb) in roles else []
            where += [f"{_plural('role', wide)} cluster-wide"] if wide else []
            yield Risk(severity, rule, f"team {team} {verb} {_subjects(who)}: {'; '.join(where)}", (cluster,))


# --- capacity ----------------------------------------------------------------------------------------

def _renamed(pool: PoolImpact) -> Risk:
    """What a rename does in Kueue v0.19.2, as tests/test_pool_rename.py sees it on the fleet twin: the old
    ResourceFlavor goes at once (its finalizer holds it only while a ClusterQueue lists it,
    pkg/controller/core/resourceflavor_controller.go:107-116), and what was admitted on it keeps running,
    its usage kept under a flavor no queue lists (pkg/cache/scheduler/clusterqueue.go:235-248)."""
    old, new = pool.renamed_from, pool.pool
    return Risk("medium", "pool-renamed", f"pool {old} is renamed {new}: every team keeps its GPUs, and the "
                f"ResourceFlavor {old} is replaced by {new} at once. Workloads admitted on {old} keep running but "
                f"count against no quota until they end, so each team can be admitted its whole quota of {new} "
                "again beside them, and those pods wait for GPUs (or are requeued by waitForPodsReady): rename a "
                "drained pool, or accept that", (pool.cluster,), cause=f"ResourceFlavor {old}")


def _capacity_lines(capacity: list[PoolImpact], left: set[tuple[str, str]]) -> Iterator[Risk]:
    for pool in capacity:
        if pool.renamed_from:
            yield _renamed(pool)
        yield from _pool_risks(pool)
        fewer = []
        for row in pool.rows:
            b, a = row.before or NO_SHARE, row.after or NO_SHARE
            if (row.cluster, row.team) in left:
                continue  # the team's leaving is its line
            if a.guaranteed < b.guaranteed:
                yield Risk("high", "quota-reduced", f"{row.team} loses {b.guaranteed - a.guaranteed} guaranteed "
                           f"{pool.pool} GPUs ({b.guaranteed} → {a.guaranteed}); its running workloads above the "
                           "new quota may be preempted", (row.cluster,))
            elif a.borrowable < b.borrowable and row.after is not None:
                fewer.append(f"{row.team} {b.borrowable} → {a.borrowable}")
        if fewer:
            yield Risk("low", "borrowing-reduced", f"pool {pool.pool}: teams can borrow fewer GPUs "
                       f"({', '.join(fewer)})", (pool.cluster,))


def _pool_risks(pool: PoolImpact) -> Iterator[Risk]:
    """The pool's own size, and guarantees beyond the GPUs that exist.

    Overcommit (the cluster's `overcommit`) lets quotas add up to more GPUs than the pool has; that
    is a choice, so only a change that adds guaranteed GPUs without nodes behind them is a risk.
    """
    where = f"pool {pool.pool}"
    if pool.capacity_before and pool.capacity_after < pool.capacity_before:
        share = f"{pool.allocated_after} guaranteed ({_percent(pool.allocated_before, pool.capacity_before)} → " \
                f"{_percent(pool.allocated_after, pool.capacity_after)})"
        yield Risk("high" if pool.allocated_after > pool.capacity_after else "medium", "pool-capacity-reduced",
                   f"{where} shrinks from {pool.capacity_before} to {pool.capacity_after} GPUs: {share}; GPUs no "
                   f"team holds {pool.unallocated_before} → {pool.unallocated_after}, so there is less to borrow",
                   (pool.cluster,))
    elif pool.capacity_before and pool.capacity_after > pool.capacity_before:
        yield Risk("low", "pool-capacity-increased", f"{where} grows from {pool.capacity_before} to "
                   f"{pool.capacity_after} GPUs (quotas unchanged unless shown)", (pool.cluster,))
    over_before = max(0, pool.allocated_before - pool.capacity_before)
    over_after = max(0, pool.allocated_after - pool.capacity_after)
    if over_after > over_before:
        overcommit = pool.limit_after / pool.capacity_after if pool.capacity_after else 0
        raised = [f"{r.team} +{(r.after or NO_SHARE).guaranteed - (r.before or NO_SHARE).guaranteed}"
                  for r in pool.rows
                  if (r.after or NO_SHARE).guaranteed > (r.before or NO_SHARE).guaranteed]
        by = f" ({', '.join(raised)})" if raised else ""
        yield Risk("medium", "pool-overcommitted", f"{where} guarantees {pool.allocated_after} GPUs{by} of "
                   f"{pool.capacity_after} that exist (overcommit {overcommit:g} allows {pool.limit_after}): "
                   f"{over_after} guaranteed GPUs have no node (was {over_before}), so Kueue can admit work that "
                   "cannot be scheduled", (pool.cluster,))


def _percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%" if whole else "-"


# --- all of it -----------------------------------------------------------------------------------------

def _superseded(found: list[Risk]) -> list[Risk]:
    covering = {(r.rule, c, r.cause) for r in found for c in r.clusters}

    def covered(risk: Risk) -> bool:
        return any((rule, c, cause) in covering for rule in SUPERSEDED_BY.get(risk.rule, ())
                   for c in risk.clusters for cause in ("", risk.cause))
    return [r for r in found if not covered(r)]


def merged(found: Iterable[Risk]) -> list[Risk]:
    """One line per (severity, rule, text), naming every cluster it holds on; most severe first."""
    clusters: dict[tuple[str, str, str], set[str]] = {}
    for risk in found:
        clusters.setdefault((risk.severity, risk.rule, risk.what), set()).update(risk.clusters)
    lines = [Risk(severity, rule, what, tuple(sorted(names))) for (severity, rule, what), names in clusters.items()]
    return sorted(lines, key=lambda r: (ORDER[r.severity], r.rule, r.what, r.clusters))


def _member_reads_object(change: Change) -> bool:
    """A team's `fleetgen-members-<team>` ClusterRole or binding (compile/member_rights.py)."""
    _, _, kind, _, name = change.obj.key
    return bool(change.obj.team) and kind in ("ClusterRole", "ClusterRoleBinding") and \
        name == f"fleetgen-members-{change.obj.team}"


def _reads(body: dict[str, Any] | None) -> set[str]:
    """A ClusterRole's reads as `resource.group` (`resource` in the core group), with any resourceNames."""
    out: set[str] = set()
    for rule in (body or {}).get("rules") or []:
        if not isinstance(rule, dict):
            continue
        names = f" ({', '.join(map(str, rule['resourceNames']))})" if rule.get("resourceNames") else ""
        for group in rule.get("apiGroups") or []:
            out.update(f"{resource}{'.' + str(group) if group else ''}{names}" for resource in rule.get("resources")
                       or [])
    return out


def _member_reads_lines(changes: list[Change]) -> Iterator[Risk]:
    """What teams' members may read cluster-wide moves with the cluster file (a switch, an operator), for every
    team alike: one line per cluster, direction and set of reads, not one per team's role."""
    moved: dict[tuple[str, str], dict[frozenset[str], set[str]]] = {}
    for change in changes:
        if change.obj.key[2] != "ClusterRole":
            continue
        before, after = _reads(_body(change.before)), _reads(_body(change.after))
        for verb, reads in (("gain", after - before), ("lose", before - after)):
            if reads:
                moved.setdefault((change.obj.cluster, verb), {}).setdefault(frozenset(reads), set()).add(
                    str(change.obj.team))
    for (cluster, verb), by_reads in sorted(moved.items()):
        for what, teams in sorted(by_reads.items(), key=lambda kv: sorted(kv[0])):
            rule, severity = ("member-reads-widened", "medium") if verb == "gain" else ("member-reads-narrowed", "low")
            yield Risk(severity, rule, f"members of {_plural('team', teams)} {verb} cluster-wide reads of "
                       f"{', '.join(sorted(what))} (fleetgen-members-<team>)", (cluster,))


def risks(changes: list[Change], capacity: list[PoolImpact], extra: list[Risk] | None = None,
          new_clusters: frozenset[str] = frozenset()) -> list[Risk]:
    """Every risk, one line per cause, most severe first (`extra`: those found on the fleets,
    diff/scheduling.py; `new_clusters`: clusters the base had no object of, each one line)."""
    causes = _TeamCauses.of(changes)
    owned: dict[tuple[str, str, str], list[Change]] = {}
    arriving: dict[str, list[Change]] = {}
    member_reads: list[Change] = []
    found: list[Risk] = []
    for change in changes:
        owner = causes.owner(change)
        if owner:
            owned.setdefault(owner, []).append(change)
        elif change.obj.cluster in new_clusters:
            arriving.setdefault(change.obj.cluster, []).append(change)
        elif _member_reads_object(change):
            member_reads.append(change)
        else:
            found.extend(risk for rule in OBJECT_RULES for risk in rule(change))
    found.extend(_cluster_lines(arriving, causes.arrived))
    found.extend(_team_lines(owned))
    found.extend(_member_reads_lines(member_reads))
    found.extend(_member_lines(changes))
    found.extend(_gitops_engine(changes))
    found.extend(_upgrade_lines(changes, new_clusters))
    found.extend(_capacity_lines(capacity, causes.left))
    found.extend(extra or [])
    return merged(_superseded(found))
