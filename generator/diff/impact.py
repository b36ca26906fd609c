"""What a change means for GPUs: each pool's size and every team's share of it, before and after
(what is dangerous about a change is diff/risks.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
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
        return any(b != a for b, a in map(self.moved, SHARES))

    def moved(self, share: str) -> tuple[int, int]:
        """One of SHARES before and after (0 where the team is not in the pool)."""
        return getattr(self.before or NO_SHARE, share), getattr(self.after or NO_SHARE, share)


SHARES = ("guaranteed", "borrowable", "lendable")
"""What a team holds of a pool, as both capacity tables show it."""


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
    renamed_from: str = ""
    """The pool's name before, where the change renames it (`recognised_renames`)."""

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
    """Pools where any team's guaranteed, borrowable or lendable GPUs change (or the pool itself).
    A cluster whose file and teams are the very objects on both sides (a diff's two sides share
    what is byte-identical) cannot change and is not worked out."""
    clusters = sorted({*(before.clusters if before else ()), *(after.clusters if after else ())})
    touched = [c for c in clusters if not (before and after and _same_inputs(before, after, c))]
    old = {(p.cluster, p.pool): p for c in touched if before and c in before.clusters
           for p in pool_capacities(before, c)}
    new = {(p.cluster, p.pool): p for c in touched if after and c in after.clusters
           for p in pool_capacities(after, c)}
    renamed = recognised_renames(old, new, _nodes(before), _nodes(after))
    out = []
    for key in sorted((set(old) - {(c, p) for c, p in renamed.values()}) | set(new)):
        b, a = old.get(renamed.get(key, key)), new.get(key)
        old_shares = {t.team: t for t in b.teams} if b else {}
        new_shares = {t.team: t for t in a.teams} if a else {}
        rows = tuple(CapacityRow(key[0], key[1], team, old_shares.get(team), new_shares.get(team))
                     for team in sorted(old_shares.keys() | new_shares.keys()))
        if not any(r.changed for r in rows) and (b and a and (b.gpus, b.limit) == (a.gpus, a.limit)) \
                and key not in renamed:
            continue
        ref = a or b
        assert ref is not None
        out.append(PoolImpact(key[0], key[1], ref.product, b.gpus if b else 0, a.gpus if a else 0,
                              b.allocated if b else 0, a.allocated if a else 0, rows,
                              b.limit if b else 0, a.limit if a else 0, renamed[key][1] if key in renamed else ""))
    return out


Key = tuple[str, str]


Nodes = Callable[[Key], str]
"""(cluster, pool) -> the nodes the pool's flavor selects, as one comparable string."""


def _nodes(fleet: Fleet | None) -> Nodes:
    """Where a pool's GPUs are: its nodes' labels and taints, from its cluster's file or, for a MultiKueue
    manager, from the worker that has it."""
    def nodes(key: Key) -> str:
        if fleet is None:
            return ""
        for name in (key[0], *fleet.linked(key[0])):
            loaded = fleet.clusters.get(name)
            for pool in loaded.config.node_pools if loaded else ():
                if pool.name == key[1]:
                    return json.dumps(pool.model_dump(mode="json", include={"node_labels", "taints"}), sort_keys=True)
        return ""
    return nodes


def _shape(pool: PoolCapacity, nodes: str) -> tuple[object, ...]:
    """What a pool is apart from its name: its nodes and GPUs, and who holds what of them."""
    return (pool.cluster, nodes, pool.product, pool.gpus, pool.limit, pool.teams, pool.shared, pool.cohorts,
            pool.by_usage)


def recognised_renames(old: dict[Key, PoolCapacity], new: dict[Key, PoolCapacity], old_nodes: Nodes,
                       new_nodes: Nodes) -> dict[Key, Key]:
    """(cluster, pool) after -> (cluster, pool) before, for each pool that goes while one arrives in the same
    cluster on the same nodes, with the same GPUs, overcommit and teams' shares: a rename, where only one pool
    on each side has that shape (two alike are not guessed at)."""
    gone: dict[tuple[object, ...], list[Key]] = {}
    for key, pool in old.items():
        if key not in new:
            gone.setdefault(_shape(pool, old_nodes(key)), []).append(key)
    came: dict[tuple[object, ...], list[Key]] = {}
    for key, pool in new.items():
        if key not in old:
            came.setdefault(_shape(pool, new_nodes(key)), []).append(key)
    return {came[shape][0]: keys[0] for shape, keys in gone.items()
            if len(keys) == 1 and len(came.get(shape, ())) == 1}


def _same_inputs(before: Fleet, after: Fleet, cluster: str) -> bool:
    """Whether everything a cluster's pool capacities are worked out from is the same object on
    both sides: its file, the files of the MultiKueue clusters linked to it (a manager's pools are
    its workers'), and the teams with a quota in it."""
    linked = before.linked(cluster)
    if linked != after.linked(cluster):
        return False
    for name in (cluster, *linked):
        b, a = before.clusters.get(name), after.clusters.get(name)
        if b is None or a is None or b.source is not a.source:
            return False
    old, new = before.teams_in(cluster), after.teams_in(cluster)
    return len(old) == len(new) and all(x is y for x, y in zip(old, new, strict=True))
