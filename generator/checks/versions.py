"""Releases that go together: every platform release a cluster runs is one fleetgen's table knows
(`generator/releases.yaml`), and each gets the releases of the others, and the Kubernetes minor, it
needs. A finding points at the pin that falls short and names the releases that would work."""

from __future__ import annotations

from collections.abc import Iterator

from generator import releases
from generator.config.cluster import ClusterConfig
from generator.config.fleet import Fleet, Loaded
from generator.errors import Finding
from generator.kinds import OPERATORS


def installed(cfg: ClusterConfig) -> list[str]:
    """The components of the table the cluster runs: Kueue and JobSet, and each operator it turns on."""
    return ["kueue", "jobset", *(op.release for op in OPERATORS if op.runs_in(cfg))]


def pins(cfg: ClusterConfig) -> dict[str, str]:
    """Component -> the release the cluster runs, and `kubernetes` -> its minor."""
    return {releases.KUBERNETES: cfg.kubernetes_version, **{name: cfg.pin(name) for name in installed(cfg)}}


def _field(name: str) -> str:
    return "kueue.version" if name == "kueue" else f"versions.{name}"


def _set(cfg: ClusterConfig, name: str) -> bool:
    """Whether the cluster file itself pins `name` (else it runs the fleet default)."""
    if name == "kueue":
        return "kueue" in cfg.model_fields_set and "version" in cfg.kueue.model_fields_set
    return name in cfg.versions


def _where(loaded: Loaded[ClusterConfig], *names: str) -> tuple[str, int, str]:
    """The line of the first of `names` the file pins, else of its `versions` (or `kueue`) block, else the
    file's `name`; and the field that would pin the first."""
    cfg = loaded.config
    for name in names:
        if _set(cfg, name):
            file, line = loaded.at(*_field(name).split("."))
            return file, line, _field(name)
    block = "versions" if cfg.versions else "kueue" if "kueue" in cfg.model_fields_set else "name"
    file, line = loaded.at(block)
    return file, line, _field(names[0])


def _cited(row: releases.Release | None) -> str:
    return "" if row is None or row.tested else " (cited only: this fleetgen does not build or test it)"


def _no_older(versions: list[str], than: str) -> list[str]:
    """What to suggest instead of a release: none older (a downgrade is its own risk)."""
    return [v for v in versions if not releases.numeric(than) or releases.key(v) >= releases.key(than)]


def _one_of(versions: list[str]) -> str:
    return versions[0] if len(versions) == 1 else f"one of {', '.join(versions)}"


def _unknown(loaded: Loaded[ClusterConfig], running: dict[str, str]) -> Iterator[Finding]:
    for name, version in running.items():
        if name == releases.KUBERNETES or releases.release(name, version) is not None:
            continue
        file, line, field = _where(loaded, name)
        known = list(releases.table()[name])
        fits = releases.working(name, running)
        yield Finding(file, line, field, f"{name} {version} is not a release fleetgen knows: its table "
                      f"(generator/releases.yaml) has {', '.join(known)}",
                      f"use one that works with this cluster's other releases: {', '.join(fits)}" if fits else
                      "use one of them, then change what the next error names (none works with this cluster's "
                      "other releases as they are)")


def _unmet(loaded: Loaded[ClusterConfig], running: dict[str, str]) -> Iterator[Finding]:
    for gap in releases.unmet(running):
        row = gap.release
        source = f"{row.sources[0]}" if row.sources else "generator/releases.yaml"
        ours = _no_older(releases.working(row.component, running), row.version)
        if gap.needs == releases.KUBERNETES:
            file, line, field = _where(loaded, row.component)
            also = f", or set {_field(row.component)} to {_one_of(ours)}" if ours else ""
            yield Finding(file, line, field, f"{row.label} needs Kubernetes {gap.minimum} or later ({source}), and "
                          f"the cluster runs {gap.runs}{_cited(row)}",
                          f"upgrade the cluster to Kubernetes {gap.minimum} or later and set kubernetesVersion to "
                          f"match{also}")
            continue
        file, line, field = _where(loaded, gap.needs, row.component)
        choices = [f"set {_field(gap.needs)} to {_one_of(theirs)}"
                   for theirs in [releases.working(gap.needs, running)] if theirs]
        choices += [f"set {_field(row.component)} to {_one_of(ours)}"] if ours else []
        yield Finding(file, line, field, f"{row.label} needs {gap.needs} {gap.minimum} or later ({source}), and the "
                      f"cluster runs {gap.needs} {gap.runs}{_cited(row)}",
                      ", or ".join(choices) if choices else
                      f"no release of fleetgen's table of {gap.needs} goes with the cluster's others: change "
                      f"{_field(row.component)} and {_field(gap.needs)} together")


def _stray(loaded: Loaded[ClusterConfig]) -> Iterator[Finding]:
    """A pin of an operator the cluster does not run pins nothing: say so rather than ignore it."""
    running = installed(loaded.config)
    for name in sorted(set(loaded.config.versions) - set(running)):
        file, line = loaded.at("versions", name)
        operator = next(op for op in OPERATORS if op.release == name)
        yield Finding(file, line, f"versions.{name}", f"the cluster does not run {operator.title} "
                      f"(operators.{operator.key} is off), so this pin would pin nothing",
                      f"turn operators.{operator.key} on, or remove versions.{name}")


def release_pins(fleet: Fleet) -> Iterator[Finding]:
    """Every cluster's releases are known, and meet each other's needs."""
    for name in sorted(fleet.clusters):
        loaded = fleet.clusters[name]
        running = pins(loaded.config)
        yield from _unknown(loaded, running)
        yield from _unmet(loaded, running)
        yield from _stray(loaded)
