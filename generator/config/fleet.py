"""Load `clusters/*.yaml` and `teams/*.yaml` from a fleet repository into typed config.

All files are read and every problem in every file is collected before anything is reported,
so one run of fleetgen shows a contributor all of their mistakes at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel, ValidationError

from generator import quantity, repofiles
from generator.config.cluster import ClusterConfig, NodePool
from generator.config.messages import findings_from
from generator.config.platform import Operators
from generator.config.team import TeamConfig
from generator.config.yamlsource import Source, load_source
from generator.errors import Finding, InputError, UsageError

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Loaded(Generic[M]):
    """A validated config model and the file it came from (for locating later findings)."""

    config: M
    source: Source

    def at(self, *path: object) -> tuple[str, int]:
        """(file, line) of a key path in the source file."""
        return self.source.path, self.source.line_of(tuple(path))


@dataclass(frozen=True)
class Fleet:
    """Every cluster and team of a fleet repository, keyed and sorted by name."""

    root: Path
    clusters: dict[str, Loaded[ClusterConfig]]
    teams: dict[str, Loaded[TeamConfig]] = field(default_factory=dict)

    def teams_in(self, cluster: str) -> list[Loaded[TeamConfig]]:
        """Teams with a quota in `cluster`, sorted by name."""
        return [t for t in self.teams.values() if cluster in t.config.quotas]

    def linked(self, cluster: str) -> list[str]:
        """Clusters whose files shape this one's output beside its own: a MultiKueue manager's
        workers (its pools are theirs) and a worker's managers (they name it), sorted."""
        loaded = self.clusters.get(cluster)
        if loaded is None:
            return []
        mk = loaded.config.multikueue
        out = set(mk.workers if mk else ()) | set(loaded.config.managers)
        return sorted(c for c in out if c in self.clusters and c != cluster)


def _files(folder: Path, root: Path, findings: list[Finding]) -> list[Path]:
    repofiles.inside(root, folder.relative_to(root).as_posix())  # the folder itself is no link
    if not folder.is_dir():
        return []
    for odd in sorted(folder.glob("*.yml")):
        findings.append(Finding(str(odd.relative_to(root)), None, "",
                                "fleetgen reads only files ending in .yaml", f"rename it to {odd.stem}.yaml"))
    # Links, FIFOs, devices and folders are listed too, so that loading refuses them by name
    # (never follows, never waits on them) instead of skipping them silently.
    return sorted(folder.glob("*.yaml"))


def _load(path: Path, root: Path, model: type[M], findings: list[Finding]) -> Loaded[M] | None:
    shown = path.relative_to(root).as_posix()
    try:
        source = load_source(root, shown)
    except InputError as exc:
        findings.extend(exc.findings)
        return None
    if not isinstance(source.data, dict):
        findings.append(Finding(shown, 1, "", "the file must be a mapping of keys to values",
                                "start with 'name: ...' (see docs/reference/config.md)"))
        return None
    try:
        config = model.model_validate(source.data, by_alias=True, by_name=False)  # camelCase only
    except ValidationError as exc:
        findings.extend(findings_from(exc, model, source))
        return None
    if config.name != path.stem:  # type: ignore[attr-defined]
        findings.append(Finding(shown, source.line_of(("name",)), "name",
                                f"name {config.name!r} does not match the file name {path.name!r}",  # type: ignore[attr-defined]
                                f"rename the file to {config.name}.yaml or set name: {path.stem}"))  # type: ignore[attr-defined]
        return None
    return Loaded(config, source)


LoadCache = dict[tuple[str, bytes], Any]
"""Files already loaded, by (path in the repository, content): two sides of a diff share them."""


def _cached_load(path: Path, root: Path, model: type[M], findings: list[Finding],
                 cache: LoadCache | None) -> Loaded[M] | None:
    if cache is None:
        return _load(path, root, model, findings)
    rel = path.relative_to(root).as_posix()
    try:
        key = (rel, repofiles.read_bytes(root, rel))
    except (OSError, repofiles.UnsafePath):
        return _load(path, root, model, findings)  # it reports the problem with its file
    if key not in cache:
        before = len(findings)
        cache[key] = _load(path, root, model, findings)
        if len(findings) != before:  # only clean loads are shared
            return cache.pop(key)
    return cast("Loaded[M] | None", cache[key])


def read_fleet(root: Path, cache: LoadCache | None = None) -> Fleet:
    """Read every file of the fleet under `root`, each checked alone; raise InputError listing every problem.

    The cross-file checks are the next stage (`generator.checks.load_fleet`); a diff's base, merged
    after them, is only read. `cache` shares files that are byte-identical with an earlier read.
    """
    clusters_dir, teams_dir = root / "clusters", root / "teams"
    if not clusters_dir.is_dir():
        raise UsageError(f"no clusters/ folder in {root}: run fleetgen in a fleet repository or pass --root DIR")
    findings: list[Finding] = []
    clusters = {p.stem: _cached_load(p, root, ClusterConfig, findings, cache)
                for p in _files(clusters_dir, root, findings)}
    teams = {p.stem: _cached_load(p, root, TeamConfig, findings, cache) for p in _files(teams_dir, root, findings)}
    if not clusters and not findings:
        raise UsageError(f"clusters/ in {root} has no .yaml files: add at least one cluster")
    loaded = {k: v for k, v in clusters.items() if v is not None}
    fleet = Fleet(root, with_worker_pools(loaded, findings), {k: v for k, v in teams.items() if v is not None})
    if findings:
        raise InputError(sorted(set(findings)))
    return fleet


def with_worker_pools(clusters: dict[str, Loaded[ClusterConfig]],
                      findings: list[Finding]) -> dict[str, Loaded[ClusterConfig]]:
    """Each MultiKueue manager with its workers' pools as its own: one flavor per pool name, holding
    the GPUs of every worker's pool of that name (so team quotas there are checked against them),
    with the largest CPU and memory per node among them (the manager must not refuse what a worker
    would admit), and no node labels or taints (the manager has no such nodes). Pools a worker shares
    by usage are left out: MultiKueue creates a job in the team's own queue on the worker."""
    out = dict(clusters)
    managers_of: dict[str, dict[str, tuple[tuple[str, ...] | None, Operators]]] = {}
    for name, manager in clusters.items():
        mk = manager.config.multikueue
        if mk is None:
            continue
        pools: dict[str, NodePool] = {}
        for i, worker in enumerate(mk.workers):
            integrations = manager.config.kueue.integrations
            managers_of.setdefault(worker, {})[name] = (tuple(integrations) if integrations is not None else None,
                                                        manager.config.operators)
            if worker not in clusters or clusters[worker].config.multikueue is not None:
                continue  # the checks name it
            shared = set(clusters[worker].config.shared_pools)
            # A pool shared by usage has its own queue, which a dispatched job (in the team's queue) never reaches.
            for pool in (p for p in clusters[worker].config.node_pools if p.name not in shared):
                seen = pools.get(pool.name)
                if seen is None:
                    pools[pool.name] = NodePool(name=pool.name, gpu=pool.gpu, nodes=pool.nodes,
                                                cpu_per_node=pool.cpu_per_node, memory_per_node=pool.memory_per_node)
                elif (seen.gpu.resource, seen.gpu.per_node) != (pool.gpu.resource, pool.gpu.per_node):
                    file, line = manager.at("multikueue", "workers", i)
                    findings.append(Finding(file, line, f"multikueue.workers[{i}]", f"pool {pool.name!r} of "
                                            f"{worker!r} has {pool.gpu.per_node} x {pool.gpu.resource} per node, "
                                            f"another worker's {seen.gpu.per_node} x {seen.gpu.resource}",
                                            "the manager counts pools of one name as one flavor: name them apart"))
                else:
                    pools[pool.name] = seen.model_copy(update={
                        "nodes": seen.nodes + pool.nodes,
                        "cpu_per_node": max(seen.cpu_per_node, pool.cpu_per_node, key=quantity.value_of),
                        "memory_per_node": max(seen.memory_per_node, pool.memory_per_node, key=quantity.value_of)})
        out[name] = Loaded(manager.config.model_copy(update={"node_pools": list(pools.values())}), manager.source)
    for name, managers in managers_of.items():
        if name in clusters:
            out[name] = Loaded(clusters[name].config.with_managers(managers), clusters[name].source)
    return out


def held_gpus(cfg: ClusterConfig, teams: list[Loaded[TeamConfig]], pool: str) -> int:
    """GPUs of a pool that quotas hold: the teams' (those of `teams` with quota there) and the cohorts' own."""
    return (sum(t.config.quotas[cfg.name][pool].gpus for t in teams if pool in t.config.quotas.get(cfg.name, {}))
            + sum(c.quotas[pool].gpus for c in cfg.cohorts if pool in c.quotas))


def fair_sharing(cfg: ClusterConfig, teams: list[Loaded[TeamConfig]]) -> bool:
    """Whether Kueue's fair sharing is on in the cluster: as its file says, else when any of its
    teams (those with quota there) or cohorts sets a weight."""
    if cfg.kueue.fair_sharing is not None:
        return cfg.kueue.fair_sharing
    return any(t.config.fair_sharing_weight is not None for t in teams) or \
        any(c.fair_sharing_weight is not None for c in cfg.cohorts)


def implicit_cohort_weight(teams: list[Loaded[TeamConfig]], cohort: str) -> float | None:
    """The weight of a cohort no cluster file declares, created because teams name it: its one team's
    weight (a queue alone in its cohort is ranked against nobody, kueue v0.19.2
    pkg/scheduler/fair_sharing_iterator.go:115-125, so the cohort competes in its place), else
    None (Kueue's default of 1)."""
    members = [t for t in teams if t.config.cohort == cohort]
    return members[0].config.fair_sharing_weight if len(members) == 1 else None


def fair_tree(cfg: ClusterConfig, teams: list[Loaded[TeamConfig]]) -> dict[str, tuple[str | None, float]]:
    """The cluster's fair-sharing tree: node -> (parent, weight as Kueue applies it, 1 when unset).
    Nodes are the root cohort (the cluster's name), every cohort, and each team as `team:<name>`."""
    nodes: dict[str, tuple[str | None, float]] = {cfg.name: (None, 1.0)}
    for c in cfg.cohorts:
        nodes[c.name] = (c.parent or cfg.name, 1.0 if c.fair_sharing_weight is None else c.fair_sharing_weight)
    for t in teams:
        cohort = t.config.cohort
        if cohort and cohort not in nodes:
            weight = implicit_cohort_weight(teams, cohort)
            nodes[cohort] = (cfg.name, 1.0 if weight is None else weight)
        weight = t.config.fair_sharing_weight
        nodes[f"team:{t.config.name}"] = (cohort or cfg.name, 1.0 if weight is None else weight)
    return nodes


def usage_split(fleet: Fleet, cluster: str, pool: str) -> list[tuple[str, float, float]]:
    """(team, usage weight, share), by team name, of the teams using a pool shared by usage: when they
    all keep it busy, Kueue admits by recent usage divided by weight, so over time each uses its share."""
    users = [t.config for t in fleet.teams_in(cluster) if pool in t.config.quotas[cluster]]
    weights = {t.name: t.usage_weight(cluster, pool) for t in users}
    total = sum(weights.values())
    return [(team, w, w / total if total else 0.0) for team, w in sorted(weights.items())]
