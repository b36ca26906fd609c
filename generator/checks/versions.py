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


def _field(name: str) -> tuple[str, ...]:
    return ("kueue", "version") if name == "kueue" else ("versions", name)


def _where(loaded: Loaded[ClusterConfig], name: str) -> tuple[str, int, str]:
    """The pin's line: the cluster file's own, else its `versions` (or `kueue`) block, else the file's top."""
    path = _field(name)
    if name != "kueue" and name not in loaded.config.versions:
        path = ("versions",) if loaded.config.versions else ()
    file, line = loaded.at(*path)
    return file, line, ".".join(_field(name))


def _choices(versions: list[str], name: str) -> str:
    return ", ".join(versions) if versions else f"none of fleetgen's releases of {name}"


def _cited(row: releases.Release | None) -> str:
    return "" if row is None or row.tested else " (cited only: this fleetgen does not build or test it)"


def _unknown(loaded: Loaded[ClusterConfig], running: dict[str, str]) -> Iterator[Finding]:
    for name, version in running.items():
        if name == releases.KUBERNETES or releases.release(name, version) is not None:
            continue
        file, line, field = _where(loaded, name)
        known = list(releases.table()[name])
        yield Finding(file, line, field, f"{name} {version} is not a release fleetgen knows: its table "
                      f"(generator/releases.yaml) has {', '.join(known)}",
                      f"use one that works with this cluster's other releases: "
                      f"{_choices(releases.working(name, running), name)}")


def _unmet(loaded: Loaded[ClusterConfig], running: dict[str, str]) -> Iterator[Finding]:
    for gap in releases.unmet(running):
        row = gap.release
        file, line, field = _where(loaded, row.component)
        source = f"{row.sources[0]}" if row.sources else "generator/releases.yaml"
        if gap.needs == releases.KUBERNETES:
            yield Finding(file, line, field, f"{row.label} needs Kubernetes {gap.minimum} or later ({source}), and "
                          f"the cluster runs {gap.runs}{_cited(row)}",
                          f"choose a release of {row.component} that runs on Kubernetes {gap.runs}: "
                          f"{_choices(releases.working(row.component, running), row.component)}")
            continue
        theirs = releases.working(gap.needs, running)
        ours = releases.working(row.component, running)
        yield Finding(file, line, field, f"{row.label} needs {gap.needs} {gap.minimum} or later ({source}), and the "
                      f"cluster runs {gap.needs} {gap.runs}{_cited(row)}",
                      f"set {'.'.join(_field(gap.needs))} to one of {_choices(theirs, gap.needs)}, or "
                      f"{'.'.join(_field(row.component))} to one of {_choices(ours, row.component)}")


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
