"""Whether a team's guaranteed GPUs come back to it once lent.

Kueue lends a team's idle quota to others in its cohort tree and takes it back by preemption only
as the lending queue's `reclaimWithinCohort` (the cluster's, or the team's own `policy`)
allows: `Any` from any borrower, `LowerPriority` only
from borrowers' workloads of lower priority, `Never` not at all (kueue v0.19.2
pkg/scheduler/preemption/preemption.go:636-646, the same filter under fair sharing). A borrower
running at the lender's priority or above then keeps the GPUs until its jobs end: the guarantee
holds only against lower priorities, or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from generator.capacity import pool_capacities
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Fleet
from generator.config.team import TeamConfig


@dataclass(frozen=True)
class HeldBack:
    """Guaranteed GPUs in `pool` that `lenders` lend (their jobs run at `priority`, their queues take
    back under `policy`) and `borrowers` can keep once they borrow them."""

    pool: str
    policy: str
    priority: str
    lenders: tuple[str, ...]
    borrowers: tuple[str, ...]

    def kept_from(self, lender: str) -> tuple[str, ...]:
        """The borrowers that can keep `lender`'s GPUs (not itself)."""
        return tuple(b for b in self.borrowers if b != lender)


def classes(cfg: ClusterConfig, team: TeamConfig) -> dict[str, int]:
    """The priority classes a team's jobs may use in a cluster, with their values."""
    values = {p.name: p.value for p in cfg.priorities}
    allowed = team.allowed_priorities or list(values)
    return {p: values[p] for p in allowed if p in values}


def usual_class(cfg: ClusterConfig, team: TeamConfig) -> str | None:
    """The class a team's jobs run at when they name none: its defaultPriority, else its highest."""
    mine = classes(cfg, team)
    if team.default_priority in mine:
        return team.default_priority
    return max(mine, key=lambda p: (mine[p], p)) if mine else None


def held_back(fleet: Fleet, cluster: str) -> list[HeldBack]:
    """Per pool, lenders grouped by policy and usual class, with the teams that can borrow their
    guaranteed GPUs and keep them: any borrower under `Never`; under `LowerPriority` those whose
    highest class is at or above the lenders' usual one. Nothing under `Any`, nor for quota with
    `lendingLimit: 0`. Linear in the teams: one sort of the borrowers per pool, one pass per group."""
    cfg = fleet.clusters[cluster].config
    teams = {t.config.name: t.config for t in fleet.teams_in(cluster)}
    policies = {name: t.preemption_in(cfg).reclaim_within_cohort for name, t in teams.items()}
    if all(policy == "Any" for policy in policies.values()):
        return []
    top = {name: max(classes(cfg, t).values(), default=0) for name, t in teams.items()}
    out = []
    for pool in pool_capacities(fleet, cluster):
        borrowers = sorted((s.team for s in pool.teams if s.borrowable > 0), key=lambda b: (-top[b], b))
        groups: dict[tuple[str, str, int], list[str]] = {}
        for share in pool.teams:
            usual, policy = usual_class(cfg, teams[share.team]), policies[share.team]
            if share.lendable > 0 and usual is not None and policy != "Any":
                groups.setdefault((policy, usual, classes(cfg, teams[share.team])[usual]), []).append(share.team)
        for (rule, usual, value), lenders in sorted(groups.items(), key=lambda g: (-g[0][2], g[0][0])):
            keep = borrowers if rule == "Never" else [b for b in borrowers if top[b] >= value]
            kept = [lender for lender in lenders if any(b != lender for b in keep)]
            if kept:
                out.append(HeldBack(pool.pool, rule, usual, tuple(sorted(kept)), tuple(sorted(keep))))
    return out
