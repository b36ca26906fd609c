"""GPU capacity per cluster and pool: guaranteed, borrowable and lendable GPUs of every team.

One model of what quotas mean, used by `fleetgen explain` and the diff's capacity table.
All teams of a cluster sit in one cohort tree without cohort limits, so a team may borrow what
any other team lends, and (with the cluster's `kueue.shareUnallocated`, the default) the pool's
GPUs no team holds, which the root cohort's quota carries, up to its own borrowingLimit.
"""

from __future__ import annotations

from dataclasses import dataclass

from generator.config.fleet import Fleet


@dataclass(frozen=True)
class TeamShare:
    """One team's GPUs in one pool."""

    team: str
    guaranteed: int
    borrowable: int
    lendable: int
    borrowing_limit: int | None

    @property
    def most(self) -> int:
        """The most GPUs the team can ever hold in the pool: its guarantee plus what it may borrow."""
        return self.guaranteed + self.borrowable


@dataclass(frozen=True)
class PoolCapacity:
    """A pool's capacity and how its teams share it."""

    cluster: str
    pool: str
    product: str
    gpus: int
    limit: int
    teams: tuple[TeamShare, ...]
    shared: int = 0
    """GPUs no team holds, lent by the root cohort (0 when the cluster does not share them)."""

    @property
    def allocated(self) -> int:
        return sum(t.guaranteed for t in self.teams)

    @property
    def utilisation(self) -> float:
        return self.allocated / self.gpus if self.gpus else 0.0


def pool_capacities(fleet: Fleet) -> list[PoolCapacity]:
    """Every pool of every cluster, sorted by cluster then pool order."""
    out = []
    for cname in sorted(fleet.clusters):
        cfg = fleet.clusters[cname].config
        for pool in cfg.node_pools:
            quotas = {t.config.name: t.config.quotas[cname][pool.name]
                      for t in fleet.teams_in(cname) if pool.name in t.config.quotas[cname]}
            lendable = {n: (q.lending_limit if q.lending_limit is not None else q.gpus) for n, q in quotas.items()}
            shared = max(0, pool.gpus - sum(q.gpus for q in quotas.values())) if cfg.kueue.share_unallocated else 0
            total_lend = sum(lendable.values()) + shared
            shares = []
            for name, q in sorted(quotas.items()):
                others = total_lend - lendable[name]
                borrowable = others if q.borrowing_limit is None else min(q.borrowing_limit, others)
                shares.append(TeamShare(name, q.gpus, borrowable, lendable[name], q.borrowing_limit))
            out.append(PoolCapacity(cname, pool.name, pool.gpu.product, pool.gpus,
                                    int(pool.gpus * cfg.overcommit), tuple(shares), shared))
    return out


def team_shares(fleet: Fleet) -> dict[tuple[str, str, str], TeamShare]:
    """(cluster, pool, team) -> the team's share, for every team with a quota in the pool."""
    return {(p.cluster, p.pool, t.team): t for p in pool_capacities(fleet) for t in p.teams}


def never_admitted(wanted: int, team: str, where: str, share: TeamShare | None) -> str | None:
    """Why a job of `wanted` GPUs can never be admitted for `team` in `where` (cluster/pool), if so."""
    guaranteed, borrowable = (share.guaranteed, share.borrowable) if share else (0, 0)
    if wanted <= guaranteed + borrowable:
        return None
    return (f"the job needs {wanted} GPUs but team {team!r} can have at most {guaranteed + borrowable} in {where} "
            f"({guaranteed} guaranteed + {borrowable} borrowable): Kueue would never admit it")
