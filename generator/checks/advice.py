"""Warnings: inputs Kueue accepts that will not do what they seem to say.

Unlike the checks (`checks.py`), these do not stop a render: the setting may be deliberate. Each
rule says, with file:line, what Kueue will actually do and how to get what was probably meant.
`WARNINGS` is the table `advise` runs; `render` and `validate` print what it finds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from generator.config.cluster import PROVISIONING_CLASSES
from generator.config.fleet import Fleet, fair_sharing
from generator.config.routes import relabelled, shared_routes, stranded_namespaces
from generator.config.team import TeamConfig
from generator.errors import Finding
from generator.guarantees import HeldBack, held_back

WARNING = "warning"
"""`Finding.check` of a warning: printed as `... [warning]`, never an error."""
Warning = tuple[str, Finding]
"""(cluster the warning is about, the finding)."""


def _weight_alone_in_cohort(fleet: Fleet) -> Iterator[Warning]:
    """A team's fairSharingWeight only ranks it against the other children of its cohort (kueue
    v0.19.2 pkg/scheduler/fair_sharing_iterator.go:115-125, the tournament compares each cohort's
    children); a ClusterQueue alone in its cohort has no sibling, and the cohort competes upward
    with its own weight. Undeclared cohorts take their lone team's weight (`compile/kueue.py`), the
    root competes with nobody: only a declared cohort with another weight is worth a warning."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        teams = fleet.teams_in(cfg.name)
        if not fair_sharing(cfg, teams):
            continue
        parents = {c.name: c.parent or cfg.name for c in cfg.cohorts}
        weights = {c.name: c.fair_sharing_weight for c in cfg.cohorts}
        for team in teams:
            tcfg = team.config
            if tcfg.fair_sharing_weight is None:
                continue
            cohort = tcfg.cohort or cfg.name
            queues = [t for t in teams if (t.config.cohort or cfg.name) == cohort]
            children = [c for c, parent in parents.items() if parent == cohort]
            own = weights.get(cohort)
            if cohort not in weights or len(queues) > 1 or children or own == tcfg.fair_sharing_weight:
                continue
            competes = f"with weight {own:g}" if own is not None else "with weight 1 (it sets none)"
            file, line = team.at("fairSharingWeight")
            yield cfg.name, Finding(file, line, "fairSharingWeight",
                          f"in cluster {cfg.name!r} the team's ClusterQueue is alone in cohort {cohort!r}, so its "
                          f"weight {tcfg.fair_sharing_weight:g} ranks it against nobody: the cohort competes for "
                          f"borrowed GPUs {competes}",
                          f"set fairSharingWeight on cohort {cohort!r} in {cluster.source.path} (cohorts:), or "
                          "share the cohort with another team", WARNING)


def _overcommitted_pools(fleet: Fleet) -> Iterator[Warning]:
    """With overcommit above 1 the teams' guarantees can add up to more GPUs than the pool has;
    Kueue counts quota, not nodes (except on topology-aware flavors, which check node capacity)."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        if cfg.overcommit <= 1:
            continue
        for pool in cfg.node_pools:
            total = sum(t.config.quotas[cfg.name][pool.name].gpus for t in fleet.teams_in(cfg.name)
                        if pool.name in t.config.quotas[cfg.name])
            if total <= pool.gpus:
                continue
            if pool.topology_levels is None:
                what = (f"Kueue admits up to {total} GPUs of jobs there; pods beyond {pool.gpus} GPUs stay "
                        f"Pending, and after waitForPodsReady's {cfg.kueue.wait_for_pods_ready.timeout} the job is "
                        "evicted and requeued, again and again while the pool is full")
            else:
                what = (f"its flavor is topology-aware, so Kueue admits only what fits on the nodes: "
                        f"guarantees beyond {pool.gpus} GPUs are met only when others leave room")
            file, line = cluster.at("overcommit")
            yield cfg.name, Finding(file, line, "overcommit",
                          f"pool {pool.name!r} has {pool.gpus} GPUs but teams are guaranteed {total} "
                          f"(overcommit {cfg.overcommit:g}): {what}",
                          "keep guarantees within the pool and let teams borrow (borrowingLimit), or accept "
                          "the requeues", WARNING)


def _cpu_jobs_on_gpu_flavors(fleet: Fleet) -> Iterator[Warning]:
    """Kueue puts every Job without a queue in a team namespace on its `default` LocalQueue
    (kueue v0.19.2 pkg/controller/jobframework/defaults.go:79-97); without a CPU pool that is the
    team's GPU queue, whose flavors carry the GPU pools' node labels and tolerations."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        if cfg.cpu_pool is not None or cfg.multikueue is not None or not fleet.teams_in(cfg.name):
            continue
        file, line = cluster.at("nodePools")
        yield cfg.name, Finding(file, line, "cpuPool",
                                "jobs without a queue label in team namespaces, CPU-only ones included, are queued "
                                "to the team's GPU queue: Kueue admits them to a GPU flavor, so they run on GPU "
                                "nodes and use the GPU pools' CPU quota",
                                "declare cpuPool (nodes without GPUs): CPU-only jobs then run there first", WARNING)


def _cpu_pool_passed_over(fleet: Fleet) -> Iterator[Warning]:
    """A team's queue holds none of the CPU pool (the root cohort lends it all), so taking it is always
    borrowing; `whenCanBorrow: TryNextFlavor` makes Kueue go on to a GPU pool where the team's own CPU
    share fits without borrowing (kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go), and
    CPU-only jobs run on GPU nodes while the CPU pool is idle."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        if cfg.cpu_pool is None:
            continue
        for team in fleet.teams_in(cfg.name):
            if not cfg.cpu_flavor_for(cfg.queue_pools(team.config.quotas[cfg.name])):
                continue  # the team's queue has no CPU pool flavor to pass over
            chosen = team.config.fungibility_in(cfg)
            if chosen is None or chosen.when_can_borrow != "TryNextFlavor":
                continue
            loaded, path = (team, ("flavorFungibility", "whenCanBorrow")) if team.config.flavor_fungibility else \
                (cluster, ("kueue", "flavorFungibility", "whenCanBorrow"))
            file, line = loaded.at(*path)
            yield cfg.name, Finding(file, line, ".".join(path),
                                    f"in {cfg.name} {cfg.cpu_pool_passed_over()} (team {team.config.name})",
                                    "use whenCanBorrow: MayStopSearch (Kueue's default) to keep CPU-only jobs on the "
                                    "CPU pool", WARNING)


MUTATING_DEFAULTS: tuple[tuple[Callable[[TeamConfig], object], str, str], ...] = (
    # Kueue runs a workload naming no class at priority 0, below every class of the example fleet, so a
    # borrowing team cannot preempt it and it can preempt nothing.
    (lambda team: team.default_priority,
     "defaultPriority of {teams} reaches only fleetgen's job templates in {cluster}: other workloads naming no "
     "priority class run at priority 0, as Kueue gives them", ", or have every job name its class"),
    # A longer label is still refused (its ValidatingAdmissionPolicy needs no 1.36).
    (lambda team: team.max_execution_time,
     "maxExecutionTime of {teams} reaches only jobs labelled kueue.x-k8s.io/max-exec-time-seconds in {cluster}: "
     "jobs created without the label run without a limit", ""),
)
"""Team settings that reach workloads created without them only through a MutatingAdmissionPolicy:
(which teams set it, what it reaches without one, what else the fix may do)."""


def _mutating_reach(fleet: Fleet) -> Iterator[Warning]:
    """Before Kubernetes 1.36 there is no MutatingAdmissionPolicy to give a team's setting
    (MUTATING_DEFAULTS) to workloads created without it: said once per setting and cluster."""
    for sets, reaches, also in MUTATING_DEFAULTS:
        for cluster in fleet.clusters.values():
            cfg = cluster.config
            teams = sorted(t.config.name for t in fleet.teams_in(cfg.name) if sets(t.config))
            if cfg.mutating_policies or not teams:
                continue
            file, line = cluster.at("kubernetesVersion")
            yield cfg.name, Finding(file, line, "kubernetesVersion",
                                    reaches.format(teams=", ".join(teams), cluster=cfg.name),
                                    "upgrade the cluster to Kubernetes 1.36 and set kubernetesVersion: \"1.36\" "
                                    f"(a MutatingAdmissionPolicy then labels them){also}", WARNING)


def _stranded_gpu_jobs(fleet: Fleet) -> Iterator[Warning]:
    """A team's GPUs of a kind only in pools shared by usage are not in its own ClusterQueue, where
    Kueue puts its jobs without a queue label (and those labelled with the team's name): there they
    stay pending for ever (kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go:1071), except
    in the team's first namespace on Kubernetes 1.36, where a MutatingAdmissionPolicy relabels them
    onto the team's queue on the pool (`compile/queue_routing.py`)."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        for team in fleet.teams_in(cfg.name):
            tcfg = team.config
            stranded = stranded_namespaces(cfg, tcfg)
            if not stranded:
                continue
            routes = shared_routes(cfg, tcfg)
            gpus = " or ".join(r.resource for r in routes)
            queues = ", ".join(r.local_queue for r in routes)
            home = routes[0].namespace
            only = f", whose queue {queues} is in namespace {home} only" if relabelled(cfg, tcfg) else ""
            fix = f"submit GPU jobs in {home} (labelled kueue.x-k8s.io/queue-name: {queues}), or give the team " \
                  f"quota in a pool of its own in {cfg.name}"
            if not cfg.mutating_policies:
                fix += (f"; on Kubernetes 1.36 (kubernetesVersion: \"1.36\") the API server relabels them in {home} "
                        "as they are created")
            file, line = team.at("quotas", cfg.name)
            yield cfg.name, Finding(file, line, f"quotas.{cfg.name}",
                                    f"team {tcfg.name} has {gpus} in {cfg.name} only in pools shared by usage "
                                    f"({', '.join(r.pool for r in routes)}){only}: in {', '.join(stranded)} a job "
                                    f"asking for them with no queue label, or labelled default or {tcfg.name}, stays "
                                    f"pending for ever (Kueue: resource {gpus} unavailable in ClusterQueue "
                                    f"{tcfg.name})", fix, WARNING)


def _names(items: tuple[str, ...], limit: int = 8) -> str:
    """A list of team names, cut after `limit` with how many more."""
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"


def _held_text(held: HeldBack, lenders: tuple[str, ...]) -> str:
    """'a100 of recsys, vision (at standard) by inference and each other'."""
    others = tuple(b for b in held.borrowers if b not in lenders)
    mutual = len(lenders) > 1 and any(b in lenders for b in held.borrowers)
    by = " and ".join(filter(None, [_names(others), "each other" if mutual else ""]))
    return f"{held.pool} of {_names(lenders)} (at {held.priority}) by {by}"


def _unreclaimable_guarantees(fleet: Fleet) -> Iterator[Warning]:
    """Guaranteed GPUs lent out come back only as the lender's reclaimWithinCohort allows: a team
    that reads its quota as a guarantee waits while a borrower of its priority or above keeps it.
    One warning per cluster for the lenders under the cluster's policy, one per team that chose its own."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        own = {t.config.name: t for t in fleet.teams_in(cfg.name)
               if t.config.policy is not None and t.config.policy.reclaim_within_cohort is not None}
        groups: dict[str, list[HeldBack]] = {}
        for held in held_back(fleet, cfg.name):
            for lender in held.lenders:  # a team with its own policy is in a group of its own policy
                key = lender if lender in own else ""
                if not groups.get(key) or groups[key][-1] is not held:
                    groups.setdefault(key, []).append(held)
        for key, helds in sorted(groups.items()):
            policy = helds[0].policy
            rule = "takes them back from nobody" if policy == "Never" else "takes them back only from lower priorities"
            where = "; ".join(_held_text(h, tuple(t for t in h.lenders if (t in own) == bool(key))) for h in helds)
            loaded, path = (own[key], ("policy", "reclaimWithinCohort")) if key else \
                (cluster, ("kueue", "preemption", "reclaimWithinCohort"))
            file, line = loaded.at(*path)
            yield cfg.name, Finding(file, line, ".".join(path),
                                    f"in {cfg.name} guaranteed GPUs are not guaranteed once lent: reclaimWithinCohort "
                                    f"{policy} {rule}, so borrowers keep them until their jobs end: {where}",
                                    "set reclaimWithinCohort: Any, or lendingLimit: 0 on quota that must be there at "
                                    "once, or give the lender's jobs a class above what its borrowers may use "
                                    "(allowedPriorities)", WARNING)


def _admission_check_reach(fleet: Fleet) -> Iterator[Warning]:
    """A ProvisioningRequest of a class no known autoscaler serves is never answered: Kueue holds the
    job's quota (QuotaReserved) and never admits it. A check on pools no team queue uses does nothing."""
    for cluster in fleet.clusters.values():
        cfg = cluster.config
        teams = fleet.teams_in(cfg.name)
        for i, check in enumerate(cfg.admission_checks):
            request = check.provisioning_request
            if request is not None and request.class_name not in PROVISIONING_CLASSES:
                file, line = cluster.at("admissionChecks", i, "provisioningRequest", "className")
                yield cfg.name, Finding(file, line, f"admissionChecks[{i}].provisioningRequest.className",
                                        f"no known autoscaler serves class {request.class_name!r}: unless yours "
                                        "does, jobs needing the check keep their quota reserved and are never "
                                        "admitted", f"use one of {', '.join(PROVISIONING_CLASSES)}, or make sure "
                                        "the cluster's autoscaler serves this class", WARNING)
            if not any(cfg.check_reaches(check, t.config.name, cfg.queue_pools(t.config.quotas[cfg.name]))
                       for t in teams) and not any(check in cfg.shared_pool_checks(p) for p in cfg.shared_pools):
                file, line = cluster.at("admissionChecks", i)
                yield cfg.name, Finding(file, line, f"admissionChecks[{i}]", f"check {check.name!r} applies to no "
                                        "team queue: no team has quota in its pools", "add the teams' pools, or "
                                        "remove the check", WARNING)


WARNINGS: list[Callable[[Fleet], Iterator[Warning]]] = [_weight_alone_in_cohort, _overcommitted_pools,
                                                        _cpu_jobs_on_gpu_flavors, _cpu_pool_passed_over,
                                                        _mutating_reach,
                                                        _unreclaimable_guarantees,
                                                        _admission_check_reach, _stranded_gpu_jobs]


def advise(fleet: Fleet, clusters: list[str] | None = None) -> list[Finding]:
    """Every warning, sorted; only those about `clusters` when given."""
    return sorted({finding for rule in WARNINGS for cluster, finding in rule(fleet)
                   if clusters is None or cluster in clusters})
