"""Compilers: pure functions from typed config to Kubernetes objects, one module per family."""

from __future__ import annotations

from collections.abc import Callable

from generator.compile.health import compile_health
from generator.compile.jobs import compile_templates
from generator.compile.kueue import compile_kueue
from generator.compile.manifest import Manifest
from generator.compile.monitoring import compile_monitoring
from generator.compile.platform import compile_platform
from generator.compile.tenancy import compile_tenancy
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Fleet, Loaded
from generator.config.team import TeamConfig

Compiler = Callable[[Loaded[ClusterConfig], list[Loaded[TeamConfig]]], list[Manifest]]

# One entry per output family; later families (monitoring, gitops, job templates) append here.
FAMILIES: list[Compiler] = [compile_kueue, compile_tenancy, compile_platform, compile_monitoring,
                            compile_health, compile_templates]


def compile_cluster(fleet: Fleet, name: str) -> list[Manifest]:
    """Every object of one cluster, in a stable order (sorted by path)."""
    cluster = fleet.clusters[name]
    teams = fleet.teams_in(name)
    out = [m for family in FAMILIES for m in family(cluster, teams)]
    return sorted(out, key=lambda m: m.path)


def compile_fleet(fleet: Fleet) -> dict[str, list[Manifest]]:
    """Objects of every cluster, keyed by cluster name in sorted order."""
    return {name: compile_cluster(fleet, name) for name in sorted(fleet.clusters)}
