"""Run a diff: build both sides, match objects, measure capacity impact, find risks."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from generator.config.fleet import Fleet
from generator.diff.fleetgen_move import fleetgen_lines
from generator.diff.impact import PoolImpact, capacity_impact
from generator.diff.objects import changed_objects, compare
from generator.diff.report import DiffResult
from generator.diff.risks import Risk, risks
from generator.diff.scheduling import scheduling_risks
from generator.diff.sources import Committed, Side, committed, committed_fleets, compiled, git_sides, rendered_sides
from generator.errors import UsageError
from generator.processes import collector_paused, helper, pool_context

FleetImpact = tuple[list[PoolImpact], list[Risk]]
"""The capacity table and the scheduling risks: what only the two fleets tell."""
Impact = tuple[FleetImpact, bool]
"""A `--rendered` diff's fleet impact, and whether the base's files loaded (else it is against none)."""


@collector_paused()
def run_diff(root: Path, base: str | None = None, from_dir: str | None = None, to_dir: str | None = None,
             ignore: list[str] | None = None, committed: bool = False) -> DiffResult:
    """Diff `base` (a git ref, default HEAD) against the work tree, or FROM against TO; with
    `committed`, the two committed rendered/ trees (only the files that differ are read)."""
    if bool(from_dir) != bool(to_dir):
        raise UsageError("--from and --to go together")
    if from_dir and (base or committed):
        raise UsageError("use either --base (with or without --rendered) or --from/--to")
    if committed:
        return _committed(root, base or "HEAD", ignore)
    before: Side
    after: Side
    if from_dir and to_dir:
        for option, folder in (("--from", from_dir), ("--to", to_dir)):
            _fleet_folder(option, Path(folder))
        before, after = compiled(Path(from_dir), from_dir), compiled(Path(to_dir), to_dir)
    else:
        before, after = git_sides(root, base or "HEAD")
    has_fleets = (before.fleet is not None or not before.tree) and after.fleet is not None
    return _result(before, after, ignore, lambda: fleet_impact(before.fleet, after.fleet) if has_fleets else None)


def fleet_impact(before: Fleet | None, after: Fleet | None) -> FleetImpact:
    """What the two fleets say of the change that the rendered objects cannot."""
    return capacity_impact(before, after), scheduling_risks(before, after)


def _result(before: Side, after: Side, ignore: list[str] | None,
            impact: Callable[[], FleetImpact | None]) -> DiffResult:
    """Compare the two sides, then take the fleets' part from `impact` (None: no capacity table)."""
    changes = compare(*changed_objects(before.tree, after.tree, (before.where, after.where)), ignore)
    found = impact()
    capacity, scheduling = found if found is not None else ([], [])
    new_clusters = _new_clusters({c.obj.cluster for c in changes}, before.tree, after.tree)
    moved = fleetgen_lines(before.pin, after.pin, before.by_pin and after.by_pin, changes, after.pin_error)
    return DiffResult(before.label, after.label, changes, capacity,
                      risks(changes, capacity, [*scheduling, *moved], new_clusters), found is not None,
                      [*before.notes, *after.notes])


def _new_clusters(changed: set[str], before: Mapping[str, bytes], after: Mapping[str, bytes]) -> frozenset[str]:
    """Clusters the change brings: its root `kustomization.yaml` is on the after side only. Both sides
    hold it when they hold all of the cluster's files, and neither when they hold only the files that
    differ (`--rendered`) and it did not change; it is never added to a cluster that existed. Job
    templates say nothing (no kustomization lists them), nor do the objects under `rendered/gitops/`
    that belong to no cluster (their cluster is `gitops`, a reserved name)."""
    return frozenset(c for c in changed if c != "gitops" and f"{c}/kustomization.yaml" in after
                     and f"{c}/kustomization.yaml" not in before)


def _committed(root: Path, ref: str, ignore: list[str] | None) -> DiffResult:
    """The two committed rendered/ trees, with the fleets loaded and their impact worked out in a
    second process meanwhile: the two halves take about as long (50 clusters x 200 teams, a
    one-team change, quiet 2 cores: 0.85 and 0.7 s) and need nothing from each other. An error
    in this process ends the helper at once (`helper`); one in the helper is raised from `impact()`."""
    where = committed(root, ref)
    if (os.cpu_count() or 1) < 2:
        return _committed_result(where, lambda: _committed_impact(where), ignore)
    with helper(_committed_impact, where, pool_context()) as impact:  # forked before any thread of ours starts
        return _committed_result(where, impact, ignore)


def _committed_impact(where: Committed) -> Impact:
    """The fleet impact, and whether the base's files loaded (else the impact is against none)."""
    base_fleet, head_fleet = committed_fleets(where)
    return fleet_impact(base_fleet, head_fleet), base_fleet is not None


def _committed_result(where: Committed, impact: Callable[[], Impact], ignore: list[str] | None) -> DiffResult:
    before, after = rendered_sides(where)

    def table() -> FleetImpact | None:  # no base fleet: a table only when everything is new
        found, base_loaded = impact()
        return found if base_loaded or not before.tree else None
    return _result(before, after, ignore, table)


def _fleet_folder(option: str, folder: Path) -> None:
    """A mistyped path is an error, not an empty fleet whose every object would be "destroyed"."""
    if not folder.is_dir():
        raise UsageError(f"{option} {folder}: no such folder")
    if option == "--to" and not (folder / "clusters").is_dir() and next(folder.rglob("*.yaml"), None) is None:
        # (an empty --from is a repository's first change: everything is added)
        raise UsageError(f"{option} {folder}: holds neither a fleet (clusters/, teams/) nor a rendered tree "
                         "(YAML files)")
