"""Quota arithmetic: a team's GPUs in a pool and the CPU and memory that come with them.

Shared by the Kueue compiler, `fleetgen explain` and the diff's capacity table so the three
can never disagree about what a quota means.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from generator import quantity
from generator.config.cluster import ClusterConfig, CohortQuota, CpuLimit, CpuPool, NodePool
from generator.config.team import PoolQuota, TeamConfig
from generator.kinds.podspec import cpu_pod_requests as cpu_pod_requests  # re-exported: quota arithmetic
from generator.kinds.podspec import node_share as node_share


@dataclass(frozen=True)
class ResourceQuota:
    """Kueue quota of one resource in one flavor, as canonical quantity strings."""

    name: str
    nominal: str
    borrowing: str | None
    lending: str | None


def _scaled(pool: NodePool, gpus: int | None) -> tuple[str | None, str | None, str | None]:
    if gpus is None:
        return None, None, None
    cpu, memory = node_share(pool, gpus)
    return cpu, memory, quantity.canonical(gpus)


def pool_resources(pool: NodePool, quota: PoolQuota | CohortQuota) -> dict[str, ResourceQuota]:
    """cpu, memory and GPU quota for `quota` in `pool`, keyed by resource name."""
    nominal = _scaled(pool, quota.gpus)
    borrowing = _scaled(pool, quota.borrowing_limit)
    lending = _scaled(pool, quota.lending_limit)
    names = ("cpu", "memory", pool.gpu.resource)
    return {name: ResourceQuota(name, nominal[i] or "0", borrowing[i], lending[i]) for i, name in enumerate(names)}


def unallocated_resources(pool: NodePool, allocated: int) -> dict[str, ResourceQuota]:
    """cpu, memory and GPU quota of the pool's GPUs that no team holds (none when every GPU is)."""
    free = pool.gpus - allocated
    if free <= 0:
        return {}
    nominal = _scaled(pool, free)
    names = ("cpu", "memory", pool.gpu.resource)
    return {name: ResourceQuota(name, nominal[i] or "0", None, None) for i, name in enumerate(names)}


def cpu_pool_resources(pool: CpuPool, held: list[CpuLimit] | None = None) -> tuple[str, str]:
    """(cpu, memory) of the whole CPU pool less what teams hold of it (`held`), as canonical quantities."""
    held = held or []
    cpu = quantity.value_of(pool.cpu_per_node) * pool.nodes - sum((quantity.value_of(h.cpu) for h in held), Decimal(0))
    per_node, fmt = quantity.parse(pool.memory_per_node)
    memory = per_node * pool.nodes - sum((quantity.value_of(h.memory) for h in held), Decimal(0))
    return quantity.canonical(cpu, "DecimalSI"), quantity.canonical(memory, fmt)


def cpu_pool_held(cfg: ClusterConfig, team: TeamConfig) -> CpuLimit | None:
    """What the team holds of the CPU pool as its own quota: a team never preempted, whose queue has
    the CPU pool's flavor, holds its limit there (it may not borrow, and borrowed quota is what Kueue
    preempts); every other team holds none of it and borrows it from the root cohort."""
    pool = cfg.cpu_pool
    if pool is None or not team.never_preempted or not cfg.cpu_flavor_for(cfg.queue_pools(team.quotas[cfg.name])):
        return None
    return pool.limit_for(team.name)


def cpu_profile_fit(cfg: ClusterConfig, team: TeamConfig, pods: int, cpu: str, memory: str) -> tuple[bool, str]:
    """Whether `pods` CPU-only pods of `cpu` and `memory` each can all be admitted at once in the team's CPU pool
    flavor, and the sentence that says so: within what it holds of the pool (never preempted), within the
    cluster's limit for it (borrowed), or within the pool. Their nodeSelector pins them to the pool's nodes;
    a pod the flavor cannot take would be offered the team's GPU flavors and wait there."""
    pool = cfg.cpu_pool
    assert pool is not None
    where = f"cpuPool {pool.name} of {cfg.name}"
    if not cfg.cpu_flavor_for(cfg.queue_pools(team.quotas.get(cfg.name, {}))):
        return False, (f"team {team.name}'s queue in {cfg.name} has no {where} flavor (its queue is topology-aware "
                       "and the CPU pool is not), so CPU-only pods would run on its GPU nodes")
    per_cpu, (per_mem, fmt) = quantity.value_of(cpu), quantity.parse(memory)
    total_cpu = quantity.canonical(per_cpu * pods, "DecimalSI")
    total_mem = quantity.canonical(per_mem * pods, fmt)
    if per_cpu > quantity.value_of(pool.cpu_per_node) or per_mem > quantity.value_of(pool.memory_per_node):
        return False, (f"a pod of {cpu} CPUs and {memory} is larger than a node of {where} ({pool.cpu_per_node} "
                       f"CPUs and {pool.memory_per_node})")
    held = cpu_pool_held(cfg, team)
    limit = pool.limit_for(team.name)
    if team.never_preempted and held is None:
        return False, (f"team {team.name} is never preempted and holds none of {where} (the cluster sets no "
                       f"cpuPool limit for it, which it would hold), so Kueue admits no CPU-only pod there")
    if held is not None:
        room, how = held, "held for the team: never preempted"
    elif limit is not None:
        room, how = limit, "the team's limit, borrowed from the root cohort while others leave it idle"
    else:
        whole_cpu, whole_mem = cpu_pool_resources(pool)
        room, how = CpuLimit(cpu=whole_cpu, memory=whole_mem), "the whole pool, while others leave it idle"
    fits = per_cpu * pods <= quantity.value_of(room.cpu) and per_mem * pods <= quantity.value_of(room.memory)
    need = f"{pods} pods of {cpu} CPUs and {memory} ({total_cpu} CPUs and {total_mem} in all)"
    if not fits:
        return False, (f"{need}, but team {team.name} may hold at most {room.cpu} CPUs and {room.memory} of {where} "
                       f"({how}), so Kueue would never admit them all there")
    return True, f"{need} on {where}, within the {room.cpu} CPUs and {room.memory} it may hold there ({how})"
