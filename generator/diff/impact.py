"""What a change means for GPUs: each pool's size and every team's share of it, before and after
(what is dangerous about a change is diff/risks.py)."""

from __future__ import annotations

from dataclasses import dataclass

from generator.capacity import PoolCapacity, TeamShare, pool_capacities
from generator.config.fleet import Fleet

NO_SHARE = TeamShare("", 0, 0, 0, None)
"""A team absent from a pool on one side."""


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
        b, a = self.before or NO_SHARE, self.after or NO_SHARE
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
