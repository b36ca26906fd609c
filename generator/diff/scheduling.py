"""Risks a team file causes outside its own folder: how the other teams of a cluster are scheduled.

The object diff sees one ClusterQueue's weight move; it cannot see that the move matters only
against the cluster's other weights, that a team's first weight turns Kueue's fair sharing on for
every team, or that joining an undeclared cohort makes the newcomer share idle GPUs with its
members and strips the weight the cohort carried for a lone member. These rules compare the two
fleets (both sides loaded), per cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from generator import quantity
from generator.compile.quota import cpu_pool_held, cpu_pool_resources
from generator.config.cluster import CpuLimit
from generator.config.fleet import Fleet, fair_sharing, usage_split
from generator.diff.risks import WEIGHT_JUMP, Risk, weight_cause, weight_jumped

DEFAULT_WEIGHT = 1.0
"""Kueue's weight for a queue or cohort that sets none."""


def _weights(fleet: Fleet, cluster: str) -> dict[str, float]:
    """Every queue's and declared cohort's fair-sharing weight in `cluster` ("team:x", "cohort:y")."""
    cfg = fleet.clusters[cluster].config
    out = {f"team:{t.config.name}": t.config.fair_sharing_weight if t.config.fair_sharing_weight is not None
           else DEFAULT_WEIGHT for t in fleet.teams_in(cluster)}
    out.update({f"cohort:{c.name}": c.fair_sharing_weight if c.fair_sharing_weight is not None else DEFAULT_WEIGHT
                for c in cfg.cohorts})
    return out


def _implicit_cohorts(fleet: Fleet, cluster: str) -> dict[str, set[str]]:
    """Cohorts teams name that the cluster file does not declare -> their member teams."""
    declared = {c.name for c in fleet.clusters[cluster].config.cohorts}
    out: dict[str, set[str]] = {}
    for team in fleet.teams_in(cluster):
        cohort = team.config.cohort
        if cohort and cohort not in declared:
            out.setdefault(cohort, set()).add(team.config.name)
    return out


def _number(value: float) -> str:
    return f"{Decimal(str(value)).normalize():f}"


def _fair_sharing_switch(before: Fleet, after: Fleet, cluster: str) -> Iterator[Risk]:
    on_before = fair_sharing(before.clusters[cluster].config, before.teams_in(cluster))
    on_after = fair_sharing(after.clusters[cluster].config, after.teams_in(cluster))
    if on_before == on_after:
        return
    cfg = after.clusters[cluster].config
    if cfg.kueue.fair_sharing is not None:  # the cluster file says so itself: the platform's own change
        return
    weighted = sorted(t.config.name for t in (after if on_after else before).teams_in(cluster)
                      if t.config.fair_sharing_weight is not None)
    cause = f"team {', '.join(weighted)} {'sets' if on_after else 'no longer sets'} a fairSharingWeight"
    effect = ("Kueue's fair sharing turns on: borrowing and preemption between every team follow weights and "
              "usage instead of borrowWithinCohort" if on_after else
              "Kueue's fair sharing turns off: every team's preemption falls back to borrowWithinCohort")
    yield Risk("high", "fair-sharing-switched", f"{cause}, so {effect} (set kueue.fairSharing in the cluster file "
               "to decide this for the whole cluster)", (cluster,))


def _weights_against_others(before: Fleet, after: Fleet, cluster: str) -> Iterator[Risk]:
    old, new = _weights(before, cluster) if cluster in before.clusters else {}, _weights(after, cluster)
    total = sum(new.values())
    for key in sorted(new):
        if key in old and old[key] == new[key]:
            continue
        kind, name = key.split(":", 1)
        others = [w for k, w in new.items() if k != key]
        largest = max(others, default=DEFAULT_WEIGHT)
        share = f"{new[key] / total:.0%} of the cluster's total weight" if total else "the whole weight"
        was = f"{_number(old[key])} → " if key in old else "new, "
        what = f"{kind} {name} fair-sharing weight {was}{_number(new[key])} ({share})"
        if largest and new[key] > WEIGHT_JUMP * largest:
            yield Risk("high", "fair-sharing-weight-outsized", f"{what}: more than {WEIGHT_JUMP:g}x the largest "
                       f"other weight ({_number(largest)}), so it takes that much more of the idle GPUs from every "
                       "other team", (cluster,), weight_cause(kind, name))
        elif key in old and not weight_jumped(Decimal(str(old[key])), Decimal(str(new[key]))):
            # (a jump is already high: impact._weight_jump)
            yield Risk("medium", "fair-sharing-weight-changed", f"{what}: every other team's share of idle GPUs moves",
                       (cluster,), weight_cause(kind, name))


def _implicit_membership(before: Fleet, after: Fleet, cluster: str) -> Iterator[Risk]:
    old = _implicit_cohorts(before, cluster) if cluster in before.clusters else {}
    new = _implicit_cohorts(after, cluster)
    weights = {t.config.name: t.config.fair_sharing_weight for t in before.teams_in(cluster)} \
        if cluster in before.clusters else {}
    for cohort in sorted(set(old) | set(new)):
        was, now = old.get(cohort, set()), new.get(cohort, set())
        joined, left = sorted(now - was), sorted(was - now)
        stay = sorted(was & now)
        if not stay or not (joined or left):
            continue  # a new cohort, or nobody else in it: no other team's scheduling changes
        moves = "; ".join(x for x in (f"{', '.join(joined)} joins" if joined else "",
                                      f"{', '.join(left)} leaves" if left else "") if x)
        detail = (f"undeclared cohort {cohort!r}: {moves}; {', '.join(stay)} now lend and borrow idle "
                  f"GPUs with {', '.join(sorted(now)) if now else 'nobody'}")
        lone = stay[0] if len(was) == 1 else None
        if lone and weights.get(lone) is not None and len(now) > 1:
            detail += (f", and the cohort no longer carries {lone}'s weight {_number(weights[lone] or 0)} "
                       "(Kueue weighs a cohort with one member by that member's weight)")
        yield Risk("medium", "implicit-cohort-changed", detail + " (declare the cohort in the cluster file to own "
                   "who joins it)", (cluster,))


def _shared_pools(before: Fleet, after: Fleet, cluster: str) -> Iterator[Risk]:
    """A pool starts or stops being shared by usage; who shares one, and with what weight, changes."""
    old_cfg, new_cfg = before.clusters[cluster].config, after.clusters[cluster].config
    old_pools, new_pools = set(old_cfg.shared_pools), set(new_cfg.shared_pools)
    for pool in sorted(new_pools - old_pools):
        if old_cfg.pool(pool) is None:
            continue  # a new pool: nothing held in it before
        held = sorted(f"{t.config.name} {t.config.quotas[cluster][pool].gpus}" for t in before.teams_in(cluster)
                      if pool in t.config.quotas[cluster] and t.config.quotas[cluster][pool].gpus)
        lost = f": {', '.join(held)} guaranteed GPUs go" if held else ""
        yield Risk("high", "pool-shared-by-usage", f"pool {pool} becomes shared by usage{lost}; no team holds any of "
                   "it, and waiting jobs go first for the team that used least recently", (cluster,))
    for pool in sorted(old_pools - new_pools):
        if new_cfg.pool(pool) is not None:
            yield Risk("medium", "pool-shared-by-usage", f"pool {pool} is no longer shared by usage: only teams with "
                       "quota there may use it, and jobs no longer wait in order of their team's recent usage",
                       (cluster,))
    for pool in sorted(old_pools & new_pools):
        old = {team: (weight, share) for team, weight, share in usage_split(before, cluster, pool)}
        new = {team: (weight, share) for team, weight, share in usage_split(after, cluster, pool)}
        teams = [t for t in sorted(set(old) | set(new))
                 if round(old.get(t, (0, 0.0))[1], 4) != round(new.get(t, (0, 0.0))[1], 4)]
        if teams:
            yield _usage_share(cluster, pool, old, new, teams)


def _usage_share(cluster: str, pool: str, old: dict[str, tuple[float, float]], new: dict[str, tuple[float, float]],
                 teams: list[str]) -> Risk:
    """One line for a shared pool whose shares move (`old`, `new`: team -> (usageWeight, share)): high
    where a team's usageWeight moves more than WEIGHT_JUMP times, or is more than that times the
    largest other one (as a fair-sharing weight)."""
    by_weight = sorted(((weight, team) for team, (weight, _) in new.items()), reverse=True)
    jumped = []
    for team in (t for t in teams if t in new):
        weight = new[team][0]
        # the largest other weight: the top one, or the second when the team is the top
        largest = next((w for w, t in by_weight[:2] if t != team), 0.0)
        moved = team in old and weight_jumped(Decimal(str(old[team][0])), Decimal(str(weight)))
        if moved or (largest and weight > WEIGHT_JUMP * largest):
            jumped.append(team)
    shares = ", ".join(f"{t} {old.get(t, (0, 0.0))[1]:.0%} → {new.get(t, (0, 0.0))[1]:.0%}" for t in teams)
    what = f"pool {pool}, shared by usage: each team's share over time moves ({shares})"
    if jumped:
        what += f"; {', '.join(jumped)}'s usageWeight moves more than {WEIGHT_JUMP:g}x or is more than that " \
                "times the others'"
    return Risk("high" if jumped else "medium", "usage-share-changed", what, (cluster,))


def _cpu_pool_holders(fleet: Fleet, cluster: str) -> dict[str, CpuLimit]:
    """Teams holding part of the cluster's CPU pool as their own quota (`cpu_pool_held`) -> how much."""
    cfg = fleet.clusters[cluster].config
    return {t.config.name: held for t in fleet.teams_in(cluster)
            if (held := cpu_pool_held(cfg, t.config)) is not None}


def _values(limit: CpuLimit | None) -> tuple[Decimal, Decimal]:
    """(cpu, memory) of a CPU pool holding; none held is (0, 0)."""
    return (quantity.value_of(limit.cpu), quantity.value_of(limit.memory)) if limit else (Decimal(0), Decimal(0))


def _amounts(cpu: Decimal, memory: Decimal, fmt: quantity.Format) -> str:
    return f"{quantity.canonical(cpu)} CPUs and {quantity.canonical(memory, fmt)}"


def _cpu_pool_held(before: Fleet, after: Fleet, cluster: str) -> Iterator[Risk]:
    """A team comes to hold (more of) the CPU pool as its own quota (`policy.neverPreempted`): the root
    cohort lends the other teams that much less of it (compile/kueue.py `cohorts`). What a queue holds
    and leaves idle Kueue still lends to its cohort (no lendingLimit: kueue v0.19.2
    pkg/cache/scheduler/resource_node.go:67-72, localQuota 0), so the others lose it while the team uses
    it, and work of theirs borrowing it is what a reclaim by the team preempts."""
    new_cfg, old_cfg = after.clusters[cluster].config, before.clusters[cluster].config
    pool = new_cfg.cpu_pool
    if pool is None or old_cfg.cpu_pool is None:
        return  # the pool arrives or goes: the platform's change, no team's
    old, new = _cpu_pool_holders(before, cluster), _cpu_pool_holders(after, cluster)
    _, fmt = quantity.parse(pool.memory_per_node)
    lent = [(quantity.value_of(b), quantity.value_of(a)) for b, a in zip(
        cpu_pool_resources(old_cfg.cpu_pool, list(old.values())), cpu_pool_resources(pool, list(new.values())),
        strict=True)]
    lends = (f"{quantity.canonical(lent[0][0])} → {quantity.canonical(lent[0][1])} CPUs, "
             f"{quantity.canonical(lent[1][0], fmt)} → {quantity.canonical(lent[1][1], fmt)}")
    for team in sorted(new):
        now, was = _values(new[team]), _values(old.get(team))
        more = (max(Decimal(0), now[0] - was[0]), max(Decimal(0), now[1] - was[1]))
        if not any(more):
            continue
        since = f" (was {_amounts(*was, fmt)})" if team in old else ""
        what = (f"team {team} now holds {_amounts(*now, fmt)}{since} of cpuPool {pool.name} (policy.neverPreempted): "
                f"the other teams can borrow {_amounts(*more, fmt)} less of it while {team} uses it (the root cohort "
                f"{cluster} lends {lends})")
        reclaim = after.teams[team].config.preemption_in(new_cfg).reclaim_within_cohort
        if reclaim != "Never":
            what += (f", and their work borrowing it may be preempted when {team} takes it back "
                     f"(reclaimWithinCohort {reclaim})")
        yield Risk("medium", "cpu-pool-held", what, (cluster,))


def scheduling_risks(before: Fleet | None, after: Fleet | None) -> list[Risk]:
    """Risks for other teams' scheduling, per cluster present on both sides (or new on the head)."""
    if before is None or after is None:
        return []
    out: list[Risk] = []
    for cluster in sorted(after.clusters):
        if cluster in before.clusters:
            out.extend(_fair_sharing_switch(before, after, cluster))
            out.extend(_implicit_membership(before, after, cluster))
            out.extend(_shared_pools(before, after, cluster))
            out.extend(_cpu_pool_held(before, after, cluster))
        out.extend(_weights_against_others(before, after, cluster))
    return out
