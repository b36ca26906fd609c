"""GPU capacity per cluster and pool: guaranteed, borrowable and lendable GPUs of every team.

One model of what quotas mean, used by `fleetgen explain` and the diff's capacity table. The
teams of a cluster sit in one cohort tree (the root named after the cluster, declared cohorts,
cohorts teams name); a team may borrow, up to its borrowingLimit, what its cohort holds, what the
other members lend, and what the cohort may borrow from above (its own borrowingLimit), walking
up to the root, whose quota is the pool's GPUs nobody holds (`kueue.shareUnallocated`).
"""

from __future__ import annotations

from dataclasses import dataclass

from generator.config.fleet import Fleet, held_gpus


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
class CohortShare:
    """GPUs a cohort holds in one pool for its teams."""

    cohort: str
    gpus: int


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
    """GPUs no team or cohort holds, lent by the root cohort (0 when the cluster does not share them)."""
    cohorts: tuple[CohortShare, ...] = ()
    """Cohorts holding GPUs of the pool themselves (`cohorts[].quotas`)."""
    by_usage: bool = False
    """Shared by recent usage (`kueue.admissionFairSharing`): no team holds any of it, each may have
    all of it while the others leave it idle."""

    @property
    def allocated(self) -> int:
        """GPUs held by quotas: the teams' and the cohorts' own."""
        return sum(t.guaranteed for t in self.teams) + sum(c.gpus for c in self.cohorts)

    @property
    def utilisation(self) -> float:
        return self.allocated / self.gpus if self.gpus else 0.0


_NO_LIMIT = 1 << 62


@dataclass(frozen=True)
class _Node:
    """A queue or cohort in one pool: what it holds, and its limits towards its parent."""

    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    parent: str | None


def _tree(fleet: Fleet, cname: str, pool: str) -> dict[str, _Node]:
    """The cluster's cohort tree in one pool: the root cohort, declared and implied cohorts, and a
    node per team queue ("team:<name>") with a quota there."""
    cfg = fleet.clusters[cname].config
    shared = 0
    pool_cfg = cfg.pool(pool)
    if cfg.kueue.share_unallocated and pool_cfg is not None:
        shared = max(0, pool_cfg.gpus - held_gpus(cfg, fleet.teams_in(cname), pool))
    nodes = {cfg.name: _Node(shared, None, None, None)}
    for c in cfg.cohorts:
        held = c.quotas.get(pool)
        nodes[c.name] = _Node(held.gpus if held else 0, held.borrowing_limit if held else None,
                              held.lending_limit if held else None, c.parent or cfg.name)
    for t in fleet.teams_in(cname):
        if t.config.cohort and t.config.cohort not in nodes:
            nodes[t.config.cohort] = _Node(0, None, None, cfg.name)
        q = t.config.quotas[cname].get(pool)
        if q is not None:
            lend = q.lending_limit if q.lending_limit is not None else q.gpus
            nodes[f"team:{t.config.name}"] = _Node(q.gpus, q.borrowing_limit, lend, t.config.cohort or cfg.name)
    for name, node in list(nodes.items()):  # an unknown parent or a cycle (refused by the checks): the root
        seen, up = {name}, node.parent
        while up is not None and up in nodes and up not in seen:
            seen.add(up)
            up = nodes[up].parent
        if up is not None:
            nodes[name] = _Node(node.nominal, node.borrowing_limit, node.lending_limit, cfg.name)
    return nodes


class _Tree:
    """A pool's cohort tree with each node's children listed once, and what every subtree lends
    computed once: one walk, linear in the teams (a scan of every node per node was quadratic)."""

    def __init__(self, nodes: dict[str, _Node]) -> None:
        self.nodes = nodes
        self.children: dict[str, list[str]] = {name: [] for name in nodes}
        for name, node in nodes.items():
            if node.parent is not None:
                self.children[node.parent].append(name)
        self._lends: dict[str, int] = {}
        self._offers: dict[str, int] = {}
        self._lent_by_children: dict[str, int] = {}
        for name in self._bottom_up():
            node = nodes[name]
            lent = sum(self._lends[child] for child in self.children[name])
            self._lent_by_children[name] = lent
            total = node.nominal + lent
            self._lends[name] = min(total, node.lending_limit if node.lending_limit is not None else _NO_LIMIT)

    def _bottom_up(self) -> list[str]:
        roots = [name for name, node in self.nodes.items() if node.parent is None]
        order: list[str] = []
        stack = list(roots)
        while stack:  # iterative: a deep cohort chain must not exhaust Python's recursion limit
            name = stack.pop()
            order.append(name)
            stack.extend(self.children[name])
        return order[::-1]

    def offers(self, name: str, to: str) -> int:
        """What cohort `name` can give its child `to` while everything else is idle (Kueue's
        hierarchical cohorts: own quota, siblings' lending, and from above up to the borrowing limit)."""
        node = self.nodes[name]
        total = node.nominal + self._lent_by_children[name] - self._lends[to]
        if node.parent is not None:
            limit = node.borrowing_limit if node.borrowing_limit is not None else _NO_LIMIT
            total += min(limit, self._from_above(name))
        return total

    def _from_above(self, name: str) -> int:
        """What cohort `name`'s parent offers it (memoised: shared by every team below `name`)."""
        if name not in self._offers:
            chain = []
            up = name
            while up not in self._offers and self.nodes[up].parent is not None:
                chain.append(up)
                up = self.nodes[up].parent  # type: ignore[assignment]
            for child in reversed(chain):  # from the top down, each step reusing the one above
                self._offers[child] = self.offers(self.nodes[child].parent, child)  # type: ignore[arg-type]
        return self._offers[name]


def pool_capacities(fleet: Fleet, cluster: str | None = None) -> list[PoolCapacity]:
    """Every pool of every cluster (or of one), sorted by cluster then pool order."""
    out = []
    for cname in sorted(fleet.clusters) if cluster is None else [cluster]:
        cfg = fleet.clusters[cname].config
        for pool in cfg.node_pools:
            if pool.name in cfg.shared_pools:  # one queue holds it all: no guarantee, all of it borrowable
                users = sorted(t.config.name for t in fleet.teams_in(cname) if pool.name in t.config.quotas[cname])
                out.append(PoolCapacity(cname, pool.name, pool.gpu.product, pool.gpus, int(pool.gpus * cfg.overcommit),
                                        tuple(TeamShare(u, 0, pool.gpus, 0, None) for u in users), by_usage=True))
                continue
            nodes = _tree(fleet, cname, pool.name)
            tree = _Tree(nodes)
            shares = []
            for key, node in sorted((k, n) for k, n in nodes.items() if k.startswith("team:")):
                assert node.parent is not None
                offered = tree.offers(node.parent, key)
                limit = node.borrowing_limit if node.borrowing_limit is not None else _NO_LIMIT
                shares.append(TeamShare(key.removeprefix("team:"), node.nominal, min(limit, offered),
                                        node.lending_limit or 0, node.borrowing_limit))
            cohorts = tuple(CohortShare(c.name, c.quotas[pool.name].gpus) for c in cfg.cohorts if pool.name in c.quotas)
            out.append(PoolCapacity(cname, pool.name, pool.gpu.product, pool.gpus,
                                    int(pool.gpus * cfg.overcommit), tuple(shares), nodes[cname].nominal, cohorts))
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
