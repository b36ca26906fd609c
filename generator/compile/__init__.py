"""Compilers: pure functions from typed config to Kubernetes objects, one module per family."""

from __future__ import annotations

from collections.abc import Callable

from generator.compile.admission import compile_admission
from generator.compile.deadlines import compile_deadlines
from generator.compile.health import compile_health
from generator.compile.jobs import compile_templates
from generator.compile.kueue import compile_kueue
from generator.compile.manifest import Manifest
from generator.compile.monitoring import compile_monitoring
from generator.compile.multikueue import compile_multikueue
from generator.compile.platform import compile_platform
from generator.compile.published import compile_published
from generator.compile.queue_routing import compile_queue_routing
from generator.compile.tenancy import compile_tenancy
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Fleet, Loaded
from generator.config.team import TeamConfig

Compiler = Callable[[Loaded[ClusterConfig], list[Loaded[TeamConfig]]], list[Manifest]]

# One entry per output family; later families (monitoring, gitops, job templates) append here.
FAMILIES: list[Compiler] = [compile_kueue, compile_multikueue, compile_tenancy, compile_admission, compile_deadlines,
                            compile_queue_routing, compile_platform, compile_monitoring, compile_health,
                            compile_templates, compile_published]


def compile_cluster(fleet: Fleet, name: str) -> list[Manifest]:
    """Every object of one cluster, in a stable order (sorted by path)."""
    cluster = fleet.clusters[name]
    teams = fleet.teams_in(name)
    out = [m for family in FAMILIES for m in family(cluster, teams)]
    return sorted(out, key=lambda m: m.path)


# Fields that name a namespace the object puts things into: (kind or "*", key path).
NAMESPACE_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("*", ("metadata", "namespace")),
    ("Namespace", ("metadata", "name")),
    ("Application", ("spec", "destination", "namespace")),  # Argo CD: where the chart's objects go
    ("HelmRelease", ("spec", "targetNamespace")),  # Flux: likewise
    ("HelmRelease", ("spec", "storageNamespace")),
)


def namespaces_of(body: dict[str, object]) -> list[str]:
    """Namespaces an object lives in or installs into."""
    out = []
    for kind, path in NAMESPACE_FIELDS:
        if kind not in ("*", body.get("kind")):
            continue
        value: object = body
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and value not in out:
            out.append(value)
    return out


def platform_namespaces(cluster: Loaded[ClusterConfig]) -> dict[str, Manifest]:
    """Every namespace the platform renders into in `cluster` (no team at all), with the first
    object (by path) that uses it: derived from the compilers, so a new component is covered."""
    out: dict[str, Manifest] = {}
    for m in sorted((m for family in FAMILIES for m in family(cluster, [])), key=lambda m: m.path):
        for ns in namespaces_of(m.body):
            out.setdefault(ns, m)
    return out
