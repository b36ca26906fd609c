"""The unit every compiler returns: one Kubernetes object, where it goes, and what produced it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MANAGED_BY = {"app.kubernetes.io/managed-by": "fleetgen"}


@dataclass(frozen=True)
class Manifest:
    """A Kubernetes object as data, its folder under `rendered/<cluster>/`, and its source.

    `source` is (file, line) of the config entry that produced the object, so a schema or CEL
    finding on the object can point the user at the line to change.
    """

    folder: tuple[str, ...]
    body: dict[str, Any]
    source: tuple[str, int]

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str | None:
        return self.body["metadata"].get("namespace")

    @property
    def api_version(self) -> str:
        return str(self.body["apiVersion"])

    @property
    def filename(self) -> str:
        """`<kind>-<name>.yaml`, the kube-prometheus convention of one file per object."""
        return f"{self.kind.lower()}-{self.name}.yaml"

    @property
    def path(self) -> str:
        """Path relative to `rendered/<cluster>/`."""
        return "/".join(self.folder + (self.filename,))


def labels(cluster: str, team: str | None = None) -> dict[str, str]:
    """Labels on every object: who manages it and which cluster (and team) it belongs to."""
    out = dict(MANAGED_BY)
    out["fleetgen.io/cluster"] = cluster
    if team is not None:
        out["fleetgen.io/team"] = team
    return out
