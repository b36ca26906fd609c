"""`fleetgen explain`: plain-text tables of quotas and pool allocation."""

from __future__ import annotations

from generator.capacity import TeamShare, pool_capacities
from generator.compile.quota import cpu_pod_requests, cpu_pool_held, cpu_profile_fit
from generator.config.cluster import PROVISIONING_CLASSES, AdmissionCheck, ClusterConfig
from generator.config.fleet import Fleet, fair_sharing, fair_tree, usage_split
from generator.config.routes import relabelled, shared_routes, stranded_namespaces
from generator.config.team import TeamConfig
from generator.guarantees import held_back
from generator.terminal import table

RECLAIM = {
    "Any": "takes its guaranteed GPUs back from borrowers by preempting their workloads, whatever their priority",
    "LowerPriority": "takes its guaranteed GPUs back by preempting borrowers' workloads of lower priority only; "
                     "borrowers of its priority or above keep them until their jobs end",
    "Never": "waits for borrowers to finish before it gets its guaranteed GPUs back (it preempts no borrower)",
}
"""Kueue `reclaimWithinCohort` in the words of the team that lent."""
FAIR_REACH = {"Any": "of any priority", "LowerPriority": "of lower priority only", "Never": None}
"""Which borrowed workloads fair sharing may preempt: only those reclaimWithinCohort allows (kueue
v0.19.2 pkg/scheduler/preemption/preemption.go:636-646 filters the candidates before the fair-sharing
strategies rank them, lines 534-541)."""
WITHIN = {
    "LowerPriority": "a job preempts the team's own jobs of lower priority",
    "LowerOrNewerEqualPriority": "a job preempts the team's own jobs of lower priority, or of equal priority "
                                 "and started later",
    "Never": "the team's own jobs never preempt each other",
}
"""Kueue `withinClusterQueue`."""
QUEUEING = {
    "StrictFIFO": "StrictFIFO: its oldest workload that does not fit blocks its later ones, ordered by creation "
                  "time to the second (Kueue orders those created in the same second by UID)",
    "BestEffortFIFO": "BestEffortFIFO: its later workloads that fit are admitted while older ones wait",
}
"""Kueue `queueingStrategy`."""


def explain_team(fleet: Fleet, name: str) -> str:
    """Guaranteed, borrowable and lendable GPUs of one team per cluster and pool."""
    team = fleet.teams[name].config
    rows = []
    lenders: dict[str, list[TeamShare]] = {}
    for pool in pool_capacities(fleet):
        share = next((t for t in pool.teams if t.team == name), None)
        if share is None:
            continue
        lenders.setdefault(pool.cluster, []).extend(pool.teams)
        limit = "by usage" if pool.by_usage else "no limit" if share.borrowing_limit is None else \
            str(share.borrowing_limit)
        rows.append([pool.cluster, pool.pool, str(share.guaranteed), f"{share.borrowable} ({limit})",
                     str(share.lendable), f"{pool.allocated}/{pool.gpus}", f"{pool.utilisation:.0%}"])
    head = (f"team {name}: namespaces {', '.join(team.namespace_names)}; cohort {team.cohort or '(root)'}; "
            f"default priority {team.default_priority or '(none)'}")
    stops = {"Hold": "stopped (Hold: admits nothing new, admitted jobs finish)",
             "HoldAndDrain": "stopped (HoldAndDrain: admitted jobs evicted, nothing admitted)"}
    head += "".join(f"\nin {cluster}: queue {stops[policy]}" for cluster, policy in sorted(team.stop_policy.items())
                    if policy in stops)
    for cluster_name in sorted(team.quotas):
        cluster = fleet.clusters.get(cluster_name)
        mk = cluster.config.multikueue if cluster else None
        if mk is not None:
            workers = mk.workers_for(team.quotas)
            head += (f"\nin {cluster_name}: jobs are dispatched by MultiKueue to {', '.join(workers)} (the workers "
                     "where the team has quota; its quota here bounds what is dispatched at once)")
        if cluster is not None and mk is None:
            if not team.quotas[cluster_name]:
                head += (f"\nin {cluster_name}: CPU-only: no GPU quota, so a job asking for GPUs waits (Kueue "
                         "admits it nowhere)")
            head += f"\nin {cluster_name}: {unlabelled_jobs(cluster.config, team)}"
            head += f"\nin {cluster_name}: {max_execution(team, cluster.config)}"
            head += "".join(f"\nin {cluster_name}: {line}" for line in profile_lines(cluster.config, team))
        if cluster is None:
            continue
        head += "".join(f"\nin {cluster_name}: {line}" for line in shared_pool_lines(fleet, cluster_name, name))
        for check, pools in cluster.config.checks_for(name, cluster.config.queue_pools(team.quotas[cluster_name])):
            where = f"on {', '.join(pools)}" if pools is not None else "on every GPU pool"
            head += f"\nin {cluster_name}: jobs {where} wait for admission check {check.name} ({_check_effect(check)})"
    if not rows:
        return head + "\nno GPU quota in any cluster"
    preempt = ["\n".join(preemption(fleet, name, cluster, shares)) for cluster, shares in sorted(lenders.items())]
    return head + "\n\n" + table(["cluster", "pool", "guaranteed", "borrowable (limit)", "lendable",
                                  "pool allocated", "pool used"], rows) + "\n\n" + "\n\n".join(preempt)


def unlabelled_jobs(cfg: ClusterConfig, team: TeamConfig) -> str:
    """Where a team's jobs without a queue label, and its CPU-only jobs, run in one cluster."""
    head = "jobs without a queue label get LocalQueue default, on the team's queue (its quota)" + \
        shared_gpu_jobs(cfg, team)
    pool = cfg.cpu_pool
    if pool is None:
        return head + "; CPU-only jobs run on GPU nodes, in the CPU share of the team's GPU quota (no cpuPool)"
    if not cfg.cpu_flavor_for(cfg.queue_pools(team.quotas[cfg.name])):
        return (head + f"; CPU-only jobs run on its GPU pools, in the CPU share of its GPU quota: its queue is "
                f"topology-aware and cpuPool {pool.name} is not (it is when every GPU pool of the cluster declares "
                "topologyLevels)")
    limit = pool.limit_for(team.name)
    if team.never_preempted:
        if cpu_pool_held(cfg, team) is None:
            return (head + f"; CPU-only jobs run on GPU nodes, in the CPU share of its GPU quota: never preempted, "
                    f"it borrows nothing, and it holds none of cpuPool {pool.name} (the cluster sets no cpuPool "
                    f"limit for it; cpuPool.teamLimits.{team.name} would be held for it)")
        assert limit is not None
        return (head + f"; CPU-only jobs run on cpuPool {pool.name} first, up to the {limit.cpu} CPUs and "
                f"{limit.memory} of it held for the team, and on the CPU share of its GPU quota when those are used")
    cap = f"up to {limit.cpu} CPUs and {limit.memory} of it" if limit else "all of it while others leave it idle"
    fungibility = team.fungibility_in(cfg)
    if fungibility is not None and fungibility.when_can_borrow == "TryNextFlavor":
        return f"{head}; {cfg.cpu_pool_passed_over()}"
    full = "the team's limit is reached or the pool is full" if limit else "the pool is full"
    if not cfg.queue_pools(team.quotas[cfg.name]):  # its queue has the CPU pool's flavor only
        return head + f"; CPU-only jobs run on cpuPool {pool.name} ({cap}), and wait when {full}"
    return (head + f"; CPU-only jobs run on cpuPool {pool.name} first ({cap}), and on the CPU share of the "
            f"team's GPU quota only when {full}")


def profile_lines(cfg: ClusterConfig, team: TeamConfig) -> list[str]:
    """Where each of the team's job profiles for this cluster runs: a GPU pool, or (CPU-only) the CPU pool's
    flavor of its queue and how much of the pool it may hold there."""
    lines = []
    for profile in (p for p in team.job_profiles if p.cluster == cfg.name):
        pods = profile.nodes * (profile.replicas or 1)
        if profile.on_cpu_pool(cfg):
            assert cfg.cpu_pool is not None
            fits, why = cpu_profile_fit(cfg, team, pods, *cpu_pod_requests(cfg.cpu_pool, profile.cpu, profile.memory))
            lines.append(f"job profile {profile.name} ({profile.kind}) is CPU-only: {why}"
                         + ("" if fits else " (render refuses it)"))
            continue
        pool = cfg.pool(profile.pool)
        if pool is not None:
            lines.append(f"job profile {profile.name} ({profile.kind}) runs on pool {pool.name}: {pods} pods of "
                         f"{profile.gpus_in(pool)} GPU{'s' if profile.gpus_in(pool) != 1 else ''} each")
    return lines


def shared_gpu_jobs(cfg: ClusterConfig, team: TeamConfig) -> str:
    """Where its GPU jobs naming no queue, `default` or the team's go when the team has those GPUs here
    only in pools shared by usage (`config/routes.py`): relabelled onto its queue there where a
    MutatingAdmissionPolicy can, else pending for ever on its own queue, as Kueue says (kueue v0.19.2
    pkg/scheduler/flavorassigner/flavorassigner.go:1071)."""
    routes = shared_routes(cfg, team)
    if not routes:
        return ""
    gpus = " or ".join(r.resource for r in routes)
    many = len(routes) > 1
    queues = ", ".join(f"kueue.x-k8s.io/queue-name: {r.local_queue}" + (f" for {r.resource}" if many else "")
                       for r in routes)
    home = routes[0].namespace
    out = (f", which has no {gpus}: the team has them here only in pools shared by usage "
           f"({', '.join(r.pool for r in routes)})")
    ask = f"a job asking for {gpus} with no queue label, or labelled default or {team.name},"
    if relabelled(cfg, team):
        out += (f"; in namespace {home} {ask} is relabelled {queues} as it is created (a MutatingAdmissionPolicy) "
                "and waits there with the team's other jobs on the pool")
    stranded = stranded_namespaces(cfg, team)
    if stranded:
        who = f"in {', '.join(stranded)} such a job" if relabelled(cfg, team) else ask
        out += (f"; {who} stays pending for ever (Kueue: resource {gpus} unavailable in ClusterQueue "
                f"{team.name}): label it {queues} and submit it in namespace {home}")
        if not cfg.mutating_policies:
            out += f" (relabelling it needs Kubernetes 1.36, the cluster is {cfg.kubernetes_version})"
    return out


def shared_pool_lines(fleet: Fleet, cluster: str, team: str) -> list[str]:
    """How the team uses each pool of `cluster` shared by usage: its queue, weight and share, and the
    cost (kueue v0.19.2 pkg/cache/queue/cluster_queue.go:1094-1124 ranks waiting jobs by their
    LocalQueue's usage before priority and age; pkg/scheduler/preemption/common/ordering.go:42-66
    preempts those of the queue with more usage first)."""
    cfg = fleet.clusters[cluster].config
    afs = cfg.kueue.admission_fair_sharing
    tcfg = fleet.teams[team].config
    out = []
    for pool in cfg.shared_pools:
        if afs is None or pool not in tcfg.quotas[cluster]:
            continue
        split = usage_split(fleet, cluster, pool)
        others = ", ".join(f"{name} {w:g} ({share:.0%})" for name, w, share in split if name != team) or "nobody"
        mine = next((w, share) for name, w, share in split if name == team)
        ns = tcfg.namespace_names[0]
        elsewhere = tcfg.namespace_names[1:]
        within = afs.within_cluster_queue
        preempts = ("nothing is preempted there" if within == "Never" else
                    f"there a job may preempt {WITHIN_SHARED[within]}, those of the team that used most first; "
                    "each team's jobs reach at most its highest allowed class there: "
                    + ", ".join(f"{t} {top}" for t, top in shared_ceilings(fleet, cluster, pool)))
        out.append(f"pool {pool} is shared by usage (ClusterQueue {afs.cluster_queue(pool)}): no GPUs guaranteed "
                   f"there; jobs labelled kueue.x-k8s.io/queue-name: {afs.local_queue(team, pool)} in namespace {ns}"
                   + (f" (not {', '.join(elsewhere)})" if elsewhere else "")
                   + f" wait with those of {others}; Kueue admits first the team whose {afs.measure} (counted half "
                   f"after {afs.usage_half_life_time}) divided by its weight is least, before priority and age; "
                   f"its weight {mine[0]:g}, so while all keep the pool busy it gets {mine[1]:.0%} of it over time; "
                   + preempts)
    return out


def top_class(cfg: ClusterConfig, team: TeamConfig) -> str:
    """The highest class the team's workloads may run at in the cluster, with its value: its
    `allowedPriorities` (the team's priority policy caps every Workload there), else the cluster's top."""
    values = {p.name: p.value for p in cfg.priorities}
    classes = [p for p in (team.allowed_priorities or values) if p in values]
    if not classes:
        return "no class (priority 0)"
    top = max(classes, key=lambda p: (values[p], p))
    return f"{top} ({values[top]})"


def shared_ceilings(fleet: Fleet, cluster: str, pool: str) -> list[tuple[str, str]]:
    """(team, its top class) of every team in a pool shared by usage, by name: the priorities that can
    preempt there, where Kueue ranks preemptees by priority first."""
    cfg = fleet.clusters[cluster].config
    return [(name, top_class(cfg, fleet.teams[name].config)) for name, _, _ in usage_split(fleet, cluster, pool)]


def ladder_line(cfg: ClusterConfig) -> str:
    """What the cluster's ladder policy holds every team to (compile/namespace_policies.py)."""
    from generator.compile.namespace_policies import LADDER_POLICY, ladder

    _, floor = ladder(cfg)
    names = ", ".join(sorted(p.name for p in cfg.priorities)) or "none"
    return (f"- Kubernetes PriorityClasses cannot lift its workloads off the cluster's ladder: in its namespaces "
            f"pod templates may name only {names} as priorityClassName, and a pod or Kueue Workload runs only at "
            f"one of the ladder's values or at most {floor} (the API server refuses the rest: {LADDER_POLICY})")


WITHIN_SHARED = {"LowerPriority": "any team's jobs of lower priority"}
"""`withinClusterQueue` in a pool shared by usage, where it reaches every team's jobs."""


def _check_effect(check: AdmissionCheck) -> str:
    """What an admission check does to a job, in a few words."""
    request = check.provisioning_request
    if request is None:
        return f"set by controller {check.controller}"
    return PROVISIONING_CLASSES.get(request.class_name, f"ProvisioningRequest class {request.class_name}")


def default_priority_reach(cfg: ClusterConfig, team: TeamConfig) -> str:
    """The team's default priority class in one cluster, and which workloads get it."""
    if cfg.mutating_policies:
        return (f"{team.default_priority}, given to every workload created in its namespaces that names no class "
                "(label or pod priorityClassName)")
    return (f"{team.default_priority} on fleetgen's job templates only: other workloads naming no class run at "
            f"priority 0 (applying it to every workload needs Kubernetes 1.36, the cluster is "
            f"{cfg.kubernetes_version})")


def _label(node: str) -> str:
    return node.removeprefix("team:")


def _never_borrowing(fleet: Fleet, cluster: str, tree: dict[str, tuple[str | None, float]]) -> set[str]:
    """Nodes of the fair-sharing tree that never borrow: never-preempted teams (borrowingLimit 0 in every
    flavor of their queue) and cohorts with members, all of which never borrow (a cohort borrows only
    what its members use above the quota of its subtree). Kueue's fair sharing counts a node only by
    what it uses above its quota (kueue v0.19.2 pkg/cache/scheduler/fair_sharing.go:149-163: a node
    borrowing nothing has DRS 0), and a borrowingLimit of 0 keeps a queue within its quota
    (resource_node.go:106-122)."""
    teams = {f"team:{t.config.name}" for t in fleet.teams_in(cluster) if t.config.never_preempted}
    children: dict[str, list[str]] = {}
    for node, (parent, _) in tree.items():
        if parent is not None:
            children.setdefault(parent, []).append(node)
    order, stack = [], [n for n, (p, _) in tree.items() if p is None]
    while stack:  # iterative, as capacity._Tree: a deep cohort chain must not exhaust the recursion limit
        order.append(node := stack.pop())
        stack.extend(children.get(node, []))
    never: set[str] = set()
    for node in reversed(order):  # children before their cohort
        below = children.get(node, [])
        if node in teams or (not node.startswith("team:") and below and all(c in never for c in below)):
            never.add(node)
    return never


def weight_split(fleet: Fleet, team: str, cluster: str) -> list[str]:
    """The team's fair-sharing weight and, at each level of its cohort tree where it has siblings,
    the share of borrowed GPUs each sibling gets when all want more than their guarantees. Kueue
    admits and preempts to even out each queue's or cohort's borrowed share divided by its weight
    (kueue v0.19.2 pkg/cache/scheduler/fair_sharing.go:90-98,149-181), so under contention what the
    siblings borrow is split in proportion to weight; weight 0 ranks last for admission and first
    for preemption (lines 112-123). A sibling that never borrows takes no part (`_never_borrowing`)."""
    cfg = fleet.clusters[cluster].config
    tree = fair_tree(cfg, fleet.teams_in(cluster))
    never = _never_borrowing(fleet, cluster, tree)
    node = f"team:{team}"
    own = tree[node][1]
    if node in never:
        lines = [f"- fair sharing: weight {own:g}, which never counts: its queue never borrows, so it takes no "
                 "share of what its cohort's teams borrow"]
    else:
        lines = [f"- fair sharing: weight {own:g}" + (": it gets borrowed GPUs only while teams with a weight "
                                                     "leave them, and its borrowed work is preempted first"
                                                     if own == 0 else "")]
    while (parent := tree[node][0]) is not None:
        siblings = sorted(n for n, (p, _) in tree.items() if p == parent)
        borrowers = [n for n in siblings if n not in never]
        total = sum(tree[n][1] for n in borrowers)
        aside = [_label(n) for n in siblings if n in never]
        apart = f"; {', '.join(aside)} never borrow{'s' if len(aside) == 1 else ''} (policy.neverPreempted) " \
                f"and take{'s' if len(aside) == 1 else ''} none of it" if aside else ""
        if len(borrowers) > 1:
            parts = ", ".join(f"{_label(n)} {tree[n][1]:g} ({tree[n][1] / total:.0%})" if tree[n][1] else
                              f"{_label(n)} 0 (only what the others leave)" for n in borrowers)
            lines.append(f"- when they all want more than their guarantees, the children of cohort {parent} split "
                         f"what they borrow by weight: {parts}{apart}")
        elif borrowers and aside:
            lines.append(f"- of the children of cohort {parent}, {_label(borrowers[0])} alone borrows{apart}")
        node = parent
    return lines


def preemption(fleet: Fleet, team: str, cluster: str, shares: list[TeamShare]) -> list[str]:
    """Who can preempt whom, for one team in one cluster, as its queue's Kueue policy (the cluster's,
    or the team's own `policy`) and the other teams' decide it."""
    cfg = fleet.clusters[cluster].config
    tcfg = fleet.teams[team].config
    policy = tcfg.preemption_in(cfg)
    fair = fair_sharing(cfg, fleet.teams_in(cluster))
    others = {t.config.name: t.config.preemption_in(cfg).reclaim_within_cohort for t in fleet.teams_in(cluster)
              if t.config.name != team}
    values = {p.name: p.value for p in cfg.priorities}
    classes = tcfg.allowed_priorities or sorted(values, key=lambda p: -values[p])
    lines = [f"preemption in {cluster}:"]
    lines.append(f"- its priority classes: {', '.join(f'{p} ({values[p]})' for p in classes if p in values)}"
                 + (f"; default {default_priority_reach(cfg, tcfg)}" if tcfg.default_priority else ""))
    lines.append(ladder_line(cfg))
    if tcfg.queueing_in(cfg) != cfg.kueue.queueing_strategy:
        lines.append(f"- its queue is {QUEUEING[tcfg.queueing_in(cfg)]} (its own policy; the cluster's is "
                     f"{cfg.kueue.queueing_strategy})")
    if tcfg.never_preempted:
        lines += never_preempted(cfg, tcfg)
    lines.append(f"- when others borrow what it lends, it {RECLAIM[policy.reclaim_within_cohort]}")
    if policy.reclaim_within_cohort != "Never":
        lines.append(f"- {reclaim_deadline(fleet, team, cluster)}")
    for held in (h for h in held_back(fleet, cluster) if team in h.lenders):
        at = "" if held.policy == "Never" else f" at {held.priority} or above"
        lines.append(f"- its guaranteed {held.pool} GPUs are not guaranteed once lent: "
                     f"{', '.join(held.kept_from(team))} can borrow them{at} and keep them until their jobs end")
    bwc = policy.borrow_within_cohort
    reach = FAIR_REACH[policy.reclaim_within_cohort]
    theirs = set(others.values()) or {policy.reclaim_within_cohort}
    if tcfg.never_preempted:
        pass  # it never borrows
    elif fair and reach is None and theirs == {"Never"}:
        lines.append("- while borrowing, it preempts nobody else's workloads, nor do others preempt its borrowed "
                     "work: under fair sharing Kueue still takes only what reclaimWithinCohort allows, and it is "
                     "Never")
    elif fair:
        mine = f"({reach})" if reach else "(none: its reclaimWithinCohort is Never)"
        if len(theirs) == 1:
            (other,) = theirs
            them = f"({FAIR_REACH[other] or 'none'}, as reclaimWithinCohort {other} allows)"
        else:
            them = "(as each one's reclaimWithinCohort allows)"
        lines.append(f"- while borrowing, fair sharing decides: it may preempt the borrowed workloads of teams above "
                     f"their weighted share {mine}, and teams below theirs its borrowed work {them}")
    elif bwc is None or bwc.policy == "Never":
        lines.append("- while borrowing, it preempts nobody else's workloads")
    else:
        cap = "" if bwc.max_priority_threshold is None else f", at most priority {bwc.max_priority_threshold}"
        lines.append(f"- while borrowing, it may preempt other teams' workloads of lower priority{cap}")
    lenders = sorted({s.team for s in shares if s.team != team and s.lendable > 0 and others.get(s.team) != "Never"})
    if lenders and not tcfg.never_preempted:
        lines.append(f"- what it borrows can be taken back by preemption by: {', '.join(lenders)}")
    lines.append(f"- {WITHIN[policy.within_cluster_queue]}")
    if fair:
        lines += weight_split(fleet, team, cluster)
    return lines


def reclaim_deadline(fleet: Fleet, team: str, cluster: str) -> str:
    """How long a reclaim takes: Kueue stops the preempted job at once and releases its quota once the
    job reports no active pods (kueue v0.19.2 pkg/controller/jobframework/reconciler.go:580-616), but
    its pods hold their nodes' GPUs until they have stopped, and the API server refuses any pod in a
    team namespace with a longer grace period than its team's cap (compile/deadlines.py)."""
    cfg = fleet.clusters[cluster].config
    own = fleet.teams[team].config.grace_cap_in(cfg)
    others = [t.config.grace_cap_in(cfg) for t in fleet.teams_in(cluster) if t.config.name != team]
    longest = max(others, default=cfg.kueue.max_termination_grace_period_seconds)
    mine = "" if own == longest else f"; its own pods get at most {own} s"
    return (f"a reclaim takes at most {longest} s plus Kueue's and the scheduler's reaction: Kueue stops the "
            "preempted job at once, its pods hold their GPUs until they have stopped, and no pod in a team namespace "
            f"may take longer than {longest} s to stop (kueue.maxTerminationGracePeriodSeconds "
            f"{cfg.kueue.max_termination_grace_period_seconds}, "
            f"a team's policy may shorten its own){mine}")


def max_execution(team: TeamConfig, cfg: ClusterConfig) -> str:
    """Where the team's maxExecutionTime reaches in one cluster, and what Kueue does then."""
    if team.max_execution_time is None:
        return "batch jobs run as long as they need (no maxExecutionTime; a job profile may set its own)"
    reach = "every batch job created in its namespaces" if cfg.mutating_policies else \
        (f"jobs labelled kueue.x-k8s.io/max-exec-time-seconds only (labelling every job needs Kubernetes 1.36, the "
         f"cluster is {cfg.kubernetes_version}); a longer label is refused")
    return (f"batch jobs run at most {team.max_execution_time} once admitted ({reach}): Kueue then evicts and "
            "deactivates the job (Evicted: DeactivatedDueToMaximumExecutionTimeExceeded); servers are not limited")
def never_preempted(cfg: ClusterConfig, team: TeamConfig) -> list[str]:
    """What `policy.neverPreempted` guarantees in one cluster and what it costs. Kueue preempts another
    queue's workloads only while that queue uses more than its nominal quota of a resource the
    preemptor needs (kueue v0.19.2 pkg/scheduler/preemption/preemption.go:636-663, classical/
    hierarchical_preemption.go:198-205), its own only under withinClusterQueue; borrowingLimit 0 in
    every flavor keeps the queue within nominal (pkg/cache/scheduler/resource_node.go:106-122)."""
    own = cfg.queue_pools(team.quotas[cfg.name])
    pools = [p.name for p in cfg.node_pools if p.name in own]
    cpu = cfg.cpu_pool if cfg.cpu_pool is not None and cfg.cpu_flavor_for(own) else None
    flavors = pools + ([f"cpuPool {cpu.name}"] if cpu else [])
    held = [f"{team.quotas[cfg.name][p].gpus} {p} GPUs" for p in pools]
    if cpu is not None:
        limit = cpu_pool_held(cfg, team)
        held.append(f"of cpuPool {cpu.name} {limit.cpu} CPUs and {limit.memory} (its cpuPool limit, held for it; "
                    "others may borrow them while it leaves them idle)" if limit else
                    f"none of cpuPool {cpu.name} (no cpuPool limit for it here: its CPU-only jobs use the CPU share "
                    "of its GPU quota)")
    return [f"- its workloads are never preempted, by any team or by its own: its queue never borrows "
            f"(borrowingLimit 0 in every flavor: {', '.join(flavors) or 'none'}), Kueue preempts only the workloads "
            "of queues using more than their own quota, and its own jobs never preempt each other "
            "(withinClusterQueue Never)",
            f"- the cost: it never borrows idle GPUs or CPUs, and runs only on what it holds: {', '.join(held)}",
            "- it is still evicted without preemption: a failed node, waitForPodsReady, a maximum execution time, "
            "its queue stopped with HoldAndDrain, or its quota lowered below what it runs"]


def explain_cluster(fleet: Fleet, name: str) -> str:
    """Each pool's capacity, allocation and the teams that hold it."""
    cfg = fleet.clusters[name].config
    parts = [f"cluster {name}: Kubernetes {cfg.kubernetes_version}, Kueue {cfg.kueue.version}, "
             f"overcommit {cfg.overcommit:g}"]
    afs = cfg.kueue.admission_fair_sharing
    for pool in (p for p in pool_capacities(fleet) if p.cluster == name):
        if pool.by_usage and afs is not None:
            parts.append(f"\npool {pool.pool} ({pool.product}): {pool.gpus} GPUs, shared by usage in ClusterQueue "
                         f"{afs.cluster_queue(pool.pool)}: no guarantees; waiting jobs go first for the team whose "
                         f"{afs.measure} (counted half after {afs.usage_half_life_time}) divided by its weight is "
                         "least")
            rows = [[team, f"{w:g}", f"{share:.0%}", afs.local_queue(team, pool.pool)]
                    for team, w, share in usage_split(fleet, name, pool.pool)]
            parts.append(table(["team", "weight", "share over time", "queue"], rows) if rows else "no team uses it")
            continue
        rows = [[t.team, str(t.guaranteed), str(t.borrowable), str(t.lendable)] for t in pool.teams]
        parts.append(f"\npool {pool.pool} ({pool.product}): {pool.gpus} GPUs, quota limit {pool.limit}, "
                     f"allocated {pool.allocated} ({pool.utilisation:.0%}), free {pool.limit - pool.allocated}"
                     + (f", {pool.shared} lent by the root cohort" if pool.shared
                        else ", held by no quota (kueue.shareUnallocated: false)"
                        if pool.gpus > pool.allocated else ""))
        if pool.cohorts:
            parts.append("held by cohorts for their teams: " + ", ".join(f"{c.cohort} {c.gpus}" for c in pool.cohorts))
        parts.append(table(["team", "guaranteed", "borrowable", "lendable"], rows) if rows else "no team quotas")
    return "\n".join(parts)
