"""Platform releases that move: read from the GitOps objects of either engine, so that an upgrade reads
the same on Argo CD (an Application's `targetRevision`) and on Flux (a HelmRelease's chart version, or the
tag of the OCIRepository it takes its chart from), whether a cluster file's pin or fleetgen's moved it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from generator import releases
from generator.compile.platform import WAVES
from generator.diff.objects import Change
from generator.versions import lock


@dataclass(frozen=True)
class Move:
    """One component of one cluster going from one release to another."""

    cluster: str
    component: str
    old: str
    new: str

    @property
    def downgrade(self) -> bool:
        return releases.numeric(self.old) and releases.numeric(self.new) and \
            releases.key(self.new) < releases.key(self.old)


def _dig(body: dict[str, Any] | None, *path: str) -> Any:
    found: Any = body
    for part in path:
        found = found.get(part) if isinstance(found, dict) else None
    return found


CHART_AND_VERSION: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Application": (("spec", "source", "chart"), ("spec", "source", "targetRevision")),
    "HelmRelease": (("spec", "chart", "spec", "chart"), ("spec", "chart", "spec", "version")),
    "OCIRepository": (("spec", "url"), ("spec", "ref", "tag")),
}
"""Per GitOps kind, where its chart's name (an OCI URL ends with it) and release are."""


def chart_release(kind: str, body: dict[str, Any] | None) -> tuple[str, str] | None:
    """(component, release) of a GitOps object that installs one of fleetgen's pinned charts."""
    where = CHART_AND_VERSION.get(kind)
    chart, version = (_dig(body, *where[0]), _dig(body, *where[1])) if where else (None, None)
    if not isinstance(chart, str) or not isinstance(version, str):
        return None
    component = {c.chart_name: c.name for c in lock().values() if c.chart}.get(chart.rpartition("/")[2])
    return (component, version) if component else None


def move(change: Change) -> Move | None:
    """The release move of a changed GitOps object that installs the same pinned chart on both sides (one
    that swaps the chart is a source change, not an upgrade)."""
    if change.action != "change" or change.before is None or change.after is None:
        return None
    kind = change.obj.key[2]
    old, new = chart_release(kind, change.before.body), chart_release(kind, change.after.body)
    version = ".".join(CHART_AND_VERSION[kind][1]) if kind in CHART_AND_VERSION else ""
    shown = any(f.path == version for f in change.fields)  # not left out by `diff --ignore`
    if shown and old and new and old[0] == new[0] and old[1] != new[1] and \
            _chart_name(kind, change.before.body) == _chart_name(kind, change.after.body):
        return Move(change.obj.cluster, old[0], old[1], new[1])
    return None


def _chart_name(kind: str, body: dict[str, Any] | None) -> Any:
    return _dig(body, *CHART_AND_VERSION[kind][0])


def moves(changes: Iterable[Change]) -> list[Move]:
    """Each (cluster, component) whose chart release changes, once, sorted."""
    found: dict[tuple[str, str], Move] = {}
    for change in changes:
        moved = move(change)
        if moved is not None:
            found.setdefault((moved.cluster, moved.component), moved)
    return [found[k] for k in sorted(found)]


def crossed(move: Move) -> list[releases.Release]:
    """The table's releases an upgrade arrives at or passes, oldest first (none for a downgrade)."""
    if move.downgrade or not (releases.numeric(move.old) and releases.numeric(move.new)):
        return []
    low, high = releases.key(move.old), releases.key(move.new)
    return [row for version, row in releases.table().get(move.component, {}).items()
            if low < releases.key(version) <= high]


def syncs_after(component: str, other: str) -> bool:
    """Whether the engines sync `other` after `component` (a later wave; Flux's dependsOn follows it)."""
    return WAVES.get(other, 0) > WAVES.get(component, 0)
