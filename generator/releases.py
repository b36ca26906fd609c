"""The releases that go together: `generator/releases.yaml`, read once.

A cluster runs one release of each component (its pins: the cluster file's, else the fleet default in
`generator/versions.yaml`). A release needs the oldest release of each other component it was built
against; `unmet` says which of a cluster's pins fall short, and `working` which releases would do.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

import yaml

KUBERNETES = "kubernetes"
"""The requirement on the cluster's Kubernetes minor (`kubernetesVersion`), beside the components'."""


@dataclass(frozen=True)
class Release:
    """One release of one component and what it needs."""

    component: str
    version: str
    requires: tuple[tuple[str, str], ...] = ()
    """(component or `kubernetes`, the oldest release of it this release works with)."""
    sources: tuple[str, ...] = ()
    """Where each requirement is read: a file (and lines) of the release at its tag."""
    tested: bool = False
    """Built from its Go module and run on the fleet twin here; otherwise cited only."""
    upgrade: tuple[str, ...] = ()
    """What moving to this release changes beyond the chart's version."""

    @property
    def label(self) -> str:
        return f"{self.component} {self.version}"


def key(version: str) -> tuple[int, ...]:
    """`v0.19.2`, `0.19.2` -> (0, 19, 2): releases compare by number, with or without the `v`."""
    return tuple(int(part) for part in version.removeprefix("v").split("."))


@functools.lru_cache(maxsize=1)
def table() -> dict[str, dict[str, Release]]:
    """Every known release, by component and version (oldest first)."""
    data = yaml.safe_load(resources.files("generator").joinpath("releases.yaml").read_text(encoding="utf-8"))
    return {component: {str(version): Release(component, str(version),
                                              tuple((k, str(v)) for k, v in (row.get("requires") or {}).items()),
                                              tuple(row.get("sources") or ()), bool(row.get("tested", False)),
                                              tuple(row.get("upgrade") or ()))
                        for version, row in sorted(rows.items(), key=lambda item: key(str(item[0])))}
            for component, rows in data.items()}


def release(component: str, version: str) -> Release | None:
    """The row of `version` (with or without the `v`; `0.19.02` is not `0.19.2`: the chart's tag is the
    string), or None for a release the table does not know."""
    rows = table().get(component, {})
    return next((row for v, row in rows.items() if v.removeprefix("v") == version.removeprefix("v")), None)


def numeric(version: str) -> bool:
    """Whether `version` is a release number `key` can order (a rendered file may hold anything, `²` too,
    which str.isdigit takes and int refuses)."""
    return re.fullmatch(r"v?[0-9]{1,9}(\.[0-9]{1,9})*", version) is not None


@dataclass(frozen=True)
class Unmet:
    """A release of a cluster that needs a newer release of another component (or Kubernetes)."""

    release: Release
    needs: str
    minimum: str
    runs: str


def unmet(pins: Mapping[str, str]) -> list[Unmet]:
    """What the releases in `pins` (component -> version, `kubernetes` -> minor) need that the other pins
    do not give; only components in `pins` are judged (an operator that is off needs nothing)."""
    out = []
    for component, version in sorted(pins.items()):
        row = release(component, version) if component != KUBERNETES else None
        if row is None:
            continue
        for needs, minimum in row.requires:
            runs = pins.get(needs)
            if runs is not None and numeric(runs) and key(runs) < key(minimum):
                out.append(Unmet(row, needs, minimum, runs))
    return out


def working(component: str, pins: Mapping[str, str]) -> list[str]:
    """The known releases of `component` that would work with the cluster's other pins: each needs no more
    than they give, and needs of theirs it meets."""
    others = {c: v for c, v in pins.items() if c != component}
    return [version for version in table().get(component, {})
            if not [u for u in unmet({**others, component: version})
                    if u.release.component == component or u.needs == component]]
