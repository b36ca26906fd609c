"""The main job: load the fleet, compile every cluster, validate, then write or compare.

Nothing is written unless every step succeeded: findings of any check abort before the emitter
touches `rendered/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator import emit
from generator.compile import compile_cluster
from generator.compile.manifest import Manifest
from generator.config.fleet import Fleet, load_fleet
from generator.errors import InputError, UsageError
from generator.validate.pipeline import Options, Report, validate_compiled


@dataclass
class Build:
    """A compiled, validated fleet and the file tree it renders to."""

    fleet: Fleet
    compiled: dict[str, list[Manifest]]
    tree: emit.Tree
    report: Report
    only: list[str] | None


def build(root: Path, clusters: list[str] | None = None, options: Options | None = None) -> Build:
    """Load, compile and validate; raise InputError on config errors or object findings."""
    fleet = load_fleet(root)
    if clusters:
        unknown = sorted(set(clusters) - set(fleet.clusters))
        if unknown:
            raise UsageError(f"unknown cluster {', '.join(unknown)}; known: {', '.join(sorted(fleet.clusters))}")
    names = sorted(set(clusters)) if clusters else sorted(fleet.clusters)
    compiled = {name: compile_cluster(fleet, name) for name in names}
    report = validate_compiled(fleet, compiled, options or Options())
    if report.findings:
        raise InputError(report.findings)
    tree: emit.Tree = {}
    for name in names:
        tree.update(emit.cluster_tree(name, compiled[name]))
    return Build(fleet, compiled, tree, report, names if clusters else None)


def rendered_dir(root: Path) -> Path:
    """`<root>/rendered`."""
    return root / emit.RENDERED


def check(result: Build) -> emit.TreeDiff:
    """What a render would change in the committed tree."""
    current = emit.read_tree(rendered_dir(result.fleet.root), result.only)
    return emit.compare(current, result.tree)


def write(result: Build) -> emit.TreeDiff:
    """Write the tree (atomically) if anything differs; return what changed."""
    diff = check(result)
    if diff:
        emit.write_tree(result.fleet.root, result.tree, result.only)
    return diff
