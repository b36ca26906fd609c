"""Run a diff: build both sides, match objects, measure capacity impact, find risks."""

from __future__ import annotations

from pathlib import Path

from generator.diff.impact import capacity_impact
from generator.diff.objects import changed_objects, compare
from generator.diff.report import DiffResult
from generator.diff.risks import risks
from generator.diff.scheduling import scheduling_risks
from generator.diff.sources import Side, compiled, git_sides, rendered_sides
from generator.errors import UsageError
from generator.processes import collector_paused


@collector_paused()
def run_diff(root: Path, base: str | None = None, from_dir: str | None = None, to_dir: str | None = None,
             ignore: list[str] | None = None, committed: bool = False) -> DiffResult:
    """Diff `base` (a git ref, default HEAD) against the work tree, or FROM against TO; with
    `committed`, the two committed rendered/ trees (only the files that differ are read)."""
    if bool(from_dir) != bool(to_dir):
        raise UsageError("--from and --to go together")
    if from_dir and (base or committed):
        raise UsageError("use either --base (with or without --rendered) or --from/--to")
    before: Side
    after: Side
    if from_dir and to_dir:
        for option, folder in (("--from", from_dir), ("--to", to_dir)):
            _fleet_folder(option, Path(folder))
        before, after = compiled(Path(from_dir), from_dir), compiled(Path(to_dir), to_dir)
    else:
        before, after = (rendered_sides if committed else git_sides)(root, base or "HEAD")
    changes = compare(*changed_objects(before.tree, after.tree), ignore)
    has_fleets = (before.fleet is not None or not before.tree) and after.fleet is not None
    capacity = capacity_impact(before.fleet, after.fleet) if has_fleets else []
    found = risks(changes, capacity, scheduling_risks(before.fleet, after.fleet) if has_fleets else [])
    return DiffResult(before.label, after.label, changes, capacity, found, has_fleets, [*before.notes, *after.notes])


def _fleet_folder(option: str, folder: Path) -> None:
    """A mistyped path is an error, not an empty fleet whose every object would be "destroyed"."""
    if not folder.is_dir():
        raise UsageError(f"{option} {folder}: no such folder")
    if option == "--to" and not (folder / "clusters").is_dir() and next(folder.rglob("*.yaml"), None) is None:
        # (an empty --from is a repository's first change: everything is added)
        raise UsageError(f"{option} {folder}: holds neither a fleet (clusters/, teams/) nor a rendered tree "
                         "(YAML files)")
